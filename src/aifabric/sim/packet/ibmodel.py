"""InfiniBand's link model in the packet simulator, the Python side (issue 27 item 3):
the settings (:class:`IbLink`, from a spec's ``infiniband`` block and the packet
section's ``cc.ibcc``), the checks, the arrays the compiled core reads
(:func:`setup`) and the per-VL report (:func:`credit_waits`, :func:`summary`). The
compiled part is :mod:`aifabric.sim.packet.ib` (credits, VL arbitration, FECN, adaptive
routing) and :mod:`aifabric.sim.packet.transports.ibcc` (the sender's CCTI).

On an InfiniBand fabric the core's traffic classes are VLs: a QP's service level picks
its VL through the SL-to-VL table; each port sends a packet of VL v only with credit for
it in the buffer of v at the other end of the link (no drops, no PFC: the packet
configuration's PFC, ECN/WRED, trimming and host PFC do not apply and are switched off,
:func:`ib_packet_config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.sim.packet import layout as L

__all__ = ["CREDIT_BYTES", "FCP_BYTES", "IbLink", "arc_port_numbers", "credit_waits",
           "ib_packet_config", "settings", "setup", "summary"]

#: one flow-control credit: 64 bytes of receive buffer (IBTA vol. 1, 7.9.4)
CREDIT_BYTES = 64
#: a flow-control packet on the wire (IBTA vol. 1, 7.9.4: 6 bytes of FCP; with its
#: start/end delimiters, 8)
FCP_BYTES = 8
#: the CCTI timer's unit (IBTA annex A10: 1.024 us)
CCTI_TIMER_PS = 1_024_000
#: LimitOfHighPriority's unit (IBTA vol. 1, 7.6.9: 4,096 bytes)
HIGH_LIMIT_BYTES = 4096


@dataclass
class IbLink:
    """The InfiniBand link model of a packet run."""

    #: data VLs per port
    data_vls: int = 8
    #: VL of each of the 16 SLs
    sl2vl: list[int] = field(default_factory=lambda: [sl % 8 for sl in range(16)])
    #: receive buffer of each data VL, in 64-byte credits
    credits: list[int] = field(default_factory=lambda: [512] * 8)
    #: VL arbitration weight of each data VL (64-byte units per turn)
    weights: list[int] = field(default_factory=lambda: [64] * 8)
    #: the SL of QPs that do not name one (NCCL_IB_SL)
    sl: int = 0
    #: the SLs QPs of this run may use (their VLs are the run's classes)
    sls: list[int] = field(default_factory=lambda: [0])
    #: per-packet adaptive routing (the switches' AR groups: least-hop ports)
    adaptive: bool = False
    #: where the credit settings come from (error messages)
    source: str = "infiniband"
    #: IBTA's high-priority VLArbitration table: (VL, weight in 64-byte units) entries
    vlarb_high: list[tuple[int, int]] = field(default_factory=list)
    #: the low-priority table (None: one entry per data VL with its :attr:`weights`)
    vlarb_low: list[tuple[int, int]] | None = None
    #: LimitOfHighPriority, 4,096-byte units (255: unbounded)
    high_limit: int = 0
    #: the IB port number of each fabric arc at its sending switch (-1: not a switch
    #: port); needed for a Victim_Mask given as port numbers (:func:`arc_port_numbers`)
    arc_port: np.ndarray | None = None

    @classmethod
    def from_spec(cls, ib: Any, sls: list[int] | None = None) -> IbLink:
        """From a spec's ``infiniband`` block; ``sls``: the SLs the run's QPs use (default:
        ``nccl_sl``). Without ``vl_credits`` the port's buffer (``port_buffer_kb``) is
        split evenly over the VLs in use, as a switch's shared buffer gives the lanes
        that carry traffic their room; with it, each VL has its own credits."""
        s = [ib.nccl_sl] if sls is None else sorted(set(sls))
        credits = ib.credits()
        if ib.vl_credits is None:  # the port's buffer over the VLs in use (shared buffer)
            used = sorted({ib.sl_to_vl()[x] for x in s})
            per = ib.port_buffer_kb * 1024 // CREDIT_BYTES // len(used)
            credits = [per if v in used else 0 for v in range(ib.data_vls)]
        high, low, limit = ib.vlarb_tables()
        arb = getattr(ib, "vl_arbitration", None)
        return cls(data_vls=ib.data_vls, sl2vl=ib.sl_to_vl(), credits=credits,
                   weights=ib.weights(), sl=ib.nccl_sl, sls=s,
                   adaptive=bool(ib.adaptive_routing),
                   source="infiniband.vl_credits" if ib.vl_credits is not None
                   else "infiniband.port_buffer_kb",
                   vlarb_high=high, vlarb_low=low if arb is not None and arb.low is not None
                   else None, high_limit=limit)

    def low_table(self) -> list[tuple[int, int]]:
        """The low-priority VLArbitration table: :attr:`vlarb_low`, else one entry per
        data VL with its weight."""
        if self.vlarb_low is not None:
            return list(self.vlarb_low)
        return [(v, int(self.weights[v])) for v in range(self.data_vls)]

    def vl(self, sl: int) -> int:
        return int(self.sl2vl[sl])

    def vls(self) -> list[int]:
        """The VLs in use (those of :attr:`sls`), ascending."""
        return sorted({self.vl(s) for s in self.sls})

    def check(self, max_frame: int) -> None:
        """Every VL in use can hold one packet of ``max_frame`` bytes and gets a turn of
        the VL arbitration; one line per problem, naming the field."""
        probs = []
        for v in self.vls():
            if self.credits[v] * CREDIT_BYTES < max_frame:
                need = -(-max_frame // CREDIT_BYTES)
                where = f"infiniband.vl_credits.{v}" if self.source == \
                    "infiniband.vl_credits" else "infiniband.port_buffer_kb"
                probs.append(Problem(where, (
                    f"VL {v} has {self.credits[v]} credits ({self.credits[v] * 64:,} "
                    f"bytes), less than one packet ({max_frame:,} bytes: MTU payload + "
                    f"headers): the link could never send it; allowed: at least {need} "
                    f"credits per VL in use")))
            served = any(vl == v and w > 0 for vl, w in self.vlarb_high + self.low_table())
            if not served and self.vlarb_low is None and not self.vlarb_high:
                sls = ", ".join(str(s) for s in self.sls if self.vl(s) == v)
                probs.append(Problem(f"infiniband.vl_weights.{v}", (
                    f"VL {v} carries traffic (SL {sls}) but has weight 0: the VL "
                    "arbitration would never serve it; allowed: 1..255")))
            elif not served:
                sls = ", ".join(str(s) for s in self.sls if self.vl(s) == v)
                probs.append(Problem("infiniband.vl_arbitration", (
                    f"VL {v} carries traffic (SL {sls}) but no entry of the high or low "
                    "table gives it a weight: the VL arbitration would never serve it; "
                    f"allowed: tables with an entry {{vl: {v}, weight: 1..255}}")))
        if probs:
            raise SpecError(probs)


def ib_packet_config(cfg: Any, *, explicit_cc: bool) -> Any:
    """``cfg`` (a :class:`~aifabric.sim.packet.config.PacketConfig`) for an InfiniBand
    fabric: no PFC (lossless by credits), no WRED/ECN (switches mark FECN), no host
    PFC; the congestion control ``ibcc`` unless the scenario named one
    (``explicit_cc``). Refused (one line, the field): a RoCE congestion control, packet
    trimming (a lossy Ethernet mode)."""
    cc = cfg.cc
    if explicit_cc and cc.algorithm not in ("ibcc", "none"):
        raise SpecError(Problem("packet.cc.algorithm", (
            f"{cc.algorithm} is a RoCE congestion control; allowed on an InfiniBand "
            "fabric: ibcc (FECN/BECN, the default), none")))
    if cfg.switch.trim.enabled:
        raise SpecError(Problem("packet.switch.trim.enabled", (
            "packet trimming is a lossy Ethernet mode; an InfiniBand fabric never drops "
            "(credit flow control); allowed: false")))
    upd = {"pfc": cfg.pfc.model_copy(update={"enabled": False}),
           "ecn": cfg.ecn.model_copy(update={"enabled": False}),
           "nic": cfg.nic.model_copy(update={"host_pfc": cfg.nic.host_pfc.model_copy(
               update={"enabled": False})}),
           "cc": cc.model_copy(update={"algorithm": cc.algorithm if explicit_cc
                                       else "ibcc"})}
    return cfg.model_copy(update=upd)


def setup(net: Any, ib: IbLink) -> None:
    """The InfiniBand settings and starting credits into ``net``'s arrays (called by
    :class:`~aifabric.sim.packet.network.Network` once its arrays exist)."""
    CI, PI, PT = net.CI, net.PI, net.PT
    cfg = net.cfg
    max_frame = net.mtu + net.hdr
    ib.check(max_frame)
    CI[L.IB_ON] = 1
    CI[L.IB_MAXF] = -(-max_frame // CREDIT_BYTES) * CREDIT_BYTES  # in 64-byte blocks
    CI[L.IB_FCPB] = FCP_BYTES + net.ovh
    CI[L.ECN_ON] = 0
    CI[L.HOST_PFC] = 0
    for v in range(ib.data_vls):
        CI[L.IB_W0 + v] = ib.weights[v]
    vls = ib.vls()
    # credits: every arc's buffer of each VL; an HCA's (the arcs into a host) shares the
    # NIC's receive buffer when its drain is modelled (nic.rx_gbps)
    lim = np.array([c * CREDIT_BYTES for c in ib.credits] + [0] * (16 - ib.data_vls),
                   dtype=np.int64)
    to_host = np.asarray(net.is_host, dtype=bool)[PI[:, L.P_DST]]
    PT[:, L.T_CLIM, :] = lim[None, :]
    if cfg.nic.rx_gbps is not None:
        share = cfg.nic.host_pfc.rx_buffer_bytes // max(len(vls), 1)
        if share < max_frame:
            raise SpecError(Problem("packet.nic.host_pfc.rx_buffer_bytes", (
                f"{cfg.nic.host_pfc.rx_buffer_bytes:,} bytes shared by {len(vls)} VLs "
                f"hold less than one packet ({max_frame:,} bytes) each; allowed: at least "
                f"{max_frame * len(vls):,}")))
        share = share // CREDIT_BYTES * CREDIT_BYTES  # whole 64-byte blocks
        PT[to_host, L.T_CLIM, :] = np.minimum(PT[to_host, L.T_CLIM, :], share)
    PT[:, L.T_CRED, :] = PT[:, L.T_CLIM, :]
    PI[:, L.P_VLCUR] = 0
    PI[:, L.P_VLREM] = 0
    PI[:, L.P_VLHCUR] = PI[:, L.P_VLHREM] = PI[:, L.P_VLHCNT] = 0
    # the VL arbitration's tables into LBT: (VL, weight x 64 bytes) pairs; the default
    # low table takes the VLs in use only (the others never have a packet: the same turns)
    low = ib.low_table() if ib.vlarb_low is not None else \
        [(v, int(ib.weights[v])) for v in vls]
    tabs = []
    for name, table in (("H", ib.vlarb_high), ("L", low)):
        CI[L.IB_HN if name == "H" else L.IB_LN] = len(table)
        CI[L.IB_HT0 if name == "H" else L.IB_LT0] = len(net.LBT) + sum(len(t) for t in tabs)
        tabs.append(np.array([x for vl, w in table for x in (vl, w * CREDIT_BYTES)],
                             dtype=np.int64))
    net.LBT = np.concatenate([net.LBT, *tabs])
    CI[L.IB_HLIM] = 1 << 62 if ib.high_limit == 255 else \
        max(ib.high_limit * HIGH_LIMIT_BYTES, 1)
    # congestion control: FECN threshold on the smallest VL buffer in use, the CCT
    cc = cfg.cc
    p = cc.ibcc
    if cc.algorithm == "ibcc" and p.threshold > 0:
        vb = min(ib.credits[v] for v in vls) * CREDIT_BYTES
        CI[L.IB_FTHR] = (16 - p.threshold) * vb // 16
    else:
        CI[L.IB_FTHR] = -1
    CI[L.IB_FRATE] = p.marking_rate
    tab = p.table()
    CI[L.IB_CCTT] = p.ccti_timer * CCTI_TIMER_PS
    CI[L.IB_CCTINC] = p.ccti_increase
    CI[L.IB_CCTLIM] = len(tab) - 1
    CI[L.IB_CCTMIN] = p.ccti_min
    CI[L.IB_CCT0] = len(net.LBT)
    net.LBT = np.concatenate([net.LBT, np.array([round(x * 1024) for x in tab],
                                                dtype=np.int64)])
    CI[L.IB_AR] = int(ib.adaptive and net.lb_mode == L.LB_ADAPTIVE)
    # congestion control per SL (IBTA's CACongestionSetting entries): on, CCTI increase,
    # timer (ps), minimum; the QP's SL picks its row
    rows = [p.for_sl(sl) for sl in range(16)]
    CI[L.IB_SLCC0] = len(net.LBT)
    net.LBT = np.concatenate([net.LBT, np.array(
        [x for on, inc, tm, mn in rows for x in (int(on), inc, tm * CCTI_TIMER_PS, mn)],
        dtype=np.int64)])
    # the switches' Victim_Mask: the ports that mark FECN also as a victim
    if p.victim_mask == "all":
        CI[L.IB_VICT] = -1
    else:
        flags = to_host.astype(np.int64) if p.victim_mask == "hca_ports" else \
            np.zeros(len(PI), dtype=np.int64)
        if p.victim_ports:
            if ib.arc_port is None:
                raise SpecError(Problem("packet.cc.ibcc.victim_ports", (
                    "port numbers need the fabric's InfiniBand port numbering (a run of "
                    "a spec); allowed here: none (victim_mask none or hca_ports)")))
            ports = np.asarray(ib.arc_port, dtype=np.int64)[PI[:, L.P_ARC]]
            flags |= np.isin(ports, np.asarray(p.victim_ports, dtype=np.int64))
        CI[L.IB_VICT] = len(net.LBT)
        net.LBT = np.concatenate([net.LBT, flags])


def arc_port_numbers(f: Any) -> np.ndarray:
    """The InfiniBand port number of every arc of fabric ``f`` at the switch it leaves
    (ports 1..n in the order OpenSM's subnet numbers them,
    :func:`aifabric.routing.infiniband.subnet`); -1 where the arc does not leave a
    switch."""
    from aifabric.routing.infiniband import subnet

    sn = subnet(f)
    out = np.full(2 * len(f.links), -1, dtype=np.int64)
    s, p = np.nonzero(sn.port_link >= 0)
    link = sn.port_link[s, p]
    arc = 2 * link + (np.asarray(f.links.a)[link] != sn.sw_node[s]).astype(np.int64)
    out[arc] = p
    return out


def credit_waits(sim: Any) -> dict[str, np.ndarray]:
    """One row per (port, VL) that was ever without credit for a full packet: the time
    it was blocked (``credit_blocked_ns``, the blocked ratio of the run, the longest
    stretch), whether it is still blocked at the end, the peak bytes the buffer at the
    link's other end held and its size (credits x 64); the most blocked first. Upstream
    of a congested port these are the congestion spreading; per VL, so a VL that does
    not carry the congestion shows none."""
    net = sim.net
    now = sim.ev.now
    PI, PT = net.PI, net.PT
    vls = np.asarray(net.tcs, dtype=np.int64)
    sub = PT[:, :, vls]
    blocked = sub[:, L.T_PAUSED] != 0
    cur = np.where(blocked, now - sub[:, L.T_CBSINCE], 0)
    total = sub[:, L.T_CBLKPS] + cur
    longest = np.maximum(sub[:, L.T_CBLONG], cur)
    port, col = np.nonzero(total > 0)
    order = np.lexsort((col, port, -total[port, col]))
    port, col = port[order], col[order]
    names = np.array(sim.names, dtype=object)
    label = names[PI[port, L.P_SRC]] + " -> " + names[PI[port, L.P_DST]] \
        if len(port) else np.zeros(0, dtype=object)
    return {"port": label, "vl": vls[col],
            "credit_blocked_ns": total[port, col] / 1000,
            "blocked_ratio": total[port, col] / now if now > 0 else np.zeros(len(port)),
            "longest_block_ns": longest[port, col] / 1000,
            "blocked_at_end": blocked[port, col].astype(np.int64),
            "peak_buffer_bytes": sub[port, L.T_INGPEAK, col],
            "buffer_bytes": sub[port, L.T_CLIM, col]}


def summary(sim: Any, ib: IbLink, shown: int = 10) -> dict[str, Any]:
    """The ``infiniband`` block of a packet run's summary: the link model, per VL the
    credit-blocked time over all ports, the most blocked (port, VL), FECN marks and
    BECNs, the largest buffer peak against its size (never above it)."""
    net = sim.net
    cw = credit_waits(sim)
    vls = [int(v) for v in net.tcs]
    per_vl = {str(v): float(cw["credit_blocked_ns"][cw["vl"] == v].sum()) for v in vls}
    n = len(net.qps)
    peak = net.PT[:, L.T_INGPEAK][:, vls]
    lim = net.PT[:, L.T_CLIM][:, vls]
    fill = peak / np.maximum(lim, 1)
    cc = sim.cfg.cc
    extra: dict[str, Any] = {}
    if ib.vlarb_high or ib.vlarb_low is not None:
        extra["vl_arbitration"] = {"high": [list(e) for e in ib.vlarb_high],
                                   "low": [list(e) for e in ib.low_table()],
                                   "high_limit": ib.high_limit}
    if len(ib.sls) > 1:  # BECNs per SL (the QPs' own SL)
        from aifabric.sim.packet.transports.ibcc import SL

        qsl = net.QI[:n, SL]
        extra["becns_by_sl"] = {str(x): int(net.QI[:n, L.Q_CNPS][qsl == x].sum())
                                for x in ib.sls}
    return {
        "link_model": "credit-based flow control per VL (no PFC, no drops)",
        "vls": vls, "sl2vl": list(ib.sl2vl), "credits": [ib.credits[v] for v in vls],
        "vl_weights": [ib.weights[v] for v in vls],
        "cc": cc.algorithm,
        "fecn_marks": int(net.PI[:, L.P_ECN].sum()),
        "becns": int(net.QI[:n, L.Q_CNPS].sum()),
        "adaptive_routing": bool(net.CI[L.IB_AR]),
        "credit_blocked_ns_by_vl": per_vl,
        "tx_bytes_by_vl": {str(v): int(net.PT[:, L.T_VTXB, v].sum()) for v in vls},
        "blocked_ports": len(cw["port"]),
        "max_buffer_fill": float(fill.max()) if fill.size else 0.0,
        "credit_waits": [{"port": str(cw["port"][i]), "vl": int(cw["vl"][i]),
                          "credit_blocked_ns": float(cw["credit_blocked_ns"][i]),
                          "blocked_ratio": float(cw["blocked_ratio"][i]),
                          "longest_block_ns": float(cw["longest_block_ns"][i])}
                         for i in range(min(len(cw["port"]), shown))],
        **extra,
    }


def settings(ib_spec: Any, cfg: Any, block: dict[str, Any]) -> dict[str, Any]:
    """The ``packet.settings`` of an InfiniBand run (instead of RoCE's PFC and ECN, which
    do not apply): the VLs in use and their credits (64-byte blocks), the SL-to-VL table,
    the VL arbitration (IBTA's high and low tables, the high limit), the congestion
    control with its switch and per-SL CA settings, adaptive routing and the NIC's
    settings that apply to both. ``block``: the run's ``infiniband`` summary
    (:func:`summary`)."""
    high, low, limit = ib_spec.vlarb_tables()
    arb = getattr(ib_spec, "vl_arbitration", None)
    if arb is None or arb.low is None:
        low = [(v, w) for v, w in low if v in block["vls"]]
    p = cfg.cc.ibcc
    cc: dict[str, Any] = {"algorithm": cfg.cc.algorithm}
    if cfg.cc.algorithm == "ibcc":
        cc.update({"threshold": p.threshold, "marking_rate": p.marking_rate,
                   "ccti_increase": p.ccti_increase, "ccti_timer": p.ccti_timer,
                   "ccti_min": p.ccti_min, "cct_entries": len(p.table()),
                   "victim_mask": p.victim_mask,
                   "victim_ports": list(p.victim_ports or []),
                   "per_sl": {str(sl): dict(zip(("enabled", "ccti_increase",
                                                  "ccti_timer", "ccti_min"),
                                                 p.for_sl(sl), strict=True))
                              for sl in sorted(p.sl)}})
    return {
        "link": "infiniband: credit-based flow control per VL (no PFC, no ECN/WRED)",
        "data_vls": ib_spec.data_vls, "vls": list(block["vls"]),
        "sl2vl": list(block["sl2vl"]), "credits_64B": list(block["credits"]),
        "vl_arbitration": {"high": [list(e) for e in high], "low": [list(e) for e in low],
                           "high_limit": limit},
        "cc": cc, "adaptive_routing": bool(block["adaptive_routing"]),
        "window": cfg.nic.window, "window_scales_with_rate": cfg.nic.window_scales_with_rate,
        "ack_path": cfg.nic.ack_path, "rx_gbps": cfg.nic.rx_gbps,
    }

