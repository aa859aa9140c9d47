"""``aifabric goodput SCENARIO``: how much training time a job loses to failures, and what
dual-ToR, backup hosts and checkpoint intervals buy back."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from aifabric import api
from aifabric.cli._common import MAX_MEMORY, console, styled
from aifabric.errors import Problem, SpecError

__all__ = ["goodput_cmd"]


def _horizon(text: str | None) -> float | None:
    if text is None:
        return None
    from aifabric.reliability.spec import MAX_S
    from aifabric.spec.units import parse_duration

    v = parse_duration(text, "--horizon")  # the grammar: docs/spec.md, "Units"
    if not 0 < v <= MAX_S:
        raise SpecError(Problem("--horizon", f"got {text!r}; allowed: a duration > 0 like "
                                "30d, 54d, 12h (at most 100 years)"))
    return v


def _fmt_h(x: float) -> str:
    return f"{x:,.2f}"


def _render(s: dict, files: list[str] | None, out: Path | None) -> None:
    j = s["job"]
    console.print(styled((s["scenario"], "bold"), f" — job {j['name']} ({j['gpus']:,} GPUs, "
                         f"{j['hosts']:,} hosts, {j['segments']} segment(s)) on {s['fabric']} "
                         f"({s['family']}); {s['horizon_days']:g} days x {s['trials']:,} "
                         f"trials, seed {s['seed']}"))
    rc = s.get("rates")
    if rc:
        left = ", ".join(rc["classes_not_given"]) or "none"
        how = ("published defaults" if rc["choice"] == "defaults" else "no failures")
        why = "set in goodput.rates" if rc["set_in_scenario"] else \
            "goodput.rates not set: defaults; 'rates: none' counts only goodput.failures"
        console.print(f"rates: {rc['choice']} ({why}): {how} for the classes not in "
                      f"goodput.failures: {left}")
    e = s["ettr"]
    console.print(f"effective training time ratio: mean {e['mean']:.4f}  p5 {e['p5']:.4f}  "
                  f"p50 {e['p50']:.4f}  p95 {e['p95']:.4f}  (min {e['min']:.4f})")
    it = s["interruptions"]
    mtbf = f"{it['mtbf_hours']:,.1f} h" if it["mtbf_hours"] else "-"
    bad = " without the bad hosts" if s.get("bad_hosts") else ""
    console.print(f"interruptions: {it['per_trial_mean']:,.1f} per run, "
                  f"{it['per_day_mean']:.3f} per day (expected {it['expected_per_day']:.3f}"
                  f"{bad}; job MTBF {mtbf}{bad})")
    t = Table(title="failure classes (rate per instance; the routing model decides which "
              "instances interrupt or only slow the job)", title_justify="left")
    shapes = any("shape" in c for c in s["classes"])
    for col in ("class", "%/month", "instances", "interrupt", "slow", "slowdown",
                "interruptions/day", *(["Weibull shape"] if shapes else []),
                "source (see goodput.json)"):
        t.add_column(col, justify="left" if col[:5] in ("class", "sourc") else "right")
    for c in s["classes"]:
        t.add_row(c["class"], f"{100 * c['rate_per_month']:.4g}", f"{c['instances']:,}",
                  f"{c['interrupting']:,}", f"{c['degrading']:,}",
                  f"{c['slowdown']:.3f}" if c["degrading"] else "-",
                  f"{c['interruptions_per_day']:.4f}",
                  *([f"{c['shape']:g}"] if shapes else []),
                  c["source"].split(":")[0].split(" (")[0])
    console.print(t)
    t = Table(title="time lost per run (mean of trials)", title_justify="left")
    for col in ("cause", "hours", "% of horizon"):
        t.add_column(col, justify="left" if col == "cause" else "right")
    for k, h in s["time_lost_hours"].items():
        t.add_row(k, _fmt_h(h), f"{100 * s['time_lost_fraction'][k]:.3f}")
    console.print(t)
    bh = s.get("bad_hosts")
    if bh:
        after = bh["removed_after"]
        policy = "never removed" if after == "never" else f"removed at failure {after}"
        console.print(f"bad hosts: {bh['in_job_mean']:.2f} in the job on average (in "
                      f"{100 * bh['trials_with_any']:.1f}% of runs), "
                      f"{bh['rate_per_month']:g} failures a month each, {policy}: "
                      f"{bh['failures_per_run']:.2f} failures and {bh['removed_per_run']:.2f} "
                      f"removals per run ({bh['per_day']:.3f} per day), "
                      f"{bh['hours_lost_per_run']:.2f} h lost")
    if s.get("scheduler_wait_s"):
        console.print(f"scheduler: {s['scheduler_wait_s'] / 60:.3g} min in the queue before "
                      "every restart (cause 'scheduler' above)")
    b = s["backup_hosts"]
    console.print(f"backup hosts: {b['per_pool']} per {b['scope']} ({b['pools']} pool(s) of the "
                  f"job); used {b['used_per_trial']:.2f} per run; none free "
                  f"{b['exhausted_per_trial']:.3f} per run (in {100 * b['trials_exhausted']:.1f}"
                  "% of runs)")
    ck = ", ".join(f"{c['name']} ({c['store']}) every {c['every_s'] / 60:.3g} min, save "
                   f"{c['save_s']:.3g} s, upload {c['upload_s']:.3g} s, restore "
                   f"{c['restore_s']:.3g} s" for c in s["checkpoint"])
    console.print(f"checkpoints: {ck}")
    sw = s["sweep"]
    if sw:
        young = (f"; Young sqrt(2 delta M) {sw['young_interval_s'] / 60:.3g} min"
                 if sw["young_interval_s"] else "")
        console.print(f"sweep of {sw['level']}: optimum {sw['optimum_interval_s'] / 60:.3g} min "
                      f"(best point {sw['best_point']['interval_s'] / 60:.3g} min: ETTR "
                      f"{sw['best_point']['ettr_mean']:.4f}){young}")
    cl = s.get("cluster")
    if cl:
        console.print(f"cluster: ETTR {cl['ettr_weighted_by_gpus']:.4f} weighted by GPUs "
                      f"({len(cl['jobs'])} jobs, {cl['gpus']:,} GPUs; unweighted mean of the "
                      f"jobs {cl['ettr_mean_of_jobs']:.4f}); {cl['gpu_hours_lost_per_day']:,.1f} "
                      "GPU-hours lost per day")
        t = Table(title="jobs at once (each its own failures; MTBF from the rates)",
                  title_justify="left")
        for col in ("job", "GPUs", "ETTR", "p5", "interruptions/day", "MTBF h"):
            t.add_column(col, justify="left" if col == "job" else "right")
        for j in cl["jobs"]:
            t.add_row(j["job"], f"{j['gpus']:,}", f"{j['ettr_mean']:.4f}",
                      f"{j['ettr_p5']:.4f}", f"{j['interruptions_per_day']:.3f}",
                      f"{j['mtbf_hours']:,.1f}" if j["mtbf_hours"] else "-")
        console.print(t)
    for note in s.get("notes", []):
        console.print(styled(("note: ", "bold"), note))
    if files and out is not None:
        console.print(f"wrote {out}/: {', '.join(files)}")


def goodput_cmd(
    scenario: Path = typer.Argument(..., help="scenario with a goodput: section (YAML)",
                                    show_default=False),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="DIR", help="write tables (CSV), "
                                    "goodput.json and plots into this folder"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    trials: int | None = typer.Option(None, "--trials", metavar="N",
                                      help="override goodput.trials"),
    seed: int | None = typer.Option(None, "--seed", metavar="N", help="override goodput.seed"),
    horizon: str | None = typer.Option(None, "--horizon", metavar="TIME",
                                       help="override goodput.horizon "
                                       "(30d, 54d, 12h)"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """How much training time a job loses to failures: effective training time ratio,
    interruptions per day by cause, time lost by cause, backup hosts, and a sweep of
    checkpoint intervals with its optimum.

    Failures arrive at the scenario's rates (per component class); the routing model
    decides which ones cut the job off and which only slow it (the flow model says how
    much), backup hosts replace failed servers, and the work since the last usable
    checkpoint is lost."""
    del max_memory
    if trials is not None and not 1 <= trials <= 1_000_000:
        raise SpecError(Problem("--trials", f"got {trials}; allowed: 1 to 1,000,000"))
    if seed is not None and not 0 <= seed < 1 << 63:
        raise SpecError(Problem("--seed", f"got {seed}; allowed: 0 to 2**63 - 1"))
    h = _horizon(horizon)
    from aifabric.reliability.report import MARKER, write_goodput

    if out is not None:  # a bad --out fails before the run, not after
        from aifabric.outputs import check_target

        check_target(out, option="--out", folder=True, **MARKER)
    sc = api.load_scenario(scenario, kind="goodput")
    from aifabric.reliability.spec import horizon_problem

    if h is not None and (why := horizon_problem(sc.goodput, h)):  # before the models run
        raise SpecError(Problem("--horizon", why))
    res = api.goodput(sc, trials=trials, seed=seed, horizon=h)
    files = write_goodput(res.raw, out) if out is not None else None
    if as_json:
        typer.echo(json.dumps(res.summary, indent=2))
        return
    _render(res.raw.summary, files, out)
