"""The Markdown report of one or several simulation results."""

from __future__ import annotations

from typing import Any

import numpy as np

from aifabric.sim.results import SimResult

__all__ = ["ANALYTIC_PEAK", "COMPARED_COLLECTIVES", "comparison_notice", "comparison_rows",
           "group_comparison", "packet_metrics", "peak_label", "render_markdown",
           "scheduled_line", "shown_notice"]

#: collectives compared side by side (the first ones of each result)
COMPARED_COLLECTIVES = 12


def packet_counts(pk: dict[str, Any]) -> str:
    """The packet summary's counters as one phrase (console and report): drops (per
    traffic class when any, the lossless classes' drops named), retransmitted bytes, ECN
    marks, CNPs, PFC frames, paused time."""
    by_tc = pk.get("drops_by_tc") or {}
    per = ""
    if pk["drops"] and by_tc:
        tcs = ", ".join(f"TC{tc} {n:,}" for tc, n in sorted(by_tc.items(), key=lambda x: int(x[0])))
        lossless = pk.get("lossless_drops") or 0
        per = f" ({tcs}" + (f"; {lossless:,} on lossless classes" if lossless else "") + ")"
    ib = pk.get("infiniband")
    if ib:  # credits per VL instead of PFC, FECN/BECN instead of ECN/CNP
        vls = ", ".join(f"VL{v} {ns / 1e3:,.1f} us" for v, ns in
                        ib["credit_blocked_ns_by_vl"].items())
        return (f"{pk['drops']:,} drops{per}, {pk['retx_bytes']:,} bytes retransmitted, "
                f"{ib['fecn_marks']:,} FECN marks, {ib['becns']:,} BECNs, credit-blocked "
                f"{vls} summed over {ib['blocked_ports']:,} port(s) (packet_credit_waits), "
                "buffers at most "
                f"{ib['max_buffer_fill']:.0%} of their credits, {pk['pfc_frames']:,} PFC "
                "frames")
    return (f"{pk['drops']:,} drops{per}, {pk['retx_bytes']:,} bytes retransmitted, "
            f"{pk['ecn_marks']:,} ECN marks, {pk['cnps']:,} CNPs, {pk['pfc_frames']:,} PFC "
            f"frames, {pk['pause_ns'] / 1e3:.1f} us paused")


def fmt_ms(ns: float, unit: str = " ms") -> str:
    """Nanoseconds as milliseconds; "unfinished" for a time never reached (NaN)."""
    return f"{ns / 1e6:,.3f}{unit}" if np.isfinite(ns) else "unfinished"


def fmt_num(x: float, spec: str) -> str:
    """``format(x, spec)``; "-" for a figure that does not exist (NaN, inf)."""
    return format(x, spec) if np.isfinite(x) else "-"


def shown_notice(shown: int, total: int, what: str, where: str) -> str:
    """``"20 of 128 collectives shown; all in collectives.csv"``; empty when nothing is
    left out."""
    if shown >= total:
        return ""
    return f"{shown:,} of {total:,} {what} shown; all in {where}"


def _bytes(b: float) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= div:
            return f"{b / div:,.2f} {unit}"
    return f"{b:,.0f} B"


def _rel(a: float, b: float) -> str:
    if a == 0 or not np.isfinite(a) or not np.isfinite(b):
        return "-"
    return f"{(b - a) / a * 100:+.1f}%"


