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
    e = _FlowEngine(dag, paths, xfer_conn, tolerance, arc_group, n_groups, record, progress)
    for s in np.flatnonzero(e.npred == 0):
        e.push(0.0, _START, int(s))
    t = 0.0  # ns
    while True:
        nf = len(e.f_cls) - e.n_dead  # flows active now
        if nf and e.dirty:
            e.solve_rates(nf)
        step = e.time_to_next_event(nf, t)
        if step is None:
            break
        dt, finishing = step
        if dt > 0 and nf:
            e.carry_load(t, dt)
        fin = tfin = None
        if nf:
            fin, tfin = advance(e.f_rem, e.r_f, max(dt, 0.0), finishing)
        t_prev, t = t, t + max(dt, 0.0)
        e.events += 1
        if fin is not None and len(fin):
            e.retire_drained(fin, tfin, dt, t_prev, t)
        t = e.handle_due_events(t)
    return e.result()


class _FlowEngine:
    """The state of one :func:`run_flow` and its steps. Units: time in ns, sizes in bytes,
    rates in bytes per ns (capacities divided by 8 on the way in, multiplied by 8 in the
    results).

    Per active flow (parallel arrays, finished flows kept, marked ``dead``, until
    :meth:`compact`): ``f_cls`` its incidence row, ``f_rem`` bytes left, ``f_x`` its
    transfer, ``f_st`` its stage, ``f_uid`` a number never reused, ``f_minr`` / ``f_bott``
    its lowest rate so far and the arc that set it, ``r_f`` its rate now.
    """

    def __init__(self, dag: TransferDAG, paths: Paths, xfer_conn: np.ndarray,
                 tolerance: float, arc_group: np.ndarray | None, n_groups: int, record: bool,
                 progress: Callable[[int], None] | None) -> None:
        self.dag, self.xfer_conn, self.tolerance = dag, xfer_conn, tolerance
        self.n_groups, self.record, self.progress = n_groups, record, progress
        self.cap = np.asarray(paths.capacity_gbps, dtype=np.float64) / 8.0  # bytes per ns
        self.arc_site = paths.arc_site
        self.rows_all = paths.incidence.tocsr()
        n_rows, n_arcs = self.rows_all.shape
        self.n_arcs = n_arcs
        self.conn_ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
        self.conn_lat = np.asarray(paths.latency_ns, dtype=np.float64)
        self.group = np.zeros(n_arcs, dtype=np.int64) if arc_group is None else arc_group
        S, T = dag.n_stages, dag.n_transfers
        self.npred = np.diff(dag.dep_ptr).astype(np.int64)  # predecessors not done yet
        self.succ_ptr, self.succ_idx = dag.successors()

        # per stage and per transfer
        self.reps_done = np.zeros(S, dtype=np.int64)
        self.outstanding = np.zeros(S, dtype=np.int64)  # flows of its repetition left
        self.max_end = np.zeros(S)  # latest delivery of its repetition so far
        self.rep_start = np.zeros(S)
        self.st_start = np.full(S, np.nan)
        self.st_end = np.full(S, np.nan)
        self.x_start = np.full(T, np.nan)
        self.x_end = np.full(T, np.nan)
        self.x_minr = np.full(T, np.inf)
        self.x_bott = np.full(T, -1, dtype=np.int64)

        # per flow (see the class docstring)
        self.f_cls = np.zeros(0, dtype=np.int64)
        self.f_rem = np.zeros(0)
        self.f_x = np.zeros(0, dtype=np.int64)
        self.f_st = np.zeros(0, dtype=np.int64)
        self.f_uid = np.zeros(0, dtype=np.int64)
        self.f_minr = np.zeros(0)
        self.f_bott = np.zeros(0, dtype=np.int64)
        self.next_uid = 0
        self.dead = np.zeros(0, dtype=bool)
        self.n_dead = 0
        self.r_f = np.zeros(0)  # each flow's rate now
        self.counts = np.zeros(n_rows)  # active flows per row (float: what the solver takes)
        # the multiset of active rows, hashed incrementally (Zobrist): two 64-bit sums of a
        # random word per row, updated as flows join and leave, so a cache lookup costs
        # nothing per flow
        self.zob = np.random.default_rng(0x5EED).integers(0, 2**63, size=(2, n_rows),
                                                          dtype=np.int64)
        self.zkey = np.zeros(2, dtype=np.int64)

        # rates: the cache by active-row multiset, and the solution in force
        self.rate_row = np.zeros(n_rows)
        self.bott_row = np.full(n_rows, -1, dtype=np.int64)
        self.cache: dict[bytes, tuple[np.ndarray, ...]] = {}
        self.cached_bytes, self.cache_limit = 0, 256 << 20
        self.solver: MaxMin | None = None
        self.flow_class: tuple[np.ndarray | None, np.ndarray] = (None,
                                                                 np.zeros(0, dtype=np.int64))
        self.known: tuple[float, int] = (np.inf, -1)  # earliest drain time and flow, if known
        self.load = np.zeros(n_arcs)  # bytes per ns on each arc now
        self.dirty = True  # the active flows changed since the last solve

        # what the run carried
        self.arc_bytes = np.zeros(n_arcs)
        self.arc_peak = np.zeros(n_arcs)
        self.tl_t: list[tuple[float, float]] = []
        self.tl_g: list[np.ndarray] = []
        self.intervals: list[tuple[float, float, np.ndarray]] = []

        # stages: flows of a running stage, who ran undisturbed, snapshots to repeat from
        self.expanded: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.running: set[int] = set()
        self.clean: dict[int, bool] = {}
        self.snap: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self.heap: list[tuple[float, int, int, int]] = []
        self.seq = 0
        self.events = self.solves = self.skipped = 0

    def push(self, time: float, kind: int, s: int) -> None:
        """Schedule event ``kind`` (start or done) of stage ``s`` at ``time`` ns."""
        heapq.heappush(self.heap, (time, self.seq, kind, s))
        self.seq += 1

    def touched(self, involved: set[int]) -> None:
        """Something happened to the stages ``involved``: every other running stage's
        repetition is no longer undisturbed (it cannot be repeated by :meth:`skip`)."""
        for s in self.running:
            if involved != {s}:
                self.clean[s] = False

    def solve_rates(self, nf: int) -> None:
        """Every active flow's max-min fair rate (``r_f``, bytes per ns) and the load on
        every arc (``load``), for the ``nf`` flows active now; from the cache when the
        same multiset of rows was solved before."""
        key = self.zkey.tobytes() + np.int64(nf).tobytes()
        hit = self.cache.get(key)
        if hit is None:
            if self.solver is None:
                self.solver = MaxMin(self.rows_all, self.cap, site=self.arc_site)
            src_rate, src_bott, full, row_class = self.solver.solve_raw(self.counts)
            self.solves += 1
            nz = np.flatnonzero(full)
            val = full[nz]
            if nf <= _CACHE_FLOWS:  # small enough to remember (ring steps repeat)
                hit = self._remember(key, src_rate, src_bott, row_class, nz, val)
                idx = self.f_cls
            elif row_class is None:
                idx = self.f_cls
            else:  # the class of each flow, kept while the flow arrays stay the same
                if self.flow_class[0] is not self.f_cls:
                    self.flow_class = (self.f_cls, row_class[self.f_cls])
                idx = self.flow_class[1]
        if hit is not None:
            act, r_act, b_act, nz, val = hit
            self.rate_row[act] = r_act
            self.bott_row[act] = b_act
            src_rate, src_bott, idx = self.rate_row, self.bott_row, self.f_cls
        self.load = np.zeros(self.n_arcs)
        self.load[nz] = val
        self.r_f = np.empty(len(self.f_cls))
        self.known = apply_rates(src_rate, src_bott, idx, self.dead, self.r_f, self.f_minr,
                                 self.f_bott, self.f_rem)
        self.dirty = False

    def _remember(self, key: bytes, src_rate: np.ndarray, src_bott: np.ndarray,
                  row_class: np.ndarray | None, nz: np.ndarray, val: np.ndarray
                  ) -> tuple[np.ndarray, ...]:
        """Cache one solve under ``key``: the active rows, their rates (bytes per ns) and
        bottleneck arcs, the loaded arcs and their loads; the cache is emptied when it
        passes ``cache_limit`` bytes."""
        act = np.flatnonzero(self.counts)
        at = act if row_class is None else row_class[act]
        hit = (act, src_rate[at], src_bott[at], nz, val)
        self.cached_bytes += act.nbytes * 3 + nz.nbytes * 2
        if self.cached_bytes > self.cache_limit:
            self.cache.clear()
            self.cached_bytes = 0
        self.cache[key] = hit
        return hit

    def time_to_next_event(self, nf: int, t: float) -> tuple[float, bool] | None:
        """From ``t`` (ns) to the next event, in ns, and whether flows drain at it; None
        when nothing is left to happen (no active flow, no scheduled event)."""
        heap = self.heap
        t_heap = heap[0][0] if heap else np.inf
        if nf:
            step = next_finish(self.f_rem, self.r_f, self.f_st, self.rep_start, t, t_heap,
                               self.tolerance, *self.known)
            self.known = (np.inf, -1)  # the flows drain from here on: look afresh next time
            return step
        if heap:
            return t_heap - t, False
        return None

    def carry_load(self, t: float, dt: float) -> None:
        """The arcs carry the current load for ``dt`` ns from ``t``: per-arc bytes and
        peaks, the timeline interval (bytes per arc group), the recorded interval."""
        load = self.load
        self.arc_bytes += load * dt
        np.maximum(self.arc_peak, load, out=self.arc_peak)
        self.tl_t.append((t, t + dt))
        self.tl_g.append(np.bincount(self.group, weights=load * dt, minlength=self.n_groups))
        if self.record:
            self.intervals.append((t, t + dt, load.copy()))

    def retire_drained(self, fin: np.ndarray, tfin: np.ndarray, dt: float, t_prev: float,
                       t: float) -> None:
        """The flows ``fin`` drained during the event from ``t_prev`` to ``t`` (ns), each
        ``tfin`` ns after ``t_prev``: their bytes past the drain time are taken back, their
        transfers' delivery times (plus path latency), lowest rates and bottlenecks
        updated, and they leave the active set; a stage with no flow left is done."""
        f_cls = self.f_cls
        # the flows that drained before the event's end did not carry load after
        # their drain time: take back what the interval counted past it
        over = self.r_f[fin] * np.maximum(dt - tfin, 0.0)
        if dt > 0 and over.any():
            extra = self.rows_all[f_cls[fin]].T @ over
            self.arc_bytes -= extra
            self.tl_g[-1] = self.tl_g[-1] - np.bincount(self.group, weights=extra,
                                                        minlength=self.n_groups)
        fs = self.f_st[fin]
        fx = self.f_x[fin]
        x_minr, f_minr = self.x_minr, self.f_minr
        done_at = t_prev + tfin + self.conn_lat[self.xfer_conn[fx]]
        np.fmax.at(self.x_end, fx, done_at)
        np.maximum.at(self.max_end, fs, done_at)
        np.minimum.at(x_minr, fx, f_minr[fin])
        self.x_bott[fx[f_minr[fin] <= x_minr[fx]]] = self.f_bott[fin][f_minr[fin] <= x_minr[fx]]
        np.subtract.at(self.counts, f_cls[fin], 1)
        np.subtract.at(self.outstanding, fs, 1)
        with np.errstate(over="ignore"):
            self.zkey = self.zkey - self.zob[:, f_cls[fin]].sum(axis=1)
        self.dead[fin] = True
        self.f_rem[fin] = np.inf
        self.r_f[fin] = 1.0
        self.n_dead += len(fin)
        if self.n_dead * 4 > len(f_cls):
            self.compact()
        involved = {int(s) for s in np.unique(fs)}
        for s in involved:
            if self.outstanding[s] == 0:
                self.push(max(self.max_end[s], t), _DONE, s)
        self.touched(involved)
        self.dirty = True

    def handle_due_events(self, t: float) -> float:
        """Run every scheduled event due by ``t`` (ns): a stage starts, or a repetition
        ends and the next starts, or the stage ends and its successors may start. Returns
        the time after them (later than ``t`` when repetitions were skipped)."""
        heap, dag = self.heap, self.dag
        while heap and heap[0][0] <= t:
            _, _, kind, s = heapq.heappop(heap)
            self.events += 1
            self.touched({s})
            if kind == _START:
                t = self.start(s, t)
                self.dirty = True
                continue
            self.reps_done[s] += 1
            if self.reps_done[s] < dag.repeat[s]:
                t = self.start(s, t)
                self.dirty = True
                continue
            self.end_stage(s, t)
        return t

    def end_stage(self, s: int, t: float) -> None:
        """Stage ``s`` finished its last repetition at ``t`` (ns): successors whose every
        predecessor is done start at ``t``."""
        self.st_end[s] = t
        self.running.discard(s)
        self.expanded.pop(s, None)
        self.snap.pop(s, None)
        if self.progress is not None:
            self.progress(1)
        succ_ptr, npred = self.succ_ptr, self.npred
        for c in self.succ_idx[succ_ptr[s]:succ_ptr[s + 1]]:
            npred[c] -= 1
            if npred[c] == 0:
                self.push(t, _START, int(c))

    def start(self, s: int, t: float) -> float:
        """Start (a repetition of) stage s at t; returns the time after any skipped reps."""
        dag = self.dag
        self.compact()
        if np.isnan(self.st_start[s]):
            self.st_start[s] = t
        self.running.add(s)
        if dag.stage_kind[s] == COMPUTE:
            self.push(t + dag.duration_ns[s], _DONE, s)
            return t
        if s not in self.expanded:
            xptr = dag.xfer_ptr
            xs = np.arange(xptr[s], xptr[s + 1])
            cls, nq = _expand(self.xfer_conn[xs], self.conn_ptr)
            self.expanded[s] = (cls, np.repeat(xs, nq), np.repeat(dag.size_bytes[xs] / nq, nq))
            self.x_start[xs] = t
        cls, fx, size = self.expanded[s]
        if self.reps_done[s] >= 1 and self.clean.get(s) and s in self.snap:
            t = self.skip(s, t)
        if not len(cls):
            self.push(t, _DONE, s)
            return t
        self.clean[s] = True
        self.snap[s] = (self.f_uid.copy(), self.f_rem.copy(), self.arc_bytes.copy(),
                        np.array([t]))
        self.rep_start[s] = t
        self.outstanding[s] = len(cls)
        self.max_end[s] = t
        self._add_flows(s, cls, fx, size)
        return t

    def _add_flows(self, s: int, cls: np.ndarray, fx: np.ndarray, size: np.ndarray) -> None:
        """Flows of stage ``s`` join the active set: rows ``cls``, transfers ``fx``,
        ``size`` bytes each."""
        n = len(cls)
        self.f_cls = np.concatenate([self.f_cls, cls])
        self.f_rem = np.concatenate([self.f_rem, size])
        self.f_x = np.concatenate([self.f_x, fx])
        self.f_st = np.concatenate([self.f_st, np.full(n, s, dtype=np.int64)])
        self.f_uid = np.concatenate([self.f_uid, np.arange(self.next_uid, self.next_uid + n)])
        self.f_minr = np.concatenate([self.f_minr, np.full(n, np.inf)])
        self.f_bott = np.concatenate([self.f_bott, np.full(n, -1, dtype=np.int64)])
        self.dead = np.concatenate([self.dead, np.zeros(n, dtype=bool)])
        self.next_uid += n
        np.add.at(self.counts, cls, 1)
        with np.errstate(over="ignore"):
            self.zkey = self.zkey + self.zob[:, cls].sum(axis=1)

    def compact(self) -> None:
        """Drop finished flows from the per-flow arrays (they linger, marked dead, until
        a quarter of the arrays is dead or a stage starts)."""
        if not self.n_dead:
            return
        keep = ~self.dead
        self.f_cls, self.f_rem = self.f_cls[keep], self.f_rem[keep]
        self.f_x, self.f_st = self.f_x[keep], self.f_st[keep]
        self.f_uid, self.f_minr, self.f_bott = (self.f_uid[keep], self.f_minr[keep],
                                                self.f_bott[keep])
        if len(self.r_f) == len(keep):
            self.r_f = self.r_f[keep]
        self.dead = self.dead[keep]
        self.n_dead = 0

    def skip(self, s: int, t: float) -> float:
        """Jump over whole repetitions of s that would repeat the last one exactly."""
        uid0, rem0, bytes0, (t0,) = self.snap[s]
        if not np.array_equal(uid0, self.f_uid):
            return t
        d = t - t0
        left = int(self.dag.repeat[s] - self.reps_done[s] - 1)
        if d <= 0 or left < 1:
            return t
        m = left
        if self.heap:
            m = min(m, int((self.heap[0][0] - t) // d))
        cons = rem0 - self.f_rem
        pos = cons > 0
        if pos.any():
            m = min(m, int(np.min(np.floor(self.f_rem[pos] / cons[pos]))) - 1)
        if m < 1:
            return t
        delta = self.arc_bytes - bytes0
        self.arc_bytes[:] += m * delta
        self.f_rem = self.f_rem - m * cons
        self.tl_t.append((t, t + m * d))
        self.tl_g.append(m * np.bincount(self.group, weights=delta, minlength=self.n_groups))
        if self.record:
            self.intervals.append((t, t + m * d, delta / d))
        self.reps_done[s] += m
        self.skipped += m
        return t + m * d

    def result(self) -> FlowRun:
        """The raw outcome: per stage and transfer times (ns), lowest rates (Gb/s) and
        bottleneck arcs, per-arc bytes and peak (Gb/s), the timeline."""
        tl = np.array(self.tl_t, dtype=np.float64).reshape(-1, 2)
        tg = np.array(self.tl_g, dtype=np.float64).reshape(len(self.tl_t), self.n_groups)
        x_minr = self.x_minr
        with np.errstate(invalid="ignore"):
            min_gbps = np.where(np.isfinite(x_minr), x_minr * 8.0, np.nan)
        return FlowRun(self.st_start, self.st_end, self.x_start, self.x_end, min_gbps,
                       self.x_bott, self.arc_bytes, self.arc_peak * 8.0, tl, tg, self.events,
                       self.solves, self.skipped, self.intervals)
