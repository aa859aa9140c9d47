"""Training jobs: parallelism, placement on GPUs, and one iteration as a transfer DAG.

A job has a model (parameters, layers, hidden size, sequence length), parallel degrees
DP x TP x PP = GPUs (EP experts spread over the DP ranks, EP divides DP), micro-batches
and a per-layer compute time given as a number. Ranks follow Megatron's layout: TP is
innermost (consecutive GPUs, inside a host), then DP, then PP.

One iteration becomes a DAG (GPipe schedule):

* forward of micro-batch m on pipeline stage p: compute, then the TP AllReduces of its
  layers (inside the host, over NVLink), the EP All-to-Alls of its MoE layers, then the
  activations go point-to-point to stage p+1;
* backward in reverse, after the stage's last forward;
* the DP gradient AllReduce runs in ``buckets`` chunks, each starting as soon as the
  backward of the last micro-batch has produced it, overlapped with the rest of the
  backward (one NCCL stream: buckets one after another); with ``dp_algorithm: sharp``
  each bucket is reduced in the InfiniBand switches (the simulator lays it on the
  fabric's aggregation trees: ``add_job``'s ``dp_sharp``).

The TP (and EP) collectives of one stage's layers for one micro-batch and direction are
merged into one collective of the same bytes (the latency terms are counted once), and
the groups of all DP replicas run it together in one set of stages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from aifabric.workload.collectives import add_collective
from aifabric.workload.dag import DAGBuilder

__all__ = ["DpAllReduce", "GpuPool", "JobModel", "add_job", "place"]

#: (builder, pipeline stage, bytes per GPU, dependencies, name) -> the bucket's last stage
DpAllReduce = Callable[[DAGBuilder, int, float, Sequence[int], str], int]


@dataclass(frozen=True)
class JobModel:
    """What one training job needs to build its iteration (units in the names)."""

    name: str
    dp: int
    tp: int = 1
    pp: int = 1
    ep: int = 1
    params: float = 7e9
    layers: int = 32
    hidden: int = 4096
    seq_len: int = 4096
    micro_batch: int = 1
    micro_batches: int = 1
    bytes_per_value: int = 2
    moe_every: int = 0  # every k-th layer is MoE (0 = dense)
    top_k: int = 2
    fwd_ns_per_layer: float = 1e6
    bwd_ns_per_layer: float = 2e6
    buckets: int = 4
    dp_algorithm: str = "ring"
    channels: int = 1
    iterations: int = 1

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp


@dataclass(frozen=True)
class GpuPool:
    """The fabric's active GPUs in order: node id, host, segment and index in the host."""

    node: np.ndarray
    host: np.ndarray
    segment: np.ndarray
    local: np.ndarray
    gpus_per_host: int


