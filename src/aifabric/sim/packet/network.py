"""Ports, links, switches and RoCE NICs of the packet simulator.

Every arc (a direction of a link) is an egress :class:`Port` at its source node: one FIFO
queue per traffic class, strict priority between classes, a serializer and the
propagation delay of the link. Arc ``2l`` is link ``l`` up and ``2l+1`` down, so the
reverse of arc ``a`` is ``a ^ 1`` (the Fabric convention).

A *switch* node holds a shared buffer with dynamic thresholds, counts ingress bytes per
(ingress port, priority) for PFC, and marks ECN (WRED, the port's own profile) on enqueue
or dequeue (``packet.switch.ecn_mark``). A *host* node is a
RoCE NIC: its egress ports pull MTU-sized packets from their queue pairs (QPs) round
robin, each QP paced by its congestion control's rate (and window); the receiving NIC
returns ACKs (cumulative), NAKs (go-back-N) and CNPs. Packets follow source routes: the
arcs the router chose for their flow.

Time is integer picoseconds; frame sizes are bytes on the wire (payload + headers;
serialization adds the preamble and inter-frame gap).

One event per frame per hop: its arrival at the far end (the serializer's end only needs
an event when more frames wait behind it). The state lives in numpy arrays and the event
loop is compiled (:mod:`aifabric.sim.packet.kernel`); :class:`Network` owns the arrays
and drives the loop, and :class:`Port`, :class:`QP`, :class:`Packet` and the ``cc`` of a
QP are live views of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from heapq import heappop
from itertools import pairwise
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.sim.packet import layout as L
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.engine import PS_PER_US, EventList
from aifabric.topology.buffers import pg_headroom

__all__ = ["ACK", "CNP", "DATA", "DEFAULT_BUFFER_BYTES", "DEFAULT_RESPONSE_NS", "NAK", "QP",
           "Network", "Packet", "Port", "SwitchBuffers"]

DATA, ACK, NAK, CNP = 0, 1, 2, 3
PAUSE_FRAME_BYTES = 64 + 20
#: the buffer of each switch of a network built without a fabric (no switch models) and
#: without ``packet.buffer.size_bytes``
DEFAULT_BUFFER_BYTES = 32 << 20
#: trimmed packets a sender (ooo receiver) queues for repair; beyond, it goes back to the
#: trimmed packet (go-back-N from there)
TRIM_REPAIRS = 64
#: the peer's PFC response time in the headroom of a network built without a fabric, ns
#: (the fabric's: ``deploy.qos.pfc_response_ns``)
DEFAULT_RESPONSE_NS = 1000


@dataclass
class SwitchBuffers:
    """The switch buffers of a network built from a Fabric (per node / per arc arrays,
    :func:`aifabric.topology.buffers.buffer_plan`): buffer, headroom pool, the headroom of
    each lossless ingress arc, each arc's link propagation without the switch latency
    (what a PFC frame back over it takes), and where the buffers come from (``model``,
    ``override``)."""

    node_buffer_bytes: np.ndarray
    node_reserved_bytes: np.ndarray | None = None
    arc_headroom: np.ndarray | None = None
    arc_link_delay_ns: np.ndarray | None = None
    source: str = "model"


def _kernel() -> Any:
    # numba is imported with the first network, not with the package (scenario loading
    # and the flow simulator never pay for it)
    from aifabric.sim.packet import kernel

    return kernel


def _transports() -> Any:
    from aifabric.sim.packet import transports

    return transports


class Packet:
    """A frame waiting in a queue (a snapshot; see :attr:`Port.queues`). ``seq`` is the
    byte offset of a data packet's payload (or the cumulative ACK/NAK point); ``inp`` is
    the port (arc) it arrived on."""

    __slots__ = ("ce", "inp", "kind", "payload", "qp", "seq", "size", "tc")

    def __init__(self, qp: QP, kind: int, seq: int, payload: int, size: int, tc: int,
                 inp: Port | None, ce: int) -> None:
        self.qp, self.kind, self.seq, self.payload = qp, kind, seq, payload
        self.size, self.tc, self.inp, self.ce = size, tc, inp, ce


def _port_int(col: int) -> property:
    def get(self: Port) -> int:
        return int(self.net.PI[self.pid, col])

    return property(get)


def _port_tc(col: int) -> property:
    def get(self: Port) -> list[int]:
        return self.net.PT[self.pid, col].tolist()

    return property(get)


class Port:
    """The egress side of one arc, and the ingress accounting of that arc at the node it
    enters (``ing``/``xoff``: bytes held per priority and whether XOFF was sent). Counters
    are read live from the network's arrays; per-class ones are lists of 8 (of 16 VLs on
    InfiniBand)."""

    __slots__ = ("arc", "dst", "gbps", "host", "net", "pid", "prop_ps", "ps_per_byte",
                 "src", "tcs")

    def __init__(self, net: Network, pid: int, arc: int, src: int, dst: int, gbps: float,
                 prop_ps: int, host: bool, tcs: list[int]) -> None:
        self.net, self.pid = net, pid
        self.arc, self.src, self.dst, self.gbps, self.prop_ps = arc, src, dst, gbps, prop_ps
        self.ps_per_byte = 8000.0 / gbps
        self.host = host
        self.tcs = tcs  # traffic classes in use, highest first

    def ser_ps(self, wire_bytes: int) -> int:
        """Serialization time of ``wire_bytes`` (frame + preamble + gap)."""
        return int(wire_bytes * self.ps_per_byte + 0.5)

    busy_until = _port_int(L.P_BUSY)  # the current frame's last bit leaves at this time
    tx_bytes = _port_int(L.P_TXB)
    ecn_marks = _port_int(L.P_ECN)
    drops = _port_int(L.P_DROPS)
    qbytes = _port_tc(L.T_QB)
    q_peak = _port_tc(L.T_QPEAK)
    pause_since = _port_tc(L.T_PSINCE)
    paused_ps = _port_tc(L.T_PAUSEDPS)
    pause_longest = _port_tc(L.T_PLONG)
    pfc_tx = _port_tc(L.T_PFCTX)  # pause frames (XOFF + XON) sent out of this port
    pfc_rx = _port_tc(L.T_PFCRX)  # pause frames received by this port
    ing = _port_tc(L.T_ING)

    @property
    def paused(self) -> list[bool]:
        return [bool(x) for x in self.net.PT[self.pid, L.T_PAUSED]]

    @property
    def xoff(self) -> list[bool]:
        return [bool(x) for x in self.net.PT[self.pid, L.T_XOFF]]

    @property
    def queues(self) -> list[list[Packet]]:
        """The frames waiting per traffic class, head first."""
        net = self.net
        return [[net.packet(k) for k in net.queue_ids(self.pid, tc)]
                for tc in range(net.PT.shape[2])]  # 8 classes; 16 VLs on InfiniBand


def _qp_int(col: int) -> property:
    def get(self: QP) -> int:
        return int(self.net.QI[self.id, col])

    return property(get)


class QP:
    """A queue pair: a sender (reaction point) at ``route[0]``'s source, a receiver
    (notification point) at the last arc's destination. Bytes are numbered 0..size."""

    __slots__ = ("base_rtt_ps", "cc", "id", "line_bps", "net", "on_done", "path", "port",
                 "route", "rpath", "rroute", "size", "tag", "tc")

    def __init__(self, net: Network, qid: int, route: tuple[int, ...], size: int,
                 tc: int, ack_route: tuple[int, ...] | None = None) -> None:
        self.net = net
        self.id = qid
        self.route = route
        #: the arcs its ACKs, NAKs and CNPs take back (default: the data route reversed)
        self.rroute = ack_route if ack_route is not None else \
            tuple(a ^ 1 for a in reversed(route))
        self.path: tuple[Port, ...] = ()  # egress ports of route, set by the network
        self.rpath: tuple[Port, ...] = ()
        self.size = size
        self.tc = tc
        self.cc: CongestionControl | None = None
        self.port: Port | None = None
        self.on_done: Callable[[QP], None] | None = None
        self.tag: Any = None
        self.base_rtt_ps = 0
        self.line_bps = 0.0

    snd_nxt = _qp_int(L.Q_SNDNXT)
    snd_una = _qp_int(L.Q_SNDUNA)
    high = _qp_int(L.Q_HIGH)
    rcv_nxt = _qp_int(L.Q_RCVNXT)
    start_ps = _qp_int(L.Q_START)
    done_ps = _qp_int(L.Q_DONE)
    acked_at = _qp_int(L.Q_ACKEDAT)
    first_tx_ps = _qp_int(L.Q_FIRSTTX)  # its first data byte went on the wire

    @property
    def nic_window(self) -> float:
        """The NIC's in-flight window (bytes; ``inf``: none) at line rate
        (``packet.nic.window``)."""
        return float(self.net.QF[self.id, L.F_WINB])
    retx_bytes = _qp_int(L.Q_RETX)
    dup_bytes = _qp_int(L.Q_DUP)
    timeouts = _qp_int(L.Q_TO)
    naks = _qp_int(L.Q_NAKS)
    cnps = _qp_int(L.Q_CNPS)


