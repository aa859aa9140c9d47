"""Collectives over two dimensions, as NCCL runs them: a scale-up domain (NVLink switch
chips, optionally reducing in the switch) and the scale-out fabric between domains.

GPUs come as a grid ``(D, N)``: D domains of N GPUs, row-major (rank = d * N + i, local
index i is the GPU's rail). A transfer whose source or destination is ``switch[d]`` (an
id past every GPU) goes to or comes from the NVLink switches of domain d: NVLS pushes a
GPU's buffer into the switch, which reduces it with the other GPUs' and multicasts the
result back. The algorithms:

* ``ring``: one flat ring over all GPUs per channel, rail-aware (each channel leaves a
  domain from a different GPU, so the C channels use C NICs).
* ``tree``: NCCL's double binary tree over the domain-major rank list, pipelined in
  chunks.
* ``nvls`` (one domain): every GPU sends its whole buffer up (the switch reduces slice j
  for GPU j) and its slice of the result up again (the switch multicasts it); it receives
  its reduced slice and every other slice: S(1 + 1/N) each way per GPU, in one pipelined
  stage.
* ``nvls_tree`` (several domains): NVLS reduce-scatter inside each domain, a double
  binary tree across the domains per rail on the S/N shards, NVLS all-gather inside.
* ``hierarchical``: ring reduce-scatter inside each domain, a ring all-reduce across the
  domains per rail on the S/N shards, ring all-gather inside (the builder of
  :mod:`~aifabric.workload.collectives.hierarchical` with hosts = domains).
  With ``pipeline`` K > 1 the three phases are pipelined as NCCL does: the buffer goes
  in K chunks, chunk c's reduce-scatter follows chunk c-1's, its scale-out step follows
  its own reduce-scatter and chunk c-1's scale-out step, its all-gather its own
  scale-out step and chunk c-1's all-gather, so the phases of different chunks overlap
  (:func:`pipelined_hierarchical`).
* ``pat`` (reduce-scatter, all-gather): NCCL's Parallel Aggregated Trees, a log-step
  (Bruck) exchange: step k sends min(2^k, n - 2^k) blocks of S/n to the rank 2^k away.
"""

from __future__ import annotations

import math

import numpy as np

from aifabric.workload.collectives.hierarchical import hierarchical_allreduce
from aifabric.workload.collectives.ring import ring
from aifabric.workload.collectives.tree import binary_tree, double_binary_tree
from aifabric.workload.dag import Collective, DAGBuilder

__all__ = ["ALGORITHMS_2D", "add_2d_collective", "busbw_factor_2d", "grouped_tree_allreduce",
           "pat_steps", "pipelined_hierarchical"]

#: operation -> algorithms over two dimensions
ALGORITHMS_2D: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "nvls", "nvls_tree", "hierarchical"),
    "reduce_scatter": ("ring", "nvls", "pat"),
    "allgather": ("ring", "nvls", "pat"),
}


