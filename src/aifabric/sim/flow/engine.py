"""The flow-level engine: event-driven, max-min fair, over sparse flow x arc matrices.

Time advances from event to event: a stage starts (its transfers' flows join), flows
drain, a stage finishes (its successors may start). Between events every flow runs at
its max-min fair rate over the arcs it crosses (:class:`MaxMin`); rates change
only when the set of active flows changes.

What is reused instead of recomputed
------------------------------------
* Rates are cached by the multiset of active flow rows: the 2(n-1) steps of a ring use
  the same connections, so their rates are computed once.
* A repeating stage whose last repetition ran undisturbed (no other stage started,
  finished or lost a flow meanwhile) repeats exactly: the engine jumps over as many
  repetitions as fit before the next foreign event, advancing time, the other flows'
  bytes and the per-arc byte counters by whole repetitions.

A transfer is split evenly over its connection's flows (one per QP). It is delivered
when its last byte has drained plus the latency of its path. Flows that would drain
within ``tolerance`` x (time since their step started) of the earliest are finished in
one event: each keeps its exact drain time and delivers exactly its bytes, no arc ever
carries more than its capacity, and the capacity they free is handed to the others at
most that late — a relative time resolution of ``tolerance``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from aifabric.sim.flow._step import advance, apply_rates, next_finish
from aifabric.sim.flow.maxmin import MaxMin
from aifabric.workload.dag import COMPUTE, TransferDAG

__all__ = ["FlowRun", "Paths", "run_flow"]

_START, _DONE = 0, 1
_CACHE_FLOWS = 1 << 18  # rate solves over more active flows than this are not cached


@dataclass
class Paths:
    """Where each connection's flows go.

    ``incidence`` (n_flows x n_arcs): fraction of a flow's bytes on each arc; the flows
    of connection c are rows ``conn_ptr[c]:conn_ptr[c+1]``. ``latency_ns`` per
    connection; ``capacity_gbps`` per arc; ``arc_site`` (optional) the server each arc
    belongs to, which lets the solver find the PCIe/NVLink hops that never bind
    (:class:`~aifabric.sim.flow.maxmin.MaxMin`).
    """

    incidence: sp.csr_matrix
    conn_ptr: np.ndarray
    latency_ns: np.ndarray
    capacity_gbps: np.ndarray
    arc_site: np.ndarray | None = None  # per arc: the server it belongs to (-1: none)

    @property
    def n_conns(self) -> int:
        return len(self.conn_ptr) - 1


@dataclass
class FlowRun:
    """Raw outcome of a flow-level run (turned into tables by :mod:`aifabric.sim.results`)."""

    stage_start_ns: np.ndarray
    stage_end_ns: np.ndarray
    xfer_start_ns: np.ndarray
    xfer_end_ns: np.ndarray
    xfer_min_rate_gbps: np.ndarray
    xfer_bottleneck_arc: np.ndarray
    arc_bytes: np.ndarray
    arc_peak_gbps: np.ndarray
    timeline_ns: np.ndarray  # (k, 2): interval start, end
    timeline_group_bytes: np.ndarray  # (k, n_groups): bytes carried per arc group
    events: int
    rate_solves: int
    reps_skipped: int
    intervals: list[tuple[float, float, np.ndarray]] = field(default_factory=list)


def _expand(conns: np.ndarray, conn_ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flow rows of each connection in ``conns`` (concatenated) and flows per connection."""
    starts = conn_ptr[conns]
    nq = conn_ptr[conns + 1] - starts
    total = int(nq.sum())
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(nq)[:-1]]), nq)
    return offs + np.arange(total), nq


