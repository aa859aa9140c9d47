"""A hand-built fabric for engine tests: GPUs on one ideal switch (a single-switch star).

GPU g owns arc 2g (its uplink, g -> switch) and arc 2g+1 (its downlink); a transfer
g -> h crosses arcs 2g and 2h+1, so the only contention is at the endpoints.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from aifabric.sim.flow.engine import Paths


def star_paths(dag, n: int, gbps: float = 400.0, latency_ns: float = 1000.0,
               qps: int = 1) -> tuple[Paths, np.ndarray]:
    """Paths of every distinct (src, dst) of ``dag`` on an n-GPU star; returns
    (paths, connection of each transfer)."""
    pairs = np.stack([dag.src, dag.dst], axis=1)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    c = len(uniq)
    rows = np.repeat(np.arange(c * qps), 2)
    cols = np.stack([2 * np.repeat(uniq[:, 0], qps), 2 * np.repeat(uniq[:, 1], qps) + 1],
                    axis=1).ravel()
    inc = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(c * qps, 2 * n))
    return (Paths(inc, np.arange(c + 1) * qps, np.full(c, latency_ns), np.full(2 * n, gbps)),
            inv.ravel())
