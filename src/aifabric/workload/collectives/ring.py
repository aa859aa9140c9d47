"""Ring collectives: ReduceScatter, AllGather, AllReduce (= ReduceScatter + AllGather).

On n GPUs a ring ReduceScatter (or AllGather) takes n-1 steps; in each step every GPU
sends S/n bytes to its successor. AllReduce takes 2(n-1) such steps. With C *channels*
(NCCL runs several rings in parallel) each channel carries S/C, so a step moves
S/(n*C) per GPU per channel. All steps are identical: they are one stage that repeats.

Ring order follows NCCL on rail-optimized fabrics: GPUs of one host are consecutive,
and channel c enters host h at local GPU ``(c - h) mod k`` and leaves it from the GPU
just before, so the host-to-host hop joins two GPUs of the same local index (rail):
every channel's inter-host traffic stays on one rail, and the C channels use C rails.
"""

from __future__ import annotations

import numpy as np

from aifabric.workload.dag import DAGBuilder

__all__ = ["ring", "ring_orders", "ring_pairs", "ring_stage"]


def ring_orders(n: int, channels: int, host: np.ndarray | None = None,
                local: np.ndarray | None = None) -> np.ndarray:
    """The ring of each channel as positions into the GPU list: shape (channels, n).

    ``host``/``local`` (per GPU: host index and GPU index in its host) make the rings
    rail-aware when every host holds the same set of local indices; otherwise every
    channel uses the list order.
    """
    base = np.arange(n)
    if host is None or local is None or n <= 1:
        return np.tile(base, (channels, 1))
    host = np.asarray(host)
    local = np.asarray(local)
    hosts, first = np.unique(host, return_index=True)
    hosts = hosts[np.argsort(first)]  # hosts in order of first appearance
    m = len(hosts)
    k = n // m
    order = np.lexsort((local, _rank_of(host, hosts)))
    grid = order.reshape(m, k) if k * m == n else None
    if grid is None or not (local[grid] == local[grid[0]]).all() or k == 1:
        return np.tile(np.arange(n) if grid is None else order, (channels, 1))
    out = np.empty((channels, n), dtype=np.int64)
    col = np.arange(k)
    for c in range(channels):
        shift = (c - np.arange(m)) % k  # entry position per host
        idx = (shift[:, None] + col[None, :]) % k
        out[c] = np.take_along_axis(grid, idx, axis=1).ravel()
    return out


def _rank_of(host: np.ndarray, hosts_in_order: np.ndarray) -> np.ndarray:
    pos = {int(h): i for i, h in enumerate(hosts_in_order)}
    uniq, inv = np.unique(host, return_inverse=True)
    return np.array([pos[int(u)] for u in uniq])[inv]


def ring_pairs(gpus: np.ndarray, channels: int = 1, host: np.ndarray | None = None,
               local: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of every ring edge of every channel; ``gpus`` may be 2-D (one row per
    independent group, e.g. the TP groups of all DP replicas), all rings in one list."""
    gpus = np.asarray(gpus, dtype=np.int64)
    if gpus.ndim == 1:
        gpus = gpus[None, :]
        host = None if host is None else np.asarray(host)[None, :]
        local = None if local is None else np.asarray(local)[None, :]
    srcs, dsts = [], []
    for i, row in enumerate(gpus):  # groups of one collective: a few dozen at most
        orders = ring_orders(len(row), channels, None if host is None else host[i],
                             None if local is None else local[i])
        srcs.append(row[orders].ravel())
        dsts.append(row[np.roll(orders, -1, axis=1)].ravel())
    return np.concatenate(srcs), np.concatenate(dsts)


def ring_stage(b: DAGBuilder, gpus: np.ndarray, step_bytes: float, steps: int, *,
               channels: int = 1, host: np.ndarray | None = None,
               local: np.ndarray | None = None, deps=None, label: str = "ring") -> int:
    """One repeating stage: ``steps`` ring steps of ``step_bytes`` per GPU per channel."""
    gpus = np.asarray(gpus, dtype=np.int64)
    n = gpus.shape[-1]
    if n < 2 or steps < 1:
        return b.barrier(deps, label=f"{label} (no-op)")
    src, dst = ring_pairs(gpus, channels, host, local)
    return b.transfers(src, dst, step_bytes, deps=deps, repeat=steps, label=label)


def ring(b: DAGBuilder, op: str, gpus: np.ndarray, size_bytes: float, *, channels: int = 1,
         host: np.ndarray | None = None, local: np.ndarray | None = None, deps=None) -> int:
    """Ring ``allreduce``, ``reduce_scatter`` or ``allgather``; returns the last stage.
    ``gpus`` 2-D: one ring collective per row, all in the same stages."""
    n = np.asarray(gpus).shape[-1]
    steps = {"allreduce": 2 * (n - 1), "reduce_scatter": n - 1, "allgather": n - 1}[op]
    return ring_stage(b, gpus, size_bytes / (n * channels), steps, channels=channels,
                      host=host, local=local, deps=deps, label=f"ring {op}")
