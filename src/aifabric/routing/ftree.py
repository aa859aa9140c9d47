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

The walk is a recursion over switches per destination (as OpenSM's); it is plain
Python: about a second per 10^5 table entries (``benchmarks/bench_infiniband.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
                 width: int, route: bool = True) -> FtreeResult:
    """OpenSM's ftree tables of one subnet: ``peer``/``peer_port`` of its ``m`` switches
    (local indices; ``peer >= m`` is HCA port ``peer - m``), the HCA ports ``ca_*`` (those
    with ``ca_sw >= 0`` are cabled to this subnet), LIDs, and the table width;
    ``route=False``: OpenSM's checks only (``lft`` empty when they pass)."""
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

    # ---- routing
    lft = np.full((m, width), NO_PATH, dtype=np.uint8)
    hops = np.full((m, width), NO_PATH, dtype=np.int64)
    r = _Router(sws, lft, hops)
    for s in leaves:
        sw = sws[s]
        routed = 0
        for g in sw.down:
            if g.to_switch:
                continue
            lid = g.remote_lid
            lft[s, lid] = g.ports[0].num
            hops[s, lid] = 1
            r.down_by_up(s, -1, lid, True, 1)
            routed += 1
        for _ in range(max_cn - routed):  # dummy targets: LID 0, counted, then cleared
            hops[s, 0] = 1
            r.down_by_up(s, -1, 0, True, 1)
            hops[:, 0] = NO_PATH
            lft[:, 0] = NO_PATH
    for s in sw_order:
        if rank[s] < 0:
            continue
        lid = sws[s].lid
        lft[s, lid] = 0
        hops[s, lid] = 0
        r.down_by_up(s, -1, lid, False, 0)
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


class _Router:
    """OpenSM's two recursions, on shared counters and per-switch hop tables."""

    def __init__(self, sws: list[_Sw], lft: np.ndarray, hops: np.ndarray) -> None:
        self.sws, self.lft, self.hops = sws, lft, hops

    def _index_cmp(self, a: _Group, b: _Group) -> int:
        ta, tb = self.sws[a.remote].tuple, self.sws[b.remote].tuple
        return (ta > tb) - (ta < tb)

    def _cmp_up(self, a: _Group, b: _Group) -> int:
        d = a.counter_up - b.counter_up
        if d:
            return 1 if d > 0 else -1
        return self._index_cmp(a, b)

    def _cmp_down(self, a: _Group, b: _Group) -> int:
        d = a.counter_down - b.counter_down
        if d:
            return 1 if d > 0 else -1
        if self.sws[a.remote].min_counter_down > self.sws[b.remote].min_counter_down:
            return 1
        return self._index_cmp(a, b)

    @staticmethod
    def _bubble(arr: list[_Group], cmp) -> None:
        swapped, i = True, 0
        while swapped:
            swapped = False
            for j in range(1, len(arr) - i):
                if cmp(arr[j], arr[j - 1]) < 0:
                    arr[j - 1], arr[j] = arr[j], arr[j - 1]
                    swapped = True
            i += 1

    def up_by_down(self, s: int, prev: int, lid: int, cur: int) -> bool:
        """fabric_route_upgoing_by_going_down: from ``s`` down every down group."""
        sw = self.sws[s]
        if not sw.down:
            return False
        if sw.counter_up_changed:
            self._bubble(sw.down, self._cmp_up)
            sw.counter_up_changed = False
        created = False
        prev_lid = self.sws[prev].lid if prev >= 0 else -1
        for g in sw.down:
            if not g.to_switch:
                created = True
                continue
            if prev >= 0 and g.remote_lid == prev_lid:
                continue
            if not g.ports:
                continue
            pmin = g.ports[0]
            for p in g.ports[1:]:
                if p.counter_up < pmin.counter_up:
                    pmin = p
            far = g.remote
            least = self.hops[far, lid]
            if least != NO_PATH and cur + 1 >= least:
                continue
            self.lft[far, lid] = pmin.remote_num
            self.hops[far, lid] = cur + 1
            routed = self.up_by_down(far, -1, lid, cur + 1)
            created |= routed
            if routed:
                pmin.counter_up += 1
                g.counter_up += 1
                sw.counter_up_changed = True
        if created:
            sw.down_idx = (sw.down_idx + 1) % len(sw.down)
        return created

    def down_by_up(self, s: int, prev: int, lid: int, main: bool, cur: int) -> bool:
        """fabric_route_downgoing_by_going_up (no reverse hops: no I/O nodes)."""
        created = self.up_by_down(s, prev, lid, cur)
        sw = self.sws[s]
        if sw.rank == 0:
            return created
        self._bubble(sw.up, self._cmp_down)
        lft, hops = self.lft, self.hops
        if main:
            gmin = sw.up[0]
            pmin = gmin.ports[0]
            for p in gmin.ports[1:]:
                if p.counter_down < pmin.counter_down:
                    pmin = p
            far = gmin.remote
            gmin.counter_down += 1
            pmin.counter_down += 1
            fsw = self.sws[far]
            if gmin.counter_down == fsw.min_counter_down + 1:
                fsw.min_counter_down = min((g.counter_down for g in fsw.down),
                                           default=1 << 30)
            if lft[far, lid] == NO_PATH or cur + 1 < hops[far, lid]:
                lft[far, lid] = pmin.remote_num
                hops[far, lid] = cur + 1
            created |= self.down_by_up(far, s, lid, main, cur + 1)
        for i in range(1 if main else 0, len(sw.up)):
            g = sw.up[i]
            far = g.remote
            if lft[far, lid] != NO_PATH and cur + 1 >= hops[far, lid]:
                continue
            if not g.ports:
                continue
            pmin = g.ports[0]
            for p in g.ports[1:]:
                if p.counter_down < pmin.counter_down:
                    pmin = p
            lft[far, lid] = pmin.remote_num
            hops[far, lid] = cur + 1
            created |= self.down_by_up(far, s, lid, False, cur + 1)
        return created
