"""``aifabric simulate SCENARIO``: how long the scenario's collectives and training
iterations take on its fabric, which links slowed them, and a report with ``--out``."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from aifabric import api
from aifabric.api import Result
from aifabric.cli._common import MAX_MEMORY, console, err_console, styled
from aifabric.errors import SpecError
from aifabric.report.markdown import fmt_ms, fmt_num, packet_counts
from aifabric.sim.limits import DEFAULT_MAX_EVENTS, events_text
from aifabric.sim.results import SimResult

__all__ = ["exit_on_attention", "load_and_run", "print_result", "simulate_cmd"]


@contextmanager
def _progress(total: int, label: str):
    """A progress bar over stages on stderr, for runs big enough to take a while."""
    if total < 200 or not err_console.is_terminal:
        yield None
        return
    with Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                  transient=True) as prog:
        task = prog.add_task(label, total=total)
        yield lambda k: prog.advance(task, k)


#: a packet run estimated at this many events (a few seconds) or more shows a progress bar
EVENTS_BAR = 3_000_000
#: ``--max-events`` of ``simulate`` and ``compare``
MAX_EVENTS = typer.Option(
    DEFAULT_MAX_EVENTS, "--max-events", metavar="N", show_default=False,
    help="sim packet: refuse a run estimated at more events than this (default "
    f"{events_text(DEFAULT_MAX_EVENTS)}: about 2-3 minutes; 0 = no limit)")


def check_max_events(max_events: float) -> float | None:
    """``--max-events`` as the simulator takes it (None: no limit)."""
    return api.check_max_events(max_events, "--max-events")


@contextmanager
def _event_progress(label: str):
    """A progress bar over a packet run's estimated events, with an ETA, on stderr: shown
    once the run is estimated at :data:`EVENTS_BAR` events or more (a few seconds)."""
    if not err_console.is_terminal:
        yield None
        return
    state: dict[str, Any] = {}

    def update(done: int, estimate: int) -> None:
        if "prog" not in state:
            if estimate < EVENTS_BAR:
                state["prog"] = None
                return
            prog = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                            "{task.percentage:>3.0f}%",
                            "{task.completed:,.0f} of ~{task.total:,.0f} events",
                            TimeElapsedColumn(), "ETA", TimeRemainingColumn(),
                            console=err_console, transient=True)
            prog.start()
            state["prog"], state["task"] = prog, prog.add_task(label, total=estimate)
        if state["prog"] is not None:  # past the estimate (drops): the total moves on
            if done > state.setdefault("total", estimate):
                state["total"] = int(done * 1.05)
            state["prog"].update(state["task"], completed=done, total=state["total"])

    try:
        yield update
    finally:
        if state.get("prog") is not None:
            state["prog"].stop()


@contextmanager
def _bars(kind: str, total: int, label: str):
    """The progress bars of :func:`aifabric.api.simulate` on stderr (``bars``)."""
    if kind == "events":
        with _event_progress(label) as evp:
            yield evp
    else:
        with _progress(total, label) as prog:
            yield prog


def run(path: Path, sim: str | None = None,
        max_events: float | None = DEFAULT_MAX_EVENTS) -> Result:
    """:func:`aifabric.api.simulate` of a scenario file, with the CLI's progress bars."""
    return api.simulate(path, sim=sim, max_events=max_events, bars=_bars)


def load_and_run(path: Path, sim: str | None = None,
                 max_events: float | None = DEFAULT_MAX_EVENTS) -> SimResult:
    """Load a scenario file, build its fabric, simulate it (problems name the file);
    a packet run estimated above ``max_events`` events (None: no limit) is refused."""
    return run(path, sim, max_events).raw


#: rows of the console's collective table (the rest: collectives.csv)
COLLECTIVE_ROWS = 20


def _ms(ns: float) -> str:
    return fmt_ms(ns, unit="")


def print_result(r: SimResult, out: Path | None = None, fmt: str = "csv") -> None:
    """The headline tables of one result; a table cut short says how much it shows and
    where the rest is (the tables ``--out`` writes: ``out``, in format ``fmt``)."""

    def where(stem: str) -> str:
        return f"{out / stem}.{fmt}" if out is not None else f"{stem}.csv (written by --out)"

    s = r.summary
    _print_headline(r)
    if s["collectives"]:
        _print_collectives(s, where("collectives"))
    if s["jobs"]:
        _print_jobs(s["jobs"])
    _print_tiers(s["tiers"])
    if s["slowest_transfers"]:
        _print_slowest(s, where("transfers"))
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
    if "classes" in s:
        console.print(_classes_line(s["classes"]), markup=False, soft_wrap=True)
    if "scheduled" in s:
        from aifabric.report.markdown import scheduled_line

        console.print(scheduled_line(s["scheduled"]), markup=False, soft_wrap=True)
    if "packet" in s:
        _print_packet(s["packet"], where("packet_fct"))


