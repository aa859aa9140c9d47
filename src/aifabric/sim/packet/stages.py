"""What both packet-level DAG drivers keep per stage and per transfer: when each stage
started and ended, each transfer's start, end and slowest repetition, repetitions and
the successors a finished stage releases. The RoCE/InfiniBand driver
(:mod:`aifabric.sim.packet.run`) and the scheduled fabric's
(:mod:`aifabric.sim.packet.scheduled.run`) differ only in how a stage's transfers are
started and how a transfer is known to be delivered."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from aifabric.workload.dag import TransferDAG

__all__ = ["StageBook"]


class StageBook:
    """Per-stage and per-transfer bookkeeping of a DAG run; subclasses give
    :meth:`now_ns` and :meth:`start`."""

    def __init__(self, dag: TransferDAG, progress: Callable[[int], None] | None) -> None:
        S, T = dag.n_stages, dag.n_transfers
        self.dag, self.progress = dag, progress
        self.npred = np.diff(dag.dep_ptr).astype(np.int64)
        self.succ_ptr, self.succ_idx = dag.successors()
        self.st_start = np.full(S, np.nan)
        self.st_end = np.full(S, np.nan)
        self.x_start = np.full(T, np.nan)
        self.x_end = np.full(T, np.nan)
        self.x_minr = np.full(T, np.inf)
        self.reps = np.zeros(S, dtype=np.int64)
        self.outstanding = np.zeros(S, dtype=np.int64)
        self.rep_t0 = np.zeros(S)
        self.stages_left = S

    def now_ns(self) -> float:
        raise NotImplementedError

    def start(self, s: int) -> None:
        raise NotImplementedError

    def begin(self, s: int) -> float:
        """A repetition of stage ``s`` starts now (returned, ns)."""
        t = self.now_ns()
        if np.isnan(self.st_start[s]):
            self.st_start[s] = t
        self.rep_t0[s] = t
        return t

    def delivered(self, s: int, x: int) -> None:
        """Transfer ``x`` of stage ``s`` has reached its destination (now)."""
        t = self.now_ns()
        dur = t - self.rep_t0[s]
        if dur > 0:
            self.x_minr[x] = min(self.x_minr[x], float(self.dag.size_bytes[x]) * 8 / dur)
        self.x_end[x] = t
        self.outstanding[s] -= 1
        if self.outstanding[s] == 0:
            self.finish_rep(s)

    def stage_end_ns(self, s: int) -> float:
        """When stage ``s``, finished now, ended."""
        return self.now_ns()

    def all_done(self) -> None:
        """The last stage has finished."""

    def finish_rep(self, s: int) -> None:
        """A repetition of stage ``s`` is done: the next one, or the stage ends and
        releases its successors."""
        self.reps[s] += 1
        if self.reps[s] < self.dag.repeat[s]:
            self.start(s)
            return
        self.st_end[s] = self.stage_end_ns(s)
        self.stages_left -= 1
        if self.progress is not None:
            self.progress(1)
        if self.stages_left == 0:
            self.all_done()
        for c in self.succ_idx[self.succ_ptr[s]:self.succ_ptr[s + 1]]:
            self.npred[c] -= 1
            if self.npred[c] == 0:
                self.start(int(c))
