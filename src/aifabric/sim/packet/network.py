"""Ports, links, switches and RoCE NICs of the packet simulator.

Every arc (a direction of a link) is an egress :class:`Port` at its source node: one FIFO
queue per traffic class, strict priority between classes, a serializer and the
propagation delay of the link. Arc ``2l`` is link ``l`` up and ``2l+1`` down, so the
reverse of arc ``a`` is ``a ^ 1`` (the Fabric convention).

A *switch* node holds a shared buffer with dynamic thresholds, counts ingress bytes per
(ingress port, priority) for PFC, and marks ECN (WRED) on enqueue. A *host* node is a
RoCE NIC: its egress ports pull MTU-sized packets from their queue pairs (QPs) round
robin, each QP paced by its congestion control's rate (and window); the receiving NIC
returns ACKs (cumulative), NAKs (go-back-N) and CNPs. Packets follow source routes: the
arcs the router chose for their flow.

Time is integer picoseconds; frame sizes are bytes on the wire (payload + headers;
serialization adds the preamble and inter-frame gap).

One event per frame per hop: its arrival at the far end (the serializer's end only needs
an event when more frames wait behind it).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from heapq import heappush
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.engine import PS_PER_US, EventList
from aifabric.sim.packet.transports import make_cc

__all__ = ["ACK", "CNP", "DATA", "NAK", "QP", "Network", "Packet", "Port"]

DATA, ACK, NAK, CNP = 0, 1, 2, 3
PAUSE_FRAME_BYTES = 64 + 20


class Packet:
    """One frame. ``seq`` is the byte offset of a data packet's payload (or the
    cumulative ACK/NAK point); ``route`` holds the egress ports it crosses and ``hop``
    indexes it; ``inp`` is the port (arc) it
    arrived on (for PFC accounting at a switch)."""

    __slots__ = ("ce", "hop", "inp", "int_", "kind", "payload", "qp", "route", "seq",
                 "size", "tc", "ts")

    def __init__(self, qp: QP, kind: int, seq: int, payload: int, size: int, tc: int,
                 route: tuple[Port, ...], ts: int) -> None:
        self.qp = qp
        self.kind = kind
        self.seq = seq
        self.payload = payload
        self.size = size
        self.tc = tc
        self.route = route
        self.hop = 0
        self.ce = 0
        self.inp: Port | None = None
        self.int_: list[tuple[float, int, int, int]] | None = None
        self.ts = ts


class Port:
    """The egress side of one arc, and the ingress accounting of that arc at the node it
    enters (``ing``/``xoff``: bytes held per priority and whether XOFF was sent)."""

    __slots__ = (
        "arc",
        "busy_until",
        "drops",
        "dst",
        "ecn_marks",
        "gbps",
        "host",
        "ing",
        "pause_longest",
        "pause_since",
        "paused",
        "paused_ps",
        "pfc_rx",
        "pfc_tx",
        "prop_ps",
        "ps_per_byte",
        "q_peak",
        "qbytes",
        "qps",
        "queues",
        "rr",
        "src",
        "tcs",
        "tx_bytes",
        "txev",
        "wake_t",
        "xoff",
    )

    def __init__(self, arc: int, src: int, dst: int, gbps: float, prop_ps: int,
                 host: bool) -> None:
        self.arc, self.src, self.dst, self.gbps, self.prop_ps = arc, src, dst, gbps, prop_ps
        self.ps_per_byte = 8000.0 / gbps
        self.host = host
        self.queues: list[deque[Packet]] = [deque() for _ in range(8)]
        self.qbytes = [0] * 8
        self.q_peak = [0] * 8
        self.paused = [False] * 8
        self.pause_since = [0] * 8
        self.paused_ps = [0] * 8
        self.pause_longest = [0] * 8
        self.pfc_tx = [0] * 8  # pause frames (XOFF + XON) sent out of this port
        self.pfc_rx = [0] * 8  # pause frames received by this port
        self.ing = [0] * 8
        self.xoff = [False] * 8
        self.tcs: list[int] = []  # traffic classes in use, highest first
        self.busy_until = 0  # the current frame's last bit leaves at this time
        self.txev = False  # a _tx_done event is pending
        self.tx_bytes = 0
        self.ecn_marks = 0
        self.drops = 0
        self.qps: list[QP] = []
        self.rr = 0
        self.wake_t = -1

    def ser_ps(self, wire_bytes: int) -> int:
        """Serialization time of ``wire_bytes`` (frame + preamble + gap)."""
        return int(wire_bytes * self.ps_per_byte + 0.5)


class QP:
    """A queue pair: a sender (reaction point) at ``route[0]``'s source, a receiver
    (notification point) at the last arc's destination. Bytes are numbered 0..size."""

    __slots__ = (
        "acked_at",
        "base_rtt_ps",
        "cc",
        "cnps",
        "done_ps",
        "dup_bytes",
        "high",
        "id",
        "last_cnp",
        "last_progress",
        "last_wire",
        "line_bps",
        "marked_since_ack",
        "nak_sent",
        "naks",
        "next_avail",
        "on_done",
        "path",
        "pkts_since_ack",
        "port",
        "rcv_nxt",
        "retx_bytes",
        "route",
        "rpath",
        "rroute",
        "rto_armed",
        "sent_done",
        "size",
        "snd_nxt",
        "snd_una",
        "start_ps",
        "tag",
        "tc",
        "timeouts",
    )

    def __init__(self, qid: int, route: tuple[int, ...], size: int, tc: int) -> None:
        self.id = qid
        self.route = route
        self.rroute = tuple(a ^ 1 for a in reversed(route))
        self.path: tuple[Port, ...] = ()  # egress ports of route, set by the network
        self.rpath: tuple[Port, ...] = ()
        self.size = size
        self.tc = tc
        self.snd_nxt = self.snd_una = self.high = 0
        self.rcv_nxt = 0
        self.next_avail = 0  # when the last packet left (pacing adds its gap at the current rate)
        self.last_wire = 0
        self.start_ps = 0
        self.done_ps = -1
        self.acked_at = -1
        self.last_cnp = -(1 << 62)
        self.nak_sent = False
        self.pkts_since_ack = 0
        self.marked_since_ack = 0
        self.last_progress = 0
        self.rto_armed = False
        self.retx_bytes = 0
        self.dup_bytes = 0
        self.timeouts = 0
        self.naks = 0
        self.cnps = 0
        self.sent_done = False
        self.cc: Any = None
        self.port: Port | None = None
        self.on_done: Callable[[QP], None] | None = None
        self.tag: Any = None
        self.base_rtt_ps = 0
        self.line_bps = 0.0


