"""The classic baseline: every port of a host to one ToR (DCN+-like small segments).

Up to ``tors_per_pod`` ToRs share a set of aggregation switches; more ToRs than that
make several pods joined by a core layer (agg ``a`` of every pod to core group
``a // m``, as in the fat-tree).
"""

from __future__ import annotations

import numpy as np

from aifabric.spec.models import SingleTorTopology, Spec
from aifabric.topology.builders import register
from aifabric.topology.builders.clos import wire_leaves
from aifabric.topology.fabric import Fabric, NodeKind
from aifabric.topology.parts import FabricBuilder, core_layer, fmt, port_plan
from aifabric.topology.tiers import middle_plan, reject_unused, spine_layer


@register("single_tor")
def build_single_tor(spec: Spec) -> Fabric:
    topo = spec.topology
    assert isinstance(topo, SingleTorTopology)
    reject_unused(topo.tor, "topology.tor", "the ToR count follows from the hosts", "count")
    reject_unused(topo.core, "topology.core", "the cores are the top tier, their count "
                  "derived", "count", "up_ports", "up_gbps")
    fb = FabricBuilder(spec)
    tpp = topo.tors_per_pod
    tors, _, plan = wire_leaves(fb, spec, topo.tor, "topology.tor",
                                oversubscription=topo.oversubscription, rail=False,
                                prefix="tor", segments_per_pod=tpp,
                                hosts_per_leaf=topo.hosts_per_tor,
                                hosts_path="topology.hosts_per_tor")
    T = len(tors)
    tpp = tpp or T
    pods = -(-T // tpp)
    if pods > 1:
        agg_plan_, S = middle_plan(spec, topo.agg, "topology.agg",
                                   ratio=topo.oversubscription,
                                   ratio_path="topology.oversubscription", lowers=tpp,
                                   uplinks=plan.n_up, down_gbps=plan.up_gbps)
        update: dict[str, int] = {"down_ports": agg_plan_.n_down}
        if S is not None:
            update["count"] = S
        agg_down_role = topo.agg.model_copy(update=update)
        up = agg_plan_.n_up
    else:
        reject_unused(topo.agg, "topology.agg", "with one pod the aggs are the top tier",
                      "up_ports", "up_gbps")
        agg_down_role, up = topo.agg, 0
    rank = np.arange(T) % tpp
    aggs, agg_plan = spine_layer(
        fb, spec, leaves=tors, leaf_group=np.arange(T) // tpp, leaf_rank=rank,
        leaves_per_group=min(tpp, T), groups=pods, leaf_plan_=plan, role=agg_down_role,
        path="topology.agg", kind=NodeKind.AGG,
        names=lambda g, s: fmt("agg-p", (g, 2), "-", (s, 2)),
        group_attrs={"pod": np.arange(pods, dtype=np.int32)}, up_ports=up)
    if pods > 1:
        core_plan = port_plan(spec, topo.core, "topology.core", n_down=topo.core.down_ports,
                              n_up=0, down_gbps=agg_plan.up_gbps)
        core_layer(fb, aggs.reshape(pods, 1, -1), agg_plan, core_plan)
    fb.meta.update(tors_per_pod=tpp)
    return fb.build(spec.name, "single_tor")
