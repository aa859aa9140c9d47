"""Hierarchical, rail-aware AllReduce (what NCCL does on rail-optimized fabrics).

1. ReduceScatter inside each host over NVLink (ring of the host's k GPUs): each GPU
   ends with S/k of the host's sum.
2. AllReduce across hosts per rail: GPUs of the same local index (the same rail) form
   one ring over the m hosts and all-reduce their S/k shard; the k rails run at once,
   each on its own NIC and ToR.
3. AllGather inside each host over NVLink.

Inter-host bytes per GPU: 2(m-1)/m x S/k instead of 2(n-1)/n x S for a flat ring.
"""

from __future__ import annotations

import numpy as np

from aifabric.workload.dag import DAGBuilder

__all__ = ["hierarchical_allreduce"]


def hierarchical_allreduce(b: DAGBuilder, gpus: np.ndarray, size_bytes: float, *,
                           host: np.ndarray, local: np.ndarray, channels: int = 1,
                           deps=None) -> int:
    """Returns the last stage; needs every host to hold the same local GPU indices."""
    gpus = np.asarray(gpus, dtype=np.int64)
    host, local = np.asarray(host), np.asarray(local)
    n = len(gpus)
    hosts = np.unique(host)
    m = len(hosts)
    k = n // m
    grid = np.lexsort((local, host))
    grid = grid.reshape(m, k) if m * k == n else None
    if grid is None or not (local[grid] == local[grid[0]]).all():
        raise ValueError("hierarchical needs the same GPUs (local indices) on every host")
    last = deps
    if k > 1:  # intra-host ReduceScatter: ring within each host, k-1 steps of S/k
        src = gpus[grid].ravel()
        dst = gpus[np.roll(grid, -1, axis=1)].ravel()
        last = b.transfers(src, dst, size_bytes / k, deps=last, repeat=k - 1,
                           label="hier intra reduce-scatter")
    if m > 1:  # per-rail ring AllReduce of S/k over m hosts, `channels` rings per rail
        rows = np.tile(grid.T, (channels, 1))  # (channels*k, m): one ring per rail/channel
        src = gpus[rows].ravel()
        dst = gpus[np.roll(rows, -1, axis=1)].ravel()
        last = b.transfers(src, dst, size_bytes / k / (m * channels), deps=last,
                           repeat=2 * (m - 1), label="hier inter-host allreduce (per rail)")
    if k > 1:
        src = gpus[grid].ravel()
        dst = gpus[np.roll(grid, -1, axis=1)].ravel()
        last = b.transfers(src, dst, size_bytes / k, deps=last, repeat=k - 1,
                           label="hier intra allgather")
    return last
