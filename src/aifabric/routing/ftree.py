"""OpenSM's fat-tree routing engine (``routing_engine ftree``), as OpenSM 3.3 computes it.

The engine is OpenSM's own algorithm (``opensm/osm_ucast_ftree.c``), followed step by step
so that the twin's tables equal those the real OpenSM writes (the lab checks it on
``ibsim``, docs/infiniband.md):

* **ranks**: the switches cabled to HCAs are ranked 0 and every other switch by its
  breadth-first distance from them; the ranks are reversed (the farthest switches become
  the roots, rank 0) and then recomputed as the distance from those roots. The leaf rank
  is the largest rank; every switch with a compute node must have it;
* **ports**: each switch's ports are grouped by the node at their far end (parallel
  cables to one switch are one group), up (to a lower rank), down (to a higher rank or an
  HCA port) or sideways, each group's ports in port-number order;
* **indexing**: from the first leaf switch in OpenSM's switch-table order (node GUID in
  network byte order), a breadth-first walk gives every switch a tuple
  ``rank.i1.i2...``; each switch's up and down groups are sorted by the far switch's
  tuple, the leaves by theirs;
* **checks** (OpenSM falls back to minhop when one fails): LMC 0, at least two switches
  and two HCAs, ranks 2..8, every compute node on a leaf, at least two leaves, and a pure
  fat-tree: on each rank the same number of up groups (and down groups above the leaves)
  and the same number of ports per group as the first switch of that rank;
* **routing**: for each leaf in index order and each of its HCA ports (a dummy target
  for each compute node a leaf lacks against the fullest leaf), the destination goes up
  the least loaded up group (fewest down-going routes, then the lowest index) and its
  least loaded port, and from each switch reached down every other down group through
  its least loaded port (fewest up-going routes); then each switch's own LID the same
  way without counting.

After a failure OpenSM runs the engine again; if the fabric is no longer a pure fat-tree
the engine fails and OpenSM's default (minhop) routes it, keeping every existing entry
that is still a live least-hop port: :func:`aifabric.routing.infiniband.lfts` does the
same.

The walk is a recursion over switches per destination (as OpenSM's), compiled with
numba on an explicit stack (:mod:`._ftree_kernel`); the ranks, groups and indexing
before it are Python over the switches' ports (``benchmarks/bench_infiniband.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FtreeResult", "ftree_tables"]

NO_PATH = 255
TUPLE_LEN = 8
UNSET = 0xFF
MIN_RANK, MAX_RANK = 2, 8


@dataclass(eq=False)
class _Port:
    num: int
    remote_num: int
    counter_up: int = 0
    counter_down: int = 0


@dataclass(eq=False)
class _Group:
    owner: int
    remote: int  # a switch (local index) or -1 - HCA port index
    remote_lid: int
    ports: list[_Port] = field(default_factory=list)
    counter_up: int = 0
    counter_down: int = 0

    @property
    def to_switch(self) -> bool:
        return self.remote >= 0


@dataclass(eq=False)
class _Sw:
    lid: int
    rank: int = -1
    tuple: tuple[int, ...] = (UNSET,) * TUPLE_LEN
    is_leaf: bool = False
    up: list[_Group] = field(default_factory=list)
    down: list[_Group] = field(default_factory=list)
    side: list[_Group] = field(default_factory=list)
    down_idx: int = 0
    min_counter_down: int = 0
    counter_up_changed: bool = False


@dataclass(eq=False)
class FtreeResult:
    """The outcome on one subnet: ``lft`` (m, lids) when OpenSM's ftree routes it, else
    ``why`` says which of its checks failed (OpenSM then falls back to minhop)."""

    lft: np.ndarray | None
    why: str = ""
    ranks: np.ndarray | None = None
    leaves: list[int] = field(default_factory=list)


def ftree_tables(peer: np.ndarray, peer_port: np.ndarray, nports: np.ndarray,
                 sw_guid: np.ndarray, sw_lid: np.ndarray, ca_sw: np.ndarray,
                 ca_swport: np.ndarray, ca_lid: np.ndarray, ca_hca: np.ndarray,
                 hca_guid: np.ndarray, ca_portnum: np.ndarray, lmc: int,
                 width: int, route: bool = True, router: Any = None) -> FtreeResult:
    """OpenSM's ftree tables of one subnet: ``peer``/``peer_port`` of its ``m`` switches
    (local indices; ``peer >= m`` is HCA port ``peer - m``), the HCA ports ``ca_*`` (those
    with ``ca_sw >= 0`` are cabled to this subnet), LIDs, and the table width;
    ``route=False``: OpenSM's checks only (``lft`` empty when they pass). ``router``:
    another implementation of the routing walk, same arguments as :func:`_route` (the
    tests pass the plain-Python one the compiled walk replaced)."""
    m = len(nports)
    if lmc > 0:
        return FtreeResult(None, "LMC > 0 is not supported by fat-tree routing")
    if m < 2:
        return FtreeResult(None, f"the subnet has {m} switch(es)")
    cabled = np.flatnonzero(ca_sw >= 0)
    hcas = np.unique(ca_hca[cabled])
    if len(hcas) < 2:
        return FtreeResult(None, f"the subnet has {len(hcas)} HCA(s)")
    sw_order = [int(s) for s in np.argsort(np.asarray(sw_guid, np.uint64).byteswap(),
                                           kind="stable")]
    sws = [_Sw(lid=int(sw_lid[s])) for s in range(m)]

    def links(s: int) -> list[int]:
        return [p for p in range(1, int(nports[s]) + 1) if 0 <= peer[s, p] < m]

    # ---- ranks: from the HCAs' switches, reversed, then from the roots
    hca_order = hcas[np.argsort(np.asarray(hca_guid[hcas], np.uint64).byteswap(),
                                kind="stable")]
    queue: list[int] = []
    dist = [-1] * m
    for h in hca_order:
        for c in sorted(cabled[ca_hca[cabled] == h], key=lambda c: ca_portnum[c]):
            s = int(ca_sw[c])
            if dist[s] < 0:
                dist[s] = 0
                queue.append(s)
    _bfs(queue, dist, links, peer)
    top = max(dist)
    rank0 = [s for s in sw_order if dist[s] >= 0 and top - dist[s] == 0]
    rank = [-1] * m
    for s in rank0:
        rank[s] = 0
    max_rank = _bfs(list(rank0), rank, links, peer)
    ranked = [s for s in range(m) if rank[s] >= 0]
    if max_rank == 0 and len(ranked) > 1:
        return FtreeResult(None, "more than one root in a fabric of rank 0")
    for s in ranked:
        sws[s].rank = rank[s]

    # ---- ports: groups by far node, up / down / sideways
    for s in sw_order:
        if rank[s] < 0:
            continue
        sw = sws[s]
        for p in range(1, int(nports[s]) + 1):
            far = int(peer[s, p])
            if far < 0 or far == s:
                continue
            if far >= m:
                c = far - m
                groups, remote, rlid = sw.down, -1 - c, int(ca_lid[c])
            else:
                if rank[far] < 0:
                    continue
                remote, rlid = far, int(sw_lid[far])
                groups = sw.up if rank[s] > rank[far] else \
                    sw.side if rank[s] == rank[far] else sw.down
            g = next((g for g in groups if g.remote_lid == rlid), None)
            if g is None:
                g = _Group(owner=s, remote=remote, remote_lid=rlid)
                groups.append(g)
            if all(x.num != p for x in g.ports):
                g.ports.append(_Port(p, int(peer_port[s, p])))
    leaf_rank = max_rank
    if not MIN_RANK <= leaf_rank + 1 <= MAX_RANK:
        return FtreeResult(None, f"the fabric's rank is {leaf_rank + 1}; allowed: "
                           f"{MIN_RANK}..{MAX_RANK}")
    for c in cabled:
        s = int(ca_sw[c])
        if rank[s] < 0:
            continue
        sws[s].is_leaf = True
        if rank[s] != leaf_rank:
            return FtreeResult(None, f"a compute node hangs off a switch of rank "
                               f"{rank[s]}, while the leaf rank is {leaf_rank}")

    # ---- indexing: breadth-first from the first leaf in switch-table order
    by_tuple: dict[tuple[int, ...], int] = {}
    first = next(s for s in sw_order if sws[s].is_leaf)
    t = [UNSET] * TUPLE_LEN
    t[0] = sws[first].rank
    for i in range(1, leaf_rank + 1):
        t[i] = 0
    sws[first].tuple = tuple(t)
    by_tuple[sws[first].tuple] = first

    def new_tuple(frm: tuple[int, ...], down: bool) -> tuple[int, ...]:
        tmp = list(frm)
        if down:
            tmp[0] += 1
            var = frm[0] + 1
        else:
            tmp[0] -= 1
            var = frm[0]
        for i in range(UNSET):
            tmp[var] = i
            if tuple(tmp) not in by_tuple:
                return tuple(tmp)
        raise ValueError("more than 255 ports in one direction")

    def key(g: _Group) -> tuple[int, ...]:
        return sws[g.remote].tuple

    bfs = [first]
    while bfs:
        s = bfs.pop(0)
        sw = sws[s]
        if sw.rank < leaf_rank:
            for g in sw.down:
                if not g.to_switch or sws[g.remote].tuple[0] != UNSET:
                    continue
                sws[g.remote].tuple = new_tuple(sw.tuple, True)
                by_tuple[sws[g.remote].tuple] = g.remote
                bfs.append(g.remote)
            sw.down.sort(key=key)
        if sw.rank != 0:
            for g in sw.up:
                if sws[g.remote].tuple[0] != UNSET:
                    continue
                sws[g.remote].tuple = new_tuple(sw.tuple, False)
                by_tuple[sws[g.remote].tuple] = g.remote
                bfs.append(g.remote)
            sw.up.sort(key=key)

    at_leaf = sorted((s for s in ranked if rank[s] == leaf_rank), key=lambda s: sws[s].tuple)
    real = [i for i, s in enumerate(at_leaf) if sws[s].is_leaf]
    if not real or real[0] >= real[-1]:
        return FtreeResult(None, "fewer than two leaf switches")
    leaves = at_leaf[real[0]:real[-1] + 1]
    max_cn = max(sum(1 for g in sws[s].down if not g.to_switch) for s in leaves)

    why = _validate(sws, sw_order, leaf_rank)
    if why:
        return FtreeResult(None, why)
    if not route:
        return FtreeResult(np.zeros((0, 0), dtype=np.uint8), "", np.asarray(rank), leaves)

    # ---- routing (compiled: routing/_ftree_kernel.py)
    lft = (router or _route)(sws, m, width, leaves, max_cn,
                             [s for s in sw_order if rank[s] >= 0])
    return FtreeResult(lft, "", np.asarray(rank), leaves)


def _bfs(queue: list[int], dist: list[int], links, peer) -> int:
    top = 0
    while queue:
        s = queue.pop(0)
        for p in links(s):
            far = int(peer[s, p])
            if dist[far] < 0 or dist[far] > dist[s] + 1:
                dist[far] = dist[s] + 1
                top = dist[far]
                queue.append(far)
    return top


def _validate(sws: list[_Sw], sw_order: list[int], leaf_rank: int) -> str:
    """OpenSM's fabric_validate_topology: every switch of a rank like the first one."""
    ref: dict[int, _Sw] = {}
    for s in sw_order:
        sw = sws[s]
        if sw.rank < 0:
            continue
        r = ref.setdefault(sw.rank, sw)
        if r is sw:
            continue
        if len(r.up) != len(sw.up):
            return (f"switches of rank {sw.rank} differ in their up-going groups "
                    f"({len(r.up)} and {len(sw.up)}): not a pure fat-tree")
        if sw.rank != leaf_rank and len(r.down) != len(sw.down):
            return (f"switches of rank {sw.rank} differ in their down-going groups "
                    f"({len(r.down)} and {len(sw.down)}): not a pure fat-tree")
        if r.up:
            for g in sw.up:
                if len(g.ports) != len(r.up[0].ports):
                    return (f"switches of rank {sw.rank} differ in the cables of an "
                            "up-going group: not a pure fat-tree")
        if r.down and sw.rank != leaf_rank:
            for _ in sw.down:  # OpenSM compares the first group each time
                if len(sw.down[0].ports) != len(r.down[0].ports):
                    return (f"switches of rank {sw.rank} differ in the cables of a "
                            "down-going group: not a pure fat-tree")
    return ""


