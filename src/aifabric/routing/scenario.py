"""Route a whole scenario the way ``aifabric route`` does: its traffic, its failures, the
report (per-tier statistics, failure impact, what the failures did to the flows).

The CLI (:mod:`aifabric.cli.route`) and the web view (:mod:`aifabric.web.twin`) share
this, so the page's what-if and ``route`` agree to the flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.routing.failover import compare_routes, failed_links, failure_impact
from aifabric.routing.flows import FlowSet
from aifabric.routing.route import Routed, route
from aifabric.routing.stats import route_stats
from aifabric.scenario import Scenario
from aifabric.topology.fabric import Fabric, NodeKind

__all__ = ["ScenarioTraffic", "path_names", "run_scenario", "scenario_traffic"]


@dataclass
class ScenarioTraffic:
    """A scenario's flows on a fabric, its pinned paths and the links its failures take
    down (bool per link)."""

    flows: FlowSet
    pinned: tuple[np.ndarray, np.ndarray] | None
    down: np.ndarray


def scenario_traffic(sc: Scenario, fabric: Fabric) -> ScenarioTraffic:
    """Build a scenario's traffic and failed links (problems name the scenario's file)."""
    from aifabric.guard import check_traffic, fabric_bytes
    from aifabric.routing.traffic import build_traffic

    file = sc.file
    try:
        check_traffic(sc.traffic, len(fabric.ids(NodeKind.GPU, active_only=True)),
                      sc.policy.qps_per_connection, sc.base_dir,
                      fabric_bytes=fabric_bytes(fabric))
        flows, pinned = build_traffic(fabric, sc.traffic, seed=sc.seed, base_dir=sc.base_dir)
        down = failed_links(fabric, sc.failures, file=file)
    except SpecError as err:
        raise err.with_file(file) if file else err from None
    if not len(flows):
        raise SpecError(Problem("traffic", "no flows; allowed: at least one pattern that "
                                "yields a connection", file))
    return ScenarioTraffic(flows, pinned, down)


def run_scenario(sc: Scenario, fabric: Fabric) -> tuple[Routed, dict[str, Any]]:
    """Route a scenario's traffic (with its failures); the report as a JSON-ready dict."""
    tr = scenario_traffic(sc, fabric)
    file = sc.file
    try:
        routed = route(fabric, tr.flows, sc.policy, failures=~tr.down, pinned=tr.pinned)
    except SpecError as err:
        raise err.with_file(file) if file else err from None
    pol = sc.policy
    report: dict[str, Any] = {
        "scenario": sc.name,
        "fabric": fabric.name,
        "family": fabric.family,
        "policy": pol.model_dump(mode="json"),
        "stats": route_stats(routed),
    }
    if tr.down.any():
        base = route(fabric, tr.flows, pol, pinned=tr.pinned)
        report["failures"] = {"impact": failure_impact(fabric, ~tr.down),
                              "flows": compare_routes(base, routed)}
    return routed, report


def path_names(routed: Routed, rows: np.ndarray | None = None) -> np.ndarray:
    """The path of each flow in ``rows`` (all flows by default) as node names joined by
    ``" > "`` (the first arc's tail, then every arc's head); empty for an unreachable
    flow and for sprayed flows (several paths: see the per-link loads)."""
    f = routed.fabric
    names = f.nodes.name.astype(object)
    ptr, arcs = routed.ptr, routed.arcs
    rows = np.arange(len(routed.flows)) if rows is None else np.asarray(rows, np.int64)
    out = np.full(len(rows), "", dtype=object)
    if routed.frac is not None or not len(arcs) or not len(rows):
        return out
    src, dst, _ = f.arcs
    start, stop = ptr[rows], ptr[rows + 1]
    hops = stop - start
    has = hops > 0
    if not has.any():
        return out
    # the entries of the chosen rows, in order, then one join per row
    cnt = hops[has]
    first = np.cumsum(cnt) - cnt
    idx = np.repeat(start[has] - first, cnt) + np.arange(int(cnt.sum()))
    parts = (" > " + names[dst[arcs[idx]]]).astype(object)
    joined = np.add.reduceat(parts, first)
    out[has] = names[src[arcs[start[has]]]] + joined
    return out
