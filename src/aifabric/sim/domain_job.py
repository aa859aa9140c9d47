"""A training job on scale-up domains: TP and EP inside a domain, PP and DP across.

Ranks are laid out as Megatron does: TP fastest, then DP (EP groups carved out of
consecutive DP ranks), then PP; rank r runs on GPU r of the domain-major GPU list (domain
d holds GPUs d*N .. d*N+N-1). So a TP group is ``tp`` consecutive GPUs, an EP group
``ep`` GPUs ``tp`` apart (``tp x ep`` consecutive GPUs), a DP group ``dp`` GPUs ``tp``
apart, and a pipeline stage ``tp x dp`` consecutive GPUs.

Placement refuses a TP group larger than a domain (``job.tp``) and reports every group
that crosses a domain boundary (TP groups that do not divide the domain, EP groups
larger than it): nothing is placed silently.

One training step is simulated on the two-dimension network
(:class:`~aifabric.sim.twodim.DomainNet`), one communication phase at a time, every
group of the phase at once: a TP AllReduce of one layer's activations, an EP All-to-All
(MoE dispatch; the combine is the same transfers back), a PP send of one micro-batch's
activations, and the DP AllReduce of the gradients. Identical layers and micro-batches
take the same time, so each phase is simulated once and multiplied (communication is
counted as exposed, not overlapped with compute):

``step = (micro_batches + pp - 1) x layers/pp x (3 x compute + 4 x TP + 4 x EP) +
(micro_batches + pp - 1) x 2 x PP + DP``

(forward: 2 TP AllReduces and 2 All-to-Alls per layer, backward the same; backward
compute is twice forward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from aifabric.errors import Problem, SpecError
from aifabric.sim.twodim import DomainNet, simulate_dag
from aifabric.spec.base import StrictModel
from aifabric.spec.names import Name
from aifabric.workload.collectives import add_collective
from aifabric.workload.dag import DAGBuilder

__all__ = ["DomainJob", "JobPlacement", "place_job", "run_job"]


class DomainJob(StrictModel):
    """A job for ``aifabric nccl --job``: its parallelism and one layer's sizes."""

    name: Name = "job"
    gpus: int = Field(ge=1, le=10_000_000, description="GPUs of the job (tp x dp x pp)")
    tp: int = Field(default=1, ge=1, le=1024, description="tensor-parallel group size")
    ep: int = Field(default=1, ge=1, le=1_000_000, description="expert-parallel group "
                    "size (out of the DP ranks)")
    pp: int = Field(default=1, ge=1, le=1024, description="pipeline stages")
    layers: int = Field(default=32, ge=1, le=100_000, description="transformer layers")
    micro_batches: int = Field(default=8, ge=1, le=100_000,
                               description="micro-batches per step and pipeline")
    tokens: int = Field(default=8192, ge=1, le=1 << 30,
                        description="tokens of one micro-batch on one DP rank")
    hidden: int = Field(default=7168, ge=1, le=1 << 20, description="hidden size")
    top_k: int = Field(default=8, ge=1, le=1024, description="experts per token (MoE)")
    bytes_per_value: int = Field(default=2, ge=1, le=8, description="bf16: 2")
    grad_bytes: float = Field(default=2e9, ge=0, le=1e15,
                              description="gradient bytes each GPU all-reduces over DP "
                              "per step")
    compute_us_per_layer: float = Field(default=500.0, ge=0, le=1e9,
                                        description="forward compute of one layer and "
                                        "micro-batch, microseconds")


@dataclass(frozen=True)
class JobPlacement:
    """Rank grids of a placed job (GPU ids, one row per group) and the groups crossing a
    domain boundary."""

    tp: np.ndarray
    ep: np.ndarray
    dp: np.ndarray
    pp_pairs: tuple[np.ndarray, np.ndarray]
    crossing: dict[str, int]