def _route(sws: list[_Sw], m: int, width: int, leaves: list[int], max_cn: int,
           own: list[int]) -> np.ndarray:
    """The groups and ports as flat arrays (module doc of :mod:`._ftree_kernel`), then
    OpenSM's routing walk, compiled."""
    from aifabric.routing._ftree_kernel import route_ftree

    order = {t: i for i, t in enumerate(sorted({sw.tuple for sw in sws}))}
    groups: list[_Group] = []
    d_ptr = np.zeros(m + 1, dtype=np.int64)
    u_ptr = np.zeros(m + 1, dtype=np.int64)
    d_list: list[int] = []
    u_list: list[int] = []
    for s, sw in enumerate(sws):
        for g in sw.down:
            d_list.append(len(groups))
            groups.append(g)
        d_ptr[s + 1] = len(d_list)
        for g in sw.up:
            u_list.append(len(groups))
            groups.append(g)
        u_ptr[s + 1] = len(u_list)
    G = len(groups)
    g_remote = np.array([g.remote if g.to_switch else -1 for g in groups], np.int64)
    g_rlid = np.array([g.remote_lid for g in groups], np.int64)
    # the index comparison: the far switch's tuple (an HCA group is never compared)
    g_key = np.array([order[sws[g.remote].tuple] if -m <= g.remote < m else -1
                      for g in groups], np.int64)
    g_pptr = np.zeros(G + 1, dtype=np.int64)
    g_pptr[1:] = np.cumsum([len(g.ports) for g in groups])
    p_num = np.array([p.num for g in groups for p in g.ports], np.int64)
    p_rnum = np.array([p.remote_num for g in groups for p in g.ports], np.int64)
    lft = np.full((m, width), NO_PATH, dtype=np.uint8)
    route_ftree(np.asarray(leaves, np.int64), max_cn, np.asarray(own, np.int64),
                g_remote, g_rlid, g_key, g_pptr, p_num, p_rnum, d_ptr,
                np.asarray(d_list, np.int64), u_ptr, np.asarray(u_list, np.int64),
                np.array([sw.rank for sw in sws], np.int64),
                np.array([sw.lid for sw in sws], np.int64), lft)
    return lft