def _print_headline(r: SimResult) -> None:
    """Scenario, fabric, simulator, routing and makespan (ms); whether the run finished;
    the notes of the result (e.g. a Chakra trace's node types not modelled)."""
    s = r.summary
    rt = s.get("routing", {})
    console.print(styled((r.scenario, "bold"), f" on {r.fabric} — sim {r.sim}, routing "
                         f"{rt.get('policy')} ({rt.get('qps_per_connection')} QP/conn, "
                         f"port by {rt.get('nic_port_choice')}); makespan "
                         f"{_ms(r.makespan_ns)} ms"))
    if not s.get("finished", True):
        console.print(styled(("unfinished:", "bold red"), " the run stopped at "
                             f"{_ms(r.makespan_ns)} ms with {s['transfers_undelivered']:,} of "
                             f"{s['engine']['transfers']:,} transfers undelivered"))
    for n in s.get("notes", []):  # e.g. a Chakra trace's node types not modelled
        console.print(styled(("note: ", "bold"), str(n)))


def _print_collectives(s: dict[str, Any], where: str) -> None:
    """The collectives table (the first :data:`COLLECTIVE_ROWS`; sizes in MiB, times in
    ms, bandwidths in GB/s and Gb/s) and, when cut short, where the rest is (``where``)."""
    from aifabric.report.markdown import shown_notice

    t = Table(title="collectives (nccl-tests conventions)", title_justify="left")
    for col in ("collective", "op", "algorithm", "GPUs", "size MiB", "time ms",
                "algbw GB/s", "busbw GB/s", "busbw Gb/s"):
        t.add_column(col, justify="left" if col in ("collective", "op", "algorithm")
                     else "right")
    shown = s["collectives"][:COLLECTIVE_ROWS]
    for c in shown:
        t.add_row(str(c["collective"]), c["op"], c["algorithm"], f"{c['gpus']:,}",
                  f"{c['size_bytes'] / 2**20:,.1f}", _ms(c["time_ns"]),
                  fmt_num(c["algbw_GBps"], ".2f"), fmt_num(c["busbw_GBps"], ".2f"),
                  fmt_num(c["busbw_gbps"], ".1f"))
    console.print(t)
    note = shown_notice(len(shown), int(s.get("collectives_total", len(shown))),
                        "collectives", where)
    if note:
        console.print(note, markup=False)


def _print_jobs(jobs: list[dict[str, Any]]) -> None:
    """The jobs table, per iteration (times in ms, cross-segment traffic in GiB)."""
    t = Table(title="jobs (per iteration)", title_justify="left")
    for col in ("job", "GPUs", "segments", "iteration ms", "compute ms",
                "exposed comm ms", "cross-segment GiB"):
        t.add_column(col, justify="left" if col == "job" else "right")
    for j in jobs:
        t.add_row(j["job"], f"{j['gpus']:,}", str(j["segments"]), _ms(j["iteration_ns"]),
                  _ms(j["compute_ns"]), _ms(j["exposed_comm_ns"]),
                  f"{j['cross_segment_bytes'] / 2**30:,.2f}")
    console.print(t)


def _print_tiers(tiers: dict[str, dict[str, Any]]) -> None:
    """Link utilization per tier (fractions of capacity) of the links that carried
    traffic."""
    t = Table(title="link utilization per tier (links that carried traffic)",
              title_justify="left")
    for col in ("tier", "links", "mean", "p99", "max peak"):
        t.add_column(col, justify="left" if col == "tier" else "right")
    for name, v in tiers.items():
        t.add_row(name, f"{v['links']:,}", f"{v['mean_util']:.2f}", f"{v['p99_mean_util']:.2f}",
                  f"{v['max_peak_util']:.2f}")
    console.print(t)


def _classes_line(c: dict[str, Any]) -> str:
    """How an All-to-All ran: as exact classes (how many, for how many transfers), or per
    transfer and why."""
    if c.get("used"):
        return (f"classes: {c['transfers_represented']:,} transfers run as {c['classes']:,} "
                f"exact classes over {c['arc_classes']:,} link classes ({c['exact']}; "
                f"{c['groups_routed']:,} transfer groups routed)")
    return f"classes: not used, per transfer ({c.get('reason')})"


