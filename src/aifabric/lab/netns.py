"""The namespace and veth builder: the scaled-down fabric as Linux network namespaces.

One namespace per switch and one per host, named ``<prefix><device>`` (the prefix is
unique to the lab folder, so ``lab down`` removes exactly what this lab made and a test
lab never meets a user's). Every cable of the fabric (access, leaf-spine, spine-core) is
one veth pair created directly inside its two namespaces (``ip link add NAME netns A
type veth peer name PEER netns B``), so no interface of the lab ever lives in the root
namespace and deleting the namespaces deletes every veth.

Interfaces carry the names the configs use: ``Ethernet<lane>`` on switches,
``ens<nic>f<port>`` on hosts. Addresses and MTUs come from the generated SONiC
``config_db.json`` (INTERFACE, LOOPBACK_INTERFACE, VLAN_INTERFACE, VLAN_MEMBER,
PORTCHANNEL_MEMBER, PORT):

* switch-to-switch ports: their /31 from INTERFACE; the loopback /32 goes on ``lo``;
* single-attached ToRs: a Linux bridge ``Vlan<id>`` holds the VLAN members and the
  anycast gateway from VLAN_INTERFACE; FRR's ``ip route <host>/32 Vlan<id>`` (staticd)
  sends the plan's host /32s there, exactly as the generated ``frr.conf`` says;
* HPN dual-ToRs: this kernel has no bonding driver and no LACP, so each PortChannel's
  member port is a routed port holding the VLAN's anycast gateway address (without
  its subnet route, ``noprefixroute``: the VLAN's /8 on every port would send a host
  the ToR has no /32 for to whichever host answers ARP for it), and the host /32
  learned "by ARP" is installed as a kernel route on that port (``ip route add
  <host>/32 dev EthernetN``) -- what ``redistribute kernel`` in the generated
  ``frr.conf`` announces. When the port goes down the kernel drops the route and BGP
  withdraws the host, like a real ToR flushing its neighbour;
* hosts: each NIC's /32 on ``lo``, answered by ARP only on that NIC's port
  (``arp_filter`` on single-port NICs, as on a multi-homed host: otherwise a ToR
  that falls back to its VLAN subnet could deliver another NIC's address to this
  one); per NIC a routing table whose default route goes to the anycast gateway over
  every port of the NIC (an ECMP pair for a dual-ToR NIC), and
  ``ip rule from <nic ip> lookup <table>`` -- the policy routing of ``nic-setup.sh``;
  and per port a table used only by probes marked for that port (``ping -m <mark>``),
  so the lab can test each port's path on its own.

Kernel settings: forwarding on switches, L4 ECMP hashing
(``fib_multipath_hash_policy=1``), routes over a link that lost carrier ignored
(``ignore_routes_with_linkdown``), no reverse-path filter (ECMP paths are asymmetric),
no ICMP redirects (a ToR routing between two hosts of its VLAN must stay a hop, as an
ASIC does, instead of teaching the hosts to bypass it).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.configs import BuildContext
from aifabric.configs.addressing import ip_str
from aifabric.configs.sonic import render_config_db
from aifabric.topology import Fabric, LinkKind, NodeKind

__all__ = ["HOST_TABLE_BASE", "Layout", "Link", "lab_prefix", "layout"]

#: host policy-routing table of NIC r: HOST_TABLE_BASE + r
HOST_TABLE_BASE = 100
#: host table (and probe fwmark) of port p of NIC r: PORT_TABLE_BASE + 8r + p
PORT_TABLE_BASE = 1000

_SWITCH_SYSCTL = {
    "net.ipv4.ip_forward": 1,
    "net.ipv4.conf.all.forwarding": 1,
    "net.ipv4.fib_multipath_hash_policy": 1,
    "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
    "net.ipv4.conf.default.ignore_routes_with_linkdown": 1,
    "net.ipv4.conf.all.rp_filter": 0,
    "net.ipv4.conf.default.rp_filter": 0,
    "net.ipv4.conf.all.send_redirects": 0,
    "net.ipv4.conf.default.send_redirects": 0,
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
}
_HOST_SYSCTL = {
    "net.ipv4.fib_multipath_hash_policy": 1,
    "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
    "net.ipv4.conf.default.ignore_routes_with_linkdown": 1,
    "net.ipv4.conf.all.rp_filter": 0,
    "net.ipv4.conf.default.rp_filter": 0,
    "net.ipv4.conf.all.accept_redirects": 0,
    "net.ipv4.conf.default.accept_redirects": 0,
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
}


def lab_prefix(lab_dir: str | os.PathLike[str]) -> str:
    """The namespace prefix of the lab kept in ``lab_dir``: ``afl`` + 5 hex digits of its
    real path, so two lab folders never share a namespace."""
    digest = hashlib.sha1(os.path.realpath(lab_dir).encode()).hexdigest()[:5]
    return f"afl{digest}-"


@dataclass(frozen=True)
class Link:
    """One cable of the fabric as a veth pair: ``(namespace, interface)`` at both ends."""

    link: int
    ns_a: str
    if_a: str
    ns_b: str
    if_b: str


@dataclass(eq=False)
class Layout:
    """Everything the builder creates, computed from the Fabric and its configs."""

    prefix: str
    ns: dict[str, str]  # device name -> namespace
    switches: list[str]
    hosts: list[str]
    links: list[Link]
    scripts: dict[str, tuple[dict[str, int], list[str]]]  # device -> (sysctls, ip batch)
    static_tors: list[str] = field(default_factory=list)  # ToRs whose frr.conf has `ip route`
    frr_conf: dict[str, str] = field(default_factory=dict)
    #: the management network (:class:`aifabric.lab.mgmt.MgmtLayout`; None: the spec has
    #: no ``management:``)
    mgmt: Any = None

    @property
    def namespaces(self) -> list[str]:
        return [self.ns[d] for d in self.switches + self.hosts]


def layout(fabric: Fabric, ctx: BuildContext, prefix: str) -> Layout:
    """The lab of ``fabric``: namespaces, veth pairs and per-namespace commands."""
    from aifabric.configs.frr import render_frr

    f = fabric
    nodes, links = f.nodes, f.links
    sw_ids = np.flatnonzero(f.is_switch)
    host_ids = f.host_node
    switches = [str(n) for n in nodes.name[sw_ids]]
    hosts = [str(n) for n in nodes.name[host_ids]]
    ns = {d: prefix + d for d in switches + hosts}
    # cables: access, leaf-spine, spine-core (scale-up/PCIe stay inside a host)
    cable = np.flatnonzero(np.isin(links.kind, (LinkKind.ACCESS, LinkKind.LEAF_SPINE,
                                                LinkKind.SPINE_CORE)))
    lab_links = []
    for lid in cable.tolist():
        a, b = int(links.a[lid]), int(links.b[lid])
        lab_links.append(Link(lid, ns[f.device_name(a)], f.port_name(a, int(links.a_port[lid])),
                              ns[f.device_name(b)], f.port_name(b, int(links.b_port[lid]))))
    scripts: dict[str, tuple[dict[str, int], list[str]]] = {}
    plan = ctx.plan
    sw = ctx.switches
    ends = ctx.ends
    gw = plan.gateway_str
    host_mtu = f.spec.deploy.mtu.host
    static_tors, frr_conf = [], {}
    for n, name in zip(sw_ids.tolist(), switches, strict=True):
        db = render_config_db(sw, n)
        conf = render_frr(sw, n)
        frr_conf[name] = conf
        if "\nip route " in conf:
            static_tors.append(name)
        cmds = ["link set lo up"]
        for key in db.get("LOOPBACK_INTERFACE", {}):
            if "|" in key:
                cmds.append(f"address add {key.split('|')[1]} dev lo")
        for port, attrs in sorted(db.get("PORT", {}).items()):
            cmds.append(f"link set {port} mtu {attrs.get('mtu', '9100')} up")
        for key in db.get("INTERFACE", {}):
            if "|" in key:
                port, addr = key.split("|")
                cmds.append(f"address add {addr} dev {port}")
        members = [k.split("|")[1] for k in db.get("VLAN_MEMBER", {})]
        pc_member = {k.split("|")[0]: k.split("|")[1] for k in db.get("PORTCHANNEL_MEMBER", {})}
        vlan_addr = [k.split("|") for k in db.get("VLAN_INTERFACE", {}) if "|" in k]
        if members and not pc_member:  # single-attached ToR: the host VLAN as a bridge
            for vlan, addr in vlan_addr:
                cmds.append(f"link add {vlan} type bridge")
                for m in members:
                    cmds.append(f"link set {m} master {vlan}")
                cmds.append(f"address add {addr} dev {vlan}")
                cmds.append(f"link set {vlan} up")
        elif members:  # HPN dual-ToR: routed member ports, host /32s as kernel routes
            rows = range(int(ends.start[n]), int(ends.stop[n]))
            nic_of_port = {sw.port_name[r]: sw.nic_ip[r] for r in rows
                           if sw.kind[r] == LinkKind.ACCESS}
            for pc in members:
                port = pc_member.get(pc, pc)
                # the VLAN's anycast gateway, without its subnet route: a routed port
                # must not send a host it has no /32 for out of some other host's port
                for _vlan, addr in vlan_addr:
                    cmds.append(f"address add {addr} dev {port} noprefixroute")
                host_ip = ip_str(np.array([nic_of_port[port]], dtype=np.uint32))[0]
                cmds.append(f"route add {host_ip}/32 dev {port} proto static")
        scripts[name] = (dict(_SWITCH_SYSCTL), cmds)
    # hosts
    acc = links.kind == LinkKind.ACCESS
    nic_a = links.a[acc]
    for h, name in enumerate(hosts):
        cmds = ["link set lo up"]
        nics = np.flatnonzero((nodes.kind == NodeKind.NIC) & (nodes.host == h))
        by_rail: dict[int, list[str]] = {}
        ip_of_rail: dict[int, str] = {}
        for p in nics.tolist():
            if not np.any(nic_a == p):
                continue
            r = int(nodes.rail[p])
            ifname = f.port_name(p, int(nodes.side[p]))
            by_rail.setdefault(r, []).append(ifname)
            ip_of_rail[r] = str(ip_str(nodes.ip[p:p + 1])[0])
            cmds.append(f"link set {ifname} mtu {host_mtu} up")
        for r in sorted(by_rail):
            table = HOST_TABLE_BASE + r
            cmds.append(f"address add {ip_of_rail[r]}/32 dev lo")
            hops = " ".join(f"nexthop via {gw} dev {i} onlink" for i in sorted(by_rail[r]))
            cmds.append(f"route add default table {table} {hops}")
            cmds.append(f"rule add from {ip_of_rail[r]} lookup {table} priority {table}")
            # a probe marked for one port (ping -m <table>) leaves by that port, from the
            # NIC's IP (binding to the port instead would hide replies hashed to the other)
            for i in sorted(by_rail[r]):
                pt = PORT_TABLE_BASE + 8 * r + int(i.rsplit("f", 1)[1])
                cmds.append(f"route add default via {gw} dev {i} onlink src {ip_of_rail[r]} "
                            f"table {pt}")
                cmds.append(f"rule add fwmark {pt} lookup {pt} priority {HOST_TABLE_BASE - 10}")
        sysctls = dict(_HOST_SYSCTL)
        for ports in by_rail.values():
            if len(ports) == 1:  # answer ARP for a NIC's IP only on that NIC's port
                sysctls[f"net.ipv4.conf.{ports[0]}.arp_filter"] = 1
        scripts[name] = (sysctls, cmds)
    return Layout(prefix=prefix, ns=ns, switches=switches, hosts=hosts, links=lab_links,
                  scripts=scripts, static_tors=static_tors, frr_conf=frr_conf)
