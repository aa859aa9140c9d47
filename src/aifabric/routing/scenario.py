"""A scenario: a fabric (a spec, by path or embedded), a routing policy, traffic and
failures — the question "where do my flows go?" in one YAML file.

.. code-block:: yaml

    name: hpn-polarization
    spec: ../hpn-single-plane.yaml       # relative to this file, or an embedded mapping
    routing: {qps_per_connection: 8}     # overrides of the spec's routing section
    traffic:
      - {pattern: permutation, shift: 1024, size_bytes: 1048576}
    failures:
      - {switch: tor-s00-r0-a}
    seed: 0

:func:`load_scenario` reads one; later stages subclass :class:`Scenario` to add their own
fields (``class SimScenario(Scenario)``) and load them with
``load_scenario(path, SimScenario)``. Every problem is reported as
``file: field.path: message``, all of them at once.

:func:`run_scenario` routes one the way ``aifabric route`` does: its traffic, its failures,
the report (per-tier statistics, failure impact, what the failures did to the flows). The
CLI (:mod:`aifabric.cli.route`), the API and the web view share it, so the page's what-if
and ``route`` agree to the flow.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import numpy as np
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from aifabric.errors import Problem, SpecError
from aifabric.routing.failover import Failure, compare_routes, failed_links, failure_impact
from aifabric.routing.flows import FlowSet
from aifabric.routing.route import Routed, route
from aifabric.routing.stats import route_stats
from aifabric.routing.traffic import TrafficPattern
from aifabric.spec.base import StrictModel
from aifabric.spec.load import load_yaml, spec_from_dict
from aifabric.spec.models import Routing, Spec
from aifabric.spec.names import Text
from aifabric.spec.problems import problems_from_validation
from aifabric.topology.fabric import Fabric, NodeKind

__all__ = ["Scenario", "ScenarioTraffic", "load_scenario", "path_names", "run_scenario",
           "scenario_from_dict", "scenario_traffic"]

#: set while ``Scenario.model_validate`` runs: its errors stay pydantic's
_VALIDATING: ContextVar[bool] = ContextVar("aifabric_scenario_validating", default=False)


class Scenario(StrictModel):
    """What to run on which fabric. ``spec`` is the effective spec: the scenario's
    ``routing`` overrides are already merged into ``spec.routing``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Text = Field(default="scenario", description="a title: one line of free text")
    description: Text = ""
    spec: Spec
    routing: Routing | None = Field(
        default=None, description="overrides of the spec's routing (only the fields given)")
    traffic: list[TrafficPattern] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    seed: int = Field(default=0, ge=0, le=(1 << 64) - 1,
                      description="seed of the traffic patterns' random choices")

    _file: str | None = PrivateAttr(default=None)
    _base_dir: Path | None = PrivateAttr(default=None)
    _spec_file: str | None = PrivateAttr(default=None)
    #: the document as written (scenario_from_dict): overrides re-validate from it
    _document: dict[str, Any] | None = PrivateAttr(default=None)
    #: the spec file's document, when ``spec`` names a file
    _spec_document: dict[str, Any] | None = PrivateAttr(default=None)
    #: built in code with routing overrides: the spec as given, before they were merged
    #: (its document keeps them apart, as a YAML file does)
    _given_spec: Any = PrivateAttr(default=None)

    def __init__(self, /, **data: Any) -> None:
        """Build a scenario in code (``SimScenario(name=..., spec=spec, jobs=[...])``);
        bad input is a SpecError naming the fields, as from YAML. (``model_validate``,
        which pydantic runs through this method too, keeps raising ValidationError.)"""
        if _VALIDATING.get():
            super().__init__(**data)
            return
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise SpecError(problems_from_validation(err, type(self), None)) from None
        given = data.get("spec")
        if self.routing is not None and given is not None and given is not self.spec:
            self._given_spec = copy.deepcopy(given) if isinstance(given, dict) else given

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:  # type: ignore[override]
        token = _VALIDATING.set(True)
        try:
            return super().model_validate(obj, **kwargs)
        finally:
            _VALIDATING.reset(token)

    @model_validator(mode="after")
    def _merge_routing(self) -> Scenario:
        """The ``routing`` overrides merged into ``spec.routing`` (only the fields given;
        merging again changes nothing), from YAML and in code alike."""
        if self.routing is not None and self.routing.model_fields_set:
            merged = self.spec.routing.model_copy(
                update={k: getattr(self.routing, k) for k in self.routing.model_fields_set})
            if merged != self.spec.routing:
                object.__setattr__(self, "spec", self.spec.model_copy(
                    update={"routing": merged}))
        return self

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        """A copy; with ``update`` the document as written no longer describes it, so
        it is dropped (the copy's document is then its fields, see
        :func:`aifabric.routing.overrides.scenario_document`)."""
        out = super().model_copy(update=update, deep=deep)
        if update:
            out._document = None
            out._spec_document = None
            out._given_spec = None
        return out

    def with_overrides(self, overrides: Mapping[str, Any]) -> Self:
        """This scenario with dotted paths of its document set to new values
        (``{"routing.seed_mode": "per_switch", "jobs.0.seed": 3}``); see
        :func:`aifabric.routing.overrides.apply_overrides`."""
        from aifabric.routing.overrides import apply_overrides

        return apply_overrides(self, overrides)

    @property
    def file(self) -> str | None:
        """The YAML file the scenario came from (None if built in code)."""
        return self._file

    @property
    def base_dir(self) -> Path | None:
        """The folder relative paths in the scenario are resolved against."""
        return self._base_dir

    @property
    def spec_file(self) -> str | None:
        """The spec file named by ``spec`` (None when the spec is embedded)."""
        return self._spec_file

    @property
    def policy(self) -> Routing:
        """The routing policy in force (= ``spec.routing``)."""
        return self.spec.routing