def _comparison(results: list[SimResult]) -> list[tuple[str, list[float], Any, bool]]:
    """Rows (metric, value per result, how to format a value, lower is better) for
    results of comparable scenarios."""
    rows: list[tuple[str, list[float], Any, bool]] = []

    def add(label: str, vals: list[float], fmt, lower_better: bool) -> None:
        rows.append((label, vals, fmt, lower_better))

    add("makespan", [r.makespan_ns for r in results], fmt_ms, True)
    n_c = min(len(r.summary["collectives"]) for r in results)
    for i in range(min(n_c, COMPARED_COLLECTIVES)):
        cs = [r.summary["collectives"][i] for r in results]
        add(f"{cs[0]['collective']}: time", [c["time_ns"] for c in cs], fmt_ms, True)
        add(f"{cs[0]['collective']}: busbw", [c["busbw_gbps"] for c in cs],
            lambda v: f"{v:,.1f} Gb/s", False)
    n_j = min(len(r.summary["jobs"]) for r in results)
    for i in range(n_j):
        js = [r.summary["jobs"][i] for r in results]
        add(f"{js[0]['job']}: iteration", [j["iteration_ns"] for j in js], fmt_ms, True)
        add(f"{js[0]['job']}: exposed comm", [j["exposed_comm_ns"] for j in js], fmt_ms, True)
        add(f"{js[0]['job']}: cross-segment bytes", [j["cross_segment_bytes"] for j in js],
            _bytes, True)
    tiers = set.intersection(*[set(r.summary["tiers"]) for r in results])
    for t in sorted(tiers):
        add(f"{t}: {peak_label(results)}", [r.summary["tiers"][t]["max_peak_util"]
                                            for r in results], lambda v: f"{v:.2f}", True)
    if any(c.get("algorithm") == "sharp" for r in results
           for c in r.summary["collectives"]):  # SHARP compared: what it saves per NIC
        add("access up: max bytes per host link", [_host_link_max(r) for r in results],
            _bytes_or_dash, True)
    tp = [r.summary["two_port"].get("down", {}).get("one_port_idle") for r in results]
    if all(x is not None for x in tp):
        add("NICs receiving on one port only", [float(x) for x in tp], lambda v: f"{v:,.0f}",
            True)
    if any("scheduled" in r.summary for r in results):  # a scheduled fabric compared
        add("tail FCT (p99 of transfers)", [_tail_fct(r) for r in results], fmt_ms, True)
        add("fabric queue max", [_fabric_queue_max(r) for r in results], _bytes_or_dash, True)
        add("overhead bytes (headers, cells, ACKs)", [_overhead_bytes(r) for r in results],
            _bytes_or_dash, True)
    if all("packet" in r.summary for r in results):  # packet runs: what load balancing did
        pm = [packet_metrics(r) for r in results]
        for key, label, f, lower in (
                ("slowdown_p50", "FCT slowdown p50", lambda v: fmt_num(v, ".2f"), True),
                ("slowdown_p99", "FCT slowdown p99", lambda v: fmt_num(v, ".2f"), True),
                ("slowdown_max", "FCT slowdown max", lambda v: fmt_num(v, ".2f"), True),
                ("load_cv", "fabric link load spread (CV of bytes)",
                 lambda v: fmt_num(v, ".3f"), True),
                ("load_max_mean", "fabric link load max / mean",
                 lambda v: fmt_num(v, ".2f"), True),
                ("ooo_share", "packets out of order", lambda v: fmt_num(100 * v, ".1f") + " %",
                 True),
                ("distance_p99", "reorder distance p99 (packets)",
                 lambda v: fmt_num(v, ",.0f"), True),
                ("retx_bytes", "retransmitted", _bytes, True),
                ("naks", "NAKs", lambda v: fmt_num(v, ",.0f"), True),
                ("timeouts", "retransmission timeouts", lambda v: fmt_num(v, ",.0f"), True),
                ("drops", "drops", lambda v: fmt_num(v, ",.0f"), True)):
            add(label, [m[key] for m in pm], f, lower)
    return rows


def packet_metrics(r: SimResult) -> dict[str, float]:
    """What a packet run's load balancing did, from its summary and links table: FCT
    slowdown p50/p99/max, the spread of bytes over the fabric's links (switch to switch,
    those that carried any: coefficient of variation and max / mean), packets out of
    order and the reorder distance p99, retransmitted bytes, NAKs, timeouts, drops."""
    pk = r.summary["packet"]
    fc = pk.get("fct", {})
    ro = pk.get("reorder", {})
    links = r.tables.get("links", {})
    tier = np.asarray(links.get("tier", []), dtype=str)
    b = np.asarray(links.get("bytes", []), dtype=np.float64)
    fab = b[~np.char.startswith(tier, "access") & (b > 0)] if len(b) else b
    nan = float("nan")

    def v(x: Any) -> float:
        return float(x) if x is not None else nan

    return {"slowdown_p50": v(fc.get("slowdown_p50")),
            "slowdown_p99": v(fc.get("slowdown_p99")),
            "slowdown_max": v(fc.get("slowdown_max")),
            "load_cv": float(fab.std() / fab.mean()) if len(fab) else nan,
            "load_max_mean": float(fab.max() / fab.mean()) if len(fab) else nan,
            "ooo_share": float(ro.get("ooo_share", 0.0)),
            "distance_p99": float(ro.get("distance_p99_packets", 0)),
            # (a scheduled fabric's cell model has no NAKs, retransmissions or timeouts)
            "retx_bytes": v(pk.get("retx_bytes")), "naks": v(pk.get("naks")),
            "timeouts": v(pk.get("timeouts")), "drops": v(pk.get("drops"))}


