"""Plans computed from a Fabric: counts, oversubscription, bisection, hops; candidate
designs for a cluster size. (The API function is :func:`aifabric.api.plan`.)"""

from aifabric.planning.summary import (
    PAIR_KINDS,
    bisection_gbps,
    pair_hops,
    plan_fabric,
    port_usage,
)

__all__ = ["PAIR_KINDS", "bisection_gbps", "pair_hops", "plan_fabric", "port_usage"]