S = TypeVar("S", bound=Scenario)

def scenario_from_dict(data: Any, *, file: str | None = None, base_dir: Path | None = None,
                       model: type[S] = Scenario) -> S:  # type: ignore[assignment]
    """Validate a parsed scenario document into ``model`` (a :class:`Scenario` subclass).

    ``spec`` may be a path (relative to ``base_dir``) or an embedded spec mapping; the
    scenario's ``routing`` overrides are merged into the spec's routing.
    """
    if not isinstance(data, dict):
        raise SpecError(Problem("", f"a scenario must be a mapping, got {type(data).__name__}",
                                file))
    if "goodput" in data and "goodput" not in model.model_fields:  # a goodput scenario
        raise SpecError(Problem("goodput", "this is a goodput scenario (failures and "
                                "checkpoints), read by `aifabric goodput FILE`; allowed "
                                "here: a scenario without a goodput: section", file))
    written = copy.deepcopy(data)
    data = dict(data)
    problems: list[Problem] = []
    raw = data.get("spec")
    spec: Spec | None = None
    spec_file: str | None = None
    spec_doc: Any = None
    if raw is None:
        problems.append(Problem("spec", "required field is missing; allowed: a path to a "
                                "spec file or an embedded spec mapping", file))
    elif isinstance(raw, str):
        p = Path(raw)
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        spec_file = str(p)
        try:
            spec_doc = load_yaml(p)
            spec = spec_from_dict(spec_doc, str(p))  # = load_spec(p), keeping the document
        except SpecError as err:
            problems.extend(Problem(q.path, q.message, q.file) if q.file else
                            Problem(f"spec.{q.path}" if q.path else "spec", q.message, file)
                            for q in err.problems)
    elif isinstance(raw, dict):
        try:
            spec = spec_from_dict(raw)
        except SpecError as err:
            problems.extend(Problem(f"spec.{q.path}" if q.path else "spec", q.message, file)
                            for q in err.problems)
    else:
        problems.append(Problem("spec", f"got {type(raw).__name__}; allowed: a path to a "
                                "spec file or an embedded spec mapping", file))
    if spec is not None:
        data["spec"] = spec
    else:
        data.pop("spec", None)
    try:
        sc = model.model_validate(data) if spec is not None else None
        if spec is None:  # still report the other fields' problems
            model.model_validate({**data, "spec": Spec.model_validate(
                {"topology": {"family": "clos"}})})
    except ValidationError as err:
        problems.extend(problems_from_validation(err, model, file))
        sc = None
    if problems:
        raise SpecError(problems)
    assert sc is not None and spec is not None
    # (the routing overrides are merged into spec.routing by Scenario._merge_routing)
    sc._file = file
    sc._base_dir = base_dir
    sc._spec_file = spec_file
    sc._document = written
    sc._spec_document = spec_doc if isinstance(spec_doc, dict) else None
    return sc


def load_scenario(path: str | Path, model: type[S] = Scenario) -> S:  # type: ignore[assignment]
    """Read and validate the scenario at ``path`` as ``model``."""
    p = Path(path)
    return scenario_from_dict(load_yaml(p), file=str(path), base_dir=p.parent, model=model)


# ---------------------------------------------------------------- routing a scenario

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