def comparison_rows(results: list[SimResult]) -> list[tuple[str, list[str], str, bool]]:
    """Rows (metric, value per result, relative difference last vs first, lower is
    better) for results of comparable scenarios."""
    return [(label, [fmt(v) for v in vals], _rel(vals[0], vals[-1]), lower)
            for label, vals, fmt, lower in _comparison(results)]


def peak_label(results: list[SimResult]) -> str:
    """What a link's peak means: the highest utilization a simulator measured, or, for
    the analytic model, whose core is ideal, the highest load a step offered the link as
    a multiple of its capacity (above 1: more than the link can carry)."""
    if all(r.sim == "analytic" for r in results):
        return "max link peak offered load (x capacity)"
    if any(r.sim == "analytic" for r in results):
        return "max link peak util (analytic: offered load, x capacity)"
    return "max link peak util"


#: how the report explains the analytic model's peak (see :func:`peak_label`)
ANALYTIC_PEAK = (
    "The analytic model shares only the host side (NVLink, PCIe, NIC ports) and takes the "
    "network core as ideal (non-blocking, no ECMP collisions): its link peak is the load a "
    "step offers the link, as a multiple of the link's capacity. Above 1.00 a core link is "
    "offered more than it can carry (2.00: twice its capacity); the analytic times do not "
    "pay for it, the flow simulator (`--sim flow`) would slow the transfers that share it.")


def group_comparison(results: list[SimResult], title: str) -> str:
    """A side-by-side table of the runs of one experiment: each run's value and its
    relative difference to the first run (the baseline), column by column, saying which
    run is compared with which."""
    base = results[0].scenario
    others = [r.scenario for r in results[1:]]
    head = ["metric", *[r.scenario for r in results], *[f"{o} vs {base}" for o in others]]
    body = [[label, *[fmt(v) for v in vals], *[_rel(vals[0], v) for v in vals[1:]]]
            for label, vals, fmt, _ in _comparison(results)]
    parts = [f"## Side by side: {title}",
             f"Difference: each run against **{base}** (the experiment's baseline), "
             "(run - baseline) / baseline.", _table(head, body)]
    if any(r.sim == "analytic" for r in results):
        parts.append(ANALYTIC_PEAK)
    note = comparison_notice(results)
    if note:
        parts.append(note + ".")
    return "\n\n".join(parts)


def scheduled_line(sc: dict[str, Any]) -> str:
    """A scheduled fabric's figures as one line (console and report): the cell model's
    VOQs, grant latency, fabric queues, reorder buffers, cells and PFC; or the closed
    form's cells and efficiencies."""
    if "voq" in sc:
        g, fq, ro, c = sc["grant_latency_ns"], sc["fabric_queue"], sc["reorder"], sc["cells"]
        return (f"scheduled fabric (cells): VOQ max {_bytes(sc['voq']['max_bytes'])}; grant "
                f"latency mean {g['mean'] / 1e3:.2f} us, p99 {g['p99'] / 1e3:.2f} us; fabric "
                f"queue max {_bytes(fq['max_bytes'])} (window {_bytes(fq['window_bytes'])}), "
                f"no PFC inside; reorder buffer max {_bytes(ro['max_bytes'])} of "
                f"{_bytes(ro['buffer_bytes'])}, {ro['frames_delivered_out_of_order']} frames "
                f"out of order at the hosts; {c['cells']:,} cells ({c['cells_per_frame']} per "
                f"frame), overhead {_bytes(c['overhead_bytes'])}; "
                f"{sc['pfc_to_hosts']['pauses']:,} PFC pauses toward hosts")
    return (f"scheduled fabric (closed form): {sc['cells_per_frame']} cells per frame, cell "
            f"efficiency {100 * sc['cell_efficiency']:.1f}%, host links "
            f"{100 * sc['host_link_efficiency']:.1f}%, speedup {sc['speedup']:g}x, "
            f"request-grant {sc['request_grant_ns']:,} ns"
            + (f"; cell overhead {_bytes(sc['cell_overhead_bytes'])}"
               if "cell_overhead_bytes" in sc else ""))


