"""Multi-plane fat-tree: every rail (NIC port index) is its own independent 2-tier
fat-tree, a *plane*. Cross-plane traffic moves over NVLink inside a host first.

With 128-port switches x 8 planes: 128 leaves (64 down, 64 up) + 64 spines per plane
= 8,192 GPUs per plane, 65,536 GPUs with 1,536 switches in two tiers.
"""

from __future__ import annotations

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import MultiplaneTopology, Spec
from aifabric.topology.builders import register
from aifabric.topology.fabric import Fabric, NodeKind
from aifabric.topology.parts import FabricBuilder, active_hosts, fmt, segment_hosts
from aifabric.topology.tiers import leaf_plan, reject_unused, spine_layer


@register("multiplane")
def build_multiplane(spec: Spec) -> Fabric:
    topo = spec.topology
    assert isinstance(topo, MultiplaneTopology)
    reject_unused(topo.leaf, "topology.leaf", "the leaf count follows from the hosts", "count")
    reject_unused(topo.spine, "topology.spine", "the spines are the top tier", "up_ports",
                  "up_gbps")
    h = spec.hosts
    H = active_hosts(spec)
    N, P, bk = h.nics_per_host, h.ports_per_nic, h.backup_per_segment
    planes = N * P
    plan = leaf_plan(spec, topo.leaf, "topology.leaf", oversubscription=1.0,
                     down_gbps=h.port_gbps)
    if plan.down_gbps != h.port_gbps:
        raise SpecError.at("topology.leaf.down_gbps", f"{plan.down_gbps}G does not match the "
                           f"{h.port_gbps}G NIC ports; allowed: {h.port_gbps}")
    per_leaf = plan.n_down - bk
    if per_leaf < 1:
        raise SpecError.at("hosts.backup_per_segment", f"{bk} backups leave no leaf port for "
                           f"active hosts; allowed: < {plan.n_down}")
    seg, slot, backup, names = segment_hosts(H, per_leaf, bk)
    L = int(seg[-1]) + 1
    fb = FabricBuilder(spec)
    port_plane = np.arange(planes).reshape(N, P)
    hosts = fb.add_hosts(segment=seg, pod=np.zeros_like(seg), backup=backup, names=names,
                         plane_of_port=port_plane)
    pl_i, s_i = np.meshgrid(np.arange(planes), np.arange(L), indexing="ij")
    pl_i, s_i = pl_i.reshape(-1), s_i.reshape(-1)
    leaves = fb.add_switches(NodeKind.TOR, plan, fmt("leaf-pl", pl_i, "-s", (s_i, 2)),
                             plane=pl_i, segment=s_i, pod=0, rail=pl_i // P, group=pl_i,
                             index=s_i)
    nh, ni, npp = hosts.port_grid()
    npl = ni * P + npp
    fb.connect_access(hosts.nic.reshape(-1), leaves[npl * L + seg[nh]], slot[nh], plan)
    spine_layer(fb, spec, leaves=leaves, leaf_group=pl_i, leaf_rank=s_i, leaves_per_group=L,
                groups=planes, leaf_plan_=plan, role=topo.spine, path="topology.spine",
                kind=NodeKind.AGG, names=lambda g, s: fmt("spine-pl", g, "-", (s, 2)),
                group_attrs={"plane": np.arange(planes, dtype=np.int32),
                             "pod": np.zeros(planes, dtype=np.int32)})
    fb.meta.update(planes=planes)
    return fb.build(spec.name, "multiplane")
