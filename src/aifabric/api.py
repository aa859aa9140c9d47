"""The public Python API: what the command line does, as functions that return objects.

.. code-block:: python

    import aifabric as af

    spec = af.load_spec("examples/hpn-pod.yaml")
    fab = af.build_fabric(spec)
    af.plan(fab).gpus                                   # the plan figures, typed
    scn = af.load_scenario("examples/scenarios/allreduce-hpn.yaml")
    res = af.simulate(scn)                              # analytic, flow or packet
    res.collectives, res.links, res.summary             # pandas DataFrames, the summary
    res.save("out/")                                    # what `aifabric simulate --out` writes
    af.route(scn, policy="ecmp").tiers                  # where the flows go

Every command is a thin layer over these functions (see docs/api.md): the same input gives
the same numbers from Python and from the shell. Bad input is a
:class:`~aifabric.errors.SpecError` naming the field, raised before any work starts.
The tables are pandas DataFrames; pandas is an extra (``pip install 'aifabric[data]'``),
imported only when a table is asked for.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.sim.limits import DEFAULT_MAX_EVENTS

if TYPE_CHECKING:  # imported when used: ``import aifabric.api`` stays light
    import pandas as pd

    from aifabric.configs.check import Deviation
    from aifabric.reliability.model import GoodputResult
    from aifabric.reliability.spec import GoodputScenario
    from aifabric.routing.route import Routed
    from aifabric.routing.scenario import Scenario
    from aifabric.sim.results import SimResult
    from aifabric.sim.scenario import SimScenario
    from aifabric.spec import Spec
    from aifabric.topology import Fabric

__all__ = [
    "BuildResult",
    "CheckResult",
    "GoodputRun",
    "Plan",
    "Proposal",
    "Result",
    "RouteResult",
    "build",
    "build_fabric",
    "build_scenario",
    "check",
    "check_template",
    "goodput",
    "jsonable",
    "load_scenario",
    "load_spec",
    "plan",
    "propose",
    "results",
    "route",
    "simulate",
]

SIMS = ("flow", "analytic", "packet")


# ---------------------------------------------------------------- helpers

def _pandas() -> Any:
    """pandas, or one line naming the extra that brings it."""
    try:
        import pandas as pd
    except ImportError:
        raise SpecError(Problem("pandas", "the Python API's tables need pandas, an extra: "
                                "pip install 'aifabric[data]'")) from None
    return pd


def frame(table: Mapping[str, Any]) -> pd.DataFrame:
    """A table (column name -> numpy array or list) as a DataFrame; object columns (names,
    paths) as text, missing values (None) kept missing."""
    pd = _pandas()
    cols: dict[str, Any] = {}
    for k, v in table.items():
        a = np.asarray(v) if not isinstance(v, np.ndarray) else v
        if a.dtype == object:
            cols[k] = pd.Series([None if x is None else str(x) for x in a.tolist()],
                                dtype=object)
        else:
            cols[k] = a
    return pd.DataFrame(cols)


def jsonable(x: Any) -> Any:
    """Plain JSON: numpy scalars as numbers, NaN and infinities (an unfinished
    collective's time, a rate never measured) as null — what ``--json`` prints."""
    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: clean(w) for k, w in v.items()}
        if isinstance(v, list | tuple):
            return [clean(w) for w in v]
        if isinstance(v, float) and not np.isfinite(v):
            return None
        return v
    return clean(json.loads(json.dumps(
        x, default=lambda v: v.item() if hasattr(v, "item") else str(v))))


def _fabric_of(scn: Scenario, fabric: Fabric | None) -> Fabric:
    if fabric is not None:
        from aifabric.topology import Fabric

        if not isinstance(fabric, Fabric):
            raise SpecError(Problem("fabric", f"got {type(fabric).__name__}; allowed: a "
                                    "Fabric from build_fabric, or None"))
        # the routing may differ (the scenario's overrides are passed to the run); any
        # other difference means another fabric, and a silently wrong answer
        if fabric.spec is not scn.spec and fabric.spec.model_copy(
                update={"routing": scn.spec.routing}) != scn.spec:
            raise SpecError(Problem("fabric", f"built from another spec "
                                    f"({fabric.spec.name!r}) than the scenario's "
                                    f"({scn.spec.name!r}, or one of its fields overridden); "
                                    "allowed: build_fabric(scn.spec), or None"))
        return fabric
    return build_fabric(scn.spec, file=scn.spec_file or scn.file)


# ---------------------------------------------------------------- specs, fabrics, plans

def load_spec(path: str | Path) -> Spec:
    """Read and validate the cluster spec at ``path`` (SpecError naming file and field)."""
    from aifabric.spec import load_spec as _load_spec

    return _load_spec(path)


def build_fabric(spec: Spec | str | Path, *, file: str | Path | None = None) -> Fabric:
    """Build the fabric of a spec (or of the spec file at a path): every GPU, NIC port,
    switch and link as numpy arrays. A fabric predicted to need more memory than the limit
    (``--max-memory``; :func:`aifabric.guard.set_limit`) is refused before it is built.
    Problems name ``file`` (default: the path given, if any): the spec's file when a Spec
    loaded from one is given. This is the one guarded build every command uses."""
    from aifabric.guard import check_fabric
    from aifabric.topology import build_fabric as _build_fabric

    if isinstance(spec, str | Path):
        file = spec if file is None else file
        spec = load_spec(spec)
    try:
        check_fabric(spec)
        fab = _build_fabric(spec)
        if spec.transport == "infiniband":
            from aifabric.routing.infiniband import check_infiniband

            check_infiniband(fab)
        return fab
    except SpecError as err:
        raise err.with_file(str(file)) if file else err from None


