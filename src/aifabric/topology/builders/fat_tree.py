"""3-tier k-ary fat-tree: pods of k/2 leaves + k/2 spines; spine i of every pod goes to
core group i (k/2 cores per group). k^3/4 NIC endpoints and 5k^2/4 switches when all
k pods are built (k=64: 65,536 endpoints, 5,120 switches).

With ``rail_optimized`` (default) a pod's leaves form groups of ``nics_per_host`` rails
and NIC i of every host of a group goes to leaf i of the group. Fewer pods than k get
fewer cores: the core layer is sized for the pods that exist (see ``core_layer``).
"""

from __future__ import annotations

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import FatTreeTopology, Spec
from aifabric.topology.builders import register
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind
from aifabric.topology.parts import (
    FabricBuilder,
    active_hosts,
    core_layer,
    fmt,
    port_plan,
    resolve_model,
    segment_hosts,
)
from aifabric.topology.tiers import reject_unused


@register("fat_tree")
def build_fat_tree(spec: Spec) -> Fabric:
    topo = spec.topology
    assert isinstance(topo, FatTreeTopology)
    h = spec.hosts
    N, P, bk = h.nics_per_host, h.ports_per_nic, h.backup_per_segment
    reject_unused(topo.switch, "topology.switch", "a fat-tree's port split and switch "
                  "counts follow from topology.k", "down_ports", "up_ports", "count")
    model = resolve_model(spec, topo.switch, "topology.switch")
    k = topo.k or model.ports
    if k % 2 or k < 2:
        raise SpecError.at("topology.k", f"a k-ary fat-tree needs an even k (got {k})")
    if k > model.ports:
        raise SpecError.at("topology.k", f"k={k} exceeds the {model.ports} ports of "
                           f"{topo.switch.model}; allowed: <= {model.ports}")
    half = k // 2
    leaf_plan = port_plan(spec, topo.switch, "topology.switch", n_down=None, n_up=half,
                          down_gbps=h.port_gbps)
    # k/2 physical ports down (possibly broken out for slower NICs), k/2 up
    leaf_plan = port_plan(spec, topo.switch, "topology.switch",
                          n_down=half * leaf_plan.down_breakout, n_up=half,
                          down_gbps=h.port_gbps)
    if leaf_plan.down_gbps != h.port_gbps:
        raise SpecError.at("topology.switch.down_gbps", f"must match the {h.port_gbps}G NICs")
    rail = topo.rail_optimized
    if rail and half % N:
        raise SpecError.at("topology.rail_optimized", f"{half} leaves per pod do not form "
                           f"groups of {N} rails; allowed: false, or k/2 a multiple of {N}")
    per_seg = (leaf_plan.n_down // P if rail else leaf_plan.n_down // (N * P)) - bk
    if per_seg < 1:
        raise SpecError.at("topology.k", f"a leaf's {leaf_plan.n_down} down ports cannot hold "
                           f"a host plus {bk} backups")
    segs_per_pod = half // N if rail else half
    hosts_per_pod = per_seg * segs_per_pod
    H = active_hosts(spec, default=hosts_per_pod * k)
    pods = topo.pods or -(-H // hosts_per_pod)
    if pods * hosts_per_pod < H:
        raise SpecError.at("topology.pods", f"{pods} pods hold at most {pods * hosts_per_pod} "
                           f"hosts; {H} requested")
    if pods > k:
        raise SpecError.at("hosts.count", f"{H} hosts need {pods} pods; a k={k} fat-tree has "
                           f"at most {k} pods ({k * hosts_per_pod} hosts)")
    seg, slot, backup, names = segment_hosts(H, per_seg, bk)
    S = pods * segs_per_pod
    pod_of_seg = np.arange(S, dtype=np.int32) // segs_per_pod
    fb = FabricBuilder(spec)
    fb.meta.update(k=k, pods=pods)
    hosts = fb.add_hosts(segment=seg, pod=pod_of_seg[seg], backup=backup, names=names)

    # leaves: (pod, leaf) ; segment = rail group (or the leaf)
    p_i, l_i = np.meshgrid(np.arange(pods), np.arange(half), indexing="ij")
    p_i, l_i = p_i.reshape(-1), l_i.reshape(-1)
    lseg = p_i * segs_per_pod + (l_i // N if rail else l_i)
    lrail = l_i % N if rail else -1
    leaves = fb.add_switches(NodeKind.TOR, leaf_plan,
                             fmt("leaf-p", (p_i, 2), "-", (l_i, 2)), pod=p_i,
                             segment=lseg, rail=lrail, index=l_i).reshape(pods, half)
    nh, ni, npp = hosts.port_grid()
    hseg = seg[nh]
    hpod, sip = pod_of_seg[hseg], hseg % segs_per_pod
    if rail:
        tor = leaves[hpod, sip * N + ni]
        slot_ = slot[nh] * P + npp
    else:
        tor = leaves[hpod, sip]
        slot_ = slot[nh] * N * P + ni * P + npp
    fb.connect_access(hosts.nic.reshape(-1), tor, slot_, leaf_plan)

    # switch.down_gbps is the NIC-facing speed: spines and cores take the speed of the
    # uplinks below them on their down ports
    upper = topo.switch.model_copy(update={"down_gbps": None})
    spine_plan = port_plan(spec, upper, "topology.switch", n_down=half,
                           n_up=half if pods > 1 else 0, down_gbps=leaf_plan.up_gbps)
    spines = fb.add_switches(NodeKind.AGG, spine_plan, fmt("spine-p", (p_i, 2), "-", (l_i, 2)),
                             pod=p_i, index=l_i).reshape(pods, half)
    # leaf j of pod p: one link to each spine of the pod (on spine down port j)
    fb.mesh(leaves.reshape(-1), p_i, l_i, spines, half, leaf_plan, spine_plan,
            LinkKind.LEAF_SPINE)
    if pods > 1:
        core_plan = port_plan(spec, upper, "topology.switch", n_down=k, n_up=0,
                              down_gbps=spine_plan.up_gbps)
        core_layer(fb, spines.reshape(pods, 1, half), spine_plan, core_plan)
    return fb.build(spec.name, "fat_tree")
