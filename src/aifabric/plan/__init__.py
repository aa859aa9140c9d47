"""Plans computed from a Fabric: counts, oversubscription, bisection, hops; candidate
designs for a cluster size.

The package is also the API function: ``aifabric.plan(fab)`` is :func:`aifabric.api.plan`
(the package's module is callable, so ``import aifabric.plan`` — which makes the package an
attribute of ``aifabric`` — never hides the function)."""

from aifabric._callable import make_callable
from aifabric.plan.summary import PAIR_KINDS, bisection_gbps, pair_hops, plan_fabric, port_usage

__all__ = ["PAIR_KINDS", "bisection_gbps", "pair_hops", "plan_fabric", "port_usage"]

make_callable(__name__, "plan")
