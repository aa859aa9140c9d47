"""Rail-optimized 2-tier fabric: groups of ``nics_per_host`` leaves (one per NIC index)
under a full-mesh spine layer. GPUs of the same index talk through one leaf (1 hop);
cross-rail traffic first moves over NVLink inside a host (PXN)."""

from __future__ import annotations

from aifabric.spec.models import RailTopology, Spec
from aifabric.topology.builders import register
from aifabric.topology.builders.clos import build_two_tier
from aifabric.topology.fabric import Fabric


@register("rail")
def build_rail(spec: Spec) -> Fabric:
    topo = spec.topology
    assert isinstance(topo, RailTopology)
    return build_two_tier(spec, "rail", topo.leaf, topo.spine, topo.oversubscription, True,
                          "topology.leaf", "topology.spine")