def _print_slowest(s: dict[str, Any], where: str) -> None:
    """The 5 slowest transfers (lowest rate, Gb/s) and the link that held each back, and
    where the rest is (``where``)."""
    from aifabric.report.markdown import shown_notice

    t = Table(title="slowest transfers and the link that held them back",
              title_justify="left")
    for col in ("src", "dst", "min Gb/s", "bottleneck", "tier"):
        t.add_column(col, justify="right" if col == "min Gb/s" else "left")
    slow = s["slowest_transfers"][:5]
    for x in slow:
        t.add_row(x["src"], x["dst"], fmt_num(x["min_rate_gbps"], ".1f"),
                  x["bottleneck"] or "-", x["tier"] or "-")
    console.print(t)
    note = shown_notice(len(slow), int(s["engine"]["transfers"]), "transfers (the slowest)",
                        where)
    cl = s.get("classes") or {}
    if cl.get("used"):  # one row per class: its representative, multiplicity in the table
        note = (f"{len(slow)} of {cl['classes']:,} classes of transfers (the slowest) shown; "
                f"all in {where}, one row per class with its multiplicity (transfers)")
    if note:
        console.print(note, markup=False)


def _print_packet(pk: dict[str, Any], fct_where: str) -> None:
    """The packet simulator's lines: counts, the most paused queue (times in us, watchdog
    in ms), ACK paths, flow completion times (all in ``fct_where``), alarms."""
    console.print(f"packet: {packet_counts(pk)}")
    sh = pk.get("sharp")
    if sh:  # SHARP AllReduces on the switches' aggregation units
        ops = sh["operations"]
        console.print(f"sharp: {len(ops):,} operation run(s) on {sh['aggregation_units']:,} "
                      f"aggregation units ({sh['chunk_bytes'] / 1024:,.0f} KiB chunks, "
                      f"{sh['outstanding_chunks']} outstanding per host, "
                      f"{sh['aggregation_latency_ns']:g} ns per unit), "
                      f"{sum(o['chunk_qps'] for o in ops):,} chunk QPs (their ACKs retrace "
                      f"them); at most {max(sh['trees_per_switch'].values(), default=0)} "
                      f"tree(s) and {max(sh['operations_per_switch'].values(), default=0)} "
                      "operation(s) on a switch (summary.packet.sharp)",
                      markup=False, soft_wrap=True)
    if pk.get("paused_queues"):
        top = pk["pauses"][0]
        console.print(f"pauses: {pk['paused_queues']:,} queues (port, priority) paused; "
                      f"most: {top['port']} TC{top['tc']} paused "
                      f"{100 * top['pause_ratio']:.1f}% of the run "
                      f"({top['paused_ns'] / 1e3:.1f} us, longest "
                      f"{top['longest_pause_ns'] / 1e3:.1f} us; watchdog: "
                      f"{pk.get('settings', {}).get('pfc_watchdog_ms', 0):g} ms); all in "
                      "packet_pauses.csv",
                      markup=False, soft_wrap=True)
    ap = pk.get("ack_paths")
    if ap and ap["mode"] == "hashed" and ap["qps"]:
        fell = ap["fallback_pinned"] + ap["fallback_hops"] + ap["fallback_other"]
        console.print(f"ACK paths: hashed; {ap['hashed']:,} of {ap['qps']:,} QPs on their "
                      f"own return route ({ap['same_as_reverse']:,} of them the data "
                      f"route reversed), {fell:,} kept the reversed route, "
                      f"{ap['local']:,} inside a host", markup=False, soft_wrap=True)
    fc = pk.get("fct", {})
    if fc.get("count"):
        console.print(fct_line(fc, fct_where), markup=False, soft_wrap=True)
    if pk.get("reorder"):
        console.print(reorder_line(pk["reorder"]), markup=False, soft_wrap=True)
    if pk.get("trim"):
        t = pk["trim"]
        console.print(f"trimming: {t['trimmed']:,} data packets trimmed (threshold "
                      f"{t['threshold_bytes'] or 'the drop point'}"
                      f"{' B' if t['threshold_bytes'] else ''}), {t['trim_nacks']:,} NACKs "
                      "back to the senders"
                      + (f"; most at {t['most_trimming_port']} ({t['most_trimmed']:,})"
                         if t["most_trimming_port"] else ""), markup=False, soft_wrap=True)
    for a in pk["alarms"]:
        console.print(styled(("alarm", "bold red"), f" {a}"))


def fct_line(fc: dict[str, Any], where: str) -> str:
    """``fct: 320 flows; slowdown p50 1.21  p90 2.3  p99 4.1 (max 5.0); FCT p50 ... us;
    in packet_fct.csv`` (the packet summary's ``fct``)."""
    unfinished = fc["count"] - fc["finished"]
    if not fc["finished"]:
        return f"fct: {fc['count']:,} flows, none finished; in {where}"
    return (f"fct: {fc['count']:,} flows"
            + (f" ({unfinished:,} unfinished)" if unfinished else "")
            + f"; slowdown p50 {fc['slowdown_p50']:.3g}  p90 {fc['slowdown_p90']:.3g}  "
            f"p99 {fc['slowdown_p99']:.3g} (max {fc['slowdown_max']:.3g}); FCT p50 "
            f"{fc['fct_ns_p50'] / 1e3:.1f} us  p99 {fc['fct_ns_p99'] / 1e3:.1f} us; in {where}")


