"""The model behind ``aifabric serve``: one fabric, its traffic routed, and the questions
the page asks of it — loads, a collective's paths, what a failure moves.

A :class:`Twin` opens one of four things (:meth:`Twin.open`):

* a **spec** (a fabric design): the traffic is a permutation of all active GPUs shifted
  by one segment's GPUs (GPU i sends 1 MiB to GPU i + GPUs-per-segment: cross-segment,
  same rail), routed with the spec's routing (``info()["traffic"]`` says so);
* a **scenario** (a YAML with a top-level ``spec:``): what ``aifabric route`` routes —
  its traffic, routing and failures (:func:`aifabric.routing.scenario.scenario_traffic`)
  — or, for a simulation scenario (jobs, collectives, ``sim:``), every connection of
  its compiled workload routed the way :func:`aifabric.sim.paths.route_dag` routes it
  for the simulators (the solver is not run): traces then follow collectives and jobs;
* a **run folder** (``simulate --out`` or ``route --out``): the run's tables for the
  loads, and its ``run.json`` (or ``--scenario``) to rebuild the fabric and routing;
  a damaged folder never raises: :attr:`Twin.missing` says what is absent;
* the **lab** (``lab_dir``): the lab's own fabric and its live counters.

What-if: a *failure set* is a tuple of strings — a switch (or any node) name, a port
``device:iface`` (``tor-s00-r0-a:Ethernet3``, ``host-s00-h000:ens0f1``) or
``link:<id>`` — on top of the scenario's own failures; each set is routed once
(LRU of 8) and compared with the base routing exactly as ``route`` compares a
scenario's failures (:func:`aifabric.routing.failover.compare_routes`).

*Utilization* of an arc, where no simulator measured it: its bytes' drain time at its
capacity over the longest drain time of any arc (the time the busiest link needs to
carry its bytes bounds the whole transfer from below; 1 = that link). A simulated run
without extra failures uses the run's measured mean utilization (``links`` table).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

if TYPE_CHECKING:  # imported when used (the server starts fast)
    import scipy.sparse as sp

    from aifabric.routing.route import Routed
    from aifabric.scenario import Scenario
    from aifabric.web.loads import LoadSeries

__all__ = ["Twin", "parse_failures"]

#: the failure sets kept routed (besides the base)
CACHE = 8
#: most entries in one failure set (the API's limit too: aifabric.web.app uses it)
MAX_FAIL = 64
#: rows of the moved / unreachable lists, paths shown in a trace, sharing flows
MOVED_ROWS, PATH_ROWS, SHARING_ROWS = 200, 50, 50
#: most edges one trace sends (a pattern of the HPN pod uses 151K arcs: 46 MB of JSON)
MAX_TRACE_EDGES = 20_000
TARGETS = ("allowed: a fabric spec (YAML), a scenario (YAML with a top-level spec:), or "
           "a run folder (simulate --out, route --out)")
NO_SCENARIO = ("topology, tracing and what-if need the run's scenario: run.json or "
               "--scenario")
#: a simulate folder's tables and a route folder's (any format)
RUN_TABLES = {"simulate": ("collectives", "jobs", "transfers", "links", "timeline"),
              "route": ("links", "flows")}
RUN_REPORT = {"simulate": "report.md", "route": "report.json"}


# --------------------------------------------------------------------- helpers
def parse_failures(f: Fabric, fail: tuple[str, ...] | list[str]) -> np.ndarray:
    """Bool per link: down by the failure set ``fail`` (see the module docstring).

    A switch name maps to scenario ``{switch: name}``, ``device:iface`` to ``{port:
    ...}`` (:func:`aifabric.routing.failover.failed_links`), ``link:<id>`` to one link.
    Bad entries: one SpecError on field ``fail`` naming each.
    """
    from aifabric.routing.failover import failed_links

    fail = tuple(fail)
    if len(fail) > MAX_FAIL:
        raise SpecError(Problem("fail", f"{len(fail)} entries; allowed: at most {MAX_FAIL}"))
    down = np.zeros(f.n_links, dtype=bool)
    items: list[dict[str, str]] = []
    problems: list[Problem] = []
    for text in fail:
        if not isinstance(text, str) or not text.strip() or len(text) > 200:
            problems.append(Problem("fail", "an empty or over-long entry; allowed: a switch "
                                    "name, device:iface, or link:<id>"))
            continue
        text = text.strip()
        if text.startswith("link:"):
            lid = text[5:]
            if not lid.isdigit() or int(lid) >= f.n_links:
                problems.append(Problem("fail", f"{text!r}: allowed: link:<id> with id "
                                        f"0..{f.n_links - 1}"))
            else:
                down[int(lid)] = True
            continue
        items.append({"port": text} if ":" in text else {"switch": text})
    if items:
        try:
            down |= failed_links(f, items, path="fail")
        except SpecError as err:
            problems.extend(Problem("fail", p.message) for p in err.problems)
    if problems:
        raise SpecError(problems)
    return down


def _arc_tiers(f: Fabric) -> np.ndarray:
    """``"leaf_spine up"`` ... per arc (the simulators' link-group names)."""
    labels = np.array([f"{k.label} {d}" for k in LinkKind for d in ("up", "down")],
                      dtype=object)
    return labels[np.repeat(f.links.kind.astype(np.int64) * 2, 2)
                  + np.tile(np.array([0, 1]), f.n_links)]


_KIND = np.array([k.label for k in NodeKind], dtype=object)


@dataclass
class _State:
    """One failure set, routed."""

    fail: tuple[str, ...]
    down: np.ndarray  # bool per link (scenario failures included)
    routed: Routed
    arc_bytes: np.ndarray
    arc_flows: np.ndarray
    util: np.ndarray  # per arc, see the module docstring
    measured: bool  # util is the run's measured mean utilization
    whatif: dict[str, Any] | None = None  # Twin.whatif's answer, once asked


# ------------------------------------------------------------------------ Twin
class Twin:
    """A fabric with its traffic routed: what ``aifabric serve`` shows (module docs)."""

    mode: str
    name: str
    fabric: Fabric | None
    run_dir: Path | None
    missing: list[str]

    def __init__(self) -> None:
        self.mode, self.name = "design", ""
        self.fabric, self.run_dir = None, None
        self.missing = []
        self.source = ""  # "spec" | "scenario" | "sim" | "run" | "lab"
        self.traffic_note = ""
        self.scenario: Scenario | None = None
        self.run_command: str | None = None
        self.tables: dict[str, dict[str, np.ndarray]] = {}
        self.lab_dir: Path | None = None
        self._flows: Any = None
        self._pinned: Any = None
        self._base_down: np.ndarray | None = None
        self._policy: Any = None
        self._reroute = True
        self._dag: Any = None
        self._xconn: np.ndarray | None = None
        self._pattern_of_flow: np.ndarray | None = None
        self._patterns: list[str] = []
        self._states: OrderedDict[tuple[str, ...], _State] = OrderedDict()
        self._base: _State | None = None
        self._loads: OrderedDict[tuple[str, ...], LoadSeries] = OrderedDict()
        self._collector: Any = None
        self._pinned_paths: Any = None
        self._base_cache: dict[str, Any] = {}
        self._has_scenario = False
        # the server answers from several threads: one routing (and cache update) at a time
        self._lock = threading.RLock()
        self._lab_prev: tuple[float, dict[tuple[str, str], tuple[float, float]]] | None = None

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, target: Path | None, *, scenario: Path | None = None,
             lab_dir: Path | None = None) -> Twin:
        """Open a spec, a scenario, a run folder or (``target`` None, ``lab_dir``) the
        lab. Bad input: one-line SpecError naming what is allowed."""
        tw = cls()
        if target is None:
            if lab_dir is None:
                raise SpecError(Problem("TARGET", f"nothing to serve; {TARGETS}, or --lab"))
            tw._open_lab(Path(lab_dir))
            return tw
        target = Path(target)
        if target.is_dir():
            tw._open_run(target, scenario)
        elif target.is_file():
            if scenario is not None:
                raise SpecError(Problem("--scenario", "only with a run folder; allowed: "
                                        "serve RUN_DIR --scenario FILE"))
            tw._open_file(target)
        else:
            raise SpecError(Problem("TARGET", f"{target} does not exist; {TARGETS}"))
        return tw

    def _open_file(self, path: Path) -> None:
        from aifabric.spec.load import load_yaml

        data = load_yaml(path)
        if isinstance(data, dict) and "spec" in data:
            self._set_scenario(self._load_scenario(path, data), path)
            self.source = "sim" if self._is_sim(self.scenario) else "scenario"
        elif isinstance(data, dict) and ("topology" in data or "hosts" in data):
            from aifabric.spec import load_spec

            self._design_from_spec(load_spec(path), path)
        else:
            raise SpecError(Problem("TARGET", f"{path} is neither a spec (no topology:) nor "
                                    f"a scenario (no spec:); {TARGETS}", str(path)))
        self.mode = "design"

    @staticmethod
    def _load_scenario(path: Path, data: Any) -> Scenario:
        from aifabric.scenario import Scenario, load_scenario

        model: type[Scenario] = Scenario
        if any(k not in Scenario.model_fields for k in data):  # jobs, collectives, sim...
            from aifabric.sim.scenario import SimScenario

            model = SimScenario
        return load_scenario(path, model)

    @staticmethod
    def _is_sim(sc: Any) -> bool:
        """A SimScenario (without importing the simulators to ask)."""
        return sc is not None and "collectives" in type(sc).model_fields

    def _design_from_spec(self, spec: Any, path: Path) -> None:
        from aifabric.cli._common import build
        from aifabric.scenario import Scenario

        f = build(spec, path)
        gpus = f.ids(NodeKind.GPU, active_only=True)
        n = len(gpus)
        per_seg = int((f.nodes.segment[gpus] == f.nodes.segment[gpus[0]]).sum()) if n else 0
        gph = int(spec.hosts.gpus_per_host)
        shift = per_seg if 0 < per_seg < n else (gph if 0 < gph < n else 1)
        size = 1 << 20
        traffic = [{"pattern": "permutation", "gpus": "all", "shift": shift,
                    "size_bytes": size}] if n > 1 else []
        sc = Scenario.model_validate({"name": f.name, "spec": spec, "traffic": traffic})
        self.traffic_note = (f"permutation of all {n:,} active GPUs, GPU i -> GPU i + "
                             f"{shift:,} ({'one segment' if shift == per_seg else 'shift'}),"
                             f" {size:,} bytes each, routing {spec.routing.policy}")
        self.source = "spec"
        self._set_scenario(sc, path, fabric=f)

    def _set_scenario(self, sc: Scenario, path: Path | None, fabric: Fabric | None = None
                      ) -> None:
        """Build the fabric and route the base traffic of ``sc``."""
        from aifabric.cli._common import build

        self.scenario = sc
        self.name = sc.name
        f = fabric if fabric is not None else build(sc.spec, sc.spec_file or path)
        self.fabric = f
        self._policy = sc.policy
        if self._is_sim(sc):
            self._route_sim(sc, f)
        else:
            if not sc.traffic:
                raise SpecError(Problem("traffic", "nothing to route; allowed: a spec or a "
                                        "scenario with traffic", sc.file))
            from aifabric.routing.scenario import scenario_traffic

            tr = scenario_traffic(sc, f)
            self._flows, self._pinned, self._base_down = tr.flows, tr.pinned, tr.down
            self._pattern_offsets(sc, f)
        self._base = self._state(())

    def _pattern_offsets(self, sc: Scenario, f: Fabric) -> None:
        """Which traffic pattern each flow came from (patterns are built one after
        another, pattern i with seed + i: :func:`aifabric.routing.traffic.build_traffic`)."""
        from aifabric.routing.traffic import build_traffic

        counts = []
        for i, p in enumerate(sc.traffic):  # a handful of patterns
            fl, _ = build_traffic(f, [p], seed=sc.seed + i, base_dir=sc.base_dir)
            counts.append(len(fl))
        if sum(counts) == len(self._flows):
            self._pattern_of_flow = np.repeat(np.arange(len(counts)), counts)
            self._patterns = [f"traffic.{i} {p.pattern}" for i, p in enumerate(sc.traffic)]

    def _route_sim(self, sc: Any, f: Fabric) -> None:
        """A simulation scenario: the workload's connections as the simulators route them
        (:func:`aifabric.sim.paths.route_dag`), kept as flows so what-if can reroute."""
        from aifabric.routing.failover import failed_links
        from aifabric.routing.flows import make_flows
        from aifabric.sim.paths import connections
        from aifabric.sim.run import compile_workload, effective_routing

        try:
            wl = compile_workload(sc, f)
            self._base_down = failed_links(f, sc.failures, file=sc.file)
        except SpecError as err:
            raise err.with_file(sc.file) if sc.file else err from None
        dag = wl.dag
        self._dag = dag
        routing = effective_routing(sc, f)
        self._policy = routing
        src, dst, xconn = connections(dag)
        self._xconn = xconn
        moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
        conn_bytes = np.maximum(np.bincount(xconn, weights=moved, minlength=len(src)), 1)
        self._flows = make_flows(f, src, dst, conn_bytes.astype(np.int64),
                                 qps_per_connection=routing.qps_per_connection,
                                 nic_port_choice=routing.nic_port_choice,
                                 seed=int(getattr(sc, "seed", 0) or 0))
        if wl.pinned:  # pinned connections follow their paths: the simulators' own rows
            self._pinned_paths = wl.pinned
            self._reroute = False

    def _open_run(self, run: Path, scenario: Path | None) -> None:
        from aifabric.runinfo import RUN_JSON, read_record, scenario_from_record

        self.mode, self.run_dir, self.name = "run", run, run.name
        self.source = "run"
        rec = run / RUN_JSON
        sc = None
        if scenario is not None:  # the user's override: bad input is an error
            from aifabric.spec.load import load_yaml

            scenario = Path(scenario)
            if not scenario.is_file():
                raise SpecError(Problem("--scenario", f"{scenario} does not exist; allowed: "
                                        "the scenario the run was made from"))
            data = load_yaml(scenario)
            if not isinstance(data, dict) or "spec" not in data:
                raise SpecError(Problem("--scenario", f"{scenario} is not a scenario (no "
                                        "spec:); allowed: the scenario of the run"))
            sc = self._load_scenario(scenario, data)
            self.run_command = "simulate" if self._is_sim(sc) else "route"
        elif rec.is_file():
            try:
                doc = read_record(rec)
                self.run_command = doc["command"]
                sc = scenario_from_record(doc, file=str(rec))
            except SpecError as err:
                self.missing.append(f"{RUN_JSON} cannot be used ({err.problems[0]}); "
                                    f"{NO_SCENARIO}")
        else:
            self.missing.append(f"no {RUN_JSON}: {NO_SCENARIO}")
        self._has_scenario = sc is not None
        self._read_tables(run)
        if not self.tables and sc is None and not (run / "report.md").is_file() \
                and not (run / "report.json").is_file():
            raise SpecError(Problem("TARGET", f"{run} holds nothing a run writes (no "
                                    f"report, tables or {RUN_JSON}); {TARGETS}"))
        if sc is not None:
            try:
                self._set_scenario(sc, None)
            except (SpecError, KeyError, ValueError, TypeError, OSError) as err:
                if scenario is not None:
                    raise
                self.fabric, self.scenario, self._flows, self._dag = None, None, None, None
                why = err.problems[0] if isinstance(err, SpecError) else type(err).__name__
                self.missing.append(f"the run's scenario cannot be rebuilt ({why}); "
                                    f"{NO_SCENARIO}")
            else:
                self.name = f"{run.name} ({sc.name})"

    def _read_tables(self, run: Path) -> None:
        """The run's tables (csv or parquet); damaged or absent ones go to ``missing``."""
        from aifabric.telemetry import openmetrics as om

        cmd = self.run_command or ("route" if (run / "report.json").is_file()
                                   and not (run / "report.md").is_file() else "simulate")
        self.run_command = self.run_command or cmd
        report = RUN_REPORT[cmd]
        if not (run / report).is_file():
            self.missing.append(f"{report} (the run's report) is missing")
        wanted = RUN_TABLES[cmd]
        names = list(dict.fromkeys((*wanted, *om._COLUMNS)))
        for name in names:
            path = next((run / f"{name}.{e}" for e in ("csv", "parquet")
                         if (run / f"{name}.{e}").is_file()), None)
            if path is None:
                if name in wanted:
                    self.missing.append(f"table {name} (csv or parquet) is missing")
                continue
            try:
                if name in om._FAST:  # big numeric tables: the fast reader
                    reader = om._read_csv if path.suffix == ".csv" else om._read_parquet
                    self.tables[name] = reader(path, name, str(path))
                elif name == "flows":  # route's per-flow table: checked, not kept
                    _read_any(path, keep=False)
                elif cmd == "route" and self._has_scenario:  # loads come from the routing
                    self.tables[name] = _read_any(path, text=False)
                else:
                    self.tables[name] = _read_any(path)
            except SpecError as err:
                self.missing.append(f"table {path.name} is damaged ({err.problems[0].message})")
            except Exception as exc:  # a damaged table: say so, never a traceback
                self.missing.append(f"table {path.name} is damaged ({type(exc).__name__}: "
                                    f"{str(exc)[:120]})")

    def _open_lab(self, lab_dir: Path) -> None:
        from aifabric.lab import load_lab
        from aifabric.lab._system import LabError

        try:
            lab = load_lab(lab_dir)
        except LabError as err:
            raise SpecError(Problem("--dir", f"{err}; allowed: the folder of a running "
                                    "lab")) from None
        self.mode, self.source, self.lab_dir = "lab", "lab", Path(lab_dir)
        self.fabric = lab.fabric
        self.name = f"lab {lab.fabric.name}"
        self._base_down = np.zeros(lab.fabric.n_links, dtype=bool)
        self._lab = lab

    # --------------------------------------------------------------- routing
    def _need_fabric(self, what: str) -> Fabric:
        if self.fabric is None:
            raise SpecError(Problem(what, f"not available: {NO_SCENARIO}"))
        return self.fabric

    def _need_routing(self, what: str) -> _State:
        self._need_fabric(what)
        if self._flows is None:
            raise SpecError(Problem(what, "not available: nothing routed (the lab has no "
                                    "traffic model)"))
        return self._state(())

    def _norm(self, fail: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
        """The failure set as the user gave it: each name once, in their order (echoed
        back as ``failed`` / ``fail``)."""
        return tuple(dict.fromkeys(str(x).strip() for x in (fail or ())))

    def _key(self, fail: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
        """The failure set as a cache key: the same set in any order is one routing."""
        return tuple(sorted(self._norm(fail)))

    def _state(self, fail: tuple[str, ...]) -> _State:
        """The routing with failure set ``fail`` on top of the scenario's (cached)."""
        with self._lock:
            return self._state_locked(self._key(fail))

    def _state_locked(self, key: tuple[str, ...]) -> _State:
        if key in self._states:
            self._states.move_to_end(key)
            return self._states[key]
        from aifabric.routing.route import route

        f = self.fabric
        assert f is not None and self._base_down is not None
        down = self._base_down.copy()
        if key:
            if not self._reroute:
                raise SpecError(Problem("fail", "what-if is not available for a workload "
                                        "with pinned paths (they cannot move)"))
            down |= parse_failures(f, key)
        if not key and not self._reroute:
            routed = self._pinned_routed()
        else:
            seed = int(getattr(self.scenario, "seed", 0) or 0) if self._dag is not None else 0
            routed = route(f, self._flows, self._policy, failures=~down,
                           pinned=self._pinned, seed=seed)
        st = self._make_state(key, down, routed)
        self._states[key] = st
        if len(self._states) > CACHE + 1:  # the base stays
            for k in list(self._states):
                if k:
                    del self._states[k]
                    break
        return st

    def _pinned_routed(self) -> Routed:
        """The simulators' own paths (pinned connections included) as a Routed."""
        from aifabric.routing.route import Routed
        from aifabric.sim.paths import route_dag

        f = self.fabric
        sc = self.scenario
        assert f is not None and sc is not None
        paths, _ = route_dag(f, self._dag, self._policy, failures=sc.failures or None,
                             seed=int(getattr(sc, "seed", 0) or 0),
                             pinned=self._pinned_paths)
        inc = paths.incidence.tocsr()
        n = len(self._flows)
        assert inc.shape[0] == n, (inc.shape, n)
        return Routed(f, self._policy, self._flows, inc.indptr.astype(np.int64),
                      inc.indices.astype(np.int64), inc.data.astype(np.float64),
                      np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), ~self._base_down)

    def _make_state(self, key: tuple[str, ...], down: np.ndarray, routed: Routed) -> _State:
        f = routed.fabric
        by = routed.arc_bytes()
        nf = routed.arc_flows()
        cap = f.arcs[2]
        drain = np.divide(by * 8.0, cap, out=np.zeros_like(by), where=cap > 0)
        top = float(drain.max()) if len(drain) else 0.0
        util = drain / top if top > 0 else drain
        measured = False
        links = self.tables.get("links")
        if not key and self.run_command == "simulate" and links is not None \
                and "mean_util" in links:
            m = _measured_util(f, links)
            if m is not None:
                util, measured = m, True
        return _State(key, down, routed, by, nf, util, measured)

    # ------------------------------------------------------------------ views
    def info(self) -> dict[str, Any]:
        """What this twin is and what the page can show."""
        f = self.fabric
        fab = None
        if f is not None:
            n = f.nodes
            fab = {"name": f.name, "family": f.family,
                   "gpus": int((n.kind == NodeKind.GPU).sum()),
                   "hosts": int((n.kind == NodeKind.HOST).sum()),
                   "switches": int(f.is_switch.sum()), "links": int(f.n_links),
                   "segments": len(np.unique(n.segment[f.is_switch & (n.segment >= 0)])),
                   "pods": len(np.unique(n.pod[f.is_switch & (n.pod >= 0)])),
                   "planes": len(np.unique(n.plane[f.is_switch & (n.plane >= 0)]))}
        routed = f is not None and self._flows is not None
        views = ["topology"] if f is not None else []
        if routed or self.tables:
            views.append("heatmap")
        if routed:
            views += ["trace", "whatif"] if self._reroute else ["trace"]
        if self.run_dir is not None:
            views.append("run")
        if self.mode == "lab":
            views.append("lab")
        metrics: list[str] = []
        times: list[float] = []
        try:
            series = self.load()
            metrics, times = list(series.metrics), [float(x) for x in series.times_ns]
        except (SpecError, ImportError):
            pass
        return {"mode": self.mode, "name": self.name, "source": self.source,
                "fabric": fab, "views": views, "metrics": metrics, "times_ns": times,
                "missing": list(self.missing), "traffic": self.traffic_note or None,
                "collectives": self._dag is not None and bool(len(self._dag.collectives)),
                "whatif": routed and self._reroute}

    def load(self, fail: tuple[str, ...] = ()) -> LoadSeries:
        """Per-arc loads (cached per failure set): the run's own where no failure is
        added, else the routing model's."""
        with self._lock:
            return self._load_locked(self._key(fail))

    def _load_locked(self, key: tuple[str, ...]) -> LoadSeries:
        from aifabric.web import loads

        if key in self._loads:
            self._loads.move_to_end(key)
            return self._loads[key]
        series = None
        routed = self.fabric is not None and self._flows is not None
        if not key and self.run_command == "simulate" and self.tables:
            ta = self.transfer_arcs() if routed and self._dag is not None else None
            try:
                series = loads.from_run(self.tables, self.fabric, transfer_arcs=ta)
            except (SpecError, KeyError, ValueError, IndexError) as exc:
                # a damaged or foreign table: say so, show what the routing model says
                why = exc.problems[0] if isinstance(exc, SpecError) else type(exc).__name__
                note = f"the run's tables give no loads ({why})"
                if note not in self.missing:
                    self.missing.append(note + ("; the routing model's are shown" if routed
                                                else ""))
                if not routed:
                    raise SpecError(Problem("metric", note)) from None
        if series is not None:
            pass
        elif routed:
            series = loads.from_routed(self._state(key).routed)
        elif self.tables:
            try:
                series = loads.from_run(self.tables, None)
            except (KeyError, ValueError, IndexError) as exc:
                raise SpecError(Problem("metric", f"the run's tables give no loads "
                                        f"({type(exc).__name__})")) from None
        else:
            raise SpecError(Problem("metric", "no loads: nothing routed or measured here"))
        self._loads[key] = series
        if len(self._loads) > CACHE + 1:
            for k in list(self._loads):
                if k:
                    del self._loads[k]
                    break
        return series

    def transfer_arcs(self) -> sp.csr_matrix | None:
        """transfers x arcs: the fraction of each transfer's bytes on each arc (its
        connection's QPs share it evenly, as the simulators send it); None without a
        workload."""
        import scipy.sparse as sp

        if self._dag is None or self._xconn is None:
            return None
        st = self._state(())
        inc = st.routed.incidence
        conn = np.asarray(self._flows.conn, dtype=np.int64)
        n_conn = int(self._xconn.max()) + 1 if len(self._xconn) else 0
        nq = np.bincount(conn, minlength=n_conn).astype(np.float64)
        qf = sp.csr_matrix((1.0 / nq[conn], (conn, np.arange(len(conn)))),
                           shape=(n_conn, len(conn)))
        nx = len(self._xconn)
        x = sp.csr_matrix((np.ones(nx), (np.arange(nx), self._xconn)), shape=(nx, n_conn))
        return sp.csr_matrix(x @ qf @ inc)

    def alive(self, fail: tuple[str, ...] = ()) -> np.ndarray:
        """Bool per link: up with the scenario's failures and ``fail``."""
        f = self._need_fabric("fail")
        if self._flows is None:
            down = self._base_down if self._base_down is not None \
                else np.zeros(f.n_links, dtype=bool)
            key = self._norm(fail)
            return ~(down | parse_failures(f, key)) if key else ~down
        return ~self._state(fail).down

    def _metric(self, series: LoadSeries, metric: str | None) -> str:
        if metric is None or metric == "":
            return series.metrics[0]
        if metric not in series.metrics:
            raise SpecError(Problem("metric", f"unknown metric {metric!r}; allowed: "
                                    f"{', '.join(series.metrics)}"))
        return metric

    def _values(self, metric: str | None, t: int | None, fail: tuple[str, ...]
                ) -> tuple[LoadSeries, str, np.ndarray, int | None]:
        if self._flows is None and not self.tables:
            raise SpecError(Problem("metric", "no loads here (nothing routed or measured); "
                                    "allowed: the topology without a metric"))
        series = self.load(fail)
        n = len(series.times_ns)
        if self._norm(fail) and series is not self.load(()):
            # a run's measured series has no what-if: the routing model's metric, one step
            if metric and metric not in series.metrics and metric in self.load(()).metrics:
                metric = None
            if t is not None and not -1 <= t < n:
                t = None
        m = self._metric(series, metric)
        if t is not None and t != -1 and not 0 <= t < n:
            raise SpecError(Problem("t", f"{t}; allowed: -1 (the whole run) or 0..{n - 1}"))
        tt = None if t is None or t == -1 else int(t)
        return series, m, series.arc_values(m, tt), tt

    def topology(self, *, metric: str | None = None, t: int | None = None,
                 level: str = "auto", fail: tuple[str, ...] = ()) -> dict[str, Any]:
        """The aggregated graph (:func:`aifabric.web.topology.overview`) coloured by
        ``metric`` at step ``t``, with the failure set."""
        from aifabric.web.topology import overview

        f = self._need_fabric("topology")
        alive = self.alive(fail)
        vals, m, agg = self._colour(metric, t, fail)
        out = overview(f, vals, level=level, alive=alive, agg=agg)
        out.update({"metric": m, "failed": list(self._norm(fail)),
                    "links_down": int((~alive).sum())})
        return out

    def _colour(self, metric: str | None, t: int | None, fail: tuple[str, ...]
                ) -> tuple[np.ndarray | None, str | None, str]:
        """Per-arc values to colour a graph by (None where nothing is measured: the
        lab's topology)."""
        if self._flows is None and not self.tables and not metric:
            return None, None, "mean"
        series, m, vals, _ = self._values(metric, t, fail)
        return vals, m, series.agg.get(m, "mean")

    def segment(self, seg: int, *, metric: str | None = None, t: int | None = None,
                fail: tuple[str, ...] = ()) -> dict[str, Any]:
        """One segment's ToRs, hosts and ports (:func:`aifabric.web.topology.segment_view`)."""
        from aifabric.web.topology import segment_view

        f = self._need_fabric("segment")
        alive = self.alive(fail)
        vals, m, agg = self._colour(metric, t, fail)
        out = segment_view(f, int(seg), vals, alive=alive, agg=agg)
        out.update({"metric": m, "failed": list(self._norm(fail))})
        return out

    def heatmap(self, *, metric: str | None = None, t: int | None = None,
                fail: tuple[str, ...] = (), k: int = 20) -> dict[str, Any]:
        """Per-tier statistics of ``metric`` at ``t``, the ``k`` hottest arcs, the tier
        series over time. A tier's ``mean`` is over all its (alive) arcs; ``active``
        counts those with a value > 0 and ``mean_active`` is the mean over them — the
        figure report.md gives ("links that carried traffic")."""
        if not 1 <= int(k) <= 1000:
            raise SpecError(Problem("k", f"{k}; allowed: 1..1000"))
        series, m, vals, tt = self._values(metric, t, fail)
        f = self.fabric
        tiers = []
        alive = self.alive(fail) if f is not None else None
        if f is not None:
            names = _arc_tiers(f)
            ok = np.repeat(alive, 2)
            kinds = f.links.kind.astype(np.int64)
            for kd in np.unique(kinds):  # a handful of tiers
                for d, dname in ((0, "up"), (1, "down")):
                    sel = np.zeros(2 * f.n_links, dtype=bool)
                    sel[2 * np.flatnonzero(kinds == kd) + d] = True
                    sel &= ok
                    if not sel.any():
                        continue
                    v = vals[sel]
                    act = v[v > 0]  # the arcs that carried traffic (report.md's "links")
                    tiers.append({"tier": str(names[np.flatnonzero(sel)[0]]),
                                  "kind": LinkKind(int(kd)).label, "direction": dname,
                                  "arcs": int(sel.sum()), "mean": float(v.mean()),
                                  "active": len(act),
                                  "mean_active": float(act.mean()) if len(act) else 0.0,
                                  "p99": float(np.percentile(v, 99)),
                                  "max": float(v.max())})
        return {"metric": m, "t": -1 if tt is None else tt,
                "times_ns": [float(x) for x in series.times_ns], "tiers": tiers,
                "hottest": series.hottest(f, m, tt, k=int(k), alive=alive),
                "series": series.tier_series(f, m)}

    def search(self, q: str) -> list[dict[str, Any]]:
        """Nodes, ports and IPs matching ``q`` (:func:`aifabric.web.topology.search`)."""
        from aifabric.web.topology import search

        return search(self._need_fabric("q"), q)

    # ---------------------------------------------------------------- tracing
    def traces(self) -> dict[str, Any]:
        """What can be traced: jobs and collectives (a simulation scenario or run), the
        traffic patterns (a route scenario or a spec)."""
        out: dict[str, Any] = {"jobs": [], "collectives": [], "patterns": []}
        if self.fabric is None or self._flows is None:
            return out
        dag = self._dag
        if dag is not None:
            coll_t = self.tables.get("collectives", {})
            times = {str(n): t for n, t in zip(coll_t.get("collective", []),
                                               coll_t.get("time_ns", []), strict=False)}
            for j, name in enumerate(dag.jobs):  # jobs: a handful
                out["jobs"].append({"id": j, "name": name,
                                    "collectives": sum(c.job == j for c in dag.collectives)})
            for i, c in enumerate(dag.collectives):
                t = times.get(c.name)
                out["collectives"].append({
                    "id": i, "name": c.name, "job": dag.jobs[c.job] if c.job >= 0 else "",
                    "op": c.op, "gpus": int(c.n_gpus), "size_bytes": int(c.size_bytes),
                    "time_ns": None if t is None or not np.isfinite(t) else float(t)})
        out["patterns"] = [{"id": i, "name": n} for i, n in enumerate(self._patterns)]
        return out

    def _lookup(self, text: str | int, names: list[str], what: str) -> int:
        s = str(text).strip()
        if s in names:
            return names.index(s)
        if s.isdigit() and int(s) < len(names):
            return int(s)
        shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        raise SpecError(Problem(what, f"no {what} {s[:80]!r}; allowed: an id 0..{len(names) - 1}"
                                f" or a name ({shown})" if names else
                                f"no {what} {s[:80]!r}; allowed: none here"))

    def _gpu(self, f: Fabric, name: str, what: str) -> int:
        s = str(name).strip()
        if not f.has_node(s) or f.nodes.kind[f.node_id(s)] != NodeKind.GPU:
            raise SpecError(Problem(what, f"no GPU called {s[:80]!r}; allowed: GPU names "
                                    f"like {f.nodes.name[f.ids(NodeKind.GPU)[0]]}"))
        return f.node_id(s)

    def _select(self, collective: str | int | None, job: str | int | None,
                src: str | None, dst: str | None, fail: tuple[str, ...]
                ) -> tuple[Routed, np.ndarray, str, np.ndarray | None]:
        """The routed flows a trace follows: (routing, flow rows, what they are, the
        selected transfers as a bool per transfer — None where whole flows are selected:
        a GPU pair, a traffic pattern). A collective's (a job's) connections also carry
        other collectives' transfers (a job's DP buckets and iterations reuse the same
        GPU pairs): its bytes come from its own transfers (:meth:`_flow_bytes`)."""
        self._need_routing("trace")
        st = self._state(fail)
        f = st.routed.fabric
        given = [x is not None and str(x) != "" for x in (collective, job, src)]
        if sum(given) != 1 or (src is not None and str(src) != "") != \
                (dst is not None and str(dst) != ""):
            raise SpecError(Problem("trace", "give exactly one of collective, job, or a GPU "
                                    "pair src and dst"))
        conn = np.asarray(self._flows.conn, dtype=np.int64)
        dag = self._dag
        if collective is not None and str(collective) != "":
            if dag is not None:
                names = [c.name for c in dag.collectives]
                c = self._lookup(collective, names, "collective")
                mine = dag.stage_coll[dag.xfer_stage] == c
                rows = np.flatnonzero(np.isin(conn, np.unique(self._xconn[mine])))
                return st.routed, rows, f"collective {names[c]}", mine
            p = self._lookup(collective, self._patterns, "collective")
            assert self._pattern_of_flow is not None
            return (st.routed, np.flatnonzero(self._pattern_of_flow == p), self._patterns[p],
                    None)
        if job is not None and str(job) != "":
            if dag is None:
                raise SpecError(Problem("job", "no jobs here; allowed: a simulation scenario "
                                        "or run with jobs"))
            j = self._lookup(job, list(dag.jobs), "job")
            mine = dag.stage_job[dag.xfer_stage] == j
            rows = np.flatnonzero(np.isin(conn, np.unique(self._xconn[mine])))
            return st.routed, rows, f"job {dag.jobs[j]}", mine
        s, d = self._gpu(f, str(src), "src"), self._gpu(f, str(dst), "dst")
        fl = st.routed.flows
        rows = np.flatnonzero((fl.src_gpu == s) & (fl.dst_gpu == d))
        what = f"{f.nodes.name[s]} -> {f.nodes.name[d]}"
        if len(rows) or s == d:
            return st.routed, rows, what, None
        # a pair the traffic does not hold: routed alone, as the switches would
        from aifabric.routing.flows import make_flows
        from aifabric.routing.route import route

        probe = make_flows(f, np.array([s]), np.array([d]), 1 << 20,
                           qps_per_connection=self._policy.qps_per_connection,
                           nic_port_choice=self._policy.nic_port_choice)
        r = route(f, probe, self._policy, failures=~st.down)
        return r, np.arange(len(probe)), what + " (not in the traffic: routed alone)", None

    def trace_arcs(self, *, collective: str | int | None = None, job: str | int | None = None,
                   src: str | None = None, dst: str | None = None,
                   fail: tuple[str, ...] = ()) -> np.ndarray:
        """Sorted unique arcs the selected flows use in the routing model (sprayed flows:
        every arc with a fraction > 0) — exactly the edges :meth:`trace` draws."""
        routed, rows, _, _ = self._select(collective, job, src, dst, fail)
        return _rows_arcs(routed, rows)

    def _flow_bytes(self, routed: Routed, rows: np.ndarray, xsel: np.ndarray | None
                    ) -> np.ndarray:
        """Per flow of ``routed``: the bytes the selection puts on it. Selected transfers
        (``xsel``): each transfer's bytes (repeats included) split evenly over its
        connection's QPs, as the simulators send them and ``collective_links`` counts
        them; otherwise the selected flows' whole sizes."""
        out = np.zeros(len(routed.flows))
        if xsel is None:
            out[rows] = routed.flows.size_bytes[rows]
            return out
        dag, xconn = self._dag, self._xconn
        assert dag is not None and xconn is not None
        conn = np.asarray(routed.flows.conn, dtype=np.int64)
        n_conn = max(int(xconn.max()) + 1 if len(xconn) else 0,
                     int(conn.max()) + 1 if len(conn) else 0)
        moved = (dag.size_bytes * dag.repeat[dag.xfer_stage]).astype(np.float64)
        cb = np.bincount(xconn[xsel], weights=moved[xsel], minlength=n_conn)
        nq = np.bincount(conn, minlength=n_conn).astype(np.float64)
        return cb[conn] / np.maximum(nq[conn], 1.0)

    def trace(self, *, collective: str | int | None = None, job: str | int | None = None,
              src: str | None = None, dst: str | None = None,
              fail: tuple[str, ...] = (), max_edges: int = MAX_TRACE_EDGES
              ) -> dict[str, Any]:
        """The paths of a collective, a job or a GPU pair, hop by hop with each hop's
        load; the bottleneck (the most utilized arc on them) and who shares it.

        ``edges`` are the arcs the flows use (:meth:`trace_arcs`), at most ``max_edges``
        of them: past that (a whole traffic pattern uses most of a pod's 190K arcs) the
        bottleneck, the arcs of the paths listed in ``hops`` and then the heaviest arcs
        (the selection's bytes) are sent, and ``truncated`` says how many of how many.
        ``paths`` lists the first flows (and one through the bottleneck), ``hops`` their
        paths hop by hop: each hop's link, tier, load (bytes, utilization, flows: the
        whole traffic's on that arc) and this flow's bytes on it."""
        if isinstance(max_edges, bool) or not isinstance(max_edges, (int, np.integer)) \
                or not 1 <= int(max_edges) <= 10 * MAX_TRACE_EDGES:
            raise SpecError(Problem("max_edges", f"{max_edges!r}; allowed: 1.."
                                    f"{10 * MAX_TRACE_EDGES}"))
        self._need_routing("trace")
        st = self._state(fail)
        routed, rows, what, xsel = self._select(collective, job, src, dst, fail)
        f = routed.fabric
        arcs = _rows_arcs(routed, rows)
        names = f.nodes.name
        a_src, a_dst, cap = f.arcs
        tiers = _arc_tiers(f)
        # the selection's bytes (its own transfers', not its connections') and flows per arc
        wflow = self._flow_bytes(routed, rows, xsel)
        sel = np.zeros(len(routed.flows), dtype=bool)
        sel[rows] = True
        ent = routed.entry_flow
        keep = sel[ent] & (routed.fractions > 0)
        w = routed.fractions[keep] * wflow[ent[keep]]
        mine_b = np.bincount(routed.arcs[keep], weights=w, minlength=routed.n_arcs)
        mine_f = np.bincount(routed.arcs[keep], minlength=routed.n_arcs)
        util = st.util
        # the bottleneck: most utilized, then most bytes, then the lowest arc id
        b = -1
        if len(arcs):
            b = int(arcs[np.lexsort((arcs, -st.arc_bytes[arcs], -util[arcs]))[0]])
        # the paths shown hop by hop: the first flows, and one through the bottleneck
        shown = rows[:PATH_ROWS]
        if b >= 0:
            on_b = np.unique(ent[keep][routed.arcs[keep] == b])
            if len(on_b) and not np.isin(on_b, shown).any():
                shown = np.r_[shown, on_b[:1]]
        # the edges sent: all of them, or (past max_edges) the bottleneck, the arcs of
        # the listed paths, then the heaviest
        total = len(arcs)
        sent = arcs
        if total > max_edges:
            first = np.unique(np.concatenate(
                [routed.arcs[routed.ptr[i]:routed.ptr[i + 1]] for i in shown.tolist()]
                + [np.array([b] if b >= 0 else [], dtype=np.int64)])).astype(np.int64)
            first = first[np.isin(first, arcs)]
            if b >= 0:  # the bottleneck first, whatever the cap
                first = np.r_[b, first[first != b]]
            rest = arcs[~np.isin(arcs, first)]
            rest = rest[np.lexsort((rest, -mine_b[rest]))]
            sent = np.sort(np.r_[first, rest][:max_edges])
        edges = [{"id": f"a:{a}", "arc": int(a), "link": int(a // 2),
                  "source": f"n:{int(a_src[a])}", "target": f"n:{int(a_dst[a])}",
                  "tier": str(tiers[a]), "bytes": float(mine_b[a]),
                  "total_bytes": float(st.arc_bytes[a]), "flows_here": int(mine_f[a]),
                  "flows_total": int(st.arc_flows[a]), "capacity_gbps": float(cap[a]),
                  "value": float(util[a]), "utilization": float(util[a]),
                  "bottleneck": int(a) == b} for a in sent.tolist()]
        nodes = _trace_nodes(f, np.unique(np.r_[a_src[sent], a_dst[sent]]))
        hops, paths = [], []
        fl = routed.flows
        frac = routed.fractions
        base = routed is st.routed
        for i in shown.tolist():  # the first few paths (51 at most)
            lo, hi = int(routed.ptr[i]), int(routed.ptr[i + 1])
            pa = routed.arcs[lo:hi]
            fb = frac[lo:hi] * float(wflow[i])
            hops.append([{"from": str(names[a_src[a]]), "to": str(names[a_dst[a]]),
                          "arc": int(a), "link": int(a // 2), "tier": str(tiers[a]),
                          "value": float(util[a]), "utilization": float(util[a]),
                          "bytes": float(st.arc_bytes[a]), "flows": int(st.arc_flows[a]),
                          "flow_bytes": float(x), "bottleneck": int(a) == b}
                         for a, x in zip(pa.tolist(), fb.tolist(), strict=True)])
            paths.append({"flow": int(i), "src": str(names[fl.src_gpu[i]]),
                          "dst": str(names[fl.dst_gpu[i]]), "bytes": float(wflow[i]),
                          "hops": hi - lo, "bottleneck": bool((pa == b).any())})
        bott = self._bottleneck(st, b, self._selected_names(rows if base else None, xsel)) \
            if b >= 0 else None
        return {"what": what, "flows": len(rows),
                "bytes": float(wflow[rows].sum()),
                "utilization_measured": st.measured, "nodes": nodes, "edges": edges,
                "truncated": {"edges_total": total, "edges_sent": len(sent)}
                if len(sent) < total else None,
                "paths": paths, "hops": hops, "bottleneck": bott,
                "failed": list(self._norm(fail))}

    def _bottleneck(self, st: _State, arc: int, exclude: set[str]) -> dict[str, Any]:
        """An arc's load and the flows of the whole traffic that share it; ``collectives``:
        every collective (pattern) with bytes on it but those in ``exclude`` (the traced
        ones) — a traced DP bucket's arc lists the job's other buckets."""
        r = st.routed
        f = r.fabric
        names = f.nodes.name
        a_src, a_dst, _ = f.arcs
        on = r.arcs == arc
        fl_on = r.entry_flow[on]
        b_on = r.fractions[on] * r.flows.size_bytes[fl_on]
        order = np.lexsort((fl_on, -b_on))[:SHARING_ROWS]
        shown = fl_on[order]  # label only the flows listed
        coll, job = self._flow_labels(shown)
        sharing = [{"flow": int(fl), "src": str(names[r.flows.src_gpu[fl]]),
                    "dst": str(names[r.flows.dst_gpu[fl]]),
                    "collective": ", ".join(cs), "collectives": cs,
                    "job": ", ".join(js), "bytes": float(b_on[i])}
                   for fl, i, cs, js in zip(shown.tolist(), order.tolist(), coll, job,
                                            strict=True)]
        others = [c for c in self._flow_collectives_all(fl_on) if c and c not in exclude]
        return {"arc": arc, "link": arc // 2, "from": str(names[a_src[arc]]),
                "to": str(names[a_dst[arc]]), "tier": str(_arc_tiers(f)[arc]),
                "utilization": float(st.util[arc]), "bytes": float(st.arc_bytes[arc]),
                "flows": len(fl_on), "sharing": sharing, "collectives": others[:100]}

    def _selected_names(self, rows: np.ndarray | None, xsel: np.ndarray | None) -> set[str]:
        """The collectives (patterns) a trace follows: those of its transfers, else those
        of its flows (a traffic pattern); none for a pair routed alone."""
        if xsel is not None and self._dag is not None:
            dag = self._dag
            c = np.unique(dag.stage_coll[dag.xfer_stage[xsel]])
            return {dag.collectives[k].name for k in c.tolist() if k >= 0}
        if rows is None or self._dag is not None:
            return set()  # a GPU pair of a workload: every collective on it is another's
        return set(self._flow_collectives_all(rows))

    def _conn_collectives(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR (ptr per connection, collective ids) of the collectives whose transfers use
        each connection, sorted by id (computed once)."""
        def make() -> tuple[np.ndarray, np.ndarray]:
            dag, x = self._dag, self._xconn
            assert dag is not None and x is not None
            nc = max(len(dag.collectives), 1) + 1
            n_conn = int(x.max()) + 1 if len(x) else 0
            c = dag.stage_coll[dag.xfer_stage].astype(np.int64)
            pair = np.unique(x.astype(np.int64) * nc + (c + 1))  # +1: -1 (none) sorts first
            pc, cc = pair // nc, pair % nc - 1
            keep = cc >= 0
            pc, cc = pc[keep], cc[keep]
            ptr = np.searchsorted(pc, np.arange(n_conn + 1))
            return ptr, cc
        return self._base_extra("conn_collectives", make)  # type: ignore[no-any-return]

    def _flow_labels(self, flows: np.ndarray) -> tuple[list[list[str]], list[list[str]]]:
        """Per flow (a few: the listed ones): every collective (pattern) whose transfers
        its connection carries, and their jobs."""
        if self._dag is not None:
            dag = self._dag
            ptr, cc = self._conn_collectives()
            conn = np.asarray(self._flows.conn, dtype=np.int64)[flows]
            colls, jobs = [], []
            for k in conn.tolist():  # the listed flows: 50 at most
                ids = cc[ptr[k]:ptr[k + 1]].tolist() if k + 1 < len(ptr) else []
                colls.append([dag.collectives[i].name for i in ids])
                jobs.append(list(dict.fromkeys(
                    dag.jobs[dag.collectives[i].job] for i in ids
                    if dag.collectives[i].job >= 0)))
            return colls, jobs
        if self._pattern_of_flow is not None:
            return [[self._patterns[k]] for k in self._pattern_of_flow[flows].tolist()], \
                [[] for _ in range(len(flows))]
        return [[] for _ in range(len(flows))], [[] for _ in range(len(flows))]

    def _flow_collectives_all(self, flows: np.ndarray) -> list[str]:
        """Names of the collectives (patterns) whose transfers use ``flows``' connections."""
        if self._dag is not None:
            dag = self._dag
            conn = np.unique(np.asarray(self._flows.conn, dtype=np.int64)[flows])
            xs = np.isin(self._xconn, conn)
            c = np.unique(dag.stage_coll[dag.xfer_stage[xs]])
            return [dag.collectives[k].name for k in c.tolist() if k >= 0]
        if self._pattern_of_flow is not None:
            return [self._patterns[k] for k in np.unique(self._pattern_of_flow[flows]).tolist()]
        return []

    # ---------------------------------------------------------------- what-if
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

    def _base_extra(self, name: str, make: Any) -> Any:
        """A figure of the base routing, computed once."""
        with self._lock:
            if name not in self._base_cache:
                self._base_cache[name] = make()
            return self._base_cache[name]

    # -------------------------------------------------------------------- lab
    def lab_state(self) -> dict[str, Any]:
        """The running lab now: links (state, rates from counter deltas between calls),
        BGP sessions, which targets answered, the injected failures."""
        if self.mode != "lab":
            raise SpecError(Problem("lab", "not serving a lab; allowed: serve --lab"))
        from aifabric.telemetry.exporter import LabCollector

        t0 = time.perf_counter()
        if self._collector is None:
            self._collector = LabCollector(self.lab_dir, probes=0)
        sc = self._collector.read()
        now = time.monotonic()
        counters: dict[tuple[str, str], tuple[float, float]] = {}
        links = []
        prev = self._lab_prev
        port_of = self._collector.port_of  # (device, iface) -> labels of a fabric cable
        for dev in sorted(sc.links):  # the lab's devices: tens
            for lk in sc.links[dev]:
                ifname = str(lk.get("ifname", ""))
                labels = port_of.get((dev, ifname))
                if labels is None:
                    continue  # lo, bridges: not a cable of the fabric
                st = lk.get("stats64") or lk.get("stats") or {}
                rx = float((st.get("rx") or {}).get("bytes", 0))
                tx = float((st.get("tx") or {}).get("bytes", 0))
                counters[(dev, ifname)] = (rx, tx)
                rate = (0.0, 0.0)
                if prev is not None and (dev, ifname) in prev[1] and now > prev[0]:
                    p_rx, p_tx = prev[1][(dev, ifname)]
                    dt = now - prev[0]
                    rate = (max(rx - p_rx, 0.0) * 8 / dt, max(tx - p_tx, 0.0) * 8 / dt)
                links.append({"device": dev, "iface": ifname,
                              "up": lk.get("operstate") == "UP",
                              "rx_bps": rate[0], "tx_bps": rate[1], "peer": str(labels[2])})
        self._lab_prev = (now, counters)
        bgp = [{"switch": sw, "peer": peer, "state": str(v.get("state", ""))}
               for sw in sorted(sc.bgp) for peer, v in sorted(sc.bgp[sw].items())]
        return {"links": links, "bgp": bgp, "up": dict(sc.up), "failures": sc.failures,
                "seconds": round(time.perf_counter() - t0, 4)}

    def close(self) -> None:
        """Release the lab collector's threads (lab mode)."""
        if self._collector is not None:
            self._collector.close()
            self._collector = None


# ------------------------------------------------------------------ module helpers
def _rows_arcs(routed: Routed, rows: np.ndarray) -> np.ndarray:
    """Sorted unique arcs of the given flows' paths (fraction > 0)."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    sel = np.zeros(len(routed.flows), dtype=bool)
    sel[rows] = True
    keep = sel[routed.entry_flow] & (routed.fractions > 0)
    return np.unique(routed.arcs[keep]).astype(np.int64)


def _trace_nodes(f: Fabric, ids: np.ndarray) -> list[dict[str, Any]]:
    """The nodes of a trace, laid out like the LLD: cores on top, GPUs at the bottom,
    left to right by pod, segment, plane, rail, host."""
    n = f.nodes
    kind = n.kind[ids].astype(np.int64)
    # rows: core 0, agg 1, tor 2, NIC port 3, host (NVSwitch) 4, GPU 5
    level = np.array([5, 4, 3, 2, 1, 0])[kind]
    order = np.lexsort((ids, n.index[ids], n.side[ids], n.host[ids], n.rail[ids],
                        n.plane[ids], n.segment[ids], n.pod[ids], level))
    x = np.zeros(len(ids))
    lv = level[order]
    start = np.r_[0, np.flatnonzero(lv[1:] != lv[:-1]) + 1] if len(lv) else np.zeros(0, int)
    rank = np.arange(len(lv)) - np.repeat(start, np.diff(np.r_[start, len(lv)]))
    x[order] = rank * 60.0
    # short labels per row (tor-s00-r0-a -> s00-r0-a when the row spans segments): a row
    # of 16 ToR names side by side stays readable; the full name is ``name``
    from aifabric.web.topology import _short_labels

    names = n.name[ids].astype(str)
    label = names.astype(object)
    for lv_ in np.unique(level).tolist():  # six rows at most
        m = np.flatnonzero(level == lv_)
        label[m] = _short_labels(names[m].tolist())
    return [{"id": f"n:{int(i)}", "node": int(i), "name": str(n.name[i]), "label": str(lb),
             "kind": str(_KIND[k]), "tier": int(n.tier[i]), "x": float(xx),
             "y": float(lvl * 120.0)}
            for i, lb, k, xx, lvl in zip(ids.tolist(), label.tolist(), kind.tolist(),
                                         x.tolist(), level.tolist(), strict=True)]


def _tiers(stats: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"tier": k, **v} for k, v in stats["tiers"].items()]


def _measured_util(f: Fabric, links: dict[str, np.ndarray]) -> np.ndarray | None:
    """Per arc: a simulated run's mean utilization (``links`` table; 0 where absent)."""
    try:
        lid = np.asarray(links["link"], dtype=np.int64)
        d = np.asarray(links["direction"]).astype(str)
        mu = np.asarray(links["mean_util"], dtype=np.float64)
    except (KeyError, ValueError):
        return None
    if len(lid) and (lid.max() >= f.n_links or lid.min() < 0):
        return None
    out = np.zeros(2 * f.n_links)
    out[2 * lid + (d == "down")] = np.nan_to_num(mu)
    return out


def _read_any(path: Path, *, keep: bool = True, text: bool = True
              ) -> dict[str, np.ndarray]:
    """Every column of a table (numbers as float64, text as objects; ``text`` False:
    numbers only; ``keep`` False: nothing, the file is only checked); a ragged
    (truncated) CSV raises."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        out = {}
        for c in t.column_names:
            v = t.column(c).to_numpy(zero_copy_only=False)
            out[c] = v.astype(np.float64) if v.dtype.kind in "biuf" else v.astype(object)
        return out
    try:
        from pyarrow import csv as pacsv
    except ImportError:  # the parquet extra is not installed: Python's reader
        pacsv = None
    if pacsv is not None:  # multi-threaded, 10x the csv module; ragged rows raise too
        import pyarrow as pa
        import pyarrow.compute as pc

        t = pacsv.read_csv(path)
        out = {}
        for c in t.column_names if keep else ():
            col = t.column(c)
            if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) \
                    or pa.types.is_boolean(col.type):
                out[c] = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
            elif text:
                col = pc.fill_null(col.cast(pa.string()), "")
                out[c] = np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
        return out
    import csv

    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise ValueError("empty file, no header")
    header, body = rows[0], rows[1:]
    bad = [i for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        raise ValueError(f"row {bad[0] + 2} has {len(body[bad[0]])} fields, the header "
                         f"{len(header)} (cut short?)")
    cols = list(zip(*body, strict=True)) if body else [()] * len(header)
    return {h: _column(c) for h, c in zip(header, cols, strict=True)}


def _column(values: tuple[str, ...]) -> np.ndarray:
    """A CSV column as numbers where every cell is one (blank: NaN), else as text."""
    try:
        return np.array([float(v) if v else np.nan for v in values], dtype=np.float64)
    except ValueError:
        return np.array(values, dtype=object)
