"""A scenario's transfer DAG on the scheduled fabric, packet (cell) by packet
(``sim: packet`` on a spec with a ``scheduled`` section).

Each connection's flows (one per QP, routed with ``policy: spray`` to find the NIC
ports: the fabric itself sprays cells whatever the routing says) become flows of a
:class:`~aifabric.sim.packet.scheduled.ScheduledNet` between their source and destination
NIC ports. Stages start when their dependencies are done (a compute stage is a timer),
repeat, and a transfer is delivered when its last QP's last byte reaches the destination
host, plus the latency of the hops inside the hosts (PCIe, NVLink) its route crosses.
The result has the shared tables (a :class:`~aifabric.sim.flow.engine.FlowRun`) and the
scheduled fabric's own figures (:meth:`ScheduledNet.metrics`) plus one row per flow.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.sim.flow.engine import FlowRun, Paths
from aifabric.sim.packet.scheduled import layout as L
from aifabric.sim.packet.scheduled.model import PS_PER_NS, ScheduledNet
from aifabric.sim.packet.stages import StageBook
from aifabric.sim.paths import arc_latency_ns
from aifabric.topology.fabric import Fabric, LinkKind
from aifabric.workload.dag import COMPUTE, TransferDAG

__all__ = ["ScheduledRun", "attach_scheduled_results", "estimate_scheduled_events",
           "flow_ports", "run_scheduled"]


@dataclass
class ScheduledRun(FlowRun):
    """A :class:`FlowRun` plus the scheduled fabric's figures and its flows."""

    metrics: dict[str, Any] = field(default_factory=dict)
    flows: dict[str, np.ndarray] = field(default_factory=dict)


