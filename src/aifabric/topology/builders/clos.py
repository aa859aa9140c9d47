"""2-tier leaf-spine Clos with any oversubscription, single-ToR or rail-optimized wiring.

* Single-ToR wiring: all NIC ports of a host go to one leaf; a segment is one leaf.
* Rail-optimized wiring: leaves come in groups of ``nics_per_host`` (one per rail); NIC
  ``i`` of every host of a group goes to leaf ``i`` of the group; a segment is a group.

Every leaf spreads its uplinks evenly over all spines (full mesh); the spine count is
the fewest that divide the leaf uplinks and have a port for every leaf.
"""

from __future__ import annotations

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import ClosTopology, Spec, SwitchRole
from aifabric.topology.builders import register
from aifabric.topology.fabric import Fabric, NodeKind
from aifabric.topology.parts import FabricBuilder, active_hosts, fmt, segment_hosts
from aifabric.topology.tiers import access_plan, reject_unused, spine_layer


def wire_leaves(fb: FabricBuilder, spec: Spec, role: SwitchRole, path: str, *,
                oversubscription: float | None, rail: bool, kind: NodeKind = NodeKind.TOR,
                prefix: str = "leaf", segments_per_pod: int | None = None,
                hosts_per_leaf: int | None = None, hosts_path: str = ""):
    """Hosts and leaves (ToRs) with their access links.

    ``oversubscription`` is the spec's value (None when unset), see ``access_plan``.
    Returns ``(leaves, leaf_segment, plan)``: leaf ids, the segment of each leaf, and the
    leaf port plan.
    """
    h = spec.hosts
    H = active_hosts(spec)
    N, P, bk = h.nics_per_host, h.ports_per_nic, h.backup_per_segment
    ports_per_host = P if rail else N * P
    plan, per_seg = access_plan(spec, role, path, ratio=oversubscription,
                                ratio_path="topology.oversubscription",
                                ports_per_host=ports_per_host, hosts=H,
                                down_gbps=h.port_gbps, hosts_per_leaf=hosts_per_leaf,
                                hosts_path=hosts_path)
    if plan.down_gbps != h.port_gbps:
        raise SpecError.at(f"{path}.down_gbps", f"{plan.down_gbps}G leaf down-ports do not "
                           f"match {h.port_gbps}G NIC ports; allowed: {h.port_gbps}")
    seg, slot, backup, names = segment_hosts(H, per_seg, bk)
    S = int(seg[-1]) + 1
    pod_of_seg = (np.zeros(S, dtype=np.int32) if segments_per_pod is None
                  else np.arange(S, dtype=np.int32) // segments_per_pod)
    hosts = fb.add_hosts(segment=seg, pod=pod_of_seg[seg], backup=backup, names=names)
    nh, ni, npp = hosts.port_grid()
    if rail:
        s_i, r_i = np.meshgrid(np.arange(S), np.arange(N), indexing="ij")
        s_i, r_i = s_i.reshape(-1), r_i.reshape(-1)
        leaves = fb.add_switches(kind, plan, fmt(f"{prefix}-s", (s_i, 2), "-r", r_i),
                                 segment=s_i, rail=r_i, pod=pod_of_seg[s_i], index=r_i)
        tor = leaves[seg[nh] * N + ni]
        slot_ = slot[nh] * P + npp
        leaf_segment = s_i
    else:
        s_i = np.arange(S)
        leaves = fb.add_switches(kind, plan, fmt(f"{prefix}-s", (s_i, 2)), segment=s_i,
                                 pod=pod_of_seg[s_i], index=0)
        tor = leaves[seg[nh]]
        slot_ = slot[nh] * N * P + ni * P + npp
        leaf_segment = s_i
    fb.connect_access(hosts.nic.reshape(-1), tor, slot_, plan)
    return leaves, leaf_segment, plan


def build_two_tier(spec: Spec, family: str, leaf: SwitchRole, spine: SwitchRole,
                   oversubscription: float | None, rail: bool, leaf_path: str,
                   spine_path: str) -> Fabric:
    reject_unused(leaf, leaf_path, "the leaf count follows from the hosts", "count")
    reject_unused(spine, spine_path, "the spines are the top tier", "up_ports", "up_gbps")
    fb = FabricBuilder(spec)
    leaves, _, plan = wire_leaves(fb, spec, leaf, leaf_path, oversubscription=oversubscription,
                                  rail=rail)
    L = len(leaves)
    spine_layer(fb, spec, leaves=leaves, leaf_group=np.zeros(L, dtype=np.int64),
                leaf_rank=np.arange(L), leaves_per_group=L, groups=1, leaf_plan_=plan,
                role=spine, path=spine_path, kind=NodeKind.AGG,
                names=lambda g, s: fmt("spine-", (s, 2)),
                group_attrs={"pod": np.zeros(1, dtype=np.int32)})
    return fb.build(spec.name, family)


@register("clos")
def build_clos(spec: Spec) -> Fabric:
    topo = spec.topology
    assert isinstance(topo, ClosTopology)
    return build_two_tier(spec, "clos", topo.leaf, topo.spine, topo.oversubscription,
                          topo.rail_optimized, "topology.leaf", "topology.spine")