@dataclass(frozen=True)
class Plan:
    """The design figures of a fabric (see docs/plan.md for every key);
    :meth:`to_dict` is what ``aifabric plan --json`` prints."""

    name: str
    family: str
    gpus: int
    hosts: int
    backup_hosts: int
    backup_gpus: int
    nic_ports: int
    rails: int
    segments: int
    pods: int
    planes: int
    tiers: int
    switches: dict[str, int]
    links: list[dict[str, Any]]
    cabling: dict[str, Any]
    oversubscription: dict[str, float | None]
    scaleout_gbps_per_gpu: float
    max_port_use: dict[str, str]
    hops: dict[str, Any]
    bisection_gbps: float | None = None
    bisection_gbps_per_gpu: float | None = None
    scheduled: dict[str, Any] | None = None  # a scheduled fabric's elements (spec.scheduled)
    _data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        names = {f.name for f in fields(cls)} - {"_data"}
        return cls(**{k: copy.deepcopy(v) for k, v in data.items() if k in names},
                   _data=copy.deepcopy(dict(data)))

    def to_dict(self) -> dict[str, Any]:
        """The plan as one JSON-ready dict, keys in ``plan --json``'s order."""
        return copy.deepcopy(self._data)


def plan(fab: Fabric | Spec | str | Path, *, bisection: bool = True) -> Plan:
    """The design of a fabric (or of a spec, or a spec file): counts per tier, links,
    optics, oversubscription, bisection bandwidth (a max-flow; ``bisection=False`` skips
    it) and hops between GPUs."""
    from aifabric.planning import plan_fabric
    from aifabric.topology import Fabric

    f = fab if isinstance(fab, Fabric) else build_fabric(fab)
    return Plan.from_dict(plan_fabric(f, bisection=bisection))


@dataclass(frozen=True)
class Proposal:
    """Candidate designs for a cluster size, best first (``plan --gpus N``)."""

    candidates: list[Any]  # aifabric.planning.propose.Candidate, ranked; those that fit first
    chosen: Any  # the best Candidate
    rank_rule: str

    @property
    def spec(self) -> Spec:
        """The chosen design's spec."""
        return self.chosen.spec

    def to_dict(self) -> dict[str, Any]:
        """What ``aifabric plan --gpus N --json`` prints."""
        return {"rank_rule": self.rank_rule,
                "candidates": [{"rank": i + 1 if c.fits else None, "design": c.label,
                                "family": c.spec.topology.family if c.spec else None,
                                "tiers": c.tiers, "fits": c.fits, "reason": c.reason or None,
                                "oversubscription": c.oversubscription if c.fits else None,
                                "backup_hosts": c.plan["backup_hosts"] if c.plan else None,
                                "plan": c.plan} for i, c in enumerate(self.candidates)],
                "chosen": self.chosen.label,
                "spec": json.loads(self.chosen.spec.model_dump_json())}


