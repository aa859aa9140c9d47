"""InfiniBand routing as OpenSM computes it: linear forwarding tables (LFTs) per switch.

An InfiniBand switch forwards on the destination LID only: its LFT maps every LID to one
output port, so there is exactly one path per (destination LID, LMC offset) from any
switch -- the collisions IB has come from the subnet manager's port assignment, not from
a hash. This module builds the subnet of a :class:`~aifabric.topology.fabric.Fabric`
(:func:`subnet`) and computes the LFTs of OpenSM's ``minhop`` and ``updn`` engines
(:func:`lfts`), with OpenSM's own tie-breaking (read from ``opensm/osm_ucast_mgr.c``,
``osm_switch.c`` and ``osm_ucast_updn.c``), so that the tables equal those a real OpenSM
writes into the switches (the lab checks it on ``ibsim``, docs/infiniband.md):

* destinations are visited in OpenSM's port order: the switches sorted by their number
  of end-port links (most first; ties in OpenSM's switch-table order, which is the
  node GUID's *network byte order* read as a host integer), each switch's end ports by
  port number, then every other port (switch port 0s) in port-GUID-table order;
* on each switch, a destination goes to the least-hop port that carries the fewest
  end-port paths so far, the lowest port number first (for LMC offsets > 0, the search
  starts after the port of the previous LID, and a port whose far node already carries
  a LID of the destination is avoided);
* switch destinations are not counted in the balance (``port_profile_switch_nodes``
  off, OpenSM's default);
* ``minhop``: hops from a breadth-first distance over all switch links; ``updn``: the
  hops of OpenSM's up/down breadth-first search from each switch, with roots found by
  OpenSM's hop-histogram rule (a switch whose hop histogram to the end ports has one bar
  over 90% of them and none other over 5%).

The selection loop is compiled with numba; the tables are ``uint8`` arrays (``255`` =
no route, as in OpenSM).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["NO_PATH", "Lfts", "Subnet", "check_infiniband", "lfts", "subnet", "trace"]

#: OpenSM's "no route" (OSM_NO_PATH): an LFT entry that drops the packet
NO_PATH = 255
#: the most ports a switch may have (port numbers are 8 bits; 255 is "none")
MAX_PORTS = 254
#: node GUIDs the twin gives the subnet (Mellanox's OUI 0x0002c9): switches, then HCAs
SWITCH_GUID_BASE = 0x0002C90300000000
HCA_GUID_BASE = 0x0002C90400000000


def _bswap(x: np.ndarray) -> np.ndarray:
    """A GUID as OpenSM's tables order it: the network-order value read as a host
    (little-endian) integer."""
    return np.asarray(x, dtype=np.uint64).byteswap()


@dataclass(eq=False)
class Subnet:
    """The InfiniBand view of a fabric: switches with numbered ports, HCA ports, GUIDs.

    Switch ``s`` is fabric node ``sw_node[s]``; its ports are numbered 1..``nports[s]``
    in the order of the fabric's logical ports; ``peer[s, p]`` is the node at the far
    end of port ``p`` (``0..S-1`` a switch, ``S + c`` HCA port ``c``, -1 none) and
    ``peer_port[s, p]`` its port number there. HCA port ``c`` is fabric NIC node
    ``ca_node[c]``, port ``ca_portnum[c]`` of HCA ``ca_hca[c]`` (one HCA per host and
    rail); ``ca_sw``/``ca_swport`` is the switch port it is cabled to.
    """

    fabric: Fabric
    sw_node: np.ndarray
    sw_guid: np.ndarray
    nports: np.ndarray
    peer: np.ndarray
    peer_port: np.ndarray
    port_link: np.ndarray  # (S, P): the fabric link behind each switch port (-1 none)
    ca_node: np.ndarray
    ca_hca: np.ndarray
    ca_portnum: np.ndarray
    hca_guid: np.ndarray
    hca_nports: np.ndarray
    ca_sw: np.ndarray
    ca_swport: np.ndarray
    component: np.ndarray  # subnet (connected set of switches) of each switch

    @property
    def n_switches(self) -> int:
        return len(self.sw_node)

    @property
    def n_ca_ports(self) -> int:
        return len(self.ca_node)

    @property
    def ca_guid(self) -> np.ndarray:
        """Port GUID of each HCA port: the HCA's node GUID + its port number."""
        return self.hca_guid[self.ca_hca] + self.ca_portnum.astype(np.uint64)

    def sw_name(self, s: int) -> str:
        return str(self.fabric.nodes.name[self.sw_node[s]])

    def hca_name(self, h: int) -> str:
        c = int(np.flatnonzero(self.ca_hca == h)[0])
        node = int(self.ca_node[c])
        return f"{self.fabric.device_name(node)}-hca{int(self.fabric.nodes.rail[node])}"

    def without(self, links: np.ndarray) -> Subnet:
        """The same subnet with the given fabric links down (their ports unconnected)."""
        down = np.isin(self.port_link, np.asarray(links, dtype=np.int64))
        peer = self.peer.copy()
        peer_port = self.peer_port.copy()
        peer[down] = -1
        peer_port[down] = -1
        ca_down = np.isin(self.ca_link, np.asarray(links, dtype=np.int64))
        ca_sw = np.where(ca_down, -1, self.ca_sw)
        ca_swport = np.where(ca_down, -1, self.ca_swport)
        out = Subnet(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        out.peer, out.peer_port, out.ca_sw, out.ca_swport = peer, peer_port, ca_sw, ca_swport
        out.ca_link = self.ca_link
        out.component = _components(peer)  # a failure may split a subnet
        return out

    ca_link: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def subnet(fab: Fabric) -> Subnet:
    """The subnet of ``fab``: every switch, every NIC port as an HCA port (one HCA per
    host and rail, its ports the NIC's ports), switch ports numbered from 1 in the order
    of the fabric's logical ports, GUIDs from the node order."""
    nodes, links = fab.nodes, fab.links
    sw_node = np.flatnonzero(fab.is_switch).astype(np.int64)
    S = len(sw_node)
    sw_of = np.full(fab.n_nodes, -1, dtype=np.int64)
    sw_of[sw_node] = np.arange(S)
    ca_node = fab.ids(NodeKind.NIC).astype(np.int64)
    C = len(ca_node)
    ca_of = np.full(fab.n_nodes, -1, dtype=np.int64)
    ca_of[ca_node] = np.arange(C)
    hca_key = nodes.host[ca_node].astype(np.int64) * (1 << 20) + nodes.rail[ca_node]
    uniq, ca_hca = np.unique(hca_key, return_inverse=True)
    ca_portnum = nodes.side[ca_node].astype(np.int64) + 1
    hca_nports = np.zeros(len(uniq), dtype=np.int64)
    np.maximum.at(hca_nports, ca_hca, ca_portnum)

    # the switch end of every network link: (switch, logical port, link)
    net = np.flatnonzero(links.kind >= LinkKind.ACCESS)
    ends_sw = np.concatenate([sw_of[links.a[net]], sw_of[links.b[net]]])
    ends_lane = np.concatenate([links.a_port[net], links.b_port[net]]).astype(np.int64)
    ends_link = np.concatenate([net, net]).astype(np.int64)
    ends_other = np.concatenate([links.b[net], links.a[net]]).astype(np.int64)
    keep = ends_sw >= 0
    ends_sw, ends_lane, ends_link, ends_other = (x[keep] for x in
                                                 (ends_sw, ends_lane, ends_link, ends_other))
    order = np.lexsort((ends_link, ends_lane, ends_sw))
    ends_sw, ends_lane, ends_link, ends_other = (x[order] for x in
                                                 (ends_sw, ends_lane, ends_link, ends_other))
    nports = np.bincount(ends_sw, minlength=S).astype(np.int64)
    if S and nports.max() > MAX_PORTS:
        worst = int(np.argmax(nports))
        raise SpecError(Problem("topology", f"switch {str(nodes.name[sw_node[worst]])!r} "
                                f"has {int(nports[worst])} ports; an InfiniBand switch has "
                                f"at most {MAX_PORTS}"))
    first = np.concatenate([[0], np.cumsum(nports)[:-1]]) if S else np.zeros(0, np.int64)
    portnum = np.arange(len(ends_sw)) - first[ends_sw] + 1
    P = int(nports.max()) + 1 if S else 1
    port_link = np.full((S, P), -1, dtype=np.int64)
    port_link[ends_sw, portnum] = ends_link
    peer = np.full((S, P), -1, dtype=np.int64)
    peer_port = np.full((S, P), -1, dtype=np.int64)
    other_sw = sw_of[ends_other]
    other_ca = ca_of[ends_other]
    is_sw = other_sw >= 0
    # far port of switch-switch links: the end of the same link on the other switch
    ss = np.flatnonzero(is_sw)
    # each switch-switch link has two ends; pair them by link id
    by_link = np.argsort(ends_link[ss], kind="stable")
    pair = ss[by_link].reshape(-1, 2) if len(ss) else np.zeros((0, 2), np.int64)
    e0, e1 = pair[:, 0], pair[:, 1]
    peer[ends_sw[e0], portnum[e0]] = ends_sw[e1]
    peer_port[ends_sw[e0], portnum[e0]] = portnum[e1]
    peer[ends_sw[e1], portnum[e1]] = ends_sw[e0]
    peer_port[ends_sw[e1], portnum[e1]] = portnum[e0]
    cs = np.flatnonzero(other_ca >= 0)
    peer[ends_sw[cs], portnum[cs]] = S + other_ca[cs]
    peer_port[ends_sw[cs], portnum[cs]] = ca_portnum[other_ca[cs]]
    ca_sw = np.full(C, -1, dtype=np.int64)
    ca_swport = np.full(C, -1, dtype=np.int64)
    ca_link = np.full(C, -1, dtype=np.int64)
    ca_sw[other_ca[cs]] = ends_sw[cs]
    ca_swport[other_ca[cs]] = portnum[cs]
    ca_link[other_ca[cs]] = ends_link[cs]

    comp = _components(peer)
    out = Subnet(fabric=fab, sw_node=sw_node,
                 sw_guid=SWITCH_GUID_BASE + np.arange(1, S + 1, dtype=np.uint64),
                 nports=nports, peer=peer, peer_port=peer_port, port_link=port_link,
                 ca_node=ca_node, ca_hca=ca_hca.astype(np.int64), ca_portnum=ca_portnum,
                 hca_guid=HCA_GUID_BASE + np.arange(1, len(uniq) + 1, dtype=np.uint64) * 16,
                 hca_nports=hca_nports, ca_sw=ca_sw, ca_swport=ca_swport,
                 component=comp.astype(np.int64))
    out.ca_link = ca_link
    return out


def _components(peer: np.ndarray) -> np.ndarray:
    """Subnets: the connected sets of switches over the switch links in ``peer``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    S = peer.shape[0]
    if not S:
        return np.zeros(0, dtype=np.int64)
    s, p = np.nonzero((peer >= 0) & (peer < S))
    adj = csr_matrix((np.ones(len(s)), (s, peer[s, p])), shape=(S, S))
    return connected_components(adj, directed=False)[1].astype(np.int64)


# ------------------------------------------------------------------------ LIDs

def default_lids(sn: Subnet, lmc: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """LIDs as the twin gives them when no subnet manager has: switches 1..S (LMC 0, as
    OpenSM gives switch port 0), then each HCA port a block of 2^lmc aligned to it."""
    S, C = sn.n_switches, sn.n_ca_ports
    sw_lid = np.arange(1, S + 1, dtype=np.int64)
    step = 1 << lmc
    start = -(-(S + 1) // step) * step
    ca_lid = start + step * np.arange(C, dtype=np.int64)
    return sw_lid, ca_lid


# ------------------------------------------------------------------------ hops

def _minhop_hops(sn: Subnet, members: np.ndarray) -> np.ndarray:
    """``hops[t, s, p]``: hops from switch ``s`` through port ``p`` to switch ``t``
    (``p = 0``: the least), over the live switch links (OpenSM's min-hop tables)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    S, P = sn.peer.shape
    live = sn.peer.copy()
    live[live >= S] = -1
    src, port = np.nonzero(live >= 0)
    adj = csr_matrix((np.ones(len(src)), (src, live[src, port])), shape=(S, S))
    dist = shortest_path(adj, unweighted=True, directed=True, indices=None) \
        if S else np.zeros((0, 0))
    dist = np.where(np.isfinite(dist), dist, NO_PATH).astype(np.int16)  # dist[s, t]
    hops = np.full((S, S, P), NO_PATH, dtype=np.int16)
    ss, pp = np.nonzero(live >= 0)
    # hops[t, s, p] = dist[peer(s, p), t] + 1
    hops[:, ss, pp] = np.minimum(dist[live[ss, pp], :].T + 1, NO_PATH)
    hops[:, :, 0] = np.minimum(hops.min(axis=2), NO_PATH)
    idx = np.arange(S)
    hops[idx, idx, 0] = 0
    return hops.astype(np.uint8)


def _updn_roots(sn: Subnet, minhop: np.ndarray, members: np.ndarray) -> np.ndarray:
    """OpenSM's automatic up/down roots of one subnet (updn_find_root_nodes_by_min_hop):
    the HCA ports counted are those cabled to the subnet's switches."""
    S = sn.n_switches
    attached = sn.ca_sw[np.isin(sn.ca_sw, members)]
    cas = np.bincount(attached, minlength=S)
    n = int(cas.sum())
    thd1, thd2 = n * 0.9, n * 0.05
    mem = np.asarray(members, dtype=np.int64)
    least = minhop[:, mem, 0].astype(np.int64).T  # (members, destination switch)
    ok = (cas[None, :] > 0) & (least < 64)
    hist = np.zeros((len(mem), 64))
    rows = np.broadcast_to(np.arange(len(mem))[:, None], least.shape)
    np.add.at(hist, (rows[ok], least[ok]), np.broadcast_to(cas[None, :], least.shape)[ok])
    one = ((hist > thd1).sum(axis=1) == 1) & ((hist > thd2).sum(axis=1) == 1)
    roots = np.zeros(S, dtype=bool)
    roots[mem[one]] = True
    return roots


def _updn_hops(sn: Subnet, roots: np.ndarray, members: np.ndarray) -> np.ndarray:
    """The hop tables of OpenSM's up/down engine (updn_subn_rank, updn_bfs_by_node) for
    the destinations of one subnet."""
    S, P = sn.peer.shape
    peer = sn.peer
    nports = sn.nports
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    # ranks: the distance from the nearest root (OpenSM's breadth-first updn_subn_rank)
    src, port = np.nonzero((peer >= 0) & (peer < S))
    adj = csr_matrix((np.ones(len(src)), (src, peer[src, port])), shape=(S, S))
    d = shortest_path(adj, unweighted=True, indices=np.flatnonzero(roots))
    d = d.min(axis=0) if len(d) else np.full(S, np.inf)
    rank = np.where(np.isfinite(d), d, 1 << 30).astype(np.int64)
    from aifabric.routing._ib_kernel import updn_hops

    hops = np.full((S, S, P), NO_PATH, dtype=np.int16)
    updn_hops(peer, sn.peer_port, nports, rank, sn.sw_guid.astype(np.uint64),
              np.asarray(members, dtype=np.int64), hops)
    return np.minimum(hops, NO_PATH).astype(np.uint8)


# ------------------------------------------------------------------- the tables

@dataclass(eq=False)
class Lfts:
    """Forwarding tables of one engine: ``lft[s, lid]`` is the output port of switch
    ``s`` for ``lid`` (255: none). ``sw_lid``/``ca_lid`` are the base LIDs used."""

    subnet: Subnet
    engine: str
    lmc: int
    sw_lid: np.ndarray
    ca_lid: np.ndarray
    lft: np.ndarray
    roots: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def destinations(self) -> np.ndarray:
        """Every destination LID (switch LIDs, and each HCA port's 2^lmc), once: the
        subnets of a multi-plane fabric number their LIDs each from 1."""
        ca = (self.ca_lid[:, None] + np.arange(1 << self.lmc)[None, :]).ravel()
        return np.unique(np.concatenate([self.sw_lid, ca[ca > 0]]))


def _order(sn: Subnet, members: np.ndarray, sw_lid: np.ndarray, ca_lid: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """OpenSM's destination order (ucast_mgr_build_lfts): ``(kind, index)`` arrays,
    kind 0 a switch's port 0, 1 an HCA port."""
    S = sn.n_switches
    msw = members[members < S]
    sw_order = msw[np.argsort(_bswap(sn.sw_guid[msw]), kind="stable")]
    endlinks = (sn.peer[sw_order] >= S).sum(axis=1)
    by_load = sw_order[np.argsort(-endlinks, kind="stable")]
    # each switch's end ports by port number, switches in that order; an HCA port once
    far = sn.peer[by_load, 1:].ravel()
    far = far[far >= S] - S
    _, first = np.unique(far, return_index=True)
    ca_first = far[np.sort(first)]
    taken = np.zeros(sn.n_ca_ports, dtype=bool)
    taken[ca_first] = True
    kinds = [1] * len(ca_first)
    idx = ca_first.tolist()
    # then the port GUID table: switch port 0s and unattached HCA ports of the subnet
    rest_ca = np.flatnonzero(~taken & np.isin(sn.ca_sw, msw) & (ca_lid > 0))
    guids = np.concatenate([sn.sw_guid[msw], sn.ca_guid[rest_ca]])
    kind = np.concatenate([np.zeros(len(msw), np.int64), np.ones(len(rest_ca), np.int64)])
    ix = np.concatenate([msw, rest_ca])
    o = np.argsort(_bswap(guids), kind="stable")
    kinds += kind[o].tolist()
    idx += ix[o].tolist()
    return np.asarray(kinds, dtype=np.int64), np.asarray(idx, dtype=np.int64)


def lfts(sn: Subnet, engine: str = "minhop", *, lmc: int = 0,
         sw_lid: np.ndarray | None = None, ca_lid: np.ndarray | None = None,
         existing: np.ndarray | None = None) -> Lfts:
    """The LFT of every switch under ``engine`` (``minhop`` or ``updn``), for the given
    base LIDs (default :func:`default_lids`; the lab passes the LIDs OpenSM gave).
    ``existing``: the tables the switches hold (a re-sweep after a failure): an entry
    that is still a live least-hop port is kept, as OpenSM keeps it."""
    if engine not in ("minhop", "updn", "ftree"):
        raise SpecError(Problem("infiniband.routing_engine", f"{engine!r}: the twin "
                                "computes ftree, updn and minhop tables; allowed: ftree, "
                                "updn, minhop"))
    d_sw, d_ca = default_lids(sn, lmc)
    sw_lid = d_sw if sw_lid is None else np.asarray(sw_lid, dtype=np.int64)
    ca_lid = d_ca if ca_lid is None else np.asarray(ca_lid, dtype=np.int64)
    S = sn.peer.shape[0]
    max_lid = int(max(sw_lid.max(initial=0), ca_lid.max(initial=0) + (1 << lmc) - 1))
    lft = np.full((S, max_lid + 1), NO_PATH, dtype=np.uint8)
    roots_all = np.zeros(S, dtype=bool)
    fallback: list[int] = []
    why: dict[int, str] = {}
    for comp in np.unique(sn.component):  # each subnet on its own (local indices)
        members = np.flatnonzero(sn.component == comp)
        sub = _restrict(sn, members)
        m = len(members)
        every = np.arange(m)
        old = None if existing is None else np.ascontiguousarray(existing[members])
        if engine == "ftree":
            res = _ftree(sub, sw_lid[members], ca_lid, lmc, max_lid + 1)
            if res.lft is not None:
                lft[members] = res.lft
                continue
            # OpenSM: the engine failed, the default (minhop) routes the subnet
            fallback.append(int(comp))
            why[int(comp)] = res.why
        hops = _minhop_hops(sub, every)
        if engine == "updn":
            roots = _updn_roots(sub, hops, every)
            if roots.any():
                roots_all[members[roots]] = True
                hops = _updn_hops(sub, roots, every)
            else:  # OpenSM: the engine failed, the default (minhop) routes the subnet
                fallback.append(int(comp))
        kinds, idx = _order(sub, every, sw_lid[members], ca_lid)
        peer_node = np.where(sub.peer >= m, m + sub.ca_hca[np.maximum(sub.peer - m, 0)],
                             sub.peer)
        part = np.full((m, max_lid + 1), NO_PATH, dtype=np.uint8)
        _select(every, kinds, idx, peer_node, sub.nports, hops, sw_lid[members], ca_lid,
                sub.ca_sw, sub.ca_swport, lmc, m, part, old)
        lft[members] = part
    return Lfts(subnet=sn, engine=engine, lmc=lmc, sw_lid=sw_lid, ca_lid=ca_lid, lft=lft,
                roots=roots_all if engine == "updn" else None,
                info={"minhop_fallback_subnets": fallback, "fallback_why": why})


def _ftree(sub: Subnet, sw_lid: np.ndarray, ca_lid: np.ndarray, lmc: int, width: int,
           route: bool = True) -> Any:
    """OpenSM's ftree on one subnet (local switch indices), :mod:`.ftree`."""
    from aifabric.routing.ftree import ftree_tables

    return ftree_tables(sub.peer, sub.peer_port, sub.nports, sub.sw_guid, sw_lid,
                        sub.ca_sw, sub.ca_swport, ca_lid, sub.ca_hca, sub.hca_guid,
                        sub.ca_portnum, lmc, width, route=route)


def _restrict(sn: Subnet, members: np.ndarray) -> Subnet:
    """The subnet of switches ``members`` with local switch indices 0..m-1 (HCA ports
    keep theirs; one cabled to another subnet's switch is unattached here)."""
    S = sn.n_switches
    m = len(members)
    loc = np.full(S, -1, dtype=np.int64)
    loc[members] = np.arange(m)
    peer = sn.peer[members]
    sw_peer = (peer >= 0) & (peer < S)
    peer = np.where(peer >= S, peer - S + m,
                    np.where(sw_peer, loc[np.where(sw_peer, peer, 0)], -1))
    inside = (sn.ca_sw >= 0) & (loc[np.maximum(sn.ca_sw, 0)] >= 0)
    out = Subnet(fabric=sn.fabric, sw_node=sn.sw_node[members], sw_guid=sn.sw_guid[members],
                 nports=sn.nports[members], peer=peer, peer_port=sn.peer_port[members],
                 port_link=sn.port_link[members], ca_node=sn.ca_node, ca_hca=sn.ca_hca,
                 ca_portnum=sn.ca_portnum, hca_guid=sn.hca_guid, hca_nports=sn.hca_nports,
                 ca_sw=np.where(inside, loc[np.maximum(sn.ca_sw, 0)], -1),
                 ca_swport=np.where(inside, sn.ca_swport, -1),
                 component=np.zeros(m, dtype=np.int64))
    out.ca_link = np.where(inside, sn.ca_link, -1) if len(sn.ca_link) else sn.ca_link
    return out


def _select(members, kinds, idx, peer, nports, hops, sw_lid, ca_lid, ca_sw, ca_swport,
            lmc, S, lft, existing) -> None:
    from aifabric.routing._ib_kernel import select_ports

    old = np.full((lft.shape[0], 1), NO_PATH, np.uint8) if existing is None else \
        np.ascontiguousarray(existing, dtype=np.uint8)
    select_ports(np.ascontiguousarray(members), kinds, idx, peer, nports, hops, sw_lid,
                 ca_lid, ca_sw, ca_swport, lmc, S, lft, old, existing is not None)


# ------------------------------------------------------------------------ paths

def trace(t: Lfts, src_ca: int, dst_lid: int) -> list[tuple[int, int]]:
    """The hops a packet from HCA port ``src_ca`` to ``dst_lid`` takes: ``(switch,
    out port)`` pairs, empty when the first switch has no route (a loop is cut at the
    number of switches)."""
    sn = t.subnet
    S = sn.n_switches
    s = int(sn.ca_sw[src_ca])
    out: list[tuple[int, int]] = []
    while 0 <= s < S and len(out) <= S:
        port = int(t.lft[s, dst_lid]) if dst_lid < t.lft.shape[1] else NO_PATH
        if port == NO_PATH or port == 0:
            if port == 0:
                out.append((s, 0))
            return out if port == 0 else []
        out.append((s, port))
        nxt = int(sn.peer[s, port])
        if nxt >= S or nxt < 0:
            return out
        s = nxt
    return out


# ------------------------------------------------------------------------ checks

def check_infiniband(fab: Fabric) -> None:
    """Refuse an InfiniBand spec the fabric cannot carry: ``ftree`` where OpenSM's ftree
    would refuse the topology (not a pure fat-tree, LMC > 0: OpenSM would silently route
    it with minhop instead), a switch with more than 254 ports. Problems name the field."""
    spec = fab.spec
    if getattr(spec, "transport", "roce") != "infiniband":
        return
    ib = spec.infiniband
    sn = subnet(fab)  # the port-count check
    check_partitions(fab)
    if ib.routing_engine != "ftree":
        return
    if ib.lmc > 0:
        raise SpecError(Problem("infiniband.lmc", f"{ib.lmc}: OpenSM's ftree supports LMC "
                                "0 only (it falls back to minhop); allowed: 0 with ftree, "
                                "or routing_engine minhop or updn"))
    comps = np.unique(sn.component)
    sw_lid, ca_lid = default_lids(sn, 0)
    for comp in comps:  # OpenSM's checks on each subnet (the tables are not needed)
        members = np.flatnonzero(sn.component == comp)
        res = _ftree(_restrict(sn, members), sw_lid[members], ca_lid, 0, 1, route=False)
        if res.lft is None:
            where = f" (subnet {int(comp)} of {len(comps)})" if len(comps) > 1 else ""
            raise SpecError(Problem("infiniband.routing_engine", f"ftree cannot route "
                                    f"this topology{where}: {res.why}; allowed: minhop, "
                                    "updn"))


def partition_of_host(fab: Fabric) -> dict[str, int]:
    """Host name -> the index of its partition in ``infiniband.partitions``."""
    out: dict[str, int] = {}
    for i, part in enumerate(fab.spec.infiniband.partitions):
        for h in part.hosts:
            out.setdefault(h, i)
    return out


def _pkey_order(pkey: int) -> int:
    """OpenSM keeps its partitions in a map keyed by the P_Key in network byte order and
    hands each port its P_Keys in that map's order: the P_Key with its bytes swapped."""
    return ((pkey & 0xFF) << 8) | (pkey >> 8)


def partition_members(fab: Fabric) -> list[dict[int, tuple[str, int]]]:
    """Per partition of ``infiniband.partitions``: the NIC port nodes that are its full
    members, each with where it came from (``("hosts" | "gpus", j)``). Unknown names
    raise (``infiniband.partitions.<i>.hosts.<j>`` / ``.gpus.<j>``)."""
    nics = fab.ids(NodeKind.NIC)
    by_host: dict[str, list[int]] = {}
    host_names = fab.nodes.name[fab.host_node]
    for n in nics.tolist():
        h = int(fab.nodes.host[n])
        if h >= 0:
            by_host.setdefault(str(host_names[h]), []).append(n)
    links = fab.links
    pcie = np.flatnonzero(links.kind == LinkKind.PCIE)
    gpu_nics: dict[str, list[int]] = {}
    for a, b in zip(links.a[pcie].tolist(), links.b[pcie].tolist(), strict=True):
        gpu_nics.setdefault(str(fab.nodes.name[a]), []).append(int(b))
    out: list[dict[int, tuple[str, int]]] = []
    for i, part in enumerate(fab.spec.infiniband.partitions):
        mine: dict[int, tuple[str, int]] = {}
        for kind, names, table in (("hosts", part.hosts, by_host),
                                   ("gpus", part.gpus, gpu_nics)):
            for j, name in enumerate(names):
                if name not in table:
                    near = ", ".join(sorted(table)[:3])
                    what = "host" if kind == "hosts" else "GPU"
                    raise SpecError(Problem(f"infiniband.partitions.{i}.{kind}.{j}",
                                            f"unknown {what} {name!r}; allowed: a {what} "
                                            f"of the fabric ({near}, ...)"))
                for n in table[name]:
                    mine.setdefault(n, (kind, j))
        out.append(mine)
    return out


def pkey_tables(fab: Fabric) -> dict[int, list[int]]:
    """The P_Key table OpenSM gives every NIC port node in a partition (the others hold
    the default alone): the default P_Key at index 0, then the port's partitions in
    OpenSM's order (:func:`_pkey_order`), as ``pkey_mgr_update_port`` appends the new
    P_Keys of a fresh sweep."""
    parts = fab.spec.infiniband.partitions
    members = partition_members(fab)
    of: dict[int, list[int]] = {}
    for i, mine in enumerate(members):
        for n in mine:
            of.setdefault(n, []).append(i)
    return {n: [0x7FFF, *sorted((parts[i].pkey for i in idx), key=_pkey_order)]
            for n, idx in of.items()}


def check_partitions(fab: Fabric) -> None:
    """Every partition's hosts and GPUs exist; a port is a full member of at most one
    partition that is not ``shared`` (NCCL uses one P_Key per process); every port's
    P_Keys (the default and its partitions) fit its table (``pkey_table_size``); the
    ports one host uses for a partition hold its P_Key at one index (``NCCL_IB_PKEY``
    is one index for all of a process's HCAs)."""
    ib = fab.spec.infiniband
    parts = ib.partitions
    members = partition_members(fab)
    held: dict[int, list[int]] = {}
    for i, mine in enumerate(members):
        for n, (kind, j) in mine.items():
            for k in held.get(n, []):
                if not parts[k].shared and not parts[i].shared:
                    what = "host" if kind == "hosts" else "GPU"
                    name = getattr(parts[i], kind)[j]
                    raise SpecError(Problem(
                        f"infiniband.partitions.{i}.{kind}.{j}", f"{what} {name!r}: its "
                        f"HCA port {fab.nodes.name[n]} is already in partitions.{k}; "
                        "allowed: one partition per host (or port), unless one of the "
                        "two is shared: true"))
            held.setdefault(n, []).append(i)
            if 1 + len(held[n]) > ib.pkey_table_size:
                name = getattr(parts[i], kind)[j]
                raise SpecError(Problem(
                    f"infiniband.partitions.{i}.{kind}.{j}", f"{name!r}: HCA port "
                    f"{fab.nodes.name[n]} would hold {1 + len(held[n])} P_Keys (the "
                    f"default and {len(held[n])} partitions); allowed: at most "
                    f"infiniband.pkey_table_size ({ib.pkey_table_size})"))
    tables = pkey_tables(fab)
    for i, mine in enumerate(members):
        seen: dict[int, tuple[int, int]] = {}
        for n in mine:
            idx = tables[n].index(parts[i].pkey)
            h = int(fab.nodes.host[n])
            if h in seen and seen[h][0] != idx:
                raise SpecError(Problem(
                    f"infiniband.partitions.{i}", f"host "
                    f"{fab.nodes.name[fab.host_node[h]]}'s ports "
                    f"{fab.nodes.name[seen[h][1]]} and {fab.nodes.name[n]} hold "
                    f"{parts[i].name}'s P_Key at indexes {seen[h][0]} and {idx}, and "
                    "NCCL_IB_PKEY is one index; allowed: the same other partitions on "
                    "every port a host uses for this one"))
            seen.setdefault(h, (idx, n))


def not_fat_tree(fab: Fabric) -> str:
    """Why OpenSM's ftree would refuse the fabric ('' when it is a fat-tree): end ports
    on one switch tier only, every switch link between adjacent tiers."""
    links = fab.links
    tier = fab.nodes.tier.astype(np.int64)
    access = links.kind == LinkKind.ACCESS
    leaf_tiers = np.unique(tier[links.b[access]])
    if len(leaf_tiers) > 1:
        return "end ports hang off more than one switch tier"
    net = links.kind > LinkKind.ACCESS
    gap = np.abs(tier[links.b[net]] - tier[links.a[net]])
    if np.any(gap != 1):
        return "a switch link joins tiers that are not adjacent"
    return ""


# ------------------------------------------------------------------ flow paths

_CACHE: dict[tuple[int, bytes], Lfts] = {}


def fabric_lfts(fab: Fabric, alive: np.ndarray | None = None) -> Lfts:
    """The tables of the spec's engine and LMC for ``fab`` with only the ``alive`` links
    (a fresh sweep: OpenSM recomputes after a change; the lab checks the kept-entry
    re-sweep against a real OpenSM). Cached per fabric and failure set."""
    ib = fab.spec.infiniband
    dead = np.flatnonzero(~alive) if alive is not None else np.zeros(0, dtype=np.int64)
    key = (id(fab), dead.tobytes())
    hit = _CACHE.get(key)
    if hit is not None and hit.subnet.fabric is fab:
        return hit
    sn = subnet(fab)
    if len(dead):
        sn = sn.without(dead)
    t = lfts(sn, ib.routing_engine, lmc=ib.lmc)
    if len(_CACHE) > 8:
        _CACHE.clear()
    _CACHE[key] = t
    return t


def lft_paths(fab: Fabric, src_nic: np.ndarray, dst_nic: np.ndarray, qp: np.ndarray,
              alive: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The switch path of every flow as the LFTs forward it: ``(ptr, nodes)``, flow ``i``
    through fabric nodes ``nodes[ptr[i]:ptr[i+1]]`` (its source port's switch ... the
    destination port's switch). The destination LID is that of the destination NIC's port
    in the source port's subnet (HCAs do not forward between planes), plus ``qp mod
    2^lmc`` (each QP of a connection on another LID, i.e. another path). Flows with no
    route (or not leaving a NIC) get an empty path."""
    t = fabric_lfts(fab, alive)
    sn = t.subnet
    S = sn.n_switches
    n = len(src_nic)
    ca_of = np.full(fab.n_nodes, -1, dtype=np.int64)
    ca_of[sn.ca_node] = np.arange(sn.n_ca_ports)
    ok = (src_nic >= 0) & (dst_nic >= 0)
    c = np.where(ok, ca_of[np.maximum(src_nic, 0)], -1)
    d0 = np.where(ok, ca_of[np.maximum(dst_nic, 0)], -1)
    ok &= (c >= 0) & (d0 >= 0)
    ok[ok] &= sn.ca_sw[c[ok]] >= 0
    # the destination NIC's port in the source's subnet
    d = d0.copy()
    comp_of = np.where(sn.ca_sw >= 0, sn.component[np.maximum(sn.ca_sw, 0)], -1)
    same = ok & (comp_of[np.maximum(d0, 0)] == comp_of[np.maximum(c, 0)])
    other = np.flatnonzero(ok & ~same)
    if len(other):
        hca = sn.ca_hca[d0[other]]
        # candidate ports of the same HCA: sorted by (hca, port)
        order = np.lexsort((sn.ca_portnum, sn.ca_hca))
        first = np.searchsorted(sn.ca_hca[order], hca)
        found = np.full(len(other), -1, dtype=np.int64)
        for k in range(int(sn.hca_nports.max(initial=1))):
            cand = order[np.minimum(first + k, len(order) - 1)]
            hit = (sn.ca_hca[cand] == hca) & (comp_of[cand] == comp_of[c[other]]) & \
                (found < 0)
            found[hit] = cand[hit]
        d[other] = found
    ok &= d >= 0
    lid = np.where(ok, t.ca_lid[np.maximum(d, 0)] + qp.astype(np.int64) % (1 << t.lmc), 0)
    cur = np.where(ok, sn.ca_sw[np.maximum(c, 0)], -1)
    steps = [cur.copy()]
    live = ok.copy()
    target = np.where(ok, sn.ca_sw[np.maximum(d, 0)], -1)
    for _ in range(S + 1):
        going = live & (cur != target)
        if not going.any():
            break
        port = np.full(n, NO_PATH, dtype=np.int64)
        port[going] = t.lft[cur[going], lid[going]]
        nxt = np.full(n, -1, dtype=np.int64)
        valid = going & (port != NO_PATH) & (port > 0)
        nxt[valid] = sn.peer[cur[valid], port[valid]]
        live &= ~going | (valid & (nxt >= 0) & (nxt < S))
        cur = np.where(going & live, nxt, cur)
        steps.append(np.where(going & live, cur, -1))
    live &= cur == target
    path = np.stack(steps, axis=1)  # (n, hops+1), -1 past the end
    path[~live] = -1
    length = (path >= 0).sum(axis=1)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=ptr[1:])
    nodes = sn.sw_node[path[path >= 0]]
    return ptr, nodes.astype(np.int64)
