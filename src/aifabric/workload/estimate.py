"""The transfer rows a simulation scenario's jobs, collectives and traffic will make (from
the scenario's fields alone: nothing is placed or compiled), and the size guard's
refusal of a scenario whose rows would not fit in memory (:mod:`aifabric.guard`)."""

from __future__ import annotations

from typing import Any

from aifabric.guard import BASE_ENTRIES, WorkloadEstimate, refuse, traffic_rows
from aifabric.workload.collectives.rows import collective_rows

__all__ = ["check_workload", "estimate_workload", "job_rows"]


def job_rows(js: Any) -> int:
    """Transfer rows of a training job, as ``workload.job.add_job`` compiles it: per
    iteration and per (micro-batch, stage), forward and backward, one grouped TP ring
    (dp x tp rows), one grouped EP All-to-All (MoE), the pipeline sends; per stage and
    gradient bucket, the DP AllReduce of every TP rank."""
    par = js.parallel
    dp, tp, pp, ep = par.dp, par.tp, par.pp, par.ep
    M, m = js.micro_batches, js.model
    L = max(1, m.layers // pp)
    moe = (L // m.moe_every) if m.moe_every else 0
    per_mb = (dp * tp if tp > 1 else 0) + (dp * tp * (ep - 1) if ep > 1 and moe else 0)
    rows = 2 * M * pp * per_mb + 2 * M * (pp - 1) * dp * tp
    if dp > 1:
        grad = m.params * m.bytes_per_value / (tp * pp) / js.buckets
        rows += pp * js.buckets * tp * collective_rows(
            "allreduce", js.dp_algorithm, dp, channels=js.channels, size_bytes=grad)
    return js.iterations * rows


def estimate_workload(scn: Any, n_gpus: int, sim: str | None = None,
                      arcs_per_flow: float | None = None) -> WorkloadEstimate:
    """Transfer rows of a simulation scenario's jobs, collectives and traffic (from the
    scenario fields alone: nothing is placed or compiled); ``arcs_per_flow``: routed arcs per
    flow where the routing splits flows over many paths (sampled by the caller)."""
    entries: list[tuple[str, int]] = []
    for i, js in enumerate(getattr(scn, "jobs", []) or []):
        n = js.gpus if isinstance(js.gpus, int) else len(js.gpus)
        entries.append((f"jobs[{i}]", job_rows(js) if n <= n_gpus else 0))
    for i, cs in enumerate(getattr(scn, "collectives", []) or []):
        n = cs.gpus if isinstance(cs.gpus, int) else len(cs.gpus)
        n = min(n, n_gpus)
        entries.append((f"collectives[{i}]", cs.repeat * collective_rows(
            cs.op, cs.algorithm, n, channels=cs.channels, size_bytes=cs.size_bytes,
            chunk_bytes=cs.chunk_bytes)))
    entries += traffic_rows(getattr(scn, "traffic", []) or [], n_gpus,
                            getattr(scn, "base_dir", None))
    rows = sum(r for _, r in entries)
    biggest = max(entries, key=lambda e: e[1])[0] if entries else "jobs"
    qps = int(scn.spec.routing.qps_per_connection or 1)
    return WorkloadEstimate(rows=rows, qps=qps, sim=sim or getattr(scn, "sim", "flow"),
                            biggest=biggest, arcs_per_flow=arcs_per_flow)


def check_workload(scn: Any, n_gpus: int, sim: str | None = None, file: str | None = None,
                   fabric_bytes: int = 0, note: str = "",
                   arcs_per_flow: float | None = None
                   ) -> WorkloadEstimate:
    """Refuse a scenario whose transfers would need more memory than the limit (before
    anything is placed, compiled or routed); ``note`` ends the refusal's line;
    ``arcs_per_flow`` as for :func:`estimate_workload`."""
    est = estimate_workload(scn, n_gpus, sim, arcs_per_flow)
    a = est.arcs_per_flow
    spread = f", each QP split over ~{a:,.0f} links" if a is not None and a > BASE_ENTRIES else ""
    what = (f"this scenario would make about {est.rows:,} transfers x {est.qps} QP(s){spread}"
            f" on the {est.sim} simulator (most from {est.biggest})")
    refuse(est.biggest, what, est.peak_bytes, file, held=fabric_bytes, note=note)
    return est