def place(pool: GpuPool, n: int, policy: str, *, taken: np.ndarray, seed: int = 0,
          segments: int | None = None, explicit: np.ndarray | None = None) -> np.ndarray:
    """Positions (into ``pool``) of ``n`` free GPUs chosen by ``policy``; marks them taken.

    ``pack``: whole hosts from as few segments as possible (segments with the most free
    hosts first); ``spread``: hosts round-robin over ``segments`` segments (default all);
    ``random``: random free hosts (seeded); ``explicit``: the given positions. Jobs that
    are not a whole number of hosts take GPUs host by host in order. Ranks are ordered by
    segment, host and GPU, as NCCL orders a ring by topology.
    """
    G = pool.gpus_per_host
    free = ~taken
    if policy == "explicit":
        assert explicit is not None
        pos = np.asarray(explicit, dtype=np.int64)
    elif n % G:
        pos = np.flatnonzero(free)[:n]
    else:
        hosts_needed = n // G
        h_free = free.reshape(-1, G).all(axis=1)
        h_seg = pool.segment[::G]
        cand = np.flatnonzero(h_free)
        if policy == "pack":
            seg_free = np.bincount(h_seg[cand], minlength=int(h_seg.max()) + 1)
            # segments by most free hosts, then in order; hosts in order inside
            rank = np.argsort(np.argsort(-seg_free, kind="stable"), kind="stable")
            cand = cand[np.lexsort((cand, rank[h_seg[cand]]))]
        elif policy == "spread":
            segs = np.unique(h_seg[cand])
            if segments is not None:
                segs = segs[:segments]
            cand = cand[np.isin(h_seg[cand], segs)]
            # i-th free host of each segment gets round i
            order = np.argsort(h_seg[cand], kind="stable")
            s_sorted = h_seg[cand][order]
            first = np.searchsorted(s_sorted, s_sorted)
            within = np.empty(len(cand), dtype=np.int64)
            within[order] = np.arange(len(cand)) - first
            cand = cand[np.lexsort((h_seg[cand], within))]
        elif policy == "random":
            cand = np.random.default_rng(seed).permutation(cand)
        else:
            raise ValueError(f"unknown placement {policy!r}")
        chosen = np.sort(cand[:hosts_needed]) if len(cand) >= hosts_needed else cand
        pos = (chosen[:, None] * G + np.arange(G)[None, :]).ravel()
    if len(pos) < n:
        raise ValueError(f"needs {n} GPUs, only {len(pos)} free")
    pos = pos[:n]
    if taken[pos].any():
        raise ValueError("GPUs already used by another job")
    taken[pos] = True
    order = np.lexsort((pool.local[pos], pool.host[pos], pool.segment[pos]))
    return pos if policy == "explicit" else pos[order]


