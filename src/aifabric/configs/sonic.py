"""SONiC ``config_db.json`` of every switch: ports, addresses, neighbours, RoCE QoS.

One switch's CONFIG_DB holds DEVICE_METADATA, PORT, INTERFACE, LOOPBACK_INTERFACE,
DEVICE_NEIGHBOR, BGP_NEIGHBOR, the QoS maps (DSCP_TO_TC_MAP, TC_TO_PRIORITY_GROUP_MAP,
TC_TO_QUEUE_MAP, MAP_PFC_PRIORITY_TO_QUEUE), PORT_QOS_MAP, WRED_PROFILE, SCHEDULER,
QUEUE, BUFFER_POOL, BUFFER_PROFILE, BUFFER_PG, BUFFER_QUEUE, CABLE_LENGTH, PFC_WD,
SWITCH_HASH and FLEX_COUNTER_TABLE (and, with a management network, MGMT_PORT,
MGMT_INTERFACE and MGMT_VRF_CONFIG); ToRs add the host VLAN with proxy ARP and the
anycast gateway (SAG), HPN ToRs one LACP PortChannel per host port with the pair's
shared system MAC.

QoS goes on **every port that has a neighbour** (SONiC's buffer and QoS managers skip
a port without DEVICE_NEIGHBOR, a classic silent misconfiguration), so every such
port gets both a DEVICE_NEIGHBOR and a PORT_QOS_MAP entry.

``lossless``: PFC on the RoCE traffic class, ECN/WRED on its queue, lossless
priority-group buffers sized by port speed and cable length, PFC watchdog.
``lossy``: ECN on the RoCE queue, no PFC, no headroom, no watchdog.

All values are CONFIG_DB strings; :mod:`aifabric.configs.yang` turns a document into
the typed YANG JSON form for validation.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.configs._ports import Endpoints
from aifabric.configs.addressing import AddressPlan
from aifabric.errors import Problem, SpecError
from aifabric.topology import Fabric, LinkKind, NodeKind
from aifabric.topology.buffers import buffer_plan, buffer_problem
from aifabric.topology.management import SWITCH_PORT, ManagementPlan

__all__ = ["DEVICE_TYPE", "MAP_NAME", "SwitchContext", "render_config_db"]

MAP_NAME = "AIFABRIC"
DEVICE_TYPE = {NodeKind.TOR: "ToRRouter", NodeKind.AGG: "LeafRouter",
               NodeKind.CORE: "SpineRouter"}
_HASH_FIELD = {"src_ip": "SRC_IP", "dst_ip": "DST_IP", "protocol": "IP_PROTOCOL",
               "src_port": "L4_SRC_PORT", "dst_port": "L4_DST_PORT"}
#: routing.hash -> SONiC's hash-algorithm enum (SONiC has no CRC-32C: the ASIC's CRC)
_HASH_ALGO = {"crc32": "CRC_32LO", "crc32c": "CRC", "crc16_ccitt": "CRC_CCITT", "xor": "XOR"}


def _ranges(values: list[int]) -> list[str]:
    """``[0, 1, 2, 4, 5, 7] -> ["0-2", "4-5", "7"]``."""
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return out


def mac_of(loopback: int) -> str:
    """A locally administered, unique switch MAC derived from its loopback."""
    b = [0x02, 0xAF, (loopback >> 24) & 255, (loopback >> 16) & 255, (loopback >> 8) & 255,
         loopback & 255]
    return ":".join(f"{x:02x}" for x in b)


def hash_seed(f: Fabric, node: int) -> int:
    """The ECMP hash seed of a switch: ``routing.seed`` everywhere (``same``) or mixed
    with the switch name (``per_switch``), 24 bits."""
    r = f.spec.routing
    if r.seed_mode == "same":
        return r.seed & 0xFFFFFF
    return (r.seed ^ zlib.crc32(str(f.nodes.name[node]).encode())) & 0xFFFFFF


def wred_profile_name(qos: Any, speed_mbps: int) -> str:
    """The WRED_PROFILE of a port: ``AIFABRIC_ECN`` (one profile for every port), or
    ``AIFABRIC_ECN_<speed>G`` when ``deploy.qos.wred`` is a map by port speed."""
    return f"AIFABRIC_ECN_{speed_mbps // 1000}G" if qos.wred else "AIFABRIC_ECN"


class SwitchContext:
    """What every switch renderer shares: the fabric, its address plan and endpoints."""

    def __init__(self, plan: AddressPlan, ends: Endpoints | None = None,
                 mgmt: ManagementPlan | None = None):
        self.plan = plan
        #: the out-of-band management network (MGMT_PORT, MGMT_INTERFACE, MGMT_VRF_CONFIG)
        self.mgmt = mgmt
        self.f = plan.fabric
        self.ends = ends or Endpoints.of(plan)
        spec = self.f.spec
        self.dep = spec.deploy
        self.lossless = self.dep.qos.mode == "lossless"
        self.hpn = self.f.family == "hpn"
        e = self.ends
        # per-row strings computed once
        self.port_name = e.port_name.tolist()
        self.peer_device = e.peer_device.tolist()
        self.peer_port = e.peer_port_name.tolist()
        self.local_ip = e.local_ip_str.tolist()
        self.peer_ip = e.peer_ip_str.tolist()
        self.speed = (e.speed_gbps * 1000).astype(np.int64).tolist()
        self.lanes = e.lanes.tolist()
        self.ports = e.port.tolist()
        self.kind = e.kind.tolist()
        self.length_class = e.length_class.tolist()
        self.peer_asn = self.plan.asn[e.peer].tolist()
        self.peer_node = e.peer.tolist()
        self.nic_ip = self.f.nodes.ip[e.peer].tolist()
        qos = self.dep.qos
        speeds = e.speed_gbps[self.f.is_switch[e.node]] if len(e.node) else e.speed_gbps
        missing = qos.wred_missing(np.unique(speeds).tolist())
        if missing:
            raise SpecError(Problem("deploy.qos.wred", missing))
        #: the buffer pools of every switch (headroom per lossless port, pools), shared
        #: with the packet simulator
        self.buffers = buffer_plan(self.f, 1 if self.lossless else 0,
                                   mtu_bytes=self.dep.mtu.switch,
                                   response_ns=qos.pfc_response_ns)
        #: per row: the arc into the row's node (its ingress)
        self.arc_in = (2 * e.link + e.up).tolist()
        bad = buffer_problem(self.f, self.buffers)
        if bad:
            raise SpecError(Problem("deploy.qos.mode", bad))

    def portchannel(self, row: int) -> str:
        """HPN: the LACP PortChannel of a host-facing ToR port (one per host port)."""
        return f"PortChannel{self.ports[row] + 1}"

    def lacp_port_id(self, row: int) -> int:
        """HPN: the LACP port ID of a host-facing port: ToR b's IDs start above ToR a's
        by ``deploy.hpn.lacp_port_id_offset`` so the host's bond sees distinct IDs."""
        side = int(self.f.nodes.side[self.ends.node[row]])
        return self.ports[row] + 1 + max(side, 0) * self.dep.hpn.lacp_port_id_offset


