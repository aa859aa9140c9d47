"""The compiled port-selection loop of the InfiniBand tables (see routing/infiniband.py):
OpenSM's ``ucast_mgr_process_tbl`` / ``osm_switch_recommend_path`` over numpy arrays,
compiled by numba (``cache=True``)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["select_ports"]

NO_PATH = 255
INF = 1 << 62


@njit(cache=True)
def select_ports(members, kinds, idx, peer, nports, hops, sw_lid, ca_lid, ca_sw,
                 ca_swport, lmc, S, lft, existing, use_existing):  # pragma: no cover - compiled
    """Fill ``lft[s, lid]`` for every switch ``s`` in ``members``.

    ``peer[s, p]``: far node of port ``p`` (``< S`` a switch, ``>= S`` an end node: the
    caller passes HCA ids offset by S, so both ports of one HCA are one node);
    ``hops[t, s, p]``: hops to switch ``t``; destinations in OpenSM's order
    (``kinds``: 0 a switch ``idx``, 1 an HCA port ``idx``). ``use_existing``: an entry
    of ``existing`` (the tables in the switches) that is still a live least-hop port is
    kept, as OpenSM does on a sweep that does not ignore the existing LFTs."""
    P = peer.shape[1]
    D = len(kinds)
    n_lids = 1 << lmc
    C = len(ca_lid)
    for m in range(len(members)):
        s = members[m]
        counts = np.zeros(P, dtype=np.int64)
        # per destination HCA port: the far nodes its LIDs already go to (OpenSM tracks
        # system and node GUIDs; here every node is its own system)
        rem_node = np.full((C, n_lids), -1, dtype=np.int64)
        rem_fwd = np.zeros((C, n_lids), dtype=np.int64)
        rem_cnt = np.zeros(C, dtype=np.int64)
        np_ = nports[s] + 1
        for off in range(n_lids):
            for k in range(D):
                kind = kinds[k]
                d = idx[k]
                if kind == 0:
                    if off > 0:
                        continue
                    lid = sw_lid[d]
                    if lid <= 0:
                        continue
                    if d == s:
                        lft[s, lid] = 0
                        continue
                    base = d
                else:
                    if ca_lid[d] <= 0:
                        continue
                    lid = ca_lid[d] + off
                    if ca_sw[d] < 0:
                        lft[s, lid] = NO_PATH
                        continue
                    if ca_sw[d] == s:
                        port = ca_swport[d]
                        lft[s, lid] = port
                        counts[port] += 1
                        node = peer[s, port]
                        _track(rem_node, rem_fwd, rem_cnt, d, node)
                        continue
                    base = ca_sw[d]
                start = 1
                if off > 0:
                    start = np.int64(lft[s, lid - 1]) + 1
                least = hops[base, s, 0]
                if least == NO_PATH:
                    lft[s, lid] = NO_PATH
                    continue
                if use_existing and lid < existing.shape[1]:
                    old = np.int64(existing[s, lid])
                    if 0 < old < np_ and peer[s, old] >= 0 and hops[base, s, old] == least:
                        lft[s, lid] = old
                        if kind == 1:
                            counts[old] += 1
                            _track(rem_node, rem_fwd, rem_cnt, d, peer[s, old])
                        continue
                best = 0
                found = False
                least_paths = INF
                best_other_sys = 0
                least_other_sys = INF
                least_fwd = INF
                for i in range(start, start + np_):
                    p = i % np_
                    if p == 0 or hops[base, s, p] != least or peer[s, p] < 0:
                        continue
                    cc = counts[p]
                    rg = -1
                    if lmc > 0 and kind == 1:
                        node = peer[s, p]
                        for j in range(rem_cnt[d]):
                            if rem_node[d, j] == node:
                                rg = j
                                break
                        if rg < 0 and cc < least_other_sys:
                            least_other_sys = cc
                            best_other_sys = p
                            least_fwd = 0
                    elif lmc > 0 and cc < least_other_sys:
                        least_other_sys = cc
                        best_other_sys = p
                        least_fwd = 0
                    if cc < least_paths:
                        found = True
                        best = p
                        least_paths = cc
                        if rg >= 0 and rem_fwd[d, rg] < least_fwd:
                            least_fwd = rem_fwd[d, rg]
                    elif rg >= 0 and cc == least_paths and rem_fwd[d, rg] < least_fwd:
                        least_fwd = rem_fwd[d, rg]
                        best = p
                if not found:
                    lft[s, lid] = NO_PATH
                    continue
                if lmc > 0 and best != 0 and best_other_sys != 0:
                    best = best_other_sys
                lft[s, lid] = best
                if kind == 1:
                    counts[best] += 1
                    _track(rem_node, rem_fwd, rem_cnt, d, peer[s, best])


@njit(cache=True)
def _track(rem_node, rem_fwd, rem_cnt, d, node):  # pragma: no cover - compiled
    """OpenSM's find_and_add_remote_sys: count one more LID of ``d`` sent to ``node``."""
    for j in range(rem_cnt[d]):
        if rem_node[d, j] == node:
            rem_fwd[d, j] += 1
            return
    if rem_cnt[d] < rem_node.shape[1]:
        j = rem_cnt[d]
        rem_node[d, j] = node
        rem_fwd[d, j] = 1
        rem_cnt[d] += 1


@njit(cache=True)
def updn_hops(peer, peer_port, nports, rank, ids, members, hops):  # pragma: no cover
    """OpenSM's updn_bfs_by_node from every switch ``t`` of ``members``: ``hops[t, s, p]``
    (filled in place, 255 = none) over the legal up/down turns; ``rank``: distance from
    the roots; ``ids``: node GUIDs (equal ranks: the larger GUID is up)."""
    S = peer.shape[0]
    queue = np.empty(S * 256 + 1, dtype=np.int64)
    direction = np.zeros(S, dtype=np.int64)
    visited = np.zeros(S, dtype=np.bool_)
    for m in range(len(members)):
        t = members[m]
        h = hops[t]
        h[t, 0] = 0
        visited[:] = False
        direction[t] = 0
        head = 0
        tail = 0
        queue[tail] = t
        tail += 1
        while head < tail:
            u = queue[head]
            head += 1
            visited[u] = False
            cur = direction[u]
            for p in range(1, nports[u] + 1):
                r = peer[u, p]
                if r < 0 or r >= S:
                    continue
                ru = rank[u]
                rr = rank[r]
                if ru == 0 and rr == 0:
                    nxt = 0
                elif ru < rr:
                    nxt = 1
                elif ru > rr or ids[u] > ids[r]:
                    nxt = 0
                else:
                    nxt = 1
                if cur == 1 and nxt == 0:
                    continue
                cmh = np.int64(h[u, 0])
                rp = peer_port[u, p]
                if cmh + 1 < h[r, rp]:
                    h[r, rp] = cmh + 1
                    if h[r, 0] > cmh + 1:
                        h[r, 0] = cmh + 1
                    if not visited[r]:
                        direction[r] = nxt
                        visited[r] = True
                        if tail >= len(queue):  # grow (never on a sane fabric)
                            bigger = np.empty(2 * len(queue), dtype=np.int64)
                            bigger[:tail] = queue[:tail]
                            queue = bigger
                        queue[tail] = r
                        tail += 1
