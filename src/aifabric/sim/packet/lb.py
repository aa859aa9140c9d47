"""The forwarding tables of per-packet load balancing (``packet.lb``): for every switch
and every destination NIC of a run, the ECMP group (the next-hop arcs) toward it and the
hops left from the switch, as arrays (CSR), built in numpy.

Two builders: :func:`fabric_groups` reads the Fabric's forwarding tables
(:class:`aifabric.routing.fib.Fib`: valley-free ECMP groups per switch and destination
class, the failed links removed), :func:`shortest_groups` takes every shortest path of a
hand-built network (:class:`aifabric.sim.packet.sim.Topology`). The compiled loop picks a
member per packet (:func:`aifabric.sim.packet.kernel.lb_pick`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LbGroups", "fabric_groups", "shortest_groups"]


@dataclass
class LbGroups:
    """ECMP groups toward destinations: ``node_row[n]`` the row of switch ``n`` (-1: not
    a switch); ``dests`` the destination nodes (columns); ``group[row, d]`` the group of
    that switch toward ``dests[d]`` (-1: none) and ``hops[row, d]`` the hops from the
    switch to it; the members of group ``g`` are ``arcs[ptr[g]:ptr[g + 1]]``."""

    node_row: np.ndarray
    dests: np.ndarray
    group: np.ndarray
    hops: np.ndarray
    ptr: np.ndarray
    arcs: np.ndarray

    @property
    def used_arcs(self) -> np.ndarray:
        return np.unique(self.arcs)


def shortest_groups(arc_src: Sequence[int], arc_dst: Sequence[int], is_host: Sequence[bool],
                    dests: Sequence[int]) -> LbGroups:
    """Every shortest path (hops, through switches only) toward each node of ``dests``:
    the group of switch ``s`` toward ``d`` is its arcs to a switch one hop closer, or to
    ``d`` itself. Destinations attached to the same switches share their groups beyond
    those switches (as a switch's ECMP group object is shared by every prefix with the
    same next hops, and as :func:`fabric_groups` shares them per destination class): one
    breadth-first pass per set of attachment switches, vectorised over arcs; the
    attachment switches get a group of their arcs to the destination, per destination."""
    src = np.asarray(arc_src, dtype=np.int64)
    dst = np.asarray(arc_dst, dtype=np.int64)
    host = np.asarray(is_host, dtype=bool)
    n = len(host)
    dests = np.unique(np.asarray(dests, dtype=np.int64))
    sw = np.flatnonzero(~host)
    row = np.full(n, -1, dtype=np.int64)
    row[sw] = np.arange(len(sw))
    D = len(dests)
    group = np.full((len(sw), D), -1, dtype=np.int64)
    hops = np.full((len(sw), D), -1, dtype=np.int64)
    ptr = [0]
    members: list[np.ndarray] = []
    into_sw = ~host[dst]
    sw_src = ~host[src]
    # the attachment of each destination: the switches with an arc into it
    att = sw_src & np.isin(dst, dests)
    a_arc = np.flatnonzero(att)
    a_arc = a_arc[np.lexsort((src[a_arc], dst[a_arc]))]
    col = np.searchsorted(dests, dst[a_arc])
    per = np.bincount(col, minlength=D)
    a_ptr = np.concatenate([[0], np.cumsum(per)])
    sig: dict[tuple[int, ...], list[int]] = {}
    a_src = src[a_arc]
    for j in range(D):  # (a tuple per destination: cheap next to the passes it saves)
        sig.setdefault(tuple(a_src[a_ptr[j]:a_ptr[j + 1]].tolist()), []).append(j)
    for first, cols in sig.items():
        cols_a = np.asarray(cols, dtype=np.int64)
        dist = np.full(n, -1, dtype=np.int64)
        frontier = np.unique(np.asarray(first, dtype=np.int64))
        dist[frontier] = 1
        k = 1
        while len(frontier):
            k += 1
            a = np.isin(dst, frontier) & sw_src & (dist[src] < 0)
            nxt = np.unique(src[a])
            dist[nxt] = k
            frontier = nxt
        # beyond the attachment: groups shared by the class
        ok = (dist[src] > 1) & sw_src & (dist[dst] == dist[src] - 1) & into_sw
        s_of = src[ok]
        order = np.argsort(s_of, kind="stable")
        arcs = np.flatnonzero(ok)[order]
        s_of = s_of[order]
        us, cnt = np.unique(s_of, return_counts=True)
        g0 = len(ptr) - 1
        group[np.ix_(row[us], cols_a)] = (g0 + np.arange(len(us)))[:, None]
        hops[np.ix_(row[us], cols_a)] = dist[us][:, None]
        ptr.extend((ptr[-1] + np.cumsum(cnt)).tolist())
        members.append(arcs)
        # the attachment switches: their arcs into each destination, per destination
        for s in sorted(set(first)):
            at = np.asarray([i for i, x in enumerate(first) if x == s], dtype=np.int64)
            arc_s = a_arc[(a_ptr[cols_a][:, None] + at[None, :]).ravel()]
            g1 = len(ptr) - 1
            group[row[s], cols_a] = g1 + np.arange(len(cols))
            hops[row[s], cols_a] = 1
            ptr.extend((ptr[-1] + len(at) * np.arange(1, len(cols) + 1)).tolist())
            members.append(arc_s)
    return LbGroups(row, dests, group, hops, np.asarray(ptr, dtype=np.int64),
                    np.concatenate(members) if members else np.zeros(0, dtype=np.int64))


def fabric_groups(f: object, dests: np.ndarray, alive: np.ndarray | None = None) -> LbGroups:
    """The Fabric's ECMP groups toward the NIC port nodes ``dests``
    (:class:`~aifabric.routing.fib.Fib` with the live links ``alive``): one group per
    (switch, destination class) for the switches that forward toward the class, and at a
    ToR of the class the access arc down to the destination's port; hops left = the
    Fib's valley-free distance to a ToR of the class + 1."""
    from aifabric.routing.fib import INF, Fib

    fib = Fib(f, alive)  # type: ignore[arg-type]
    n = f.n_nodes  # type: ignore[attr-defined]
    dests = np.unique(np.asarray(dests, dtype=np.int64))
    D = len(dests)
    sw = fib.sw
    S = len(sw)
    cls = fib.nic_class[fib.nic_no(dests)] if D else np.zeros(0, dtype=np.int64)
    group = np.full((S, D), -1, dtype=np.int64)
    hops = np.full((S, D), -1, dtype=np.int64)
    # transit: a group per (switch, class) in use
    ucls = np.unique(cls[cls >= 0])
    r_s, c_i = np.meshgrid(np.arange(S), np.arange(len(ucls)), indexing="ij")
    r_s, c_i = r_s.ravel(), c_i.ravel()
    c = ucls[c_i]
    pick = np.flatnonzero((fib.dist[r_s, c] < INF) & ~fib.delivers(sw[r_s], c)) \
        if len(r_s) else np.zeros(0, dtype=np.int64)
    start, count, arcs = fib.members(sw[r_s[pick]], c[pick])
    keep = count > 0
    pick, start, count = pick[keep], start[keep], count[keep]
    ptr = np.zeros(len(pick) + 1, dtype=np.int64)
    np.cumsum(count, out=ptr[1:])
    rep = np.repeat(np.arange(len(pick)), count)
    pos = np.arange(int(count.sum())) - np.repeat(ptr[:-1], count) + start[rep]
    members = arcs[pos]
    gid_sc = np.full((S, len(ucls)), -1, dtype=np.int64)
    gid_sc[r_s[pick], c_i[pick]] = np.arange(len(pick))
    hop_sc = np.where(fib.dist[:, ucls] < INF, fib.dist[:, ucls].astype(np.int64) + 1, -1)
    col = np.searchsorted(ucls, np.maximum(cls, 0))
    okd = cls >= 0
    group[:, okd] = gid_sc[:, col[okd]]
    hops[:, okd] = np.where(group[:, okd] >= 0, hop_sc[:, col[okd]], -1)
    # delivering ToRs: the access arc down to the destination's port
    G0 = len(pick)
    hs = fib.hs
    nic = fib.nic_no(dests)
    extra_r, extra_d, extra_a = [], [], []
    ports = hs.nic_port.reshape(-1, hs.P)
    for k in range(hs.P):  # the NIC's ports (1-2): not a loop over destinations
        port = ports[nic, k]
        acc = hs.access_link[port]
        ok = (acc >= 0) & fib.alive[np.maximum(acc, 0)]  # (either port of the NIC)
        tor = hs.access_tor[port]
        extra_r.append(fib.sw_row[tor[ok]])
        extra_d.append(np.flatnonzero(ok))
        extra_a.append(2 * acc[ok] + 1)
    er, ed, ea = (np.concatenate(x) for x in (extra_r, extra_d, extra_a))
    group[er, ed] = G0 + np.arange(len(er))
    hops[er, ed] = 1
    ptr = np.concatenate([ptr, ptr[-1] + np.arange(1, len(er) + 1)])
    node_row = np.full(n, -1, dtype=np.int64)
    node_row[sw] = np.arange(S)
    return LbGroups(node_row, dests, group, hops, ptr,
                    np.concatenate([members, ea]).astype(np.int64))