class CongestionControl:
    """The congestion control of one QP (a live view): ``rate`` (bit/s, the pacing of its
    packets), ``window`` (bytes in flight; ``inf`` for rate-only schemes) and the
    algorithm's state by name (DCQCN: ``alpha``, ``rt``, ``pending``, ...). The
    algorithms themselves are in :mod:`aifabric.sim.packet.kernel`, one block each, and
    documented in :mod:`aifabric.sim.packet.transports`."""

    __slots__ = ("name", "net", "q")

    def __init__(self, net: Network, q: int, name: str) -> None:
        self.net, self.q, self.name = net, q, name

    @property
    def rate(self) -> float:
        return float(self.net.QF[self.q, L.F_RATE])

    @property
    def window(self) -> float:
        return float(self.net.QF[self.q, L.F_WIN])

    def __getattr__(self, attr: str) -> Any:
        f = _transports().FIELDS[self.name].get(attr)
        if f is None:
            raise AttributeError(f"{self.name} congestion control has no {attr!r}")
        v = getattr(self.net, f[0])[self.q, f[1]]
        if attr in ("pending", "increased"):
            return bool(v)
        return float(v) if f[0] == "QF" else int(v)

    def on_cnp(self, now: int) -> None:
        """A CNP reaches the sender at ``now`` (DCQCN's reaction point)."""
        self.net.reserve()
        _kernel().cc_on_cnp(self.net.S, self.q, int(now))


