"""Plans computed from a Fabric: counts, oversubscription, bisection, hops; candidate
designs for a cluster size.

The package is also the API function: ``aifabric.plan(fab)`` is :func:`aifabric.api.plan`
(the package's module is callable, so ``import aifabric.plan`` — which makes the package an
attribute of ``aifabric`` — never hides the function)."""

import sys
import types
from typing import Any

from aifabric.plan.summary import PAIR_KINDS, bisection_gbps, pair_hops, plan_fabric, port_usage

__all__ = ["PAIR_KINDS", "bisection_gbps", "pair_hops", "plan_fabric", "port_usage"]


class _CallablePackage(types.ModuleType):
    """This package's module type: calling it calls :func:`aifabric.api.plan`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from aifabric.api import plan

        return plan(*args, **kwargs)

    @property
    def __signature__(self) -> Any:  # inspect.signature(aifabric.plan): the function's
        import inspect

        from aifabric.api import plan

        return inspect.signature(plan)


sys.modules[__name__].__class__ = _CallablePackage