def run_flow(dag: TransferDAG, paths: Paths, xfer_conn: np.ndarray, *,
             tolerance: float = 1e-2, arc_group: np.ndarray | None = None,
             n_groups: int = 1, record: bool = False,
             progress: Callable[[int], None] | None = None) -> FlowRun:
    """Simulate ``dag`` on ``paths``; ``xfer_conn[i]`` is the connection of transfer i.

    ``arc_group`` (per arc, < ``n_groups``) aggregates the utilization timeline (e.g. by
    tier). ``record`` keeps every interval's per-arc load (small runs, tests).
    """
    cap = np.asarray(paths.capacity_gbps, dtype=np.float64) / 8.0  # bytes per ns
    rows_all = paths.incidence.tocsr()
    n_rows, n_arcs = rows_all.shape
    conn_ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
    conn_lat = np.asarray(paths.latency_ns, dtype=np.float64)
    group = np.zeros(n_arcs, dtype=np.int64) if arc_group is None else arc_group
    S, T = dag.n_stages, dag.n_transfers
    xptr = dag.xfer_ptr
    npred = np.diff(dag.dep_ptr).astype(np.int64)
    succ_ptr, succ_idx = dag.successors()

    reps_done = np.zeros(S, dtype=np.int64)
    outstanding = np.zeros(S, dtype=np.int64)
    max_end = np.zeros(S)
    rep_start = np.zeros(S)
    st_start = np.full(S, np.nan)
    st_end = np.full(S, np.nan)
    x_start = np.full(T, np.nan)
    x_end = np.full(T, np.nan)
    x_minr = np.full(T, np.inf)
    x_bott = np.full(T, -1, dtype=np.int64)

    f_cls = np.zeros(0, dtype=np.int64)
    f_rem = np.zeros(0)
    f_x = np.zeros(0, dtype=np.int64)
    f_st = np.zeros(0, dtype=np.int64)
    f_uid = np.zeros(0, dtype=np.int64)
    f_minr = np.zeros(0)
    f_bott = np.zeros(0, dtype=np.int64)
    next_uid = 0
    counts = np.zeros(n_rows)  # active flows per row (float: what the solver takes)
    # the multiset of active rows, hashed incrementally (Zobrist): two 64-bit sums of a
    # random word per row, updated as flows join and leave, so a cache lookup costs
    # nothing per flow
    zob = np.random.default_rng(0x5EED).integers(0, 2**63, size=(2, n_rows), dtype=np.int64)
    zkey = np.zeros(2, dtype=np.int64)
    dead = np.zeros(0, dtype=bool)
    n_dead = 0
    r_f = np.zeros(0)  # each flow's rate now
    rate_row = np.zeros(n_rows)
    bott_row = np.full(n_rows, -1, dtype=np.int64)

    arc_bytes = np.zeros(n_arcs)
    arc_peak = np.zeros(n_arcs)
    tl_t: list[tuple[float, float]] = []
    tl_g: list[np.ndarray] = []
    intervals: list[tuple[float, float, np.ndarray]] = []
    cache: dict[bytes, tuple[np.ndarray, ...]] = {}
    cached_bytes, cache_limit = 0, 256 << 20
    expanded: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    running: set[int] = set()
    clean: dict[int, bool] = {}
    snap: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    heap: list[tuple[float, int, int, int]] = []
    seq = 0
    stats = {"events": 0, "solves": 0, "skipped": 0}

    def push(time: float, kind: int, s: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (time, seq, kind, s))
        seq += 1

    def touched(involved: set[int]) -> None:
        for s in running:
            if involved != {s}:
                clean[s] = False

    def start(s: int, t: float) -> float:
        """Start (a repetition of) stage s at t; returns the time after any skipped reps."""
        nonlocal f_cls, f_rem, f_x, f_st, f_uid, f_minr, f_bott, next_uid, dead, zkey
        compact()
        if np.isnan(st_start[s]):
            st_start[s] = t
        running.add(s)
        if dag.stage_kind[s] == COMPUTE:
            push(t + dag.duration_ns[s], _DONE, s)
            return t
        if s not in expanded:
            xs = np.arange(xptr[s], xptr[s + 1])
            cls, nq = _expand(xfer_conn[xs], conn_ptr)
            expanded[s] = (cls, np.repeat(xs, nq), np.repeat(dag.size_bytes[xs] / nq, nq))
            x_start[xs] = t
        cls, fx, size = expanded[s]
        if reps_done[s] >= 1 and clean.get(s) and s in snap:
            t = skip(s, t)
        if not len(cls):
            push(t, _DONE, s)
            return t
        clean[s] = True
        snap[s] = (f_uid.copy(), f_rem.copy(), arc_bytes.copy(), np.array([t]))
        rep_start[s] = t
        outstanding[s] = len(cls)
        max_end[s] = t
        n = len(cls)
        f_cls = np.concatenate([f_cls, cls])
        f_rem = np.concatenate([f_rem, size])
        f_x = np.concatenate([f_x, fx])
        f_st = np.concatenate([f_st, np.full(n, s, dtype=np.int64)])
        f_uid = np.concatenate([f_uid, np.arange(next_uid, next_uid + n)])
        f_minr = np.concatenate([f_minr, np.full(n, np.inf)])
        f_bott = np.concatenate([f_bott, np.full(n, -1, dtype=np.int64)])
        dead = np.concatenate([dead, np.zeros(n, dtype=bool)])
        next_uid += n
        np.add.at(counts, cls, 1)
        with np.errstate(over="ignore"):
            zkey = zkey + zob[:, cls].sum(axis=1)
        return t

    def compact() -> None:
        """Drop finished flows from the per-flow arrays (they linger, marked dead, until
        a quarter of the arrays is dead or a stage starts)."""
        nonlocal f_cls, f_rem, f_x, f_st, f_uid, f_minr, f_bott, r_f, dead, n_dead
        if not n_dead:
            return
        keep = ~dead
        f_cls, f_rem, f_x, f_st = f_cls[keep], f_rem[keep], f_x[keep], f_st[keep]
        f_uid, f_minr, f_bott = f_uid[keep], f_minr[keep], f_bott[keep]
        if len(r_f) == len(keep):
            r_f = r_f[keep]
        dead = dead[keep]
        n_dead = 0

    def skip(s: int, t: float) -> float:
        """Jump over whole repetitions of s that would repeat the last one exactly."""
        nonlocal f_rem
        uid0, rem0, bytes0, (t0,) = snap[s]
        if not np.array_equal(uid0, f_uid):
            return t
        d = t - t0
        left = int(dag.repeat[s] - reps_done[s] - 1)
        if d <= 0 or left < 1:
            return t
        m = left
        if heap:
            m = min(m, int((heap[0][0] - t) // d))
        cons = rem0 - f_rem
        pos = cons > 0
        if pos.any():
            m = min(m, int(np.min(np.floor(f_rem[pos] / cons[pos]))) - 1)
        if m < 1:
            return t
        delta = arc_bytes - bytes0
        arc_bytes[:] += m * delta
        f_rem = f_rem - m * cons
        tl_t.append((t, t + m * d))
        tl_g.append(m * np.bincount(group, weights=delta, minlength=n_groups))
        if record:
            intervals.append((t, t + m * d, delta / d))
        reps_done[s] += m
        stats["skipped"] += m
        return t + m * d

    for s in np.flatnonzero(npred == 0):
        push(0.0, _START, int(s))

    t = 0.0
    dirty = True
    solver: MaxMin | None = None
    flow_class: tuple[np.ndarray | None, np.ndarray] = (None, np.zeros(0, dtype=np.int64))
    known: tuple[float, int] = (np.inf, -1)  # earliest drain time and flow, when known
    load = np.zeros(n_arcs)
    while True:
        nf = len(f_cls) - n_dead
        if nf and dirty:
            key = zkey.tobytes() + np.int64(nf).tobytes()
            hit = cache.get(key)
            if hit is None:
                if solver is None:
                    solver = MaxMin(rows_all, cap, site=paths.arc_site)
                src_rate, src_bott, full, row_class = solver.solve_raw(counts)
                stats["solves"] += 1
                nz = np.flatnonzero(full)
                val = full[nz]
                if nf <= _CACHE_FLOWS:  # small enough to remember (ring steps repeat)
                    act = np.flatnonzero(counts)
                    at = act if row_class is None else row_class[act]
                    hit = (act, src_rate[at], src_bott[at], nz, val)
                    cached_bytes += act.nbytes * 3 + nz.nbytes * 2
                    if cached_bytes > cache_limit:
                        cache.clear()
                        cached_bytes = 0
                    cache[key] = hit
                    idx = f_cls
                elif row_class is None:
                    idx = f_cls
                else:  # the class of each flow, kept while the flow arrays stay the same
                    if flow_class[0] is not f_cls:
                        flow_class = (f_cls, row_class[f_cls])
                    idx = flow_class[1]
            if hit is not None:
                act, r_act, b_act, nz, val = hit
                rate_row[act] = r_act
                bott_row[act] = b_act
                src_rate, src_bott, idx = rate_row, bott_row, f_cls
            load = np.zeros(n_arcs)
            load[nz] = val
            r_f = np.empty(len(f_cls))
            known = apply_rates(src_rate, src_bott, idx, dead, r_f, f_minr, f_bott, f_rem)
            dirty = False
        t_heap = heap[0][0] if heap else np.inf
        fin = None
        finishing = False
        if nf:
            dt, finishing = next_finish(f_rem, r_f, f_st, rep_start, t, t_heap, tolerance,
                                        *known)
            known = (np.inf, -1)  # the flows drain from here on: look afresh next time
        elif heap:
            dt = t_heap - t
        else:
            break
        if dt > 0 and nf:
            arc_bytes += load * dt
            np.maximum(arc_peak, load, out=arc_peak)
            tl_t.append((t, t + dt))
            tl_g.append(np.bincount(group, weights=load * dt, minlength=n_groups))
            if record:
                intervals.append((t, t + dt, load.copy()))
        if nf:
            fin, tfin = advance(f_rem, r_f, max(dt, 0.0), finishing)
        t_prev, t = t, t + max(dt, 0.0)
        stats["events"] += 1
        if fin is not None and len(fin):
            # the flows that drained before the event's end did not carry load after
            # their drain time: take back what the interval counted past it
            over = r_f[fin] * np.maximum(dt - tfin, 0.0)
            if dt > 0 and over.any():
                extra = rows_all[f_cls[fin]].T @ over
                arc_bytes -= extra
                tl_g[-1] = tl_g[-1] - np.bincount(group, weights=extra, minlength=n_groups)
            fs = f_st[fin]
            fx = f_x[fin]
            done_at = t_prev + tfin + conn_lat[xfer_conn[fx]]
            np.fmax.at(x_end, fx, done_at)
            np.maximum.at(max_end, fs, done_at)
            np.minimum.at(x_minr, fx, f_minr[fin])
            x_bott[fx[f_minr[fin] <= x_minr[fx]]] = f_bott[fin][f_minr[fin] <= x_minr[fx]]
            np.subtract.at(counts, f_cls[fin], 1)
            np.subtract.at(outstanding, fs, 1)
            with np.errstate(over="ignore"):
                zkey = zkey - zob[:, f_cls[fin]].sum(axis=1)
            dead[fin] = True
            f_rem[fin] = np.inf
            r_f[fin] = 1.0
            n_dead += len(fin)
            if n_dead * 4 > len(f_cls):
                compact()
            involved = {int(s) for s in np.unique(fs)}
            for s in involved:
                if outstanding[s] == 0:
                    push(max(max_end[s], t), _DONE, s)
            touched(involved)
            dirty = True
        while heap and heap[0][0] <= t:
            _, _, kind, s = heapq.heappop(heap)
            stats["events"] += 1
            touched({s})
            if kind == _START:
                t = start(s, t)
                dirty = True
                continue
            reps_done[s] += 1
            if reps_done[s] < dag.repeat[s]:
                t = start(s, t)
                dirty = True
                continue
            st_end[s] = t
            running.discard(s)
            expanded.pop(s, None)
            snap.pop(s, None)
            if progress is not None:
                progress(1)
            for c in succ_idx[succ_ptr[s]:succ_ptr[s + 1]]:
                npred[c] -= 1
                if npred[c] == 0:
                    push(t, _START, int(c))

    tl = np.array(tl_t, dtype=np.float64).reshape(-1, 2)
    tg = np.array(tl_g, dtype=np.float64).reshape(len(tl_t), n_groups)
    with np.errstate(invalid="ignore"):
        min_gbps = np.where(np.isfinite(x_minr), x_minr * 8.0, np.nan)
    return FlowRun(st_start, st_end, x_start, x_end, min_gbps, x_bott, arc_bytes,
                   arc_peak * 8.0, tl, tg, stats["events"], stats["solves"],
                   stats["skipped"], intervals)
