"""How many transfer rows a collective adds to a DAG (an upper bound, in closed form):
what the size guard (:mod:`aifabric.guard`) turns into bytes before anything is
compiled."""

from __future__ import annotations

import math

import numpy as np

from aifabric.workload.collectives import ALGORITHMS
from aifabric.workload.collectives.tree import binary_tree

__all__ = ["collective_rows", "tree_rows"]


def collective_rows(op: str, algorithm: str | None, n: int, *, channels: int = 1,
                    size_bytes: float = 0, chunk_bytes: float = 4 << 20,
                    groups: int = 1) -> int:
    """Transfer rows (an upper bound) the DAG gets for one collective of ``n`` GPUs
    (``groups`` rows of a grouped ring or All-to-All)."""
    if n < 2:
        return 0
    algorithm = algorithm or ALGORITHMS.get(op, ("direct",))[0]
    lg = max(1, (n - 1).bit_length())
    if op == "alltoall":
        return groups * n * (n - 1)
    if op == "p2p":
        return n
    if op == "broadcast":
        k = max(1, math.ceil(size_bytes / chunk_bytes))
        return (n - 1) * min(k, n) + n
    if algorithm == "ring":
        return groups * n * channels
    if algorithm == "tree":
        return tree_rows(n, size_bytes, chunk_bytes)
    if algorithm == "halving_doubling":
        return (2 if op == "allreduce" else 1) * n * lg
    if algorithm == "hierarchical":
        return n * (2 + channels)
    if algorithm == "sharp":  # 4 host arcs per GPU and at most 2 switch arcs per GPU
        return 6 * n
    return n * n


def tree_rows(n: int, size_bytes: float, chunk_bytes: float) -> int:
    """Rows of the pipelined double binary tree: the active edge set changes only where a
    level's up or down window opens or closes, so at most 4 x depth + 1 distinct stages;
    each stage holds the active edges of both trees (O(n) work for the tree's levels)."""
    par, dep = binary_tree(n)
    D = int(dep.max())
    k = max(1, math.ceil(size_bytes / 2 / chunk_bytes))
    per_level = np.bincount(dep[par >= 0], minlength=D + 1)[1:] * 2  # two trees
    lv = np.arange(1, D + 1)
    starts = np.concatenate([D - lv, D + lv - 1])  # up window, down window of each level
    ends = starts + k
    cnt = np.concatenate([per_level, per_level])
    total = k + 2 * D - 1
    bounds = np.unique(np.clip(np.concatenate([starts, ends, [0, total]]), 0, total))
    at = bounds[:-1, None]
    return int((((starts <= at) & (at < ends)) * cnt).sum())
