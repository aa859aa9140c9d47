"""Double-binary-tree AllReduce (NCCL's tree algorithm), pipelined in chunks.

Two binary trees span the n GPUs; each carries half of the buffer. Tree 1 is NCCL's
binary tree on the GPU list (odd positions are leaves), tree 2 the same on the reversed
list, so a GPU that is a leaf in one tree is an inner node in the other and each GPU
sends and receives about S bytes per phase. A chunk is reduced up the tree, level by
level, then broadcast down; chunks follow each other in a pipeline, so after the pipe
fills every level moves one chunk per step. The steady-state steps are identical and
form one repeating stage; the fill and drain steps are stages of their own.
"""

from __future__ import annotations

import math

import numpy as np

from aifabric.workload.dag import DAGBuilder

__all__ = ["binary_tree", "double_binary_tree"]


def binary_tree(n: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's binary tree on positions 0..n-1: (parent, depth); the root (0) has parent -1.

    Position r with lowest set bit b has children r - b/2 and r + b/2 and parent
    ``(r ^ b) | 2b`` (or ``r ^ b`` when that is past the end): odd positions are the
    leaves, so the tree on the reversed list has the other half as leaves.
    """
    r = np.arange(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return parent, np.zeros(n, dtype=np.int64)
    low = r & -r
    up = (r ^ low) | (low << 1)
    up = np.where(up >= n, r ^ low, up)
    top = 1 << (int(n - 1).bit_length() - 1)  # the highest power of two below n
    up[top] = 0
    parent[1:] = up[1:]
    depth = np.zeros(n, dtype=np.int64)
    cur = parent.copy()
    while (cur >= 0).any():  # log2(n) rounds, vectorised over positions
        depth += cur >= 0
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
    return parent, depth


def double_binary_tree(b: DAGBuilder, gpus: np.ndarray, size_bytes: float, *,
                       chunk_bytes: float = 4 << 20, deps=None) -> int:
    """Pipelined double-binary-tree AllReduce of ``size_bytes``; returns the last stage."""
    gpus = np.asarray(gpus, dtype=np.int64)
    n = len(gpus)
    if n < 2:
        return b.barrier(deps, label="tree allreduce (no-op)")
    par, dep = binary_tree(n)
    trees = [(gpus, par, dep), (gpus[::-1], par, dep)]
    depth = int(dep.max())  # edges on the longest root path
    half = size_bytes / 2
    k = max(1, math.ceil(half / chunk_bytes))
    chunk = half / k
    # edge e: child -> parent at level dep[child] (1..D). Chunk c crosses the up edge of
    # level L at step c + (D - L) and the down edge of level L at step c + D + (L - 1).
    child = np.flatnonzero(par >= 0)
    lev = dep[child]
    total_steps = k + 2 * depth - 1

    def edges_at(step: int) -> tuple[np.ndarray, np.ndarray]:
        up_c = step - (depth - lev)
        dn_c = step - depth - (lev - 1)
        su, sd = (up_c >= 0) & (up_c < k), (dn_c >= 0) & (dn_c < k)
        srcs, dsts = [], []
        for g, _p, _ in trees:
            srcs += [g[child[su]], g[par[child[sd]]]]
            dsts += [g[par[child[su]]], g[child[sd]]]
        return np.concatenate(srcs), np.concatenate(dsts)

    # steps whose active edge set is the same as the next one's merge into a repeat
    last = deps
    step = 0
    while step < total_steps:
        src, dst = edges_at(step)
        sig = (src.tobytes(), dst.tobytes())
        run = 1
        while step + run < total_steps:
            s2, d2 = edges_at(step + run)
            if (s2.tobytes(), d2.tobytes()) != sig:
                break
            run += 1
        last = b.transfers(src, dst, chunk, deps=last, repeat=run,
                           label=f"tree allreduce step {step}")
        step += run
    return last
