"""Max-min fair rates by progressive filling over a sparse flow x arc matrix.

Progressive filling raises every unfrozen flow's rate at the same pace; when an arc
runs out of capacity, every flow crossing it freezes (that arc is its bottleneck).
:class:`MaxMin` (and :func:`max_min_rates`) run it compiled, one arc at a time in order
of fair share (:mod:`aifabric.sim.flow._fill`), with warm starts and an exact
reduction of the matrix. :func:`max_min_rates_numpy`, the reference they are tested
against, reaches the same allocation in vectorised rounds, freezing in each every arc
whose fair share (remaining capacity / unfrozen demand) is the smallest among the arcs
of all its flows: shares only grow as other flows freeze, so such an arc saturates at
its current share whatever happens elsewhere. Each round is a few vectorised passes
over the unfrozen entries; the number of rounds is the depth of the bottleneck
dependency chain, not the number of distinct rates.

A row's entries are the fraction of the flow's bytes on each arc (1 on a single path;
1/k on each of k sprayed paths), so a flow at rate r loads arc a with r x w[a].
Identical flows (the same row) are given once with a multiplicity.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["REDUCE_ABOVE", "MaxMin", "max_min_rates", "max_min_rates_numpy"]

REDUCE_ABOVE = 50_000  # rows from which MaxMin looks for arcs it can drop and rows to merge


class _Fill:
    """One CSR pattern ready for the compiled water-filling: arcs renumbered densely (the
    solver's per-arc state stays in cache) and the transpose built once."""

    def __init__(self, m: sp.csr_matrix, capacity: np.ndarray) -> None:
        from aifabric.sim.flow._fill import transpose

        self.shape = m.shape
        self.indptr = m.indptr.astype(np.int64)
        n_arcs = m.shape[1]
        self.used = np.flatnonzero(np.bincount(m.indices, minlength=n_arcs))
        remap = np.zeros(n_arcs, dtype=np.int64)
        remap[self.used] = np.arange(len(self.used))
        self.local = remap[m.indices]
        self.data = m.data.astype(np.float64)
        self.cap = np.asarray(capacity, dtype=np.float64)[self.used]
        self.col_ptr, self.col_row = transpose(self.indptr, self.local, len(self.used))
        self._prev: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __call__(self, count: np.ndarray, *, warm: bool = True
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Rates and (global) bottleneck arcs. After a solve, a solve in which no row's
        count grew restarts from the water level below which nothing changed: the
        lowest previous rate among the rows whose count fell (see ``fill``)."""
        from aifabric.sim.flow._fill import fill

        count = np.ascontiguousarray(count, dtype=np.float64)
        level0 = -np.inf
        prev = self._prev if warm else None
        if prev is not None:
            pc, pr, pb = prev
            fell = count < pc
            if not (count > pc).any() and fell.any():
                level0 = float(pr[fell].min())
        else:
            pr = pb = np.zeros(0)
        if level0 == -np.inf:
            pr, pb = np.zeros(len(count)), np.zeros(len(count), dtype=np.int64)
        rate, bott = fill(self.indptr, self.local, self.data, self.col_ptr, self.col_row,
                          count, self.cap, pr, pb, level0)
        # a copy: the caller (the engine) updates its count array in place
        self._prev = (count.copy(), rate, bott.copy())
        has = bott >= 0
        bott[has] = self.used[bott[has]]
        return rate, bott


def _witness_reduction(f: _Fill, site: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Arcs that can never bind for the rows that do not depend on them, and those rows.

    A row's *witnesses* are its lowest-capacity arcs: whatever the rates, the rows
    sharing a witness b load it with at most cap(b). For an arc a, each row crossing it
    is charged to one witness (one at the same ``site`` as a when there is one: the
    NIC port of the server a PCIe or NVLink hop belongs to; else its lowest-numbered).
    If a's load from rows charged elsewhere is bounded this way by at most cap(a) (the
    sum over their distinct witnesses b of cap(b) x the largest ratio of a row's
    fraction on a to its fraction on b), a never saturates before all those rows are
    frozen at their witnesses: dropping a from them changes no rate. Rows whose own
    witness is such an arc (NVLink-only traffic inside a server, say) are *dependent*:
    while any is active, the arc must stay.

    Returns (droppable arc mask, dependent row mask).
    """
    from aifabric.sim.flow._fill import witness_bound

    k, n_arcs = f.shape
    site_l = (np.full(len(f.used), -1, dtype=np.int64) if site is None
              else np.asarray(site, dtype=np.int64)[f.used])
    bound, carries, tight = witness_bound(f.indptr, f.local, f.data, f.cap, site_l)
    drop_l = carries & (bound <= f.cap * (1 + 1e-12))
    drop = np.zeros(n_arcs, dtype=bool)
    drop[f.used[drop_l]] = True
    row = np.repeat(np.arange(k), np.diff(f.indptr))
    dep = np.zeros(k, dtype=bool)  # rows for which a dropped arc is a witness
    dep[row[tight & drop_l[f.local]]] = True
    return drop, dep


def _ranges(n: np.ndarray) -> np.ndarray:
    """0..n[0]-1, 0..n[1]-1, ... concatenated."""
    total = int(n.sum())
    starts = np.repeat(np.cumsum(n) - n, n)
    return np.arange(total) - starts


def _leading_arcs(m: sp.csr_matrix, n: int) -> np.ndarray:
    """(n, rows): each row's first n arcs (-1 past its end)."""
    nz = np.diff(m.indptr)
    out = np.full((n, m.shape[0]), -1, dtype=np.int64)
    for j in range(n):
        has = nz > j
        out[j, has] = m.indices[m.indptr[:-1][has] + j]
    return out


class MaxMin:
    """A flow x arc matrix prepared once for many solves with different row counts.

    The compiled water-filling (:mod:`aifabric.sim.flow._fill`) takes the matrix and its
    transpose; a solve passes how many flows each row stands for now (0 = not active),
    so the engine never slices the matrix per event.

    When the matrix is large, arcs that provably never bind (see
    :func:`_witness_reduction`: PCIe and NVLink hops under a NIC's line rate, typically)
    are dropped from the rows that do not depend on them, and the rows left identical
    are merged into one with the sum of their counts: an All-to-All's million flows
    become the few hundred thousand distinct (uplink, downlink) pairs they load. The
    reduced problem gives exactly the same rates; a solve with dependent rows active
    uses the whole matrix.
    """

    def __init__(self, rows: sp.csr_matrix, capacity: np.ndarray, *,
                 site: np.ndarray | None = None, reduce_above: int | None = None) -> None:
        m = sp.csr_matrix(rows)
        self.site = site
        self.shape = m.shape
        self.capacity = np.asarray(capacity, dtype=np.float64)
        self._rows_t = m.T  # CSC view, built once: the load is rows^T x (rate x count)
        self._full = _Fill(m, self.capacity)
        self._red: _Fill | None = None
        self._red_load: tuple[np.ndarray, ...] | None = None
        if m.shape[0] >= (REDUCE_ABOVE if reduce_above is None else reduce_above):
            self._reduce(m)

    def _reduce(self, m: sp.csr_matrix) -> None:
        from aifabric.sim.flow._fill import row_hash, same_kept_rows

        drop, dep = _witness_reduction(self._full, self.site)
        if not drop.any():
            return
        keep = ~drop[m.indices]
        keep[np.repeat(dep, np.diff(m.indptr))] = False  # dependent rows: not in the reduced
        # merge identical reduced rows: one class per distinct (arcs, fractions) pattern,
        # found by a 64-bit hash and then checked entry by entry
        h = row_hash(self._full.indptr, m.indices.astype(np.int64), self._full.data, keep)
        free = np.flatnonzero(~dep)
        _u, first, inv = np.unique(h[free], return_index=True, return_inverse=True)
        n_cls = len(first)
        if not n_cls or n_cls > 0.8 * m.shape[0]:
            return  # nothing worth merging
        f = self._full
        if not same_kept_rows(f.indptr, f.local, f.data, keep, free, free[first][inv.ravel()]):
            return  # a hash collision: leave the matrix whole rather than guess
        reps = free[first]
        nk = np.add.reduceat(keep.astype(np.int64), m.indptr[:-1])[reps] if m.nnz else \
            np.zeros(len(reps), dtype=np.int64)
        nk = np.where(np.diff(m.indptr)[reps] > 0, nk, 0)
        sel = np.repeat(m.indptr[reps], np.diff(m.indptr)[reps]) + _ranges(
            np.diff(m.indptr)[reps])
        sel = sel[keep[sel]]
        rep = sp.csr_matrix((m.data[sel], m.indices[sel], np.r_[0, np.cumsum(nk)]),
                            shape=(n_cls, m.shape[1]))
        # classes in order of their arcs: the solver then walks memory mostly forward
        order = np.lexsort(np.flipud(_leading_arcs(rep, 2)))
        rank = np.empty(n_cls, dtype=np.int64)
        rank[order] = np.arange(n_cls)
        rep = rep[order]
        inv = rank[inv.ravel()]
        cls = np.full(m.shape[0], -1, dtype=np.int64)
        cls[free] = inv
        self._red = _Fill(rep, self.capacity)
        order = np.argsort(cls[free], kind="stable")
        self._m_rows = free[order]  # the rows of each class, class by class
        self._m_ptr = np.searchsorted(cls[free][order], np.arange(n_cls + 1))
        self._red_rows = rep
        self._red_live = (self._red, np.arange(n_cls))
        self._cls_rows = free
        self._cls = cls[free]
        self._row_class = cls
        self._dep = np.flatnonzero(dep)
        self._n_cls = n_cls

    @property
    def reduced_rows(self) -> int | None:
        """Rows of the reduced problem (None when the full matrix is always used)."""
        return self._n_cls if self._red is not None else None

    def solve_raw(self, count: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(rate, bottleneck, load, row_class): rate and bottleneck per row, or per class
        of ``row_class`` (per row; -1 for dependent rows) when that is not None (the
        reduced problem was solved)."""
        from aifabric.sim.flow._fill import class_counts, update_load

        cnt = np.ascontiguousarray(count, dtype=np.float64)
        if self._red is not None and not cnt[self._dep].any():
            rows, cls = self._cls_rows, self._cls
            ccnt = class_counts(rows, cls, cnt, self._n_cls)
            crate, cbott = self._solve_classes(ccnt)
            # a class's members load their dropped arcs too: every arc's load is the sum
            # of its rows' rate x count, updated from the last solve's for the classes
            # whose rate or count changed (a warm start changes few)
            f = self._full
            if self._red_load is None:
                changed = np.arange(self._n_cls)
                self._red_load = (np.zeros(len(rows)), np.zeros(len(f.used)), ccnt, crate)
            else:
                last, _, pc, pr = self._red_load
                changed = np.flatnonzero((ccnt != pc) | (crate != pr))
            last, load_used, _, _ = self._red_load
            update_load(changed, self._m_ptr, self._m_rows, cnt, crate, f.indptr, f.local,
                        f.data, last, load_used)
            self._red_load = (last, load_used, ccnt, crate)
            load = np.zeros(self.shape[1])
            load[f.used] = np.maximum(load_used, 0.0)
            return crate, cbott, load, self._row_class
        rate, bott = self._full(cnt)
        r = np.where(np.isfinite(rate) & (cnt > 0), rate, 0.0)
        load = self._rows_t @ (r * cnt)
        self._red_load = None  # the reduced path's running load starts afresh
        return rate, bott, np.asarray(load, dtype=np.float64), None

    def _solve_classes(self, ccnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rates of the classes; solved over a compacted copy holding only the classes
        still active once fewer than half of the current copy's are (flows that finished
        cost nothing in later solves)."""
        assert self._red is not None
        live = ccnt > 0
        sub, members = self._red_live
        n_in = int(live[members].sum())
        if n_in < int(live.sum()) or n_in * 2 < len(members):  # new classes, or many done
            members = np.flatnonzero(live)
            sub = _Fill(self._red_rows[members], self.capacity)
            self._red_live = (sub, members)
        r, b = sub(ccnt[members])
        crate = np.full(len(ccnt), np.inf)
        cbott = np.full(len(ccnt), -1, dtype=np.int64)
        crate[members], cbott[members] = r, b
        return crate, cbott

    def solve(self, count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rate, bottleneck, load) as :func:`max_min_rates`; rows with count 0 get inf, -1."""
        rate, bott, load, cls = self.solve_raw(count)
        if cls is not None:
            on = cls >= 0
            r = np.full(len(cls), np.inf)
            b = np.full(len(cls), -1, dtype=np.int64)
            r[on], b[on] = rate[cls[on]], bott[cls[on]]
            cnt = np.asarray(count)
            r[cnt <= 0], b[cnt <= 0] = np.inf, -1
            rate, bott = r, b
        return rate, bott, load


def max_min_rates(rows: sp.csr_matrix, capacity: np.ndarray,
                  count: np.ndarray | None = None, *, rtol: float = 1e-9
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max-min fair rate of each row (same unit as ``capacity``), by the compiled
    water-filling; the same contract as :func:`max_min_rates_numpy` (``rtol`` is
    accepted for it and unused: arcs saturate one at a time, in exact order).
    """
    del rtol
    k = rows.shape[0]
    cnt = np.ones(k) if count is None else np.asarray(count, dtype=np.float64)
    return MaxMin(rows, capacity).solve(cnt)


def max_min_rates_numpy(rows: sp.csr_matrix, capacity: np.ndarray,
                        count: np.ndarray | None = None, *, rtol: float = 1e-9
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max-min fair rate of each row (same unit as ``capacity``), vectorised numpy rounds
    (no compiled code; the reference the compiled solver is tested against).

    Parameters
    ----------
    rows : (k, n_arcs) CSR, fraction of each flow's bytes on each arc.
    capacity : (n_arcs,) capacity of each arc.
    count : (k,) how many identical flows each row stands for (default 1).

    Returns
    -------
    rate : (k,) rate of one flow of each row (inf for a row crossing no arc).
    bottleneck : (k,) the arc that froze the row (-1 for none).
    load : (n_arcs,) total load on each arc at these rates.
    """
    k, n_arcs = rows.shape
    cnt = np.ones(k) if count is None else np.asarray(count, dtype=np.float64)
    rate = np.full(k, np.inf)
    bott = np.full(k, -1, dtype=np.int64)
    ptr = rows.indptr.astype(np.int64)
    nnz_row = np.diff(ptr)
    used, local = np.unique(rows.indices, return_inverse=True)  # arcs in use
    u = len(used)
    data = rows.data.astype(np.float64)
    row_of = np.repeat(np.arange(k), nnz_row)
    w = data * cnt[row_of]  # per entry: demand per unit of rate
    remaining = capacity[used].astype(np.float64).copy()
    demand = np.bincount(local, weights=w, minlength=u)
    floor = 1e-12 * (float(w.max()) if len(w) else 1.0)
    # the entries of unfrozen rows, in row order; compacted as rows freeze
    L, R, W = local, row_of, w
    while len(L):
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(demand > 0, remaining / demand, np.inf)
        es = share[L]
        # each free row's tightest arc share; then, per arc, the least of those
        starts = np.flatnonzero(np.r_[True, R[1:] != R[:-1]])
        rowmin = np.minimum.reduceat(es, starts)
        rm = np.repeat(rowmin, np.diff(np.r_[starts, len(R)]))
        arcmin = np.full(u, np.inf)
        np.minimum.at(arcmin, L, rm)
        # an arc whose share is the least of all its flows' shares saturates at that
        # share whatever the others do (shares only grow as flows freeze): freeze them
        hit = (share[L] <= arcmin[L] * (1 + rtol)) & (es <= rm * (1 + rtol))
        new, first = np.unique(R[hit], return_index=True)
        rate[new] = rowmin[np.searchsorted(R[starts], new)]
        bott[new] = used[L[hit][first]]
        gone = np.zeros(k, dtype=bool)
        gone[new] = True
        g = gone[R]
        remaining -= np.bincount(L[g], weights=W[g] * rate[R[g]], minlength=u)
        demand -= np.bincount(L[g], weights=W[g], minlength=u)
        np.maximum(remaining, 0.0, out=remaining)
        demand[demand < floor] = 0.0
        keep = ~g
        L, R, W = L[keep], R[keep], W[keep]
    load = np.zeros(n_arcs)
    fin = np.where(np.isfinite(rate), rate, 0.0)
    if len(data):
        np.add.at(load, rows.indices, w * fin[row_of])
    return rate, bott, load
