"""What a packet run adds to the shared result tables: time series per port/queue and per
QP, flow completion times and slowdowns per QP, the alarm lines, and PNG plots of queue
length and sending rate over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aifabric.sim.packet.run import PacketRun
from aifabric.sim.results import SimResult

__all__ = ["PAUSES_SHOWN", "attach_packet_results", "fct_summary", "write_packet_plots"]

#: the most paused (port, priority) rows in the summary; all of them are in the
#: ``packet_pauses`` table
PAUSES_SHOWN = 10


def attach_packet_results(res: SimResult, run: PacketRun, dag: Any = None) -> SimResult:
    """Add the packet tables (``packet_queues``, ``packet_flows``, ``packet_alarms``,
    ``packet_pauses``, ``packet_fct``, ``packet_reorder`` when reordering is reported)
    and a ``packet`` summary (counters, deadlocks, alarm
    lines, the event estimate, pause ratios of the most paused queues, flow completion
    times and slowdowns: ``fct``, :func:`fct_summary`) to ``res``; returns it."""
    ps = dict(run.port_series)
    arcs = ps.get("arc", np.zeros(0, dtype=np.int64))
    names = np.array([run.arc_names.get(int(a), "") for a in np.unique(arcs)], dtype=object)
    if len(arcs):
        _, inv = np.unique(arcs, return_inverse=True)
        ps = {"time_ns": ps["time_ns"], "port": names[inv], **{k: v for k, v in ps.items()
                                                              if k != "time_ns"}}
    else:
        ps = {"time_ns": np.zeros(0), "port": np.zeros(0, dtype=object), **{
            k: v for k, v in ps.items() if k != "time_ns"}}
    res.tables["packet_queues"] = ps
    res.tables["packet_flows"] = dict(run.qp_series)
    res.tables["packet_alarms"] = {"alarm": np.array(run.alarms, dtype=object)}
    pz = run.pauses
    if pz:
        res.tables["packet_pauses"] = dict(pz)
    if run.fct:
        res.tables["packet_fct"] = dict(run.fct)
    if run.reorder:
        res.tables["packet_reorder"] = dict(run.reorder)
    if run.credit_waits:  # InfiniBand: per (port, VL) the time without credit
        res.tables["packet_credit_waits"] = dict(run.credit_waits)
    n = len(pz.get("port", ()))
    res.summary["packet"] = {
        **run.counters, "alarms": list(run.alarms),
        "deadlocks": [{"time_ns": d["time_ns"], "ports": d["ports"]} for d in run.deadlocks],
        "estimated_events": int(run.estimate.get("events", 0)),
        "paused_queues": n,
        "max_pause_ratio": float(pz["pause_ratio"][0]) if n else 0.0,
        "longest_pause_ns": float(pz["longest_pause_ns"].max()) if n else 0.0,
        "pauses": [{"port": str(pz["port"][i]), "tc": int(pz["tc"][i]),
                    "paused_ns": float(pz["paused_ns"][i]),
                    "pause_ratio": float(pz["pause_ratio"][i]),
                    "longest_pause_ns": float(pz["longest_pause_ns"][i]),
                    "pause_frames_received": int(pz["pause_frames_received"][i])}
                   for i in range(min(n, PAUSES_SHOWN))],
        "fct": fct_summary(run.fct)}
    return res


def fct_summary(fct: dict[str, np.ndarray]) -> dict[str, Any]:
    """Flows (QPs), how many finished, and percentiles over the finished ones: slowdown
    p50/p90/p99/max, FCT (last byte received - start) and the sender-side completion
    (last ACK - start) p50/p99/max, in ns (None where no flow finished)."""
    sd = np.asarray(fct.get("slowdown", np.zeros(0)), dtype=np.float64)
    ok = ~np.isnan(sd)
    out: dict[str, Any] = {"count": len(sd), "finished": int(ok.sum())}

    def pct(v: np.ndarray, qs: tuple[int, ...], name: str) -> None:
        v = v[~np.isnan(v)]
        for q in qs:
            out[f"{name}_p{q}"] = float(np.percentile(v, q)) if len(v) else None
        out[f"{name}_max"] = float(v.max()) if len(v) else None

    pct(sd, (50, 90, 99), "slowdown")
    pct(np.asarray(fct.get("fct_ns", sd), dtype=np.float64)[ok], (50, 99), "fct_ns")
    pct(np.asarray(fct.get("completion_ns", sd), dtype=np.float64), (50, 99), "completion_ns")
    return out


def write_packet_plots(r: SimResult, folder: Path, top: int = 12) -> list[str]:
    """``packet_queues.png`` (queue bytes over time of the ``top`` ports with the deepest
    queues) and ``packet_rates.png`` (sending rate of up to ``top`` QPs); returns the
    file names written (none for a result without packet tables)."""
    if "packet_queues" not in r.tables:
        return []
    from aifabric.sim.plotting import legend_outside, pyplot, series_style, wrapped_title

    plt = pyplot()
    out = []
    q = r.tables["packet_queues"]
    if len(q["time_ns"]):
        fig, ax = plt.subplots(figsize=(10, 4.6), layout="constrained")
        uniq, inv = _queue_keys(q)
        peak = np.zeros(len(uniq))
        np.maximum.at(peak, inv, q["queue_bytes"])
        drawn = 0
        for n, i in enumerate(np.argsort(-peak, kind="stable")[:top]):  # a dozen lines
            if peak[i] <= 0:
                break
            m = inv == i
            ax.plot(q["time_ns"][m] / 1e3, q["queue_bytes"][m] / 1e3, lw=1, label=uniq[i],
                    **series_style(n))
            drawn += 1
        ax.set_xlabel("time (us)")
        ax.set_ylabel("queue (KB)")
        ax.grid(alpha=0.3)
        legend_outside(ax, title="egress port, traffic class")
        wrapped_title(ax, f"{r.scenario}: the {drawn} deepest egress queues "
                      f"(of {int((peak > 0).sum()):,} that held bytes; all in packet_queues)")
        fig.savefig(folder / "packet_queues.png", dpi=110)
        plt.close(fig)
        out.append("packet_queues.png")
    f = r.tables["packet_flows"]
    if len(f.get("time_ns", [])):
        fig, ax = plt.subplots(figsize=(10, 4.6), layout="constrained")
        qps = np.unique(f["qp"])
        for n, qp in enumerate(qps[:top]):  # a dozen lines at most
            m = f["qp"] == qp
            ax.plot(f["time_ns"][m] / 1e3, f["rate_gbps"][m], lw=1, label=f"QP {qp}",
                    **series_style(n))
        ax.set_xlabel("time (us)")
        ax.set_ylabel("sending rate (Gbit/s)")
        ax.grid(alpha=0.3)
        legend_outside(ax)
        shown = f"the first {top} of {len(qps):,} QPs" if len(qps) > top else \
            f"{len(qps):,} QP{'s' if len(qps) != 1 else ''}"
        wrapped_title(ax, f"{r.scenario}: per-QP sending rate ({shown}; all in packet_flows)")
        fig.savefig(folder / "packet_rates.png", dpi=110)
        plt.close(fig)
        out.append("packet_rates.png")
    return out


def _queue_keys(q: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct ``"PORT TCn"`` labels of the ``packet_queues`` rows and each
    row's index into them (``np.unique(labels, return_inverse=True)``), with the labels
    made once per distinct (port, class), not per row: a row's label as a fixed-width
    string costs ~200 bytes, and a 1,024-host run has half a million rows."""
    port, tc = q["port"], np.asarray(q["tc"])
    if len(port) and tc.dtype.kind in "iu" and tc.min() >= 0:
        ident = np.asarray(q["arc"]) if "arc" in q else np.zeros(0)
        if ident.dtype.kind not in "iu" or len(ident) != len(port) or ident.min() < 0:
            ident = np.unique(port, return_inverse=True)[1].ravel()
        pair = ident.astype(np.int64) * (int(tc.max()) + 1) + tc
        _, rep, row_pair = np.unique(pair, return_index=True, return_inverse=True)
        labels = np.char.add(port[rep].astype(str), np.char.add(" TC", tc[rep].astype(str)))
        uniq, label_of = np.unique(labels, return_inverse=True)
        return uniq, label_of.ravel()[row_pair.ravel()]
    key = np.char.add(port.astype(str), np.char.add(" TC", tc.astype(str)))
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, inv
