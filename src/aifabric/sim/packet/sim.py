"""A packet-level run: a :class:`~aifabric.sim.packet.network.Network` on its own event
list, plus what an engineer watches — time series per port/queue and per QP, PFC
deadlock detection, pause ratios per port and priority, and alarms (a PFC deadlock, a PFC
storm as SONiC's PFC watchdog detects it).

:class:`Topology` builds small networks by hand (tests, what-if studies); the scenario
path (:func:`aifabric.sim.packet.run.run_packet`) builds one from a Fabric.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aifabric.sim.packet import layout as L
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.engine import PS_PER_NS, PS_PER_US, EventList
from aifabric.sim.packet.lb import LbGroups, shortest_groups
from aifabric.sim.packet.network import QP, Network, SwitchBuffers

__all__ = ["PacketSim", "Topology"]

PORT_COLUMNS = ("time_ns", "arc", "tc", "queue_bytes", "ecn_marks", "pfc_sent", "pfc_received",
                "paused", "paused_ns", "drops", "tx_bytes")
QP_COLUMNS = ("time_ns", "qp", "rate_gbps", "acked_bytes", "delivered_bytes", "cnps",
              "retx_bytes")

#: the PT fields a sample reads, and their positions in it
_SAMPLED = np.array([L.T_QB, L.T_PAUSED, L.T_PSINCE, L.T_PAUSEDPS, L.T_PFCTX, L.T_PFCRX])
_S_QB, _S_PAUSED, _S_PSINCE, _S_PAUSEDPS, _S_PFCTX, _S_PFCRX = range(6)


class PacketSim:
    """Flows on a network of arcs; see :class:`Network` for the arc arrays."""

    def __init__(self, cfg: PacketConfig, *, arc_src: Sequence[int], arc_dst: Sequence[int],
                 arc_gbps: Sequence[float], arc_delay_ns: Sequence[float],
                 is_host: Sequence[bool], used_arcs: Sequence[int],
                 node_names: Sequence[str] | None = None,
                 buffers: SwitchBuffers | None = None, lb: LbGroups | None = None,
                 entropy: Any = None, ib: Any = None) -> None:
        self.cfg = cfg
        #: InfiniBand's link model (:class:`~aifabric.sim.packet.ibmodel.IbLink`)
        self.ib = ib
        self.ev = EventList()
        self.net = Network(self.ev, cfg, arc_src=arc_src, arc_dst=arc_dst, arc_gbps=arc_gbps,
                           arc_delay_ns=arc_delay_ns, is_host=is_host, used_arcs=used_arcs,
                           node_names=node_names, buffers=buffers, lb=lb, entropy=entropy,
                           ib=ib)
        self.names = self.net.node_names
        self.pending = 0
        self.keep_running: Callable[[], bool] = lambda: self.pending > 0
        self.sample_ps = int(cfg.sample_us * PS_PER_US)
        self.check_ps = int(cfg.deadlock_check_us * PS_PER_US)
        self._port_blocks: list[dict[str, np.ndarray]] = []
        self._qp_blocks: list[dict[str, np.ndarray]] = []
        self._last_tx = np.zeros(len(self.net.PI), dtype=np.int64)
        self._peak_bps = np.zeros(len(self.net.PI))  # per port row (arc_peak_bps)
        self.interval_bytes: list[tuple[int, int, dict[int, int]]] = []
        self.deadlocks: list[dict[str, Any]] = []
        self._cycle_prev: tuple[frozenset[int], tuple[int, ...]] | None = None
        self.stop_on_deadlock = True
        #: :meth:`run` goes on after the last delivery until the last ACKs are back
        self.wait_for_acks = True
        self._started = False
        #: called now and then during :meth:`run` with the events processed so far (a
        #: progress bar); ``None``: no call, no extra event
        self.progress: Callable[[int], None] | None = None
        self._ticks = 0  # progress calls: Python events that are not counted as events
        self._tick_ps = 10 * PS_PER_US
        self._tick_wall = 0.0

    # ----------------------------------------------------------------- flows
    def add_flow(self, route: Sequence[int], size_bytes: int, start_ns: float = 0.0,
                 on_done: Callable[[QP], None] | None = None, tag: Any = None, *,
                 ack_route: Sequence[int] | None = None,
                 header: tuple[int, int, int] | None = None, sl: int | None = None) -> QP:
        """A QP sending ``size_bytes`` along ``route`` (arcs) from ``start_ns``; its ACKs,
        NAKs and CNPs come back along ``ack_route`` (as many hops as ``route``; None:
        ``route`` reversed); ``header``: its (source IP, destination IP, UDP source port)
        as the switches hash them (NIC-side spraying; see :meth:`Network.add_qp`);
        ``sl``: its InfiniBand service level (see :meth:`Network.add_qp`)."""
        self.pending += 1

        def done(qp: QP) -> None:
            self.pending -= 1
            if on_done is not None:
                on_done(qp)
            if not self.keep_running():
                self.ev.stop()

        return self.net.add_qp(route, size_bytes, int(start_ns * PS_PER_NS) +
                               (self.ev.now if start_ns == 0 else 0), done, tag,
                               ack_route=ack_route, header=header, sl=sl)

    def blackhole(self, arcs: Sequence[int]) -> None:
        """Frames sent over ``arcs`` are lost while the switches keep forwarding onto them
        (a link failed before the routing converged); see :meth:`Network.blackhole`."""
        self.net.blackhole(arcs)

    @property
    def qps(self) -> list[QP]:
        return self.net.qps

    def run(self, until_ns: float | None = None) -> None:
        """Run until every flow is delivered (or ``keep_running`` says so), a deadlock is
        confirmed, or ``until_ns`` (default: the config's ``until_ms``); then, with
        ``wait_for_acks``, on until the last ACK of every delivered flow is back at its
        sender (its sender-side completion, :meth:`fct`; within 100 ns)."""
        if not self._started:
            self._started = True
            self.ev.at(self.ev.now, self._sample, None)
            self.ev.at(self.ev.now + self.check_ps, self._check, None)
            if self.progress is not None:
                self._tick_wall = time.perf_counter()
                self.ev.at(self.ev.now, self._tick, None)
        limit = int((until_ns if until_ns is not None else self.cfg.until_ms * 1e6) * PS_PER_NS)
        if self.keep_running():
            self.ev.run(limit)
        if self.wait_for_acks:
            self._drain_acks(limit)
        self._sample(None, reschedule=False)

    def _drain_acks(self, limit: int) -> None:
        """Run on in steps of 100 ns (longer after a while) until every delivered flow
        has its last ACK, a deadlock is found, or ``limit``: the frames in flight after
        the last delivery are ACKs and a few retransmissions, microseconds of work."""
        i = 0
        while not self.deadlocks and self.ev.now < limit:
            q = self.net.QI[:len(self.net.qps)]  # (the arrays grow: read them anew)
            if not np.any((q[:, L.Q_DONE] >= 0) & (q[:, L.Q_ACKEDAT] < 0)
                          & (q[:, L.Q_SIZE] > 0)):
                return
            t = self.ev.now
            self.ev.run(min(limit, t + (100 * PS_PER_NS << min(i // 64, 10))))
            if self.ev.now == t and not self.ev.heap:  # nothing left to happen
                return
            i += 1

    @property
    def now_ns(self) -> float:
        return self.ev.now / PS_PER_NS

    @property
    def events(self) -> int:
        """Events processed so far (the progress calls not counted: the count is the
        same with or without a progress bar)."""
        return self.ev.count - self._ticks

    def _tick(self, _: Any) -> None:
        """Report progress, and come back after a stretch of simulated time that takes
        about 0.1-0.5 s of wall time (the compiled loop returns to Python for it; it
        reads the state and changes nothing, so the run is the same with or without)."""
        self._ticks += 1
        assert self.progress is not None
        self.progress(int(self.net.G[L.COUNT]))
        wall = time.perf_counter()
        dt, self._tick_wall = wall - self._tick_wall, wall
        if dt < 0.1:
            self._tick_ps = min(2 * self._tick_ps, 10_000 * PS_PER_US)
        elif dt > 0.5:
            self._tick_ps = max(self._tick_ps // 2, PS_PER_US)
        if not self.ev.stopped:
            self.ev.at(self.ev.now + self._tick_ps, self._tick, None)

    # ----------------------------------------------------------------- sampling
    def _sample(self, _: Any, reschedule: bool = True) -> None:
        """One row per port and traffic class in use (ports that have sent or hold
        something) and one per running QP; also the bytes each arc moved since the last
        sample (link utilization over time, peak rates)."""
        net = self.net
        now = self.ev.now
        t_ns = now / PS_PER_NS
        PI, PT = net.PI, net.PT
        tx = PI[:, L.P_TXB]
        act = np.flatnonzero((tx != 0) | (PT[:, L.T_QB].any(axis=1)))
        t0 = self.interval_bytes[-1][1] if self.interval_bytes else 0
        arcs = PI[act, L.P_ARC]
        d = tx[act] - self._last_tx[act]
        mv = d != 0
        moved = dict(zip(arcs[mv].tolist(), d[mv].tolist(), strict=True))
        self._last_tx[act] = tx[act]
        if now > t0 and len(moved):  # (the ports of act are distinct)
            rows = act[mv]
            self._peak_bps[rows] = np.maximum(self._peak_bps[rows],
                                              d[mv] * 8e12 / (now - t0))
        if len(act):
            tcs = np.asarray(net.tcs, dtype=np.int64)
            n, m = len(act), len(tcs)
            # port x field x tc, only the fields read (not a copy of all NPT of them)
            sub = PT[np.ix_(act, _SAMPLED, tcs)]
            paused = sub[:, _S_PAUSED] != 0
            pps = sub[:, _S_PAUSEDPS] + np.where(paused, now - sub[:, _S_PSINCE], 0)
            self._port_blocks.append({
                "time_ns": np.full(n * m, t_ns), "arc": np.repeat(arcs, m),
                "tc": np.tile(tcs, n), "queue_bytes": sub[:, _S_QB].ravel(),
                "ecn_marks": np.repeat(PI[act, L.P_ECN], m),
                "pfc_sent": sub[:, _S_PFCTX].ravel(), "pfc_received": sub[:, _S_PFCRX].ravel(),
                "paused": paused.ravel().astype(np.int64), "paused_ns": pps.ravel() / PS_PER_NS,
                "drops": np.repeat(PI[act, L.P_DROPS], m), "tx_bytes": np.repeat(tx[act], m)})
        if now > t0 or moved:
            self.interval_bytes.append((t0, now, moved))
        nq = len(net.qps)
        if nq:
            QI, QF = net.QI[:nq], net.QF[:nq]
            done = QI[:, L.Q_DONE]
            keep = ~((QI[:, L.Q_START] > now) | ((done >= 0) & (done < now - self.sample_ps)
                                                  & (QI[:, L.Q_ACKEDAT] >= 0)))
            ids = np.flatnonzero(keep)
            if len(ids):
                self._qp_blocks.append({
                    "time_ns": np.full(len(ids), t_ns), "qp": ids,
                    "rate_gbps": QF[ids, L.F_RATE] / 1e9, "acked_bytes": QI[ids, L.Q_SNDUNA],
                    "delivered_bytes": QI[ids, L.Q_RCVNXT], "cnps": QI[ids, L.Q_CNPS],
                    "retx_bytes": QI[ids, L.Q_RETX]})
        if reschedule:
            self.ev.at(now + self.sample_ps, self._sample, None)

    @property
    def arc_peak_bps(self) -> dict[int, float]:
        """Per arc that sent anything: its highest rate over a sampling interval (bit/s;
        bytes counted when a frame starts)."""
        rows = np.flatnonzero(self._peak_bps > 0)
        return dict(zip(self.net.PI[rows, L.P_ARC].tolist(), self._peak_bps[rows].tolist(),
                        strict=True))

    def port_series(self) -> dict[str, np.ndarray]:
        """One row per (sample, port, traffic class): queue bytes and cumulative
        counters (ECN marks, PFC frames sent/received, paused time, drops, bytes sent)."""
        self._port_blocks = _merged(self._port_blocks, PORT_COLUMNS)
        return dict(self._port_blocks[0]) if self._port_blocks else _table([], PORT_COLUMNS)

    def qp_series(self) -> dict[str, np.ndarray]:
        """One row per (sample, QP): sending rate and cumulative progress counters."""
        self._qp_blocks = _merged(self._qp_blocks, QP_COLUMNS)
        return dict(self._qp_blocks[0]) if self._qp_blocks else _table([], QP_COLUMNS)

    def fct(self) -> dict[str, np.ndarray]:
        """One row per QP (flow), in the order they were added: its endpoints, size, the
        times of its life and how much slower than on an idle path it finished.

        - ``start_ns``: the QP starts (``add_flow``'s ``start_ns``); ``first_tx_ns``: its
          first data frame goes on the wire; ``last_rx_ns``: the receiver has the last
          byte (in order); ``last_ack_ns``: the ACK of the last byte reaches the sender;
        - ``fct_ns`` = last_rx - start (the flow completion time: the data is there);
          ``completion_ns`` = last_ack - start (the sender's completion, what ns-3's RDMA
          simulator writes in fct.txt and htsim prints as "finished at");
        - ``ideal_ns``/``ideal_completion_ns``: the same two on the idle path (closed
          form, see :func:`ideal_times`); ``slowdown`` = fct / ideal (1.0: as fast as the
          path allows; a lone flow gets 1.00);
        - ``hops`` and ``bottleneck_gbps`` of its route.

        A flow not finished when the run stopped has NaN where it did not get to (its
        fct, completion and slowdown)."""
        net = self.net
        n = len(net.qps)
        QI, QR = net.QI[:n], net.QR[:n]
        G, HT = net.G, net.HT
        start = QI[:, L.Q_START].astype(np.float64)
        pend = HT[:int(G[L.HSIZE])]  # QPs whose start event has not fired yet
        pend = pend[pend[:, 2] == L.E_QPSTART]
        start[pend[:, 3]] = pend[:, 0]

        def t(col: int) -> np.ndarray:
            v = QI[:, col].astype(np.float64)
            return np.where(v >= 0, v, np.nan)

        first, rx, ack = t(L.Q_FIRSTTX), t(L.Q_DONE), t(L.Q_ACKEDAT)
        empty = QI[:, L.Q_SIZE] <= 0  # nothing to send: done at its start
        ack = np.where(empty & ~np.isnan(rx), rx, ack)
        ideal, ideal_c, hops, bott = ideal_times(self)
        PI = net.PI
        names = np.array(self.names, dtype=object)
        last = QR[np.arange(n), 0, np.maximum(hops - 1, 0)]
        fct = (rx - start) / PS_PER_NS
        with np.errstate(invalid="ignore", divide="ignore"):
            slow = np.where(ideal > 0, fct / np.where(ideal > 0, ideal, 1.0), np.nan)
        slow[empty] = np.where(np.isnan(fct[empty]), np.nan, 1.0)
        return {"qp": np.arange(n, dtype=np.int64),
                "src": names[PI[QR[:, 0, 0], L.P_SRC]] if n else names[:0],
                "dst": names[PI[last, L.P_DST]] if n else names[:0],
                "size_bytes": QI[:, L.Q_SIZE].copy(), "hops": hops,
                "bottleneck_gbps": bott, "start_ns": start / PS_PER_NS,
                "first_tx_ns": first / PS_PER_NS, "last_rx_ns": rx / PS_PER_NS,
                "last_ack_ns": ack / PS_PER_NS, "fct_ns": fct,
                "completion_ns": (ack - start) / PS_PER_NS, "ideal_ns": ideal,
                "ideal_completion_ns": ideal_c, "slowdown": slow,
                **(self.reorder() if self.reports_reorder else {})}

    # ----------------------------------------------------------------- deadlock
    def _check(self, _: Any) -> None:
        self.find_deadlock()
        if not self.ev.stopped:
            self.ev.at(self.ev.now + self.check_ps, self._check, None)

    def find_deadlock(self) -> list[int] | None:
        """A cycle of switch egress queues, each paused and holding frames that wait for
        the next one; confirmed (recorded, run stopped) when the same cycle is found at
        two checks in a row with no byte sent by its ports in between."""
        edges = self.net.paused_edges()
        if not edges or not _has_cycle(edges):  # (networkx only for a cycle's details)
            self._cycle_prev = None
            return None
        import networkx as nx  # only when queues are paused: keeps it off every start-up

        g = nx.DiGraph()
        g.add_edges_from((a, b) for a, b, _ in edges)
        try:
            cyc = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            self._cycle_prev = None
            return None
        arcs = [int(u) for u, _ in cyc]
        key = frozenset(arcs)
        tx = tuple(self.net.ports[a].tx_bytes for a in sorted(key))
        prev = self._cycle_prev
        self._cycle_prev = (key, tx)
        if prev is not None and prev[0] == key and prev[1] == tx:
            if not any(d["arcs_set"] == key for d in self.deadlocks):
                ports = self.net.ports
                self.deadlocks.append({
                    "time_ns": self.now_ns, "arcs": arcs, "arcs_set": key,
                    "ports": [f"{self.names[ports[a].src]} -> {self.names[ports[a].dst]}"
                              for a in arcs]})
                if self.stop_on_deadlock:
                    self.ev.stop()
            return arcs
        return None

    # ----------------------------------------------------------------- summary
    def counters(self) -> dict[str, Any]:
        """Totals of the run."""
        ports = self.net.ports.values()
        qps = self.net.qps
        return {
            "time_ns": self.now_ns, "events": self.events, "qps": len(qps),
            "qps_done": sum(q.done_ps >= 0 for q in qps),
            "delivered_bytes": self.net.delivered,
            "duplicate_bytes": sum(q.dup_bytes for q in qps),
            "drops": self.net.drops, "retx_bytes": self.net.retx,
            "timeouts": sum(q.timeouts for q in qps), "naks": sum(q.naks for q in qps),
            "cnps": sum(q.cnps for q in qps),
            "ecn_marks": sum(p.ecn_marks for p in ports),
            "pfc_frames": self.net.sent_pfc,
            "pause_ns": sum(sum(p.paused_ps) for p in ports) / PS_PER_NS,
            "deadlocks": len(self.deadlocks),
            "drops_by_tc": self.drops_by_tc(),
            "lossless_drops": self.lossless_drops(),
            "buffer": self.buffer_info(),
            **({"reorder": self.reorder_summary()} if self.reports_reorder else {}),
            **({"trim": self.trim_summary()} if self.cfg.switch.trim.enabled else {}),
        }

    def trim_summary(self) -> dict[str, Any]:
        """Packet trimming (``switch.trim``): data packets trimmed, the NACKs their
        headers brought back to the senders, and the port that trimmed most."""
        net = self.net
        n = len(net.qps)
        tp = net.PI[:, L.P_TRIMS]
        top = int(np.argmax(tp)) if len(tp) else 0
        ports = self.net.ports
        arc = int(net.PI[top, L.P_ARC]) if len(tp) else -1
        tr = self.cfg.switch.trim
        return {"threshold_bytes": tr.threshold_bytes, "trimmed": int(net.G[L.TRIMS]),
                "trim_nacks": int(net.QI[:n, L.Q_TNAKS].sum()),
                "most_trimming_port": (f"{self.names[ports[arc].src]} -> "
                                       f"{self.names[ports[arc].dst]}")
                if len(tp) and tp[top] > 0 else None,
                "most_trimmed": int(tp[top]) if len(tp) else 0}

    @property
    def reports_reorder(self) -> bool:
        """Per-packet load balancing or the out-of-order receiver is on: the reorder
        columns and summary are reported (not at the defaults: outputs stay as they were)."""
        return self.net.lb_mode != L.LB_ECMP or self.net.ooo or \
            self.net.ev_alg != L.EV_FIXED or self.cfg.switch.trim.enabled

    def reorder(self) -> dict[str, np.ndarray]:
        """Per QP: data packets that arrived ahead of the next expected one
        (``ooo_packets``), how far ahead (packets: ``reorder_max_packets``, and the 99th
        percentile over all its data arrivals, in-order ones counted as 0:
        ``reorder_p99_packets``, exact below 16, else the lower edge of its power-of-two
        bucket), NAKs received, retransmitted and duplicate bytes, and packets the
        out-of-order bitmap refused (``ooo_discards``). A duplicate (behind the expected
        sequence) is not an arrival of the distribution."""
        net = self.net
        n = len(net.qps)
        QI = net.QI[:n]
        RH = QI[:, L.NQI:L.NQI + L.NRH]
        edge = np.array([b if b < 16 else 1 << (b - 12) for b in range(L.NRH)], dtype=np.int64)
        tot = RH.sum(axis=1)
        cum = np.cumsum(RH, axis=1)
        b99 = np.argmax(cum >= np.ceil(0.99 * tot)[:, None], axis=1)
        b50 = np.argmax(cum >= np.ceil(0.5 * tot)[:, None], axis=1)
        return {"ooo_packets": QI[:, L.Q_OOOPK].copy(),
                "reorder_max_packets": QI[:, L.Q_RMAX].copy(),
                "reorder_p50_packets": np.where(tot > 0, edge[b50], 0),
                "reorder_p99_packets": np.where(tot > 0, edge[b99], 0),
                "naks": QI[:, L.Q_NAKS].copy(), "retx_bytes": QI[:, L.Q_RETX].copy(),
                "dup_bytes": QI[:, L.Q_DUP].copy(), "ooo_discards": QI[:, L.Q_OOODROP].copy(),
                "timeouts": QI[:, L.Q_TO].copy(),
                **({"trim_nacks": QI[:, L.Q_TNAKS].copy()}
                   if self.cfg.switch.trim.enabled else {})}

    def reorder_histogram(self) -> dict[str, np.ndarray]:
        """Each QP's reorder distance distribution: one row per (QP, distance bucket)
        that holds any data arrival: ``distance_packets`` (exact below 16, else the lower
        edge of the power-of-two bucket; 0: in order) and the ``packets`` in it."""
        net = self.net
        n = len(net.qps)
        RH = net.QI[:n, L.NQI:L.NQI + L.NRH]
        edge = np.array([b if b < 16 else 1 << (b - 12) for b in range(L.NRH)], dtype=np.int64)
        qp, b = np.nonzero(RH)
        return {"qp": qp.astype(np.int64), "distance_packets": edge[b],
                "packets": RH[qp, b].astype(np.int64)}

    def reorder_summary(self) -> dict[str, Any]:
        """The run's load balancing and receiver, and its reordering over every data
        arrival: out-of-order packets and their share, the distance ahead p50/p99/max
        (packets; p50/p99 as in :meth:`reorder`), NAKs and retransmitted bytes."""
        net = self.net
        n = len(net.qps)
        h = net.QI[:n, L.NQI:L.NQI + L.NRH].sum(axis=0)
        tot = int(h.sum())
        edge = [b if b < 16 else 1 << (b - 12) for b in range(L.NRH)]
        cum = np.cumsum(h)

        def pct(q: float) -> int:
            return int(edge[int(np.argmax(cum >= np.ceil(q * tot)))]) if tot else 0

        r = self.reorder()
        lb = self.cfg.lb
        ooo = int(r["ooo_packets"].sum())
        ent = self.cfg.nic.entropy
        return {"lb": lb.mode or "ecmp", "spray": lb.spray,
                "flowlet_gap_ns": lb.flowlet_gap_ns, "receiver": self.cfg.nic.receiver,
                **({"entropy": ent.algorithm, "entropy_values": ent.values}
                   if ent.algorithm != "fixed" else {}),
                "data_arrivals": tot, "ooo_packets": ooo,
                "ooo_share": ooo / tot if tot else 0.0,
                "distance_p50_packets": pct(0.5), "distance_p99_packets": pct(0.99),
                "distance_max_packets": int(r["reorder_max_packets"].max()) if n else 0,
                "naks": int(r["naks"].sum()), "retx_bytes": int(r["retx_bytes"].sum()),
                "ooo_discards": int(r["ooo_discards"].sum()),
                "duplicate_bytes": int(r["dup_bytes"].sum()),
                "timeouts": int(r["timeouts"].sum()),
                "delivered_bytes": self.net.delivered}

    def drops_by_tc(self) -> dict[int, int]:
        """Frames dropped per traffic class (switch egress and NIC receive buffers), the
        classes that dropped any."""
        per = self.net.PT[:, L.T_DROPS].sum(axis=0)
        return {int(tc): int(per[tc]) for tc in np.flatnonzero(per)}

    def lossless_drops(self) -> int:
        """Frames dropped on the lossless classes (``pfc.priorities`` with PFC on)."""
        per = self.net.PT[:, L.T_DROPS].sum(axis=0)
        return int(sum(int(per[tc]) for tc in range(8) if self.net.lossless[tc]))

    def buffer_info(self) -> dict[str, Any]:
        """Where the switch buffers come from (``model``: each switch model's
        ``buffer_mb``; ``override``: ``packet.buffer.size_bytes`` for every switch;
        ``default``: a network without a fabric), the smallest and largest buffer and
        headroom pool of the switches, and the overcommitted switches
        (``pfc.allow_overcommit``)."""
        net = self.net
        sw = net.reported_switches
        buf = net.NU[sw, L.U_BUF]
        resv = net.NU[sw, L.U_RESV]
        return {"source": net.buffer_source,
                "size_bytes": [int(buf.min()), int(buf.max())] if len(buf) else [0, 0],
                "headroom_pool_bytes": [int(resv.min()), int(resv.max())] if len(resv)
                else [0, 0],
                "overcommit": list(net.overcommit)}

    def pauses(self) -> dict[str, np.ndarray]:
        """One row per (port, traffic class) that was paused by PFC at all: paused time,
        pause ratio (paused time / run time), the longest continuous pause, pause frames
        received, and whether it is still paused at the end; the most paused first."""
        net = self.net
        now = self.ev.now
        PI, PT = net.PI, net.PT
        tcs = np.asarray(net.tcs, dtype=np.int64)
        sub = PT[:, :, tcs]  # port x field x tc
        paused = sub[:, L.T_PAUSED] != 0
        cur = np.where(paused, now - sub[:, L.T_PSINCE], 0)
        total = sub[:, L.T_PAUSEDPS] + cur
        longest = np.maximum(sub[:, L.T_PLONG], cur)
        port, col = np.nonzero((total > 0) | (sub[:, L.T_PFCRX] > 0))
        order = np.lexsort((col, port, -total[port, col]))
        port, col = port[order], col[order]
        names = np.array(self.names, dtype=object)
        label = names[PI[port, L.P_SRC]] + " -> " + names[PI[port, L.P_DST]] \
            if len(port) else np.zeros(0, dtype=object)
        return {"port": label, "tc": tcs[col],
                "paused_ns": total[port, col] / PS_PER_NS,
                "pause_ratio": total[port, col] / now if now > 0 else np.zeros(len(port)),
                "longest_pause_ns": longest[port, col] / PS_PER_NS,
                "pause_frames_received": sub[port, L.T_PFCRX, col],
                "paused_at_end": paused[port, col].astype(np.int64)}

    def alarms(self) -> list[str]:
        """One line per alarming thing: a PFC deadlock, and a PFC storm as SONiC's PFC
        watchdog detects it: a queue (port, priority) paused continuously for the
        detection time ``pfc.watchdog_ms`` or longer. Shorter pauses are no alarm; they
        are in :meth:`pauses` (paused time and pause ratio per port and priority)."""
        out = []
        lost = self.lossless_drops()
        if lost:
            by = ", ".join(f"TC{tc} {n:,}" for tc, n in self.drops_by_tc().items()
                           if self.net.lossless[tc])
            out.append(f"lossless drops: {lost:,} frames dropped on lossless classes ({by}): "
                       "the PFC headroom did not hold what arrived after XOFF"
                       + (" (overcommitted buffers: pfc.allow_overcommit)"
                          if self.net.overcommit else ""))
        for d in self.deadlocks:
            if self.ib is not None:  # InfiniBand: the same gate, credits not PFC
                out.append(f"credit deadlock at {d['time_ns'] / 1e3:.1f} us: cycle of "
                           f"queues without credit {' => '.join(d['ports'])}")
                continue
            out.append(f"PFC deadlock at {d['time_ns'] / 1e3:.1f} us: cycle of paused "
                       f"queues {' => '.join(d['ports'])}")
        wd = self.cfg.pfc.watchdog_ms
        p = self.pauses()
        for i in np.flatnonzero(p["longest_pause_ns"] >= wd * 1e6):
            end = ", still paused at the end" if p["paused_at_end"][i] else ""
            out.append(f"PFC watchdog: storm on {p['port'][i]} TC{p['tc'][i]}: paused "
                       f"continuously {p['longest_pause_ns'][i] / 1e6:.3f} ms (detection "
                       f"time {wd:g} ms){end}")
        return out


def ideal_times(sim: PacketSim) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per QP: its flow completion time and sender-side completion time on an idle path
    (ns), its hops and its route's bottleneck (Gbit/s).

    The frames are the QP's own (``size`` in MTU payloads, the last one shorter, each
    with ``header_bytes`` + ``wire_overhead_bytes`` on the wire) and every hop stores and
    forwards them as the simulator does: serialization (rounded to the picosecond per
    frame, as the simulator does) at each hop's rate plus its propagation delay. The
    last byte arrives after the longest path through the (frame, hop) grid: every frame
    through the slowest hop, one frame through each faster one — for a path of one rate
    r, ``h`` hops and full frames of ``w`` bytes on the wire in all,
    ``w/r + (h - 1) x frame/r + propagation``. With ``nic.rx_gbps`` the receiving host's
    drain (payload at rx_gbps) is one more such stage. The sender-side completion adds
    the way back of the last ACK (``ack_bytes`` + overhead at each hop of the ACK route,
    plus propagation).
    Together they are ``w / bottleneck + base RTT - one frame's serialization``, with the
    base RTT of :meth:`Network.add_qp` (a frame and an ACK serialized at every hop,
    propagation both ways), exactly when the path has one rate."""
    net = sim.net
    qps = net.qps
    n = len(qps)
    QI, QR, PI, PF = net.QI[:n], net.QR[:n], net.PI, net.PF
    hops = QI[:, L.Q_LEN].astype(np.int64)
    rhops = np.fromiter((len(q.rpath) for q in qps), dtype=np.int64, count=n)
    H = QR.shape[2]
    col = np.arange(H)
    fwd = col < hops[:, None]
    rev = col < rhops[:, None]
    pf = np.where(fwd, QR[:, 0, :], 0)
    pr = np.where(rev, QR[:, 1, :], 0)
    ppb = PF[pf, L.P_PPB]
    mtu, hdr, ovh = net.mtu, net.hdr, net.ovh
    size = QI[:, L.Q_SIZE]
    frames = np.maximum((size + mtu - 1) // mtu, 1)
    lastpay = size - (frames - 1) * mtu
    full = np.floor((mtu + hdr + ovh) * ppb + 0.5)  # ps per hop, as send_frame rounds
    lastf = np.floor((lastpay + hdr + ovh)[:, None] * ppb + 0.5)
    rx_gbps = net.cfg.nic.rx_gbps
    if rx_gbps is not None:  # the receiving host takes the payload at rx_gbps: one more
        rppb = 8000.0 / rx_gbps  # stage after the last hop (after the padding: no-ops)
        H += 1
        fwd = np.concatenate([fwd, np.ones((n, 1), dtype=bool)], axis=1)
        full = np.concatenate([full, np.full((n, 1), np.floor(mtu * rppb + 0.5))], axis=1)
        lastf = np.concatenate([lastf, np.floor(lastpay * rppb + 0.5)[:, None]], axis=1)
    # longest path to (frame N-1, hop h): every hop up to h once, plus N-2 more frames
    # through the slowest of them; then frame N: (N, h) = max((N, h-1), (N-1, h)) + its
    # serialization at h
    pre = np.cumsum(np.where(fwd, full, 0.0), axis=1) + (frames - 2)[:, None] * \
        np.maximum.accumulate(np.where(fwd, full, 0.0), axis=1)
    pre = np.where(frames[:, None] >= 2, pre, -np.inf)
    b = np.where(frames >= 2, pre[:, 0], 0.0) + lastf[:, 0]
    for h in range(1, H):  # hops: 8 at most
        b = np.where(fwd[:, h], np.maximum(b, pre[:, h]) + lastf[:, h], b)
    prop = np.where(col < hops[:, None], PI[pf, L.P_PROP], 0).sum(axis=1)
    rx = prop + b
    ackser = np.floor((net.ack_bytes + ovh) * PF[pr, L.P_PPB] + 0.5)
    back = np.where(rev, PI[pr, L.P_PROP] + ackser, 0.0).sum(axis=1)
    gbps = np.where(col < hops[:, None], PF[pf, L.P_GBPS], np.inf).min(axis=1) if n \
        else np.zeros(0)
    empty = (size <= 0) | (hops <= 0)
    rx = np.where(empty, 0.0, rx)
    return rx / PS_PER_NS, np.where(empty, 0.0, rx + back) / PS_PER_NS, hops, gbps


def _has_cycle(edges: list[tuple[int, int, int]]) -> bool:
    """Whether the directed graph of the ``(a, b, _)`` edges has a cycle (Kahn: a graph
    is acyclic when repeatedly removing the nodes nothing points to empties it)."""
    succ: dict[int, list[int]] = {}
    indeg: dict[int, int] = {}
    for a, b, _ in edges:
        succ.setdefault(a, []).append(b)
        indeg.setdefault(a, 0)
        indeg[b] = indeg.get(b, 0) + 1
    free = [v for v, d in indeg.items() if d == 0]
    left = len(indeg)
    while free:
        v = free.pop()
        left -= 1
        for w in succ.get(v, ()):
            indeg[w] -= 1
            if indeg[w] == 0:
                free.append(w)
    return left > 0


def _table(blocks: list[dict[str, np.ndarray]], cols: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not blocks:
        return {c: np.zeros(0) for c in cols}
    return {c: np.concatenate([b[c] for b in blocks]).astype(
        np.float64 if c in ("time_ns", "rate_gbps", "paused_ns") else np.int64, copy=False)
        for c in cols}


def _merged(blocks: list[dict[str, np.ndarray]],
            cols: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    """The sampled blocks as one block, the table :func:`_table` makes of them, built a
    column at a time with each column's blocks let go once it is merged: the series is
    held once, not as blocks and table together (the series' arrays are shared with
    what :meth:`PacketSim.port_series` returns: read them, do not write them)."""
    if len(blocks) <= 1:
        return [_table(blocks, cols)] if blocks else []
    out: dict[str, np.ndarray] = {}
    for c in cols:
        out[c] = _table([{c: b.pop(c)} for b in blocks], (c,))[c]
    return [out]


class Topology:
    """A hand-built network: hosts (RoCE NICs), switches and full-duplex links.

    >>> t = Topology()
    >>> h0, h1, s = t.host("h0"), t.host("h1"), t.switch("s")
    >>> _ = t.link(h0, s, 100, 1000); _ = t.link(h1, s, 100, 1000)
    >>> t.route(h0, s, h1)
    [0, 3]
    """

    def __init__(self) -> None:
        self.names: list[str] = []
        self.is_host: list[bool] = []
        self.arc_src: list[int] = []
        self.arc_dst: list[int] = []
        self.arc_gbps: list[float] = []
        self.arc_delay_ns: list[float] = []
        self._arc: dict[tuple[int, int], int] = {}

    def _node(self, name: str, host: bool) -> int:
        self.names.append(name)
        self.is_host.append(host)
        return len(self.names) - 1

    def host(self, name: str) -> int:
        return self._node(name, True)

    def switch(self, name: str) -> int:
        return self._node(name, False)

    def link(self, u: int, v: int, gbps: float, delay_ns: float) -> int:
        """A link u <-> v; arc 2l is u -> v, 2l+1 is v -> u. Returns l."""
        a = len(self.arc_src)
        for s, d in ((u, v), (v, u)):
            self._arc.setdefault((s, d), len(self.arc_src))
            self.arc_src.append(s)
            self.arc_dst.append(d)
            self.arc_gbps.append(float(gbps))
            self.arc_delay_ns.append(float(delay_ns))
        return a // 2

    def route(self, *nodes: int) -> list[int]:
        """The arcs along a node sequence."""
        return [self._arc[(u, v)] for u, v in itertools.pairwise(nodes)]

    def sim(self, cfg: PacketConfig | None = None, routing: Any = None,
            ib: Any = None) -> PacketSim:
        """The simulator of this network; with ``packet.lb`` spray or adaptive, its
        switches balance over every shortest path toward each host
        (:func:`~aifabric.sim.packet.lb.shortest_groups`); with ``nic.entropy`` other
        than fixed they hash each packet's entropy value over those paths with
        ``routing``'s hash settings (a :class:`~aifabric.spec.models.Routing`; None: its
        defaults). ``ib``: InfiniBand's link model
        (:class:`~aifabric.sim.packet.ibmodel.IbLink`; its ``adaptive``: the switches'
        AR groups are those shortest paths)."""
        cfg = cfg or PacketConfig()
        lb = ent = None
        ev_on = cfg.nic.entropy.algorithm != "fixed"
        if ib is not None and ib.adaptive and cfg.lb.mode is None:
            cfg = cfg.model_copy(update={"lb": cfg.lb.model_copy(update={"mode": "adaptive"})})
        if cfg.lb.mode in ("spray", "adaptive") or ev_on:
            lb = shortest_groups(self.arc_src, self.arc_dst, self.is_host,
                                 [i for i, h in enumerate(self.is_host) if h])
        if ev_on:
            from aifabric.sim.packet.entropy import EntropyHash

            ent = EntropyHash.build(len(self.names), routing)
        return PacketSim(cfg, arc_src=self.arc_src, arc_dst=self.arc_dst,
                         arc_gbps=self.arc_gbps, arc_delay_ns=self.arc_delay_ns,
                         is_host=self.is_host, used_arcs=range(len(self.arc_src)),
                         node_names=self.names, lb=lb, entropy=ent, ib=ib)
