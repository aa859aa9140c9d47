"""Compiled progressive filling (numba): the max-min solver's inner loop.

Water-filling with an indexed heap of arcs keyed by fair share (remaining capacity /
unfrozen demand). The arc with the smallest share saturates first: every unfrozen flow
crossing it freezes at that share (the current water level), its load leaves the other
arcs it crosses. Shares only grow as flows freeze at the current level, so keys are
refreshed lazily: the arc on top is re-keyed with its present share and sifted down
until the top's key is current (an arc whose flows all froze elsewhere just leaves).
One solve is O(nnz log n_arcs), against the vectorised rounds of
:func:`aifabric.sim.flow.maxmin.max_min_rates_numpy`, which cost O(nnz) per level of
the bottleneck chain.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["class_counts", "fill", "row_hash", "same_kept_rows", "transpose", "update_load",
           "witness_bound"]


@njit(cache=True, nogil=True)
def _less(key: np.ndarray, a: int, b: int) -> bool:
    return key[a] < key[b] or (key[a] == key[b] and a < b)


@njit(cache=True, nogil=True)
def _down(heap: np.ndarray, pos: np.ndarray, key: np.ndarray, i: int, n: int) -> None:
    a = heap[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(key, heap[c + 1], heap[c]):
            c += 1
        if not _less(key, heap[c], a):
            break
        heap[i] = heap[c]
        pos[heap[i]] = i
        i = c
    heap[i] = a
    pos[a] = i


@njit(cache=True, nogil=True)
def transpose(indptr: np.ndarray, indices: np.ndarray, n_arcs: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """Arc -> rows crossing it (the CSC pattern of a CSR matrix): (col_ptr, col_row)."""
    col_ptr = np.zeros(n_arcs + 1, dtype=np.int64)
    for e in range(len(indices)):
        col_ptr[indices[e] + 1] += 1
    for a in range(n_arcs):
        col_ptr[a + 1] += col_ptr[a]
    fillp = col_ptr[:-1].copy()
    col_row = np.empty(len(indices), dtype=np.int64)
    for i in range(len(indptr) - 1):
        for e in range(indptr[i], indptr[i + 1]):
            a = indices[e]
            col_row[fillp[a]] = i
            fillp[a] += 1
    return col_ptr, col_row


@njit(cache=True, nogil=True)
def fill(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
         col_ptr: np.ndarray, col_row: np.ndarray, count: np.ndarray, cap: np.ndarray,
         prev_rate: np.ndarray, prev_bott: np.ndarray, level0: float
         ) -> tuple[np.ndarray, np.ndarray]:
    """Max-min fair rate and bottleneck arc of each row with ``count > 0``.

    ``col_ptr``/``col_row`` is the transpose's pattern (:func:`transpose`). Rows
    with ``count == 0`` are absent (rate inf, bottleneck -1), as are rows crossing no arc.

    Warm start: rows whose ``prev_rate`` is below ``level0`` keep it (and ``prev_bott``)
    and the filling starts at that level. That is exact when the previous solve had the
    same rows with counts at least these and every row whose count fell had a rate of at
    least ``level0``: up to that water level the filling never met those rows' arcs
    (a row only crosses arcs that saturate at or above its rate), so it ran the same.
    """
    k = len(indptr) - 1
    n_arcs = len(cap)
    rate = np.full(k, np.inf)
    bott = np.full(k, -1, dtype=np.int64)
    remaining = cap.astype(np.float64).copy()
    demand = np.zeros(n_arcs)
    frozen = np.zeros(k, dtype=np.bool_)
    wmax = 0.0
    for i in range(k):
        c = count[i]
        if c <= 0:
            continue
        if prev_rate[i] < level0:
            frozen[i] = True
            rate[i] = prev_rate[i]
            bott[i] = prev_bott[i]
            for e in range(indptr[i], indptr[i + 1]):
                remaining[indices[e]] -= data[e] * c * rate[i]
            continue
        for e in range(indptr[i], indptr[i + 1]):
            w = data[e] * c
            demand[indices[e]] += w
            if w > wmax:
                wmax = w
    floor = 1e-12 * (wmax if wmax > 0 else 1.0)
    # an indexed binary heap of the arcs still carrying unfrozen flows, keyed by share
    key = np.full(n_arcs, np.inf)
    heap = np.empty(n_arcs, dtype=np.int64)
    pos = np.full(n_arcs, -1, dtype=np.int64)
    n = 0
    for a in range(n_arcs):
        if demand[a] > floor:
            key[a] = remaining[a] / demand[a] if remaining[a] > 0.0 else 0.0
            heap[n] = a
            pos[a] = n
            n += 1
    for i in range(n // 2 - 1, -1, -1):
        _down(heap, pos, key, i, n)
    level = level0 if level0 > 0.0 else 0.0
    while n > 0:
        a = heap[0]
        if demand[a] > floor:
            cur = remaining[a] / demand[a] if remaining[a] > 0.0 else 0.0
            if cur > key[a]:  # its flows froze elsewhere since: a larger share, re-sort
                key[a] = cur
                _down(heap, pos, key, 0, n)
                continue
        n -= 1
        if n > 0:
            heap[0] = heap[n]
            pos[heap[0]] = 0
            _down(heap, pos, key, 0, n)
        pos[a] = -1
        if demand[a] <= floor:  # every flow on a froze elsewhere
            continue
        if key[a] > level:
            level = key[a]
        for p in range(col_ptr[a], col_ptr[a + 1]):
            i = col_row[p]
            if frozen[i] or count[i] <= 0:
                continue
            frozen[i] = True
            rate[i] = level
            bott[i] = a
            c = count[i]
            for e in range(indptr[i], indptr[i + 1]):
                w = data[e] * c
                remaining[indices[e]] -= w * level
                demand[indices[e]] -= w
        demand[a] = 0.0
    return rate, bott


@njit(cache=True, nogil=True)
def witness_bound(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                  cap: np.ndarray, site: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per arc: the bound on its load from the rows for which it is not a witness, and
    whether it carries any such row; per entry: whether it is tight (on one of its row's
    lowest-capacity arcs). See :func:`aifabric.sim.flow.maxmin._witness_reduction`.

    Two passes: row by row, each entry's witness and fraction ratio; then, arc by arc
    (the entries bucketed by arc), the distinct witnesses and their largest ratios."""
    k = len(indptr) - 1
    n_arcs = len(cap)
    nnz = len(indices)
    tight = np.zeros(nnz, dtype=np.bool_)
    wit = np.full(nnz, -1, dtype=np.int64)
    ratio = np.zeros(nnz)
    col_ptr = np.zeros(n_arcs + 1, dtype=np.int64)
    for i in range(k):
        cmin = np.inf
        for e in range(indptr[i], indptr[i + 1]):
            if cap[indices[e]] < cmin:
                cmin = cap[indices[e]]
        w1 = -1
        w2 = -1
        for e in range(indptr[i], indptr[i + 1]):
            if cap[indices[e]] <= cmin:
                tight[e] = True
                if w1 < 0:
                    w1 = e
                w2 = e
        for e in range(indptr[i], indptr[i + 1]):
            if tight[e]:
                continue
            a = indices[e]
            pick = w1
            if site[a] >= 0 and site[indices[w2]] == site[a] and site[indices[w1]] != site[a]:
                pick = w2
            wit[e] = indices[pick]
            ratio[e] = data[e] / data[pick]
            col_ptr[a + 1] += 1
    for a in range(n_arcs):
        col_ptr[a + 1] += col_ptr[a]
    fillp = col_ptr[:-1].copy()
    cw = np.empty(col_ptr[n_arcs], dtype=np.int64)
    cr = np.empty(col_ptr[n_arcs])
    for e in range(nnz):
        if wit[e] >= 0:
            a = indices[e]
            cw[fillp[a]] = wit[e]
            cr[fillp[a]] = ratio[e]
            fillp[a] += 1
    bound = np.zeros(n_arcs)
    carries = np.zeros(n_arcs, dtype=np.bool_)
    stamp = np.full(n_arcs, -1, dtype=np.int64)
    best = np.zeros(n_arcs)
    touched = np.empty(n_arcs, dtype=np.int64)
    for a in range(n_arcs):
        nt = 0
        for p in range(col_ptr[a], col_ptr[a + 1]):
            b = cw[p]
            if stamp[b] != a:
                stamp[b] = a
                best[b] = cr[p]
                touched[nt] = b
                nt += 1
            elif cr[p] > best[b]:
                best[b] = cr[p]
        s = 0.0
        for j in range(nt):
            s += best[touched[j]] * cap[touched[j]]
        bound[a] = s
        carries[a] = nt > 0
    return bound, carries, tight