def place_job(job: DomainJob, per_domain: int, total_gpus: int) -> JobPlacement:
    """Lay the job's ranks onto GPUs 0..gpus-1; SpecError naming the field when it cannot."""
    tp, ep, pp, N = job.tp, job.ep, job.pp, per_domain
    if job.gpus > total_gpus:
        raise SpecError(Problem("job.gpus", f"{job.gpus} GPUs is more than the fabric's "
                                f"{total_gpus}"))
    if tp > N:
        raise SpecError(Problem("job.tp", f"a TP group of {tp} GPUs is larger than the "
                                f"scale-up domain ({N} GPUs); allowed: at most {N}"))
    if job.gpus % (tp * pp):
        raise SpecError(Problem("job.gpus", f"{job.gpus} GPUs is not a multiple of tp x pp "
                                f"= {tp * pp}"))
    dp = job.gpus // (tp * pp)
    if dp % ep:
        raise SpecError(Problem("job.ep", f"EP {ep} does not divide the {dp} DP ranks; "
                                "allowed: a divisor of gpus / (tp x pp)"))
    r = np.arange(job.gpus, dtype=np.int64).reshape(pp, dp, tp)
    tp_rows = r.reshape(-1, tp)
    ep_rows = r.reshape(pp, dp // ep, ep, tp).transpose(0, 1, 3, 2).reshape(-1, ep)
    dp_rows = r.transpose(0, 2, 1).reshape(-1, dp)
    src = r[:-1].reshape(-1)
    dst = r[1:].reshape(-1)

    def crossing(rows: np.ndarray) -> int:
        d = rows // N
        return int((d.min(axis=1) != d.max(axis=1)).sum()) if rows.shape[1] > 1 else 0

    cross = {"tp_groups": crossing(tp_rows), "ep_groups": crossing(ep_rows),
             "dp_groups": crossing(dp_rows),
             "pp_links": int((src // N != dst // N).sum())}
    return JobPlacement(tp_rows, ep_rows, dp_rows, (src, dst), cross)


def _phase(net: DomainNet, build) -> tuple[float, dict[str, float]]:
    """Simulate one communication phase: (bandwidth time ns, bytes per dimension)."""
    b = DAGBuilder()
    build(b)
    dag = b.build()
    if dag.n_transfers == 0:
        return 0.0, {"scaleup": 0.0, "scaleout": 0.0}
    run, by_arc, _ = simulate_dag(net, dag)
    return float(run.stage_end_ns.max()), by_arc


def run_job(net: DomainNet, job: DomainJob) -> dict[str, Any]:
    """Place ``job`` on ``net`` and simulate one step (see the module docstring)."""
    total = net.total_domains * net.per_domain
    pl = place_job(job, net.per_domain, total)
    N = net.per_domain
    d_used = -(-job.gpus // N)
    sub = DomainNet(d_used, N, net.scaleup_gbps, net.scaleout_gbps, net.nvls_gbps,
                    net.channels, net.oversubscription, net.physical_scaleup_gbps,
                    net.physical_scaleout_gbps, net.total_domains)
    act = job.tokens * job.hidden * job.bytes_per_value  # one micro-batch's activations

    def dom_loc(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return rows // N, rows % N

    phases: dict[str, tuple[float, dict[str, float]]] = {}
    if job.tp > 1:
        h, lo = dom_loc(pl.tp)
        phases["tp"] = _phase(sub, lambda b: add_collective(
            b, "allreduce", pl.tp, act, algorithm="ring", host=h, local=lo))
    if job.ep > 1:  # each GPU sends its tokens' top-k copies, spread over the EP group
        a2a = act * job.top_k / job.tp
        phases["ep"] = _phase(sub, lambda b: add_collective(b, "alltoall", pl.ep, a2a))
    if job.pp > 1:
        src, dst = pl.pp_pairs
        phases["pp"] = _phase(sub, lambda b: b.transfers(src, dst, act / job.tp,
                                                         label="pp send"))
    if pl.dp.shape[1] > 1 and job.grad_bytes > 0:
        h, lo = dom_loc(pl.dp)
        phases["dp"] = _phase(sub, lambda b: add_collective(
            b, "allreduce", pl.dp, job.grad_bytes, algorithm="ring", host=h, local=lo))
    t = {k: v[0] for k, v in phases.items()}
    slots = job.micro_batches + job.pp - 1  # pipeline slots of one step
    layers = job.layers / job.pp
    compute = slots * layers * 3 * job.compute_us_per_layer * 1000
    times = {"tp": slots * layers * 4, "ep": slots * layers * 4, "pp": slots * 2, "dp": 1}
    comm = {k: times[k] * t[k] for k in phases}  # only the phases the job has
    out_bytes = {k: phases[k][1]["scaleout"] * times[k] for k in phases}
    up_bytes = {k: phases[k][1]["scaleup"] * times[k] for k in phases}
    step = compute + sum(comm.values())
    return {
        "job": job.name, "gpus": job.gpus, "tp": job.tp, "ep": job.ep, "pp": job.pp,
        "dp": int(pl.dp.shape[1]), "gpus_per_domain": N, "domains_used": d_used,
        "crossing": pl.crossing,
        "step_ms": round(step / 1e6, 3), "compute_ms": round(compute / 1e6, 3),
        "comm_ms": {k: round(v / 1e6, 3) for k, v in comm.items()},
        "bytes_leaving_domains": float(sum(out_bytes.values())),
        "bytes_leaving_domains_by_phase": {k: float(v) for k, v in out_bytes.items()},
        "bytes_inside_domains": float(sum(up_bytes.values())),
    }
