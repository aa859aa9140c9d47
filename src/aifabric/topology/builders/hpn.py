"""Alibaba HPN: non-stacked dual-ToR segments, dual-plane pods, a core layer over pods.

* Every NIC has two ports (same IP); port a goes to ToR a, port b to ToR b of the
  NIC's rail. A segment is 2 x rails ToRs with ``hosts_per_segment`` active hosts plus
  ``hosts.backup_per_segment`` standby hosts (128 + 8 in HPN: 136 x 200G down-ports,
  60 x 400G up-ports per ToR, 1.067:1).
* Dual-plane (``planes: 2``): all a-ToRs form plane 0, all b-ToRs plane 1, and a ToR's
  uplinks reach only the aggs of its plane. Single-plane (``planes: 1``): a ToR pair
  shares one set of aggs, so an agg sees both ToRs of a pair as next hops (the source
  of hash polarization); the rails are split in two agg groups (rails 0..R/2-1 and
  R/2..R-1) so that the counts equal the dual-plane design.
* Pod: ``segments_per_pod`` segments (15 in HPN: each agg reaches 120 ToRs of its
  group), aggs with ``agg.down_ports`` down / ``agg.up_ports`` up (120/8 in HPN).
* Core: agg ``a`` of every pod reaches core group ``a // m`` (see ``core_layer``).
"""

from __future__ import annotations

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import HpnTopology, Spec
from aifabric.topology.builders import register
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind
from aifabric.topology.parts import (
    FabricBuilder,
    PortPlan,
    active_hosts,
    core_layer,
    divisor_at_least,
    fmt,
    port_plan,
    segment_hosts,
)
from aifabric.topology.tiers import reject_unused


