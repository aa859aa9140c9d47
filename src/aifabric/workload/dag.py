"""A workload as a DAG of transfers, shared by every simulator.

A *transfer* moves ``size_bytes`` from one GPU to another. Transfers that start together
form a *stage*; a stage starts when every stage it depends on has finished (a barrier:
collectives are barrier-bound, the slowest transfer decides) and is finished when all its
transfers have been delivered. A stage may *repeat*: the 2(n-1) identical steps of a ring
are one stage with ``repeat = 2(n-1)``, each repetition starting when the previous one
finished — so a simulator sees that the steps are identical and can reuse its work.
A stage with no transfers and a ``duration_ns`` is compute (or any fixed delay).

GPU identifiers are whatever the caller uses (fabric GPU node ids in a scenario); the
DAG never looks them up. Everything is held in numpy arrays: a 1,024-GPU All-to-All is
one stage of 1,047,552 transfers, not a million Python objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Collective", "DAGBuilder", "TransferDAG"]

#: stage kinds
COMM, COMPUTE = 0, 1


@dataclass(frozen=True)
class Collective:
    """One collective operation as it appears in the results.

    ``size_bytes`` follows nccl-tests: the per-GPU buffer (AllReduce, Broadcast, the
    All-to-All send buffer), the output buffer (AllGather) or the input buffer
    (ReduceScatter). ``busbw_factor`` turns algbw into busbw the nccl-tests way.
    """

    name: str
    op: str
    algorithm: str
    n_gpus: int
    size_bytes: int
    channels: int
    job: int
    stages: tuple[int, ...]
    busbw_factor: float


@dataclass
class TransferDAG:
    """Stages, their transfers and dependencies, all as arrays.

    Stage arrays (length ``n_stages``): ``stage_kind`` (0 comm, 1 compute), ``repeat``,
    ``duration_ns`` (compute), ``stage_job``, ``stage_coll`` (-1 if none),
    ``stage_label``; ``xfer_ptr`` (``n_stages + 1``): the transfers of stage s are
    ``xfer_ptr[s]:xfer_ptr[s+1]``; ``dep_ptr``/``dep_idx``: the stages s depends on are
    ``dep_idx[dep_ptr[s]:dep_ptr[s+1]]``. Transfer arrays (length ``n_transfers``):
    ``src``, ``dst``, ``size_bytes`` (per repetition), ``xfer_stage``.
    """

    stage_kind: np.ndarray
    repeat: np.ndarray
    duration_ns: np.ndarray
    stage_job: np.ndarray
    stage_coll: np.ndarray
    stage_label: list[str]
    xfer_ptr: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    collectives: list[Collective] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)

    @property
    def n_stages(self) -> int:
        return len(self.repeat)

    @property
    def n_transfers(self) -> int:
        return len(self.src)

    @property
    def xfer_stage(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_stages, dtype=np.int64), np.diff(self.xfer_ptr))

    def total_bytes(self) -> float:
        """Bytes moved by the whole DAG (every repetition counted)."""
        return float(np.sum(self.size_bytes * self.repeat[self.xfer_stage]))

    def successors(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR of successors: stages depending on s are ``idx[ptr[s]:ptr[s+1]]``."""
        child = np.repeat(np.arange(self.n_stages), np.diff(self.dep_ptr))
        order = np.argsort(self.dep_idx, kind="stable")
        ptr = np.zeros(self.n_stages + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.dep_idx, minlength=self.n_stages), out=ptr[1:])
        return ptr, child[order]

    def topological_order(self) -> np.ndarray:
        """Stages in an order where every stage comes after its dependencies."""
        # the builder only lets a stage depend on earlier stages
        return np.arange(self.n_stages)

    def critical_path_ns(self, stage_time_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and end of each stage when stage s takes ``stage_time_ns[s]`` (all
        repetitions) and starts as soon as its dependencies end."""
        start = np.zeros(self.n_stages)
        end = np.zeros(self.n_stages)
        for s in range(self.n_stages):  # stages, not transfers: thousands at most
            deps = self.dep_idx[self.dep_ptr[s]:self.dep_ptr[s + 1]]
            start[s] = end[deps].max() if len(deps) else 0.0
            end[s] = start[s] + stage_time_ns[s]
        return start, end


class DAGBuilder:
    """Collects stages; :meth:`build` freezes them into a :class:`TransferDAG`."""

    def __init__(self) -> None:
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._size: list[np.ndarray] = []
        self._kind: list[int] = []
        self._repeat: list[int] = []
        self._dur: list[float] = []
        self._job: list[int] = []
        self._coll: list[int] = []
        self._label: list[str] = []
        self._deps: list[np.ndarray] = []
        self.collectives: list[Collective] = []
        self.jobs: list[str] = []
        self.job = -1  # the job that new stages belong to
        self.coll = -1  # the collective that new stages belong to

    @property
    def n_stages(self) -> int:
        return len(self._repeat)

    def _deps_of(self, deps: Iterable[int] | int | None) -> np.ndarray:
        if deps is None:
            return np.zeros(0, dtype=np.int64)
        arr = np.unique(np.atleast_1d(np.asarray(list(deps) if not isinstance(deps, int)
                                                 else [deps], dtype=np.int64)))
        if len(arr) and (arr.min() < 0 or arr.max() >= self.n_stages):
            raise ValueError(f"dependency on unknown stage: {arr}")
        return arr

    def transfers(self, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
                  size_bytes: float | np.ndarray, *, deps: Iterable[int] | int | None = None,
                  repeat: int = 1, label: str = "") -> int:
        """Add a stage of transfers ``src[i] -> dst[i]`` (self-transfers dropped);
        returns its id."""
        s = np.asarray(src, dtype=np.int64).ravel()
        d = np.asarray(dst, dtype=np.int64).ravel()
        z = np.broadcast_to(np.asarray(size_bytes, dtype=np.float64), s.shape)
        if s.shape != d.shape:
            raise ValueError("src and dst differ in length")
        if repeat < 1:
            raise ValueError("repeat must be >= 1")
        keep = (s != d) & (z > 0)
        self._src.append(s[keep])
        self._dst.append(d[keep])
        self._size.append(np.array(z[keep]))
        self._kind.append(COMM)
        self._repeat.append(int(repeat))
        self._dur.append(0.0)
        self._push_meta(deps, label)
        return self.n_stages - 1

    def compute(self, duration_ns: float, *, deps: Iterable[int] | int | None = None,
                label: str = "compute") -> int:
        """Add a compute stage (a fixed delay); returns its id."""
        if duration_ns < 0:
            raise ValueError("duration must be >= 0")
        for lst in (self._src, self._dst):
            lst.append(np.zeros(0, dtype=np.int64))
        self._size.append(np.zeros(0))
        self._kind.append(COMPUTE)
        self._repeat.append(1)
        self._dur.append(float(duration_ns))
        self._push_meta(deps, label)
        return self.n_stages - 1

    def barrier(self, deps: Iterable[int] | int | None, label: str = "barrier") -> int:
        """A zero-time stage joining several dependencies into one."""
        return self.compute(0.0, deps=deps, label=label)

    def _push_meta(self, deps: Iterable[int] | int | None, label: str) -> None:
        self._deps.append(self._deps_of(deps))
        self._job.append(self.job)
        self._coll.append(self.coll)
        self._label.append(label)

    def add_collective(self, c: Collective) -> int:
        self.collectives.append(c)
        return len(self.collectives) - 1

    def build(self) -> TransferDAG:
        counts = np.array([len(s) for s in self._src], dtype=np.int64)
        ptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        dcounts = np.array([len(d) for d in self._deps], dtype=np.int64)
        dptr = np.zeros(len(dcounts) + 1, dtype=np.int64)
        np.cumsum(dcounts, out=dptr[1:])
        def cat(xs, dt):
            return (np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
        return TransferDAG(
            stage_kind=np.array(self._kind, dtype=np.int8),
            repeat=np.array(self._repeat, dtype=np.int64),
            duration_ns=np.array(self._dur, dtype=np.float64),
            stage_job=np.array(self._job, dtype=np.int32),
            stage_coll=np.array(self._coll, dtype=np.int32),
            stage_label=list(self._label),
            xfer_ptr=ptr, dep_ptr=dptr, dep_idx=cat(self._deps, np.int64),
            src=cat(self._src, np.int64), dst=cat(self._dst, np.int64),
            size_bytes=cat(self._size, np.float64),
            collectives=list(self.collectives), jobs=list(self.jobs))