def _host_link_max(r: SimResult) -> float:
    """The most bytes a host link carried towards its switch (SHARP: the message once;
    a ring: 2(n-1)/n of it); NaN without a links table."""
    lk = r.tables.get("links", {})
    up = np.asarray(lk.get("tier", []), dtype=object) == "access up"
    b = np.asarray(lk.get("bytes", []), float)[up] if len(up) else np.zeros(0)
    return float(b.max()) if len(b) else float("nan")


def _bytes_or_dash(v: float) -> str:
    return _bytes(v) if np.isfinite(v) else "-"


def _tail_fct(r: SimResult) -> float:
    """The 99th percentile of the transfers' times (delivery - start), ns."""
    t = r.tables.get("transfers", {})
    d = np.asarray(t.get("end_ns", []), float) - np.asarray(t.get("start_ns", []), float)
    d = d[np.isfinite(d)]
    return float(np.percentile(d, 99)) if len(d) else float("nan")


def _fabric_tier_arcs(r: SimResult) -> np.ndarray:
    lk = r.tables.get("links", {})
    tier = np.asarray(lk.get("tier", []), dtype=object)
    fab = np.array([str(t).startswith(("leaf_spine", "spine_core")) for t in tier], bool)
    arcs = 2 * np.asarray(lk.get("link", []), np.int64) + (
        np.asarray(lk.get("direction", []), dtype=object) == "down")
    return arcs[fab] if len(fab) else np.zeros(0, np.int64)


def _fabric_queue_max(r: SimResult) -> float:
    """The deepest queue of a port between switches (bytes): a scheduled fabric's own
    figure, a RoCE packet run's from its port samples; NaN for flow-level runs."""
    s = r.summary
    if "scheduled" in s and "fabric_queue" in s["scheduled"]:
        return float(s["scheduled"]["fabric_queue"]["max_bytes"])
    q = r.tables.get("packet_queues")
    if q is None:
        return float("nan")
    sel = np.isin(np.asarray(q["arc"], np.int64), _fabric_tier_arcs(r))
    qb = np.asarray(q["queue_bytes"], float)[sel]
    return float(qb.max()) if len(qb) else 0.0


def _overhead_bytes(r: SimResult) -> float:
    """Bytes put on the wire beyond the payload: a scheduled fabric's frame headers and
    cell headers/padding; a RoCE packet run's sending-host link bytes beyond the payload
    (frame headers, ACKs, CNPs, retransmissions); NaN where the run does not say."""
    s = r.summary
    if "scheduled" in s:
        sc = s["scheduled"]
        if "cells" in sc:
            return float(sc["cells"]["overhead_bytes"] + sc["cells"]["host_link_overhead_bytes"])
        if "cell_overhead_bytes" in sc:
            return float(sc["cell_overhead_bytes"] + sc["host_overhead_bytes"])
        return float("nan")
    if "packet" not in s:
        return float("nan")
    lk, t = r.tables.get("links", {}), r.tables.get("transfers", {})
    up = np.asarray(lk.get("tier", []), dtype=object) == "access up"
    sent = float(np.asarray(lk.get("bytes", []), float)[up].sum())
    pay = float((np.asarray(t.get("size_bytes", []), float)
                 * np.asarray(t.get("repeat", []), float)).sum())
    return sent - pay


def comparison_notice(results: list[SimResult]) -> str:
    """The line saying how many collectives the side-by-side rows leave out."""
    total = max(_n_collectives(r) for r in results)
    shown = min(min(len(r.summary["collectives"]) for r in results), COMPARED_COLLECTIVES)
    return shown_notice(shown, total, "collectives compared",
                        "each scenario's collectives table (collectives.csv)")


def _n_collectives(r: SimResult) -> int:
    return int(r.summary.get("collectives_total", len(r.summary["collectives"])))


