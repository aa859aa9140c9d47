"""Run a transfer DAG packet by packet on a Fabric: the ``sim: packet`` simulator.

The same routed paths as the flow engine (:func:`aifabric.sim.paths.route_dag`): each
flow (QP) of a connection follows its arcs, cut to the NIC-to-NIC part (GPU-NIC PCIe hops
are not simulated packet by packet); a transfer is split evenly over its connection's
QPs; a stage starts when its dependencies are done, repeats ``repeat`` times, and is done
when the last byte of every transfer has been delivered. The result is a
:class:`PacketRun` — the raw arrays :func:`aifabric.sim.results.build_result` reads,
plus time series, counters, deadlocks and alarm lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.sim.flow.engine import FlowRun, Paths
from aifabric.sim.limits import DEFAULT_MAX_EVENTS  # (its home: one limit for every caller)
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.engine import PS_PER_NS
from aifabric.sim.packet.network import QP, SwitchBuffers
from aifabric.sim.packet.sim import PacketSim
from aifabric.sim.packet.stages import StageBook
from aifabric.topology.fabric import Fabric, NodeKind
from aifabric.workload.dag import COMPUTE, TransferDAG

__all__ = ["DEFAULT_MAX_EVENTS", "PacketRun", "ack_routes", "estimate_events", "flow_headers",
           "flow_routes", "lb_config", "route_hops", "run_packet"]

#: events per data frame and (hop + 1), measured on incasts and permutations (1.28-1.41):
#: an arrival per hop, a transmission-done per busy port, the NIC's own
EVENTS_PER_FRAME_HOP = 1.35
#: events per QP besides its frames: its start, retransmission timers, CC timers
EVENTS_PER_QP = 4


@dataclass
class PacketRun(FlowRun):
    """A :class:`FlowRun` plus what only a packet simulator sees."""

    port_series: dict[str, np.ndarray] = field(default_factory=dict)
    qp_series: dict[str, np.ndarray] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=dict)
    deadlocks: list[dict[str, Any]] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)
    arc_names: dict[int, str] = field(default_factory=dict)
    pauses: dict[str, np.ndarray] = field(default_factory=dict)
    estimate: dict[str, float] = field(default_factory=dict)
    #: one row per QP (:meth:`PacketSim.fct`) plus its ``stage`` and ``transfer``
    fct: dict[str, np.ndarray] = field(default_factory=dict)
    #: per flow row of the paths: the arcs its ACKs, NAKs and CNPs took back
    ack_routes: list[tuple[int, ...]] = field(default_factory=list)
    #: each QP's reorder distance distribution (:meth:`PacketSim.reorder_histogram`;
    #: empty when reordering is not reported)
    reorder: dict[str, np.ndarray] = field(default_factory=dict)
    #: InfiniBand: per (port, VL) the time without credit
    #: (:func:`aifabric.sim.packet.ibmodel.credit_waits`; empty on RoCE)
    credit_waits: dict[str, np.ndarray] = field(default_factory=dict)


def flow_routes(f: Fabric, paths: Paths) -> list[tuple[int, ...]]:
    """The arcs of every flow row of ``paths``, source to destination, cut to the part
    between the first and the last NIC. A row that splits (spraying) follows its
    heaviest branch at each node."""
    src, dst, _ = f.arcs
    kind = f.nodes.kind
    inc = paths.incidence.tocsr()
    # plain lists: the walk below looks arcs up one at a time (numpy scalars and enum
    # comparisons per arc cost ~10x more)
    srcl, dstl = src.tolist(), dst.tolist()
    from_nic = (kind[src] == NodeKind.NIC).tolist()
    to_nic = (kind[dst] == NodeKind.NIC).tolist()
    ptr = inc.indptr.tolist()
    out = []
    for r in range(inc.shape[0]):  # flows of a packet run
        arcs = inc.indices[ptr[r]:ptr[r + 1]].tolist()
        w = inc.data[ptr[r]:ptr[r + 1]].tolist()
        heads = {dstl[a] for a in arcs}
        start = [a for a in arcs if srcl[a] not in heads]
        nxt: dict[int, tuple[float, int]] = {}
        for a, x in zip(arcs, w, strict=True):
            s = srcl[a]
            if s not in nxt or x > nxt[s][0]:
                nxt[s] = (x, a)
        node = srcl[start[0]] if start else srcl[arcs[0]]
        route: list[int] = []
        seen = set()
        while node in nxt and node not in seen:
            seen.add(node)
            a = nxt[node][1]
            route.append(a)
            node = dstl[a]
        nic = [i for i, a in enumerate(route) if from_nic[a]]
        if nic:
            # (a SHARP placeholder, one arc out of a NIC: kept whole)
            last = max((i for i, a in enumerate(route) if to_nic[a]), default=len(route) - 1)
            route = route[nic[0]:last + 1]
        out.append(tuple(route))
    return out


def ack_routes(f: Fabric, dag: TransferDAG, routes: list[tuple[int, ...]],
               routing: Any = None, *, failures: Any = None, seed: int = 0,
               pinned: Any = None) -> tuple[list[tuple[int, ...] | None], dict[str, int]]:
    """The return route of every flow row (QP) of a packet run whose data routes are
    ``routes`` (:func:`flow_routes` of :func:`aifabric.sim.paths.route_dag` called with
    the same ``routing``, ``failures``, ``seed`` and ``pinned``): the route the fabric
    gives the QP's return 5-tuple, cut NIC to NIC; None where the data route reversed is
    used instead.

    The return 5-tuple is the data's with the IPs swapped and the same UDP source port:
    a RoCE NIC derives a QP's source port from its flow label, and with none set Linux
    (``rdma_calc_flow_label(lqpn, rqpn)``, mlx5) folds the product of the two QP numbers,
    so requester and responder pick the same port. It leaves the receiving NIC port and
    is routed by :func:`aifabric.routing.route` in one call for all QPs (the policy, its
    hash seeds and failures as for the data; ``source_port``: the responder's host steers
    its own QP the same way; ``adaptive``: the return flows are balanced among
    themselves; ``spray``: the heaviest branch, as for data). The reversed data route is
    kept, and counted, for: same-host flows (``local``: NVLink, no network), pinned
    connections, and a return route whose hop count differs from the data route's (the
    compiled loop walks both with one count; a guard: links fail in both directions, so
    shortest-path routing gives both ways the same length) or that does not come back to
    the sender's NIC.

    Returns the routes and counts: ``qps``, ``hashed`` (given a route of their own),
    ``same_as_reverse`` (of those, equal to the reversed data route), ``local``,
    ``fallback_pinned``, ``fallback_hops``, ``fallback_other``."""
    from aifabric.routing.flows import FlowSet, make_flows
    from aifabric.routing.hostside import host_side
    from aifabric.routing.route import route, via_gpu
    from aifabric.sim.paths import _pinned_connections, connections

    pol = routing if routing is not None else f.spec.routing
    n = len(routes)
    out: list[tuple[int, ...] | None] = [None] * n
    info = {"qps": n, "hashed": 0, "same_as_reverse": 0, "local": 0, "fallback_pinned": 0,
            "fallback_hops": 0, "fallback_other": 0}
    src, dst, xconn = connections(dag)
    Q = int(pol.qps_per_connection)
    if not n or n != len(src) * Q:  # not the rows route_dag makes: keep them reversed
        info["fallback_other"] = n
        return out, info
    # exactly as route_dag routes the connections that are not pinned
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    conn_bytes = np.maximum(np.bincount(xconn, weights=moved, minlength=len(src)), 1)
    pin_of = _pinned_connections(src, dst, pinned)
    free = np.arange(len(src)) if pin_of is None else np.flatnonzero(pin_of < 0)
    info["fallback_pinned"] = (len(src) - len(free)) * Q
    if not len(free):
        return out, info
    flows = make_flows(f, src[free], dst[free], conn_bytes[free].astype(np.int64),
                       qps_per_connection=Q, nic_port_choice=pol.nic_port_choice, seed=seed)
    kw: dict[str, Any] = {} if failures is None else {"failures": failures}
    fwd = route(f, flows, pol, **kw)
    row = free[flows.conn] * Q + flows.qp  # route_dag's rows: connection-major
    fl = fwd.flows
    local = (fl.src_nic < 0) | (fl.dst_nic < 0)  # same host: NVLink, no network
    net = ~local & ~fwd.unreachable
    idx = np.flatnonzero(net)
    info["local"] = int(local.sum())
    info["fallback_other"] += int((~net & ~local).sum())
    if not len(idx):
        return out, info
    hs = host_side(f)
    back_gpu = via_gpu(f, hs, fl.src_gpu[idx], f.nodes.rail[fl.src_nic[idx]].astype(np.int64))
    rev = FlowSet(src_gpu=fl.dst_gpu[idx], dst_gpu=back_gpu, conn=fl.conn[idx], qp=fl.qp[idx],
                  src_nic=fl.dst_nic[idx], dst_nic=fl.src_nic[idx], src_ip=fl.dst_ip[idx],
                  dst_ip=fl.src_ip[idx], sport=fl.sport[idx], dport=fl.dport[idx],
                  proto=fl.proto[idx], size_bytes=fl.size_bytes[idx])
    back = route(f, rev, pol, **kw)
    fwd_routes = _nic_to_nic(f, fwd)
    back_routes = _nic_to_nic(f, back)
    src_a, dst_a, _ = f.arcs
    host, rail = f.nodes.host, f.nodes.rail
    for j, i in enumerate(idx.tolist()):  # QPs of a packet run: thousands at most
        r = int(row[i])
        data, ret = routes[r], back_routes[j]
        if fwd_routes[i] != data or back.unreachable[j] or not ret or not data:
            info["fallback_other"] += 1
        elif len(ret) != len(data):
            info["fallback_hops"] += 1
        elif (int(src_a[ret[0]]) != int(dst_a[data[-1]])
              or host[dst_a[ret[-1]]] != host[src_a[data[0]]]
              or rail[dst_a[ret[-1]]] != rail[src_a[data[0]]]):
            info["fallback_other"] += 1
        else:
            out[r] = ret
            info["hashed"] += 1
            info["same_as_reverse"] += ret == tuple(a ^ 1 for a in reversed(data))
    return out, info


def flow_headers(f: Fabric, dag: TransferDAG, n_rows: int, routing: Any = None, *,
                 failures: Any = None, seed: int = 0, pinned: Any = None
                 ) -> list[tuple[int, int, int] | None]:
    """The header the switches hash of every flow row (QP) of a packet run routed by
    :func:`aifabric.sim.paths.route_dag` with the same ``routing``, ``failures``,
    ``seed`` and ``pinned``: (source IP, destination IP, UDP source port), the port as
    the routing gave it (``source_port`` steers it); None for rows it cannot tell (pinned
    connections, rows route_dag did not make this way)."""
    from aifabric.routing.flows import make_flows
    from aifabric.routing.route import route
    from aifabric.sim.paths import _pinned_connections, connections

    pol = routing if routing is not None else f.spec.routing
    out: list[tuple[int, int, int] | None] = [None] * n_rows
    src, dst, xconn = connections(dag)
    Q = int(pol.qps_per_connection)
    if not n_rows or n_rows != len(src) * Q:
        return out
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    conn_bytes = np.maximum(np.bincount(xconn, weights=moved, minlength=len(src)), 1)
    pin_of = _pinned_connections(src, dst, pinned)
    free = np.arange(len(src)) if pin_of is None else np.flatnonzero(pin_of < 0)
    if not len(free):
        return out
    flows = make_flows(f, src[free], dst[free], conn_bytes[free].astype(np.int64),
                       qps_per_connection=Q, nic_port_choice=pol.nic_port_choice, seed=seed)
    kw: dict[str, Any] = {} if failures is None else {"failures": failures}
    fl = route(f, flows, pol, **kw).flows
    row = (free[flows.conn] * Q + flows.qp).tolist()
    for r, a, b, p in zip(row, fl.src_ip.tolist(), fl.dst_ip.tolist(), fl.sport.tolist(),
                          strict=True):  # QPs of a packet run: thousands at most
        out[r] = (int(a), int(b), int(p))
    return out


def _nic_to_nic(f: Fabric, routed: Any) -> list[tuple[int, ...]]:
    """:func:`flow_routes` of a :class:`~aifabric.routing.route.Routed`; for a
    single-path policy (its arcs in hop order) without the per-row walk: the arcs
    between network nodes (NICs and switches) of each path."""
    if routed.frac is not None:
        return flow_routes(f, routed)
    src, dst, _ = f.arcs
    net = f.nodes.kind >= NodeKind.NIC
    a = routed.arcs
    keep = net[src[a]] & net[dst[a]]
    cnt = np.bincount(routed.entry_flow[keep], minlength=len(routed)) if len(a) else \
        np.zeros(len(routed), dtype=np.int64)
    kept = a[keep].tolist()
    ends = np.cumsum(cnt).tolist()
    starts = [0, *ends[:-1]]
    return [tuple(kept[i:j]) for i, j in zip(starts, ends, strict=True)]


def route_hops(f: Fabric, paths: Paths) -> np.ndarray:
    """The arcs of each flow row's route as :func:`flow_routes` cuts it (NIC to NIC; the
    whole path when it has no NIC, as NVLink inside a host), from the flow x arc matrix
    alone: the row's weights on arcs between network nodes (a split row counts each
    branch by its share). Equal to ``len`` of :func:`flow_routes` for unsplit rows,
    without its loop over rows."""
    src, dst, _ = f.arcs
    kind = f.nodes.kind
    inc = paths.incidence.tocsr()
    a = inc.indices
    net = (kind[src[a]] >= NodeKind.NIC) & (kind[dst[a]] >= NodeKind.NIC)

    def per_row(w: np.ndarray) -> np.ndarray:
        c = np.concatenate([[0.0], np.cumsum(w, dtype=np.float64)])
        return c[inc.indptr[1:]] - c[inc.indptr[:-1]]

    h = per_row(np.where(net, inc.data, 0.0))
    return np.where(h > 0, h, per_row(inc.data))


def estimate_events(dag: TransferDAG, conn_ptr: np.ndarray, xfer_conn: np.ndarray,
                    route_len: np.ndarray, cfg: PacketConfig) -> dict[str, float]:
    """What a packet run of ``dag`` will cost, from arrays alone (before it runs):
    ``events`` (data frames x (hops + 1) x (1 + ACKs per frame) x
    :data:`EVENTS_PER_FRAME_HOP`, plus :data:`EVENTS_PER_QP` per QP; every repetition of
    a stage counted), and the ``bytes``, ``frames`` and mean ``hops`` it comes from.
    ``route_len[r]`` is the number of arcs of flow row r (:func:`route_hops`); a transfer
    is split evenly over its connection's rows (QPs). Retransmissions after drops are not
    foreseen: a lossy run can take more."""
    conn_ptr = np.asarray(conn_ptr, dtype=np.int64)
    xc = np.asarray(xfer_conn, dtype=np.int64)
    if dag.n_transfers == 0 or len(xc) == 0:
        return {"events": 0.0, "bytes": 0.0, "frames": 0.0, "hops": 0.0}
    reps = dag.repeat[dag.xfer_stage].astype(np.float64)
    lo, hi = conn_ptr[xc], conn_ptr[xc + 1]
    k = np.maximum(hi - lo, 1).astype(np.float64)  # QPs per transfer
    cs = np.concatenate([[0.0], np.cumsum(np.asarray(route_len, dtype=np.float64) + 1)])
    hop1 = (cs[hi] - cs[lo]).astype(np.float64)  # sum over its QPs of (hops + 1)
    size = np.asarray(dag.size_bytes, dtype=np.float64)
    per_qp = np.ceil(size / k / cfg.nic.mtu_payload_bytes)  # data frames of one QP
    acks = 1.0 + 1.0 / cfg.nic.ack_interval_packets
    frames = float(np.sum(reps * per_qp * k))
    rx = 1.0 if cfg.nic.rx_gbps is not None else 0.0  # a receive drain: its end per frame
    ev = float(np.sum(reps * (per_qp * hop1 * acks * EVENTS_PER_FRAME_HOP + per_qp * k * rx
                              + k * EVENTS_PER_QP)))
    return {"events": ev, "bytes": float(np.sum(reps * size)), "frames": frames,
            "hops": float(np.sum(reps * per_qp * hop1)) / frames - 1 if frames else 0.0}


def _refuse(est: dict[str, float], limit: float) -> SpecError:
    return SpecError(Problem("--max-events", (
        f"this packet run is estimated at {est['events']:.3g} events ({est['bytes']:.3g} "
        f"bytes in {est['frames']:.3g} data frames over {est['hops']:.1f} hops on average, "
        f"and their ACKs), above the limit of {limit:.3g} (roughly "
        f"{est['events'] / 1.3e6 / 60:.0f} min at ~1.3 M events/s); shrink the run: smaller "
        "size_bytes, fewer GPUs or hosts, fewer repeats or iterations, a larger "
        "packet.nic.mtu_payload_bytes, the flow-level simulator (--sim flow), or raise "
        "--max-events")))


def run_packet(dag: TransferDAG, f: Fabric, paths: Paths, xfer_conn: np.ndarray,
               cfg: PacketConfig, *, arc_group: np.ndarray | None = None, n_groups: int = 1,
               progress: Callable[[int], None] | None = None,
               max_events: float | None = DEFAULT_MAX_EVENTS,
               events_progress: Callable[[int, int], None] | None = None,
               routing: Any = None, failures: Any = None, seed: int = 0,
               pinned: Any = None, sharp: Any = None) -> PacketRun:
    """Simulate ``dag`` packet by packet; ``xfer_conn[i]`` is the connection of transfer
    i in ``paths``, routed by :func:`aifabric.sim.paths.route_dag` with ``routing``
    (None: the spec's), ``failures``, ``seed`` and ``pinned``: with
    ``packet.nic.ack_path: hashed`` the ACKs of each QP are routed with them too
    (:func:`ack_routes`); ``reverse``: they retrace the data route.

    Before anything runs, the run's events are estimated (:func:`estimate_events`): above
    ``max_events`` (None: no limit) it is refused with a :class:`SpecError` that says how
    to shrink it. ``events_progress(done, estimate)`` is called once with 0 before the
    run, then every 0.1-0.5 s of wall time while it runs (a progress bar with an ETA).

    ``sharp``: the SHARP stages (:class:`aifabric.sim.packet.sharp.SharpPlan`), run on
    aggregation units in the switches instead of their placeholder transfers."""
    src, dst, cap = f.arcs
    est = estimate_events(dag, paths.conn_ptr, xfer_conn, route_hops(f, paths), cfg)
    if sharp is not None:  # the chunks of every tree edge, not the placeholders
        est["events"] += sharp.extra_events(dag, cfg, EVENTS_PER_FRAME_HOP)
    if max_events is not None and est["events"] > max_events:
        raise _refuse(est, max_events)
    routes = flow_routes(f, paths)
    if sharp is None:
        backs, rev_routes, ack_info = _return_routes(f, dag, routes, cfg, routing,
                                                     failures=failures, seed=seed,
                                                     pinned=pinned)
    else:  # the SHARP transfers' rows (the last ones, one arc each) are not GPU pairs
        backs, rev_routes, ack_info = _sharp_return_routes(f, dag, routes, cfg, routing,
                                                           sharp, failures=failures,
                                                           seed=seed, pinned=pinned)
    ib = _ib_link(f, cfg, dag)
    if ib is not None:  # no PFC, no WRED; ibcc unless none (simulate refuses a RoCE CC)
        from aifabric.sim.packet.ibmodel import ib_packet_config

        cfg = ib_packet_config(cfg, explicit_cc=cfg.cc.algorithm in ("ibcc", "none"))
    if ib is not None and ib.adaptive and cfg.lb.mode is None:  # AR: per packet
        cfg = cfg.model_copy(update={"lb": cfg.lb.model_copy(update={"mode": "adaptive"})})
    cfg = lb_config(cfg, routing if routing is not None else f.spec.routing)
    pol = routing if routing is not None else f.spec.routing
    sim = _make_sim(f, cfg, routes, rev_routes, failures, pol, ib, sharp=sharp)
    headers: list[tuple[int, int, int] | None] = [None] * len(routes)
    if cfg.nic.entropy.algorithm != "fixed":
        headers = flow_headers(f, dag, len(routes), pol, failures=failures, seed=seed,
                               pinned=pinned)
    if events_progress is not None:
        total = int(est["events"])
        events_progress(0, total)
        sim.progress = lambda done: events_progress(done, total)
    drive = _DagDriver(dag, sim, routes, backs, np.asarray(paths.conn_ptr, dtype=np.int64),
                       xfer_conn, progress)
    drive.headers = headers
    drive.sharp = sharp
    if ib is not None and cfg.ib_sl:  # each job's, collective's, traffic entry's SL
        drive.stage_sl = stage_sls(dag, cfg.ib_sl)
    drive.run()
    arc_bytes, peak, q_peak = _arc_totals(sim, cap)
    tl, tg = _timeline(sim, len(cap), arc_group, n_groups)
    names = f.nodes.name
    dr = drive
    ib_out: dict[str, Any] = {}
    waits: dict[str, np.ndarray] = {}
    if ib is not None:
        from aifabric.sim.packet.ibmodel import credit_waits, summary

        ib_out = {"infiniband": summary(sim, ib)}
        waits = credit_waits(sim)
    if sharp is not None:
        ib_out["sharp"] = sharp.summary()
    return PacketRun(
        dr.st_start, dr.st_end, dr.x_start, dr.x_end,
        np.where(np.isfinite(dr.x_minr), dr.x_minr, np.nan),
        _bottlenecks(routes, dr.conn_ptr, xfer_conn, q_peak, dag.n_transfers),
        arc_bytes, peak, tl, tg,
        sim.events, 0, 0, port_series=sim.port_series(), qp_series=sim.qp_series(),
        counters={**sim.counters(), "ack_paths": {"mode": cfg.nic.ack_path, **ack_info},
                  **ib_out},
        ack_routes=rev_routes, deadlocks=[{k: v for k, v in d.items() if k != "arcs_set"}
                                            for d in sim.deadlocks],
        alarms=sim.alarms(), pauses=sim.pauses(), estimate=est, fct=_fct_table(sim),
        reorder=sim.reorder_histogram() if sim.reports_reorder else {},
        arc_names={a: f"{names[src[a]]} -> {names[dst[a]]}" if a < len(cap) else
                   f"{sim.names[p.src]} -> {sim.names[p.dst]}"
                   for a, p in sim.net.ports.items()},
        credit_waits=waits)


def _ib_link(f: Fabric, cfg: PacketConfig, dag: TransferDAG) -> Any:
    """InfiniBand's link model of ``f`` (:class:`aifabric.sim.packet.ibmodel.IbLink`
    from its spec's ``infiniband`` block, with the SLs of ``packet.ib_sl``), or None on
    RoCE. ``ib_sl`` naming nothing of the run (:func:`stage_sls`), or on RoCE, is
    refused."""
    ib_on = getattr(f.spec, "transport", "roce") == "infiniband"
    if cfg.ib_sl:
        if not ib_on:
            raise SpecError(Problem("packet.ib_sl", "service levels are InfiniBand's; "
                                    "allowed on this RoCE fabric: none (nic.dscp sets "
                                    "the traffic class)"))
        stage_sls(dag, cfg.ib_sl)
    if not ib_on:
        return None
    from aifabric.sim.packet.ibmodel import IbLink, arc_port_numbers

    ib = f.spec.infiniband
    link = IbLink.from_spec(ib, sls=[ib.nccl_sl, *cfg.ib_sl.values()])
    if cfg.cc.ibcc.victim_ports:  # port numbers: OpenSM's numbering
        link.arc_port = arc_port_numbers(f)
    return link


def _sl_key(name: str) -> str:
    """The ``packet.ib_sl`` key of a scenario collective's name in the DAG: a traffic
    entry's ``traffic.<i>``, a repeated collective's name without ``#<r>``."""
    if name.startswith("traffic."):
        return name.split(" ", 1)[0]
    base, _, r = name.rpartition("#")
    return base if base and r.isdigit() else name


def stage_sls(dag: TransferDAG, ib_sl: dict[str, int]) -> list[int | None]:
    """The InfiniBand SL of each stage's QPs from ``packet.ib_sl`` (None: the default
    ``infiniband.nccl_sl``). A key names a job (its every transfer, collectives inside
    it included), a collective of the scenario (its ``name``, or ``<op>-<i>`` for an
    unnamed ``collectives[i]``; every repetition) or a traffic entry (``traffic.<i>``);
    a collective's or traffic entry's SL is used over its job's. A key naming nothing,
    or both a job and a collective, is refused (one line, the key)."""
    keys = [_sl_key(x.name) if x.job < 0 else None for x in dag.collectives]
    by_job: dict[int, int] = {}
    by_coll: dict[int, int] = {}
    for key, sl in ib_sl.items():
        colls = [c for c, k in enumerate(keys) if k == key]
        if key in dag.jobs and colls:
            raise SpecError(Problem(f"packet.ib_sl.{key}", (
                f"{key!r} names both a job and a collective; allowed: a name of one "
                "(rename one of them)")))
        if key in dag.jobs:
            by_job[dag.jobs.index(key)] = sl
        elif colls:
            by_coll.update(dict.fromkeys(colls, sl))
        else:
            names = [*dag.jobs, *dict.fromkeys(k for k in keys if k is not None)]
            raise SpecError(Problem(f"packet.ib_sl.{key}", (
                f"no job, collective or traffic entry named {key!r} in this run; "
                f"allowed: {', '.join(names) or 'none'}")))
    coll_of = np.asarray(dag.stage_coll, dtype=np.int64)
    out: list[int | None] = []
    for s, j in enumerate(dag.stage_job.tolist()):
        c = int(coll_of[s])
        out.append(by_coll[c] if c in by_coll else by_job.get(j) if j >= 0 else None)
    return out


def _return_routes(f: Fabric, dag: TransferDAG, routes: list[tuple[int, ...]],
                   cfg: PacketConfig, routing: Any, **kw: Any
                   ) -> tuple[list[tuple[int, ...] | None], list[tuple[int, ...]],
                              dict[str, int]]:
    """The ACK routes of every QP: their own (:func:`ack_routes`, ``ack_path: hashed``) or
    None, the route each one takes (the data route reversed where None) and the counts."""
    if cfg.nic.ack_path == "hashed":
        backs, ack_info = ack_routes(f, dag, routes, routing, **kw)
    else:
        backs = [None] * len(routes)
        ack_info = {"qps": len(routes), "hashed": 0, "same_as_reverse": 0, "local": 0,
                    "fallback_pinned": 0, "fallback_hops": 0, "fallback_other": 0}
    rev_routes = [b if b is not None else tuple(a ^ 1 for a in reversed(r))
                  for r, b in zip(routes, backs, strict=True)]
    return backs, rev_routes, ack_info


def _sharp_return_routes(f: Fabric, dag: TransferDAG, routes: list[tuple[int, ...]],
                         cfg: PacketConfig, routing: Any, sharp: Any, **kw: Any
                         ) -> tuple[list[tuple[int, ...] | None], list[tuple[int, ...]],
                                    dict[str, int]]:
    """:func:`_return_routes` of a run with SHARP stages: the routes of the DAG's other
    transfers as usual (and only they counted), the SHARP transfers' rows, one per tree
    arc and appended last by :func:`aifabric.sim.run._sharp_paths`, on their arc's
    reverse (their chunk QPs' ACKs retrace them)."""
    from aifabric.sim.sharp import without_sharp

    sub, _ = without_sharp(dag, sharp.arcs)
    k = len(routes) - sum(len(a) for a in sharp.arcs.values())
    backs, rev, info = _return_routes(f, sub, routes[:k], cfg, routing, **kw)
    return (backs + [None] * (len(routes) - k),
            rev + [tuple(a ^ 1 for a in reversed(r)) for r in routes[k:]], info)


def lb_config(cfg: PacketConfig, routing: Any) -> PacketConfig:
    """``cfg`` with ``packet.lb.mode`` resolved: when unset, the routing policy's
    packet-level counterpart (``spray`` -> spray, ``adaptive`` -> adaptive, any other ->
    ecmp: each flow on its route)."""
    if cfg.lb.mode is not None:
        return cfg
    pol = getattr(routing, "policy", "ecmp")
    mode = pol if pol in ("spray", "adaptive") else "ecmp"
    return cfg.model_copy(update={"lb": cfg.lb.model_copy(update={"mode": mode})})


def _make_sim(f: Fabric, cfg: PacketConfig, routes: list[tuple[int, ...]],
              rev_routes: list[tuple[int, ...]], failures: Any = None,
              routing: Any = None, ib: Any = None, sharp: Any = None) -> PacketSim:
    """The packet simulator of ``f`` with ports on the arcs of the routes and the
    switches' buffers of :func:`switch_buffers`; with ``packet.lb`` spray or adaptive,
    or NIC-side spraying (``nic.entropy``), the Fabric's ECMP groups toward every
    destination of the routes (the failed links removed) and ports on all their arcs;
    with NIC-side spraying the switches' hash of ``routing``."""
    from aifabric.routing.failover import live_links
    from aifabric.sim.packet.lb import fabric_groups
    from aifabric.sim.paths import arc_latency_ns

    src, dst, cap = f.arcs
    used = {a for r in routes for a in r} | {a for r in rev_routes for a in r}
    lb = ent = None
    ev_on = cfg.nic.entropy.algorithm != "fixed"
    if cfg.lb.mode in ("spray", "adaptive") or ev_on:
        ends = [r[-1] for r in routes if r] + [r[-1] for r in rev_routes if r]
        dests = dst[np.asarray(ends, dtype=np.int64)] if ends else np.zeros(0, np.int64)
        lb = fabric_groups(f, dests[f.nodes.kind[dests] == NodeKind.NIC],
                           live_links(f, failures))
        used |= set(lb.used_arcs.tolist())
    if ev_on:
        from aifabric.sim.packet.entropy import EntropyHash

        ent = EntropyHash.build(f.n_nodes, routing if routing is not None else
                                f.spec.routing)
    kind = f.nodes.kind
    is_host = (kind == NodeKind.NIC) | (kind == NodeKind.GPU)
    arrays = [src.tolist(), dst.tolist(), cap.tolist(), arc_latency_ns(f).tolist(),
              is_host.tolist(), [str(x) for x in f.nodes.name]]
    buffers = switch_buffers(f, cfg)
    if sharp is not None:  # the switches' aggregation units: end nodes on internal links
        from aifabric.sim.packet.sharp import with_units

        arrays, buffers = with_units(sharp.net, arrays, buffers)
        used |= set(sharp.extra_arcs())
    return PacketSim(cfg, arc_src=arrays[0], arc_dst=arrays[1], arc_gbps=arrays[2],
                     arc_delay_ns=arrays[3], is_host=arrays[4],
                     used_arcs=sorted(used), node_names=arrays[5],
                     buffers=buffers, lb=lb, entropy=ent, ib=ib)


def switch_buffers(f: Fabric, cfg: PacketConfig) -> SwitchBuffers:
    """The switch buffers of a packet run on ``f``: the pools of
    :func:`aifabric.topology.buffers.buffer_plan` (the SONiC build's BUFFER_POOL and
    BUFFER_PG: each switch model's ``buffer_mb``, or ``packet.buffer.size_bytes`` for
    every switch; headroom from every cabled port's speed and cable, the switch latency,
    ``deploy.mtu.switch`` and ``deploy.qos.pfc_response_ns``, for each lossless
    priority). A switch whose buffer cannot hold its headroom pool plus one XOFF
    threshold (``pfc.xoff_bytes``) is refused with a :class:`SpecError` naming the switch
    model, the numbers and what would fit, unless ``pfc.allow_overcommit``."""
    from aifabric.topology.buffers import buffer_plan, buffer_problem

    dep = f.spec.deploy
    n_loss = len(set(cfg.pfc.priorities)) if cfg.pfc.enabled else 0
    plan = buffer_plan(f, n_loss, mtu_bytes=dep.mtu.switch,
                       response_ns=dep.qos.pfc_response_ns, buffer_bytes=cfg.buffer.size_bytes)
    if n_loss and cfg.pfc.headroom_bytes is None and not cfg.pfc.allow_overcommit:
        bad = buffer_problem(f, plan, cfg.pfc.xoff_bytes)
        if bad:
            n = int(np.argmax(plan.shortfall(cfg.pfc.xoff_bytes) > 0))
            field = "packet.buffer.size_bytes" if plan.source == "override" else \
                f"switch_models.{f.models[int(f.nodes.model[n])][0]}.buffer_mb"
            raise SpecError(Problem(field, f"{bad}; or packet.pfc.allow_overcommit: true to "
                                    "run it anyway and see the lossless drops"))
    links = f.links.latency_ns.astype(np.float64)
    return SwitchBuffers(node_buffer_bytes=plan.total_bytes,
                         node_reserved_bytes=plan.headroom_pool_bytes,
                         arc_headroom=plan.arc_xoff, arc_link_delay_ns=np.repeat(links, 2),
                         source=plan.source)


class _DagDriver(StageBook):
    """Runs a transfer DAG on a packet simulator: starts each stage when its
    dependencies are done (a compute stage as a timer, a transfer stage as QPs, a
    transfer split evenly over its connection's QPs), repeats it, and records stage and
    transfer times."""

    def __init__(self, dag: TransferDAG, sim: PacketSim, routes: list[tuple[int, ...]],
                 backs: list[tuple[int, ...] | None], conn_ptr: np.ndarray,
                 xfer_conn: np.ndarray, progress: Callable[[int], None] | None) -> None:
        super().__init__(dag, progress)
        T = dag.n_transfers
        self.sim, self.routes, self.backs = sim, routes, backs
        self.conn_ptr, self.xfer_conn = conn_ptr, xfer_conn
        self.x_qps_left = np.zeros(T, dtype=np.int64)
        self.x_rep_end = np.zeros(T)
        #: per flow row: the header the switches hash (NIC-side spraying; None: unknown)
        self.headers: list[tuple[int, int, int] | None] = [None] * len(routes)
        #: per stage: the InfiniBand SL of its QPs (``packet.ib_sl``; None: the default)
        self.stage_sl: list[int | None] | None = None
        #: the SHARP stages (:class:`aifabric.sim.packet.sharp.SharpPlan`; None: none)
        self.sharp: Any = None
        sim.keep_running = lambda: self.stages_left > 0

    def run(self) -> None:
        ev = self.sim.ev
        for s in np.flatnonzero(self.npred == 0):
            ev.at(0, self.start, int(s))
        if self.dag.n_stages:
            self.sim.run()

    def now_ns(self) -> float:
        return self.sim.ev.now / PS_PER_NS

    def start(self, s: int) -> None:
        dag, ev, sim = self.dag, self.sim.ev, self.sim
        t = self.begin(s)
        if dag.stage_kind[s] == COMPUTE:
            ev.at(ev.now + int(dag.duration_ns[s] * PS_PER_NS), lambda _: self.finish_rep(s))
            return
        xs = range(int(dag.xfer_ptr[s]), int(dag.xfer_ptr[s + 1]))
        n = 0
        if self.sharp is not None and s in self.sharp.stages:  # reduced in the switches
            n = 1
            xs = self.sharp.start(self, s)
        for x in xs:  # transfers of one stage, each simulated packet by packet
            c = int(self.xfer_conn[x])
            rows = range(int(self.conn_ptr[c]), int(self.conn_ptr[c + 1]))
            size = round(float(dag.size_bytes[x]))
            k = len(rows)
            if np.isnan(self.x_start[x]):
                self.x_start[x] = t
            self.x_qps_left[x] = k
            self.x_rep_end[x] = t
            sl = self.stage_sl[s] if self.stage_sl is not None else None
            for j, r in enumerate(rows):
                part = size // k + (1 if j < size % k else 0)
                sim.add_flow(self.routes[r], part, on_done=self.qp_done, tag=(s, x),
                             ack_route=self.backs[r], header=self.headers[r], sl=sl)
            n += 1
        self.outstanding[s] = n
        if n == 0:
            ev.at(ev.now, lambda _: self.finish_rep(s))

    def sharp_done(self, s: int) -> None:
        """Every host of SHARP stage ``s`` has the result."""
        self.outstanding[s] -= 1
        if self.outstanding[s] == 0:
            self.finish_rep(s)

    def qp_done(self, qp: QP) -> None:
        s, x = qp.tag
        self.x_qps_left[x] -= 1
        if self.x_qps_left[x]:
            return
        self.delivered(s, x)

    def all_done(self) -> None:
        self.sim.ev.stop()


def _arc_totals(sim: PacketSim, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per arc: bytes sent, peak rate (Gbit/s) and the peak queue of its port."""
    n_arcs = len(cap)
    arc_bytes = np.zeros(n_arcs)
    peak = np.zeros(n_arcs)
    q_peak = np.zeros(n_arcs)
    for a, p in sim.net.ports.items():
        if a < n_arcs:  # (not the SHARP units' internal arcs)
            arc_bytes[a] = p.tx_bytes
            q_peak[a] = max(p.q_peak)
    for a, bps in sim.arc_peak_bps.items():  # frames are counted when they start
        if a < n_arcs:
            peak[a] = min(bps / 1e9, float(cap[a]))
    return arc_bytes, peak, q_peak


def _bottlenecks(routes: list[tuple[int, ...]], conn_ptr: np.ndarray, xfer_conn: np.ndarray,
                 q_peak: np.ndarray, T: int) -> np.ndarray:
    """The bottleneck arc of each transfer: the arc of its first QP's route with the
    deepest peak queue (-1: no queue anywhere)."""
    bott = np.full(T, -1, dtype=np.int64)
    first_row = conn_ptr[np.asarray(xfer_conn, dtype=np.int64)] if T else np.zeros(0, int)
    for x in range(T):  # transfers of a packet run
        r = routes[int(first_row[x])]
        if r:
            qs = q_peak[list(r)]
            if qs.max() > 0:
                bott[x] = r[int(np.argmax(qs))]
    return bott


def _timeline(sim: PacketSim, n_arcs: int, arc_group: np.ndarray | None,
              n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """The sampling intervals (ns) and the bytes moved per arc group in each."""
    group = np.zeros(n_arcs, dtype=np.int64) if arc_group is None else arc_group
    tl = np.array([(t0 / PS_PER_NS, t1 / PS_PER_NS) for t0, t1, _ in sim.interval_bytes],
                  dtype=np.float64).reshape(-1, 2)
    tg = np.zeros((len(tl), n_groups))
    for i, (_, _, moved) in enumerate(sim.interval_bytes):
        if moved:  # whole bytes: the sums are exact in any order
            arcs = np.fromiter(moved, np.int64, len(moved))
            d = np.fromiter(moved.values(), np.float64, len(moved))
            keep = arcs < n_arcs  # (not the SHARP units' internal arcs)
            np.add.at(tg[i], group[arcs[keep]], d[keep])
    return tl, tg


def _fct_table(sim: PacketSim) -> dict[str, np.ndarray]:
    """:meth:`PacketSim.fct` with each QP's stage and transfer (rows of the
    ``transfers`` table) after its number."""
    f = sim.fct()
    tags = [q.tag if isinstance(q.tag, tuple) else (-1, -1) for q in sim.qps]  # QPs
    st = np.array([t[0] for t in tags], dtype=np.int64)
    xf = np.array([t[1] for t in tags], dtype=np.int64)
    return {"qp": f.pop("qp"), "stage": st, "transfer": xf, **f}