def flow_ports(f: Fabric, net: ScheduledNet, paths: Paths
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per flow row of ``paths``: its source and destination NIC ports (indices of
    ``net.port_node``: the access arcs carrying most of it; -1 for a flow inside one host),
    the latency (ps) of the hops inside the hosts it crosses, and the slowest of those
    hops (Gbit/s: what a flow inside one host runs at)."""
    inc = paths.incidence.tocsc()
    up = inc[:, net.up_arc]
    dn = inc[:, net.dn_arc]
    has = np.asarray(up.sum(axis=1)).ravel() > 0
    sp_ = np.where(has, np.asarray(up.argmax(axis=1)).ravel(), -1)
    dp_ = np.where(has, np.asarray(dn.argmax(axis=1)).ravel(), -1)
    kind = np.repeat(f.links.kind, 2)
    inner = kind < LinkKind.ACCESS
    inside = np.where(inner, arc_latency_ns(f), 0.0)
    lat = np.asarray(paths.incidence @ inside).ravel()
    inv = np.where(inner, 1.0 / f.arcs[2], 0.0)  # the slowest inside hop: max of 1/c
    slow = np.asarray(paths.incidence.tocsr().multiply(inv[None, :]).max(axis=1).todense())
    slow = slow.ravel()
    gbps = np.divide(1.0, slow, out=np.full(len(slow), np.inf), where=slow > 0)
    return (sp_.astype(np.int64), dp_.astype(np.int64),
            np.round(lat * PS_PER_NS).astype(np.int64), gbps)


def estimate_scheduled_events(dag: TransferDAG, f: Fabric, paths: Paths,
                              xfer_conn: np.ndarray, nic: Any) -> dict[str, float]:
    """What a cell-level run of ``dag`` will cost, before it runs: ``events`` = every
    network frame x (7 + 2 x its cells x the fabric links its cells cross; a cell is two
    events per link: sent, arrived) + one per flow inside a host, every repetition
    counted; with the ``frames`` and ``cells`` it comes from."""
    sch = f.spec.scheduled
    assert sch is not None
    xc = np.asarray(xfer_conn, dtype=np.int64)
    if dag.n_transfers == 0 or len(xc) == 0:
        return {"events": 0.0, "frames": 0.0, "cells": 0.0}
    kind = np.repeat(f.links.kind, 2)
    inc = paths.incidence.tocsr()
    fab_hops = np.asarray(inc[:, kind >= LinkKind.LEAF_SPINE].sum(axis=1)).ravel()
    net_row = np.asarray(inc[:, kind == LinkKind.ACCESS].sum(axis=1)).ravel() > 0
    ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
    lo, hi = ptr[xc], ptr[xc + 1]
    k = np.maximum(hi - lo, 1).astype(np.float64)
    first = np.minimum(lo, max(len(fab_hops) - 1, 0))
    hops = fab_hops[first] if len(fab_hops) else np.zeros(len(xc))
    net = net_row[first] if len(net_row) else np.zeros(len(xc), dtype=bool)
    reps = dag.repeat[dag.xfer_stage].astype(np.float64)
    mtu = int(nic.mtu_payload_bytes)
    frames = reps * np.ceil(np.asarray(dag.size_bytes, np.float64) / k / mtu) * k
    cells = math.ceil((mtu + int(nic.header_bytes)) / (sch.cell_bytes - sch.cell_header_bytes))
    ev = np.where(net, frames * (7 + 2 * cells * hops), reps * k)
    return {"events": float(ev.sum()), "frames": float(frames[net].sum()),
            "cells": float((frames * cells)[net & (hops > 0)].sum())}


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


def run_scheduled(dag: TransferDAG, f: Fabric, paths: Paths, xfer_conn: np.ndarray,
                  nic: Any, *, arc_group: np.ndarray | None = None, n_groups: int = 1,
                  progress: Callable[[int], None] | None = None,
                  until_ns: float | None = None,
                  max_events: float | None = None) -> ScheduledRun:
    """Simulate ``dag`` on the scheduled fabric of ``f``; ``paths`` as routed by
    :func:`aifabric.sim.paths.route_dag` (``policy: spray``), ``nic`` the scenario's
    ``packet.nic`` (frame sizes). A run estimated above ``max_events`` events
    (:func:`estimate_scheduled_events`; None: no limit) is refused before it starts."""
    est = estimate_scheduled_events(dag, f, paths, xfer_conn, nic)
    if max_events is not None and est["events"] > max_events:
        raise SpecError(Problem("--max-events", (
            f"this cell-level run is estimated at {est['events']:.3g} events "
            f"({est['frames']:.3g} frames through the edges, {est['cells']:.3g} cells "
            f"over the fabric), above the limit of {max_events:.3g} (roughly "
            f"{_duration(est['events'] / 1e6)} at ~1 M events/s); shrink the run: "
            "smaller size_bytes, fewer GPUs or hosts, fewer repeats, larger cells "
            "(scheduled.cell_bytes), the flow-level closed form (--sim flow), or raise "
            "--max-events")))
    net = ScheduledNet(f, mtu=int(nic.mtu_payload_bytes), header=int(nic.header_bytes),
                       wire=int(nic.wire_overhead_bytes))
    d = _Driver(dag, net, paths, xfer_conn, progress, f)
    d.run(None if until_ns is None else int(until_ns * PS_PER_NS))
    cap = f.arcs[2]
    arc_bytes = np.zeros(len(cap))
    arc_bytes[net.fabric_arcs] = net.AP[net.fabric_arcs, L.A_TXB]
    arc_bytes[net.up_arc] = net.HP[:, L.H_TXB]
    arc_bytes[net.dn_arc] = net.HP[:, L.H_RXB]
    end = float(np.nanmax(d.st_end)) if np.isfinite(d.st_end).any() else net.now_ps / PS_PER_NS
    peak = np.minimum(arc_bytes * 8 / max(end, 1e-9), cap)  # the mean rate over the run
    group = np.zeros(len(cap), dtype=np.int64) if arc_group is None else arc_group
    tg = np.bincount(group, weights=arc_bytes, minlength=n_groups).reshape(1, -1)
    bott = np.where(np.isfinite(d.x_end), net.dn_arc[d.x_dport], -1).astype(np.int64)
    m = net.metrics()
    m["estimated_events"] = int(est["events"])
    m["invariants"] = {"bytes_sent": int(net.FL[:net.n_flows, L.L_SIZE].sum()),
                       "bytes_delivered": int(net.FL[:net.n_flows, L.L_RX].sum())}
    return ScheduledRun(
        d.st_start, d.st_end, d.x_start, d.x_end,
        np.where(np.isfinite(d.x_minr), d.x_minr, np.nan), bott, arc_bytes, peak,
        np.array([[0.0, end]]), tg, net.events, 0, 0, metrics=m, flows=d.flow_table())


class _Driver(StageBook):
    """Starts stages when their dependencies are done, their transfers as flows of the
    net (a transfer split evenly over its connection's QPs), repeats them, and records
    stage and transfer times (ns)."""

    def __init__(self, dag: TransferDAG, net: ScheduledNet, paths: Paths,
                 xfer_conn: np.ndarray, progress: Callable[[int], None] | None,
                 f: Fabric) -> None:
        super().__init__(dag, progress)
        T = dag.n_transfers
        self.net = net
        self.conn_ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
        self.xfer_conn = np.asarray(xfer_conn, dtype=np.int64)
        self.sport, self.dport, self.inside, self.inside_gbps = flow_ports(f, net, paths)
        first = self.conn_ptr[self.xfer_conn] if T else np.zeros(0, dtype=np.int64)
        self.x_dport = self.dport[first] if T else np.zeros(0, dtype=np.int64)
        self.x_left = np.zeros(T, dtype=np.int64)
        self.x_lat = np.zeros(T, dtype=np.int64)
        self.flow_of: list[tuple[int, int, int]] = []  # flow -> (stage, transfer, row)
        self.conn_lat = np.asarray(paths.latency_ns, dtype=np.float64)
        # (time ps, seq, stage, what): a compute stage's end (what -1), the end of flow
        # ``what`` inside one host (it never reaches the network), or transfer x's
        # delivery after the hops inside its hosts (what -2 - x)
        self.timers: list[tuple[int, int, int, int]] = []
        self.seq = 0
        net.on_done = self.flow_done

    def run(self, limit: int | None) -> None:
        for s in np.flatnonzero(self.npred == 0):
            self.start(int(s))
        lim = (1 << 62) if limit is None else limit
        net = self.net
        while self.stages_left > 0:
            nxt = self.timers[0][0] if self.timers else lim
            r = net.run(min(nxt, lim), once=True)
            if r == L.R_FLOWDONE:
                continue  # (a flow's end may have started a compute stage: new timer)
            if self.timers and (r == L.R_EMPTY or net.now_ps >= self.timers[0][0]):
                t, _, s, fl = heapq.heappop(self.timers)
                net.G[L.NOW] = max(net.now_ps, t)
                if fl >= 0:  # a flow inside one host is done
                    net.FL[fl, L.L_RX] = net.FL[fl, L.L_SIZE]
                    net.FL[fl, L.L_DONE] = net.now_ps
                    self.flow_done(fl)
                elif fl == -1:  # a compute stage is done
                    self.finish_rep(s)
                else:  # a transfer has crossed its last hops inside the host
                    self.delivered(s, -2 - fl)
                continue
            break  # the limit, or nothing left to happen

    def now_ns(self) -> float:
        return self.net.now_ps / PS_PER_NS

    def start(self, s: int) -> None:
        dag, net = self.dag, self.net
        t = self.begin(s)
        if dag.stage_kind[s] == COMPUTE:
            self.seq += 1
            heapq.heappush(self.timers, (net.now_ps + int(dag.duration_ns[s] * PS_PER_NS),
                                         self.seq, s, -1))
            return
        n = 0
        for x in range(int(dag.xfer_ptr[s]), int(dag.xfer_ptr[s + 1])):  # one stage
            c = int(self.xfer_conn[x])
            rows = range(int(self.conn_ptr[c]), int(self.conn_ptr[c + 1]))
            size = round(float(dag.size_bytes[x]))
            k = len(rows)
            if np.isnan(self.x_start[x]):
                self.x_start[x] = t
            self.x_left[x] = k
            self.x_lat[x] = 0
            for j, r in enumerate(rows):
                part = size // k + (1 if j < size % k else 0)
                self.flow_of.append((s, x, r))
                if self.sport[r] < 0:  # inside one host (NVLink, PCIe): its own rate
                    fl = net.add_local_flow(part)
                    self.seq += 1
                    dt = part * 8 / self.inside_gbps[r] if part > 0 else 0.0
                    heapq.heappush(self.timers, (net.now_ps + round(dt * PS_PER_NS),
                                                 self.seq, s, fl))
                    continue
                fl = net.add_flow(int(self.sport[r]), int(self.dport[r]), part)
                if part <= 0:
                    self.flow_done(fl)
            n += 1
        self.outstanding[s] = n
        if n == 0:
            self.finish_rep(s)

    def flow_done(self, fl: int) -> None:
        s, x, r = self.flow_of[fl]
        self.x_lat[x] = max(self.x_lat[x], int(self.inside[r]))
        self.x_left[x] -= 1
        if self.x_left[x]:
            return
        if self.x_lat[x] > 0:  # the last hops inside the host: delivered that much later
            self.seq += 1
            heapq.heappush(self.timers, (self.net.now_ps + int(self.x_lat[x]), self.seq, s,
                                         -2 - x))
            return
        self.delivered(s, x)

    def stage_end_ns(self, s: int) -> float:
        """Its last transfer's delivery (a transfer's last hops inside its hosts end
        after the flow that finished the stage)."""
        ends = self.x_end[int(self.dag.xfer_ptr[s]):int(self.dag.xfer_ptr[s + 1])]
        return float(np.nanmax(ends)) if len(ends) else self.now_ns()

    def flow_table(self) -> dict[str, np.ndarray]:
        """One row per flow (QP): its stage and transfer, ports, times and slowdown."""
        fl = self.net.flows()
        n = len(fl["size_bytes"])
        st = np.array([v[0] for v in self.flow_of[:n]], dtype=np.int64)
        xf = np.array([v[1] for v in self.flow_of[:n]], dtype=np.int64)
        net = self.net
        rows = np.array([v[2] for v in self.flow_of[:n]], dtype=np.int64)
        conn = np.searchsorted(self.conn_ptr, rows, side="right") - 1
        sp_, dp_ = fl["src_port"], fl["dst_port"]
        local = sp_ < 0
        nodes = net.f.nodes.name
        pn = net.port_node
        gs = nodes[self.dag.src[xf]] if n else np.zeros(0, dtype=object)
        gd = nodes[self.dag.dst[xf]] if n else np.zeros(0, dtype=object)
        src = np.where(local, gs, nodes[pn[np.maximum(sp_, 0)]]).astype(object)
        dst = np.where(local, gd, nodes[pn[np.maximum(dp_, 0)]]).astype(object)
        fct = fl["done_ns"] - fl["start_ns"] + self.inside[rows] / PS_PER_NS
        # the idle path: every frame's wire bytes at the sender's rate plus the path's
        # latency (hosts included, and one request-grant time); inside one host: the
        # bytes at the slowest hop plus the hops' latency
        size = fl["size_bytes"].astype(np.float64)
        frames = np.ceil(size / net.mtu)
        wire = size + frames * (net.header + net.wire)
        ppb = net.PPBH[np.maximum(sp_, 0)] / PS_PER_NS
        lat = self.conn_lat[conn] if n else np.zeros(0)
        ideal = np.where(local, size * 8 / self.inside_gbps[rows] + lat, wire * ppb + lat)
        return {"qp": np.arange(n), "stage": st, "transfer": xf,
                "src": src, "dst": dst,
                "size_bytes": fl["size_bytes"], "start_ns": fl["start_ns"],
                "first_tx_ns": fl["first_tx_ns"], "last_rx_ns": fl["done_ns"],
                "fct_ns": fct, "ideal_ns": ideal,
                "slowdown": fct / np.where(ideal > 0, ideal, np.nan)}


def attach_scheduled_results(res: Any, run: ScheduledRun, f: Fabric) -> Any:
    """Add the scheduled fabric's figures (``summary["scheduled"]``), its flows
    (``packet_fct``) and the packet summary every packet run has (``summary["packet"]``:
    no drop, ECN mark or CNP; the PFC frames and paused time toward the hosts) to the
    result ``res``; returns it."""
    from aifabric.sim.packet.results import fct_summary

    m = run.metrics
    sch = f.spec.scheduled
    assert sch is not None
    res.summary["routing"]["policy"] = "scheduled"
    res.summary["scheduled"] = {
        "model": "packet: VOQs, credit grants, cells sprayed, egress reorder",
        "cell_bytes": sch.cell_bytes, "cell_header_bytes": sch.cell_header_bytes,
        "speedup": sch.speedup, "spray": sch.spray, **m}
    res.tables["packet_fct"] = dict(run.flows)
    pz = m["pfc_to_hosts"]
    res.summary["packet"] = {
        "drops": 0, "retx_bytes": 0, "ecn_marks": 0, "cnps": 0,
        "pfc_frames": 2 * pz["pauses"], "pause_ns": pz["paused_ns"], "alarms": [],
        "deadlocks": [], "estimated_events": m["estimated_events"], "paused_queues": 0,
        "max_pause_ratio": 0.0, "longest_pause_ns": 0.0, "pauses": [],
        "fct": fct_summary(run.flows)}
    return res

