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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from aifabric.errors import Problem, SpecError
from aifabric.routing.failover import Failure
from aifabric.routing.traffic import TrafficPattern
from aifabric.spec.base import StrictModel
from aifabric.spec.load import load_spec, load_yaml, spec_from_dict
from aifabric.spec.models import Routing, Spec
from aifabric.spec.names import Text
from aifabric.spec.problems import problems_from_validation

__all__ = ["Scenario", "load_scenario", "scenario_from_dict"]


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
    data = dict(data)
    problems: list[Problem] = []
    raw = data.get("spec")
    spec: Spec | None = None
    spec_file: str | None = None
    if raw is None:
        problems.append(Problem("spec", "required field is missing; allowed: a path to a "
                                "spec file or an embedded spec mapping", file))
    elif isinstance(raw, str):
        p = Path(raw)
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        spec_file = str(p)
        try:
            spec = load_spec(p)
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
    overrides = data.get("routing")
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
    if isinstance(overrides, dict) and sc.routing is not None:
        merged = spec.routing.model_copy(
            update={k: getattr(sc.routing, k) for k in sc.routing.model_fields_set})
        sc = sc.model_copy(update={"spec": spec.model_copy(update={"routing": merged})})
    sc._file = file
    sc._base_dir = base_dir
    sc._spec_file = spec_file
    return sc


def load_scenario(path: str | Path, model: type[S] = Scenario) -> S:  # type: ignore[assignment]
    """Read and validate the scenario at ``path`` as ``model``."""
    p = Path(path)
    return scenario_from_dict(load_yaml(p), file=str(path), base_dir=p.parent, model=model)
