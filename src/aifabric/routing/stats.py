"""The statistics that expose imbalance in a routed flow set.

Per tier and direction (``leaf_spine up`` = ToR -> agg, ...): how many link directions
the traffic could use, how many it used, the mean and max bytes and flows on them and
the max/mean ratio. A tier's *candidate* arcs are the live arcs leaving the nodes that
send traffic in that tier and direction (an agg that forwards anything up has 8 candidate
core uplinks; if only 2 carry traffic, 75% of its uplinks are idle): idleness is judged
where traffic could have gone, not over the whole fabric. Links to standby (backup) hosts
are never candidates.

For multi-port (dual-ToR) NICs, the *two-port ratio* of a NIC is the bytes through its
busiest port over the bytes through its least busy one (both directions), over the NICs
that carry traffic; ``inf`` when one port carries nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aifabric.routing.hostside import host_side
from aifabric.routing.route import Routed
from aifabric.topology.fabric import LinkKind

__all__ = ["TIERS", "route_stats", "tier_of_arcs", "two_port_ratio"]

#: (label, link kind, direction 0 = up / 1 = down)
TIERS: list[tuple[str, LinkKind, int]] = [
    ("scaleup", LinkKind.SCALEUP, -1),
    ("pcie up", LinkKind.PCIE, 0),
    ("pcie down", LinkKind.PCIE, 1),
    ("access up", LinkKind.ACCESS, 0),
    ("access down", LinkKind.ACCESS, 1),
    ("leaf_spine up", LinkKind.LEAF_SPINE, 0),
    ("leaf_spine down", LinkKind.LEAF_SPINE, 1),
    ("spine_core up", LinkKind.SPINE_CORE, 0),
    ("spine_core down", LinkKind.SPINE_CORE, 1),
]


def tier_of_arcs(routed: Routed) -> np.ndarray:
    """Index into :data:`TIERS` of every arc."""
    kind = np.repeat(routed.fabric.links.kind.astype(np.int64), 2)
    direction = np.tile(np.array([0, 1]), routed.fabric.n_links)
    out = np.full(len(kind), -1, dtype=np.int64)
    for i, (_, k, d) in enumerate(TIERS):
        out[(kind == k) & ((direction == d) | (d < 0))] = i
    return out


def two_port_ratio(routed: Routed) -> np.ndarray:
    """Per multi-port NIC that carries traffic: busiest port's bytes / least busy port's
    bytes (both directions through the port's access link); ``inf`` if one is idle."""
    f = routed.fabric
    hs = host_side(f)
    if hs.P < 2:
        return np.zeros(0)
    load = routed.link_load("bytes").sum(axis=1)
    acc = hs.access_link[hs.nic_port.reshape(-1, hs.P)]
    per = np.where(acc >= 0, load[np.maximum(acc, 0)], 0.0)
    used = per.sum(axis=1) > 0
    per = per[used]
    hi, lo = per.max(axis=1), per.min(axis=1)
    with np.errstate(divide="ignore"):
        return np.where(lo > 0, hi / np.where(lo > 0, lo, 1.0), np.inf)


def _num(x: float) -> float | str:
    return "inf" if np.isinf(x) else round(float(x), 4)


def route_stats(routed: Routed) -> dict[str, Any]:
    """Flow counts, per-tier load statistics, the most loaded link, the two-port ratio."""
    f = routed.fabric
    fl = routed.flows
    src, dst, _ = f.arcs
    by = routed.arc_bytes()
    nf = routed.arc_flows()
    alive = np.repeat(routed.alive, 2)
    tier = tier_of_arcs(routed)
    # links to standby (backup) hosts carry nothing by design: not candidates
    standby_free = ~(f.nodes.backup[src] | f.nodes.backup[dst])
    tiers: dict[str, Any] = {}
    for i, (label, _, _) in enumerate(TIERS):
        sel = tier == i
        if not sel.any():
            continue
        used_here = sel & (by > 0)
        senders = np.zeros(f.n_nodes, dtype=bool)
        senders[src[used_here]] = True
        cand = sel & alive & senders[src] & standby_free
        n_cand = int(cand.sum())
        if n_cand == 0:
            tiers[label] = {"arcs": 0, "used": 0}
            continue
        b = by[cand]
        mean = float(b.mean())
        tiers[label] = {
            "arcs": n_cand,
            "used": int((b > 0).sum()),
            "idle_fraction": round(1 - float((b > 0).sum()) / n_cand, 4),
            "mean_bytes": mean,
            "max_bytes": float(b.max()),
            "max_over_mean": round(float(b.max()) / mean, 4) if mean > 0 else 0.0,
            "max_flows": int(nf[cand].max()),
            "mean_flows": round(float(nf[cand].mean()), 4),
        }
    net = tier >= 5  # switch-to-switch arcs
    top = int(np.argmax(np.where(net, nf, -1))) if net.any() else -1
    if top < 0 or nf[top] == 0:
        top = int(np.argmax(nf))
    link = top // 2
    busiest = None
    if nf[top] > 0:
        busiest = {
            "arc": top,
            "from": f"{f.device_name(int(src[top]))}:{_port(f, int(src[top]), link, top)}",
            "to": f"{f.device_name(int(dst[top]))}:{_port(f, int(dst[top]), link, top ^ 1)}",
            "tier": TIERS[tier[top]][0],
            "flows": int(nf[top]),
            "bytes": float(by[top]),
        }
    ratio = two_port_ratio(routed)
    two = None
    if len(ratio):
        two = {"nics": len(ratio),
               "p50": _num(np.percentile(ratio, 50, method="inverted_cdf")),
               "p99": _num(np.percentile(ratio, 99, method="inverted_cdf")),
               "max": _num(ratio.max()),
               "one_port_idle": int(np.isinf(ratio).sum())}
    net_flows = fl.src_nic >= 0
    uplinks = [label for label in ("leaf_spine up", "spine_core up") if label in tiers]
    up_arcs = sum(tiers[u]["arcs"] for u in uplinks)
    up_used = sum(tiers[u]["used"] for u in uplinks)
    return {
        "flows": len(fl),
        "connections": fl.n_connections,
        "network_flows": int(net_flows.sum()),
        "nvlink_only_flows": int((~net_flows).sum()),
        "unreachable_flows": int(routed.unreachable.sum()),
        "moved_flows": int(routed.moved.sum()),
        "bytes": float(fl.size_bytes.sum()),
        "tiers": tiers,
        "idle_uplink_fraction": round(1 - up_used / up_arcs, 4) if up_arcs else 0.0,
        "busiest_link": busiest,
        "two_port_ratio": two,
        **routed.info,
    }


def _port(f, node: int, link: int, arc: int) -> str:
    """Interface name of ``node`` on ``link`` (arc parity says which end it is)."""
    links = f.links
    port = links.a_port[link] if arc % 2 == 0 else links.b_port[link]
    return f.port_name(node, int(port))
