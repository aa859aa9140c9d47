"""Candidate designs for a cluster size: which topology families fit, and at what cost.

Each candidate is a full spec, built into a Fabric and planned like any other, so its
counts are the Fabric's own. The pick is the candidate with the fewest switch tiers,
then the fewest switches, then the fewest transceivers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aifabric.errors import SpecError
from aifabric.plan.summary import plan_fabric
from aifabric.spec.load import spec_from_dict
from aifabric.spec.models import Spec
from aifabric.topology.builders import build_fabric

__all__ = ["Candidate", "candidate_specs", "propose"]

MODEL = "proposed"


@dataclass
class Candidate:
    """One design: its label, spec, and either its plan or why it does not fit."""

    label: str
    spec: Spec | None
    plan: dict[str, Any] | None
    reason: str = ""

    @property
    def fits(self) -> bool:
        return self.plan is not None

    def rank(self) -> tuple[int, int, int]:
        assert self.plan is not None
        return (self.plan["tiers"], self.plan["switches"]["total"],
                self.plan["cabling"].get("transceivers", 0))


def candidate_specs(*, gpus: int, nic_gbps: int, switch_ports: int, switch_gbps: int,
                    gpus_per_host: int = 8, nics_per_host: int = 8
                    ) -> list[tuple[str, dict[str, Any]]]:
    """The raw spec documents of every candidate family for this cluster."""
    hosts = {"gpus": gpus, "gpus_per_host": gpus_per_host, "nics_per_host": nics_per_host,
             "port_gbps": nic_gbps}
    models = {MODEL: {"ports": switch_ports, "port_gbps": switch_gbps}}
    role = {"model": MODEL}
    base = {"switch_models": models}
    k = switch_ports
    out: list[tuple[str, dict[str, Any]]] = [
        ("clos: single-ToR 2-tier", {**base, "name": "clos-2tier", "hosts": hosts, "topology": {
            "family": "clos", "leaf": role, "spine": role}}),
        ("rail: rail-optimized 2-tier", {**base, "name": "rail-2tier", "hosts": hosts, "topology": {
            "family": "rail", "leaf": role, "spine": role}}),
        ("multiplane: a 2-tier plane per rail", {
            **base, "name": "multiplane", "hosts": hosts,
            "topology": {"family": "multiplane", "leaf": role, "spine": role}}),
    ]
    if nic_gbps % 2 == 0:
        # HPN: each NIC as 2 ports of half speed; 128 active + 8 backup per 128-port ToR
        # (scaled with the radix), the rest of the ToR up; aggs 15/16 down, 1/16 up.
        half = nic_gbps // 2
        bo = max(1, switch_gbps // half)
        hps = k
        bk = max(1, hps // 16)
        tor_up = k - -(-(hps + bk) // bo)
        agg_up = max(1, k // 16)
        seg_gpus = hps * gpus_per_host
        per_pod = (k - agg_up) // nics_per_host * seg_gpus
        hpn_hosts = {**hosts, "ports_per_nic": 2, "port_gbps": half, "backup_per_segment": bk}
        topo: dict[str, Any] = {
            "family": "hpn", "hosts_per_segment": hps,
            "tor": {**role, "up_ports": tor_up},
            "agg": {**role, "down_ports": k - agg_up, "up_ports": agg_up},
            "core": role if gpus > per_pod else None}
        out.append(("hpn: dual-ToR dual-plane", {**base, "name": "hpn", "hosts": hpn_hosts,
                                                "topology": topo}))
    out.append(("fat_tree: 3-tier", {**base, "name": "fat-tree", "hosts": hosts, "topology": {
        "family": "fat_tree", "switch": role}}))
    return out


def propose(**kwargs: int) -> tuple[list[Candidate], Candidate | None]:
    """Build every candidate; return them all and the pick (None if nothing fits)."""
    cands = []
    for label, doc in candidate_specs(**kwargs):
        try:
            spec = spec_from_dict(doc)
            plan = plan_fabric(build_fabric(spec), bisection=False)
            cands.append(Candidate(label, spec, plan))
        except SpecError as err:
            cands.append(Candidate(label, None, None, "; ".join(str(p) for p in err.problems)))
    fitting = [c for c in cands if c.fits]
    best = min(fitting, key=Candidate.rank) if fitting else None
    return cands, best
