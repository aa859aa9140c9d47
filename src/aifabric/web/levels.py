"""The topology's finer levels below the overview (:mod:`aifabric.web.topology`): one
*plane* of a pod with every agg and core switch drawn one by one, and one *ToR* with
every port, its load and the flows on it.

The levels an SRE walks: pod (the overview) -> plane (:func:`plane_view`) -> segment
(:func:`aifabric.web.topology.segment_view`) -> ToR (:func:`tor_view`).

- A plane view draws every agg of the pod's plane and every core those aggs are cabled
  to, one node per switch (so each can be clicked and failed), and the plane's ToRs one
  group per segment (the segment-level group ids of the overview: a click drills into the
  segment). An edge joins a ToR group and an agg (its links aggregated, coloured by the
  group statistic) or an agg and a core (their links).
- A ToR view draws the ToR, its peers (NIC ports below, labelled with their host; aggs
  above) and one edge per port; ``ports`` lists each port with its peer, tier, capacity,
  load in each direction, the flows crossing it (each direction) and the heaviest of them.

Both are numpy over the fabric's arrays: the only Python loops run over what is drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind
from aifabric.web.topology import (
    COLOUR_BY,
    STAT_COLOUR_BY,
    _check_arrays,
    _check_stat,
    _edge,
    _groups,
    _per_link_stat,
    _reduce,
    node_dead,
    short_labels,
)

if TYPE_CHECKING:
    from aifabric.routing.route import Routed

__all__ = ["PORT_FLOWS", "plane_view", "tor_view"]

#: heaviest flows listed per ToR port
PORT_FLOWS = 5

_KINDS = [k.label for k in LinkKind]


def _planes(f: Fabric, pod: int) -> list[int]:
    n = f.nodes
    m = (n.kind == NodeKind.AGG) & (n.pod == pod)
    return sorted(set(n.plane[m].tolist()))


def plane_view(f: Fabric, pod: int | None, plane: int, arc_value: np.ndarray | None, *,
               alive: np.ndarray | None = None, agg: str = "mean",
               stat: str | None = None) -> dict[str, Any]:
    """One plane of one pod: every agg and core switch, the plane's ToRs per segment
    (see the module docstring). ``plane`` -1 is a pod without planes (every agg);
    ``pod`` None: the first pod that has aggs in ``plane`` (a core group's plane)."""
    n, L = f.nodes, f.links
    pods = sorted(set(n.pod[n.kind == NodeKind.AGG].tolist()))
    if pod is None:
        has = n.pod[(n.kind == NodeKind.AGG) & (n.plane == plane)] \
            if isinstance(plane, (int, np.integer)) and not isinstance(plane, bool) else []
        pod = int(np.min(has)) if len(has) else (pods[0] if pods else -1)
    if isinstance(pod, bool) or not isinstance(pod, (int, np.integer)) or int(pod) not in pods:
        raise SpecError(Problem("pod", f"{pod!r} is not a pod of {f.name} with aggs; "
                                f"allowed: {', '.join(map(str, pods)) or 'none'}"))
    planes = _planes(f, int(pod))
    if isinstance(plane, bool) or not isinstance(plane, (int, np.integer)) \
            or int(plane) not in planes:
        raise SpecError(Problem("plane", f"{plane!r} is not a plane of pod {pod}; allowed: "
                                + ", ".join(map(str, planes))))
    _check_stat(stat)
    arc_value, alive = _check_arrays(f, arc_value, alive, agg)
    p, pl = int(pod), int(plane)
    aggs = np.flatnonzero((n.kind == NodeKind.AGG) & (n.pod == p) & (n.plane == pl))
    aggs = aggs[np.lexsort((aggs, n.group[aggs]))]
    is_agg = np.zeros(f.n_nodes, dtype=bool)
    is_agg[aggs] = True
    ext = L.kind > LinkKind.ACCESS
    # cores: those cabled to the plane's aggs
    up = ext & is_agg[L.a] & (n.kind[L.b] == NodeKind.CORE)
    cores = np.unique(L.b[up])
    cores = cores[np.lexsort((cores, n.group[cores]))]
    # ToRs below the aggs: one group per segment (the segment-level overview groups)
    down = ext & is_agg[L.b] & (n.kind[L.a] == NodeKind.TOR)
    tors = np.unique(L.a[down])
    g = _groups(f, "segment")
    tgroups = np.unique(g.gid[tors])
    tgroups = tgroups[np.lexsort((tgroups, g.segment[tgroups]))]
    # view ids: ToR groups 0.., aggs, cores
    T, A, C = len(tgroups), len(aggs), len(cores)
    vid = np.full(f.n_nodes, -1, dtype=np.int64)
    tg_pos = np.full(g.n, -1, dtype=np.int64)
    tg_pos[tgroups] = np.arange(T)
    vid[tors] = tg_pos[g.gid[tors]]
    vid[aggs] = T + np.arange(A)
    vid[cores] = T + A + np.arange(C)
    dead = node_dead(f, alive)

    names = n.name
    width = 70.0 * max(T, A, C, 1)
    xs = [np.linspace(-width / 2, width / 2, k) if k > 1 else np.zeros(k) for k in (T, A, C)]
    nodes: list[dict[str, Any]] = []
    tor_dead = np.bincount(g.gid[tors], weights=dead[tors], minlength=g.n)
    tor_cnt = np.bincount(g.gid[tors], minlength=g.n)
    for j, gi in enumerate(tgroups.tolist()):  # one per segment (15 on HPN)
        s = int(g.segment[gi])
        nodes.append({"id": g.ids[gi], "node": None, "kind": "tor", "group": True,
                      "name": g.labels[gi], "label": f"seg {s} ToRs",
                      "count": int(tor_cnt[gi]), "down": int(tor_dead[gi]), "segment": s,
                      "drill": s, "pod": p, "plane": pl, "x": float(xs[0][j]), "y": 440.0})
    for row, members, y in ((1, aggs, 220.0), (2, cores, 0.0)):
        labels = short_labels(names[members].tolist())
        kind = "agg" if row == 1 else "core"
        for j, v in enumerate(members.tolist()):  # the plane's switches (64 on HPN)
            nodes.append({"id": f"n:{v}", "node": v, "kind": kind, "name": str(names[v]),
                          "label": labels[j], "pod": int(n.pod[v]), "plane": int(n.plane[v]),
                          "group_index": int(n.group[v]), "segment": -1, "rail": -1,
                          "alive": not bool(dead[v]), "x": float(xs[row][j]), "y": y})
    ids = [nd["id"] for nd in nodes]
    edges = _view_edges(f, vid, ids, np.flatnonzero(up | down), arc_value, alive, agg, stat)
    return {"pod": p, "plane": pl, "planes": planes, "nodes": nodes, "edges": edges,
            "tor_groups": T, "aggs": A, "cores": C, "agg": agg, "stat": stat,
            "colour_by": COLOUR_BY[agg] if stat is None else STAT_COLOUR_BY[stat]}


def _view_edges(f: Fabric, vid: np.ndarray, ids: list[str], links: np.ndarray,
                arc_value: np.ndarray | None, alive: np.ndarray | None, agg: str,
                stat: str | None) -> list[dict[str, Any]]:
    """One edge per pair of view nodes that ``links`` join (a side, b side)."""
    L = f.links
    va, vb = vid[L.a[links]], vid[L.b[links]]
    keep = (va >= 0) & (vb >= 0) & (va != vb)
    links, va, vb = links[keep], va[keep], vb[keep]
    V = max(len(ids), 1)
    ue, einv = np.unique(va * V + vb, return_inverse=True)
    E = len(ue)
    if not E:
        return []
    cnt = np.bincount(einv, minlength=E)
    cap = np.bincount(einv, weights=L.capacity_gbps[links, 0], minlength=E)
    edown = (np.bincount(einv, weights=~alive[links], minlength=E) if alive is not None
             else np.zeros(E))
    ekind = np.zeros(E, dtype=np.int64)
    np.maximum.at(ekind, einv, L.kind[links].astype(np.int64))
    if arc_value is not None:
        eu = _reduce(einv, arc_value[2 * links], E, agg)
        ed = _reduce(einv, arc_value[2 * links + 1], E, agg)
        per = _per_link_stat(einv, arc_value, links, E, stat)
    edges = []
    for e in range(E):  # drawn edges: ToR groups x aggs + aggs x cores (~1,100 on HPN)
        s, t = int(ue[e] // V), int(ue[e] % V)
        val = {} if arc_value is None else {
            "up": float(eu[e]), "dn": float(ed[e]),
            "per": None if per is None else float(per[e])}
        edges.append(_edge(f"e:{ids[s]}|{ids[t]}", ids[s], ids[t], _KINDS[int(ekind[e])],
                           int(cnt[e]), int(edown[e]), float(cap[e]), agg, **val))
    return edges


def tor_view(f: Fabric, name: str, arc_value: np.ndarray | None, *,
             alive: np.ndarray | None = None, routed: Routed | None = None,
             arc_flows: np.ndarray | None = None, flow_label: Any = None,
             top: int = PORT_FLOWS) -> dict[str, Any]:
    """One ToR (see the module docstring): ``nodes`` (the ToR, its NIC ports, its
    aggs), ``edges`` (one per port) and ``ports`` (one row per port, by port number).
    ``routed``: the routing whose flows are listed per port (None: no flows);
    ``arc_flows``: flows per arc (the whole traffic's); ``flow_label(flows)`` -> the
    collective (pattern) and job of each listed flow."""
    from aifabric.telemetry.catalog import port_names

    n, L = f.nodes, f.links
    s = str(name).strip()
    if not f.has_node(s) or n.kind[f.node_id(s)] != NodeKind.TOR:
        tors = n.name[n.kind == NodeKind.TOR]
        raise SpecError(Problem("tor", f"no ToR called {s[:80]!r}; allowed: ToR names like "
                                + (str(tors[0]) if len(tors) else "none here")))
    t = f.node_id(s)
    arc_value, alive = _check_arrays(f, arc_value, alive, "mean")
    la = np.flatnonzero(L.a == t)  # uplinks (ToR is the lower end)
    lb = np.flatnonzero(L.b == t)  # access links (NIC port below)
    links = np.concatenate([lb, la])
    mine_port = np.concatenate([L.b_port[lb], L.a_port[la]]).astype(np.int64)
    peer = np.concatenate([L.a[lb], L.b[la]]).astype(np.int64)
    peer_port = np.concatenate([L.a_port[lb], L.b_port[la]]).astype(np.int64)
    order = np.lexsort((links, mine_port))
    links, mine_port, peer, peer_port = links[order], mine_port[order], peer[order], \
        peer_port[order]
    is_up = L.a[links] == t  # the ToR is the link's a side: an uplink
    # the ToR's "out" arc of each port (towards the peer) and its "in" arc
    out_arc = np.where(is_up, 2 * links, 2 * links + 1)
    in_arc = np.where(is_up, 2 * links + 1, 2 * links)
    here = np.full(len(links), t, dtype=np.int64)
    my_if = port_names(f, here, mine_port).astype(str)
    peer_if = port_names(f, peer, peer_port).astype(str)
    pk = n.kind[peer]
    host_name = np.where(pk == NodeKind.NIC,
                         n.name[f.host_node[np.maximum(n.host[peer], 0)]], n.name[peer])
    dead = node_dead(f, alive)
    ok = np.ones(len(links), dtype=bool) if alive is None else alive[links]

    def val(arcs: np.ndarray) -> list[float | None]:
        return arc_value[arcs].tolist() if arc_value is not None else [None] * len(arcs)

    def nfl(arcs: np.ndarray) -> list[int | None]:
        return arc_flows[arcs].astype(np.int64).tolist() if arc_flows is not None \
            else [None] * len(arcs)

    tops = _port_flows(f, routed, np.concatenate([out_arc, in_arc]), flow_label, top) \
        if routed is not None else {}
    ports = []
    cols = zip(links.tolist(), mine_port.tolist(), my_if.tolist(), peer.tolist(),
               peer_if.tolist(), host_name.tolist(), L.kind[links].tolist(),
               L.capacity_gbps[links, 0].tolist(), ok.tolist(), out_arc.tolist(),
               in_arc.tolist(), val(out_arc), val(in_arc), nfl(out_arc), nfl(in_arc),
               strict=True)
    for lk, mp, mi, pr, pi, hn, kd, cap, alive_, oa, ia, vo, vi, fo, fi in cols:  # ~200
        ports.append({"link": lk, "port": mp, "iface": mi, "peer": str(n.name[pr]),
                      "peer_host": str(hn), "peer_iface": pi, "peer_kind": _NODE[int(n.kind[pr])],
                      "tier": _KINDS[int(kd)], "capacity_gbps": float(cap),
                      "alive": bool(alive_), "arc_out": oa, "arc_in": ia,
                      "out": vo, "in": vi, "flows_out": fo, "flows_in": fi,
                      "top_out": tops.get(oa, []), "top_in": tops.get(ia, [])})
    # drawing: aggs on top, the ToR in the middle, NIC ports (by host) below
    up_peers = np.unique(peer[is_up])
    dn = peer[~is_up]
    dn_order = np.lexsort((dn, n.host[dn]))
    dn_peers = dn[dn_order]
    nodes = [{"id": f"n:{t}", "node": t, "kind": "tor", "name": s, "label": s,
              "pod": int(n.pod[t]), "segment": int(n.segment[t]), "plane": int(n.plane[t]),
              "rail": int(n.rail[t]), "side": int(n.side[t]), "alive": not bool(dead[t]),
              "x": 0.0, "y": 250.0}]
    ux = (np.arange(len(up_peers)) - (len(up_peers) - 1) / 2.0) * 70.0
    ulab = short_labels(n.name[up_peers].tolist())
    for j, v in enumerate(up_peers.tolist()):  # the ToR's aggs (60 on HPN)
        nodes.append({"id": f"n:{v}", "node": v, "kind": _NODE[int(n.kind[v])],
                      "name": str(n.name[v]), "label": ulab[j], "pod": int(n.pod[v]),
                      "plane": int(n.plane[v]), "segment": -1, "rail": -1,
                      "alive": not bool(dead[v]), "x": float(ux[j]), "y": 0.0})
    dx = (np.arange(len(dn_peers)) - (len(dn_peers) - 1) / 2.0) * 34.0
    hn_dn = n.name[f.host_node[np.maximum(n.host[dn_peers], 0)]].astype(str)
    hlab = short_labels(hn_dn.tolist()) if len(hn_dn) else []
    nic_if = port_names(f, dn_peers, np.zeros(len(dn_peers), dtype=np.int64)).astype(str)
    for j, v in enumerate(dn_peers.tolist()):  # the NIC ports below (136 on HPN)
        nodes.append({"id": f"n:{v}", "node": v, "kind": "nic", "name": str(n.name[v]),
                      "label": hlab[j], "host": str(hn_dn[j]), "iface": str(nic_if[j]),
                      "rail": int(n.rail[v]), "side": int(n.side[v]), "plane": -1,
                      "segment": int(n.segment[v]), "alive": not bool(dead[v]),
                      "x": float(dx[j]), "y": 500.0 + 60.0 * (j % 2)})
    edges = []
    for pr in ports:  # one per port
        other = f"n:{f.node_id(pr['peer'])}"
        up_ = pr["tier"] != "access"
        vu = pr["out"] if up_ else pr["in"]  # the link's up direction (towards the core)
        vd = pr["in"] if up_ else pr["out"]
        edges.append({"id": f"l:{pr['link']}", "link": pr["link"],
                      "source": f"n:{t}" if up_ else other,
                      "target": other if up_ else f"n:{t}", "tier": pr["tier"],
                      "from_port": pr["iface"] if up_ else pr["peer_iface"],
                      "to_port": pr["peer_iface"] if up_ else pr["iface"],
                      "capacity_gbps": pr["capacity_gbps"], "alive": pr["alive"],
                      "up": vu, "down": vd,
                      "value": None if vu is None else max(vu, vd),
                      "per_link": None if vu is None else max(vu, vd),
                      "flows": None if pr["flows_out"] is None
                      else pr["flows_out"] + pr["flows_in"]})
    return {"tor": s, "node": t, "segment": int(n.segment[t]), "pod": int(n.pod[t]),
            "plane": int(n.plane[t]), "rail": int(n.rail[t]), "nodes": nodes,
            "edges": edges, "ports": ports, "uplinks": int(is_up.sum()),
            "downlinks": int((~is_up).sum()), "flows_listed": top}


_NODE = [k.label for k in NodeKind]


def _port_flows(f: Fabric, routed: Routed, arcs: np.ndarray, flow_label: Any,
                top: int) -> dict[int, list[dict[str, Any]]]:
    """Per arc of ``arcs``: its ``top`` heaviest flows (bytes on the arc, then flow id),
    each with its GPUs and (``flow_label``) collective and job."""
    want = np.zeros(routed.n_arcs, dtype=bool)
    want[arcs] = True
    on = np.flatnonzero(want[routed.arcs] & (routed.fractions > 0))
    if not len(on):
        return {}
    fl = np.repeat(np.arange(len(routed.flows)), np.diff(routed.ptr))[on]
    arc = routed.arcs[on].astype(np.int64)
    by = routed.fractions[on] * routed.flows.size_bytes[fl]
    order = np.lexsort((fl, -by, arc))
    arc, fl, by = arc[order], fl[order], by[order]
    start = np.r_[0, np.flatnonzero(arc[1:] != arc[:-1]) + 1]
    rank = np.arange(len(arc)) - np.repeat(start, np.diff(np.r_[start, len(arc)]))
    pick = np.flatnonzero(rank < top)
    names = f.nodes.name
    shown = fl[pick]
    coll, job = flow_label(shown) if flow_label is not None else \
        ([[] for _ in pick], [[] for _ in pick])
    out: dict[int, list[dict[str, Any]]] = {}
    for a, i, b, cs, js in zip(arc[pick].tolist(), shown.tolist(), by[pick].tolist(), coll,
                               job, strict=True):  # top x ports (~2,000 at most)
        out.setdefault(a, []).append({
            "flow": i, "src": str(names[routed.flows.src_gpu[i]]),
            "dst": str(names[routed.flows.dst_gpu[i]]), "bytes": float(b),
            "collective": ", ".join(cs), "job": ", ".join(js)})
    return out