def reorder_line(ro: dict[str, Any]) -> str:
    """``reorder: lb spray, NIC entropy reps (256 values), receiver go_back_n: 93.4% of
    ... data packets out of order, distance p50/p99/max ...; cost: ...`` (the packet
    summary's ``reorder``): what per-packet load balancing cost, in NAKs, retransmitted
    and duplicate bytes (a share of the delivered bytes) and timeouts."""
    ent = f", NIC entropy {ro['entropy']} ({ro['entropy_values']:,} values)" \
        if ro.get("entropy") else ""
    dl = ro.get("delivered_bytes") or 0
    share = f" ({100 * ro['retx_bytes'] / dl:.1f}% of the delivered bytes)" if dl else ""
    return (f"reorder: lb {ro['lb']}{ent}, receiver {ro['receiver']}: "
            f"{100 * ro['ooo_share']:.1f}% of {ro['data_arrivals']:,} data packets out of "
            f"order, distance p50 {ro['distance_p50_packets']}  p99 "
            f"{ro['distance_p99_packets']}  max {ro['distance_max_packets']} packets; cost: "
            f"{ro['naks']:,} NAKs, {ro['retx_bytes'] / 1e6:.2f} MB retransmitted{share}, "
            f"{ro.get('duplicate_bytes', 0) / 1e6:.2f} MB duplicates, "
            f"{ro.get('timeouts', 0):,} timeouts; per flow in packet_fct and packet_reorder")


_jsonable = api.jsonable  # (compare imports it from here)


def simulate_cmd(
    scenario: Path = typer.Argument(..., metavar="SCENARIO", help="simulation scenario (YAML)"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="DIR",
                                    help="write tables, plots and a "
                                    "Markdown report into this folder"),
    fmt: Literal["csv", "parquet"] = typer.Option("csv", "--format",
                                                 help="table format with --out"),
    sim: Literal["flow", "analytic", "packet"] | None = typer.Option(
        None, "--sim", help="override the scenario's simulator"),
    max_memory: str | None = MAX_MEMORY,
    max_events: float = MAX_EVENTS,
    store: Path | None = typer.Option(None, "--store", metavar="DIR",
                                      help="append the run (summary row "
                                      "and tables) to this results store"),
    sweep: str | None = typer.Option(None, "--sweep", metavar="NAME",
                                     help="with --store: the sweep to "
                                     "file the run under (default: adhoc)"),
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
    if out is not None:  # a bad --out fails before the run, not after
        from aifabric.outputs import REPORT, check_target

        check_target(out, option="--out", folder=True, **REPORT)
    if sweep is not None and store is None:
        raise SpecError(Problem("--sweep", "needs --store; allowed: --store DIR --sweep NAME"))
    if store is not None:  # a bad store or sweep name fails before the run, too
        from aifabric.store import check_name
        from aifabric.store.store import need_data

        need_data()
        check_name(sweep if sweep is not None else "adhoc", "--sweep")
        if store.exists() and not store.is_dir():
            raise SpecError(Problem("--store", f"{store} is not a folder; allowed: a results "
                                    "store folder (created when missing)"))
    import time

    started = time.perf_counter()
    res = run(scenario, sim, check_max_events(max_events))
    wall_s = time.perf_counter() - started
    r = res.raw
    if out is not None:
        report = res.save(out, fmt, option="--out") / "report.md"
    run_id = None
    if store is not None:
        run_id = res.to_store(store, sweep=sweep or "adhoc",
                              timing={"wall_s": wall_s, "executor": "cli"})
    if as_json:
        typer.echo(json.dumps(res.summary, indent=2))
    else:
        print_result(r, out, fmt)
    if out is not None and not as_json:
        console.print(f"wrote {report} (+ tables and plots in {out})")
    if run_id is not None and not as_json:
        console.print(f"stored run {run_id[:12]} in {store} (sweep {sweep or 'adhoc'})")
    exit_on_attention([r])


def exit_on_attention(results: list[SimResult]) -> None:
    """Exit 1 (after everything is printed and written) when a run did not finish or
    raised alarms; see :func:`aifabric.sim.results.needs_attention`."""
    from aifabric.sim.results import needs_attention

    bad = [(r, why) for r in results if (why := needs_attention(r.summary))]
    for r, why in bad:
        err_console.print(f"exit 1: {r.scenario}: {', '.join(why)}", markup=False,
                          soft_wrap=True)
    if bad:
        raise typer.Exit(1)
