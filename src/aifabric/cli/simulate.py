"""``aifabric simulate SCENARIO``: how long the scenario's collectives and training
iterations take on its fabric, which links slowed them, and a report with ``--out``."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from aifabric.cli._common import build, console, err_console
from aifabric.errors import SpecError
from aifabric.report.markdown import fmt_ms, fmt_num
from aifabric.scenario import load_scenario
from aifabric.sim.results import SimResult
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario

__all__ = ["load_and_run", "print_result", "simulate_cmd"]


@contextmanager
def _progress(total: int, label: str):
    """A progress bar over stages on stderr, for runs big enough to take a while."""
    if total < 200 or not err_console.is_terminal:
        yield None
        return
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                  transient=True) as prog:
        task = prog.add_task(label, total=total)
        yield lambda k: prog.advance(task, k)


def load_and_run(path: Path, sim: str | None = None) -> SimResult:
    """Load a scenario file, build its fabric, simulate it (problems name the file)."""
    scn = load_scenario(path, SimScenario)
    if sim is not None:
        scn = scn.model_copy(update={"sim": sim})
    fabric = build(scn.spec, scn.spec_file or path)
    try:
        wl = compile_workload(scn, fabric)
        with _progress(wl.dag.n_stages, f"simulating {scn.name}") as prog:
            return simulate(scn, fabric, progress=prog, workload=wl)
    except SpecError as err:
        raise err.with_file(str(path)) from None


def _ms(ns: float) -> str:
    return fmt_ms(ns, unit="")


def print_result(r: SimResult) -> None:
    """The headline tables of one result."""
    s = r.summary
    rt = s.get("routing", {})
    console.print(f"[bold]{r.scenario}[/bold] on {r.fabric} — sim {r.sim}, routing "
                  f"{rt.get('policy')} ({rt.get('qps_per_connection')} QP/conn, "
                  f"port by {rt.get('nic_port_choice')}); makespan {_ms(r.makespan_ns)} ms")
    if not s.get("finished", True):
        console.print(f"[bold red]unfinished:[/bold red] the run stopped at "
                      f"{_ms(r.makespan_ns)} ms with {s['transfers_undelivered']:,} of "
                      f"{s['engine']['transfers']:,} transfers undelivered")
    if s["collectives"]:
        t = Table(title="collectives (nccl-tests conventions)", title_justify="left")
        for col in ("collective", "op", "algorithm", "GPUs", "size MiB", "time ms",
                    "algbw GB/s", "busbw GB/s", "busbw Gb/s"):
            t.add_column(col, justify="left" if col in ("collective", "op", "algorithm")
                         else "right")
        for c in s["collectives"][:20]:
            t.add_row(str(c["collective"]), c["op"], c["algorithm"], f"{c['gpus']:,}",
                      f"{c['size_bytes'] / 2**20:,.1f}", _ms(c["time_ns"]),
                      fmt_num(c["algbw_GBps"], ".2f"), fmt_num(c["busbw_GBps"], ".2f"),
                      fmt_num(c["busbw_gbps"], ".1f"))
        console.print(t)
    if s["jobs"]:
        t = Table(title="jobs (per iteration)", title_justify="left")
        for col in ("job", "GPUs", "segments", "iteration ms", "compute ms",
                    "exposed comm ms", "cross-segment GiB"):
            t.add_column(col, justify="left" if col == "job" else "right")
        for j in s["jobs"]:
            t.add_row(j["job"], f"{j['gpus']:,}", str(j["segments"]), _ms(j["iteration_ns"]),
                      _ms(j["compute_ns"]), _ms(j["exposed_comm_ns"]),
                      f"{j['cross_segment_bytes'] / 2**30:,.2f}")
        console.print(t)
    t = Table(title="link utilization per tier (links that carried traffic)",
              title_justify="left")
    for col in ("tier", "links", "mean", "p99", "max peak"):
        t.add_column(col, justify="left" if col == "tier" else "right")
    for name, v in s["tiers"].items():
        t.add_row(name, f"{v['links']:,}", f"{v['mean_util']:.2f}", f"{v['p99_mean_util']:.2f}",
                  f"{v['max_peak_util']:.2f}")
    console.print(t)
    if s["slowest_transfers"]:
        t = Table(title="slowest transfers and the link that held them back",
                  title_justify="left")
        for col in ("src", "dst", "min Gb/s", "bottleneck", "tier"):
            t.add_column(col, justify="right" if col == "min Gb/s" else "left")
        for x in s["slowest_transfers"][:5]:
            t.add_row(x["src"], x["dst"], fmt_num(x["min_rate_gbps"], ".1f"),
                      x["bottleneck"] or "-", x["tier"] or "-")
        console.print(t)
    tp = s["two_port"]
    if tp.get("down", {}).get("nics"):
        d, u = tp["down"], tp["up"]
        console.print(f"two-port imbalance: send max {u['max_ratio'] or 0:.2f}x, receive "
                      f"max {d['max_ratio'] or 0:.2f}x, {d['one_port_idle']} NICs received on "
                      "one port only")
    e = s["engine"]
    console.print(f"engine: {e['transfers']:,} transfers in {e['stages']:,} stages, "
                  f"{e['events']:,} events, {e['rate_solves']:,} max-min solves, "
                  f"{e['repetitions_reused']:,} repeated steps reused")
    if "packet" in s:
        pk = s["packet"]
        console.print(f"packet: {pk['drops']:,} drops, {pk['retx_bytes']:,} bytes "
                      f"retransmitted, {pk['ecn_marks']:,} ECN marks, {pk['cnps']:,} CNPs, "
                      f"{pk['pfc_frames']:,} PFC frames, {pk['pause_ns'] / 1e3:.1f} us paused")
        for a in pk["alarms"]:
            console.print(f"[bold red]alarm[/bold red] {a}")


def _jsonable(x: Any) -> Any:
    """Plain JSON: numpy scalars as numbers, NaN and infinities (an unfinished
    collective's time, a rate never measured) as null."""
    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: clean(w) for k, w in v.items()}
        if isinstance(v, list | tuple):
            return [clean(w) for w in v]
        if isinstance(v, float) and not np.isfinite(v):
            return None
        return v
    return clean(json.loads(json.dumps(
        x, default=lambda v: v.item() if hasattr(v, "item") else str(v))))


