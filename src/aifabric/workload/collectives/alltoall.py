"""Direct All-to-All: every GPU sends a distinct S/n block to every other GPU at once
(n(n-1) transfers in one stage), as NCCL's grouped send/recv does."""

from __future__ import annotations

import numpy as np

from aifabric.workload.dag import DAGBuilder

__all__ = ["alltoall"]


def alltoall(b: DAGBuilder, gpus: np.ndarray, size_bytes: float, *, deps=None) -> int:
    """All-to-All of a ``size_bytes`` send buffer per GPU (``gpus`` 2-D: one per row,
    all in one stage); returns its stage."""
    gpus = np.atleast_2d(np.asarray(gpus, dtype=np.int64))  # one row per group
    n = gpus.shape[1]
    if n < 2:
        return b.barrier(deps, label="alltoall (no-op)")
    src = np.repeat(gpus, n, axis=1).ravel()
    dst = np.tile(gpus, (1, n)).ravel()
    return b.transfers(src, dst, size_bytes / n, deps=deps, label="alltoall")
