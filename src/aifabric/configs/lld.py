"""``LLD.md``: the low-level design document of a fabric.

Summary counts, the eBGP/ASN and address design with pool usage, RoCE QoS (DSCP and
traffic classes, ECN, PFC headroom profiles by speed and cable length, watchdog),
DCQCN, the HPN dual-ToR specifics, one table per switch tier (every switch with its
pod, segment, plane, rail, ASN, loopback and ports), and a Mermaid drawing of one
segment (its ToRs, three of its hosts and the uplink groups).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from aifabric.configs._ports import Endpoints
from aifabric.configs.addressing import AddressPlan, ip_str
from aifabric.configs.frr import template_env
from aifabric.configs.sonic import _HASH_ALGO, _HASH_FIELD
from aifabric.topology import LinkKind, NodeKind
from aifabric.topology.buffers import buffer_plan

__all__ = ["render_lld", "render_lld_management"]

_ASN_SCHEME = {NodeKind.TOR: "one per ToR", NodeKind.AGG: "one per pod and plane/group",
               NodeKind.CORE: "one per core group"}


def _na(x: int) -> str:
    return "-" if x < 0 else str(x)


def _drawing(plan: AddressPlan, ends: Endpoints, seg: int) -> str:
    f = plan.fabric
    nodes = f.nodes
    tors = f.ids(NodeKind.TOR)
    tors = tors[nodes.segment[tors] == seg]
    hosts = f.host_node[(nodes.segment[f.host_node] == seg)]
    shown = hosts[:3]
    lines = ["flowchart TB"]
    uplinks: Counter[tuple[str, str]] = Counter()
    for t in tors:
        tn = str(nodes.name[t])
        lines.append(f'  {tn.replace("-", "_")}["{tn}<br/>AS {int(plan.asn[t])}"]')
        rows = ends.rows(int(t))
        for r in range(rows.start, rows.stop):
            if ends.up[r]:
                peer = int(ends.peer[r])
                grp = f"{NodeKind(int(nodes.kind[peer])).label} pod {nodes.pod[peer]}" + (
                    f" plane {nodes.plane[peer]}" if nodes.plane[peer] >= 0 else "")
                uplinks[(tn, grp)] += 1
    for grp in sorted({g for _, g in uplinks}):
        lines.append(f'  {grp.replace(" ", "_")}(["{grp}"])')
    for (tn, grp), n in sorted(uplinks.items()):
        gid = grp.replace(" ", "_")
        lines.append(f"  {tn.replace('-', '_')} -- {n} uplinks --> {gid}")
    for h in shown:
        hn = str(nodes.name[h])
        lines.append(f'  {hn.replace("-", "_")}["{hn}"]')
        nic = np.flatnonzero((nodes.kind == NodeKind.NIC) & (nodes.host == nodes.host[h]))
        for n in nic:
            r = int(ends.start[n])
            if ends.stop[n] > r:
                lines.append(f"  {hn.replace('-', '_')} -- {ends.port_name[r]} --> "
                             f"{str(ends.peer_device[r]).replace('-', '_')}")
    if len(hosts) > len(shown):
        lines.append(f'  more_hosts["... {len(hosts) - len(shown)} more hosts, wired alike"]')
    return "\n".join(lines)


def render_lld(plan: AddressPlan, ends: Endpoints) -> str:
    f = plan.fabric
    spec = f.spec
    dep = spec.deploy
    nodes = f.nodes
    hosts = f.ids(NodeKind.HOST)
    summary = [("GPUs (active)", f"{len(f.ids(NodeKind.GPU, active_only=True)):,}"),
               ("hosts (active + backup)",
                f"{len(f.ids(NodeKind.HOST, active_only=True)):,} + "
                f"{int(nodes.backup[hosts].sum()):,}"),
               ("NIC ports", f"{len(f.ids(NodeKind.NIC)):,}")]
    for k in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE):
        n = len(f.ids(k))
        if n:
            summary.append((f"{k.label} switches", f"{n:,}"))
    for k in (LinkKind.ACCESS, LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE):
        n = int((f.links.kind == k).sum())
        if n:
            summary.append((f"{k.label} links", f"{n:,}"))
    up = np.bincount(ends.node[ends.up], minlength=f.n_nodes)
    down = np.bincount(ends.node[~ends.up], minlength=f.n_nodes)
    tiers: list[dict[str, Any]] = []
    lo_str = ip_str(plan.loopback)
    for k in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE):
        ids = f.ids(k)
        if not len(ids):
            continue
        asns = plan.asn[ids]
        scheme = _ASN_SCHEME[k]
        if k == NodeKind.TOR and dep.asn.tor == "per_pair" and (nodes.side[ids] >= 0).any():
            scheme = "one per ToR pair"
        rows = [[str(nodes.name[i]), _na(nodes.pod[i]), _na(nodes.segment[i]),
                 _na(nodes.plane[i]), _na(nodes.rail[i]), int(plan.asn[i]), lo_str[i],
                 int(up[i]), int(down[i])] for i in ids.tolist()]
        tiers.append({"label": k.label, "count": len(ids), "asn_scheme": scheme,
                      "asn_range": f"{asns.min()}..{asns.max()} ({len(np.unique(asns))})",
                      "lo_range": f"{lo_str[ids[0]]}..{lo_str[ids[-1]]}", "rows": rows})
    n_nics = len(np.unique(nodes.ip[f.ids(NodeKind.NIC)]))
    pools = [{"name": "addressing.nic_pool", "prefix": spec.addressing.nic_pool,
              "used": f"{n_nics:,} /32 + gateway"},
             {"name": "deploy.pools.loopback", "prefix": dep.pools.loopback,
              "used": f"{len(plan.switches):,} /32"},
             {"name": "deploy.pools.p2p", "prefix": dep.pools.p2p,
              "used": f"{len(plan.p2p):,} /31"}]
    bp = buffer_plan(f, 1, mtu_bytes=dep.mtu.switch, response_ns=dep.qos.pfc_response_ns)
    headroom: dict[tuple[int, int, int, int], int] = Counter()
    sw_rows = f.is_switch[ends.node]
    arc_in = (2 * ends.link + ends.up)[sw_rows]  # the switch port's ingress
    for spd, lc, xoff, xon in zip(ends.speed_gbps[sw_rows].astype(int).tolist(),
                                  ends.length_class[sw_rows].tolist(),
                                  bp.arc_xoff[arc_in].tolist(), bp.arc_xon[arc_in].tolist(),
                                  strict=True):
        headroom[(spd, lc, xoff, xon)] += 1
    hr = []
    for (spd, lc, xoff, xon), n in sorted(headroom.items()):
        hr.append({"name": f"pg_lossless_{spd * 1000}_{lc}m_profile", "speed": f"{spd}G",
                   "cable": f"{lc} m", "xoff": xoff, "xon": xon, "ports": n})
    rt = spec.routing
    dual = f.family == "hpn"
    seg = int(nodes.segment[f.ids(NodeKind.TOR)[0]]) if len(f.ids(NodeKind.TOR)) else 0
    return template_env().get_template("LLD.md.j2").render(
        name=spec.name, description=spec.description, family=f.family, summary=summary,
        tiers=tiers, pools=pools, qos=dep.qos, lossless=dep.qos.mode == "lossless",
        mtu=dep.mtu, headroom=hr, rp=", ".join(f"{k} {v}" for k, v in dep.dcqcn.rp().items()),
        min_cnp=dep.dcqcn.min_time_between_cnps, dual=dual, hpn=dep.hpn,
        gateway=plan.gateway_str, vlan=dep.nic.host_vlan, gateway_mac=dep.nic.gateway_mac,
        host_routes=("Each ToR learns its hosts' /32s by ARP and redistributes them into BGP."
                     if dual else "Each ToR carries static /32 routes for the NICs the plan "
                     "puts behind it and redistributes them into BGP."),
        hash_algo=_HASH_ALGO[rt.hash], hash_fields=", ".join(_HASH_FIELD[h] for h in
                                                             rt.hash_fields),
        seed_text=(f"{rt.seed} on every switch" if rt.seed_mode == "same"
                   else f"{rt.seed} mixed with each switch's name (per_switch)"),
        drawing_segment=seg, drawing=_drawing(plan, ends, seg))


def render_lld_management(mg: Any) -> str:
    """The ``LLD.md`` section of the out-of-band management network
    (:class:`aifabric.topology.management.ManagementPlan`)."""
    p = mg.as_dict()
    m = mg.spec
    lines = [
        "", "## Management network (out of band)", "",
        f"One flat subnet `{p['pool']}`, gateway `{p['gateway']}` (the site's management "
        f"router); {p['addresses']:,} addresses: every switch `eth0` ({p['switch_ports']:,}), "
        f"every host's `{m.host_interface}` ({p['host_ports']:,}) and BMC "
        f"({p['bmc_ports']:,}), then the management switches' `Vlan1`. SONiC: MGMT_PORT "
        "(1000BASE-T), MGMT_INTERFACE" + (", MGMT_VRF_CONFIG (management VRF)" if m.vrf
                                          else " (no management VRF)")
        + ". Monitoring and Ansible reach every device at its management address.", "",
        "| item | count | each |", "|---|---:|---|",
        f"| access switches | {p['access_switches']:,} | {m.ports_per_switch} x 1G copper + "
        f"{m.uplinks} x {m.uplink_gbps}G up |",
        f"| aggregation switches | {p['agg_switches']:,} | {m.agg_ports} x {m.uplink_gbps}G"
        + (f" + 1 x {m.uplink_gbps}G up |" if mg.core_switches else " |"),
        *([f"| core switches ({p['agg_blocks']} aggregation blocks) | {p['core_switches']:,} "
           f"| {m.agg_ports} x {m.uplink_gbps}G |"] if mg.core_switches else []),
        f"| copper patch cables | {p['copper_cables']:,} | {m.access_m:g} m |",
        f"| uplink cables ({m.uplink_medium}) | {p['uplink_cables']:,} | {m.uplink_m:g} m |",
        "", "Every cable, end to end: `mgmt-cabling.csv`; every address: `addressing.csv`.",
        ""]
    return "\n".join(lines)