@dataclass
class _Tables:
    """The per-port tables of one switch, filled port by port."""

    port: dict[str, Any] = field(default_factory=dict)
    interface: dict[str, Any] = field(default_factory=dict)
    neighbor: dict[str, Any] = field(default_factory=dict)
    bgp: dict[str, Any] = field(default_factory=dict)
    cable: dict[str, str] = field(default_factory=dict)
    qos_map: dict[str, Any] = field(default_factory=dict)
    queue: dict[str, Any] = field(default_factory=dict)
    buf_pg: dict[str, Any] = field(default_factory=dict)
    buf_q: dict[str, Any] = field(default_factory=dict)
    pfc_wd: dict[str, Any] = field(default_factory=dict)
    pc: dict[str, Any] = field(default_factory=dict)
    pc_member: dict[str, Any] = field(default_factory=dict)
    vlan_member: dict[str, Any] = field(default_factory=dict)
    #: lossless PG buffer profiles by name
    profiles: dict[str, dict[str, str]] = field(default_factory=dict)
    #: WRED profile name -> its deploy.qos profile
    wred: dict[str, Any] = field(default_factory=dict)


def render_config_db(ctx: SwitchContext, node: int) -> dict[str, Any]:
    """The CONFIG_DB of switch ``node`` as a dict of tables (all values strings)."""
    f, plan = ctx.f, ctx.plan
    nodes = f.nodes
    kind = NodeKind(int(nodes.kind[node]))
    model_name, model = f.models[int(nodes.model[node])]
    lo = int(plan.loopback[node])
    db: dict[str, Any] = {}
    db["DEVICE_METADATA"] = {"localhost": _metadata(ctx, node, kind, model_name, lo)}
    lo_str = ".".join(str((lo >> s) & 255) for s in (24, 16, 8, 0))
    db["LOOPBACK_INTERFACE"] = {"Loopback0": {}, f"Loopback0|{lo_str}/32": {}}
    t = _Tables()
    lpp = int(model.lanes_per_port)
    for r in range(int(ctx.ends.start[node]), int(ctx.ends.stop[node])):
        _port_rows(ctx, t, r, lpp)
        _port_qos_rows(ctx, t, r)
    _link_tables(ctx, t, db)
    _qos_tables(ctx, t, db)
    _buffer_tables(ctx, t, db, node)
    _hash_tables(f, node, db)
    if ctx.mgmt is not None:
        _mgmt_tables(ctx.mgmt, node, db)
    db["FLEX_COUNTER_TABLE"] = {g: {"FLEX_COUNTER_STATUS": "enable"} for g in
                                ("PORT", "QUEUE", "PG_WATERMARK", "QUEUE_WATERMARK")
                                + (("PFCWD",) if t.pfc_wd else ())}
    return db


