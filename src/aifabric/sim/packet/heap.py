"""The event heap of the packet simulator's compiled core: rows ``(time_ps, seq, kind, a,
b)`` of ``HT`` ordered by (time, seq), ``G[HSIZE]`` of them in use; ``seq`` comes from
``G[SEQ]``, the tie-break counter shared with the Python event list, so events at equal
times run in the order they were scheduled."""

from __future__ import annotations

from numba import njit

from aifabric.sim.packet.layout import HSIZE, SEQ

__all__ = ["hpop", "hpush"]


@njit(cache=True)
def hpush(HT, G, t, kind, a, b):
    """Schedule event ``kind(a, b)`` at ``t``; its seq is the next tie-break number."""
    n = G[HSIZE]
    s = G[SEQ]
    G[SEQ] = s + 1
    i = n
    while i > 0:
        par = (i - 1) >> 1
        pt = HT[par, 0]
        if pt < t or (pt == t and HT[par, 1] < s):
            break
        HT[i, 0] = pt
        HT[i, 1] = HT[par, 1]
        HT[i, 2] = HT[par, 2]
        HT[i, 3] = HT[par, 3]
        HT[i, 4] = HT[par, 4]
        i = par
    HT[i, 0] = t
    HT[i, 1] = s
    HT[i, 2] = kind
    HT[i, 3] = a
    HT[i, 4] = b
    G[HSIZE] = n + 1


@njit(cache=True)
def hpop(HT, G):
    """Remove the head event (read it from row 0 first)."""
    n = G[HSIZE] - 1
    G[HSIZE] = n
    if n == 0:
        return
    t = HT[n, 0]
    s = HT[n, 1]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n:
            t1 = HT[c + 1, 0]
            t0 = HT[c, 0]
            if t1 < t0 or (t1 == t0 and HT[c + 1, 1] < HT[c, 1]):
                c += 1
        tc = HT[c, 0]
        if tc < t or (tc == t and HT[c, 1] < s):
            HT[i, 0] = tc
            HT[i, 1] = HT[c, 1]
            HT[i, 2] = HT[c, 2]
            HT[i, 3] = HT[c, 3]
            HT[i, 4] = HT[c, 4]
            i = c
        else:
            break
    HT[i, 0] = t
    HT[i, 1] = s
    HT[i, 2] = HT[n, 2]
    HT[i, 3] = HT[n, 3]
    HT[i, 4] = HT[n, 4]