@register("hpn")
def build_hpn(spec: Spec) -> Fabric:
    topo = spec.topology
    assert isinstance(topo, HpnTopology)
    h = spec.hosts
    _check_hpn_fields(spec, topo)
    H = active_hosts(spec)
    R = h.nics_per_host
    hps, bk = topo.hosts_per_segment, h.backup_per_segment
    planes = topo.planes
    if planes == 1 and R % 2:
        raise SpecError.at("hosts.nics_per_host", "single-plane HPN splits the rails into two "
                           f"agg groups; allowed: an even number of rails (got {R})")
    groups = 2  # dual-plane: one group per plane; single-plane: one per half of the rails
    tors_per_seg_group = 2 * R // groups
    tor_up, tor_plan = _hpn_tor_plan(spec, topo, hps + bk)
    agg_down, spp = _hpn_segments_per_pod(topo, tors_per_seg_group)
    seg, slot, backup, names = segment_hosts(H, hps, bk)
    S = int(seg[-1]) + 1
    pods = -(-S // spp)
    pod_of_seg = np.arange(S, dtype=np.int32) // spp
    A, agg_plan = _hpn_agg_plan(spec, topo, tor_up, tor_plan, agg_down,
                                min(spp, S) * tors_per_seg_group, pods)

    fb = FabricBuilder(spec)
    fb.meta.update(hosts_per_segment=hps, segments_per_pod=spp, planes=planes)
    plane_of_port = (np.tile(np.arange(2), (R, 1)) if planes == 2 else np.zeros((R, 2), int))
    hosts = fb.add_hosts(segment=seg, pod=pod_of_seg[seg], backup=backup, names=names,
                         plane_of_port=plane_of_port)
    tor = _add_hpn_tors(fb, tor_plan, S, R, planes, pod_of_seg)

    # access: NIC (h, r, side) -> ToR (seg(h), r, side), down port = host slot
    nh, nr, nd = hosts.port_grid()
    fb.connect_access(hosts.nic.reshape(-1), tor[seg[nh], nr, nd], slot[nh], tor_plan)

    agg = _add_hpn_aggs(fb, agg_plan, pods, groups, A, planes)
    _mesh_tor_uplinks(fb, tor, agg, pod_of_seg, spp, planes, tor_up, tor_plan, agg_plan)

    if topo.core is not None:
        core_plan = port_plan(spec, topo.core, "topology.core", n_down=topo.core.down_ports,
                              n_up=0, down_gbps=agg_plan.up_gbps)
        core_layer(fb, agg, agg_plan, core_plan,
                   group_plane=np.arange(groups) if planes == 2 else np.zeros(groups, int))
    return fb.build(spec.name, "hpn")


def _check_hpn_fields(spec: Spec, topo: HpnTopology) -> None:
    """Two ports per NIC, and no field the design derives given (the ToR count; the
    cores' count and uplinks; the aggs' uplinks when they are the top tier)."""
    h = spec.hosts
    if h.ports_per_nic != 2:
        raise SpecError.at("hosts.ports_per_nic", f"HPN dual-ToR needs 2 ports per NIC "
                           f"(got {h.ports_per_nic}); allowed: 2")
    reject_unused(topo.tor, "topology.tor", "the ToR count follows from the hosts", "count")
    if topo.core is not None:
        reject_unused(topo.core, "topology.core", "the cores are the top tier, their count "
                      "derived", "count", "up_ports", "up_gbps")
    else:
        reject_unused(topo.agg, "topology.agg", "with core: null the aggs are the top tier",
                      "up_ports", "up_gbps", explicit="agg" in topo.model_fields_set)


def _hpn_tor_plan(spec: Spec, topo: HpnTopology, hosts_per_tor: int) -> tuple[int, PortPlan]:
    """The ToR's uplink count (60 by default) and port plan: a down-port for each of the
    ``hosts_per_tor`` hosts (active + backup) at the NIC port speed."""
    h = spec.hosts
    if topo.tor.down_ports is not None and topo.tor.down_ports < hosts_per_tor:
        hps, bk = topo.hosts_per_segment, h.backup_per_segment
        raise SpecError.at("topology.tor.down_ports", f"{topo.tor.down_ports} cannot hold "
                           f"{hps} active + {bk} backup hosts; allowed: >= {hps + bk}")
    tor_up = topo.tor.up_ports if topo.tor.up_ports is not None else 60
    if tor_up < 1:
        raise SpecError.at("topology.tor.up_ports", "a ToR needs at least 1 uplink")
    tor_plan = port_plan(spec, topo.tor, "topology.tor",
                         n_down=topo.tor.down_ports or hosts_per_tor, n_up=tor_up,
                         down_gbps=h.port_gbps)
    if tor_plan.down_gbps != h.port_gbps:
        raise SpecError.at("topology.tor.down_gbps", f"{tor_plan.down_gbps}G ToR down-ports "
                           f"do not match {h.port_gbps}G NIC ports; allowed: {h.port_gbps}")
    return tor_up, tor_plan


def _hpn_segments_per_pod(topo: HpnTopology, tors_per_seg_group: int) -> tuple[int, int]:
    """The agg's down-port count (120 by default) and the segments per pod: as many as
    the aggs reach (each reaches the ``tors_per_seg_group`` ToRs of a segment in its
    group), or the spec's count when that fits."""
    agg_down = topo.agg.down_ports or 120
    spp_max = agg_down // tors_per_seg_group
    if spp_max < 1:
        raise SpecError.at("topology.agg.down_ports", f"{agg_down} down ports cannot reach the "
                           f"{tors_per_seg_group} ToRs of one segment in a plane; allowed: "
                           f">= {tors_per_seg_group}")
    spp = topo.segments_per_pod or spp_max
    if spp > spp_max:
        raise SpecError.at("topology.segments_per_pod", f"{spp} segments need aggs with "
                           f"{spp * tors_per_seg_group} down ports (agg.down_ports is "
                           f"{agg_down}); allowed: <= {spp_max}")
    return agg_down, spp


def _hpn_agg_plan(spec: Spec, topo: HpnTopology, tor_up: int, tor_plan: PortPlan,
                  agg_down: int, tors_in_pod: int, pods: int) -> tuple[int, PortPlan]:
    """The aggs per group per pod (the fewest that give every one of the ``tors_in_pod``
    ToRs an equal share of its ``tor_up`` uplinks, or the spec's count) and the agg's port
    plan (8 uplinks by default under a core layer, none without)."""
    A = topo.agg.count or divisor_at_least(tor_up, tors_in_pod * tor_up / agg_down)
    if A is None or tor_up % A:
        raise SpecError.at("topology.agg.count", f"{tor_up} ToR uplinks must spread evenly "
                           f"over the aggs of a plane; allowed: a divisor of {tor_up}")
    links_per_pair = tor_up // A
    if tors_in_pod * links_per_pair > agg_down:
        raise SpecError.at("topology.agg.count", f"{A} aggs per plane cannot take "
                           f"{tors_in_pod} ToRs x {links_per_pair} links on {agg_down} ports")
    use_core = topo.core is not None
    if pods > 1 and not use_core:
        raise SpecError.at("topology.core", f"{pods} pods need a core layer; allowed: a "
                           "switch role (e.g. {model: tomahawk5}), or fewer hosts")
    agg_up = (topo.agg.up_ports if topo.agg.up_ports is not None else 8) if use_core else 0
    agg_plan = port_plan(spec, topo.agg, "topology.agg", n_down=agg_down, n_up=agg_up,
                         down_gbps=tor_plan.up_gbps)
    if agg_plan.down_gbps != tor_plan.up_gbps:
        raise SpecError.at("topology.agg.down_gbps", f"must match the ToR uplinks "
                           f"({tor_plan.up_gbps}G)")
    return A, agg_plan


def _add_hpn_tors(fb: FabricBuilder, tor_plan: PortPlan, S: int, R: int, planes: int,
                  pod_of_seg: np.ndarray) -> np.ndarray:
    """The ToRs, one per (segment, rail, side): their node ids as an (S, R, 2) array."""
    s_i, r_i, d_i = _tor_grid(S, R)
    group = d_i if planes == 2 else r_i // (R // 2)
    plane = d_i if planes == 2 else np.zeros_like(d_i)
    return fb.add_switches(NodeKind.TOR, tor_plan,
                           fmt("tor-s", (s_i, 2), "-r", r_i, "-", np.array(["a", "b"])[d_i]),
                           pod=pod_of_seg[s_i], segment=s_i, rail=r_i, side=d_i, plane=plane,
                           group=group, index=r_i * 2 + d_i).reshape(S, R, 2)


def _tor_grid(S: int, R: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segment, rail and side of every ToR, segment-major (the ToRs' order)."""
    s_i, r_i, d_i = np.meshgrid(np.arange(S), np.arange(R), np.arange(2), indexing="ij")
    return s_i.reshape(-1), r_i.reshape(-1), d_i.reshape(-1)


def _add_hpn_aggs(fb: FabricBuilder, agg_plan: PortPlan, pods: int, groups: int, A: int,
                  planes: int) -> np.ndarray:
    """The aggs, ``A`` per (pod, group): their node ids as a (pods, groups, A) array."""
    p_i, g_i, a_i = np.meshgrid(np.arange(pods), np.arange(groups), np.arange(A), indexing="ij")
    p_i, g_i, a_i = p_i.reshape(-1), g_i.reshape(-1), a_i.reshape(-1)
    label = np.array(["pl0", "pl1"] if planes == 2 else ["g0", "g1"])[g_i]
    return fb.add_switches(NodeKind.AGG, agg_plan,
                           fmt("agg-p", (p_i, 2), "-", label, "-", (a_i, 2)),
                           pod=p_i, plane=g_i if planes == 2 else 0, group=g_i,
                           index=a_i).reshape(pods, groups, A)


def _mesh_tor_uplinks(fb: FabricBuilder, tor: np.ndarray, agg: np.ndarray,
                      pod_of_seg: np.ndarray, spp: int, planes: int, tor_up: int,
                      tor_plan: PortPlan, agg_plan: PortPlan) -> None:
    """ToR uplinks: a full mesh from each ToR to the aggs of its (pod, group); a ToR's
    rank among its group's ToRs picks its down-ports on the aggs."""
    S, R, _ = tor.shape
    pods, groups, A = agg.shape
    tors_per_seg_group = 2 * R // groups
    s_i, r_i, d_i = _tor_grid(S, R)
    group = d_i if planes == 2 else r_i // (R // 2)
    seg_in_pod = s_i - pod_of_seg[s_i] * spp
    in_group = (r_i * 2 + d_i) if planes == 1 else r_i  # position among the group's ToRs
    in_group = in_group - (group * R if planes == 1 else 0)
    rank = seg_in_pod * tors_per_seg_group + in_group
    fb.mesh(tor.reshape(-1), pod_of_seg[s_i] * groups + group, rank,
            agg.reshape(pods * groups, A), tor_up, tor_plan, agg_plan, LinkKind.LEAF_SPINE)
