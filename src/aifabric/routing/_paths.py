"""Collecting per-flow paths hop by hop into one CSR layout (no per-flow Python)."""

from __future__ import annotations

import numpy as np

from aifabric.routing.flows import group_rank

__all__ = ["PathBuilder"]


class PathBuilder:
    """Chunks of (flow, arc, fraction) appended in hop order; :meth:`build` lays them out
    flow by flow, each flow's arcs in the order they were appended."""

    def __init__(self, n_flows: int):
        self.n = n_flows
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray | None, bool]] = []

    def add(self, flow: np.ndarray, arc: np.ndarray, frac: np.ndarray | None = None, *,
            unique: bool = True) -> None:
        """Append arcs; ``unique``: every flow appears at most once in this chunk."""
        if len(flow):
            self._chunks.append((np.asarray(flow, dtype=np.int64),
                                 np.asarray(arc, dtype=np.int64), frac, unique))

    def build(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(ptr, arcs, fractions)``; fractions is None when every fraction is 1."""
        n = self.n
        counts = np.zeros(n, dtype=np.int64)
        for fl, _, _, _ in self._chunks:
            counts += np.bincount(fl, minlength=n)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        total = int(ptr[-1])
        arcs = np.empty(total, dtype=np.int64)
        any_frac = any(fr is not None for _, _, fr, _ in self._chunks)
        frac = np.ones(total) if any_frac else None
        filled = np.zeros(n, dtype=np.int64)
        for fl, arc, fr, unique in self._chunks:
            pos = ptr[fl] + filled[fl]
            if unique:
                filled[fl] += 1
            else:
                pos = pos + group_rank(fl)
                filled += np.bincount(fl, minlength=n)
            arcs[pos] = arc
            if fr is not None:
                assert frac is not None
                frac[pos] = fr
        self._chunks.clear()
        return ptr, arcs, frac