def propose(*, gpus: int, nic_gbps: int = 400, switch_ports: int = 128,
            switch_gbps: int = 400, gpus_per_host: int = 8, nics_per_host: int = 8,
            option: str = "gpus") -> Proposal:
    """Candidate designs for ``gpus`` GPUs (every family that fits, planned and ranked);
    SpecError listing why each design does not fit when none does."""
    from aifabric.planning.propose import RANK_RULE, ranked
    from aifabric.planning.propose import propose as _propose

    for name, v, lo in (("gpus", gpus, 1), ("nic_gbps", nic_gbps, 1),
                        ("switch_ports", switch_ports, 2), ("switch_gbps", switch_gbps, 1),
                        ("gpus_per_host", gpus_per_host, 1),
                        ("nics_per_host", nics_per_host, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise SpecError(Problem(name, f"got {v!r}; allowed: an integer >= {lo}"))
    cands, best = _propose(gpus=gpus, nic_gbps=nic_gbps, switch_ports=switch_ports,
                           switch_gbps=switch_gbps, gpus_per_host=gpus_per_host,
                           nics_per_host=nics_per_host)
    if best is None:
        raise SpecError([Problem(option, f"no design fits {gpus} GPUs with "
                                 f"{switch_ports} x {switch_gbps}G switches: {c.label}: "
                                 f"{c.reason}") for c in cands])
    return Proposal(ranked(cands), best, RANK_RULE)


# ---------------------------------------------------------------- build

@dataclass(frozen=True)
class BuildResult:
    """What :func:`build` wrote (or, a validation having failed, would have written): the
    folder, the number of files and the counts ``aifabric build`` prints."""

    out: Path
    written: bool  # False: --validate found invalid configs and nothing was written
    files: int  # files written (0 when nothing was)
    family: str
    switches: int
    hosts: int
    cables: int  # host-to-switch and switch-to-switch cables (cabling.csv rows)
    asns: int
    loopbacks: int
    p2p_links: int  # point-to-point /31s
    nic_addresses: int  # distinct NIC /32s
    qos: str
    dashboards: int  # Grafana dashboards written (0: none available)
    #: validate=True: the switches checked and every problem, (switch, message)
    validated: int = 0
    yang_invalid: tuple[tuple[str, str], ...] = ()
    frr_rejected: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """Written, every validated config valid."""
        return self.written and not self.yang_invalid and not self.frr_rejected

    def paths(self) -> list[Path]:
        """Every file written, relative to :attr:`out`, sorted."""
        if not self.written:
            return []
        return sorted(p.relative_to(self.out) for p in self.out.rglob("*") if p.is_file())

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["out"] = str(self.out)
        d["yang_invalid"] = [list(x) for x in self.yang_invalid]
        d["frr_rejected"] = [list(x) for x in self.frr_rejected]
        return d


def build(spec: Spec | str | Path, out: str | Path, *, validate: bool = False,
          bars: Bars | None = None, option: str = "out") -> BuildResult:
    """Write every file needed to cable and configure the fabric of ``spec`` (a Spec or a
    spec file) into the folder ``out``: what ``aifabric build SPEC --out DIR`` writes, per
    switch SONiC config_db.json and FRR frr.conf, per host the NIC script and NCCL files,
    the cabling, address and ASN plans, BOM, LLD and monitoring. The folder is written
    atomically (``out`` must be absent, empty or a previous build, which is replaced).
    ``validate``: check the switch configs with yanglint and FRR first and write nothing
    when one is invalid (``BuildResult.written`` False). ``bars``: progress (the CLI's)."""
    from aifabric.configs import BuildContext, write_build
    from aifabric.configs.build import n_files
    from aifabric.configs.validate import check_validate_tools, validate_configs
    from aifabric.outputs import BUILD, check_target
    from aifabric.spec import Spec as _Spec
    from aifabric.telemetry.monitoring import render_monitoring
    from aifabric.topology import LinkKind, NodeKind

    if validate:
        check_validate_tools("--validate" if option.startswith("--") else "validate")
    out = Path(out)
    check_target(out, option=option, folder=True, **BUILD)  # before any work
    if isinstance(spec, str | Path):
        file: str | Path | None = spec
        spec = load_spec(spec)
    elif isinstance(spec, _Spec):
        file = None
    else:
        raise SpecError(Problem("spec", f"got {type(spec).__name__}; allowed: a Spec or "
                                "the path of a spec file"))
    fabric = build_fabric(spec, file=file)
    try:
        ctx = BuildContext.of(fabric)
    except SpecError as err:
        raise err.with_file(str(file)) if file else err from None
    checked, yang, frr = 0, [], []
    if validate:
        checked, yang, frr = validate_configs(
            ctx, "--validate" if option.startswith("--") else "validate")
    count = 0
    written = not (yang or frr)
    if written:
        with (bars or _no_bar)("files", n_files(fabric), f"building {spec.name}") as advance:
            count = write_build(fabric, out, progress=advance, ctx=ctx,
                                extra=(render_monitoring,))
    dash = (out / "monitoring" / "grafana" / "dashboards")
    sw = len(ctx.plan.switches)
    return BuildResult(
        out=out, written=written, files=count, family=fabric.family, switches=sw,
        hosts=len(fabric.host_node),
        cables=int((fabric.links.kind >= LinkKind.ACCESS).sum()),
        asns=len(set(ctx.plan.asn[ctx.plan.switches].tolist())), loopbacks=sw,
        p2p_links=len(ctx.plan.p2p),
        nic_addresses=len(set(fabric.nodes.ip[fabric.ids(NodeKind.NIC)].tolist())),
        qos=spec.deploy.qos.mode,
        dashboards=len(list(dash.glob("*.json"))) if written and dash.is_dir() else 0,
        validated=checked, yang_invalid=tuple(yang), frr_rejected=tuple(frr))


# ---------------------------------------------------------------- scenarios

def _model_for(doc: Any, kind: str | None) -> type[Scenario]:
    from aifabric.sim.scenario import SimScenario

    if kind is None:
        kind = "goodput" if isinstance(doc, dict) and "goodput" in doc else "simulate"
    if kind == "goodput":
        from aifabric.reliability.spec import GoodputScenario

        return GoodputScenario
    if kind == "simulate":
        return SimScenario
    if kind == "route":
        from aifabric.routing.scenario import Scenario

        return Scenario
    raise SpecError(Problem("kind", f"unknown kind {kind!r}; allowed: simulate, route, "
                            "goodput"))


def load_scenario(path: str | Path, *, kind: str | None = None) -> Scenario:
    """Read and validate the scenario at ``path``: a goodput scenario when the document has
    a ``goodput:`` section, a simulation scenario otherwise (it holds what ``route`` needs
    too); ``kind`` ("simulate", "route", "goodput") chooses explicitly."""
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.spec.load import load_yaml

    p = Path(path)
    doc = load_yaml(p)
    return scenario_from_dict(doc, file=str(path), base_dir=p.parent,
                              model=_model_for(doc, kind))


def build_scenario(*, spec: Spec | str | Path | Mapping[str, Any], kind: str = "simulate",
             base_dir: str | Path | None = None, **fields_: Any) -> Scenario:
    """A scenario built in Python: ``spec`` is a Spec, a spec file or a spec mapping; the
    other fields are the YAML's (models or plain values), e.g.
    ``build_scenario(spec=spec, collectives=[{"op": "allreduce", "size_bytes": "1GiB",
    "gpus": 64}])``. Validated exactly as a YAML document (routing overrides merged into
    the spec's routing, problems as SpecError); relative paths resolve against
    ``base_dir`` (default: the current folder)."""
    from aifabric.routing.overrides import jsonable as plain_json
    from aifabric.routing.overrides import spec_mapping
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.spec import Spec

    if isinstance(spec, Spec):
        spec_doc: Any = spec_mapping(spec)
    elif isinstance(spec, Path):
        spec_doc = str(spec)
    else:
        spec_doc = spec
    doc = {**plain_json(fields_), "spec": plain_json(spec_doc)}
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    return scenario_from_dict(doc, base_dir=base, model=_model_for(doc, kind))


def _as_scenario(scn: Any, kind: str) -> Any:
    from aifabric.routing.scenario import Scenario

    if isinstance(scn, str | Path):
        return load_scenario(scn, kind=kind if kind != "route" else None)
    if not isinstance(scn, Scenario):
        raise SpecError(Problem("scenario", f"got {type(scn).__name__}; allowed: a "
                                "scenario (load_scenario, scenario, SimScenario) or a path"))
    return scn


# ---------------------------------------------------------------- simulate

class Result:
    """One simulated scenario: the summary ``simulate --json`` prints and its tables as
    pandas DataFrames (built on first use from :attr:`raw`, the simulator's numpy tables)."""

    def __init__(self, raw: SimResult, scn: SimScenario | None = None):
        self.raw = raw
        self.scenario: str = raw.scenario
        self.sim: str = raw.sim
        self.source = scn  # the scenario as run (None: not known)
        self.summary: dict[str, Any] = jsonable(raw.summary)
        self._frames: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (f"Result(scenario={self.scenario!r}, sim={self.sim!r}, "
                f"makespan_ns={self.raw.makespan_ns:g}, tables={sorted(self.raw.tables)})")

    def table(self, name: str) -> pd.DataFrame:
        """One of the run's tables by name (``collectives``, ``transfers``,
        ``packet_fct``, ...)."""
        if name not in self.raw.tables:
            raise SpecError(Problem("table", f"no table {name!r}; allowed: "
                                    f"{', '.join(self.raw.tables)}"))
        if name not in self._frames:
            self._frames[name] = frame(self.raw.tables[name])
        return self._frames[name]

    @property
    def collectives(self) -> pd.DataFrame:
        """One row per collective: time, algbw, busbw (nccl-tests conventions)."""
        return self.table("collectives")

    @property
    def jobs(self) -> pd.DataFrame:
        """One row per training job: iteration, compute and exposed communication time."""
        return self.table("jobs")

    @property
    def links(self) -> pd.DataFrame:
        """One row per used link direction: bytes, mean and peak utilization."""
        return self.table("links")

    @property
    def flows(self) -> pd.DataFrame:
        """One row per transfer (the ``transfers`` table)."""
        return self.table("transfers")

    @property
    def timeline(self) -> pd.DataFrame:
        """Utilization per tier over time intervals."""
        return self.table("timeline")

    @property
    def makespan_ns(self) -> float:
        return float(self.raw.makespan_ns)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table ``simulate --out`` writes, by name."""
        return {name: self.table(name) for name in self.raw.tables}

    def figures(self) -> dict[str, int | float | str | bool | None]:
        """The flat figures of the summary (:func:`aifabric.store.summary_row`)."""
        from aifabric.store import summary_row

        return summary_row(self.summary)

    @property
    def run_id(self) -> str:
        """The content hash of the scenario as run (:func:`aifabric.content_hash`)."""
        from aifabric.sim.identity import content_hash

        if self.source is None:
            raise SpecError(Problem("scenario", "this result does not know its scenario; "
                                    "allowed: a Result from aifabric.simulate"))
        return content_hash(self.source)

    def store_row(self, *, sweep: str = "adhoc", point: int = 0,
                  overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The results-store row of this run: run id (content hash), sweep, point,
        overrides (JSON, sorted keys), simulator, seed, status and :meth:`figures`."""
        from aifabric.routing.overrides import canonical_json

        return {"run_id": self.run_id, "sweep": sweep, "point": point,
                "overrides": canonical_json(dict(overrides or {})), "sim": self.sim,
                "seed": int(getattr(self.source, "seed", 0) or 0), "status": "ok",
                **self.figures()}

    def to_store(self, store: str | Path | Any, *, sweep: str = "adhoc", point: int = 0,
                 overrides: Mapping[str, Any] | None = None,
                 timing: Mapping[str, Any] | None = None) -> str:
        """Append this run (row and tables) to a results store (a folder or a
        :class:`aifabric.store.Store`); a run already stored is not stored twice.
        Returns the run id."""
        from aifabric.store import Store

        st = store if isinstance(store, Store) else Store(store)
        row = self.store_row(sweep=sweep, point=point, overrides=overrides)
        st.write_run(row, dict(self.raw.tables), timing=timing)
        return row["run_id"]

    def needs_attention(self) -> list[str]:
        """Why the CLI would exit 1 (unfinished, alarms); empty when all is well."""
        from aifabric.sim.results import needs_attention

        return needs_attention(self.raw.summary)

    def save(self, out: str | Path, fmt: str = "csv", *, option: str = "out") -> Path:
        """Write the folder ``aifabric simulate --out`` writes (tables, plots, report.md,
        run.json), atomically; returns the folder. ``option``: the name problems give."""
        from aifabric.outputs import REPORT, check_target
        from aifabric.report import write_report

        if fmt not in ("csv", "parquet"):
            raise SpecError(Problem("--format" if option.startswith("--") else "fmt",
                                    f"unknown format {fmt!r}; allowed: csv, parquet"))
        out = Path(out)
        check_target(out, option=option, folder=True, **REPORT)
        write_report([self.raw], out, fmt=fmt, option=option)
        return out


def check_max_events(max_events: float | None, option: str = "max_events") -> float | None:
    """A packet run's event limit as the simulator takes it (None: no limit; 0 = none)."""
    if max_events is None:
        return None
    if isinstance(max_events, bool) or not isinstance(max_events, int | float) \
            or not max_events >= 0 or max_events == float("inf"):
        got = f"{max_events:g}" if isinstance(max_events, int | float) else repr(max_events)
        raise SpecError(Problem(option, f"got {got}; allowed: a number of events "
                                ">= 0 (0: no limit)"))
    return float(max_events) if max_events > 0 else None


#: ``bars(kind, total, label)``: a context manager yielding a progress callback or None;
#: kind "stages" (total: stages, callback(k)) or "events" (callback(done, estimate))
Bars = Callable[[str, int, str], AbstractContextManager[Any]]


@contextmanager
def _no_bar(kind: str, total: int, label: str) -> Iterator[None]:
    yield None


def simulate(scn: SimScenario | str | Path, *, sim: str | None = None,
             max_events: float | None = DEFAULT_MAX_EVENTS, fabric: Fabric | None = None,
             bars: Bars | None = None) -> Result:
    """Simulate a scenario (or the scenario file at a path) on its fabric.

    ``sim`` overrides the scenario's simulator (flow, analytic, packet); a packet run
    estimated above ``max_events`` events is refused (None or 0: no limit); ``fabric``:
    the scenario's fabric when already built (skips the build). ``bars`` draws progress
    (the CLI's bars). Problems are SpecErrors naming the scenario file."""
    from aifabric.runinfo import RUN_JSON, run_record_text
    from aifabric.sim.run import compile_workload
    from aifabric.sim.run import simulate as _simulate
    from aifabric.sim.scenario import SimScenario

    if sim is not None and sim not in SIMS:
        raise SpecError(Problem("sim", f"unknown simulator {sim!r}; allowed: "
                                f"{', '.join(SIMS)}"))
    limit = check_max_events(max_events)
    scn = _as_scenario(scn, "simulate")
    if not isinstance(scn, SimScenario):
        raise SpecError(Problem("scenario", f"a {type(scn).__name__} has no jobs or "
                                "collectives; allowed: a simulation scenario (SimScenario)"))
    if sim is not None and sim != scn.sim:
        scn = scn.with_overrides({"sim": sim})
    fab = _fabric_of(scn, fabric)
    bars = bars or _no_bar
    file = scn.file
    try:
        done, why = _simulate_classes(scn, fab, bars)
        if done is not None:
            done.meta.setdefault("files", {})[RUN_JSON] = run_record_text(scn, "simulate",
                                                                          file)
            return Result(done, scn)
        wl = compile_workload(scn, fab, guard_note=f"; no exact classes: {why}" if why
                              else "")
        label = f"simulating {scn.name}"
        if scn.sim == "packet":
            with bars("events", 0, label) as evp:
                res = _simulate(scn, fab, workload=wl, events_progress=evp,
                                max_events=float("inf") if limit is None else limit)
        else:
            with bars("stages", wl.dag.n_stages, label) as prog:
                res = _simulate(scn, fab, progress=prog, workload=wl)
    except SpecError as err:
        raise err.with_file(str(file)) if file else err from None
    if why is not None:
        from aifabric.sim.classes import fallback_summary

        res.summary["classes"] = fallback_summary(why)
    # what the run was made from: write_report puts it beside the tables (run.json)
    res.meta.setdefault("files", {})[RUN_JSON] = run_record_text(scn, "simulate", file)
    return Result(res, scn)


def _simulate_classes(scn: SimScenario, fab: Fabric, bars: Bars) -> tuple[Any, str | None]:
    """An All-to-All scenario as exact classes (:mod:`aifabric.sim.classes`): (the
    result, None) when they are exact, (None, why not) when it runs per transfer, (None,
    None) when the scenario is no All-to-All (or ``classes: off`` says so, with the
    reason)."""
    from aifabric.sim.classes import class_plan, is_candidate, simulate_classes

    if not is_candidate(scn):
        if getattr(scn, "classes", "auto") == "off" and scn.sim == "flow" and \
                len(scn.collectives) == 1 and scn.collectives[0].op == "alltoall":
            return None, "classes: off"
        return None, None
    plan = class_plan(scn, fab)
    if isinstance(plan, str):
        return None, plan
    with bars("stages", 0, f"simulating {scn.name} (classes)") as prog:
        return simulate_classes(scn, fab, plan, progress=prog), None


# ---------------------------------------------------------------- route

class RouteResult:
    """Where a scenario's flows go: the summary ``route --json`` prints and DataFrames of
    the per-tier loads, every link direction and every flow with its path."""

    def __init__(self, routed: Routed, summary: dict[str, Any], scn: Scenario):
        self.routed = routed
        self.summary = summary
        self.source = scn
        self.scenario: str = summary["scenario"]
        self._frames: dict[str, Any] = {}

    def __repr__(self) -> str:
        s = self.summary["stats"]
        return (f"RouteResult(scenario={self.scenario!r}, policy="
                f"{self.summary['policy']['policy']!r}, flows={s['flows']})")

    @property
    def tiers(self) -> pd.DataFrame:
        """One row per tier: links, used, idle fraction, mean/max bytes, max flows."""
        if "tiers" not in self._frames:
            pd = _pandas()
            rows = [{"tier": k, **v} for k, v in self.summary["stats"]["tiers"].items()]
            self._frames["tiers"] = pd.DataFrame(rows)
        return self._frames["tiers"]

    @property
    def links(self) -> pd.DataFrame:
        """One row per link direction (``links.csv`` of ``route --out``)."""
        if "links" not in self._frames:
            from aifabric.report.route import link_table

            self._frames["links"] = frame(link_table(self.routed))
        return self._frames["links"]

    @property
    def flows(self) -> pd.DataFrame:
        """One row per flow with its path (``flows.csv`` of ``route --out``)."""
        if "flows" not in self._frames:
            from aifabric.report.route import flow_table

            self._frames["flows"] = frame(flow_table(self.routed))
        return self._frames["flows"]

    def save(self, out: str | Path, fmt: str = "csv", *, option: str = "out",
             scenario_file: str | Path | None = None) -> Path:
        """Write the folder ``aifabric route --out`` writes; returns it. ``option``: the
        name problems give; ``scenario_file``: run.json's (default: the scenario's file)."""
        from aifabric.outputs import ROUTE, check_target
        from aifabric.report.route import write_route
        from aifabric.report.write import check_table_format
        from aifabric.runinfo import run_record_text

        check_table_format(fmt, "--format" if option.startswith("--") else "fmt")
        out = Path(out)
        check_target(out, option=option, folder=True, **ROUTE)
        file = scenario_file if scenario_file is not None else self.source.file
        write_route(out, self.routed, self.summary, fmt, option=option,
                    record=run_record_text(self.source, "route", file))
        return out


def _with_policy(sc: Scenario, policy: Any, option: str) -> Scenario:
    """``sc`` with its routing policy replaced: a policy name, or a mapping / Routing of
    routing fields (merged into the policy in force)."""
    from typing import get_args

    from aifabric.spec.models import Routing

    if isinstance(policy, str):
        allowed = get_args(Routing.model_fields["policy"].annotation)
        if policy not in allowed:
            raise SpecError(Problem(option, f"unknown policy {policy!r}; allowed: "
                                    f"{', '.join(allowed)}"))
        return sc.with_overrides({"routing.policy": policy})
    if isinstance(policy, Routing):
        return sc.with_overrides({"routing": policy.model_dump(mode="json")})
    if isinstance(policy, Mapping):
        return sc.with_overrides({f"routing.{k}": v for k, v in policy.items()})
    raise SpecError(Problem(option, f"got {type(policy).__name__}; allowed: a policy "
                            "name, a mapping of routing fields or a Routing"))


def route(fab_or_scenario: Fabric | Scenario | str | Path, traffic: Any = None, *,
          policy: Any = None, failures: Any = None, seed: int | None = None,
          fabric: Fabric | None = None) -> RouteResult:
    """Where flows go on a fabric: per-tier link loads, idle uplinks, the busiest link,
    dual-ToR port balance, failover.

    ``fab_or_scenario``: a scenario (or its file), or a Fabric with ``traffic`` (a list
    of traffic patterns as in a scenario's ``traffic:``). ``traffic``, ``failures``
    (a list as in ``failures:``) and ``seed`` replace the scenario's; ``policy`` is a
    policy name (ecmp, source_port, ...) or a mapping of routing fields."""
    from aifabric.routing.scenario import run_scenario
    from aifabric.topology import Fabric

    updates = {k: v for k, v in (("traffic", traffic), ("failures", failures),
                                 ("seed", seed)) if v is not None}
    if isinstance(fab_or_scenario, Fabric):
        fab = fab_or_scenario
        if traffic is None:
            raise SpecError(Problem("traffic", "missing; allowed: a list of traffic "
                                    "patterns, e.g. [{'pattern': 'permutation', "
                                    "'size_bytes': 1048576}]"))
        sc = build_scenario(spec=fab.spec, kind="route", name=fab.name, **updates)
    else:
        sc = _as_scenario(fab_or_scenario, "route")
        if updates:
            sc = sc.with_overrides(updates)
        fab = None
    if policy is not None:
        sc = _with_policy(sc, policy, "policy")
    if fab is None:
        fab = _fabric_of(sc, fabric)
    routed, report = run_scenario(sc, fab)
    return RouteResult(routed, report, sc)


# ---------------------------------------------------------------- goodput

class GoodputRun:
    """Goodput of a job under failures: the summary ``goodput --json`` prints and the
    tables ``goodput --out`` writes, as DataFrames."""

    def __init__(self, raw: GoodputResult):
        from aifabric.reliability.report import jsonable as gp_jsonable

        self.raw = raw
        self.scenario: str = raw.scenario
        self.summary: dict[str, Any] = gp_jsonable(raw.summary)
        self._frames: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (f"GoodputRun(scenario={self.scenario!r}, ettr_mean="
                f"{self.summary['ettr']['mean']:.4f}, tables={sorted(self.raw.tables)})")

    def table(self, name: str) -> pd.DataFrame:
        """One table by name (see :meth:`tables`)."""
        if name not in self.raw.tables:
            raise SpecError(Problem("table", f"no table {name!r}; allowed: "
                                    f"{', '.join(self.raw.tables)}"))
        if name not in self._frames:
            self._frames[name] = frame(self.raw.tables[name])
        return self._frames[name]

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table ``goodput --out`` writes, by name."""
        return {name: self.table(name) for name in self.raw.tables}

    def save(self, out: str | Path) -> Path:
        """Write the folder ``aifabric goodput --out`` writes; returns it."""
        from aifabric.outputs import check_target
        from aifabric.reliability.report import MARKER, write_goodput

        out = Path(out)
        check_target(out, option="out", folder=True, **MARKER)
        write_goodput(self.raw, out)
        return out


def goodput(scn: GoodputScenario | str | Path, *, trials: int | None = None,
            seed: int | None = None, horizon: float | str | None = None,
            fabric: Fabric | None = None) -> GoodputRun:
    """How much training time the scenario's job loses to failures (effective training
    time ratio, interruptions, time lost by cause, checkpoint sweep). ``trials``, ``seed``
    and ``horizon`` (seconds, or text such as "30d") override the scenario's goodput
    section."""
    from aifabric.reliability.model import run_goodput
    from aifabric.reliability.spec import MAX_S, GoodputScenario, horizon_problem, parse_duration

    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int)
                               or not 1 <= trials <= 1_000_000):
        raise SpecError(Problem("trials", f"got {trials!r}; allowed: 1 to 1,000,000"))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed < 1 << 63):
        raise SpecError(Problem("seed", f"got {seed!r}; allowed: 0 to 2**63 - 1"))
    h: float | None = None
    if horizon is not None:
        v = parse_duration(horizon) if isinstance(horizon, str) else horizon
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_S:
            raise SpecError(Problem("horizon", f"got {horizon!r}; allowed: a duration > 0 "
                                    "like 30d, 54d, 12h (at most 100 years)"))
        h = float(v)
    sc = _as_scenario(scn, "goodput")
    if not isinstance(sc, GoodputScenario):
        raise SpecError(Problem("goodput", "missing; allowed: a scenario with a goodput: "
                                "section"))
    if h is not None and (why := horizon_problem(sc.goodput, h)):  # before any model runs
        raise SpecError(Problem("horizon", why))
    fab = _fabric_of(sc, fabric)
    try:
        res = run_goodput(sc, fab, trials=trials, seed=seed, horizon=h)
    except SpecError as err:
        raise err.with_file(str(sc.file)) if sc.file else err from None
    return GoodputRun(res)


# ---------------------------------------------------------------- check

SPEC_FILE = "spec.yaml"  # = aifabric.configs.build.SPEC_FILE (kept light here)


def _read_inventory(path: Path) -> Any:
    """A collected-facts file (YAML or JSON) parsed, bounded; problems name the file."""
    from aifabric.spec.load import load_json, load_yaml

    if path.suffix == ".json":  # large inventories: JSON parses ~50x faster than YAML
        return load_json(path)
    return load_yaml(path, fast=True, kind="YAML/JSON")


@dataclass
class _Build:
    spec_file: Path
    given_spec: bool
    fabric: Any
    ctx: Any


def _load_build(build: str | Path) -> _Build:
    """A build folder (its spec.yaml) or a spec file, its fabric and build context."""
    from aifabric.configs import BuildContext

    build = Path(build)
    spec_file = build if build.is_file() else build / SPEC_FILE
    if not spec_file.is_file():
        raise SpecError(Problem("", f"not an aifabric build folder (no {SPEC_FILE}); allowed: "
                                "a folder written by aifabric build", str(build)))
    fab = build_fabric(spec_file)
    try:
        ctx = BuildContext.of(fab)
    except SpecError as err:
        raise err.with_file(str(spec_file)) from None
    return _Build(spec_file, build.is_file(), fab, ctx)


def check_ibnetdiscover(build: str | Path, discovered: str | Path) -> list[dict[str, str]]:
    """The pre-flight check of an InfiniBand build: the ``ibnetdiscover`` output in file
    ``discovered`` against the planned cabling and link speed (ends matched by node
    description and port number). Each deviation: group, device, field, expected,
    found."""
    from aifabric.configs.infiniband import check_discovered
    from aifabric.routing.infiniband import subnet

    b = _load_build(build)
    if b.fabric.spec.transport != "infiniband":
        raise SpecError(Problem("--ibnetdiscover", "the build is not InfiniBand (transport "
                                "roce); allowed: a build of a spec with transport: infiniband"))
    path = Path(discovered)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SpecError(Problem("--ibnetdiscover", f"cannot read {path}: "
                                f"{exc.strerror or exc}")) from None
    if "Switch" not in text and "Ca" not in text:
        raise SpecError(Problem("--ibnetdiscover", f"{path} holds no ibnetdiscover output "
                                "(no Switch or Ca record)"))
    return check_discovered(subnet(b.fabric), text)


def check_template(build: str | Path) -> dict[str, Any]:
    """The planned facts of a build folder (or a spec file) in inventory shape: what
    ``check --template`` writes."""
    from aifabric.configs.check import expected_inventory

    return expected_inventory(_load_build(build).ctx)


@dataclass
class CheckResult:
    """Collected facts against the plan: every deviation (empty: all match)."""

    deviations: list[Deviation]
    hosts: int  # hosts and switches in the facts checked
    switches: int

    @property
    def ok(self) -> bool:
        return not self.deviations

    def to_list(self) -> list[dict[str, str]]:
        """The deviations as ``check --json`` prints them."""
        return [dict(d.__dict__) for d in self.deviations]

    @property
    def table(self) -> pd.DataFrame:
        """One row per deviation: group, device, field, expected, found."""
        pd = _pandas()
        return pd.DataFrame(self.to_list(), columns=["group", "device", "field", "expected",
                                                     "found"])


def check(build: str | Path, *, inventory: str | Path | None = None,
          facts: str | Path | None = None, partial: bool = False,
          progress: Callable[[int, int], AbstractContextManager[Any]] | None = None
          ) -> CheckResult:
    """Compare collected facts (``inventory``: a YAML/JSON file, or ``facts``: the folder
    the build's preflight playbook writes) with the plan of a build folder (or its spec);
    ``partial`` ignores devices and interfaces missing from the facts. With ``facts``, a
    fact every collector reads (a switch's ``bgp_established``, a port's MTU) or one its
    collector marked unread is a deviation of that device when missing, with the reason.
    ``progress(total)`` (the CLI's bar) is a context manager yielding a callback of
    devices done."""
    from aifabric.configs.check import compare, expected_inventory, parse_inventory

    if inventory is not None and facts is not None:
        raise SpecError(Problem("--facts", "given with --inventory; allowed: one of them"))
    if inventory is None and facts is None:
        raise SpecError(Problem("--inventory", "missing; allowed: a YAML/JSON file of "
                                "collected facts (see --template), or --facts FOLDER"))
    b = _load_build(build)
    expected = expected_inventory(b.ctx)
    unusable: list = []
    unread: dict[str, dict[str, str]] = {}
    if facts is not None:
        from aifabric.configs.ansible import plan_id
        from aifabric.configs.check import read_facts_folder
        from aifabric.spec import dump_spec

        facts = Path(facts)
        if not facts.is_dir():
            raise SpecError(Problem("--facts", f"{facts} is not a folder; allowed: the facts "
                                    "folder preflight.yml wrote (<build>/facts)"))
        # the digest of the spec.yaml the build wrote (a spec given directly: as dumped)
        text = (b.spec_file.read_text(encoding="utf-8") if b.spec_file.name == SPEC_FILE
                and not b.given_spec else dump_spec(b.fabric.spec))
        plan_ = plan_id(text, b.fabric.spec.name)
        doc, unusable = read_facts_folder(facts, b.ctx, plan_, unread)
        if not unusable and not doc["hosts"] and not doc["switches"]:
            raise SpecError(Problem("--facts", f"{facts} holds no facts file (<device>.json); "
                                    "allowed: the folder preflight.yml wrote"))
        inv = parse_inventory(doc, str(facts), b.ctx)
    else:
        assert inventory is not None
        inv = parse_inventory(_read_inventory(Path(inventory)), str(inventory), b.ctx)
    total = len(expected["hosts"]) + len(expected["switches"])
    bar = progress(total) if progress is not None else _no_bar("devices", total, "")
    with bar as advance:
        devs = compare(expected, inv, partial=partial, progress=advance)
    if facts is not None:  # a facts file must hold every fact its collector always reads
        from aifabric.configs.check import missing_facts

        devs += missing_facts(expected, inv, unread)
    if unusable:  # a device whose file could not be used is reported once, by its file
        skip = {d.device for d in unusable}
        devs = unusable + [d for d in devs if not (d.device in skip and d.field == "device")]
    return CheckResult(devs, len(inv.hosts), len(inv.switches))


# ---------------------------------------------------------------- results

def results(sql: str | None = None, *, store: str | Path = "results") -> pd.DataFrame:
    """Query a results store (:func:`aifabric.store.results`): ``sql`` None ->
    every run, ordered by sweep, point and run id."""
    from aifabric.store import results as _results

    return _results(sql, store=store)
