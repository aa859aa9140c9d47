"""The topology view's data: an aggregated graph of a fabric laid out like its LLD, one
segment in full, and search by name, port or IP.

A 15,360-GPU pod has 51,368 nodes and 96,960 links: far too many to draw. The
:func:`overview` groups nodes (hosts per segment, ToRs per segment and plane, aggs per
pod/plane/group, cores per plane/group) and links between the same two groups into one
edge that carries the link count, capacity and load; the links inside a group (NVLink,
PCIe) are counted on the group. :func:`segment_view` draws one segment with every ToR,
host and NIC port link. :func:`search` finds switches, hosts, GPUs, NIC ports, switch
interfaces (``device:iface``) and addresses.

Everything is computed with numpy over the Fabric's arrays: per-fabric structure (group
of each node, edge of each link, the search index) is cached on the fabric object (weakly,
so a dropped fabric takes its cache along); per-call work is a few ``bincount``.
"""

from __future__ import annotations

import ipaddress
import math
import re
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["AGGS", "COLOUR_BY", "LEVELS", "MAX_GROUPS", "STATS", "TIERS", "node_dead",
           "overview", "search", "segment_view", "short_labels"]

#: tiers top to bottom (the ``tiers`` of :func:`overview`)
TIERS = ["core", "agg", "tor", "host"]
#: ``level`` values of :func:`overview`
LEVELS = ("auto", "segment", "pod")
#: how a group edge aggregates the metric of its arcs
AGGS = ("mean", "sum", "max")
#: how a group edge's ``per_link`` figure sums up its links' figures (each direction, then
#: the larger): the hottest link shows in its group with "max"
STATS = ("max", "p99", "mean")
#: "auto" picks the finest level with at most this many group nodes
MAX_GROUPS = 800
#: longest search query accepted
MAX_QUERY = 200
#: characters a search query may not hold (C0 controls and DEL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# group kinds: rank top to bottom (core first), and the tier number a node reports
_CORE, _AGG, _TOR, _HOST = 0, 1, 2, 3
_KIND_NAME = np.array(["core", "agg", "tor", "host"], dtype=object)
_TIER_NUM = {_CORE: 3, _AGG: 2, _TOR: 1, _HOST: 0}
# layout (pixels of the drawing's own coordinate system)
_Y = {_CORE: 0.0, _AGG: 220.0, _TOR: 440.0, _HOST: 660.0}
_COL = 130.0  # one ToR group column
_GAP = 90.0  # between pods


# --------------------------------------------------------------------- caching
_CACHE: weakref.WeakKeyDictionary[Fabric, dict[str, Any]] = weakref.WeakKeyDictionary()


def _cache(f: Fabric) -> dict[str, Any]:
    c = _CACHE.get(f)
    if c is None:
        c = {}
        _CACHE[f] = c
    return c


# --------------------------------------------------------------------- grouping
@dataclass
class _Groups:
    """One aggregation of a fabric: group of every node, edge of every link."""

    level: str
    merged: bool  # ToR planes merged into one group per segment/pod
    gid: np.ndarray  # int64 group of each node
    kind: np.ndarray  # per group: _CORE.._HOST
    pod: np.ndarray
    segment: np.ndarray  # -1 for pod-level and upper groups
    plane: np.ndarray
    group: np.ndarray
    count: np.ndarray  # members of the group's own kind (hosts, switches)
    gpus: np.ndarray
    segments: list[list[int]]  # segments under each host/tor group
    ids: list[str]
    labels: list[str]
    # links: inside a group or an edge between two
    link_edge: np.ndarray  # edge of each link, -1 inside a group
    edge_src: np.ndarray  # group (the links' a side)
    edge_dst: np.ndarray
    edge_kind: np.ndarray  # LinkKind (highest of its links)
    edge_links: np.ndarray
    edge_cap: np.ndarray  # sum of a->b capacity, Gbit/s
    inside_links: np.ndarray  # per group
    inside_cap: np.ndarray
    x: np.ndarray
    y: np.ndarray

    @property
    def n(self) -> int:
        return len(self.kind)


def _node_rank(f: Fabric) -> np.ndarray:
    """Group kind of each node (host side: GPU, host, NIC port -> _HOST)."""
    k = f.nodes.kind
    out = np.full(len(k), _HOST, dtype=np.int64)
    out[k == NodeKind.TOR] = _TOR
    out[k == NodeKind.AGG] = _AGG
    out[k == NodeKind.CORE] = _CORE
    return out


def _fmt(prefix: str, parts: list[tuple[str, int]]) -> str:
    return prefix + "".join(f":{p}{v}" for p, v in parts if v >= 0)