@njit(cache=True, nogil=True)
def row_hash(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
             keep: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's kept (arc, fraction) entries (FNV-1a over their
    words); rows with equal hashes are compared entry by entry before being merged."""
    k = len(indptr) - 1
    out = np.empty(k, dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for i in range(k):
        h = np.uint64(14695981039346656037)
        for e in range(indptr[i], indptr[i + 1]):
            if not keep[e]:
                continue
            h = (h ^ np.uint64(indices[e])) * prime
            h = (h ^ np.uint64(np.int64(data[e] * 4294967296.0))) * prime
        out[i] = h
    return out


@njit(cache=True, nogil=True)
def class_counts(rows: np.ndarray, cls: np.ndarray, count: np.ndarray, n_cls: int
                 ) -> np.ndarray:
    """How many active flows each class stands for: the counts of its rows, summed."""
    out = np.zeros(n_cls)
    for j in range(len(rows)):
        out[cls[j]] += count[rows[j]]
    return out


@njit(cache=True, nogil=True)
def update_load(changed: np.ndarray, m_ptr: np.ndarray, m_rows: np.ndarray,
                count: np.ndarray, crate: np.ndarray, indptr: np.ndarray,
                indices: np.ndarray, data: np.ndarray, last: np.ndarray,
                load: np.ndarray) -> None:
    """Bring ``load`` (per arc) up to date for the classes in ``changed`` (rate or count
    changed): each member row (``m_rows[m_ptr[c]:m_ptr[c+1]]``) now carries its class's
    rate x its count; ``last[p]`` is what member p carried when ``load`` was computed."""
    for q in range(len(changed)):
        c = changed[q]
        r = crate[c]
        for p in range(m_ptr[c], m_ptr[c + 1]):
            i = m_rows[p]
            k = count[i]
            new = r * k if k > 0 and r < np.inf else 0.0
            d = new - last[p]
            if d == 0.0:
                continue
            last[p] = new
            for e in range(indptr[i], indptr[i + 1]):
                load[indices[e]] += data[e] * d


@njit(cache=True, nogil=True)
def same_kept_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                   keep: np.ndarray, rows: np.ndarray, reps: np.ndarray) -> bool:
    """Whether each row ``rows[j]`` has exactly the kept (arc, fraction) entries of row
    ``reps[j]`` (the check behind merging rows whose hashes agree)."""
    for j in range(len(rows)):
        a, b = rows[j], reps[j]
        ea, eb = indptr[a], indptr[b]
        while True:
            while ea < indptr[a + 1] and not keep[ea]:
                ea += 1
            while eb < indptr[b + 1] and not keep[eb]:
                eb += 1
            end_a, end_b = ea >= indptr[a + 1], eb >= indptr[b + 1]
            if end_a or end_b:
                if end_a != end_b:
                    return False
                break
            if indices[ea] != indices[eb] or data[ea] != data[eb]:
                return False
            ea += 1
            eb += 1
    return True
