"""The sweep file and its expansion into points.

.. code-block:: yaml

    name: hpn-seed-modes                  # the store partition ([A-Za-z0-9_.-])
    scenario: ../scenarios/hpn-polarization.yaml   # relative to the sweep file
    grid:                                 # cartesian product over dotted fields
      routing.seed_mode: [same, per_switch]
    random:                               # and/or: n random points over ranges (seeded)
      samples: 20
      seed: 0
      fields:
        packet.ecn.kmin_bytes: {uniform: [20000, 200000], int: true}
        routing.policy: {choice: [ecmp, source_port]}
    repeat: {seeds: 20, fields: [seed]}   # every point x seeds 0..19 put into these fields
    figures: [makespan_ns]                # what ``sweep report`` plots

Points come in a fixed order: grid points (the last field written varies fastest), each
with every random sample, each with every repetition seed (innermost). Random samples
are drawn from ``numpy.random.default_rng(random.seed)``, so the same file gives the same
points, in the same order, with the same content hashes, anywhere.

:func:`load_sweep` validates the whole sweep before anything runs: every dotted field
against the scenario's schema, then every point applied to the base scenario. Problems
name the sweep file, the field and (for a value) the point.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from aifabric.errors import Problem, SpecError
from aifabric.spec.base import StrictModel
from aifabric.spec.names import Text

__all__ = ["DEFAULT_FIGURES", "DEFAULT_MAX_POINTS", "MAX_POINTS_ENV", "Point", "RandomField",
           "Sweep", "SweepFile", "check_count", "expand", "load_sweep", "max_points",
           "overrides_json"]

#: a sweep name: a store partition and a file name
NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,100}")
#: ``sweep report`` plots these when the sweep file names no ``figures`` (those present)
DEFAULT_FIGURES = ("makespan_ns", "coll.0.busbw_gb_per_s", "job.0.iteration_ns",
                   "two_port.down.max_ratio", "tier.leaf_spine_down.max_peak_util",
                   "packet.fct.slowdown_p99")
#: ``tables: auto`` stores a run's tables of at most this many rows (collectives, jobs,
#: timeline...; not the per-link or per-transfer ones of a big fabric)
AUTO_TABLE_ROWS = 10_000
#: problems shown for the points of one sweep (the rest are counted)
MAX_PROBLEMS = 10
#: the most points one sweep file may expand to: ``max_points`` cannot go above it
MAX_POINTS = 10_000_000
#: the most points a sweep file expands to unless its ``max_points`` (or the environment
#: variable :data:`MAX_POINTS_ENV`) says more: validating takes ~1 ms a point, so 100,000
#: points take about 2 minutes before anything runs
DEFAULT_MAX_POINTS = 100_000
#: the environment variable that sets the default cap (an integer, 1..MAX_POINTS)
MAX_POINTS_ENV = "AIFABRIC_MAX_SWEEP_POINTS"
#: a sweep of at least this many points reports its validation's progress
PROGRESS_POINTS = 2_000
#: the value an error message quotes (``... (got 'x')``)
_GOT = re.compile(r" \(got .*\)$")
#: a dotted field path: names and list indices
_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.([A-Za-z_][A-Za-z0-9_]*|[0-9]+))*")

Scalar = int | float | str | bool | None


class _Strict(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RandomField(_Strict):
    """How one field is drawn: ``{uniform: [lo, hi]}`` (``int: true`` for integers,
    both ends included), ``{loguniform: [lo, hi]}`` or ``{choice: [a, b, ...]}``."""

    uniform: tuple[float, float] | None = None
    loguniform: tuple[float, float] | None = None
    choice: list[Any] | None = Field(default=None, min_length=1)
    int_: bool = Field(default=False, alias="int", description="round uniform draws to "
                       "integers (both ends included)")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _one(self) -> RandomField:
        given = [k for k in ("uniform", "loguniform", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of uniform, loguniform, choice (got "
                             f"{', '.join(given) or 'none'})")
        rng = self.uniform or self.loguniform
        if rng is not None and not rng[0] <= rng[1]:
            raise ValueError(f"range [{rng[0]:g}, {rng[1]:g}] is empty; allowed: [lo, hi] "
                             "with lo <= hi")
        if self.loguniform is not None and self.loguniform[0] <= 0:
            raise ValueError("loguniform needs lo > 0")
        if self.choice is not None and self.int_:
            raise ValueError("int is for uniform and loguniform ranges")
        return self


class RandomSpec(_Strict):
    samples: int = Field(ge=1, le=MAX_POINTS, description="random points drawn")
    seed: int = Field(default=0, ge=0, le=(1 << 63) - 1)
    fields: dict[str, RandomField] = Field(min_length=1)


class RepeatSpec(_Strict):
    seeds: int = Field(ge=1, le=100_000, description="every point runs with seeds "
                       "0..seeds-1")
    fields: list[str] = Field(default_factory=lambda: ["seed"], min_length=1,
                              description="the dotted fields each repetition's seed goes into")


class SweepFile(_Strict):
    """A sweep: a base scenario, the fields swept and how (see the module docstring)."""

    name: str = Field(description="the sweep's name: its store partition")
    description: Text = ""
    scenario: str = Field(description="the base scenario, relative to the sweep file")
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    random: RandomSpec | None = None
    repeat: RepeatSpec | None = None
    figures: list[str] | None = Field(default=None, min_length=1)
    tables: Literal["auto", "all", "none"] | list[str] = Field(
        default="auto", description="the run tables stored per point: auto (those of at "
        f"most {AUTO_TABLE_ROWS:,} rows), all, none, or a list of table names")
    max_points: int | None = Field(
        default=None, ge=1, le=MAX_POINTS, description="refuse the sweep when it expands to "
        f"more points than this (default {DEFAULT_MAX_POINTS:,}, or {MAX_POINTS_ENV})")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.fullmatch(v) or v.startswith(".") or ".." in v:
            raise ValueError(f"{v!r} is not a sweep name; allowed: 1-100 of A-Z a-z 0-9 _ . - "
                             "(no leading '.', no '..')")
        return v

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"{k}: an empty list of values; allowed: one or more values")
        return v


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its index in the expanded list, the overrides applied to the
    base scenario and the content hash of the result (the run's id in the store)."""

    index: int
    overrides: dict[str, Any]
    run_id: str = ""
    #: the repetition: the seed (0..seeds-1) this point put into the ``repeat.fields``;
    #: None for a sweep without ``repeat`` (stored as the row's ``rep`` column)
    rep: int | None = None

    @property
    def overrides_json(self) -> str:
        return overrides_json(self.overrides)


