"""What-if: a failure set on top of the scenario's own failures, rerouted and compared
with the base routing exactly as ``route`` compares a scenario's failures
(:func:`aifabric.routing.failover.compare_routes`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.web.twin.core import TwinCore

__all__ = ["MOVED_ROWS", "WHY", "WhatIf"]

#: rows of the moved / unreachable lists
MOVED_ROWS = 200
#: why a flow moved: ``port``: its NIC port lost its link and the flow left on the
#: NIC's other port; ``path_lost``: its old path crossed a failed link or switch;
#: ``rehashed``: its old path is intact, but a switch on it lost next hops (an ECMP
#: group shrank), so the flow's hash now picks another member of the smaller set
WHY = ("port", "path_lost", "rehashed")


class WhatIf(TwinCore):
    """whatif."""

    def whatif(self, fail: tuple[str, ...]) -> dict[str, Any]:
        """Fail ``fail`` on top of the scenario's failures and reroute: what moved (as
        ``route`` counts it), what became unreachable, the loads before and after."""
        from aifabric.routing.failover import compare_routes, failure_impact, rerouted_flows
        from aifabric.routing.scenario import path_names
        from aifabric.routing.stats import route_stats

        t0 = time.perf_counter()
        base = self._need_routing("fail")
        key = self._norm(fail)
        if not key:
            raise SpecError(Problem("fail", "nothing to fail; allowed: a switch name, "
                                    "device:iface or link:<id>"))
        after = self._state(key)
        if after.whatif is not None:  # asked before: the same answer, no recount
            return {**after.whatif, "fail": list(key),
                    "seconds": round(time.perf_counter() - t0, 4)}
        b, a = base.routed, after.routed
        f = a.fabric
        names = f.nodes.name
        fl = a.flows
        changed = rerouted_flows(b, a) | a.moved
        moved = np.flatnonzero(changed & ~a.unreachable)
        show = moved[:MOVED_ROWS]
        before_p, after_p = path_names(b, show), path_names(a, show)
        why = _why(b, a, after.down, len(fl))
        newly = np.flatnonzero(a.unreachable & ~b.unreachable)
        pairs = np.unique(np.stack([fl.src_gpu[newly], fl.dst_gpu[newly]], axis=1), axis=0) \
            if len(newly) else np.zeros((0, 2), dtype=np.int64)
        out = {
            "fail": list(key), "links_down": int(after.down.sum() - base.down.sum()),
            "links_down_total": int(after.down.sum()),
            "impact": failure_impact(f, ~after.down),
            "flows": compare_routes(b, a),
            "moved_total": len(moved),
            "moved": [{"flow": int(i), "src_gpu": str(names[fl.src_gpu[i]]),
                       "dst_gpu": str(names[fl.dst_gpu[i]]),
                       "src_nic_before": str(names[b.flows.src_nic[i]])
                       if b.flows.src_nic[i] >= 0 else "",
                       "src_nic_after": str(names[fl.src_nic[i]]) if fl.src_nic[i] >= 0
                       else "", "moved_port": bool(a.moved[i]),
                       "why": WHY[int(why[i])], "before": str(p0), "after": str(p1),
                       **_divergence(str(p0), str(p1))}
                      for i, p0, p1 in zip(show.tolist(), before_p, after_p, strict=True)],
            "moved_why": {w: int((why[moved] == k).sum()) for k, w in enumerate(WHY)},
            "unreachable_total": len(pairs),
            "unreachable": [{"src_gpu": str(names[s]), "dst_gpu": str(names[d])}
                            for s, d in pairs[:MOVED_ROWS].tolist()],
            "tiers_before": self._base_extra("tiers", lambda: _tiers(route_stats(b))),
            "tiers_after": _tiers(route_stats(a)),
        }
        # loads before and after in the routing model's terms (bytes), like with like
        # (a run's measured series has no "after")
        from aifabric.web.loads import from_routed

        out["metric"] = "bytes"
        out["hottest_before"] = self._base_extra("hottest", lambda: from_routed(b).hottest(
            f, "bytes", None, k=20, alive=~base.down))
        out["hottest_after"] = self.load(key).hottest(f, "bytes", None, k=20,
                                                      alive=~after.down)
        for h in out["hottest_after"]:  # before -> after per link, like with like
            h["before"] = float(base.arc_bytes[h["arc"]])
            h["delta"] = h["value"] - h["before"]
        out["graph"] = _delta_graph(f, b, a, base.arc_bytes, after.arc_bytes, ~after.down,
                                    moved)
        after.whatif = out
        return {**out, "seconds": round(time.perf_counter() - t0, 4)}


def _tiers(stats: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"tier": k, **v} for k, v in stats["tiers"].items()]


def _why(b: Any, a: Any, down: np.ndarray, n: int) -> np.ndarray:
    """Per flow: the index in :data:`WHY` of why it moved (meaningful for moved flows)."""
    ent = np.repeat(np.arange(n), np.diff(b.ptr))
    lost = np.bincount(ent, weights=down[b.arcs // 2], minlength=n) > 0
    return np.where(a.moved, 0, np.where(lost, 1, 2)).astype(np.int64)


def _divergence(before: str, after: str) -> dict[str, str]:
    """Where two paths (``a > b > c``) part: the last node they share before the first
    difference, and each path from there (``before_tail``, ``after_tail``), so a row
    shows the hops that changed instead of two long strings."""
    pb, pa = before.split(" > "), after.split(" > ")
    k = 0
    while k < min(len(pb), len(pa)) and pb[k] == pa[k]:
        k += 1
    at = pb[k - 1] if k else ""
    # the common tail (the same destination side) is left out too
    j = 0
    while j < min(len(pb), len(pa)) - k and pb[-1 - j] == pa[-1 - j]:
        j += 1
    rejoin = pb[len(pb) - j] if j else ""
    return {"diverge_at": at, "rejoin_at": rejoin,
            "before_hops": " > ".join(pb[k:len(pb) - j]),
            "after_hops": " > ".join(pa[k:len(pa) - j])}


def _delta_graph(f: Any, b: Any, a: Any, before: np.ndarray, after: np.ndarray,
                 alive: np.ndarray, moved: np.ndarray) -> dict[str, Any]:
    """The overview's groups (level auto) with the failure drawn: nodes and edges with
    what is down (``down``, ``links_down``), each edge's ``before`` and ``after`` (bytes
    on its busiest link, the routing model), ``gain`` and ``loss`` (the largest increase
    and decrease of one of its links, each direction), ``delta`` (gain if it exceeds
    the loss, else minus the loss: what the page colours by), and the moved flows whose
    old path (``moved_out``) or new path (``moved_in``) crosses it."""
    from aifabric.web.topology import _groups, overview

    d = after - before
    g_after = overview(f, after, level="auto", alive=alive, agg="max", stat="max")
    g_before = overview(f, before, level="auto", agg="max", stat="max")
    g_gain = overview(f, d, level="auto", agg="max", stat="max")
    g_loss = overview(f, -d, level="auto", agg="max", stat="max")
    g = _groups(f, "auto")
    E = len(g.edge_src)

    def crossed(r: Any) -> np.ndarray:
        sel = np.zeros(len(r.flows), dtype=bool)
        sel[moved] = True
        ent = np.repeat(np.arange(len(r.flows)), np.diff(r.ptr))
        keep = sel[ent]
        le = g.link_edge[r.arcs[keep] // 2]
        pairs = np.unique(ent[keep][le >= 0] * (E + 1) + le[le >= 0])
        return np.bincount(pairs % (E + 1), minlength=E)

    m_out, m_in = crossed(b), crossed(a)
    edges = []
    for e, ea in enumerate(g_after["edges"]):  # group edges (a few hundred)
        gain = max(0.0, g_gain["edges"][e]["per_link"])
        loss = max(0.0, g_loss["edges"][e]["per_link"])
        edges.append({**{k: ea[k] for k in ("id", "source", "target", "tier", "links",
                                            "links_down", "capacity_gbps")},
                      "before": g_before["edges"][e]["per_link"], "after": ea["per_link"],
                      "gain": gain, "loss": loss, "delta": gain if gain >= loss else -loss,
                      "moved_in": int(m_in[e]), "moved_out": int(m_out[e])})
    top = max([abs(x["delta"]) for x in edges] or [0.0])
    return {"level": g_after["level"], "nodes": g_after["nodes"], "edges": edges,
            "metric": "bytes", "scale": {"lo": -top, "hi": top, "unit": "bytes"}}
