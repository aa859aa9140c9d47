"""Max-min fair rates by progressive filling over a sparse flow x arc matrix.

Progressive filling raises every unfrozen flow's rate at the same pace; when an arc
runs out of capacity, every flow crossing it freezes (that arc is its bottleneck). The
same allocation is reached in far fewer rounds by freezing, in each round, every arc
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

__all__ = ["max_min_rates"]




def max_min_rates(rows: sp.csr_matrix, capacity: np.ndarray,
                  count: np.ndarray | None = None, *, rtol: float = 1e-9
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max-min fair rate of each row (same unit as ``capacity``).

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