@dataclass
class Sweep:
    """A validated sweep: the file's settings, the base scenario and every point."""

    file: str
    spec: SweepFile
    scenario: Any  # the base SimScenario
    document: dict[str, Any]  # its scenario document (what workers rebuild it from)
    base_dir: str
    points: list[Point]
    duplicates: int = 0  # points equal to an earlier one (same run_id), dropped
    fields: list[str] = field(default_factory=list)  # swept fields (grid, random)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def repeat_fields(self) -> list[str]:
        return list(self.spec.repeat.fields) if self.spec.repeat else []

    def points_digest(self) -> str:
        """sha256 of the points' (index, run_id) in order: two sweep files with the same
        name but other points differ here (``--resume`` refuses to mix them)."""
        import hashlib

        h = hashlib.sha256()
        for p in self.points:
            h.update(f"{p.index}:{p.run_id}\n".encode())
        return h.hexdigest()

    def definition(self) -> dict[str, Any]:
        """What ``sweep report`` needs to know of the sweep (kept beside the store)."""
        return {"name": self.name, "file": self.file, "points_digest": self.points_digest(),
                "duplicates": self.duplicates,
                "description": self.spec.description,
                "fields": self.fields, "repeat_fields": self.repeat_fields,
                "figures": list(self.spec.figures) if self.spec.figures else None,
                "tables": self.spec.tables,
                "points": len(self.points)}