def _build_groups(f: Fabric, level: str, merged: bool) -> _Groups:
    n, L = f.nodes, f.links
    rank = _node_rank(f)
    seg_level = level == "segment"
    a = np.where(rank == _CORE, -1, n.pod).astype(np.int64)
    if seg_level:
        a = np.where((rank == _HOST) | (rank == _TOR), n.segment, a)
    b = np.where(rank == _HOST, -1, n.plane).astype(np.int64)
    if merged:
        b = np.where(rank == _TOR, -1, b)
    c = np.where((rank == _AGG) | (rank == _CORE), n.group, -1).astype(np.int64)
    key = (rank << 54) | ((a + 1) << 34) | ((b + 1) << 17) | (c + 1)
    uk, first, gid = np.unique(key, return_index=True, return_inverse=True)
    G = len(uk)
    kind = (uk >> 54).astype(np.int64)
    ga = ((uk >> 34) & ((1 << 20) - 1)) - 1
    gb = ((uk >> 17) & ((1 << 17) - 1)) - 1
    gc = (uk & ((1 << 17) - 1)) - 1
    pod = n.pod[first].astype(np.int64)
    segment = np.where(seg_level & ((kind == _HOST) | (kind == _TOR)), ga, -1)
    own = np.select([kind[gid] == _HOST, kind[gid] == _TOR, kind[gid] == _AGG],
                    [n.kind == NodeKind.HOST, n.kind == NodeKind.TOR, n.kind == NodeKind.AGG],
                    n.kind == NodeKind.CORE)
    count = np.bincount(gid, weights=own, minlength=G).astype(np.int64)
    gpus = np.bincount(gid, weights=n.kind == NodeKind.GPU, minlength=G).astype(np.int64)
    # segments under each lower group (pod level: several)
    lower = (rank == _HOST) & (n.kind == NodeKind.HOST)
    pairs = np.unique(gid[lower].astype(np.int64) * (1 << 20) + n.segment[lower])
    segs: list[list[int]] = [[] for _ in range(G)]
    for g, s in zip((pairs >> 20).tolist(), (pairs & ((1 << 20) - 1)).tolist(), strict=True):
        segs[g].append(s)
    tor_m = n.kind == NodeKind.TOR
    pairs = np.unique(gid[tor_m].astype(np.int64) * (1 << 20) + n.segment[tor_m])
    for g, s in zip((pairs >> 20).tolist(), (pairs & ((1 << 20) - 1)).tolist(), strict=True):
        segs[g].append(s)

    ids, labels = [], []
    for g in range(G):  # group nodes: at most a few hundred
        k, p, s, pl, gr = int(kind[g]), int(pod[g]), int(segment[g]), int(gb[g]), int(gc[g])
        if k == _HOST:
            if seg_level:
                ids.append(f"g:host:s{s}")
                labels.append(f"seg {s} hosts")
            else:
                ids.append(f"g:host:pod{p}")
                labels.append(f"pod {p} hosts")
        elif k == _TOR:
            where = ("s", s) if seg_level else ("pod", p)
            ids.append(_fmt("g:tor", [where, ("p", pl)]))
            labels.append(f"{'seg' if seg_level else 'pod'} {where[1]} ToRs"
                          + (f" plane {pl}" if pl >= 0 else ""))
        elif k == _AGG:
            ids.append(_fmt("g:agg", [("p", p), ("pl", pl), ("g", gr)]))
            labels.append("aggs" + (f" pod {p}" if p >= 0 else "")
                          + (f" plane {pl}" if pl >= 0 else "")
                          + (f" group {gr}" if gr >= 0 else ""))
        else:
            ids.append(_fmt("g:core", [("pl", pl), ("g", gr)]))
            labels.append("cores" + (f" plane {pl}" if pl >= 0 else "")
                          + (f" group {gr}" if gr >= 0 else ""))

    # ---- links: inside a group, or an edge between two groups
    la, lb = gid[L.a], gid[L.b]
    inside = la == lb
    ekey = la.astype(np.int64) * G + lb
    out = np.flatnonzero(~inside)
    ue, einv = np.unique(ekey[out], return_inverse=True)
    link_edge = np.full(len(L.a), -1, dtype=np.int64)
    link_edge[out] = einv
    E = len(ue)
    cap_up = L.capacity_gbps[:, 0]
    edge_links = np.bincount(einv, minlength=E).astype(np.int64)
    edge_cap = np.bincount(einv, weights=cap_up[out], minlength=E)
    edge_kind = np.zeros(E, dtype=np.int64)
    np.maximum.at(edge_kind, einv, L.kind[out].astype(np.int64))
    inside_links = np.bincount(la[inside], minlength=G).astype(np.int64)
    inside_cap = np.bincount(la[inside], weights=cap_up[inside], minlength=G)

    x, y = _layout(kind, pod, segment, gb, gc, seg_level)
    return _Groups(level, merged, gid, kind, pod, segment, gb, gc, count, gpus, segs, ids,
                   labels, link_edge, ue // G, ue % G, edge_kind, edge_links, edge_cap,
                   inside_links, inside_cap, x, y)


def _layout(kind: np.ndarray, pod: np.ndarray, segment: np.ndarray, plane: np.ndarray,
            group: np.ndarray, seg_level: bool) -> tuple[np.ndarray, np.ndarray]:
    """x by pod -> segment -> plane, y by tier: ToR groups in columns, hosts under the
    middle of their segment's ToRs, aggs spread over their pod's width, cores over all."""
    G = len(kind)
    x = np.zeros(G)
    y = np.array([_Y[int(k)] for k in kind])
    col = np.flatnonzero(kind == _TOR)
    # columns: ToR groups ordered by (pod, segment-or-pod, plane)
    order = col[np.lexsort((plane[col], segment[col], pod[col]))]
    pod_of = pod[order]
    gaps = np.concatenate([[0], np.cumsum(pod_of[1:] != pod_of[:-1])])
    x[order] = np.arange(len(order)) * _COL + gaps * _GAP
    # hosts: middle of the ToR groups of the same segment (or pod)
    unit = segment if seg_level else pod
    hosts = np.flatnonzero(kind == _HOST)
    for h in hosts.tolist():  # one per segment/pod
        same = order[(unit[order] == unit[h]) & (pod[order] == pod[h])]
        if len(same):
            x[h] = float(x[same].mean())
    width_lo = float(x[order].min()) if len(order) else 0.0
    width_hi = float(x[order].max()) if len(order) else 0.0
    # aggs: spread across their pod's columns (all columns when the pod has none)
    aggs = np.flatnonzero(kind == _AGG)
    for p in np.unique(pod[aggs]).tolist():  # pods
        mine = aggs[pod[aggs] == p]
        mine = mine[np.lexsort((group[mine], plane[mine]))]
        cols = order[pod[order] == p]
        lo, hi = ((float(x[cols].min()), float(x[cols].max())) if len(cols)
                  else (width_lo, width_hi))
        x[mine] = _spread(len(mine), lo, hi)
    cores = np.flatnonzero(kind == _CORE)
    cores = cores[np.lexsort((group[cores], plane[cores]))]
    x[cores] = _spread(len(cores), width_lo, width_hi)
    return x, y


