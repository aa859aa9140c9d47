"""What-if: a failure set on top of the scenario's own failures, rerouted and compared
with the base routing exactly as ``route`` compares a scenario's failures
(:func:`aifabric.routing.failover.compare_routes`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.web.twin.core import TwinCore

__all__ = ["MOVED_ROWS", "WhatIf"]

#: rows of the moved / unreachable lists
MOVED_ROWS = 200


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
                       "before": str(p0), "after": str(p1)}
                      for i, p0, p1 in zip(show.tolist(), before_p, after_p, strict=True)],
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
        after.whatif = out
        return {**out, "seconds": round(time.perf_counter() - t0, 4)}


def _tiers(stats: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"tier": k, **v} for k, v in stats["tiers"].items()]
