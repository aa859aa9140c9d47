"""The plan of a fabric: counts, oversubscription, bisection bandwidth and hops.

Every figure is computed from the Fabric's arrays (nodes and links counted, capacities
summed, paths searched), never from a formula beside it, so it is true for any
parameter values a builder accepts.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra, maximum_flow

from aifabric.topology.domain import Domain, resolve_domain
from aifabric.topology.fabric import Fabric, LinkKind, Medium, NodeKind
from aifabric.topology.frontend import plan_frontend
from aifabric.topology.management import plan_management

__all__ = ["PAIR_KINDS", "bisection_gbps", "pair_hops", "plan_fabric", "port_usage",
           "scaleup_plan"]

_TIER_NAMES = {NodeKind.TOR: "tor", NodeKind.AGG: "agg", NodeKind.CORE: "core"}

#: the kinds of GPU pair whose distance the plan reports
PAIR_KINDS = ("same_host", "same_rail_segment", "cross_rail_segment", "cross_segment",
              "cross_pod")


def port_usage(f: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """Per switch node: physical ports in use and ports of its model (0 for non-switches)."""
    links = f.links
    used_phys = np.zeros(f.n_nodes, dtype=np.int64)
    for end, port in ((links.a, links.a_port), (links.b, links.b_port)):
        sw = f.is_switch[end]
        nodes, phys = end[sw], f.physical_port(end[sw], port[sw])
        pairs = np.unique(nodes.astype(np.int64) * 65536 + phys)
        used_phys += np.bincount(pairs // 65536, minlength=f.n_nodes)
    ports = np.zeros(f.n_nodes, dtype=np.int64)
    sw = np.flatnonzero(f.is_switch)
    model_ports = np.array([m.ports for _, m in f.models], dtype=np.int64)
    ports[sw] = model_ports[f.nodes.model[sw]]
    return used_phys, ports


def _oversubscription(f: Fabric) -> dict[str, float]:
    """Per tier: the worst (max over switches) active down bandwidth / up bandwidth.

    Links to backup hosts are standby and do not count as down bandwidth.
    """
    links, nodes = f.links, f.nodes
    active = ~nodes.backup[links.a]
    down = np.bincount(links.b, weights=links.capacity_gbps[:, 1] * active, minlength=f.n_nodes)
    up = np.bincount(links.a, weights=links.capacity_gbps[:, 0], minlength=f.n_nodes)
    out: dict[str, float] = {}
    for kind, name in _TIER_NAMES.items():
        sel = (nodes.kind == kind) & (up > 0)
        if sel.any():
            out[name] = round(float(np.max(down[sel] / up[sel])), 4)
    return out


def bisection_gbps(f: Fabric) -> float:
    """Max flow from the first half of the active hosts to the second half (Gbit/s).

    The hosts are split by index, which follows segments and pods, the worst cut of a
    Clos. Scale-up links are inside hosts and never cross the cut.
    """
    nodes, links = f.nodes, f.links
    hosts = f.ids(NodeKind.HOST, active_only=True)
    half = len(hosts) // 2
    if half == 0:
        return 0.0
    host_idx = nodes.host[hosts]
    side = np.full(len(f.host_node), -1, dtype=np.int8)
    side[host_idx[:half]] = 0
    side[host_idx[half: 2 * half]] = 1
    # network part only: NIC ports and switches; source feeds side-0 NICs, sink drains side 1
    net = links.kind >= LinkKind.ACCESS
    a, b = links.a[net], links.b[net]
    cap = np.round(links.capacity_gbps[net]).astype(np.int64)
    n = f.n_nodes
    src, snk = n, n + 1
    nic = f.ids(NodeKind.NIC)
    nic_side = np.where(nodes.backup[nic], -1, side[nodes.host[nic]])
    nic_cap = np.bincount(a[np.isin(a, nic)], weights=cap[np.isin(a, nic), 0], minlength=n)
    s_nic, t_nic = nic[nic_side == 0], nic[nic_side == 1]
    rows = np.concatenate([a, b, np.full(len(s_nic), src), t_nic])
    cols = np.concatenate([b, a, s_nic, np.full(len(t_nic), snk)])
    data = np.concatenate([cap[:, 0], cap[:, 1], nic_cap[s_nic], nic_cap[t_nic]])
    g = sp.csr_matrix((data.astype(np.int32), (rows, cols)), shape=(n + 2, n + 2))
    g.sum_duplicates()
    return float(maximum_flow(g, src, snk, method="dinic").flow_value)


def _pick(candidates: np.ndarray) -> int | None:
    return int(candidates[0]) if len(candidates) else None


def pair_hops(f: Fabric) -> dict[str, dict[str, Any] | None]:
    """Switch hops and base one-way latency between GPU 0 of the first host and a GPU of
    each pair kind, on the shortest path (fewest switches; NVLink first when that saves
    switches, as NCCL's PXN does). None where the fabric has no such pair."""
    nodes = f.nodes
    gpus = f.ids(NodeKind.GPU, active_only=True)
    g0 = int(gpus[0])
    h0, seg0, pod0 = nodes.host[g0], nodes.segment[g0], nodes.pod[g0]
    rail0 = nodes.rail[g0]
    other = gpus[nodes.host[gpus] != h0]
    same_seg = other[nodes.segment[other] == seg0]
    targets = {
        "same_host": _pick(gpus[(nodes.host[gpus] == h0) & (gpus != g0)]),
        "same_rail_segment": _pick(same_seg[nodes.rail[same_seg] == rail0]),
        "cross_rail_segment": _pick(same_seg[nodes.rail[same_seg] != rail0]),
        "cross_segment": _pick(other[(nodes.segment[other] != seg0)
                                     & (nodes.pod[other] == pod0)
                                     & (nodes.rail[other] == rail0)]),
        "cross_pod": _pick(other[(nodes.pod[other] != pod0) & (nodes.rail[other] == rail0)]),
    }
    # weight of an arc = 1e6 if it enters a switch, else 1: fewest switches, then fewest links
    src, dst, _ = f.arcs
    g = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(f.n_nodes, f.n_nodes))
    g.sum_duplicates()  # parallel links become one arc; its weight is set below
    g.data = np.where(f.is_switch[g.indices], 1e6, 1.0)
    dist, pred = dijkstra(g, indices=g0, return_predecessors=True)
    # latency along the chosen path: link latency + forwarding latency of each switch
    link_lat = {}
    want = [t for t in targets.values() if t is not None]
    out: dict[str, dict[str, Any] | None] = {}
    path_nodes: dict[int, list[int]] = {}
    for t in want:
        path = [t]
        while path[-1] != g0:
            path.append(int(pred[path[-1]]))
        path_nodes[t] = path[::-1]
    # one lookup table from (min, max) node pair to the link latency, built for path nodes only
    on_path = np.unique(np.concatenate([np.array(p) for p in path_nodes.values()])) if want \
        else np.array([], dtype=np.int64)
    la, lb = f.links.a, f.links.b
    sel = np.flatnonzero(np.isin(la, on_path) & np.isin(lb, on_path))
    for i in sel:
        link_lat[(int(la[i]), int(lb[i]))] = int(f.links.latency_ns[i])
        link_lat[(int(lb[i]), int(la[i]))] = int(f.links.latency_ns[i])
    for kind in PAIR_KINDS:
        t = targets[kind]
        if t is None:
            out[kind] = None
            continue
        path = path_nodes[t]
        lat = sum(link_lat[(u, v)] for u, v in itertools.pairwise(path))
        lat += int(nodes.latency_ns[path].sum())
        out[kind] = {"switch_hops": int(dist[t] // 1e6), "latency_ns": lat,
                     "to": str(nodes.name[t])}
    return out


def plan_fabric(f: Fabric, *, bisection: bool = True) -> dict[str, Any]:
    """The design of ``f`` as one JSON-ready dict (see docs/plan.md for every key)."""
    nodes, links = f.nodes, f.links
    spec = f.spec
    gpu, host, nic = (nodes.kind == k for k in (NodeKind.GPU, NodeKind.HOST, NodeKind.NIC))
    active_host = host & ~nodes.backup
    used, ports = port_usage(f)
    switches = {name: int((nodes.kind == k).sum()) for k, name in _TIER_NAMES.items()}
    switches["total"] = sum(switches.values())

    # links per tier and speed
    link_rows = []
    keys = links.kind.astype(np.int64) * 10**7 + np.round(links.capacity_gbps[:, 0] * 10)
    uniq, counts = np.unique(keys, return_counts=True)
    for key, c in zip(uniq, counts, strict=True):
        link_rows.append({"tier": LinkKind(int(key // 10**7)).label,
                          "gbps": float(key % 10**7) / 10, "count": int(c)})

    # optics and cables, from the media of cabled links
    cabled = links.kind >= LinkKind.ACCESS
    cab: dict[str, int] = {}
    for medium in (Medium.DAC, Medium.AOC, Medium.OPTIC):
        sel = cabled & (links.medium == medium)
        if not sel.any():
            continue
        # a breakout cable/transceiver serves every logical port of one physical switch port
        ends = []
        for end, port in ((links.a[sel], links.a_port[sel]), (links.b[sel], links.b_port[sel])):
            sw = f.is_switch[end]
            ends.append(np.unique(end[sw].astype(np.int64) * 65536
                                  + f.physical_port(end[sw], port[sw])).size
                        + int((~sw).sum()))
        if medium == Medium.OPTIC:
            cab["transceivers"] = cab.get("transceivers", 0) + sum(ends)
            cab["fibers"] = cab.get("fibers", 0) + int(sel.sum())
        else:
            # one cable per upper-end physical port (a breakout cable has several tails)
            cab[f"{medium.label}_cables"] = ends[1]
    # per-tier optics detail
    by_tier = {}
    for kind in (LinkKind.ACCESS, LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE):
        sel = links.kind == kind
        if sel.any():
            by_tier[kind.label] = {"links": int(sel.sum()),
                                   "medium": Medium(int(links.medium[sel][0])).label}

    out: dict[str, Any] = {
        "name": f.name,
        "family": f.family,
        "gpus": int((gpu & ~nodes.backup).sum()),
        "hosts": int(active_host.sum()),
        "backup_hosts": int((host & nodes.backup).sum()),
        "backup_gpus": int((gpu & nodes.backup).sum()),
        "nic_ports": int(nic.sum()),
        "rails": spec.hosts.nics_per_host,
        "segments": int(np.unique(nodes.segment[active_host]).size),
        "pods": int(np.unique(nodes.pod[active_host]).size),
        "planes": int(max(1, np.unique(nodes.plane[f.is_switch & (nodes.plane >= 0)]).size)),
        "tiers": int(np.unique(nodes.tier[f.is_switch]).size),
        "switches": switches,
        "links": link_rows,
        "cabling": {**cab, "by_tier": by_tier},
        "oversubscription": _oversubscription(f),
        "scaleout_gbps_per_gpu": float(
            links.capacity_gbps[(links.kind == LinkKind.ACCESS) & ~nodes.backup[links.a], 0]
            .sum() / max(1, int((gpu & ~nodes.backup).sum()))),
        "max_port_use": {
            name: f"{int(used[nodes.kind == k].max())}/{int(ports[nodes.kind == k].max())}"
            for k, name in _TIER_NAMES.items() if (nodes.kind == k).any()},
        "hops": pair_hops(f),
    }
    if spec.scheduled is not None:  # (a key only in a scheduled fabric's plan)
        from aifabric.topology.scheduled import scheduled_elements

        out["scheduled"] = scheduled_elements(f)
    dom = resolve_domain(spec, out["hosts"])
    if dom is not None:  # only with a domain: plans of specs without one stay as they were
        out["scaleup"] = scaleup_plan(dom, out["scaleout_gbps_per_gpu"])
    fe = plan_frontend(spec, out["hosts"])
    if fe is not None:  # the frontend/storage network, only when the spec has one
        out["frontend"] = fe.as_dict()
    mg = plan_management(f)
    if mg is not None:  # the out-of-band management network, only when the spec has one
        out["management"] = mg.as_dict()
    if bisection:
        bis = bisection_gbps(f)
        out["bisection_gbps"] = bis
        out["bisection_gbps_per_gpu"] = round(bis / max(1, out["gpus"] // 2), 2)
    return out


def scaleup_plan(dom: Domain, scaleout_gbps_per_gpu: float) -> dict[str, Any]:
    """The scale-up part of a plan: domains, NVLink switch chips, trays, links, cables and
    cartridges (per domain and in all), and the bandwidth per GPU of both dimensions."""
    n = dom.count
    return {
        "domains": n, "gpus_per_domain": dom.gpus, "hosts_per_domain": dom.hosts,
        "switch": dom.switch, "switch_ports": dom.switch_ports,
        "switch_port_gbps": dom.switch_gbps, "nvls": dom.nvls,
        "switch_chips_per_domain": dom.chips, "switch_chips": dom.chips * n,
        "switch_trays_per_domain": dom.trays, "switch_trays": dom.trays * n,
        "nvlink_links_per_domain": dom.links, "nvlink_links": dom.links * n,
        "nvlink_cables": dom.cables * n, "cartridges": dom.cartridges * n,
        "links_per_gpu": dom.links_per_gpu, "link_gbps": dom.link_gbps,
        "scaleup_gbps_per_gpu": dom.gbps_per_gpu,
        "scaleout_gbps_per_gpu": scaleout_gbps_per_gpu,
        "scaleup_to_scaleout": round(dom.gbps_per_gpu / scaleout_gbps_per_gpu, 3)
        if scaleout_gbps_per_gpu else None,
    }
