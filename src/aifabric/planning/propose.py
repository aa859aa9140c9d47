"""Candidate designs for a cluster size: which topology families fit, and at what cost.

Each candidate is a full spec, built into a Fabric and planned like any other, so its
counts (tiers included) are the Fabric's own. Candidates are ranked by :data:`RANK_RULE`;
the pick is the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aifabric.errors import SpecError
from aifabric.guard import check_fabric
from aifabric.planning.summary import plan_fabric
from aifabric.spec.load import spec_from_dict
from aifabric.spec.models import Spec
from aifabric.topology.builders import build_fabric

__all__ = ["RANK_RULE", "Candidate", "candidate_specs", "propose", "ranked"]

MODEL = "proposed"

#: how candidates are ranked (shown by ``aifabric plan --gpus``)
RANK_RULE = ("fewest switch tiers, then fewest switches, then fewest optics (transceivers), "
             "then lowest oversubscription (worst tier), then most hosts per segment (GPUs "
             "of one rail one switch hop apart), then the order listed")


@dataclass
class Candidate:
    """One design: its label, spec, and either its plan or why it does not fit."""

    design: str
    spec: Spec | None
    plan: dict[str, Any] | None
    reason: str = ""
    order: int = 0

    @property
    def fits(self) -> bool:
        return self.plan is not None

    @property
    def tiers(self) -> int | None:
        """Switch tiers of the built Fabric (None if it does not fit)."""
        return None if self.plan is None else int(self.plan["tiers"])

    @property
    def label(self) -> str:
        """The design with the tiers its Fabric really has: ``"fat_tree: k-ary (2-tier)"``."""
        return self.design if self.tiers is None else f"{self.design} ({self.tiers}-tier)"

    @property
    def oversubscription(self) -> float:
        """The worst tier's active down:up bandwidth (1.0 for a non-blocking design)."""
        assert self.plan is not None
        return max(self.plan["oversubscription"].values(), default=1.0)

    @property
    def hosts_per_segment(self) -> int:
        """Active hosts per segment (rounded up): the GPUs of one rail that are one switch
        hop apart, the traffic NCCL keeps on a rail."""
        assert self.plan is not None
        return -(-int(self.plan["hosts"]) // max(1, int(self.plan["segments"])))

    def rank(self) -> tuple[int, int, int, float, int, int]:
        """The sort key of :data:`RANK_RULE` (lower is better)."""
        assert self.plan is not None
        return (self.plan["tiers"], self.plan["switches"]["total"],
                self.plan["cabling"].get("transceivers", 0), self.oversubscription,
                -self.hosts_per_segment, self.order)


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
        ("clos: single-ToR", {**base, "name": "clos-2tier", "hosts": hosts, "topology": {
            "family": "clos", "leaf": role, "spine": role}}),
        ("rail: rail-optimized", {**base, "name": "rail-2tier", "hosts": hosts, "topology": {
            "family": "rail", "leaf": role, "spine": role}}),
        ("multiplane: a plane per rail", {
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
            "agg": {**role, "down_ports": k - agg_up,
                    **({"up_ports": agg_up} if gpus > per_pod else {})},
            "core": role if gpus > per_pod else None}
        out.append(("hpn: dual-ToR dual-plane", {**base, "name": "hpn", "hosts": hpn_hosts,
                                                "topology": topo}))
    out.append(("fat_tree: k-ary", {**base, "name": "fat-tree", "hosts": hosts, "topology": {
        "family": "fat_tree", "switch": role}}))
    return out


def ranked(cands: list[Candidate]) -> list[Candidate]:
    """The candidates that fit, best first by :data:`RANK_RULE`, then those that do not."""
    fitting = sorted((c for c in cands if c.fits), key=Candidate.rank)
    return fitting + [c for c in cands if not c.fits]


def propose(**kwargs: int) -> tuple[list[Candidate], Candidate | None]:
    """Build every candidate; return them all (in listed order) and the pick (None if
    nothing fits)."""
    cands = []
    for i, (design, doc) in enumerate(candidate_specs(**kwargs)):
        try:
            spec = spec_from_dict(doc)
            check_fabric(spec)  # too big for the memory limit: a candidate that does not fit
            plan = plan_fabric(build_fabric(spec), bisection=False)
            cands.append(Candidate(design, spec, plan, order=i))
        except SpecError as err:
            cands.append(Candidate(design, None, None,
                                   "; ".join(str(p) for p in err.problems), order=i))
    best = ranked(cands)[0] if any(c.fits for c in cands) else None
    return cands, best