def add_job(b: DAGBuilder, job: JobModel, gpus: np.ndarray, host: np.ndarray,
            local: np.ndarray, dp_sharp: DpAllReduce | None = None) -> int:
    """Compile ``iterations`` iterations of ``job`` on ``gpus`` (rank order); returns the
    last stage. ``host``/``local`` per GPU make rings rail-aware. ``dp_sharp``: with
    ``dp_algorithm: sharp``, what adds one DP gradient bucket of stage ``p`` (every TP
    rank's DP group at once) reduced in the switches; it needs the fabric's aggregation
    trees, so the simulator passes it (aifabric.sim.run)."""
    if job.dp_algorithm == "sharp" and dp_sharp is None and job.dp > 1:
        raise ValueError("dp_algorithm sharp reduces in the switches: the simulator "
                         "compiles it on the fabric's aggregation trees (aifabric.sim)")
    dp, tp, pp = job.dp, job.tp, job.pp
    g = np.asarray(gpus).reshape(pp, dp, tp)  # rank = (p * dp + d) * tp + t
    hs = np.asarray(host).reshape(pp, dp, tp)
    ls = np.asarray(local).reshape(pp, dp, tp)
    L = max(1, job.layers // pp)  # layers per pipeline stage
    moe_layers = (L // job.moe_every) if job.moe_every else 0
    act = job.micro_batch * job.seq_len * job.hidden * job.bytes_per_value
    grad_bytes = job.params * job.bytes_per_value / (tp * pp)
    M = job.micro_batches
    last_iter = None

    def tp_ar(p: int, size: float, deps, tag: str) -> int:
        if tp < 2:
            return b.barrier(deps, label=f"{tag} (no TP)")
        # the TP groups of all DP replicas of stage p run in lockstep: one grouped ring
        return add_collective(b, "allreduce", g[p], size, channels=1, host=hs[p],
                              local=ls[p], deps=deps, name=f"{job.name} {tag} tp{p}")

    def ep_a2a(p: int, size: float, deps, tag: str) -> int:
        if job.ep < 2 or not moe_layers:
            return b.barrier(deps, label=f"{tag} (no EP)")
        # EP groups: ep consecutive DP ranks of one TP rank; all groups in one stage
        grp = g[p].reshape(dp // job.ep, job.ep, tp).transpose(0, 2, 1).reshape(-1, job.ep)
        return add_collective(b, "alltoall", grp, size, deps=deps, name=f"{job.name} {tag} ep{p}")

    for it in range(job.iterations):
        fwd_end = np.full((pp, M), -1, dtype=np.int64)
        send_f = np.full((pp, M), -1, dtype=np.int64)
        bwd_end = np.full((pp, M), -1, dtype=np.int64)
        send_b = np.full((pp, M), -1, dtype=np.int64)
        tp_bytes = 2 * L * act  # 2 AllReduces per layer (attention, MLP)
        ep_bytes = 2 * moe_layers * act * job.top_k / tp  # dispatch + combine
        for m in range(M):
            for p in range(pp):
                deps = [x for x in (fwd_end[p, m - 1] if m else last_iter,
                                    send_f[p - 1, m] if p else -1) if x is not None and x >= 0]
                c = b.compute(job.fwd_ns_per_layer * L, deps=deps,
                              label=f"{job.name} it{it} fwd p{p} m{m}")
                c = tp_ar(p, tp_bytes, c, f"it{it} fwd p{p} m{m}")
                c = ep_a2a(p, ep_bytes, c, f"it{it} fwd p{p} m{m}")
                fwd_end[p, m] = c
                if p + 1 < pp:
                    send_f[p, m] = add_collective(
                        b, "p2p", g[p].ravel(), act / tp, peers=g[p + 1].ravel(), deps=c,
                        name=f"{job.name} it{it} pp fwd {p}->{p + 1} m{m}")
        dp_ends = []
        for p in reversed(range(pp)):
            for m in range(M):
                deps = [fwd_end[p, M - 1]]
                if m:
                    deps.append(bwd_end[p, m - 1])
                if p + 1 < pp:
                    deps.append(send_b[p + 1, m])
                last_mb = m == M - 1
                chunks = job.buckets if (last_mb and dp > 1) else 1
                prev = deps
                for k in range(chunks):
                    c = b.compute(job.bwd_ns_per_layer * L / chunks, deps=prev,
                                  label=f"{job.name} it{it} bwd p{p} m{m}"
                                  + (f" chunk {k}" if chunks > 1 else ""))
                    prev = c
                    if last_mb and dp > 1:  # DP gradient bucket k of stage p
                        bucket = grad_bytes / chunks
                        dep = [c] + ([dp_ends[-1]] if dp_ends and k else [])
                        if job.dp_algorithm == "sharp":  # every TP rank's group at once
                            assert dp_sharp is not None
                            dp_ends.append(dp_sharp(
                                b, p, bucket, dep,
                                f"{job.name} it{it} dp p{p} bucket {k}"))
                            continue
                        if job.dp_algorithm == "ring":  # the tp DP rings in lockstep
                            dp_ends.append(add_collective(
                                b, "allreduce", g[p].T, bucket, deps=dep,
                                channels=job.channels, host=hs[p].T, local=ls[p].T,
                                name=f"{job.name} it{it} dp p{p} bucket {k}"))
                            continue
                        ends = [add_collective(
                            b, "allreduce", g[p, :, t], bucket, deps=dep,
                            algorithm=job.dp_algorithm, channels=job.channels,
                            host=hs[p, :, t], local=ls[p, :, t],
                            name=f"{job.name} it{it} dp p{p} t{t} bucket {k}")
                            for t in range(tp)]
                        dp_ends.append(b.barrier(ends, label=f"dp p{p} bucket {k} done"))
                c = tp_ar(p, tp_bytes, c, f"it{it} bwd p{p} m{m}")
                c = ep_a2a(p, ep_bytes, c, f"it{it} bwd p{p} m{m}")
                bwd_end[p, m] = c
                if p > 0:
                    send_b[p, m] = add_collective(
                        b, "p2p", g[p].ravel(), act / tp, peers=g[p - 1].ravel(), deps=c,
                        name=f"{job.name} it{it} pp bwd {p}->{p - 1} m{m}")
        last_iter = b.barrier(list(bwd_end[:, M - 1]) + dp_ends,
                              label=f"{job.name} iteration {it} end")
    assert last_iter is not None
    return last_iter