def _mgmt_tables(mg: ManagementPlan, node: int, db: dict[str, Any]) -> None:
    """MGMT_PORT (eth0, 1000BASE-T, cabled to its access switch port), MGMT_INTERFACE
    (its address in the management pool, the pool's gateway) and, with
    ``management.vrf``, MGMT_VRF_CONFIG (eth0 in SONiC's management VRF, its routes apart
    from the fabric's)."""
    row = int(mg.node_row[node])  # a switch's only managed port
    acc = mg.access_switch_names[row // mg.spec.ports_per_switch]
    port = row % mg.spec.ports_per_switch + 1
    addr = ".".join(str((int(mg.address[row]) >> s) & 255) for s in (24, 16, 8, 0))
    db["MGMT_PORT"] = {SWITCH_PORT: {"admin_status": "up", "alias": SWITCH_PORT,
                                     "speed": str(1000 * mg.spec.port_gbps),
                                     "autoneg": "on", "description": f"{acc}:p{port}"}}
    db["MGMT_INTERFACE"] = {f"{SWITCH_PORT}|{addr}/{mg.prefixlen}": {
        "gwaddr": mg.gateway_str}}
    if mg.spec.vrf:
        db["MGMT_VRF_CONFIG"] = {"vrf_global": {"mgmtVrfEnabled": "true"}}


def _metadata(ctx: SwitchContext, node: int, kind: NodeKind, model_name: str,
              lo: int) -> dict[str, str]:
    """DEVICE_METADATA|localhost of a switch."""
    qos = ctx.dep.qos
    return {
        "hostname": str(ctx.f.nodes.name[node]), "bgp_asn": str(int(ctx.plan.asn[node])),
        "type": DEVICE_TYPE[kind], "hwsku": model_name, "mac": mac_of(lo),
        "docker_routing_config_mode": "split", "buffer_model": "traditional",
        "default_pfcwd_status": "enable" if ctx.lossless and qos.pfc_watchdog.enabled
        else "disable",
    }


def _port_rows(ctx: SwitchContext, t: _Tables, r: int, lpp: int) -> None:
    """PORT, DEVICE_NEIGHBOR, CABLE_LENGTH and the L3 (INTERFACE, BGP_NEIGHBOR) or host
    (VLAN member, HPN PortChannel) entries of endpoint row ``r``."""
    dep = ctx.dep
    mtu = str(dep.mtu.switch)
    pn = ctx.port_name[r]
    lane = ctx.ports[r]
    nl = ctx.lanes[r]
    phys = lane // lpp
    sub = (lane % lpp) // max(nl, 1)
    alias = f"etp{phys + 1}" + (chr(ord("a") + sub) if nl < lpp else "")
    peer, pport = ctx.peer_device[r], ctx.peer_port[r]
    t.port[pn] = {"lanes": ",".join(str(x) for x in range(lane, lane + nl)),
                  "speed": str(ctx.speed[r]), "mtu": mtu, "admin_status": "up",
                  "alias": alias, "index": str(phys + 1), "fec": "rs",
                  "description": f"{peer}:{pport}"}
    t.neighbor[pn] = {"name": peer, "port": pport}
    t.cable[pn] = f"{ctx.length_class[r]}m"
    if ctx.kind[r] == LinkKind.ACCESS:
        if ctx.hpn:
            pcn = ctx.portchannel(r)
            t.pc[pcn] = {"admin_status": "up", "mtu": mtu, "min_links": "1",
                         "lacp_key": "auto", "fast_rate": "true",
                         "system_mac": dep.hpn.lacp_system_mac.lower(),
                         "description": f"{peer}:{pport}"}
            t.pc_member[f"{pcn}|{pn}"] = {}
            t.vlan_member[f"Vlan{dep.nic.host_vlan}|{pcn}"] = {"tagging_mode": "untagged"}
        else:
            t.vlan_member[f"Vlan{dep.nic.host_vlan}|{pn}"] = {"tagging_mode": "untagged"}
    else:
        t.interface[pn] = {}
        t.interface[f"{pn}|{ctx.local_ip[r]}/31"] = {}
        t.bgp[ctx.peer_ip[r]] = {"asn": str(ctx.peer_asn[r]), "name": peer,
                                 "local_addr": ctx.local_ip[r], "admin_status": "up",
                                 "keepalive": "3", "holdtime": "9"}


def _port_qos_rows(ctx: SwitchContext, t: _Tables, r: int) -> None:
    """PORT_QOS_MAP, QUEUE, BUFFER_PG, BUFFER_QUEUE and PFC_WD entries of endpoint row
    ``r``; collects its WRED and lossless PG profiles."""
    qos = ctx.dep.qos
    pn = ctx.port_name[r]
    spd = ctx.speed[r]
    roce, cnp = qos.roce_tc, qos.cnp_tc
    m = {"dscp_to_tc_map": MAP_NAME, "tc_to_queue_map": MAP_NAME, "tc_to_pg_map": MAP_NAME}
    if ctx.lossless:
        m.update(pfc_to_queue_map=MAP_NAME, pfc_enable=str(roce), pfcwd_sw_enable=str(roce))
    t.qos_map[pn] = m
    wred_name = wred_profile_name(qos, spd)
    t.wred[wred_name] = qos.wred_for(spd / 1000)
    t.queue[f"{pn}|{roce}"] = {"scheduler": "scheduler.roce", "wred_profile": wred_name}
    t.queue[f"{pn}|{cnp}"] = {"scheduler": "scheduler.cnp"}
    for qr in _ranges([q for q in range(8) if q not in (roce, cnp)]):
        t.queue[f"{pn}|{qr}"] = {"scheduler": "scheduler.default"}
    for pr in _ranges([q for q in range(8) if q != roce]) if ctx.lossless else ["0-7"]:
        t.buf_pg[f"{pn}|{pr}"] = {"profile": "ingress_lossy_profile"}
    if not ctx.lossless:
        t.buf_q[f"{pn}|0-7"] = {"profile": "egress_lossy_profile"}
        return
    prof = f"pg_lossless_{spd}_{ctx.length_class[r]}m_profile"
    if prof not in t.profiles:
        a = ctx.arc_in[r]
        xoff, xon = int(ctx.buffers.arc_xoff[a]), int(ctx.buffers.arc_xon[a])
        t.profiles[prof] = {"pool": "ingress_lossless_pool", "xon": str(xon),
                            "xoff": str(xoff), "size": str(xon + xoff), "dynamic_th": "0"}
    t.buf_pg[f"{pn}|{roce}"] = {"profile": prof}
    t.buf_q[f"{pn}|{roce}"] = {"profile": "egress_lossless_profile"}
    for qr in _ranges([q for q in range(8) if q != roce]):
        t.buf_q[f"{pn}|{qr}"] = {"profile": "egress_lossy_profile"}
    wd = qos.pfc_watchdog
    if wd.enabled:
        t.pfc_wd[pn] = {"action": wd.action, "detection_time": str(wd.detection_ms),
                        "restoration_time": str(wd.restoration_ms)}


def _link_tables(ctx: SwitchContext, t: _Tables, db: dict[str, Any]) -> None:
    """PORT, INTERFACE, DEVICE_NEIGHBOR, BGP_NEIGHBOR, the host VLAN (proxy ARP, SAG)
    and HPN's PortChannels."""
    dep, plan = ctx.dep, ctx.plan
    db["PORT"] = t.port
    if t.interface:
        db["INTERFACE"] = t.interface
    db["DEVICE_NEIGHBOR"] = t.neighbor
    if t.bgp:
        db["BGP_NEIGHBOR"] = t.bgp
    if t.vlan_member:
        v = f"Vlan{dep.nic.host_vlan}"
        db["VLAN"] = {v: {"vlanid": str(dep.nic.host_vlan), "mtu": str(dep.mtu.switch),
                          "admin_status": "up",
                          "description": "hosts (proxy ARP, anycast gateway)"}}
        db["VLAN_MEMBER"] = t.vlan_member
        db["VLAN_INTERFACE"] = {v: {"proxy_arp": "enabled", "static_anycast_gateway": "true"},
                                f"{v}|{plan.gateway_str}/{plan.gateway_prefixlen}": {}}
        db["SAG"] = {"GLOBAL": {"gateway_mac": dep.nic.gateway_mac.lower()}}
    if t.pc:
        db["PORTCHANNEL"] = t.pc
        db["PORTCHANNEL_MEMBER"] = t.pc_member


def _qos_tables(ctx: SwitchContext, t: _Tables, db: dict[str, Any]) -> None:
    """The QoS maps, PORT_QOS_MAP, WRED_PROFILE, SCHEDULER and QUEUE."""
    qos = ctx.dep.qos
    roce, cnp = qos.roce_tc, qos.cnp_tc
    dscp = {str(d): "0" for d in range(64)}
    dscp[str(qos.roce_dscp)] = str(roce)
    dscp[str(qos.cnp_dscp)] = str(cnp)
    db["DSCP_TO_TC_MAP"] = {MAP_NAME: dscp}
    db["TC_TO_QUEUE_MAP"] = {MAP_NAME: {str(t): str(t) for t in range(8)}}
    db["TC_TO_PRIORITY_GROUP_MAP"] = {MAP_NAME: {str(t): (str(t) if t == roce and ctx.lossless
                                                          else "0") for t in range(8)}}
    if ctx.lossless:
        db["MAP_PFC_PRIORITY_TO_QUEUE"] = {MAP_NAME: {str(t): str(t) for t in range(8)}}
    db["PORT_QOS_MAP"] = t.qos_map
    db["WRED_PROFILE"] = {name: {
        "wred_green_enable": "true", "wred_yellow_enable": "true", "wred_red_enable": "true",
        "ecn": "ecn_all",
        "green_min_threshold": str(e.min_threshold_bytes),
        "green_max_threshold": str(e.max_threshold_bytes),
        "green_drop_probability": str(e.max_mark_percent),
        "yellow_min_threshold": str(e.min_threshold_bytes),
        "yellow_max_threshold": str(e.max_threshold_bytes),
        "yellow_drop_probability": str(e.max_mark_percent),
        "red_min_threshold": str(e.min_threshold_bytes),
        "red_max_threshold": str(e.max_threshold_bytes),
        "red_drop_probability": str(e.max_mark_percent)} for name, e in sorted(t.wred.items())}
    db["SCHEDULER"] = {
        "scheduler.roce": {"type": "DWRR", "weight": str(qos.roce_weight_percent)},
        "scheduler.default": {"type": "DWRR", "weight": str(100 - qos.roce_weight_percent)},
        "scheduler.cnp": {"type": "STRICT"},
    }
    db["QUEUE"] = t.queue


def _buffer_tables(ctx: SwitchContext, t: _Tables, db: dict[str, Any], node: int) -> None:
    """BUFFER_POOL, BUFFER_PROFILE, BUFFER_PG, BUFFER_QUEUE, CABLE_LENGTH and PFC_WD:
    the pools of :func:`aifabric.topology.buffers.buffer_plan` (the packet simulator's):
    the ingress lossless pool is the shared pool (the buffer less the headroom pool), its
    ``xoff`` the headroom pool (every lossless PG's XOFF headroom)."""
    plan = ctx.buffers
    total = int(plan.total_bytes[node])
    if ctx.lossless:
        headroom_total = int(plan.headroom_pool_bytes[node])
        shared = total - headroom_total
        db["BUFFER_POOL"] = {
            "ingress_lossless_pool": {"type": "ingress", "mode": "dynamic", "size": str(shared),
                                      "xoff": str(headroom_total)},
            "egress_lossless_pool": {"type": "egress", "mode": "static", "size": str(total)},
            "egress_lossy_pool": {"type": "egress", "mode": "dynamic", "size": str(shared)},
        }
        base_profiles = {
            "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                      "dynamic_th": "3"},
            "egress_lossless_profile": {"pool": "egress_lossless_pool", "size": "0",
                                        "static_th": str(total)},
            "egress_lossy_profile": {"pool": "egress_lossy_pool", "size": "1518",
                                     "dynamic_th": "3"},
        }
    else:
        db["BUFFER_POOL"] = {
            "ingress_lossy_pool": {"type": "ingress", "mode": "dynamic", "size": str(total)},
            "egress_lossy_pool": {"type": "egress", "mode": "dynamic", "size": str(total)},
        }
        base_profiles = {
            "ingress_lossy_profile": {"pool": "ingress_lossy_pool", "size": "0",
                                      "dynamic_th": "3"},
            "egress_lossy_profile": {"pool": "egress_lossy_pool", "size": "1518",
                                     "dynamic_th": "3"},
        }
    db["BUFFER_PROFILE"] = {**base_profiles, **dict(sorted(t.profiles.items()))}
    db["BUFFER_PG"] = t.buf_pg
    db["BUFFER_QUEUE"] = t.buf_q
    db["CABLE_LENGTH"] = {MAP_NAME: t.cable}
    if t.pfc_wd:
        db["PFC_WD"] = {"GLOBAL": {"POLL_INTERVAL": str(ctx.dep.qos.pfc_watchdog.poll_interval_ms)},
                        **t.pfc_wd}


def _hash_tables(f: Fabric, node: int, db: dict[str, Any]) -> None:
    """SWITCH_HASH and SWITCH: ECMP hashing from the routing policy."""
    rt = f.spec.routing
    db["SWITCH_HASH"] = {"GLOBAL": {
        "ecmp_hash": [_HASH_FIELD[h] for h in rt.hash_fields],
        "ecmp_hash_algorithm": _HASH_ALGO[rt.hash]}}
    db["SWITCH"] = {"switch": {"ecmp_hash_seed": str(hash_seed(f, node))}}