def _spread(n: int, lo: float, hi: float) -> np.ndarray:
    if n == 1 or hi <= lo:
        return np.full(n, (lo + hi) / 2.0)
    if hi - lo < (n - 1) * _COL:  # room for each: widen around the middle
        mid, half = (lo + hi) / 2.0, (n - 1) * _COL / 2.0
        lo, hi = mid - half, mid + half
    return np.linspace(lo, hi, n)


def _groups(f: Fabric, level: str) -> _Groups:
    """The grouping for ``level`` ("auto" resolved), cached per fabric."""
    c = _cache(f)
    if level == "auto":
        if "auto" not in c:
            g = _groups(f, "segment")
            if g.n > MAX_GROUPS:
                key = ("segment", True)
                if key not in c:
                    c[key] = _build_groups(f, "segment", True)
                g = c[key]
            if g.n > MAX_GROUPS:
                g = _groups(f, "pod")
            c["auto"] = g
        return c["auto"]
    key = (level, False)
    if key not in c:
        c[key] = _build_groups(f, level, False)
    return c[key]


# --------------------------------------------------------------------- values
def _check_arrays(f: Fabric, arc_value: np.ndarray | None, alive: np.ndarray | None,
                  agg: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    if agg not in AGGS:
        raise SpecError(Problem("agg", f"{agg!r} is not an aggregation; allowed: "
                                + ", ".join(AGGS)))
    if arc_value is not None:
        arc_value = np.asarray(arc_value, dtype=np.float64)
        if arc_value.shape != (2 * f.n_links,):
            raise SpecError(Problem("arc_value", f"has shape {arc_value.shape}; allowed: one "
                                    f"value per arc ({2 * f.n_links})"))
        arc_value = np.nan_to_num(arc_value, nan=0.0, posinf=0.0, neginf=0.0)
    if alive is not None:
        alive = np.asarray(alive, dtype=bool)
        if alive.shape != (f.n_links,):
            raise SpecError(Problem("alive", f"has shape {alive.shape}; allowed: one flag "
                                    f"per link ({f.n_links})"))
    return arc_value, alive


def _reduce(idx: np.ndarray, values: np.ndarray, n: int, agg: str) -> np.ndarray:
    """``agg`` of ``values`` per bucket ``idx`` (0 for an empty bucket)."""
    if agg == "max":
        out = np.full(n, -np.inf)
        np.maximum.at(out, idx, values)
        out[~np.isfinite(out)] = 0.0
        return out
    s = np.bincount(idx, weights=values, minlength=n)
    if agg == "sum":
        return s
    cnt = np.bincount(idx, minlength=n)
    return np.divide(s, cnt, out=np.zeros(n), where=cnt > 0)


def _reduce_stat(idx: np.ndarray, values: np.ndarray, n: int, stat: str) -> np.ndarray:
    """``stat`` (:data:`STATS`) of ``values`` per bucket ``idx`` (0 for an empty bucket);
    p99 interpolates linearly as ``np.percentile`` does, for every bucket in one sort."""
    if stat != "p99":
        return _reduce(idx, values, n, stat)
    out = np.zeros(n)
    if not len(idx):
        return out
    order = np.lexsort((values, idx))
    gi, v = idx[order], values[order]
    cnt = np.bincount(gi, minlength=n)
    start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    has = np.flatnonzero(cnt > 0)
    pos = 0.99 * (cnt[has] - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, cnt[has] - 1)
    a, b = v[start[has] + lo], v[start[has] + hi]
    out[has] = a + (b - a) * (pos - lo)
    return out


def _check_stat(stat: str | None) -> None:
    if stat is not None and stat not in STATS:
        raise SpecError(Problem("stat", f"{stat!r} is not a group statistic; allowed: "
                                + ", ".join(STATS)))


def node_dead(f: Fabric, alive: np.ndarray | None) -> np.ndarray:
    """Bool per node: cut off by failed links. A switch or NIC port is dead when all its
    scale-out links (access, leaf-spine, spine-core) are; a host when all its NIC ports
    are; GPUs follow their host."""
    n, L = f.nodes, f.links
    dead = np.zeros(f.n_nodes, dtype=bool)
    if alive is None or alive.all():
        return dead
    ext = L.kind >= LinkKind.ACCESS
    deg = np.bincount(L.a[ext], minlength=f.n_nodes) + np.bincount(L.b[ext],
                                                                  minlength=f.n_nodes)
    live = ext & alive
    up = np.bincount(L.a[live], minlength=f.n_nodes) + np.bincount(L.b[live],
                                                                   minlength=f.n_nodes)
    dead = (deg > 0) & (up == 0)
    nic = np.flatnonzero(n.kind == NodeKind.NIC)
    if len(nic):
        H = len(f.host_node)
        nics = np.bincount(n.host[nic], minlength=H)
        dead_nics = np.bincount(n.host[nic], weights=dead[nic], minlength=H)
        host_dead = (nics > 0) & (dead_nics == nics)
        inside = (n.kind == NodeKind.HOST) | (n.kind == NodeKind.GPU)
        dead[inside] = host_dead[n.host[inside]]
    return dead


# --------------------------------------------------------------------- overview
def overview(f: Fabric, arc_value: np.ndarray | None, *, level: str = "auto",
             alive: np.ndarray | None = None, agg: str = "mean",
             stat: str | None = None) -> dict[str, Any]:
    """The aggregated graph of ``f`` (see the module docstring and the web contract).

    ``arc_value``: the metric per arc (``2l`` up, ``2l+1`` down) or None; ``alive``: bool
    per link; ``agg``: how an edge combines its arcs' values per direction (``up``,
    ``down``, ``value``); ``stat``: how its ``per_link`` figure, the one the page
    colours by, sums up its arcs' values (:data:`STATS`; None: the edge's value per
    link, a sum divided by its links). Every link is counted once: on exactly one edge,
    or in ``links_inside`` of one group."""
    if level not in LEVELS:
        raise SpecError(Problem("level", f"{level!r} is not a level; allowed: "
                                + ", ".join(LEVELS)))
    _check_stat(stat)
    arc_value, alive = _check_arrays(f, arc_value, alive, agg)
    g = _groups(f, level)
    E = len(g.edge_src)
    le = g.link_edge
    out_links = np.flatnonzero(le >= 0)
    eidx = le[out_links]
    if alive is not None:
        edge_down = np.bincount(eidx, weights=~alive[out_links], minlength=E).astype(np.int64)
        dead = node_dead(f, alive)
        own = _own_kind(f, g)
        node_down = np.bincount(g.gid, weights=dead & own, minlength=g.n).astype(np.int64)
    else:
        edge_down = np.zeros(E, dtype=np.int64)
        node_down = np.zeros(g.n, dtype=np.int64)
    if arc_value is not None:
        up = _reduce(eidx, arc_value[2 * out_links], E, agg)
        down = _reduce(eidx, arc_value[2 * out_links + 1], E, agg)
        per = _per_link_stat(eidx, arc_value, out_links, E, stat)
    nodes = []
    for i in range(g.n):  # group nodes
        k = int(g.kind[i])
        segs = g.segments[i]
        drill = segs[0] if len(segs) == 1 and k in (_HOST, _TOR) else None
        node = {"id": g.ids[i], "label": g.labels[i], "kind": str(_KIND_NAME[k]),
                "tier": _TIER_NUM[k], "count": int(g.count[i]), "pod": int(g.pod[i]),
                "segment": int(g.segment[i]), "plane": int(g.plane[i]), "rail": -1,
                "group": int(g.group[i]), "x": float(g.x[i]), "y": float(g.y[i]),
                "drill": drill, "down": int(node_down[i]),
                "links_inside": int(g.inside_links[i]),
                "capacity_inside_gbps": float(g.inside_cap[i])}
        if k == _HOST:
            node["gpus"] = int(g.gpus[i])
        if k in (_HOST, _TOR) and g.level == "pod":
            node["segments"] = segs
        nodes.append(node)
    edges = []
    kinds = [k.label for k in LinkKind]
    for e in range(E):  # group edges: a few hundred
        s, t = int(g.edge_src[e]), int(g.edge_dst[e])
        val = {} if arc_value is None else {
            "up": float(up[e]), "dn": float(down[e]),
            "per": None if per is None else float(per[e])}
        edges.append(_edge(f"e:{g.ids[s]}|{g.ids[t]}", g.ids[s], g.ids[t],
                           kinds[int(g.edge_kind[e])], int(g.edge_links[e]),
                           int(edge_down[e]), float(g.edge_cap[e]), agg, **val))
    return {"level": g.level, "planes_merged": g.merged, "agg": agg, "stat": stat,
            "nodes": nodes, "edges": edges, "tiers": list(TIERS),
            "colour_by": COLOUR_BY[agg] if stat is None else STAT_COLOUR_BY[stat]}


def _per_link_stat(eidx: np.ndarray, arc_value: np.ndarray, links: np.ndarray, E: int,
                   stat: str | None) -> np.ndarray | None:
    """Per edge: ``stat`` of its links' values in each direction, the larger of the
    two (None without a ``stat``)."""
    if stat is None:
        return None
    return np.maximum(_reduce_stat(eidx, arc_value[2 * links], E, stat),
                      _reduce_stat(eidx, arc_value[2 * links + 1], E, stat))


#: what an edge's ``per_link`` is, per aggregation (the page's legend says it)
COLOUR_BY = {"sum": "per link: a group's sum divided by its links",
             "mean": "per link: the mean over a group's links",
             "max": "per link: the largest of a group's links"}


#: what an edge's ``per_link`` is, per group statistic
STAT_COLOUR_BY = {"max": "per link: the hottest of a group's links",
                  "p99": "per link: the 99th percentile of a group's links",
                  "mean": "per link: the mean over a group's links"}


def _edge(eid: str, source: str, target: str, tier: str, links: int, down: int,
          cap: float, agg: str, up: float | None = None, dn: float | None = None,
          per: float | None = None) -> dict[str, Any]:
    """One drawn edge as the page reads it: its links and capacity, and (with a metric)
    its value up and down, the larger, and one link's figure (``per``, else
    :func:`_per_link` of the larger)."""
    edge: dict[str, Any] = {"id": eid, "source": source, "target": target, "tier": tier,
                            "links": links, "links_down": down, "capacity_gbps": cap}
    if up is None or dn is None:
        edge.update(up=None, down=None, value=None, per_link=None)
    else:
        v = max(up, dn)
        edge.update(up=up, down=dn, value=v,
                    per_link=_per_link(v, links, agg) if per is None else per)
    return edge


def _per_link(value: float, links: int, agg: str) -> float:
    """The figure of one link of an edge: a summed metric (bytes, flows, marks) over the
    edge's links, so that a group of 480 links is not coloured 480 times as hot as one
    access link; a mean or max is already one link's figure."""
    return value / links if agg == "sum" and links > 0 else value


def _own_kind(f: Fabric, g: _Groups) -> np.ndarray:
    """Per node: it is a member of its group's own kind (host of a host group...)."""
    k = f.nodes.kind
    gk = g.kind[g.gid]
    return np.select([gk == _HOST, gk == _TOR, gk == _AGG],
                     [k == NodeKind.HOST, k == NodeKind.TOR, k == NodeKind.AGG],
                     k == NodeKind.CORE)


# --------------------------------------------------------------------- one segment
def _ips(x: np.ndarray) -> np.ndarray:
    from aifabric.configs.addressing import ip_str

    s = ip_str(np.asarray(x, dtype=np.uint32)).astype(object)
    s[np.asarray(x) == 0] = ""
    return s


def segment_view(f: Fabric, segment: int, arc_value: np.ndarray | None, *,
                 alive: np.ndarray | None = None, agg: str = "mean",
                 stat: str | None = None) -> dict[str, Any]:
    """One segment: every ToR (rail-major, then side), every host (active and backup),
    one edge per access link host -> ToR with its interface names and the NIC's IP, and
    the ToRs' uplinks aggregated per agg group (the :func:`overview` group ids)."""
    n = f.nodes
    segs = int(n.segment.max()) + 1 if f.n_nodes else 0
    if isinstance(segment, bool) or not isinstance(segment, (int, np.integer)) \
            or not 0 <= int(segment) < segs:
        raise SpecError(Problem("segment", f"{segment!r} is not a segment of {f.name}; "
                                f"allowed: 0..{segs - 1}"))
    s = int(segment)
    _check_stat(stat)
    arc_value, alive = _check_arrays(f, arc_value, alive, agg)
    m = _segment_members(f, s)
    up = _segment_uplinks(f, m.tors)
    nodes = _segment_nodes(f, m, up, node_dead(f, alive))
    edges = _access_edges(f, m, arc_value, alive) + _uplink_edges(f, m, up, arc_value, alive,
                                                                  agg, stat)
    return {"segment": s, "segments": segs,
            "pod": int(n.pod[m.tors[0]]) if len(m.tors) else -1,
            "nodes": nodes, "edges": edges, "tors": len(m.tors), "hosts": len(m.hosts),
            "agg": agg, "stat": stat,
            "colour_by": COLOUR_BY[agg] if stat is None else STAT_COLOUR_BY[stat]}


@dataclass
class _Members:
    """A segment's access links (their NIC port and host), its ToRs and hosts, in the
    order they are drawn."""

    acc: np.ndarray  # access links of the segment
    nic: np.ndarray  # the NIC port of each
    host_of: np.ndarray  # the host node of each
    tors: np.ndarray  # rail-major, then side
    hosts: np.ndarray  # by host index (active and backup)


def _segment_members(f: Fabric, s: int) -> _Members:
    n, L = f.nodes, f.links
    acc = np.flatnonzero((L.kind == LinkKind.ACCESS) & (n.segment[L.a] == s))
    nic = L.a[acc]
    host_of = f.host_node[n.host[nic]]
    tor_m = (n.kind == NodeKind.TOR) & (n.segment == s)
    tor_m[L.b[acc]] = True
    tors = np.flatnonzero(tor_m)
    tors = tors[np.lexsort((tors, n.side[tors], n.rail[tors]))]
    hosts = np.flatnonzero((n.kind == NodeKind.HOST) & (n.segment == s))
    hosts = np.union1d(hosts, host_of)
    hosts = hosts[np.lexsort((hosts, n.host[hosts]))]
    return _Members(acc, nic, host_of, tors, hosts)


@dataclass
class _Uplinks:
    """The ToRs' uplinks grouped per (ToR, agg group of the segment-level overview)."""

    g: _Groups  # the segment-level grouping
    links: np.ndarray  # uplinks of the segment's ToRs
    agg_groups: np.ndarray  # the agg groups they reach (group ids of ``g``)
    edge_key: np.ndarray  # per edge: ToR position * len(agg_groups) + agg group position
    edge: np.ndarray  # edge of each uplink


def _segment_uplinks(f: Fabric, tors: np.ndarray) -> _Uplinks:
    L = f.links
    is_tor = np.zeros(f.n_nodes, dtype=bool)
    is_tor[tors] = True
    upl = np.flatnonzero(is_tor[L.a] & (L.kind > LinkKind.ACCESS))
    g = _groups(f, "segment")
    ug, ginv = np.unique(g.gid[L.b[upl]], return_inverse=True)
    tpos = np.zeros(f.n_nodes, dtype=np.int64)
    tpos[tors] = np.arange(len(tors))
    ekey = tpos[L.a[upl]] * max(len(ug), 1) + ginv
    ue, einv = np.unique(ekey, return_inverse=True)
    return _Uplinks(g, upl, ug, ue, einv)


def _segment_nodes(f: Fabric, m: _Members, up: _Uplinks, dead: np.ndarray
                   ) -> list[dict[str, Any]]:
    """Aggs on top (one node per agg group), the ToRs in a row, the hosts in rows below."""
    n = f.nodes
    tors, hosts, g, ug = m.tors, m.hosts, up.g, up.agg_groups
    tx = (np.arange(len(tors)) - (len(tors) - 1) / 2.0) * 90.0
    per_row = max(8, min(34, len(hosts)))
    rows = max(1, math.ceil(len(hosts) / per_row))
    per_row = max(1, math.ceil(len(hosts) / rows))
    hi = np.arange(len(hosts))
    hx = (hi % per_row - (per_row - 1) / 2.0) * 48.0
    hy = 420.0 + (hi // per_row) * 70.0
    gx = (np.arange(len(ug)) - (len(ug) - 1) / 2.0) * 420.0

    names = n.name
    tor_label = short_labels(names[tors].tolist())
    host_label = short_labels(names[hosts].tolist())
    nodes: list[dict[str, Any]] = []
    for j, gi in enumerate(ug.tolist()):  # agg groups above the segment: a handful
        nodes.append({"id": g.ids[gi], "node": None, "name": g.labels[gi], "kind": "agg",
                      "group": True, "rail": -1, "side": -1, "plane": int(g.plane[gi]),
                      "backup": False, "count": int(g.count[gi]), "x": float(gx[j]),
                      "y": 0.0, "alive": True})
    for j, t in enumerate(tors.tolist()):  # ToRs of one segment (16 on HPN)
        nodes.append({"id": f"n:{t}", "node": t, "name": str(names[t]),
                      "label": tor_label[j], "kind": "tor",
                      "rail": int(n.rail[t]), "side": int(n.side[t]),
                      "plane": int(n.plane[t]), "backup": False, "x": float(tx[j]),
                      "y": 200.0, "alive": not bool(dead[t])})
    hb = n.backup[hosts]
    hname = names[hosts]
    hd = dead[hosts]
    for j in range(len(hosts)):  # hosts of one segment (136 on HPN)
        h = int(hosts[j])
        nodes.append({"id": f"n:{h}", "node": h, "name": str(hname[j]),
                      "label": host_label[j], "kind": "host",
                      "rail": -1, "side": -1, "plane": -1, "backup": bool(hb[j]),
                      "x": float(hx[j]), "y": float(hy[j]), "alive": not bool(hd[j])})
    return nodes


def _access_edges(f: Fabric, m: _Members, arc_value: np.ndarray | None,
                  alive: np.ndarray | None) -> list[dict[str, Any]]:
    """One edge per NIC port link host -> ToR, with its ports, NIC, IP and load."""
    from aifabric.telemetry.catalog import port_names

    L = f.links
    acc = m.acc
    tor_n = L.b[acc]
    from_port = port_names(f, m.nic, L.a_port[acc])
    to_port = port_names(f, tor_n, L.b_port[acc])
    nic_name = f.nodes.name[m.nic]
    ip = _ips(f.nodes.ip[m.nic])
    cap = L.capacity_gbps[acc, 0]
    ok = np.ones(len(acc), dtype=bool) if alive is None else alive[acc]
    edges: list[dict[str, Any]] = []
    if arc_value is not None:
        vu, vd = arc_value[2 * acc], arc_value[2 * acc + 1]
        ups, downs = vu.tolist(), vd.tolist()
        vals = np.maximum(vu, vd).tolist()
    else:
        ups = downs = vals = [None] * len(acc)
    cols = zip(acc.tolist(), m.host_of.tolist(), tor_n.tolist(), from_port.tolist(),
               to_port.tolist(), nic_name.tolist(), ip.tolist(), cap.tolist(), ok.tolist(),
               ups, downs, vals, strict=True)
    for lk, h, t, fp, tp, nn, ipv, c, alive_, u, d, val in cols:  # 2,176 links on HPN
        edges.append({"id": f"l:{lk}", "link": lk, "arcs": [2 * lk, 2 * lk + 1],
                      "source": f"n:{h}", "target": f"n:{t}", "tier": "access",
                      "from_port": str(fp), "to_port": str(tp), "nic": str(nn),
                      "ip": str(ipv), "capacity_gbps": float(c), "alive": bool(alive_),
                      "up": u, "down": d, "value": val, "per_link": val})
    return edges


def _uplink_edges(f: Fabric, m: _Members, up: _Uplinks, arc_value: np.ndarray | None,
                  alive: np.ndarray | None, agg: str,
                  stat: str | None = None) -> list[dict[str, Any]]:
    """One edge per (ToR, agg group): its links, how many are down, capacity, load."""
    L = f.links
    upl, einv, ue, g, ug = up.links, up.edge, up.edge_key, up.g, up.agg_groups
    E = len(ue)
    if not E:
        return []
    kinds = [k.label for k in LinkKind]
    cnt = np.bincount(einv, minlength=E)
    ecap = np.bincount(einv, weights=L.capacity_gbps[upl, 0], minlength=E)
    edown = (np.bincount(einv, weights=~alive[upl], minlength=E) if alive is not None
             else np.zeros(E))
    ekind = np.zeros(E, dtype=np.int64)
    np.maximum.at(ekind, einv, L.kind[upl].astype(np.int64))
    if arc_value is not None:
        eu = _reduce(einv, arc_value[2 * upl], E, agg)
        ed = _reduce(einv, arc_value[2 * upl + 1], E, agg)
        per = _per_link_stat(einv, arc_value, upl, E, stat)
    W = max(len(ug), 1)
    edges: list[dict[str, Any]] = []
    for e in range(E):  # ToRs x agg groups: a few dozen
        t, gi = int(m.tors[ue[e] // W]), int(ug[ue[e] % W])
        val = {} if arc_value is None else {
            "up": float(eu[e]), "dn": float(ed[e]),
            "per": None if per is None else float(per[e])}
        edges.append(_edge(f"e:n:{t}|{g.ids[gi]}", f"n:{t}", g.ids[gi],
                           kinds[int(ekind[e])], int(cnt[e]), int(edown[e]),
                           float(ecap[e]), agg, **val))
    return edges


def short_labels(names: list[str]) -> list[str]:
    """Names without the prefix they all share, cut after a ``-`` (``tor-s00-r0-a`` ->
    ``r0-a``, ``host-s00-h000`` -> ``h000``): 16 ToR names side by side stay readable;
    the full name is the node's ``name`` (details panel, hover). One name: kept whole."""
    if len(names) < 2:
        return [str(x) for x in names]
    lo, hi = min(names), max(names)  # all share what the first and last in order share
    k = next((i for i, (a, b) in enumerate(zip(lo, hi, strict=False)) if a != b),
             min(len(lo), len(hi)))
    cut = lo.rfind("-", 0, k) + 1
    return [x[cut:] or x for x in names]


# --------------------------------------------------------------------- search
@dataclass
class _Index:
    """What search looks in: lowercase names, and addresses."""

    names: np.ndarray  # lowercase node names (numpy str)
    ip_val: np.ndarray  # uint32 addresses, sorted
    ip_node: np.ndarray  # node of each address
    ip_link: np.ndarray  # link of each address (-1: a loopback / a NIC's /32)
    access_of: np.ndarray  # per node: its access link (NIC ports), else -1


def _index(f: Fabric) -> _Index:
    c = _cache(f)
    if "search" in c:
        return c["search"]
    n, L = f.nodes, f.links
    names = _ascii_lower(n.name)
    nic = np.flatnonzero(n.kind == NodeKind.NIC)
    access_of = np.full(f.n_nodes, -1, dtype=np.int64)
    acc = np.flatnonzero(L.kind == LinkKind.ACCESS)
    access_of[L.a[acc]] = acc
    vals = [n.ip[nic].astype(np.uint32)]
    nodes_ = [nic.astype(np.int64)]
    links_ = [access_of[nic]]
    try:  # switch loopbacks and point-to-point addresses, when the pools fit
        from aifabric.configs.addressing import plan_addresses

        plan = plan_addresses(f)
        sw = plan.switches
        vals.append(plan.loopback[sw].astype(np.uint32))
        nodes_.append(sw.astype(np.int64))
        links_.append(np.full(len(sw), -1, dtype=np.int64))
        p = plan.p2p.astype(np.int64)
        vals += [plan.p2p_a[p].astype(np.uint32), plan.p2p_b[p].astype(np.uint32)]
        nodes_ += [L.a[p].astype(np.int64), L.b[p].astype(np.int64)]
        links_ += [p, p]
    except SpecError:
        pass
    v = np.concatenate(vals)
    nd = np.concatenate(nodes_)
    lk = np.concatenate(links_)
    keep = v != 0
    v, nd, lk = v[keep], nd[keep], lk[keep]
    order = np.lexsort((lk, nd, v))
    c["search"] = _Index(names, v[order], nd[order], lk[order], access_of)
    return c["search"]


def _ascii_lower(names: np.ndarray) -> np.ndarray:
    """Lowercase A-Z of a numpy string array (node names are ASCII), 10x faster than
    ``np.strings.lower``: the UCS-4 code points as integers."""
    u = np.ascontiguousarray(names.astype(np.str_, copy=False))
    if not u.dtype.itemsize:
        return u
    c = u.view(np.uint32).copy()
    c[(c >= 65) & (c <= 90)] += 32
    return c.view(u.dtype)


def _lower(q: str) -> str:
    """The query lowercased the same way as the names (A-Z only)."""
    return q.translate(_LOWER)


_LOWER = {c: c + 32 for c in range(65, 91)}


def _parse_ip(q: str) -> int | None:
    parts = q.split(".")
    if len(parts) != 4 or not all(p.isdigit() and len(p) <= 3 for p in parts):
        return None
    b = [int(p) for p in parts]
    if any(x > 255 for x in b):
        return None
    return (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]


_NODE_KIND = [k.label for k in NodeKind]


def _hit(f: Fabric, node: int, match: str, link: int | None, name: str | None = None,
         label: str | None = None) -> dict[str, Any]:
    n = f.nodes
    nm = str(n.name[node]) if name is None else name
    return {"name": nm, "kind": _NODE_KIND[int(n.kind[node])], "node": int(node),
            "segment": int(n.segment[node]), "pod": int(n.pod[node]),
            "plane": int(n.plane[node]), "rail": int(n.rail[node]), "match": match,
            "link": None if link is None or link < 0 else int(link),
            "label": nm if label is None else label, "exact": True}


def _port_hits(f: Fabric, dev: str, iface: str, limit: int) -> list[dict[str, Any]]:
    """``device:iface``: a switch's ``Ethernet<n>`` or a host's ``ens<r>f<s>``; an
    incomplete interface lists the device's ports that start with it."""
    from aifabric.telemetry.catalog import port_names

    idx = _index(f)
    m = np.flatnonzero(idx.names == _lower(dev))  # names compare case-insensitively
    if not len(m):
        return []
    node = int(m[0])
    n, L = f.nodes, f.links
    kind = int(n.kind[node])
    if f.is_switch[node]:
        la = np.flatnonzero(L.a == node)
        lb = np.flatnonzero(L.b == node)
        links = np.concatenate([la, lb])
        here = np.full(len(links), node, dtype=np.int64)
        ports = np.concatenate([L.a_port[la], L.b_port[lb]])
        owner = here
    elif kind == NodeKind.HOST:
        h = int(n.host[node])
        nics = np.flatnonzero((n.kind == NodeKind.NIC) & (n.host == h))
        links = idx.access_of[nics]
        keep = links >= 0
        nics, links = nics[keep], links[keep]
        here = nics
        ports = L.a_port[links]
        owner = np.full(len(links), node, dtype=np.int64)
    else:
        return []
    if not len(links):
        return []
    ifs = port_names(f, here, ports).astype(str)
    low = _ascii_lower(ifs)
    q = _lower(iface)
    exact = low == q
    pre = np.strings.startswith(low, q) & ~exact
    order = np.concatenate([np.flatnonzero(exact),
                            np.flatnonzero(pre)[np.lexsort((links[pre], ports[pre]))]])
    out = []
    devname = str(n.name[node])
    for i in order[:limit].tolist():  # at most ``limit`` hits
        lk = int(links[i])
        other = int(L.b[lk]) if int(L.a[lk]) == int(here[i]) else int(L.a[lk])
        peer = str(n.name[f.host_node[n.host[other]]]) if n.kind[other] == NodeKind.NIC \
            else str(n.name[other])
        nm = f"{devname}:{ifs[i]}"
        hit = _hit(f, int(owner[i]), "port", lk, name=nm, label=f"{nm} -> {peer}")
        hit["exact"] = bool(exact[i])
        if kind == NodeKind.HOST:
            hit["nic"] = str(n.name[here[i]])
        out.append(hit)
    return out


def search(f: Fabric, query: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """Nodes and ports matching ``query`` (case-insensitive), exact matches first:
    a node name (switch, host, GPU, NIC port node), a port ``device:iface``
    (``tor-s00-r0-a:Ethernet3``, ``host-s00-h000:ens0f1``), or a dotted address (NIC
    /32s, switch loopbacks and point-to-point addresses of the address plan). Then
    names starting with the query, then names containing it; node order within each.
    The query is only compared, never evaluated; empty or longer than 200 characters
    is bad input."""
    if not isinstance(query, str) or not query.strip():
        raise SpecError(Problem("q", "is empty; allowed: a switch, host, GPU or port name, "
                                "device:iface or an IPv4 address"))
    if len(query) > MAX_QUERY:
        raise SpecError(Problem("q", f"is {len(query)} characters long; allowed: at most "
                                f"{MAX_QUERY}"))
    bad = _CONTROL.search(query)
    if bad is not None:  # numpy's string ops drop a NUL: "\x00" would match every name
        raise SpecError(Problem("q", f"holds the control character {bad.group()!r}; allowed: "
                                "printable text (a name, device:iface or an IPv4 address)"))
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise SpecError(Problem("limit", f"{limit!r}; allowed: a whole number >= 1"))
    q = query.strip()
    ql = _lower(q)
    idx = _index(f)
    hits: list[dict[str, Any]] = []
    seen: set[tuple[int, int | None, str]] = set()

    def add(h: dict[str, Any]) -> None:
        key = (h["node"], h["link"], h["name"])
        if key not in seen and len(hits) < limit:
            seen.add(key)
            hits.append(h)

    ip = _parse_ip(q)
    if ip is not None:
        lo, hi = np.searchsorted(idx.ip_val, [ip, ip + 1])
        for i in range(int(lo), int(hi)):  # a NIC's ports, a switch's addresses: few
            node, lk = int(idx.ip_node[i]), int(idx.ip_link[i])
            if lk < 0 and f.nodes.kind[node] == NodeKind.NIC:
                lk = int(idx.access_of[node])
            nm = str(f.nodes.name[node])
            add(_hit(f, node, "ip", lk, label=f"{nm} ({q})"))
    if ":" in q:
        dev, _, iface = q.rpartition(":")
        if dev and iface:
            for h in _port_hits(f, dev, iface, limit):
                add(h)
    # names: exact, prefix, substring (numpy string ops over all node names)
    exact = np.flatnonzero(idx.names == ql)
    for node in exact.tolist():  # one, or none
        add(_name_hit(f, idx, node, True))
    if len(hits) < limit:
        pre = np.strings.startswith(idx.names, ql)
        pre[exact] = False
        for node in np.flatnonzero(pre)[:limit].tolist():  # at most ``limit``
            add(_name_hit(f, idx, node, False))
    if len(hits) < limit:
        sub = np.strings.find(idx.names, ql) > 0
        for node in np.flatnonzero(sub)[:limit].tolist():  # at most ``limit``
            add(_name_hit(f, idx, node, False))
    return hits


def _name_hit(f: Fabric, idx: _Index, node: int, exact: bool) -> dict[str, Any]:
    lk = int(idx.access_of[node])
    h = _hit(f, node, "name", lk)
    h["exact"] = exact
    ip = int(f.nodes.ip[node])
    if ip:
        h["label"] = f"{h['name']} ({ipaddress.IPv4Address(ip)})"
    return h