def _file(files: list[str], stem: str) -> str:
    """The file of table ``stem`` among ``files`` (``collectives.csv`` when not written)."""
    return next((f for f in files if f.rsplit("/", 1)[-1].startswith(stem + ".")),
                f"{stem}.csv")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _one(r: SimResult, figures: list[str], files: list[str], level: str = "##") -> str:
    s = r.summary
    parts = [f"{level} {r.scenario}",
             f"Fabric **{r.fabric}**, simulator **{r.sim}**, routing "
             f"`{s.get('routing', {}).get('policy', '?')}` "
             f"({s.get('routing', {}).get('qps_per_connection', '?')} QP/connection, "
             f"NIC port by {s.get('routing', {}).get('nic_port_choice', '?')}). "
             f"Makespan {fmt_ms(r.makespan_ns)}." if s.get("finished", True) else
             f"**Unfinished**: the run stopped at {fmt_ms(r.makespan_ns)} with "
             f"{s['transfers_undelivered']:,} of {s['engine']['transfers']:,} transfers "
             "undelivered."]
    if s.get("notes"):  # e.g. a Chakra trace's nodes that aifabric does not model
        parts.append("Workload notes:\n\n" + "\n".join(f"- {n}" for n in s["notes"]))
    if s["collectives"]:
        parts.append(_table(
            ["collective", "op", "algorithm", "GPUs", "size", "time", "algbw GB/s",
             "busbw GB/s", "busbw Gb/s"],
            [[c["collective"], c["op"], c["algorithm"], c["gpus"], _bytes(c["size_bytes"]),
              fmt_ms(c["time_ns"]), fmt_num(c["algbw_GBps"], ".2f"),
              fmt_num(c["busbw_GBps"], ".2f"), fmt_num(c["busbw_gbps"], ".1f")]
             for c in s["collectives"][:30]]))
        note = shown_notice(min(30, len(s["collectives"])), _n_collectives(r), "collectives",
                            f"`{_file(files, 'collectives')}`")
        if note:
            parts.append(note + ".")
    if s["jobs"]:
        parts.append(_table(
            ["job", "GPUs", "segments", "iteration", "compute", "exposed comm", "comm bytes",
             "cross-segment bytes"],
            [[j["job"], j["gpus"], j["segments"], fmt_ms(j["iteration_ns"]),
              fmt_ms(j["compute_ns"]), fmt_ms(j["exposed_comm_ns"]), _bytes(j["comm_bytes"]),
              _bytes(j["cross_segment_bytes"])] for j in s["jobs"]]))
    if s["tiers"] and r.sim == "analytic":
        parts.append("Link utilization per tier (links that carried traffic; mean over the "
                     "makespan; peak offered load = the most a step offered one link, as a "
                     "multiple of its capacity):\n\n" + _table(
                         ["tier", "links", "mean", "p50", "p99", "max peak offered (x capacity)"],
                         [[t, v["links"], f"{v['mean_util']:.2f}", f"{v['p50_mean_util']:.2f}",
                           f"{v['p99_mean_util']:.2f}", f"{v['max_peak_util']:.2f}"]
                          for t, v in s["tiers"].items()]) + "\n\n" + ANALYTIC_PEAK)
    elif s["tiers"]:
        parts.append("Link utilization per tier (links that carried traffic; mean over the "
                     "makespan, peak = highest instantaneous load):\n\n" + _table(
                         ["tier", "links", "mean", "p50", "p99", "max peak"],
                         [[t, v["links"], f"{v['mean_util']:.2f}", f"{v['p50_mean_util']:.2f}",
                           f"{v['p99_mean_util']:.2f}", f"{v['max_peak_util']:.2f}"]
                          for t, v in s["tiers"].items()]))
    if s["slowest_transfers"]:
        parts.append("Slowest transfers (lowest rate they ran at) and the link that held "
                     "them back:\n\n" + _table(
                         ["src", "dst", "job", "min rate Gb/s", "bottleneck", "tier"],
                         [[x["src"], x["dst"], x["job"] or "-", fmt_num(x['min_rate_gbps'], '.1f'),
                           x["bottleneck"] or "-", x["tier"] or "-"]
                          for x in s["slowest_transfers"]]))
        note = shown_notice(len(s["slowest_transfers"]), int(s["engine"]["transfers"]),
                            "transfers (the slowest)", f"`{_file(files, 'transfers')}`")
        if note:
            parts.append(note + ".")
    if s["hot_links"]:
        parts.append("Links that slowed the most transfers:\n\n" + _table(
            ["link", "tier", "transfers held back", "mean util", "peak util"],
            [[x["link"], x["tier"], x["bottleneck_of"], f"{x['mean_util']:.2f}",
              f"{x['peak_util']:.2f}"] for x in s["hot_links"]]))
        held = int((np.asarray(r.tables["links"]["bottleneck_of"]) > 0).sum()) \
            if "links" in r.tables else len(s["hot_links"])
        note = shown_notice(len(s["hot_links"]), held, "links that held transfers back",
                            f"`{_file(files, 'links')}` (column bottleneck_of)")
        if note:
            parts.append(note + ".")
    tp = s.get("two_port", {})
    if tp.get("up", {}).get("nics"):
        head = "Two-port imbalance of dual-port NICs (busier port / other port): "
        parts.append(head + "; ".join(
            f"{'send' if k == 'up' else 'receive'}: {v['nics']} NICs, median "
            f"{v['median_ratio'] if v['median_ratio'] is None else round(v['median_ratio'], 2)}"
            f", max {v['max_ratio'] if v['max_ratio'] is None else round(v['max_ratio'], 2)}, "
            f"{v['one_port_idle']} with one port idle" for k, v in tp.items()))
    if "scheduled" in s:
        parts.append(scheduled_line(s["scheduled"]) + " (docs/scheduled.md).")
    if "packet" in s:
        pk = s["packet"]
        parts.append(f"Packet level: {packet_counts(pk)} in total.")
        if pk.get("paused_queues"):
            top = pk["pauses"][0]
            parts.append(f"Pauses: {pk['paused_queues']:,} queues (port, priority) paused; "
                         f"the most: {top['port']} TC{top['tc']}, paused "
                         f"{100 * top['pause_ratio']:.1f}% of the run (longest pause "
                         f"{top['longest_pause_ns'] / 1e3:.1f} us); every one in "
                         "`packet_pauses`.")
        fc = pk.get("fct", {})
        if fc.get("finished"):
            parts.append(
                f"Flow completion: {fc['count']:,} flows (QPs), {fc['finished']:,} "
                f"finished; slowdown against the idle path p50 {fc['slowdown_p50']:.3g}, "
                f"p90 {fc['slowdown_p90']:.3g}, p99 {fc['slowdown_p99']:.3g} (max "
                f"{fc['slowdown_max']:.3g}); FCT (last byte received - start) p50 "
                f"{fc['fct_ns_p50'] / 1e3:.1f} us, p99 {fc['fct_ns_p99'] / 1e3:.1f} us; "
                "every flow in `packet_fct`.")
        parts.append("Alarms:\n\n" + "\n".join(f"- {a}" for a in pk["alarms"])
                     if pk["alarms"] else "Alarms: none (no PFC deadlock, no queue paused "
                     "past the PFC watchdog's detection time).")
    e = s["engine"]
    parts.append(f"Engine: {e['stages']:,} stages, {e['transfers']:,} transfers, "
                 f"{e['events']:,} events, {e['rate_solves']:,} max-min solves, "
                 f"{e['repetitions_reused']:,} repeated steps reused.")
    if figures:
        parts.append("\n".join(f"![{f}]({f})" for f in figures))
    if files:
        parts.append("Tables: " + ", ".join(f"`{f}`" for f in files))
    return "\n\n".join(parts)


