"""aifabric: a digital twin of the networks that train large AI models.

>>> import aifabric as af
>>> fabric = af.build_fabric(af.load_spec("examples/hpn-pod.yaml"))   # doctest: +SKIP
>>> af.plan(fabric).gpus                                              # doctest: +SKIP
15360
>>> res = af.simulate(af.load_scenario("examples/scenarios/allreduce-hpn.yaml"))  # +SKIP

The public API is documented in docs/api.md (:mod:`aifabric.api`).

The names below import on first use (module ``__getattr__``): ``import aifabric`` and
the command line's start-up stay free of pydantic, scipy and numba until needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aifabric.api import (
        BuildResult,
        CheckResult,
        GoodputRun,
        Plan,
        Proposal,
        Result,
        RouteResult,
        build,
        build_scenario,
        check,
        check_template,
        goodput,
        load_scenario,
        plan,
        propose,
        results,
        route,
        simulate,
    )
    from aifabric.errors import Problem, SpecError
    from aifabric.planning import plan_fabric
    from aifabric.reliability.spec import GoodputScenario
    from aifabric.routing.overrides import apply_overrides, check_override_path, scenario_document
    from aifabric.routing.scenario import Scenario
    from aifabric.sim.identity import content_hash
    from aifabric.sim.scenario import ChakraSpec, CollectiveSpec, JobSpec, SimScenario
    from aifabric.spec import Spec, load_spec, spec_from_dict
    from aifabric.spec.models import Routing
    from aifabric.store import Store
    from aifabric.sweep import Sweep, SweepRun, load_sweep, run_sweep, sweep_report
    from aifabric.topology import Fabric, LinkKind, NodeKind, build_fabric

#: public name -> the module that defines it
_LAZY = {
    "BuildResult": "aifabric.api",
    "ChakraSpec": "aifabric.sim.scenario",
    "CheckResult": "aifabric.api",
    "CollectiveSpec": "aifabric.sim.scenario",
    "Fabric": "aifabric.topology",
    "GoodputRun": "aifabric.api",
    "GoodputScenario": "aifabric.reliability.spec",
    "JobSpec": "aifabric.sim.scenario",
    "LinkKind": "aifabric.topology",
    "NodeKind": "aifabric.topology",
    "Plan": "aifabric.api",
    "Proposal": "aifabric.api",
    "Problem": "aifabric.errors",
    "Result": "aifabric.api",
    "RouteResult": "aifabric.api",
    "Routing": "aifabric.spec.models",
    "Scenario": "aifabric.routing.scenario",
    "SimScenario": "aifabric.sim.scenario",
    "Spec": "aifabric.spec",
    "SpecError": "aifabric.errors",
    "apply_overrides": "aifabric.routing.overrides",
    "build": "aifabric.api",
    "build_fabric": "aifabric.topology",
    "check": "aifabric.api",
    "check_override_path": "aifabric.routing.overrides",
    "check_template": "aifabric.api",
    "content_hash": "aifabric.sim.identity",
    "goodput": "aifabric.api",
    "load_scenario": "aifabric.api",
    "load_spec": "aifabric.spec",
    "plan": "aifabric.api",
    "plan_fabric": "aifabric.planning",
    "propose": "aifabric.api",
    "results": "aifabric.store",
    "route": "aifabric.api",
    "build_scenario": "aifabric.api",
    "scenario_document": "aifabric.routing.overrides",
    "simulate": "aifabric.api",
    "spec_from_dict": "aifabric.spec",
    # sweeps (the package above aifabric.api: the functions are run_sweep and
    # sweep_report, not af.sweep) and the results store
    "Store": "aifabric.store",
    "Sweep": "aifabric.sweep",
    "SweepRun": "aifabric.sweep",
    "load_sweep": "aifabric.sweep",
    "run_sweep": "aifabric.sweep",
    "sweep_report": "aifabric.sweep",
}

__all__ = [
    "BuildResult",
    "ChakraSpec",
    "CheckResult",
    "CollectiveSpec",
    "Fabric",
    "GoodputRun",
    "GoodputScenario",
    "JobSpec",
    "LinkKind",
    "NodeKind",
    "Plan",
    "Problem",
    "Proposal",
    "Result",
    "RouteResult",
    "Routing",
    "Scenario",
    "SimScenario",
    "Spec",
    "SpecError",
    "Store",
    "Sweep",
    "SweepRun",
    "apply_overrides",
    "build",
    "build_fabric",
    "build_scenario",
    "check",
    "check_override_path",
    "check_template",
    "content_hash",
    "goodput",
    "load_scenario",
    "load_spec",
    "load_sweep",
    "plan",
    "plan_fabric",
    "propose",
    "results",
    "route",
    "run_sweep",
    "scenario_document",
    "simulate",
    "spec_from_dict",
    "sweep_report",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'aifabric' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
