"""The address and ASN plan of a fabric: loopbacks, point-to-point /31s, host /32s and
private ASNs, all drawn from the spec's pools and checked never to overlap.

* Host addresses are the Fabric's: one /32 per NIC from ``addressing.nic_pool``
  (``fabric.nodes.ip``; the two ports of a dual-ToR NIC share it). The last usable
  address of that pool is the hosts' anycast gateway, answered by every ToR.
* Loopbacks: one /32 per switch from ``deploy.pools.loopback``, in node order,
  starting at the pool's first host address.
* Point-to-point: one /31 per switch-to-switch link (leaf-spine, spine-core) from
  ``deploy.pools.p2p``, in link order; the upper end (``b``) takes the even address,
  the lower end (``a``) the odd one.
* ASNs (RFC 7938 eBGP): one per ToR (or per ToR pair with ``deploy.asn.tor:
  per_pair``), one per aggregation plane/group of a pod, one per core group; numbered
  from ``deploy.asn.first`` in that order.

Everything is a numpy array indexed like the Fabric (node id or link id).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology import Fabric, LinkKind, NodeKind

__all__ = ["AddressPlan", "ip_str", "plan_addresses"]

_P2P_KINDS = (LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE)


def ip_str(addr: np.ndarray) -> np.ndarray:
    """Dotted-quad strings of uint32 addresses (vectorised)."""
    a = np.asarray(addr, dtype=np.uint32)
    parts = [((a >> s) & 0xFF).astype(np.str_) for s in (24, 16, 8, 0)]
    out = parts[0]
    for p in parts[1:]:
        out = np.strings.add(np.strings.add(out, "."), p)
    return out


@dataclass(eq=False)
class AddressPlan:
    """Addresses and ASNs of one fabric (arrays indexed by node id or link id)."""

    fabric: Fabric
    loopback: np.ndarray  # uint32 per node; 0 for non-switches
    asn: np.ndarray  # int64 per node; 0 for non-switches
    p2p: np.ndarray  # int64 link ids of the switch-to-switch links, in order
    p2p_a: np.ndarray  # uint32 per link: address of end a (0 for other links)
    p2p_b: np.ndarray  # uint32 per link: address of end b
    gateway: int  # anycast gateway of the hosts (uint32)
    gateway_prefixlen: int

    @cached_property
    def switches(self) -> np.ndarray:
        return np.flatnonzero(self.fabric.is_switch)

    @property
    def gateway_str(self) -> str:
        return str(ipaddress.IPv4Address(self.gateway))

    def interface_addresses(self) -> np.ndarray:
        """Every interface address of the fabric (loopbacks, both ends of every /31,
        every NIC /32 once, the gateway) as uint32."""
        nic = self.fabric.ids(NodeKind.NIC)
        return np.concatenate([
            self.loopback[self.switches], self.p2p_a[self.p2p], self.p2p_b[self.p2p],
            np.unique(self.fabric.nodes.ip[nic]), np.array([self.gateway], dtype=np.uint32),
        ]).astype(np.uint32)


def _asn_keys(f: Fabric, per_pair: bool) -> tuple[np.ndarray, np.ndarray]:
    """(switch ids, key) where switches sharing a key share an ASN. Keys sort by tier."""
    nodes, links = f.nodes, f.links
    sw = np.flatnonzero(f.is_switch)
    kind = nodes.kind[sw]
    key = np.zeros(len(sw), dtype=np.int64)
    tier_base = {NodeKind.TOR: 0, NodeKind.AGG: 1 << 60, NodeKind.CORE: 2 << 60}
    tor = kind == NodeKind.TOR
    if per_pair:
        dual = tor & (nodes.side[sw] >= 0)
        pair = nodes.segment[sw].astype(np.int64) * 4096 + nodes.rail[sw]
        key[tor] = np.where(dual[tor], pair[tor], sw[tor] + (1 << 40))
    else:
        key[tor] = sw[tor]
    agg = kind == NodeKind.AGG
    key[agg] = ((nodes.pod[sw[agg]].astype(np.int64) + 1) << 32) + \
        ((nodes.plane[sw[agg]].astype(np.int64) + 1) << 16) + nodes.group[sw[agg]] + 1
    core = kind == NodeKind.CORE
    if core.any():
        sc = links.kind == LinkKind.SPINE_CORE
        lowest = np.full(f.n_nodes, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(lowest, links.b[sc], links.a[sc].astype(np.int64))
        key[core] = lowest[sw[core]]  # a core group = the cores over the same aggs
    for k, base in tier_base.items():
        key[kind == k] += base
    return sw, key


def _first_order_codes(key: np.ndarray) -> np.ndarray:
    """0-based codes of ``key`` in order of first appearance (tier blocks kept)."""
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    # sort distinct keys by (tier block, first appearance)
    order = np.lexsort((first, uniq >> 60))
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq))
    return rank[inv]


def plan_addresses(f: Fabric) -> AddressPlan:
    """The address and ASN plan of ``f``; raises SpecError naming every pool that is
    too small or overlaps another."""
    spec = f.spec
    dep = spec.deploy
    pools = {"addressing.nic_pool": spec.addressing.nic_pool,
             "deploy.pools.loopback": dep.pools.loopback,
             "deploy.pools.p2p": dep.pools.p2p}
    problems: list[Problem] = []
    names = list(pools)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if pools[a].overlaps(pools[b]):
                problems.append(Problem(b, f"{pools[b]} overlaps {a} {pools[a]}; allowed: "
                                        "disjoint pools"))
    nodes, links = f.nodes, f.links
    sw = np.flatnonzero(f.is_switch)
    p2p = np.flatnonzero(np.isin(links.kind, _P2P_KINDS))
    n_nics = len(np.unique(nodes.ip[f.ids(NodeKind.NIC)]))
    lo_pool, p2p_pool, nic_pool = dep.pools.loopback, dep.pools.p2p, spec.addressing.nic_pool
    if len(sw) + 2 > lo_pool.num_addresses:
        need = 32 - int(np.ceil(np.log2(len(sw) + 2)))
        problems.append(Problem("deploy.pools.loopback", f"{lo_pool} holds "
                                f"{max(lo_pool.num_addresses - 2, 0)} loopbacks; {len(sw)} "
                                f"switches need one each; allowed: a /{need} or larger"))
    if 2 * len(p2p) > p2p_pool.num_addresses:
        need = 32 - int(np.ceil(np.log2(max(2 * len(p2p), 2))))
        problems.append(Problem("deploy.pools.p2p", f"{p2p_pool} holds "
                                f"{p2p_pool.num_addresses // 2} /31s; {len(p2p)} switch links "
                                f"need one each; allowed: a /{need} or larger"))
    if n_nics + 1 > nic_pool.num_addresses - 2:
        problems.append(Problem("addressing.nic_pool", f"{nic_pool} holds "
                                f"{max(nic_pool.num_addresses - 2, 0)} addresses; {n_nics} NICs "
                                "plus the hosts' gateway need a larger pool"))
    sw_ids, key = _asn_keys(f, dep.asn.tor == "per_pair")
    codes = _first_order_codes(key) if len(key) else key
    n_asn = int(codes.max()) + 1 if len(codes) else 0
    available = dep.asn.last - dep.asn.first + 1
    if n_asn > available:
        problems.append(Problem("deploy.asn", f"{dep.asn.first}..{dep.asn.last} holds "
                                f"{available} ASNs; the fabric needs {n_asn} (one per ToR"
                                f"{' pair' if dep.asn.tor == 'per_pair' else ''}, agg plane and "
                                f"core group); allowed: last >= {dep.asn.first + n_asn - 1}"))
    if problems:
        raise SpecError(problems)

    loopback = np.zeros(f.n_nodes, dtype=np.uint32)
    loopback[sw] = int(lo_pool.network_address) + 1 + np.arange(len(sw), dtype=np.uint32)
    asn = np.zeros(f.n_nodes, dtype=np.int64)
    asn[sw_ids] = dep.asn.first + codes
    p2p_a = np.zeros(len(links), dtype=np.uint32)
    p2p_b = np.zeros(len(links), dtype=np.uint32)
    base = int(p2p_pool.network_address) + 2 * np.arange(len(p2p), dtype=np.int64)
    p2p_b[p2p] = base
    p2p_a[p2p] = base + 1
    gateway = int(nic_pool.broadcast_address) - 1
    return AddressPlan(fabric=f, loopback=loopback, asn=asn, p2p=p2p, p2p_a=p2p_a,
                       p2p_b=p2p_b, gateway=gateway, gateway_prefixlen=nic_pool.prefixlen)