def render_markdown(results: list[SimResult], *, names: list[str] | None = None,
                    figures: dict[str, list[str]] | None = None,
                    files: dict[str, list[str]] | None = None, title: str | None = None,
                    preamble: str = "",
                    groups: list[tuple[str, list[int]]] | None = None,
                    comparison_figures: list[str] | None = None) -> str:
    """The report: a comparison table (and ``comparison_figures``) when there are
    several results, then each one.

    ``groups`` (title, indices of ``results``): the results are runs of different
    experiments; each experiment gets its own side-by-side table, its runs against its
    first run, and runs of different experiments are never compared."""
    names = names or [r.scenario for r in results]
    figures = figures or {}
    files = files or {}
    parts = [f"# {title or ('Simulation: ' + ', '.join(r.scenario for r in results))}"]
    if preamble:
        parts.append(preamble)
    if groups is not None:
        for gtitle, idx in groups:
            if len(idx) > 1:
                parts.append(group_comparison([results[i] for i in idx], gtitle))
    elif len(results) > 1:
        rows = comparison_rows(results)
        first, last = results[0].scenario, results[-1].scenario
        parts.append(f"## Side by side\n\nRelative difference: last vs first, **{last}** "
                     f"against **{first}**, (last - first) / first.\n\n" + _table(
            ["metric", *[r.scenario for r in results], f"difference: {last} vs {first}"],
            [[m, *vals, d] for m, vals, d, _ in rows]))
        note = comparison_notice(results)
        if note:
            parts.append(note + ".")
        parts.extend(f"![{x}]({x})" for x in comparison_figures or [])
    for r, n in zip(results, names, strict=True):
        parts.append(_one(r, figures.get(n, []), files.get(n, []),
                          "##" if len(results) == 1 else "###"))
    return "\n\n".join(parts) + "\n"
