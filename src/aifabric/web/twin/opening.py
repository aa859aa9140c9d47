"""Opening a twin (:meth:`Opening.open`): a spec, a scenario, a run folder or the lab.

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
  a damaged folder never raises: ``missing`` says what is absent;
* the **lab** (``lab_dir``): the lab's own fabric and its live counters.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, NodeKind
from aifabric.web.twin.core import NO_SCENARIO, TwinCore

if TYPE_CHECKING:
    from aifabric.routing.scenario import Scenario

__all__ = ["RUN_REPORT", "RUN_TABLES", "TARGETS", "Opening"]

TARGETS = ("allowed: a fabric spec (YAML), a scenario (YAML with a top-level spec:), or "
           "a run folder (simulate --out, route --out)")
#: a simulate folder's tables and a route folder's (any format)
RUN_TABLES = {"simulate": ("collectives", "jobs", "transfers", "links", "timeline"),
              "route": ("links", "flows")}
RUN_REPORT = {"simulate": "report.md", "route": "report.json"}


class Opening(TwinCore):
    """How a twin is opened and its base traffic routed."""

    @classmethod
    def open(cls, target: Path | None, *, scenario: Path | None = None,
             lab_dir: Path | None = None) -> Self:
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
        from aifabric.routing.scenario import Scenario, load_scenario

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
        from aifabric.api import build_fabric
        from aifabric.routing.scenario import Scenario

        f = build_fabric(spec, file=path)
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
        from aifabric.api import build_fabric

        self.scenario = sc
        self.name = sc.name
        f = fabric if fabric is not None else build_fabric(sc.spec, file=sc.spec_file or path)
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
        names = list(dict.fromkeys((*wanted, *om.COLUMNS)))
        for name in names:
            path = next((run / f"{name}.{e}" for e in ("csv", "parquet")
                         if (run / f"{name}.{e}").is_file()), None)
            if path is None:
                if name in wanted:
                    self.missing.append(f"table {name} (csv or parquet) is missing")
                continue
            try:
                if name in om.FAST:  # big numeric tables: the fast reader
                    self.tables[name] = om.read_table(path, name, str(path))
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
        from aifabric.lab import LabError, load_lab

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