class Network:
    """Nodes, arcs and QPs on one :class:`EventList`.

    ``arc_src``/``arc_dst``/``arc_gbps``/``arc_delay_ns`` describe every arc (2l, 2l+1 =
    link l up, down); ``is_host[n]`` marks NIC nodes (the rest are switches). Only arcs in
    ``used_arcs`` get ports (routes and their reverses must be inside).
    """

    def __init__(self, ev: EventList, cfg: PacketConfig, *, arc_src: Sequence[int],
                 arc_dst: Sequence[int], arc_gbps: Sequence[float],
                 arc_delay_ns: Sequence[float], is_host: Sequence[bool],
                 used_arcs: Sequence[int]) -> None:
        self.ev = ev
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        nic = cfg.nic
        self.mtu = nic.mtu_payload_bytes
        self.hdr = nic.header_bytes
        self.ovh = nic.wire_overhead_bytes
        self.ack_bytes = nic.ack_bytes
        self.data_tc = nic.dscp_to_tc.get(nic.dscp, 0)
        self.cnp_tc = nic.dscp_to_tc.get(nic.cnp_dscp, 0)
        pfc = cfg.pfc
        self.lossless = [False] * 8
        if pfc.enabled:
            for prio in pfc.priorities:
                self.lossless[prio] = True
        self.ecn_on = cfg.ecn.enabled
        self.kmin, self.kmax, self.pmax = cfg.ecn.kmin_bytes, cfg.ecn.kmax_bytes, cfg.ecn.pmax
        self.alpha = cfg.buffer.alpha
        self.buf_size = cfg.buffer.size_bytes
        self.xoff_bytes, self.xon_bytes = pfc.xoff_bytes, pfc.xon_bytes
        self.cc_name = cfg.cc.algorithm
        self.int_on = self.cc_name == "hpcc"
        self.cnp_gap_ps = int(cfg.cc.dcqcn.min_time_between_cnps * PS_PER_US)
        self.rto_ps = int(nic.rto_us * PS_PER_US)
        self.is_host = list(map(bool, is_host))
        n_nodes = len(self.is_host)
        self.used = [0] * n_nodes  # shared-buffer bytes per switch
        self.reserved = [0] * n_nodes  # PFC headroom reserved per switch
        self.headroom: dict[int, int] = {}
        self.ports: dict[int, Port] = {}
        for a in sorted({int(x) for x in used_arcs} | {int(x) ^ 1 for x in used_arcs}):
            s, d = int(arc_src[a]), int(arc_dst[a])
            p = Port(a, s, d, float(arc_gbps[a]), round(arc_delay_ns[a] * 1000),
                     self.is_host[s])
            p.tcs = sorted({self.data_tc, self.cnp_tc}, reverse=True)
            self.ports[a] = p
        n_loss = sum(self.lossless)
        max_frame = self.mtu + self.hdr + self.ovh
        for a, p in self.ports.items():
            if self.is_host[p.dst] or not n_loss:
                continue
            h = pfc.headroom_bytes
            if h is None:  # bytes that still arrive after XOFF: 2 x (prop + 1 us) x rate
                h = int(2 * (p.prop_ps + PS_PER_US) * p.gbps / 8000) + 2 * max_frame
            self.headroom[a] = h
            self.reserved[p.dst] += h * n_loss
        over = [n for n in range(n_nodes) if self.reserved[n] > self.buf_size]
        if over:
            n = over[0]
            raise SpecError(Problem("packet.buffer.size_bytes", f"{self.buf_size} bytes "
                                    f"cannot hold the PFC headroom of switch {n}'s ports "
                                    f"({self.reserved[n]} bytes: ports x lossless "
                                    "priorities x headroom); allowed: a larger buffer or "
                                    "a smaller pfc.headroom_bytes"))
        self.qps: list[QP] = []
        self.sent_pfc = 0
        self.drops = 0
        self.retx = 0
        self.delivered = 0
        self.on_pause: Callable[[Port, int, bool], None] | None = None

    # ------------------------------------------------------------------ QPs
    def add_qp(self, route: Sequence[int], size_bytes: int, start_ps: int = 0,
               on_done: Callable[[QP], None] | None = None, tag: Any = None) -> QP:
        """A QP sending ``size_bytes`` along ``route`` (arcs), starting at ``start_ps``."""
        route = tuple(int(a) for a in route)
        qp = QP(len(self.qps), route, int(size_bytes), self.data_tc)
        qp.on_done, qp.tag = on_done, tag
        port = self.ports[route[0]]
        qp.port = port
        qp.path = tuple(self.ports[a] for a in route)
        qp.rpath = tuple(self.ports[a] for a in qp.rroute)
        qp.line_bps = port.gbps * 1e9
        frame = self.mtu + self.hdr + self.ovh
        rtt = 0
        for a in route:
            p = self.ports[a]
            r = self.ports[a ^ 1]
            rtt += p.prop_ps + p.ser_ps(frame) + r.prop_ps + r.ser_ps(self.ack_bytes + self.ovh)
        qp.base_rtt_ps = rtt
        qp.cc = make_cc(self.cc_name, self.cfg.cc, self, qp)
        self.qps.append(qp)
        self.ev.at(max(int(start_ps), self.ev.now), self._qp_start, qp)
        return qp

    def _qp_start(self, qp: QP) -> None:
        now = self.ev.now
        qp.start_ps = qp.next_avail = qp.last_progress = now
        if qp.size <= 0:
            qp.done_ps = now
            if qp.on_done is not None:
                qp.on_done(qp)
            return
        port = qp.port
        assert port is not None
        port.qps.append(qp)
        if not qp.rto_armed:
            qp.rto_armed = True
            self.ev.at(now + self.rto_ps, self._rto, qp)
        self.kick(port)

    def _rto(self, qp: QP) -> None:
        """Retransmission timeout: no ACK progress for ``rto_us`` -> go back to snd_una."""
        if qp.snd_una >= qp.size:
            qp.rto_armed = False
            return
        now = self.ev.now
        if qp.snd_nxt > qp.snd_una and now - qp.last_progress >= self.rto_ps:
            qp.timeouts += 1
            qp.snd_nxt = qp.snd_una
            qp.last_progress = now
            port = qp.port
            if port is not None:
                self.kick(port)
        self.ev.at(max(qp.last_progress, now) + self.rto_ps if qp.last_progress + self.rto_ps
                   <= now else qp.last_progress + self.rto_ps, self._rto, qp)

    # ------------------------------------------------------------------ egress
    def _tx_start(self, port: Port) -> None:
        """Put the next frame on the wire: the highest unpaused class with a frame, then
        (NIC) the next eligible QP, round robin."""
        paused = port.paused
        queues = port.queues
        now = self.ev.now
        pkt = None
        for tc in port.tcs:
            if queues[tc] and not paused[tc]:
                pkt = queues[tc].popleft()
                port.qbytes[tc] -= pkt.size
                break
        if pkt is None and port.qps:
            pkt = self._pull(port, now)
            if pkt is None:
                return
        elif pkt is None:
            return
        size = pkt.size
        if not port.host:  # free the switch buffer; XON when the ingress drains
            tc = pkt.tc
            self.used[port.src] -= size
            inp: Port = pkt.inp  # type: ignore[assignment]  # set when it was queued
            ing = inp.ing[tc] - size
            inp.ing[tc] = ing
            if inp.xoff[tc] and ing <= self.xon_bytes:
                inp.xoff[tc] = False
                self._send_pause(inp, tc, False)
            if self.int_on and pkt.kind == DATA:
                if pkt.int_ is None:
                    pkt.int_ = []
                pkt.int_.append((port.gbps, port.tx_bytes, now, port.qbytes[tc]))
        end = now + int((size + self.ovh) * port.ps_per_byte + 0.5)
        port.busy_until = end
        port.tx_bytes += size
        ev = self.ev
        heappush(ev.heap, (end + port.prop_ps, ev.seq, self._arrive, pkt))
        ev.seq += 1
        if port.qps or any(port.qbytes):
            port.txev = True
            heappush(ev.heap, (end, ev.seq, self._tx_done, port))
            ev.seq += 1

    def _pull(self, port: Port, now: int) -> Packet | None:
        qps = port.qps
        n = len(qps)
        wake = -1
        paused = port.paused
        i = port.rr
        for _ in range(n):
            if i >= n:
                i = 0
            qp = qps[i]
            i += 1
            if qp.snd_nxt >= qp.size or paused[qp.tc]:
                continue
            cc = qp.cc
            if qp.snd_nxt - qp.snd_una >= cc.window:
                continue
            avail = qp.next_avail + int(qp.last_wire * 8e12 / cc.rate)
            if avail > now:
                if wake < 0 or avail < wake:
                    wake = avail
                continue
            port.rr = i
            seq = qp.snd_nxt
            pay = min(self.mtu, qp.size - seq)
            size = pay + self.hdr
            pkt = Packet(qp, DATA, seq, pay, size, qp.tc, qp.path, now)
            if seq < qp.high:
                qp.retx_bytes += pay
                self.retx += pay
            qp.snd_nxt = seq + pay
            if qp.snd_nxt > qp.high:
                qp.high = qp.snd_nxt
            qp.next_avail = now  # pacing: the next packet may leave a gap later
            qp.last_wire = size + self.ovh
            cc.on_send(now, pay)
            return pkt
        # drop finished QPs from the round robin
        if any(q.snd_una >= q.size for q in qps):
            port.qps = [q for q in qps if q.snd_una < q.size]
            port.rr = 0
        if wake >= 0 and (port.wake_t < now or wake < port.wake_t):
            port.wake_t = wake
            self.ev.at(wake, self._wake, port)
        return None

    def _wake(self, port: Port) -> None:
        if port.wake_t == self.ev.now:
            port.wake_t = -1
            self.kick(port)

    def kick(self, port: Port) -> None:
        """Something may be ready to send on ``port``: start it now, or when the frame on
        the wire is done."""
        if port.txev:
            return
        now = self.ev.now
        if port.busy_until > now:
            port.txev = True
            ev = self.ev
            heappush(ev.heap, (port.busy_until, ev.seq, self._tx_done, port))
            ev.seq += 1
        else:
            self._tx_start(port)

    def _tx_done(self, port: Port) -> None:
        port.txev = False
        self._tx_start(port)

    # ------------------------------------------------------------------ switch
    def _arrive(self, pkt: Packet) -> None:
        """``pkt``'s last bit reaches the far end of its current arc: a NIC receives it;
        a switch admits it to the next egress port (shared buffer, PFC ingress
        accounting, WRED ECN) and sends it on if that port is idle."""
        route = pkt.route
        hop = pkt.hop + 1
        pkt.hop = hop
        if hop >= len(route):
            self._host_receive(pkt)
            return
        port = route[hop]
        inp = route[hop - 1]
        tc = pkt.tc
        size = pkt.size
        node = port.src
        if port.host:  # a NIC forwarding (not used by routes from the router)
            port.queues[tc].append(pkt)
            port.qbytes[tc] += size
            self.kick(port)
            return
        used = self.used[node]
        q = port.qbytes[tc]
        if self.lossless[tc]:
            ing = inp.ing[tc] + size
            free = self.buf_size - self.reserved[node] - used
            thr = min(self.xoff_bytes, self.alpha * free if free > 0 else 0)
            if used + size > self.buf_size or ing > thr + self.headroom.get(inp.arc, 0):
                port.drops += 1
                self.drops += 1
                return
            inp.ing[tc] = ing
            if ing > thr and not inp.xoff[tc]:
                inp.xoff[tc] = True
                self._send_pause(inp, tc, True)
        else:
            free = self.buf_size - self.reserved[node] - used
            if size > free or q + size > self.alpha * (free - size):
                port.drops += 1
                self.drops += 1
                return
            inp.ing[tc] += size
        pkt.inp = inp
        if self.ecn_on and pkt.kind == DATA and q > self.kmin and (
                q >= self.kmax or self.rng.random() <
                self.pmax * (q - self.kmin) / (self.kmax - self.kmin)):
            pkt.ce = 1
            port.ecn_marks += 1
        now = self.ev.now
        if not port.txev and port.busy_until <= now and not port.paused[tc] and \
                not any(port.qbytes):
            # the port is idle and nothing waits: straight onto the wire (what
            # enqueue + dequeue would do, without touching the queue)
            if size > port.q_peak[tc]:
                port.q_peak[tc] = size
            if self.int_on and pkt.kind == DATA:
                if pkt.int_ is None:
                    pkt.int_ = []
                pkt.int_.append((port.gbps, port.tx_bytes, now, 0))
            ing = inp.ing[tc] - size
            inp.ing[tc] = ing
            if inp.xoff[tc] and ing <= self.xon_bytes:
                inp.xoff[tc] = False
                self._send_pause(inp, tc, False)
            end = now + int((size + self.ovh) * port.ps_per_byte + 0.5)
            port.busy_until = end
            port.tx_bytes += size
            ev = self.ev
            heappush(ev.heap, (end + port.prop_ps, ev.seq, self._arrive, pkt))
            ev.seq += 1
            return
        self.used[node] = used + size
        q += size
        port.qbytes[tc] = q
        if q > port.q_peak[tc]:
            port.q_peak[tc] = q
        port.queues[tc].append(pkt)
        if not port.txev:
            if port.busy_until > now:
                port.txev = True
                ev = self.ev
                heappush(ev.heap, (port.busy_until, ev.seq, self._tx_done, port))
                ev.seq += 1
            else:
                self._tx_start(port)

    def _send_pause(self, inp: Port, tc: int, on: bool) -> None:
        """The node at the end of ``inp`` sends a PFC frame (XOFF or XON) back over it."""
        back = self.ports[inp.arc ^ 1]
        back.pfc_tx[tc] += 1
        self.sent_pfc += 1
        delay = inp.prop_ps + back.ser_ps(PAUSE_FRAME_BYTES)
        self.ev.at(self.ev.now + delay, self._pause_apply, (inp, tc, on))

    def _pause_apply(self, arg: tuple[Port, int, bool]) -> None:
        port, tc, on = arg
        now = self.ev.now
        port.pfc_rx[tc] += 1
        if on and not port.paused[tc]:
            port.paused[tc] = True
            port.pause_since[tc] = now
        elif not on and port.paused[tc]:
            port.paused[tc] = False
            d = now - port.pause_since[tc]
            port.paused_ps[tc] += d
            if d > port.pause_longest[tc]:
                port.pause_longest[tc] = d
            self.kick(port)
        if self.on_pause is not None:
            self.on_pause(port, tc, on)

    # ------------------------------------------------------------------ NIC receive
    def _reply(self, qp: QP, kind: int, seq: int, tc: int, data: Packet | None) -> None:
        ack = Packet(qp, kind, seq, 0, self.ack_bytes, tc, qp.rpath, self.ev.now)
        if data is not None:
            ack.ts = data.ts
            ack.int_ = data.int_
            ack.ce = qp.marked_since_ack
        port = qp.rpath[0]
        port.queues[tc].append(ack)
        port.qbytes[tc] += ack.size
        self.kick(port)

    def _host_receive(self, pkt: Packet) -> None:
        qp = pkt.qp
        kind = pkt.kind
        now = self.ev.now
        if kind == DATA:
            if pkt.ce:
                qp.marked_since_ack += 1
                if self.cc_name == "dcqcn" and now - qp.last_cnp >= self.cnp_gap_ps:
                    qp.last_cnp = now
                    self._reply(qp, CNP, 0, self.cnp_tc, None)
            if pkt.seq == qp.rcv_nxt:
                qp.rcv_nxt += pkt.payload
                self.delivered += pkt.payload
                qp.nak_sent = False
                qp.pkts_since_ack += 1
                last = qp.rcv_nxt >= qp.size
                if last and qp.done_ps < 0:
                    qp.done_ps = now
                    if qp.on_done is not None:
                        qp.on_done(qp)
                if last or qp.pkts_since_ack >= self.cfg.nic.ack_interval_packets:
                    qp.pkts_since_ack = 0
                    self._reply(qp, ACK, qp.rcv_nxt, qp.tc, pkt)
                    qp.marked_since_ack = 0
            elif pkt.seq > qp.rcv_nxt:  # a gap: go-back-N
                if not qp.nak_sent:
                    qp.nak_sent = True
                    self._reply(qp, NAK, qp.rcv_nxt, qp.tc, pkt)
            else:  # a duplicate of delivered bytes
                qp.dup_bytes += pkt.payload
                self._reply(qp, ACK, qp.rcv_nxt, qp.tc, pkt)
            return
        cc = qp.cc
        if kind == CNP:
            qp.cnps += 1
            cc.on_cnp(now)
            return
        seq = pkt.seq
        if seq > qp.snd_una:
            qp.snd_una = seq
            qp.last_progress = now
            if qp.snd_nxt < seq:
                qp.snd_nxt = seq
        if kind == NAK:
            qp.naks += 1
            if qp.snd_nxt > seq:
                qp.snd_nxt = seq
        cc.on_ack(now, pkt)
        if qp.snd_una >= qp.size and qp.acked_at < 0:
            qp.acked_at = now
        port = qp.port
        if port is not None:
            self.kick(port)

    # ------------------------------------------------------------------ state
    def paused_edges(self) -> list[tuple[int, int, int]]:
        """(a, b, tc): switch egress ``a`` is paused and the node it feeds holds frames
        that came in over ``a`` in its own paused egress ``b`` — ``a`` waits on ``b``."""
        out = []
        for b, pb in self.ports.items():
            if pb.host:
                continue
            for tc in pb.tcs:
                if not pb.paused[tc] or not pb.queues[tc]:
                    continue
                ins = {pkt.inp.arc for pkt in pb.queues[tc] if pkt.inp is not None}
                for a in sorted(ins):
                    pa = self.ports.get(a)
                    if pa is not None and pa.paused[tc] and not pa.host:
                        out.append((a, b, tc))
        return out