class Network:
    """Nodes, arcs and QPs on one :class:`EventList`.

    ``arc_src``/``arc_dst``/``arc_gbps``/``arc_delay_ns`` describe every arc (2l, 2l+1 =
    link l up, down); ``is_host[n]`` marks NIC nodes (the rest are switches). Only arcs in
    ``used_arcs`` get ports (routes, ACK routes and their reverses must be inside; with
    ``lb`` (:class:`aifabric.sim.packet.lb.LbGroups`, per-packet load balancing) every
    member arc of its groups too). NIC-side spraying (``nic.entropy`` other than fixed)
    needs ``lb`` (the groups the switches hash over) and ``entropy``
    (:class:`aifabric.sim.packet.entropy.EntropyHash`: the switches' hash).

    The arrays start at the sizes below and double when the run needs more.
    """

    initial_frames = 4096  # frames alive at once (in queues or on the wire)
    initial_hops = 8  # the longest route
    initial_port_qps = 4  # QPs in one NIC port's round robin
    initial_heap = 1024  # pending events, besides 4 per port
    initial_qps = 64

    def __init__(self, ev: EventList, cfg: PacketConfig, *, arc_src: Sequence[int],
                 arc_dst: Sequence[int], arc_gbps: Sequence[float],
                 arc_delay_ns: Sequence[float], is_host: Sequence[bool],
                 used_arcs: Sequence[int], node_names: Sequence[str] | None = None,
                 buffers: SwitchBuffers | None = None, lb: Any = None,
                 entropy: Any = None, ib: Any = None) -> None:
        K = _kernel()
        #: InfiniBand's link model (:class:`aifabric.sim.packet.ibmodel.IbLink`; None: RoCE)
        self.ib = ib
        #: node names for messages (default: n<index>)
        self.node_names = list(node_names) if node_names is not None else \
            [f"n{i}" for i in range(len(is_host))]
        self.K = K
        self.ev = ev
        self.cfg = cfg
        nic = cfg.nic
        self.mtu = nic.mtu_payload_bytes
        self.hdr = nic.header_bytes
        self.ovh = nic.wire_overhead_bytes
        self.ack_bytes = nic.ack_bytes
        self.data_tc = nic.dscp_to_tc.get(nic.dscp, 0)
        self.cnp_tc = nic.dscp_to_tc.get(nic.cnp_dscp, 0)
        if ib is not None:  # the classes are VLs: the default SL's, BECNs on it too
            self.data_tc = self.cnp_tc = ib.vl(ib.sl)
        pfc = cfg.pfc
        n_cls = 8 if ib is None else 16
        self.lossless = [False] * n_cls
        if pfc.enabled and ib is None:
            for prio in pfc.priorities:
                self.lossless[prio] = True
        self.cc_name = cfg.cc.algorithm
        self.int_on = self.cc_name == "hpcc"
        self.is_host = list(map(bool, is_host))
        n_nodes = len(self.is_host)
        tcs = sorted({self.data_tc, self.cnp_tc}, reverse=True)
        if ib is not None:
            tcs = ib.vls()
        self.tcs = tcs
        arcs = sorted({int(x) for x in used_arcs} | {int(x) ^ 1 for x in used_arcs})
        self.pid = {a: i for i, a in enumerate(arcs)}
        P = len(arcs)
        self.PI = PI = np.zeros((P, L.NPI), dtype=np.int64)
        self.PF = PF = np.zeros((P, L.NPF), dtype=np.float64)
        # stored class-major (port x TC x field) and seen as port x field x TC: the
        # fields of one (port, class) that the loop touches per frame share a cache line
        self.PT = PT = np.zeros((P, n_cls, L.NPT), dtype=np.int64).transpose(0, 2, 1)
        PT[:, L.T_QH] = -1
        PT[:, L.T_QT] = -1
        self.ports: dict[int, Port] = {}
        for i, a in enumerate(arcs):
            s, d = int(arc_src[a]), int(arc_dst[a])
            gbps = float(arc_gbps[a])
            prop = round(arc_delay_ns[a] * 1000)
            self.ports[a] = Port(self, i, a, s, d, gbps, prop, self.is_host[s], tcs)
            PI[i, L.P_ARC], PI[i, L.P_SRC], PI[i, L.P_DST] = a, s, d
            PI[i, L.P_HOST] = self.is_host[s]
            PI[i, L.P_PROP] = prop
            PI[i, L.P_LPROP] = prop if buffers is None or buffers.arc_link_delay_ns is None \
                else round(buffers.arc_link_delay_ns[a] * 1000)
            PF[i, L.P_PPB], PF[i, L.P_GBPS] = 8000.0 / gbps, gbps
        for a, i in self.pid.items():
            PI[i, L.P_REV] = self.pid[a ^ 1]
        PI[:, L.P_FH] = -1
        PI[:, L.P_FT] = -1
        PI[:, L.P_WAKE] = -1
        self._wred_profiles(cfg.ecn)
        self.NU = np.zeros((n_nodes, L.NNU), dtype=np.int64)
        self.NU[:, L.U_CRH] = self.NU[:, L.U_CRT] = -1  # RCCC: no QP waits for credit
        max_frame = self.mtu + self.hdr + self.ovh
        self._buffers(cfg, buffers, n_nodes, max_frame)
        self._check_trim(cfg)
        if nic.rx_gbps is not None:
            self._rx_setup(nic, max_frame)
        self._lb_tables(cfg, lb, n_nodes, entropy)
        self.G = np.zeros(L.NG, dtype=np.int64)
        self.CI = self._int_settings(cfg, tcs)
        self.CF = self._float_settings(cfg)
        _transports().set_params(self.cc_name, self.CI, self.CF, cfg.cc)
        self.LL = np.array(self.lossless, dtype=np.int64)
        if ib is not None:
            from aifabric.sim.packet.ibmodel import setup

            setup(self, ib)
        elif self.cc_name == "ibcc":  # without InfiniBand: no SL settings, no reaction
            self.CI[L.IB_SLCC0] = len(self.LBT)
            self.LBT = np.concatenate([self.LBT, np.zeros(64, dtype=np.int64)])
        lb_seed = cfg.seed if cfg.lb.seed is None else cfg.lb.seed
        self.RNG = np.array([cfg.seed & ((1 << 64) - 1),
                             (lb_seed ^ 0x5EED5EED5EED5EED) & ((1 << 64) - 1),
                             (cfg.seed ^ 0xE47E47E47E47E47E) & ((1 << 64) - 1)],
                            dtype=np.uint64)
        self.H = self.initial_hops  # the longest route the arrays hold
        self.HT = np.zeros((4 * P + self.initial_heap, 5), dtype=np.int64)
        self.PQ = np.zeros((P, self.initial_port_qps), dtype=np.int64)
        self._alloc_packets(self.initial_frames)
        self.QI = np.zeros((0, self._qi_width(self.H)[0]), dtype=np.int64)
        self.QF = np.zeros((0, L.NQF), dtype=np.float64)
        self.QR = np.zeros((0, 2, self.H), dtype=np.int64)
        self.QINT = np.zeros((0, self.H if self.int_on else 1, 4), dtype=np.float64)
        self._grow_qps(self.initial_qps)
        self.qps: list[QP] = []
        self._pack()
        ev.kernel = self._loop
        ev.next_seq = self._next_seq

    # ------------------------------------------------------------------ arrays
    def _wred_profiles(self, ecn: Any) -> None:
        """Each port's WRED profile (Kmin, Kmax, Pmax) into its own columns: the one of
        its speed from ``ecn.by_speed``, else the single profile. Every speed of a switch
        egress port must be in a non-empty ``by_speed``."""
        PI, PF = self.PI, self.PF
        gbps = PF[:, L.P_GBPS]
        speeds = np.unique(gbps)
        profiles = {float(g): ecn.for_speed(g) for g in speeds.tolist()}
        switch = PI[:, L.P_HOST] == 0
        missing = sorted({float(g) for g in np.unique(gbps[switch]).tolist()
                          if profiles[float(g)] is None})
        if missing:
            raise SpecError(Problem("packet.ecn.by_speed", "no profile for port speed "
                                    f"{', '.join(f'{g:g}' for g in missing)} Gbit/s of "
                                    "this run's switch ports; allowed: a map by every port "
                                    "speed (has: "
                                    f"{', '.join(str(k) for k in sorted(ecn.by_speed))}; "
                                    "a scenario's comes from deploy.qos.wred unless its "
                                    "packet.ecn sets thresholds)"))
        which = np.searchsorted(speeds, gbps)
        for i, g in enumerate(speeds.tolist()):
            e = profiles[float(g)] or ecn  # a NIC port's speed: not used for marking
            at = which == i
            PI[at, L.P_KMIN], PI[at, L.P_KMAX], PF[at, L.P_PMAX] = \
                e.kmin_bytes, e.kmax_bytes, e.pmax

    def _buffers(self, cfg: PacketConfig, buffers: SwitchBuffers | None, n_nodes: int,
                 max_frame: int) -> None:
        """Each switch's buffer, headroom pool and the headroom of each lossless ingress
        port: from ``buffers`` (the Fabric's switch models,
        :func:`aifabric.topology.buffers.buffer_plan`), else ``packet.buffer.size_bytes``
        (default :data:`DEFAULT_BUFFER_BYTES`) with every used port's headroom from
        :func:`~aifabric.topology.buffers.pg_headroom` (its propagation as the cable,
        the frame as MTU, :data:`DEFAULT_RESPONSE_NS`). ``pfc.headroom_bytes`` overrides
        every port's headroom. A headroom pool that does not fit is refused unless
        ``pfc.allow_overcommit``."""
        pfc = cfg.pfc
        NU, PI = self.NU, self.PI
        n_loss = sum(self.lossless)
        is_sw = ~np.asarray(self.is_host, dtype=bool)
        size = cfg.buffer.size_bytes
        fallback = DEFAULT_BUFFER_BYTES if size is None else size
        planned = np.zeros(len(NU), dtype=bool)  # switches of the fabric's buffer plan
        if buffers is not None:
            planned = is_sw & (np.asarray(buffers.node_buffer_bytes) > 0)
            NU[:, L.U_BUF] = np.where(planned, buffers.node_buffer_bytes, 0)
        # nodes that forward without a buffer plan (a hand-built network; a host's
        # scale-up switch on an NVLink route): the override or the default
        NU[:, L.U_BUF] = np.where(is_sw & ~planned, fallback, NU[:, L.U_BUF])
        #: the nodes whose buffers the report describes: the fabric's switches (without a
        #: fabric: every switch)
        self.reported_switches = planned if buffers is not None else is_sw
        #: where the switch buffers come from: "model" (each switch model's buffer_mb),
        #: "override" (packet.buffer.size_bytes), "default" (a network without a fabric)
        self.buffer_source = buffers.source if buffers is not None else \
            ("default" if size is None else "override")
        from_plan = buffers is not None and buffers.node_reserved_bytes is not None and \
            pfc.headroom_bytes is None
        self.headroom: dict[int, int] = {}
        for a, p in self.ports.items():
            if self.is_host[p.dst] or not n_loss:
                continue
            h = pfc.headroom_bytes
            if h is None and from_plan and planned[p.dst] and buffers.arc_headroom is not None \
                    and buffers.arc_headroom[a] > 0:
                h = int(buffers.arc_headroom[a])
            if h is None:
                h = pg_headroom(p.gbps, p.prop_ps / 1000, max_frame, DEFAULT_RESPONSE_NS)[0]
            self.headroom[a] = h
            PI[p.pid, L.P_HEADROOM] = h
            if not (from_plan and planned[p.dst]):
                NU[p.dst, L.U_RESV] += h * n_loss
        if from_plan and n_loss:
            NU[:, L.U_RESV] = np.where(planned, buffers.node_reserved_bytes, NU[:, L.U_RESV])
        self.reserved = NU[:, L.U_RESV]
        need = self.reserved + np.where(self.reserved > 0, pfc.xoff_bytes, 0)
        over = np.flatnonzero(need > NU[:, L.U_BUF])
        #: the switches whose buffer cannot hold their headroom pool and one XOFF
        #: threshold, run anyway (``pfc.allow_overcommit``): one line each
        self.overcommit: list[str] = []
        for n in over.tolist():
            line = (f"switch {self.node_names[n]}: buffer {int(NU[n, L.U_BUF]):,} B < PFC "
                    f"headroom pool {int(self.reserved[n]):,} B + one XOFF threshold "
                    f"{pfc.xoff_bytes:,} B ({int(need[n] - NU[n, L.U_BUF]):,} B short)")
            if not pfc.allow_overcommit:
                field = "packet.buffer.size_bytes" if self.buffer_source != "model" else \
                    "packet.pfc"
                raise SpecError(Problem(field, f"{line}; allowed: a buffer of at least "
                                        f"{int(need[n]):,} B, a smaller pfc.headroom_bytes or "
                                        "xoff_bytes, or pfc.allow_overcommit: true to run "
                                        "it and see the lossless drops"))
            self.overcommit.append(line)

    def _check_trim(self, cfg: PacketConfig) -> None:
        """``switch.trim.threshold_bytes`` must be a queue length every switch's buffer
        can hold."""
        tr = cfg.switch.trim
        sw = np.flatnonzero(~np.asarray(self.is_host, dtype=bool))
        if not tr.enabled or tr.threshold_bytes is None or not len(sw):
            return
        buf = self.NU[sw, L.U_BUF]
        i = int(np.argmin(buf))
        if tr.threshold_bytes > buf[i]:
            raise SpecError(Problem("packet.switch.trim.threshold_bytes",
                                    f"{tr.threshold_bytes} is above the buffer of switch "
                                    f"{self.node_names[int(sw[i])]} ({int(buf[i])} bytes): "
                                    "no queue reaches it; allowed: at most the smallest "
                                    "switch buffer"))

    def _int_settings(self, cfg: PacketConfig, tcs: list[int]) -> np.ndarray:
        ci = np.zeros(L.NCI, dtype=np.int64)
        ci[L.BUF] = int(self.NU[:, L.U_BUF].max()) if len(self.NU) else 0
        ci[L.XOFF], ci[L.XON] = cfg.pfc.xoff_bytes, cfg.pfc.xon_bytes
        ci[L.KMIN], ci[L.KMAX] = cfg.ecn.kmin_bytes, cfg.ecn.kmax_bytes
        ci[L.ECN_ON] = cfg.ecn.enabled
        ci[L.ECN_DEQ] = cfg.switch.ecn_mark == "dequeue"
        ci[L.INT_ON] = self.int_on
        ci[L.OVH], ci[L.HDR], ci[L.MTU], ci[L.ACKB] = self.ovh, self.hdr, self.mtu, \
            self.ack_bytes
        ci[L.DTC], ci[L.CTC] = self.data_tc, self.cnp_tc
        ci[L.CNPGAP] = int(cfg.cc.dcqcn.min_time_between_cnps * PS_PER_US)
        ci[L.RTO] = int(cfg.nic.rto_us * PS_PER_US)
        ci[L.ACKINT] = cfg.nic.ack_interval_packets
        ci[L.NTC] = len(tcs)
        nic = cfg.nic
        ci[L.WIN_ON] = nic.window != "none"
        ci[L.WIN_SCALE] = nic.window_scales_with_rate
        ci[L.RX_ON] = nic.rx_gbps is not None
        ci[L.HOST_PFC] = nic.host_pfc.enabled
        ci[L.HRXBUF] = nic.host_pfc.rx_buffer_bytes
        for i, tc in enumerate(tcs):
            ci[L.TC0 + i] = tc
        ci[L.LB_MODE] = self.lb_mode
        ci[L.LB_SPRAY] = cfg.lb.spray == "round_robin"
        ci[L.LB_GAP] = round(cfg.lb.flowlet_gap_ns * 1000)
        ci[L.RX_OOO] = self.ooo
        ci[L.OOO_W] = self.ooo_w
        ci[L.LB_ND], ci[L.LB_GT0], ci[L.LB_GP0], ci[L.LB_GA0], ci[L.LB_GRR0] = self.lb_offsets
        _, ci[L.QX_RB], ci[L.QX_QL], ci[L.QX_H] = self._qi_width(self.initial_hops)
        ci[L.QX_RH] = L.NQI
        ci[L.EV_ALG] = self.ev_alg
        ci[L.EV_N] = cfg.nic.entropy.values
        ci[L.EV_RB] = self.reps_b
        ci[L.QX_EV] = ci[L.QX_QL] - self.reps_b - self.trq
        ci[L.TRQ_N] = self.trq
        ci[L.QX_TRQ] = ci[L.QX_QL] - self.trq
        ci[L.EV_DT0], ci[L.EV_NX0], ci[L.EV_NO0] = self.ev_offsets
        if self.entropy is not None:
            ci[L.EV_W] = self.entropy.width
            ci[L.EV_SEL] = self.entropy.selection == "table"
            ci[L.EV_TS] = self.entropy.table_size
        ci[L.FRX] = cfg.nic.fast_retransmit_packets if self.ooo else 0
        ci[L.ACKCO] = bool(self.ooo) and cfg.nic.ooo_acks == "coalesced"
        tr = cfg.switch.trim
        ci[L.TRIM_ON] = tr.enabled
        ci[L.TRIM_THR] = tr.threshold_bytes if tr.threshold_bytes is not None else -1
        ci[L.TRIM_B] = tr.header_bytes
        return ci

    def _float_settings(self, cfg: PacketConfig) -> np.ndarray:
        cf = np.zeros(L.NCF, dtype=np.float64)
        cf[L.ALPHA] = cfg.buffer.alpha
        cf[L.PMAX] = cfg.ecn.pmax
        if cfg.nic.rx_gbps is not None:
            cf[L.RX_PPB] = 8000.0 / cfg.nic.rx_gbps
        return cf

    def _rx_setup(self, nic: Any, max_frame: int) -> None:
        """The NICs' receive buffers (``nic.rx_gbps`` set): per host node its XOFF/XON
        thresholds (default: the buffer less the headroom of its link, as for a switch
        port; XON one frame lower, as the mlx5 driver sets them) and its arc in."""
        PI, NU = self.PI, self.NU
        hp = nic.host_pfc
        into = np.flatnonzero(np.asarray(self.is_host, dtype=bool)[PI[:, L.P_DST]])
        dst = PI[into, L.P_DST]
        NU[:, L.U_RXH] = NU[:, L.U_RXT] = NU[:, L.U_INP] = -1
        n_in = np.bincount(dst, minlength=len(NU))
        one = n_in[dst] == 1
        NU[dst[one], L.U_INP] = into[one]
        gbps = self.PF[into, L.P_GBPS]
        head = (2 * (PI[into, L.P_PROP] + PS_PER_US) * gbps / 8000).astype(np.int64) + \
            2 * max_frame
        room = np.zeros(len(NU), dtype=np.int64)  # links from switches (not NVLink, PCIe)
        sw = PI[into, L.P_HOST] == 0
        np.maximum.at(room, dst[sw], head[sw])
        xoff = np.full(len(NU), hp.xoff_bytes if hp.xoff_bytes is not None else 0,
                       dtype=np.int64)
        if hp.xoff_bytes is None:
            xoff[dst] = hp.rx_buffer_bytes - room[dst]
            if hp.enabled and any(self.lossless) and len(dst) and xoff[dst].min() < max_frame:
                i = int(dst[np.argmin(xoff[dst])])
                raise SpecError(Problem("packet.nic.host_pfc.rx_buffer_bytes",
                                        f"{hp.rx_buffer_bytes} bytes cannot hold the "
                                        f"headroom of NIC {self.node_names[i]}'s link "
                                        f"({int(room[i])} bytes) "
                                        "and a frame; allowed: a larger rx_buffer_bytes or "
                                        "an explicit xoff_bytes"))
        if hp.xon_bytes is not None and len(dst) and hp.xon_bytes > xoff[dst].min():
            i = int(dst[np.argmin(xoff[dst])])
            raise SpecError(Problem("packet.nic.host_pfc.xon_bytes",
                                    f"{hp.xon_bytes} is above the XOFF threshold of NIC "
                                    f"{self.node_names[i]} ({int(xoff[i])} bytes: the buffer "
                                    "less its link's headroom); allowed: xon_bytes <= "
                                    "xoff_bytes"))
        NU[:, L.U_HXOFF] = xoff
        NU[:, L.U_HXON] = hp.xon_bytes if hp.xon_bytes is not None else \
            np.maximum(xoff - max_frame, 0)

    def _lb_tables(self, cfg: PacketConfig, lb: Any, n_nodes: int, entropy: Any) -> None:
        """Per-packet load balancing (``packet.lb``), NIC-side spraying
        (``nic.entropy``) and the receiver's bitmap: the groups of ``lb``
        (:class:`aifabric.sim.packet.lb.LbGroups`; arcs as port rows, every member arc
        must have a port) and the hash tables of ``entropy`` into the kernel's arrays."""
        ent = cfg.nic.entropy
        self.ev_alg = {"fixed": L.EV_FIXED, "oblivious": L.EV_OBLIVIOUS,
                       "round_robin": L.EV_RR, "reps": L.EV_REPS}[ent.algorithm]
        if self.ev_alg != L.EV_FIXED and (lb is None or entropy is None):
            raise ValueError("nic.entropy needs the network's ECMP groups (lb) and the "
                             "switches' hash (entropy)")
        self.entropy = entropy if self.ev_alg != L.EV_FIXED else None
        self.reps_b = ent.reps_buffer if self.ev_alg == L.EV_REPS else 0
        #: the repair queue of trimmed packets (trimming with the ooo receiver)
        self.trq = TRIM_REPAIRS if cfg.switch.trim.enabled and \
            cfg.nic.receiver == "ooo" else 0
        self.ev_offsets = (0, 0, 0)
        mode = cfg.lb.mode or "ecmp"
        self.lb_mode = {"ecmp": L.LB_ECMP, "spray": L.LB_SPRAYM,
                        "adaptive": L.LB_ADAPTIVE}[mode]
        self.flowlets = mode == "adaptive" and cfg.lb.flowlet_gap_ns > 0
        self.ooo = cfg.nic.receiver == "ooo"
        self.ooo_w = cfg.nic.ooo_bitmap_packets
        i64 = np.int64
        self.lb_dest = np.full(n_nodes, -1, dtype=i64)  # destination node -> column
        if lb is None:
            self.lb_mode = L.LB_ECMP
        if self.lb_mode == L.LB_ECMP and self.entropy is None:
            self.LBT = np.full(n_nodes, -1, dtype=i64)
            self.lb_offsets = (0, n_nodes, n_nodes, n_nodes, n_nodes)
            return
        # (no port at all: a run whose transfers all stay inside hosts)
        arc_pid = np.full(int(self.PI[:, L.P_ARC].max(initial=-1)) + 1, -1, dtype=i64)
        arc_pid[self.PI[:, L.P_ARC]] = np.arange(len(self.PI))
        ga = np.asarray(lb.arcs, dtype=i64)
        missing = ga[(ga >= len(arc_pid))
                     | (arc_pid[np.clip(ga, 0, max(len(arc_pid) - 1, 0))] < 0)] \
            if len(arc_pid) else ga
        if len(missing):
            raise ValueError(f"load-balancing member arc {int(missing[0])} has no port "
                             "(add the groups' arcs to used_arcs)")
        gt = np.stack([np.asarray(lb.group, dtype=i64), np.asarray(lb.hops, dtype=i64)],
                      axis=-1).ravel()
        gp = np.asarray(lb.ptr, dtype=i64)
        parts = [np.asarray(lb.node_row, dtype=i64), gt, gp, arc_pid[ga],
                 np.zeros(max(len(gp) - 1, 0), dtype=i64)]
        if self.entropy is not None:  # the switches' hash: EV share, node seed, offset
            parts.append(self.entropy.kernel_tables())
        off = np.cumsum([0] + [len(x) for x in parts])
        self.LBT = np.concatenate(parts)
        if self.entropy is not None:
            e0 = int(off[5])
            self.ev_offsets = (e0, e0 + (1 << 16), e0 + (1 << 16) + n_nodes)
        D = len(lb.dests)
        self.lb_offsets = (D, int(off[1]), int(off[2]), int(off[3]), int(off[4]))
        self.lb_dest[np.asarray(lb.dests, dtype=i64)] = np.arange(D)

    def _qi_width(self, h: int) -> tuple[int, int, int, int]:
        """Columns of QI with the QP's extra state (:mod:`layout`): the reorder histogram,
        the out-of-order bitmap, the flowlet state of ``h`` hops; returns (width, bitmap
        column, flowlet column, hops)."""
        rb = L.NQI + L.NRH
        ql = rb + (-(-self.ooo_w // 64) if self.ooo else 0) + self.reps_b + self.trq
        hq = h if self.flowlets else 0
        return ql + 4 * hq, rb, ql, hq

    def _alloc_packets(self, n: int) -> None:
        self.KI = np.zeros((n, L.NKI), dtype=np.int64)
        self.KF = np.zeros((n, self.H if self.int_on else 1, 4), dtype=np.float64)
        self.FREE = np.arange(n - 1, -1, -1, dtype=np.int64)
        self.G[L.NFREE] = n

    def _grow_packets(self) -> None:
        old = len(self.KI)
        n = 2 * old
        ki = np.zeros((n, L.NKI), dtype=np.int64)
        ki[:old] = self.KI
        kf = np.zeros((n, self.KF.shape[1], 4), dtype=np.float64)
        kf[:old] = self.KF
        free = np.zeros(n, dtype=np.int64)
        nf = int(self.G[L.NFREE])
        free[:nf] = self.FREE[:nf]
        free[nf:nf + n - old] = np.arange(n - 1, old - 1, -1)
        self.G[L.NFREE] = nf + n - old
        self.KI, self.KF, self.FREE = ki, kf, free

    def _grow_qps(self, cap: int) -> None:
        old = len(self.QI)
        qi = np.zeros((cap, self.QI.shape[1]), dtype=np.int64)
        qi[:old] = self.QI
        qf = np.zeros((cap, self.QF.shape[1]), dtype=np.float64)
        qf[:old] = self.QF
        qr = np.zeros((cap, 2, self.H), dtype=np.int64)
        qr[:old, :, :self.QR.shape[2]] = self.QR
        qint = np.zeros((cap, self.H if self.int_on else 1, 4), dtype=np.float64)
        qint[:old, :self.QINT.shape[1]] = self.QINT
        self.QI, self.QF, self.QR, self.QINT = qi, qf, qr, qint

    def _grow_hops(self, h: int) -> None:
        old_h = self.H
        self.H = h
        if self.flowlets:  # the flowlet state has a column pair per hop: lay it out again
            w, _, ql, _ = self._qi_width(h)
            qi = np.zeros((len(self.QI), w), dtype=np.int64)
            qi[:, :ql] = self.QI[:, :ql]
            st = qi[:, ql:].reshape(len(qi), 2, h, 2)
            st[..., 1] = -1
            st[:, :, :old_h] = self.QI[:, ql:].reshape(len(qi), 2, old_h, 2)
            self.QI = qi
            self.CI[L.QX_H] = h
        self._grow_qps(len(self.QI))
        if self.int_on:
            kf = np.zeros((len(self.KF), h, 4), dtype=np.float64)
            kf[:, :self.KF.shape[1]] = self.KF
            self.KF = kf

    def _pack(self) -> None:
        self.S = (self.G, self.CI, self.CF, self.HT, self.PI, self.PF, self.PT, self.PQ,
                  self.NU, self.LL, self.KI, self.KF, self.FREE, self.QI, self.QF, self.QR,
                  self.QINT, self.RNG, self.LBT)

    def reserve(self) -> None:
        """Make room (heap, packet pool, QP lists of ports) for what the loop may add
        next; called before the loop and whenever it asks for more."""
        G = self.G
        changed = False
        while G[L.HSIZE] + 128 > len(self.HT):
            ht = np.zeros((2 * len(self.HT), 5), dtype=np.int64)
            ht[:len(self.HT)] = self.HT
            self.HT = ht
            changed = True
        while G[L.NFREE] < 128:
            self._grow_packets()
            changed = True
        if G[L.HSIZE] and self.HT[0, 2] == L.E_QPSTART:
            p = self.QI[self.HT[0, 3], L.Q_PORT]
            if self.PI[p, L.P_NQP] >= self.PQ.shape[1]:
                pq = np.zeros((len(self.PQ), 2 * self.PQ.shape[1]), dtype=np.int64)
                pq[:, :self.PQ.shape[1]] = self.PQ
                self.PQ = pq
                changed = True
        if changed:
            self._pack()

    def _next_seq(self) -> int:
        g = self.G
        s = int(g[1])
        g[1] = s + 1
        return s

    # ------------------------------------------------------------------ counters
    @property
    def drops(self) -> int:
        return int(self.G[L.DROPS])

    @property
    def retx(self) -> int:
        return int(self.G[L.RETX])

    @property
    def delivered(self) -> int:
        return int(self.G[L.DELIV])

    @property
    def sent_pfc(self) -> int:
        return int(self.G[L.SENTPFC])

    @property
    def used(self) -> list[int]:
        """Shared-buffer bytes held per node (switches)."""
        return self.NU[:, L.U_USED].tolist()

    # ------------------------------------------------------------------ QPs
    def add_qp(self, route: Sequence[int], size_bytes: int, start_ps: int = 0,
               on_done: Callable[[QP], None] | None = None, tag: Any = None, *,
               ack_route: Sequence[int] | None = None,
               header: tuple[int, int, int] | None = None, sl: int | None = None) -> QP:
        """A QP sending ``size_bytes`` along ``route`` (arcs), starting at ``start_ps``.

        ``ack_route``: the arcs its ACKs, NAKs and CNPs take from the receiver back to a
        NIC (a route of its own: the return 5-tuple as the switches hash it); as many
        hops as ``route``, starting where ``route`` ends. None: ``route`` reversed.

        ``header``: the QP's (source IP, destination IP, UDP source port) as the switches
        hash them (NIC-side spraying, ``nic.entropy``); None: IPs from the end nodes'
        numbers, the source port from the QP's number (0xC000 | 14 bits).

        ``sl``: on InfiniBand, the QP's service level (one of the run's ``IbLink.sls``;
        None: ``IbLink.sl``); its VL is the QP's class."""
        K = self.K
        tc = self.data_tc
        if sl is not None:
            if self.ib is None or sl not in self.ib.sls:
                have = "none: not InfiniBand" if self.ib is None else self.ib.sls
                raise SpecError(Problem("sl", f"SL {sl} is not one of this run's ({have}); "
                                        "allowed: an SL the run was built with"))
            tc = self.ib.vl(sl)
        route = tuple(int(a) for a in route)
        q = len(self.qps)
        back = None if ack_route is None else self._check_ack_route(route, ack_route)
        qp = QP(self, q, route, int(size_bytes), tc, back)
        qp.on_done, qp.tag = on_done, tag
        qp.path = tuple(self.ports[a] for a in route)
        qp.rpath = tuple(self.ports[a] for a in qp.rroute)
        port = qp.path[0]
        qp.port = port
        qp.line_bps = port.gbps * 1e9
        frame = self.mtu + self.hdr + self.ovh
        rtt = 0
        for p, r in zip(qp.path, qp.rpath, strict=True):
            rtt += p.prop_ps + p.ser_ps(frame) + r.prop_ps + r.ser_ps(self.ack_bytes + self.ovh)
        qp.base_rtt_ps = rtt
        if len(route) > self.H:
            self._grow_hops(max(len(route), 2 * self.H))
        if q >= len(self.QI):
            self._grow_qps(max(2 * len(self.QI), 1))
        qi, qf = self.QI[q], self.QF[q]
        qi[:] = 0
        qf[:] = 0
        qi[L.Q_SIZE], qi[L.Q_TC] = qp.size, qp.tc
        qi[L.Q_DONE] = qi[L.Q_ACKEDAT] = qi[L.Q_FIRSTTX] = -1
        qi[L.Q_LASTCNP] = -(1 << 62)
        qi[L.Q_PORT] = port.pid
        qi[L.Q_BRTT] = rtt
        qi[L.Q_LEN] = len(route)
        qi[L.Q_FRSEQ] = -1
        if self.entropy is not None and route:
            if header is None:
                h = (int(0x0A000000 + qp.path[0].src), int(0x0A000000 + qp.path[-1].dst),
                     0xC000 | ((q * 0x9E3779B1 >> 7) & 0x3FFF))
            else:
                h = header
            b = self.entropy.base(np.array([h[0], h[1]]), np.array([h[1], h[0]]),
                                  np.array([h[2], h[2]]))
            qi[L.Q_EVB], qi[L.Q_EVBR] = int(b[0]), int(b[1])
            qi[L.Q_SPORT] = int(h[2]) & 0xFFFF
            qi[L.Q_EVX] = min(self.cfg.nic.entropy.values,
                              max(1, math.ceil(rtt * qp.line_bps / 8e12 / self.mtu)))
        if self.flowlets:  # no flowlet yet at any hop: no port
            qi[int(self.CI[L.QX_QL]) + 1::2] = -1
        if route:
            qi[L.Q_DSTI] = self.lb_dest[qp.path[-1].dst]
            qi[L.Q_RDSTI] = self.lb_dest[qp.rpath[-1].dst] if qp.rpath else -1
        else:
            qi[L.Q_DSTI] = qi[L.Q_RDSTI] = -1
        self.QR[q, 0, :len(route)] = [p.pid for p in qp.path]
        self.QR[q, 1, :len(route)] = [p.pid for p in qp.rpath]
        qf[L.F_LINE] = qp.line_bps
        w = self.cfg.nic.window
        if w == "bdp":  # whole packets, at least one ACK interval: a lone flow fills its path
            pkts = max(math.ceil(rtt * qp.line_bps / 8e12 / self.mtu),
                       self.cfg.nic.ack_interval_packets)
            qf[L.F_WINB] = float(pkts * self.mtu)
        else:
            qf[L.F_WINB] = np.inf if w == "none" else float(w)
        _transports().init_cc(self.cc_name, self.cfg.cc, qi, qf, qp.line_bps, rtt, self.mtu,
                              self.CI, self.CF)
        if self.ib is not None and self.cc_name == "ibcc":  # its SL's CC settings
            qi[L.Q_I3] = self.ib.sl if sl is None else sl
        qp.cc = CongestionControl(self, q, self.cc_name)
        self.qps.append(qp)
        self.reserve()
        self._pack()
        K.hpush(self.HT, self.G, max(int(start_ps), self.ev.now), L.E_QPSTART, q, 0)
        return qp

    def _check_ack_route(self, route: tuple[int, ...], ack_route: Sequence[int]
                         ) -> tuple[int, ...]:
        """``ack_route`` as a tuple, checked: known arcs, a chain from the data route's
        last node to a NIC, as many hops as the data route (the compiled loop walks
        both directions with one hop count)."""
        back = tuple(int(a) for a in ack_route)
        ports = self.ports
        why = ""
        if len(back) != len(route):
            why = f"has {len(back)} hops, the data route {len(route)}"
        elif any(a not in ports for a in back):
            why = f"uses arc {next(a for a in back if a not in ports)}, which has no port " \
                "(not in used_arcs)"
        elif route and ports[back[0]].src != ports[route[-1]].dst:
            why = "does not start at the data route's last node (the receiver)"
        elif any(ports[a].dst != ports[b].src for a, b in pairwise(back)):
            why = "is not a chain of arcs"
        elif back and not self.is_host[ports[back[-1]].dst]:
            why = "does not end at a NIC"
        if why:
            raise SpecError(Problem("ack_route", f"{why}; allowed: the arcs from the "
                                    "receiver back to the sender's NIC, as many as the "
                                    "data route's"))
        return back

    def blackhole(self, arcs: Sequence[int]) -> None:
        """The arcs ``arcs`` lose every frame sent over them while the switches keep
        forwarding onto them (a link that failed before the routing converged, or a
        gray failure); counted as drops of the port."""
        for a in arcs:
            self.PI[self.pid[int(a)], L.P_BH] = 1

    # ------------------------------------------------------------------ the loop
    def _loop(self, limit: int) -> int:
        """The event list's kernel: the compiled loop runs the network's events; Python's
        own events (samples, checks, callbacks) and ``on_done`` of finished QPs run here
        in between, in (time, seq) order. Returns the events processed."""
        K = self.K
        ev = self.ev
        G = self.G
        pyh = ev.heap
        c0 = int(G[L.COUNT])
        n = 0
        run = K.run
        never = L.NEVER
        while not ev.stopped:
            G[L.NOW] = ev.now
            if pyh:
                top = pyh[0]
                code = run(self.S, limit, top[0], top[1])
            else:
                code = run(self.S, limit, never, 0)
            ev.now = int(G[L.NOW])
            if code == L.R_PY:
                t, _, fn, arg = heappop(pyh)
                ev.now = t
                G[L.NOW] = t
                fn(arg)
                n += 1
            elif code == L.R_DONE:
                qp = self.qps[int(G[L.RET])]
                if qp.on_done is not None:
                    qp.on_done(qp)
            elif code == L.R_GROW:
                self.reserve()
            elif code == L.R_LIMIT:
                ev.now = limit
                break
            else:  # nothing left (but Python events after the limit)
                if pyh:
                    ev.now = limit
                break
        return n + int(G[L.COUNT]) - c0

    # ------------------------------------------------------------------ state
    def queue_ids(self, pid: int, tc: int) -> list[int]:
        """Pool rows of the frames waiting in port ``pid``'s queue ``tc``, head first."""
        out = []
        k = int(self.PT[pid, L.T_QH, tc])
        ki = self.KI
        nxt = L.K_NEXT
        while k >= 0:
            out.append(k)
            k = int(ki[k, nxt])
        return out

    def packet(self, k: int) -> Packet:
        r = self.KI[k]
        inp = int(r[L.K_INP])
        return Packet(self.qps[int(r[L.K_QP])], int(r[L.K_KIND]), int(r[L.K_SEQ]),
                      int(r[L.K_PAY]), int(r[L.K_SIZE]), int(r[L.K_TC]),
                      self.ports[int(self.PI[inp, L.P_ARC])] if inp >= 0 else None,
                      int(r[L.K_CE]))

    def paused_edges(self) -> list[tuple[int, int, int]]:
        """(a, b, tc): switch egress ``a`` is paused and the node it feeds holds frames
        that came in over ``a`` in its own paused egress ``b`` — ``a`` waits on ``b``."""
        PT, PI, KI = self.PT, self.PI, self.KI
        out = []
        cand = np.flatnonzero((PI[:, L.P_HOST] == 0)
                              & (PT[:, L.T_PAUSED] != 0).any(axis=1))
        for pb in cand.tolist():
            for tc in self.tcs:
                if not PT[pb, L.T_PAUSED, tc] or PT[pb, L.T_QH, tc] < 0:
                    continue
                ins = {int(KI[k, L.K_INP]) for k in self.queue_ids(pb, tc)}
                ins.discard(-1)
                for pa in sorted(ins):
                    if PT[pa, L.T_PAUSED, tc] and not PI[pa, L.P_HOST]:
                        out.append((int(PI[pa, L.P_ARC]), int(PI[pb, L.P_ARC]), tc))
        return out
