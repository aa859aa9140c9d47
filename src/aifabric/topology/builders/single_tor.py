"""The classic baseline: every port of a host to one ToR (DCN+-like small segments).

Up to ``tors_per_pod`` ToRs share a set of aggregation switches; more ToRs than that
make several pods joined by a core layer (agg ``a`` of every pod to core group
``a // m``, as in the fat-tree).
"""

from __future__ import annotations

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import SingleTorTopology, Spec
from aifabric.topology._build import FabricBuilder, core_layer, fmt, port_plan
from aifabric.topology._tiers import leaf_plan, spine_layer
from aifabric.topology.builders import register
from aifabric.topology.builders.clos import wire_leaves
from aifabric.topology.fabric import Fabric, NodeKind


@register("single_tor")
def build_single_tor(spec: Spec) -> Fabric:
    topo = spec.topology
    assert isinstance(topo, SingleTorTopology)
    h = spec.hosts
    if topo.hosts_per_tor is not None:
        need = (topo.hosts_per_tor + h.backup_per_segment) * h.nics_per_host * h.ports_per_nic
        role = topo.tor if topo.tor.down_ports is not None else topo.tor.model_copy(
            update={"down_ports": need})
        if role.down_ports is not None and role.down_ports < need:
            raise SpecError.at("topology.hosts_per_tor", f"{topo.hosts_per_tor} hosts need "
                               f"{need} ToR ports; tor.down_ports is {role.down_ports}")
    else:
        role = topo.tor
    fb = FabricBuilder(spec)
    tpp = topo.tors_per_pod
    tors, _, plan = wire_leaves(fb, spec, role, "topology.tor",
                                oversubscription=topo.oversubscription, rail=False,
                                prefix="tor", segments_per_pod=tpp)
    T = len(tors)
    tpp = tpp or T
    pods = -(-T // tpp)
    if pods > 1:
        agg_plan_ = leaf_plan(spec, topo.agg, "topology.agg",
                              oversubscription=topo.oversubscription, down_gbps=plan.up_gbps)
        agg_down_role = topo.agg.model_copy(update={"down_ports": agg_plan_.n_down})
        up = agg_plan_.n_up
    else:
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