def simulate_cmd(
    scenario: Path = typer.Argument(..., help="simulation scenario (YAML)"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    out: Path | None = typer.Option(None, "--out", "-o", help="write tables, plots and a "
                                    "Markdown report into this folder"),
    fmt: str = typer.Option("csv", "--format", help="table format with --out: csv or parquet"),
    sim: str | None = typer.Option(None, "--sim", help="override the scenario's simulator: "
                                   "flow, analytic or packet"),
) -> None:
    """Simulate a scenario: completion time, algbw and busbw of every collective,
    iteration and exposed communication time of every job, link utilization, the
    slowest flows and the links that slowed them."""
    from aifabric.errors import Problem

    if sim is not None and sim not in ("flow", "analytic", "packet"):
        raise SpecError(Problem("--sim", f"unknown simulator {sim!r}; allowed: flow, "
                                "analytic, packet"))
    if fmt not in ("csv", "parquet"):
        raise SpecError(Problem("--format", f"unknown format {fmt!r}; allowed: csv, parquet"))
    r = load_and_run(scenario, sim)
    if out is not None:
        from aifabric.report import write_report

        report = write_report([r], out, fmt=fmt)
    if as_json:
        typer.echo(json.dumps(_jsonable(r.summary), indent=2))
    else:
        print_result(r)
    if out is not None and not as_json:
        console.print(f"wrote {report} (+ tables and plots in {out})")