def overrides_json(overrides: dict[str, Any]) -> str:
    """Canonical JSON of a point's overrides (sorted keys, no spaces)."""
    return json.dumps(overrides, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _draw(rng: Any, spec: RandomField) -> Any:
    import numpy as np

    if spec.choice is not None:
        return spec.choice[int(rng.integers(len(spec.choice)))]
    if spec.uniform is not None:
        lo, hi = spec.uniform
        if spec.int_:
            return int(rng.integers(int(np.ceil(lo)), int(np.floor(hi)) + 1))
        return float(rng.uniform(lo, hi))
    assert spec.loguniform is not None
    lo, hi = spec.loguniform
    v = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
    return round(v) if spec.int_ else v


def expand(spec: SweepFile) -> list[dict[str, Any]]:
    """The overrides of every point, in sweep order (grid x random x repeat)."""
    import numpy as np

    grid = [dict(zip(spec.grid, combo, strict=True))
            for combo in itertools.product(*spec.grid.values())] or [{}]
    samples: list[dict[str, Any]] = [{}]
    if spec.random is not None:
        rng = np.random.default_rng(spec.random.seed)
        samples = [{k: _draw(rng, f) for k, f in spec.random.fields.items()}
                   for _ in range(spec.random.samples)]
    seeds: list[dict[str, Any]] = [{}]
    if spec.repeat is not None:
        seeds = [dict.fromkeys(spec.repeat.fields, s) for s in range(spec.repeat.seeds)]
    return [{**g, **r, **s} for g in grid for r in samples for s in seeds]


def _count(spec: SweepFile) -> int:
    n = 1
    for vals in spec.grid.values():
        n *= len(vals)
    if spec.random is not None:
        n *= spec.random.samples
    if spec.repeat is not None:
        n *= spec.repeat.seeds
    return n


def _axes(spec: SweepFile) -> str:
    """How the points multiply: ``grid routing.policy 2 x jobs.0.seed 500; random 10;
    repeat 20 seeds``."""
    parts = []
    if spec.grid:
        parts.append("grid " + " x ".join(f"{k} {len(v):,}" for k, v in spec.grid.items()))
    if spec.random is not None:
        parts.append(f"random {spec.random.samples:,} samples")
    if spec.repeat is not None:
        parts.append(f"repeat {spec.repeat.seeds:,} seeds")
    return "; ".join(parts) or "the base scenario once"


def max_points(spec: SweepFile, file: str = "") -> int:
    """The cap on the points of ``spec``: its ``max_points``, else the environment variable
    :data:`MAX_POINTS_ENV`, else :data:`DEFAULT_MAX_POINTS`."""
    import os

    if spec.max_points is not None:
        return spec.max_points
    raw = os.environ.get(MAX_POINTS_ENV, "").strip().replace("_", "").replace(",", "")
    if not raw:
        return DEFAULT_MAX_POINTS
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if not 1 <= cap <= MAX_POINTS:
        raise SpecError(Problem(MAX_POINTS_ENV, f"{os.environ[MAX_POINTS_ENV]!r} is not a "
                                f"point count; allowed: an integer 1..{MAX_POINTS:,}", file))
    return cap


def check_count(spec: SweepFile, file: str = "") -> int:
    """The number of points ``spec`` expands to, counted without expanding it; a count
    above :func:`max_points` is refused naming the axes, the count and the cap."""
    n = _count(spec)
    cap = max_points(spec, file)
    if n > cap:
        where = ("max_points" if spec.max_points is not None
                 else f"max_points in the sweep file or {MAX_POINTS_ENV}")
        raise SpecError(Problem("", f"{n:,} points ({_axes(spec)}); allowed: at most "
                                f"{cap:,} (raise it with {where}, up to {MAX_POINTS:,}; "
                                "validating takes about 1 ms a point)", file))
    return n


def _field_problems(spec: SweepFile, model: type, file: str) -> list[Problem]:
    """Every swept field: a dotted path that exists in the scenario, given once."""
    from aifabric.routing.overrides import check_override_path

    sources = [("grid", k) for k in spec.grid]
    if spec.random is not None:
        sources += [("random.fields", k) for k in spec.random.fields]
    if spec.repeat is not None:
        sources += [("repeat.fields", k) for k in spec.repeat.fields]
    problems, seen = [], {}
    for where, path in sources:
        if path in seen:
            problems.append(Problem(f"{where}.{path}", f"swept twice (also in {seen[path]}); "
                                    "allowed: each field in one of grid, random, repeat", file))
            continue
        seen[path] = where
        if not _PATH_RE.fullmatch(path):
            problems.append(Problem(f"{where}.{path}", "not a dotted field path; allowed: "
                                    "names and list indices joined by dots, e.g. "
                                    "routing.seed_mode, jobs.0.seed", file))
            continue
        try:
            check_override_path(model, path)
        except SpecError as err:
            problems.extend(Problem(f"{where}.{path}", q.message, file) for q in err.problems)
    return problems


def _same_kind(points: list[dict[str, Any]], fields: list[str]) -> None:
    """A field whose values mix integers and floats gets floats everywhere (one column
    type in the store)."""
    for f in fields:
        vals = [p[f] for p in points if f in p]
        if any(isinstance(v, float) for v in vals) and all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
            for p in points:
                if f in p:
                    p[f] = float(p[f])


def load_sweep(path: str | Path,
               progress: Callable[[int, int], None] | None = None) -> Sweep:
    """Read a sweep file, load its base scenario and validate every point (SpecError
    naming the file, the field and the point before anything runs). The points are
    counted first: more than :func:`max_points` are refused at once. ``progress(done,
    total)`` is called as the points are validated (a sweep of :data:`PROGRESS_POINTS`
    points or more)."""
    from aifabric.routing.overrides import apply_overrides, scenario_document
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.identity import content_hash
    from aifabric.sim.scenario import SimScenario
    from aifabric.spec.load import load_yaml
    from aifabric.spec.problems import problems_from_validation

    p = Path(path)
    file = str(path)
    data = load_yaml(p)
    if not isinstance(data, dict):
        raise SpecError(Problem("", f"a sweep must be a mapping, got {type(data).__name__}",
                                file))
    try:
        spec = SweepFile.model_validate(data)
    except ValidationError as err:
        raise SpecError(problems_from_validation(err, SweepFile, file)) from None
    total = check_count(spec, file)
    scn_path = Path(spec.scenario)
    if not scn_path.is_absolute():
        scn_path = p.parent / scn_path
    try:
        base = load_scenario(scn_path, SimScenario)
    except SpecError as err:
        raise SpecError(Problem(q.path, q.message, q.file or str(scn_path))
                        for q in err.problems) from None
    problems = _field_problems(spec, SimScenario, file)
    if problems:
        raise SpecError(problems)
    fields = list(spec.grid) + (list(spec.random.fields) if spec.random else [])
    raw = expand(spec)
    _same_kind(raw, fields)
    points: list[Point] = []
    seen: set[str] = set()
    dups = 0
    # one problem per (field, message): a bad value fails every point that has it
    bad: dict[tuple[str, str], list[Any]] = {}
    source = {**dict.fromkeys(spec.repeat.fields if spec.repeat else (), "repeat.fields"),
              **dict.fromkeys(spec.random.fields if spec.random else (), "random.fields"),
              **dict.fromkeys(spec.grid, "grid")}
    report = progress if progress is not None and total >= PROGRESS_POINTS else None
    for i, ov in enumerate(raw):
        if report is not None and i % 500 == 0:
            report(i, total)
        try:
            run_id = content_hash(apply_overrides(base, ov))
        except SpecError as err:
            for q in err.problems:
                where = source.get(q.path, "point")
                # the same problem with another value ("(got 1)") is the same problem
                key = (f"{where}.{q.path}" if q.path else where,
                       _GOT.sub("", q.message))
                if key in bad:
                    bad[key][2] += 1
                elif len(bad) < MAX_PROBLEMS:
                    bad[key] = [i, ov, 1, q.message]
            continue
        if run_id in seen:
            dups += 1
            continue
        seen.add(run_id)
        points.append(Point(i, ov, run_id, i % spec.repeat.seeds if spec.repeat else None))
    if report is not None:
        report(total, total)
    if bad:
        problems = []
        for (where, _), (i, ov, n, msg) in bad.items():
            more = f" (and {n - 1:,} more point{'s' if n > 2 else ''})" if n > 1 else ""
            problems.append(Problem(where, f"point {i}{more} {overrides_json(ov)}: {msg}",
                                    file))
        raise SpecError(problems)
    return Sweep(file=file, spec=spec, scenario=base, document=scenario_document(base),
                 base_dir=str(base.base_dir or p.parent), points=points, duplicates=dups,
                 fields=fields)
