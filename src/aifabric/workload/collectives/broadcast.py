"""Broadcast (pipelined chain from the root, as NCCL's ring broadcast) and
point-to-point send/recv."""

from __future__ import annotations

import math

import numpy as np

from aifabric.workload.dag import DAGBuilder

__all__ = ["broadcast", "p2p"]


def broadcast(b: DAGBuilder, gpus: np.ndarray, size_bytes: float, *, root: int = 0,
              chunk_bytes: float = 4 << 20, deps=None) -> int:
    """Broadcast from ``gpus[root]`` along the chain root -> root+1 -> ... in chunks.

    Chunk j crosses edge e at step j + e; a step lasts until its slowest edge is done.
    Steps with the same active edges merge into one repeating stage (fill, steady, drain).
    """
    gpus = np.roll(np.asarray(gpus, dtype=np.int64), -root)
    n = len(gpus)
    if n < 2:
        return b.barrier(deps, label="broadcast (no-op)")
    k = max(1, math.ceil(size_bytes / chunk_bytes))
    chunk = size_bytes / k
    e = np.arange(n - 1)
    last = deps
    step, total = 0, k + n - 2
    while step < total:
        act = (step - e >= 0) & (step - e < k)
        run = 1
        while step + run < total:
            nxt = (step + run - e >= 0) & (step + run - e < k)
            if not np.array_equal(nxt, act):
                break
            run += 1
        last = b.transfers(gpus[e[act]], gpus[e[act] + 1], chunk, deps=last, repeat=run,
                           label=f"broadcast step {step}")
        step += run
    return last


def p2p(b: DAGBuilder, src: np.ndarray, dst: np.ndarray, size_bytes: float, *,
        deps=None) -> int:
    """Point-to-point: ``src[i]`` sends ``size_bytes`` to ``dst[i]``, all at once."""
    return b.transfers(src, dst, size_bytes, deps=deps, label="p2p")
