"""The HPN story on the model (Alibaba HPN paper, SIGCOMM 2024), as ``aifabric demo`` runs it.

Three experiments of the HPN paper, reproduced on the example fabrics, each with the
paper's reported figure beside ours:

1. cross-segment AllReduce: single-plane (ECMP) vs dual-plane (ECMP, and host-chosen
   source ports): busbw gain — paper: up to +71.6%;
2. four concurrent AllReduce jobs on 512 GPUs: single-plane ECMP vs dual-plane with
   chosen source ports: busbw gain — paper: 34.7% faster;
3. a 2,304-GPU training job on DCN+ spread over 19 segments vs on HPN packed into 3:
   cross-segment traffic per iteration — paper: -37%.

Pure: builds scenarios and returns results; the CLI prints and writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.results import SimResult
from aifabric.sim.run import simulate
from aifabric.sim.scenario import SimScenario
from aifabric.topology import build_fabric

__all__ = ["Finding", "run_demo"]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

_ROUTING = {"qps_per_connection": 2, "nic_port_choice": "round_robin"}


@dataclass
class Finding:
    """One experiment: what was compared, our figure, the paper's."""

    title: str
    metric: str
    ours: float  # percent
    paper: float  # percent
    results: list[SimResult]
    note: str


def _scenario(name: str, spec: str, policy: str, body: dict[str, Any],
              sim: str = "flow") -> SimScenario:
    doc = {"name": name, "spec": spec, "routing": {"policy": policy, **_ROUTING},
           "sim": sim, **body}
    return scenario_from_dict(doc, base_dir=EXAMPLES, model=SimScenario)


def _busbw(r: SimResult) -> float:
    cs = r.summary["collectives"]
    return sum(c["busbw_gbps"] for c in cs) / len(cs)


def run_demo(step: Callable[[str], None] | None = None) -> list[Finding]:
    """Run the three experiments; ``step`` is told what runs next (progress)."""
    fabrics: dict[str, Any] = {}

    def run(scn: SimScenario) -> SimResult:
        key = scn.spec.name
        if key not in fabrics:
            fabrics[key] = build_fabric(scn.spec)
        if step:
            step(scn.name)
        return simulate(scn, fabrics[key])

    findings = []
    # 1. cross-segment AllReduce
    body = {"collectives": [{"name": "allreduce", "op": "allreduce", "size_bytes": "4GiB",
                             "gpus": 1024, "channels": 8, "placement": "spread"}]}
    rs = [run(_scenario("single-plane ecmp", "hpn-single-plane.yaml", "ecmp", body)),
          run(_scenario("dual-plane ecmp", "hpn-pod.yaml", "ecmp", body)),
          run(_scenario("dual-plane source_port", "hpn-pod.yaml", "source_port", body))]
    gain = (_busbw(rs[2]) / _busbw(rs[0]) - 1) * 100
    findings.append(Finding(
        "Cross-segment AllReduce (1,024 GPUs spread over the 15 segments, 4 GiB, ring, "
        "8 channels, 2 QPs per connection)", "busbw gain, dual-plane vs single-plane",
        gain, 71.6, rs,
        f"busbw {_busbw(rs[0]):,.0f} -> {_busbw(rs[1]):,.0f} (ECMP) / {_busbw(rs[2]):,.0f} "
        "(source ports) Gb/s; single-plane aggs hash onto one ToR of a pair, so a NIC "
        f"receives on one port ({rs[0].summary['two_port']['down']['one_port_idle']} NICs)"))
    # 2. four concurrent AllReduce jobs on 512 GPUs
    body = {"collectives": [{"name": f"job{i}", "op": "allreduce", "size_bytes": "1GiB",
                             "gpus": 128, "channels": 8, "placement": "spread",
                             "segments": 8} for i in range(4)]}
    rs = [run(_scenario("4 jobs single-plane ecmp", "hpn-single-plane.yaml", "ecmp", body)),
          run(_scenario("4 jobs dual-plane source_port", "hpn-pod.yaml", "source_port", body))]
    gain = (_busbw(rs[1]) / _busbw(rs[0]) - 1) * 100
    findings.append(Finding(
        "4 concurrent AllReduce jobs on 512 GPUs (128 GPUs each over 8 segments, 1 GiB)",
        "mean busbw gain, dual-plane + source ports vs single-plane ECMP", gain, 34.7, rs,
        f"mean busbw {_busbw(rs[0]):,.0f} -> {_busbw(rs[1]):,.0f} Gb/s; makespan "
        f"{rs[0].makespan_ns / 1e6:,.2f} -> {rs[1].makespan_ns / 1e6:,.2f} ms"))
    # 3. the 2,304-GPU job: DCN+ spread over 19 segments vs HPN packed into 3
    job = {"name": "gpt3-175b", "gpus": 2304, "parallel": {"dp": 36, "tp": 8, "pp": 8},
           "model": {"params": 175e9, "layers": 96, "hidden": 12288, "seq_len": 2048},
           "micro_batches": 8, "compute": {"fwd_ms_per_layer": 2.3}, "channels": 8}
    rs = [run(_scenario("DCN+ spread over 19 segments", "single-tor-dcn.yaml", "ecmp",
                        {"jobs": [{**job, "placement": "spread", "segments": 19}]},
                        sim="analytic")),
          run(_scenario("HPN packed into 3 segments", "hpn-pod.yaml", "source_port",
                        {"jobs": [{**job, "placement": "pack"}]}, sim="analytic"))]
    a, b = (r.summary["jobs"][0] for r in rs)
    change = (b["cross_segment_bytes"] / a["cross_segment_bytes"] - 1) * 100
    findings.append(Finding(
        "GPT-3 175B job on 2,304 GPUs (DP 36 x TP 8 x PP 8): DCN+ spread over "
        f"{a['segments']} segments vs HPN packed into {b['segments']} (analytic model)",
        "cross-segment traffic per iteration", change, -37.0, rs,
        f"{a['cross_segment_bytes'] / 2**30:,.0f} -> {b['cross_segment_bytes'] / 2**30:,.0f} "
        f"GiB; iteration {a['iteration_ns'] / 1e6:,.0f} -> {b['iteration_ns'] / 1e6:,.0f} ms "
        f"({(a['iteration_ns'] / b['iteration_ns'] - 1) * 100:+.1f}% throughput; paper: "
        "+14.9% end to end)"))
    return findings
