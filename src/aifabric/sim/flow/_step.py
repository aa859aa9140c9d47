"""Compiled per-event passes of the flow engine over its per-flow arrays (numba).

Each is one pass over the active flows, where the numpy version took several (a
million-flow All-to-All has ~100 events, so these passes are most of the engine's own
time). Finished flows stay in the arrays, marked ``dead``, until the engine compacts
them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["advance", "apply_rates", "next_finish"]


@njit(cache=True, nogil=True, error_model="numpy")
def apply_rates(rate_src: np.ndarray, bott_src: np.ndarray, idx: np.ndarray,
                dead: np.ndarray, r_f: np.ndarray, f_minr: np.ndarray,
                f_bott: np.ndarray, f_rem: np.ndarray) -> tuple[float, int]:
    """r_f[i] = rate_src[idx[i]] (1 for dead flows, which never drain); keep each flow's
    lowest rate so far and the arc that set it. Returns the earliest drain time at these
    rates and its flow (-1: none), which :func:`next_finish` would otherwise compute."""
    dmin = np.inf
    first = -1
    for i in range(len(idx)):
        if dead[i]:
            r_f[i] = 1.0
            continue
        r = rate_src[idx[i]]
        r_f[i] = r
        if r < f_minr[i]:
            f_minr[i] = r
            f_bott[i] = bott_src[idx[i]]
        d = f_rem[i] / r
        if d < dmin:
            dmin = d
            first = i
    return dmin, first


@njit(cache=True, nogil=True, error_model="numpy")
def next_finish(f_rem: np.ndarray, r_f: np.ndarray, f_st: np.ndarray,
                rep_start: np.ndarray, t: float, t_heap: float, tolerance: float,
                dmin: float, first: int) -> tuple[float, bool]:
    """Time to the next event and whether flows finish at it (``dmin``/``first``: the
    earliest drain time and its flow when already known, else ``first = -1``).

    The flows draining within ``tolerance`` x the elapsed time of the earliest one's
    step (and within ``tolerance`` x its own drain time) finish together: the event is
    at the latest of their drain times.
    """
    if first < 0:
        dmin = np.inf
        for i in range(len(f_rem)):
            d = f_rem[i] / r_f[i]
            if d < dmin:
                dmin = d
                first = i
    if first < 0 or t + dmin > t_heap:
        return t_heap - t, False
    window = tolerance * (t + dmin - rep_start[f_st[first]])
    lim = dmin + max(window, dmin * tolerance)
    dt = dmin
    for i in range(len(f_rem)):
        d = f_rem[i] / r_f[i]
        if d <= lim and d > dt:
            dt = d
    if dt > t_heap - t:
        dt = t_heap - t
    return dt, True


@njit(cache=True, nogil=True, error_model="numpy")
def advance(f_rem: np.ndarray, r_f: np.ndarray, dt: float, finishing: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    """Drain every flow for ``dt``; the flows that drain within it (when ``finishing``):
    their indices and exact drain times."""
    n_fin = 0
    lim = dt * (1 + 1e-12)
    if finishing:
        for i in range(len(f_rem)):
            if f_rem[i] / r_f[i] <= lim:
                n_fin += 1
    idx = np.empty(n_fin, dtype=np.int64)
    tf = np.empty(n_fin)
    j = 0
    for i in range(len(f_rem)):
        d = f_rem[i] / r_f[i]
        if finishing and d <= lim:
            idx[j] = i
            tf[j] = d
            j += 1
        if dt > 0:
            f_rem[i] -= r_f[i] * dt
    return idx, tf
