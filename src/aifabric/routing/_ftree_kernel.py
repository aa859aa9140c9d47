"""The compiled routing walk of OpenSM's ftree engine (see routing/ftree.py): OpenSM's
``fabric_route_upgoing_by_going_down`` / ``fabric_route_downgoing_by_going_up`` and
their bubble sorts, over flat arrays, compiled by numba (``cache=True``).

The layout (every group and port of the subnet numbered once, in the order
:func:`aifabric.routing.ftree.ftree_tables` built them):

* group ``g``: ``g_remote[g]`` the far switch (local index; ``-1`` an HCA port),
  ``g_rlid[g]`` its LID, ``g_key[g]`` the rank of the far switch's tuple among all
  tuples (the index comparison), ``g_cup``/``g_cdown`` its counters, its ports
  ``g_pptr[g]..g_pptr[g+1]`` in port-number order;
* port ``q``: ``p_num[q]`` its number, ``p_rnum[q]`` the number at the far end,
  ``p_cup``/``p_cdown`` its counters;
* switch ``s``: its down groups ``d_list[d_ptr[s]:d_ptr[s+1]]`` and up groups
  ``u_list[u_ptr[s]:u_ptr[s+1]]`` in their current order (OpenSM's bubble sorts reorder
  them in place), ``rank``, ``lid``,
  ``min_cdown``, ``up_changed``.

The two recursions run on an explicit stack of frames (``mode`` 0: up-going by going
down, 1: down-going by going up), at most twice the fabric's rank deep.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["route_ftree"]

NO_PATH = 255


@njit(cache=True)
def _cmp_up(a, b, g_cup, g_key):  # pragma: no cover - compiled
    d = g_cup[a] - g_cup[b]
    if d != 0:
        return 1 if d > 0 else -1
    ka, kb = g_key[a], g_key[b]
    return (ka > kb) - (ka < kb)


@njit(cache=True)
def _cmp_down(a, b, g_cdown, g_key, g_remote, min_cdown):  # pragma: no cover - compiled
    d = g_cdown[a] - g_cdown[b]
    if d != 0:
        return 1 if d > 0 else -1
    if min_cdown[g_remote[a]] > min_cdown[g_remote[b]]:
        return 1
    ka, kb = g_key[a], g_key[b]
    return (ka > kb) - (ka < kb)


@njit(cache=True)
def _bubble_up(lst, lo, hi, g_cup, g_key):  # pragma: no cover - compiled
    swapped = True
    i = 0
    while swapped:
        swapped = False
        for j in range(lo + 1, hi - i):
            if _cmp_up(lst[j], lst[j - 1], g_cup, g_key) < 0:
                t = lst[j - 1]
                lst[j - 1] = lst[j]
                lst[j] = t
                swapped = True
        i += 1


@njit(cache=True)
def _bubble_down(lst, lo, hi, g_cdown, g_key, g_remote, min_cdown):  # pragma: no cover
    swapped = True
    i = 0
    while swapped:
        swapped = False
        for j in range(lo + 1, hi - i):
            if _cmp_down(lst[j], lst[j - 1], g_cdown, g_key, g_remote, min_cdown) < 0:
                t = lst[j - 1]
                lst[j - 1] = lst[j]
                lst[j] = t
                swapped = True
        i += 1


DEPTH = 64  # frames: twice the deepest fabric (rank 8) with room to spare


@njit(cache=True)
def _walk(s0, lid, main0, cur0, st):  # pragma: no cover - compiled
    """``fabric_route_downgoing_by_going_up(s0, NULL, lid, main0, cur0)`` and the
    recursions under it, on an explicit stack (numba cannot cache a recursive function).
    Frame phases, mode 0 (up-going by going down): 0 entry, 1 the loop over the down
    groups, 2 back from a child; mode 1 (down-going by going up): 0 entry, 1 back from
    the mode-0 call on itself, 2 back from the main child, 3 the loop over the other up
    groups, 4 back from one of them."""
    (g_remote, g_rlid, g_key, g_cup, g_cdown, g_pptr, p_rnum, p_cup, p_cdown,
     d_ptr, d_list, u_ptr, u_list, rank, sw_lid, min_cdown, up_changed, lft, hops) = st
    f_mode = np.zeros(DEPTH, np.int64)
    f_s = np.zeros(DEPTH, np.int64)
    f_prev = np.zeros(DEPTH, np.int64)
    f_main = np.zeros(DEPTH, np.bool_)
    f_cur = np.zeros(DEPTH, np.int64)
    f_phase = np.zeros(DEPTH, np.int64)
    f_i = np.zeros(DEPTH, np.int64)
    f_created = np.zeros(DEPTH, np.bool_)
    f_g = np.zeros(DEPTH, np.int64)
    f_pmin = np.zeros(DEPTH, np.int64)
    top = 0
    f_mode[0], f_s[0], f_prev[0], f_main[0], f_cur[0], f_phase[0] = 1, s0, -1, main0, cur0, 0
    ret = False
    while top >= 0:
        s = f_s[top]
        cur = f_cur[top]
        ph = f_phase[top]
        if f_mode[top] == 0:
            lo, hi = d_ptr[s], d_ptr[s + 1]
            if ph == 0:
                if lo == hi:
                    ret = False
                    top -= 1
                    continue
                if up_changed[s]:
                    _bubble_up(d_list, lo, hi, g_cup, g_key)
                    up_changed[s] = False
                f_created[top] = False
                f_i[top] = lo
                f_phase[top] = 1
                continue
            if ph == 2:
                if ret:
                    f_created[top] = True
                    p_cup[f_pmin[top]] += 1
                    g_cup[f_g[top]] += 1
                    up_changed[s] = True
                f_i[top] += 1
                f_phase[top] = 1
            # phase 1: the loop over the down groups from f_i
            prev = f_prev[top]
            prev_lid = sw_lid[prev] if prev >= 0 else -1
            i = f_i[top]
            pushed = False
            while i < hi:
                g = d_list[i]
                if g_remote[g] < 0:
                    f_created[top] = True
                    i += 1
                    continue
                if prev >= 0 and g_rlid[g] == prev_lid:
                    i += 1
                    continue
                q0, q1 = g_pptr[g], g_pptr[g + 1]
                if q0 == q1:
                    i += 1
                    continue
                pmin = q0
                for q in range(q0 + 1, q1):
                    if p_cup[q] < p_cup[pmin]:
                        pmin = q
                far = g_remote[g]
                least = hops[far, lid]
                if least != NO_PATH and cur + 1 >= least:
                    i += 1
                    continue
                lft[far, lid] = p_rnum[pmin]
                hops[far, lid] = cur + 1
                f_i[top], f_g[top], f_pmin[top], f_phase[top] = i, g, pmin, 2
                top += 1
                f_mode[top], f_s[top], f_prev[top], f_main[top] = 0, far, -1, False
                f_cur[top], f_phase[top] = cur + 1, 0
                pushed = True
                break
            if not pushed:
                ret = f_created[top]
                top -= 1
            continue
        # mode 1
        lo, hi = u_ptr[s], u_ptr[s + 1]
        if ph == 0:
            f_phase[top] = 1
            top += 1
            f_mode[top], f_s[top], f_prev[top], f_main[top] = 0, s, f_prev[top - 1], False
            f_cur[top], f_phase[top] = cur, 0
            continue
        if ph == 1:
            f_created[top] = ret
            if rank[s] == 0:
                top -= 1
                continue
            _bubble_down(u_list, lo, hi, g_cdown, g_key, g_remote, min_cdown)
            if f_main[top]:
                gmin = u_list[lo]
                q0, q1 = g_pptr[gmin], g_pptr[gmin + 1]
                pmin = q0
                for q in range(q0 + 1, q1):
                    if p_cdown[q] < p_cdown[pmin]:
                        pmin = q
                far = g_remote[gmin]
                g_cdown[gmin] += 1
                p_cdown[pmin] += 1
                if g_cdown[gmin] == min_cdown[far] + 1:
                    best = 1 << 30
                    for k in range(d_ptr[far], d_ptr[far + 1]):
                        c = g_cdown[d_list[k]]
                        if c < best:
                            best = c
                    min_cdown[far] = best
                if lft[far, lid] == NO_PATH or cur + 1 < hops[far, lid]:
                    lft[far, lid] = p_rnum[pmin]
                    hops[far, lid] = cur + 1
                f_phase[top] = 2
                top += 1
                f_mode[top], f_s[top], f_prev[top], f_main[top] = 1, far, s, True
                f_cur[top], f_phase[top] = cur + 1, 0
                continue
            f_i[top] = lo
            f_phase[top] = 3
        elif ph == 2:
            f_created[top] = f_created[top] or ret
            f_i[top] = lo + 1
            f_phase[top] = 3
        elif ph == 4:
            f_created[top] = f_created[top] or ret
            f_i[top] += 1
            f_phase[top] = 3
        # phase 3: the other up groups from f_i
        i = f_i[top]
        pushed = False
        while i < hi:
            g = u_list[i]
            far = g_remote[g]
            if lft[far, lid] != NO_PATH and cur + 1 >= hops[far, lid]:
                i += 1
                continue
            q0, q1 = g_pptr[g], g_pptr[g + 1]
            if q0 == q1:
                i += 1
                continue
            pmin = q0
            for q in range(q0 + 1, q1):
                if p_cdown[q] < p_cdown[pmin]:
                    pmin = q
            lft[far, lid] = p_rnum[pmin]
            hops[far, lid] = cur + 1
            f_i[top], f_phase[top] = i, 4
            top += 1
            f_mode[top], f_s[top], f_prev[top], f_main[top] = 1, far, s, False
            f_cur[top], f_phase[top] = cur + 1, 0
            pushed = True
            break
        if not pushed:
            ret = f_created[top]
            top -= 1
    return ret


@njit(cache=True)
def route_ftree(leaves, max_cn, own, g_remote, g_rlid, g_key, g_pptr, p_num, p_rnum,
                d_ptr, d_list, u_ptr, u_list, rank, sw_lid, lft):  # pragma: no cover
    """OpenSM's ftree routing of one subnet into ``lft`` (m, width; filled with 255):
    for each leaf in index order its HCA ports (in its down groups' order), a dummy
    destination for each compute node it lacks against the fullest leaf (``max_cn``),
    then every switch's own LID (``own``: switches in switch-table order), uncounted."""
    m, width = lft.shape
    G = len(g_remote)
    g_cup = np.zeros(G, dtype=np.int64)
    g_cdown = np.zeros(G, dtype=np.int64)
    Q = len(p_rnum)
    p_cup = np.zeros(Q, dtype=np.int64)
    p_cdown = np.zeros(Q, dtype=np.int64)
    min_cdown = np.zeros(m, dtype=np.int64)
    up_changed = np.zeros(m, dtype=np.bool_)
    hops = np.full((m, width), NO_PATH, dtype=np.int64)
    st = (g_remote, g_rlid, g_key, g_cup, g_cdown, g_pptr, p_rnum, p_cup, p_cdown,
          d_ptr, d_list, u_ptr, u_list, rank, sw_lid, min_cdown, up_changed, lft, hops)
    for li in range(len(leaves)):
        s = leaves[li]
        routed = 0
        for i in range(d_ptr[s], d_ptr[s + 1]):
            g = d_list[i]
            if g_remote[g] >= 0:
                continue
            lid = g_rlid[g]
            lft[s, lid] = p_num[g_pptr[g]]
            hops[s, lid] = 1
            _walk(s, lid, True, 1, st)
            routed += 1
        for _ in range(max_cn - routed):  # dummy targets: LID 0, counted, then cleared
            hops[s, 0] = 1
            _walk(s, 0, True, 1, st)
            for x in range(m):
                hops[x, 0] = NO_PATH
                lft[x, 0] = NO_PATH
    for i in range(len(own)):
        s = own[i]
        lid = sw_lid[s]
        lft[s, lid] = 0
        hops[s, lid] = 0
        _walk(s, lid, False, 0, st)
