"""Collectives compiled into stages of a :class:`~aifabric.workload.dag.TransferDAG`.

:func:`add_collective` is the one entry point: it checks the operation/algorithm pair,
adds the stages and records a :class:`~aifabric.workload.dag.Collective` for the results.
"""

from __future__ import annotations

import numpy as np

from aifabric.workload.collectives.alltoall import alltoall
from aifabric.workload.collectives.broadcast import broadcast, p2p
from aifabric.workload.collectives.halving_doubling import halving_doubling
from aifabric.workload.collectives.hierarchical import hierarchical_allreduce
from aifabric.workload.collectives.ring import ring, ring_orders
from aifabric.workload.collectives.tree import binary_tree, double_binary_tree
from aifabric.workload.dag import Collective, DAGBuilder

__all__ = ["ALGORITHMS", "OPS", "add_collective", "binary_tree", "busbw_factor",
           "ring_orders"]

#: operation -> algorithms (first = default)
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "halving_doubling", "hierarchical", "sharp"),
    "reduce_scatter": ("ring", "halving_doubling"),
    "allgather": ("ring", "halving_doubling"),
    "alltoall": ("direct",),
    "broadcast": ("ring",),
    "p2p": ("direct",),
}
OPS = tuple(ALGORITHMS)


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``op`` on n GPUs."""
    if n < 2:
        return 1.0
    return {"allreduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "allgather": (n - 1) / n, "alltoall": (n - 1) / n}.get(op, 1.0)


def add_collective(b: DAGBuilder, op: str, gpus: np.ndarray, size_bytes: float, *,
                   algorithm: str | None = None, channels: int = 1,
                   host: np.ndarray | None = None, local: np.ndarray | None = None,
                   peers: np.ndarray | None = None, root: int = 0,
                   chunk_bytes: float = 4 << 20, deps=None, name: str = "") -> int:
    """Compile one collective into ``b``; returns its last stage.

    ``gpus`` are the GPU ids (ranks in order); ``host``/``local`` give each one's host
    and index in the host (rail-aware rings, hierarchical). ``p2p`` sends
    ``gpus[i] -> peers[i]``. A 2-D ``gpus`` (ring and All-to-All) runs the same
    collective on every row at once, in one set of stages (e.g. the TP groups of all DP
    replicas); the results count it as one collective of ``gpus.shape[1]`` GPUs.
    """
    if op not in ALGORITHMS:
        raise ValueError(f"unknown collective {op!r}; allowed: {', '.join(OPS)}")
    algorithm = algorithm or ALGORITHMS[op][0]
    if algorithm not in ALGORITHMS[op]:
        raise ValueError(f"{op} has no algorithm {algorithm!r}; allowed: "
                         f"{', '.join(ALGORITHMS[op])}")
    if algorithm == "sharp":
        raise ValueError("sharp reduces in the switches: the simulator compiles it on "
                         "the fabric's aggregation trees (aifabric.sim.sharp)")
    gpus = np.asarray(gpus, dtype=np.int64)
    if gpus.ndim == 2 and not ((algorithm == "ring" and op != "broadcast")
                               or op == "alltoall"):
        raise ValueError(f"grouped (2-D) collectives are ring or alltoall, not {algorithm}")
    first = b.n_stages
    b.coll = len(b.collectives)
    if algorithm == "ring" and op == "broadcast":
        last = broadcast(b, gpus, size_bytes, root=root, chunk_bytes=chunk_bytes, deps=deps)
    elif algorithm == "ring":
        last = ring(b, op, gpus, size_bytes, channels=channels, host=host, local=local,
                    deps=deps)
    elif algorithm == "tree":
        last = double_binary_tree(b, gpus, size_bytes, chunk_bytes=chunk_bytes, deps=deps)
    elif algorithm == "halving_doubling":
        last = halving_doubling(b, op, gpus, size_bytes, deps=deps)
    elif algorithm == "hierarchical":
        if host is None or local is None:
            raise ValueError("hierarchical needs each GPU's host and local index")
        last = hierarchical_allreduce(b, gpus, size_bytes, host=host, local=local,
                                      channels=channels, deps=deps)
    elif op == "alltoall":
        last = alltoall(b, gpus, size_bytes, deps=deps)
    else:  # p2p
        if peers is None or len(peers) != len(gpus):
            raise ValueError("p2p needs one peer per GPU")
        last = p2p(b, gpus, np.asarray(peers, dtype=np.int64), size_bytes, deps=deps)
    b.add_collective(Collective(
        name=name or f"{op}-{len(b.collectives)}", op=op, algorithm=algorithm,
        n_gpus=gpus.shape[-1], size_bytes=int(size_bytes), channels=channels, job=b.job,
        # n is the size of one group: a 2-D ``gpus`` has a group per row, so n is its
        # row length (not its row count)
        stages=tuple(range(first, b.n_stages)),
        busbw_factor=busbw_factor(op, int(gpus.shape[-1]))))
    b.coll = -1
    return last