def busbw_factor_2d(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw: 2(n-1)/n for AllReduce, (n-1)/n for the others."""
    if n < 2:
        return 1.0
    return 2 * (n - 1) / n if op == "allreduce" else (n - 1) / n


def pat_steps(n: int) -> list[tuple[int, int]]:
    """(distance, blocks) of each PAT/Bruck all-gather step on n ranks."""
    out, d = [], 1
    while d < n:
        out.append((d, min(d, n - d)))
        d *= 2
    return out


def grouped_tree_allreduce(b: DAGBuilder, rows: np.ndarray, size_bytes: float, *,
                           chunk_bytes: float = 4 << 20, deps=None, label: str = "tree"
                           ) -> int:
    """Double-binary-tree AllReduce of ``size_bytes`` on every row of ``rows`` at once (each
    row one tree group of the same length), pipelined in chunks; returns the last stage."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    n = rows.shape[1]
    if n < 2:
        return b.barrier(deps, label=f"{label} (no-op)")
    par, dep = binary_tree(n)
    depth = int(dep.max())
    half = size_bytes / 2
    k = max(1, math.ceil(half / chunk_bytes))
    chunk = half / k
    child = np.flatnonzero(par >= 0)
    lev = dep[child]
    total = k + 2 * depth - 1
    rev = rows[:, ::-1]

    def edges_at(step: int) -> tuple[np.ndarray, np.ndarray, bytes]:
        up_c = step - (depth - lev)
        dn_c = step - depth - (lev - 1)
        su, sd = (up_c >= 0) & (up_c < k), (dn_c >= 0) & (dn_c < k)
        srcs, dsts = [], []
        for g in (rows, rev):
            srcs += [g[:, child[su]], g[:, par[child[sd]]]]
            dsts += [g[:, par[child[su]]], g[:, child[sd]]]
        return (np.concatenate([s.ravel() for s in srcs]),
                np.concatenate([d.ravel() for d in dsts]), su.tobytes() + sd.tobytes())

    last = deps
    step = 0
    while step < total:
        src, dst, sig = edges_at(step)
        run = 1
        while step + run < total and edges_at(step + run)[2] == sig:
            run += 1
        last = b.transfers(src, dst, chunk, deps=last, repeat=run,
                           label=f"{label} step {step}")
        step += run
    return last


def _nvls(b: DAGBuilder, grid: np.ndarray, switch: np.ndarray, up: float, down: float,
          deps, label: str) -> int:
    """One pipelined NVLS stage: every GPU of domain d sends ``up`` bytes into switch[d]
    and receives ``down`` bytes from it."""
    D, N = grid.shape
    sw = np.repeat(switch[:D], N)
    g = grid.ravel()
    return b.transfers(np.concatenate([g, sw]), np.concatenate([sw, g]),
                       np.concatenate([np.full(len(g), up), np.full(len(g), down)]),
                       deps=deps, label=label)


def pipelined_hierarchical(b: DAGBuilder, grid: np.ndarray, size_bytes: float, chunks: int,
                           *, deps=None) -> int:
    """Hierarchical AllReduce over ``grid`` (D x N) in ``chunks`` pipelined chunks of
    ``size_bytes / chunks``: per chunk a ring reduce-scatter inside every domain (N-1
    steps of S/(KN)), a ring AllReduce per rail across the domains (2(D-1) steps of
    S/(KND)) and a ring all-gather inside (N-1 steps of S/(KN)); each phase of chunk c
    waits for its own previous phase and for the same phase of chunk c-1. Returns the
    last stage (a barrier after every chunk's all-gather)."""
    D, N = grid.shape
    K = max(1, int(chunks))
    c = float(size_bytes) / K
    nxt = np.roll(grid, -1, axis=1).ravel()
    flat = grid.ravel()
    rails = grid.T  # (N, D): one ring per rail
    r_src, r_dst = rails.ravel(), np.roll(rails, -1, axis=1).ravel()
    rs = ar = ag = None
    first = [] if deps is None else ([deps] if isinstance(deps, int) else list(deps))
    for _ in range(K):
        rs = b.transfers(flat, nxt, c / N, deps=first + ([rs] if rs is not None else []),
                         repeat=N - 1, label="hier intra reduce-scatter (pipelined)")
        ar = b.transfers(r_src, r_dst, c / N / D, deps=[rs] + ([ar] if ar is not None
                                                              else []),
                         repeat=2 * (D - 1), label="hier inter allreduce (pipelined)")
        ag = b.transfers(flat, nxt, c / N, deps=[ar] + ([ag] if ag is not None else []),
                         repeat=N - 1, label="hier intra allgather (pipelined)")
    return int(ag)  # type: ignore[arg-type]


def add_2d_collective(b: DAGBuilder, op: str, algorithm: str, grid: np.ndarray,
                      size_bytes: float, *, switch: np.ndarray, channels: int = 1,
                      chunk_bytes: float = 4 << 20, deps=None, name: str = "",
                      pipeline: int = 1) -> int:
    """Compile ``op`` by ``algorithm`` over ``grid`` (D x N GPU ids, one row per domain)
    into ``b``; ``switch[d]`` is the id standing for domain d's NVLink switches. Returns
    the last stage; raises ValueError for a pair that does not exist or does not fit.
    ``pipeline`` K > 1: ``hierarchical``'s phases pipelined over K chunks (see
    :func:`pipelined_hierarchical`); 1: one phase after the other."""
    if op not in ALGORITHMS_2D:
        raise ValueError(f"unknown collective {op!r}; allowed: {', '.join(ALGORITHMS_2D)}")
    if algorithm not in ALGORITHMS_2D[op]:
        raise ValueError(f"{op} has no algorithm {algorithm!r}; allowed: "
                         f"{', '.join(ALGORITHMS_2D[op])}")
    grid = np.atleast_2d(np.asarray(grid, dtype=np.int64))
    D, N = grid.shape
    n = D * N
    S = float(size_bytes)
    first = b.n_stages
    b.coll = len(b.collectives)
    flat = grid.ravel()
    dom = np.repeat(np.arange(D), N)
    loc = np.tile(np.arange(N), D)
    if algorithm == "ring":
        last = ring(b, op, flat, S, channels=channels, host=dom, local=loc, deps=deps)
    elif algorithm == "tree":
        last = double_binary_tree(b, flat, S, chunk_bytes=chunk_bytes, deps=deps)
    elif algorithm == "nvls":
        if D != 1:
            raise ValueError("nvls runs inside one domain; across domains use nvls_tree")
        up, down = {"allreduce": (S + S / N, S + S / N), "reduce_scatter": (S, S / N),
                    "allgather": (S / N, S)}[op]
        last = _nvls(b, grid, switch, up, down, deps, f"nvls {op}")
    elif algorithm == "nvls_tree":
        if D < 2:
            raise ValueError("nvls_tree spans domains; inside one domain use nvls")
        last = _nvls(b, grid, switch, S, S / N, deps, "nvls_tree intra reduce-scatter")
        last = grouped_tree_allreduce(b, grid.T, S / N, chunk_bytes=chunk_bytes, deps=last,
                                      label="nvls_tree inter tree")
        last = _nvls(b, grid, switch, S / N, S, last, "nvls_tree intra all-gather")
    elif algorithm == "hierarchical" and pipeline > 1 and D > 1 and N > 1:
        last = pipelined_hierarchical(b, grid, S, pipeline, deps=deps)
    elif algorithm == "hierarchical":
        last = hierarchical_allreduce(b, flat, S, host=dom, local=loc, deps=deps)
    else:  # pat: Bruck all-gather (reduce-scatter: the same steps in reverse)
        steps = pat_steps(n)
        if op == "reduce_scatter":
            steps = steps[::-1]
        r = np.arange(n)
        last = deps
        for dist, blocks in steps:
            last = b.transfers(flat, flat[(r - dist) % n], blocks * S / n, deps=last,
                               label=f"pat {op} distance {dist}")
    b.add_collective(Collective(
        name=name or f"{op}-{len(b.collectives)}", op=op, algorithm=algorithm, n_gpus=n,
        size_bytes=int(S), channels=channels, job=b.job,
        stages=tuple(range(first, b.n_stages)), busbw_factor=busbw_factor_2d(op, n)))
    b.coll = -1
    return last
