"""Per-arc loads over time for the web view's heatmap, topology colours and hottest
links: from a routed design, a flow run or a packet run.

A :class:`LoadSeries` holds, for the arcs that carried something, one value per time
step and metric, and a whole-run aggregate. Arc ``2l`` is link ``l`` up (a -> b), ``2l+1``
down, as in :mod:`aifabric.topology.fabric`. Sources:

- :func:`from_routed` (a design routed by :func:`aifabric.routing.route`): one step,
  ``bytes`` and ``flows`` per arc;
- :func:`from_run` on a flow run folder's tables: with each transfer's arcs
  (:func:`transfer_arcs`, or :func:`run_transfer_arcs` from the scenario) the bytes of
  every transfer are spread evenly over its ``[start, end]`` on its arcs and binned into
  at most :data:`MAX_STEPS` equal steps over the makespan, so that a link's utilization
  averaged over the steps is the ``links`` table's ``mean_util`` (bytes / capacity x
  makespan). Without them: ``mean_util``, ``peak_util`` and ``bytes`` of the ``links``
  table as one step, and the tier curves of the ``timeline`` table;
- a packet run's ``packet_queues`` table (sampled per port and traffic class, counters
  cumulative, as :mod:`aifabric.telemetry.openmetrics` reads and exports them): queue
  depth (max over traffic classes and over the samples of a step), ECN marks, PFC pause
  frames sent and drops per step (deltas of the cumulative counters) and utilization
  (bytes sent in the step / what the link carries in it); at most :data:`MAX_STEPS`
  steps, each a run of consecutive samples;
- a ``route --out`` folder's ``links`` table (``bytes``, ``flows`` per arc): one step.

Run folders are read with :func:`read_tables`: :func:`aifabric.telemetry.openmetrics.
read_run` (the same reader as ``aifabric metrics``) plus the ``links`` columns it does
not need. Everything is vectorised: per (arc, step) matrices, no loop over arcs, rows or
transfers.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind

if TYPE_CHECKING:
    import scipy.sparse as sp

    from aifabric.routing.route import Routed

__all__ = ["MAX_STEPS", "METRIC_AGG", "LoadSeries", "from_routed", "from_run", "read_tables",
           "run_transfer_arcs", "transfer_arcs"]

#: most time steps a series has (bins of a flow run, groups of packet samples)
MAX_STEPS = 200
#: most (arc x step) cells kept per metric: fewer steps for very large runs
MAX_CELLS = 8_000_000
#: how each metric combines over arcs (tiers, topology groups) and over time
METRIC_AGG = {"bytes": "sum", "flows": "sum", "utilization": "mean",
              "peak_utilization": "max", "queue_bytes": "max", "ecn_marks": "sum",
              "pfc_pauses": "sum", "drops": "sum"}

Table = dict[str, np.ndarray]
_LINK_EXTRA = ("bytes", "mean_util", "peak_util", "flows")


# --------------------------------------------------------------------- the series
@dataclass
class LoadSeries:
    """Loads of the arcs of one source, per time step and whole-run.

    ``rows`` are the arcs with data (sorted); ``steps[m]`` is (rows, steps) float32 and
    ``whole[m]`` the whole-run value per row (mean utilization over the run, total bytes
    or counts, the deepest queue). Arcs not in ``rows`` are 0."""

    metrics: list[str]
    times_ns: np.ndarray  # start of each step
    end_ns: np.ndarray  # end of each step
    n_arcs: int
    rows: np.ndarray
    steps: dict[str, np.ndarray]
    whole: dict[str, np.ndarray]
    agg: dict[str, str]
    source: str  # "design" | "flow" | "packet" | "route"
    capacity_gbps: np.ndarray | None = None  # per row, where known
    labels: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None  # f is None
    timeline: Table | None = None  # the run's tier timeline (flow runs without paths)
    notes: list[str] = field(default_factory=list)

    @property
    def n_steps(self) -> int:
        return len(self.times_ns)

    def _check(self, metric: str, t: int | None) -> int | None:
        if metric not in self.metrics:
            raise SpecError(Problem("metric", f"{metric!r} is not measured here; allowed: "
                                    + ", ".join(self.metrics)))
        if t is None:
            return None
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise SpecError(Problem("t", f"{t!r} is not a step; allowed: -1 (whole run) or "
                                    f"0..{self.n_steps - 1}"))
        if t == -1:
            return None
        if not 0 <= t < self.n_steps:
            raise SpecError(Problem("t", f"{t} is not a step; allowed: -1 (whole run) or "
                                    f"0..{self.n_steps - 1}"))
        return int(t)

    def row_values(self, metric: str, t: int | None) -> np.ndarray:
        """Values of ``rows`` (float64) at step ``t`` (None / -1: whole run)."""
        step = self._check(metric, t)
        if step is None or self.n_steps == 1:  # one step: the whole run, in float64
            return self.whole[metric].astype(np.float64)
        return self.steps[metric][:, step].astype(np.float64)

    def arc_values(self, metric: str, t: int | None) -> np.ndarray:
        """One value per arc (float64, 0 where nothing was measured)."""
        out = np.zeros(self.n_arcs)
        out[self.rows] = self.row_values(metric, t)
        return out

    # ----------------------------------------------------------------- tiers
    def _row_tiers(self, f: Fabric | None) -> tuple[np.ndarray, list[str]]:
        """Tier x direction group of each row and the group names (``access up``...)."""
        if f is not None:
            kind = f.links.kind[self.rows // 2].astype(np.int64)
            names = [f"{k.label} {d}" for k in LinkKind for d in ("up", "down")]
            return kind * 2 + self.rows % 2, names
        if self.labels is None:
            return np.zeros(len(self.rows), np.int64), ["all"]
        lab = self.labels(self.rows)
        tier = np.char.add(np.char.add(lab["tier"].astype(str), " "),
                           lab["direction"].astype(str))
        names_u, inv = np.unique(tier, return_inverse=True)
        return inv.astype(np.int64), [str(x) for x in names_u]

    def tier_series(self, f: Fabric | None, metric: str) -> dict[str, Any]:
        """Per tier and direction, the metric over the steps: utilization weighted by
        capacity (bytes over capacity, as the ``timeline`` table), sums for bytes and
        counts, the max for queues. A flow run without paths gives the ``timeline``
        table's curves (its own times)."""
        self._check(metric, None)
        if self.timeline is not None and metric == "utilization":
            tl = self.timeline
            cols = [c for c in tl if c.endswith(("_up_util", "_down_util"))]
            return {"times_ns": [float(x) for x in tl["start_ns"]],
                    "end_ns": [float(x) for x in tl["end_ns"]],
                    "tiers": {c[:-5].rsplit("_", 1)[0] + " " + c[:-5].rsplit("_", 1)[1]:
                              [float(x) for x in tl[c]] for c in cols}}
        g, names = self._row_tiers(f)
        vals = self.steps[metric].astype(np.float64)
        G = len(names)
        how = self.agg[metric]
        if how == "max":
            out = _group_reduce(np.maximum, g, vals, G)
        elif how == "sum":
            out = _group_reduce(np.add, g, vals, G)
        else:
            cap = self.capacity_gbps if self.capacity_gbps is not None else \
                np.ones(len(self.rows))
            cap = np.nan_to_num(cap, nan=0.0)
            num = _group_reduce(np.add, g, vals * cap[:, None], G)
            den = np.bincount(g, weights=cap, minlength=G)[:, None]
            out = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
        present = np.bincount(g, minlength=G) > 0
        return {"times_ns": [float(x) for x in self.times_ns],
                "end_ns": [float(x) for x in self.end_ns],
                "tiers": {names[i]: [float(x) for x in out[i]] for i in np.flatnonzero(present)}}

    # ----------------------------------------------------------------- hottest
    def hottest(self, f: Fabric | None, metric: str, t: int | None, k: int = 20,
                alive: np.ndarray | None = None,
                only: np.ndarray | None = None) -> list[dict[str, Any]]:
        """The ``k`` arcs with the highest value (ties: lower arc first), with names
        from the fabric (or the run's ``links`` table when ``f`` is None); ``only``: a
        bool per arc, the arcs that may be listed (None: all)."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise SpecError(Problem("k", f"{k!r}; allowed: a whole number >= 0"))
        v = self.row_values(metric, t)
        pos = np.flatnonzero(v > 0)
        if only is not None:
            pos = pos[np.asarray(only, dtype=bool)[self.rows[pos]]]
        top = pos[np.lexsort((self.rows[pos], -v[pos]))][:k]
        arcs = self.rows[top]
        vals = v[top]
        if f is not None:
            from aifabric.telemetry.catalog import arc_labels, port_names

            lab = arc_labels(f, arcs)
            _src, dst, _ = f.arcs
            link = arcs // 2
            dport = np.where(arcs % 2 == 0, f.links.b_port[link], f.links.a_port[link])
            to_port = port_names(f, dst[arcs], dport)
            seg = f.links.segment[link]
        elif self.labels is not None:
            lab = self.labels(arcs)
            to_port = np.full(len(arcs), "", dtype=object)
            seg = np.full(len(arcs), -1)
        else:
            lab = {c: np.full(len(arcs), "", dtype=object) for c in
                   ("device", "port", "peer", "tier")}
            lab["direction"] = np.array(["up", "down"], dtype=object)[arcs % 2]
            to_port = np.full(len(arcs), "", dtype=object)
            seg = np.full(len(arcs), -1)
        ok = np.ones(len(arcs), bool) if alive is None else np.asarray(alive)[arcs // 2]
        return [{"arc": int(arcs[i]), "link": int(arcs[i] // 2),
                 "direction": str(lab["direction"][i]), "from": str(lab["device"][i]),
                 "to": str(lab["peer"][i]), "from_port": str(lab["port"][i]),
                 "to_port": str(to_port[i]), "tier": str(lab["tier"][i]),
                 "segment": int(seg[i]), "value": float(vals[i]), "alive": bool(ok[i])}
                for i in range(len(arcs))]  # at most k


def _group_reduce(ufunc: np.ufunc, g: np.ndarray, vals: np.ndarray, G: int) -> np.ndarray:
    """``ufunc`` (add, maximum) of the rows of ``vals`` per group ``g`` (0 for an empty
    group): rows sorted by group, then one ``reduceat``."""
    out = np.zeros((G, vals.shape[1]))
    if not len(g):
        return out
    order = np.argsort(g, kind="stable")
    gs = g[order]
    starts = np.flatnonzero(np.concatenate([[True], gs[1:] != gs[:-1]]))
    out[gs[starts]] = ufunc.reduceat(vals[order], starts, axis=0)
    return out


# --------------------------------------------------------------------- design
def from_routed(routed: Routed) -> LoadSeries:
    """A routed design: one step, bytes and flows on every arc."""
    n = routed.n_arcs
    b = routed.arc_bytes()
    fl = routed.arc_flows().astype(np.float64)
    rows = np.arange(n)
    return LoadSeries(["bytes", "flows"], np.zeros(1), np.zeros(1), n, rows,
                      {"bytes": b[:, None].astype(np.float32),
                       "flows": fl[:, None].astype(np.float32)},
                      {"bytes": b, "flows": fl}, {"bytes": "sum", "flows": "sum"}, "design",
                      capacity_gbps=routed.fabric.arcs[2].astype(np.float64))


# --------------------------------------------------------------------- reading
def _read_columns(path: Path, cols: tuple[str, ...], texts: tuple[str, ...] = ()) -> Table:
    """The numeric columns of ``cols`` (NaN for blanks) and text columns of ``texts``
    that the table at ``path`` has."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        out: Table = {c: np.asarray(t.column(c).to_numpy(zero_copy_only=False),
                                    dtype=np.float64) for c in cols if c in t.column_names}
        out.update({c: np.array(["" if x is None else str(x) for x in t.column(c).to_pylist()],
                                dtype=object) for c in texts if c in t.column_names})
        return out
    with path.open(newline="", encoding="utf-8") as fh:
        rd = csv.reader(fh)
        header = next(rd, [])
        have = [c for c in (*cols, *texts) if c in header]
        if not have:
            return {}
        idx = [header.index(c) for c in have]
        rows = [[r[i] for i in idx] for r in rd]
    out = {}
    for j, c in enumerate(have):
        col = np.array([r[j] for r in rows], dtype=object)
        if c in texts:
            out[c] = col
            continue
        col[col == ""] = "nan"
        out[c] = col.astype(np.float64)
    return out


def read_tables(run_dir: str | Path) -> dict[str, Table]:
    """A run folder's tables for :func:`from_run`: :func:`~aifabric.telemetry.openmetrics.
    read_run`'s (SpecError when the folder is not a run) plus the ``links`` table's
    ``bytes``/``mean_util``/``peak_util``/``flows``. A ``route --out`` folder (a ``links``
    table with ``arc``, ``bytes`` and ``flows``, no time series) is read too."""
    from aifabric.telemetry.openmetrics import read_run

    run = Path(run_dir)
    links = next((run / f"links.{e}" for e in ("csv", "parquet")
                  if (run / f"links.{e}").is_file()), None)
    try:
        tables = read_run(run)
    except SpecError:
        if links is None or not run.is_dir():
            raise
        extra = _safe_columns(links, ("arc", "link", "capacity_gbps", *_LINK_EXTRA),
                              ("direction", "from", "to", "tier"))
        if not {"arc", "bytes", "flows"} <= set(extra):
            raise
        return {"links": extra}
    if links is not None and "links" in tables:
        tables["links"].update(_safe_columns(links, _LINK_EXTRA))
    return tables


def _safe_columns(path: Path, cols: tuple[str, ...], texts: tuple[str, ...] = ()) -> Table:
    try:
        return _read_columns(path, cols, texts)
    except Exception as exc:  # a damaged table: name it, no traceback
        raise SpecError(Problem(str(path), f"cannot be read ({type(exc).__name__}: {exc}); "
                                "allowed: a folder written by aifabric simulate/route --out")
                        ) from None


# --------------------------------------------------------------------- transfer paths
def transfer_arcs(paths: Any, xconn: np.ndarray) -> sp.csr_matrix:
    """(transfers x arcs): the fraction of each transfer's bytes on each arc — its
    connection's QPs share the bytes evenly, each QP's share spread by its routed
    fractions (as the simulators send them; see ``aifabric.sim.results.collective_links``)."""
    import scipy.sparse as sp

    inc = sp.csr_matrix(paths.incidence)
    ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
    nq = np.diff(ptr)
    xconn = np.asarray(xconn, dtype=np.int64)
    n_t = len(xconn)
    q = nq[xconn]
    rows = np.repeat(np.arange(n_t), q)
    # the QP rows of each transfer's connection: ptr[c] .. ptr[c+1]
    starts = np.repeat(ptr[xconn], q)
    offs = np.arange(int(q.sum())) - np.repeat(np.cumsum(q) - q, q)
    w = np.repeat(np.divide(1.0, q, out=np.zeros(n_t), where=q > 0), q)
    x = sp.csr_matrix((w, (rows, starts + offs)), shape=(n_t, inc.shape[0]))
    return sp.csr_matrix(x @ inc)


def run_transfer_arcs(scn: Any, f: Fabric) -> sp.csr_matrix:
    """:func:`transfer_arcs` of a simulation scenario, routed as ``simulate`` routes it
    (the workload compiled, then :func:`aifabric.sim.paths.route_dag` with the scenario's
    routing, failures, seed and pinned paths); the solver does not run."""
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload, effective_routing

    wl = compile_workload(scn, f)
    seed = int(getattr(scn, "seed", 0) or 0)
    paths, xconn = route_dag(f, wl.dag, effective_routing(scn, f),
                             failures=getattr(scn, "failures", None) or None, seed=seed,
                             pinned=wl.pinned or None)
    return transfer_arcs(paths, xconn)


# --------------------------------------------------------------------- runs
def _rows(t: Table | None) -> int:
    return len(next(iter(t.values()))) if t else 0


def from_run(tables: dict[str, Table], f: Fabric | None, *,
             transfer_arcs: sp.spmatrix | None = None) -> LoadSeries:
    """The loads of a run folder's tables (:func:`read_tables`). ``f``: the run's fabric
    (names, capacities; None: the ``links`` table's); ``transfer_arcs``: per-transfer
    arcs of a flow run (:func:`run_transfer_arcs`) for per-step link loads."""
    from aifabric.telemetry.openmetrics import arc_label_source, check_fabric

    lk = tables.get("links")
    route_run = _rows(lk) and "arc" in lk and "timeline" not in tables
    if f is not None and not route_run:  # route tables name devices, not nodes
        check_fabric(tables, f)
    labels = None if f is not None else arc_label_source(tables, None)
    n_arcs = _n_arcs(tables, f)
    if f is not None and route_run and (_links_arcs(lk) >= n_arcs).any():
        raise SpecError(Problem("--scenario", "the run has links that the scenario's fabric "
                                "lacks; allowed: the scenario the run was routed from"))
    if _rows(tables.get("packet_queues")):
        _check_arcs(tables["packet_queues"]["arc"], n_arcs)
        ls = _from_packets(tables, f, n_arcs)
    elif transfer_arcs is not None and _rows(tables.get("transfers")):
        ls = _from_transfers(tables, f, n_arcs, transfer_arcs)
    elif route_run:
        ls = _from_route_links(tables["links"], f, n_arcs)
    else:
        ls = _from_links_table(tables, f, n_arcs)
    _check_arcs(ls.rows, n_arcs)
    ls.labels = labels
    return ls


def _check_arcs(arcs: np.ndarray, n_arcs: int) -> None:
    arcs = np.asarray(arcs)
    bad = ~np.isfinite(arcs) | (arcs < 0) | (arcs >= n_arcs)
    if bad.any():
        raise SpecError(Problem("--scenario", f"the run has port {arcs[bad][0]!r} that the "
                                "fabric lacks; allowed: the scenario the run came from"))


def _n_arcs(tables: dict[str, Table], f: Fabric | None) -> int:
    if f is not None:
        return 2 * f.n_links
    n = 0
    lk = tables.get("links")
    if _rows(lk):
        n = max(n, int(np.nanmax(lk["link"])) * 2 + 2)
    q = tables.get("packet_queues")
    if _rows(q):
        n = max(n, int(np.nanmax(q["arc"])) + 1)
    return n


def _links_arcs(lk: Table) -> np.ndarray:
    if "arc" in lk:
        return lk["arc"].astype(np.int64)
    return lk["link"].astype(np.int64) * 2 + (np.asarray(lk["direction"]) == "down")


def _capacity(tables: dict[str, Table], f: Fabric | None, arcs: np.ndarray) -> np.ndarray:
    """Gbit/s of each arc: the fabric's, else the links table's (NaN where unknown)."""
    from aifabric.telemetry.openmetrics import arc_capacity

    return arc_capacity(tables, f, arcs)


def _from_route_links(lk: Table, f: Fabric | None, n_arcs: int) -> LoadSeries:
    """A ``route --out`` links table: bytes and flows per arc, one step."""
    arcs = _links_arcs(lk)
    order = np.argsort(arcs, kind="stable")
    arcs = arcs[order]
    b = np.nan_to_num(lk["bytes"][order])
    fl = np.nan_to_num(lk["flows"][order])
    cap = (f.arcs[2][arcs].astype(np.float64) if f is not None
           else lk.get("capacity_gbps", np.full(len(arcs), np.nan))[order])
    return LoadSeries(["bytes", "flows"], np.zeros(1), np.zeros(1), max(n_arcs, 0), arcs,
                      {"bytes": b[:, None].astype(np.float32),
                       "flows": fl[:, None].astype(np.float32)},
                      {"bytes": b, "flows": fl}, {"bytes": "sum", "flows": "sum"}, "route",
                      capacity_gbps=cap)


def _makespan(tables: dict[str, Table]) -> float:
    ends = [0.0]
    for name in ("timeline", "transfers"):
        e = tables.get(name, {}).get("end_ns")
        if e is not None and len(e) and np.isfinite(e).any():
            ends.append(float(np.nanmax(e)))
    return max(ends)


def _from_links_table(tables: dict[str, Table], f: Fabric | None, n_arcs: int) -> LoadSeries:
    """A flow run without per-transfer paths: the links table as one step (mean and peak
    utilization, bytes), the timeline table for the tier curves."""
    lk = tables.get("links")
    tl = tables.get("timeline")
    end = _makespan(tables)
    notes = []
    if not _rows(lk):
        arcs = np.zeros(0, np.int64)
        cols: dict[str, np.ndarray] = {}
        notes.append("the run has no links table: per-link loads are missing")
    else:
        arcs = _links_arcs(lk)
        order = np.argsort(arcs, kind="stable")
        arcs = arcs[order]
        cols = {}
        if "mean_util" in lk:
            cols["utilization"] = np.nan_to_num(lk["mean_util"][order])
        if "peak_util" in lk:
            cols["peak_utilization"] = np.nan_to_num(lk["peak_util"][order])
        if "bytes" in lk:
            cols["bytes"] = np.nan_to_num(lk["bytes"][order])
        if not cols:
            notes.append("the links table has no bytes/mean_util columns")
    metrics = [m for m in ("utilization", "bytes", "peak_utilization") if m in cols]
    if not metrics:
        metrics = ["utilization"]
        cols["utilization"] = np.zeros(len(arcs))
    timeline = tl if _rows(tl) else None
    return LoadSeries(metrics, np.zeros(1), np.array([end]), n_arcs, arcs,
                      {m: cols[m][:, None].astype(np.float32) for m in metrics},
                      {m: cols[m] for m in metrics}, {m: METRIC_AGG[m] for m in metrics},
                      "flow", capacity_gbps=_capacity(tables, f, arcs), timeline=timeline,
                      notes=notes)


def _from_transfers(tables: dict[str, Table], f: Fabric | None, n_arcs: int,
                    tarcs: Any) -> LoadSeries:
    """Bytes of every transfer spread evenly over its [start, end] on its arcs, binned."""
    import scipy.sparse as sp

    tr = tables["transfers"]
    T = sp.csr_matrix(tarcs)
    n_t = len(tr["start_ns"])
    if T.shape[0] != n_t:
        raise SpecError(Problem("transfer_arcs", f"has {T.shape[0]} rows; allowed: one per "
                                f"transfer of the run ({n_t}): the run's scenario"))
    if T.shape[1] > n_arcs:
        raise SpecError(Problem("transfer_arcs", f"has {T.shape[1]} arcs; the run's fabric "
                                f"has {n_arcs}"))
    s = np.asarray(tr["start_ns"], np.float64)
    e = np.asarray(tr["end_ns"], np.float64)
    moved = tr["size_bytes"] * np.nan_to_num(tr.get("repeat", np.ones(n_t)), nan=1.0)
    done = np.isfinite(s) & np.isfinite(e) & (e >= s)
    notes = []
    if not done.all():
        notes.append(f"{int((~done).sum())} transfers never finished: their bytes are left "
                     "out")
    makespan = _makespan(tables)
    # one row per distinct (start, end): stages share their times
    key = np.stack([s[done], e[done]], axis=1)
    uk, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    P = sp.csr_matrix((moved[done], (inv, np.flatnonzero(done))), shape=(len(uk), n_t))
    B = sp.csr_matrix(P @ T)  # intervals x arcs: bytes
    B.sum_duplicates()
    used = np.unique(B.indices)
    B = sp.csr_matrix(B[:, used])
    n_steps = int(max(1, min(MAX_STEPS, MAX_CELLS // max(len(used), 1))))
    width = makespan / n_steps if makespan > 0 else 1.0
    edges = np.arange(n_steps + 1) * width
    if makespan > 0:
        edges[-1] = makespan
    out = np.zeros((len(used), n_steps), dtype=np.float32)
    chunk = max(1, 4_000_000 // n_steps)
    Bt = sp.csr_matrix(B.T.astype(np.float32))  # arcs x intervals
    for lo in range(0, len(uk), chunk):  # a few chunks of distinct intervals
        a, b = uk[lo:lo + chunk, 0], uk[lo:lo + chunk, 1]
        ov = np.clip(np.minimum(b[:, None], edges[None, 1:])
                     - np.maximum(a[:, None], edges[None, :-1]), 0.0, None)
        dur = b - a
        W = np.divide(ov, dur[:, None], out=np.zeros_like(ov), where=dur[:, None] > 0)
        inst = dur <= 0  # an instant: all in the step it falls in
        if inst.any():
            k = np.clip(np.searchsorted(edges, a[inst], side="right") - 1, 0, n_steps - 1)
            W[np.flatnonzero(inst), k] = 1.0
        out += Bt[:, lo:lo + chunk] @ W.astype(np.float32)
    cap = (f.arcs[2][used].astype(np.float64) if f is not None
           else _capacity(tables, None, used))
    cap = np.nan_to_num(cap)
    # bytes -> utilization of each step: x 8 / (capacity x step), in place (big arrays)
    per_step = np.diff(edges)
    row_f = np.divide(8.0, cap, out=np.zeros(len(used)), where=cap > 0).astype(np.float32)
    col_f = np.divide(1.0, per_step, out=np.zeros(n_steps), where=per_step > 0)
    util = out * row_f[:, None]
    util *= col_f.astype(np.float32)[None, :]
    # whole run in float64: the rows of W sum to 1, so a transfer's bytes all land
    tot = np.asarray(B.sum(axis=0)).reshape(-1)
    whole_den = cap / 8.0 * makespan
    whole_util = np.divide(tot, whole_den, out=np.zeros(len(used)), where=whole_den > 0)
    steps = {"utilization": util, "bytes": out}
    whole = {"utilization": whole_util, "bytes": tot}
    metrics = ["utilization", "bytes"]
    return LoadSeries(metrics, edges[:-1].copy(), edges[1:].copy(), n_arcs,
                      used.astype(np.int64), steps, whole,
                      {m: METRIC_AGG[m] for m in metrics}, "flow", capacity_gbps=cap,
                      notes=notes)


def _step_of_samples(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group consecutive samples into at most MAX_STEPS steps: the step of each sample
    and the index of each step's last sample."""
    n = len(grid)
    k = min(MAX_STEPS, n)
    step = (np.arange(n) * k) // n
    last = np.searchsorted(step, np.arange(k), side="right") - 1
    return step, last


def _from_packets(tables: dict[str, Table], f: Fabric | None, n_arcs: int) -> LoadSeries:
    q = tables["packet_queues"]
    t = np.asarray(q["time_ns"], np.float64)
    arc = q["arc"].astype(np.int64)
    grid = np.unique(t)
    sample = np.searchsorted(grid, t)
    step_of, last = _step_of_samples(grid)
    K = len(last)
    rows, r = np.unique(arc, return_inverse=True)
    R = len(rows)
    st = step_of[sample]
    cell = r * K + st

    def cell_max(v: np.ndarray) -> np.ndarray:
        out = np.zeros(R * K)
        np.maximum.at(out, cell, np.nan_to_num(v))
        return out.reshape(R, K)

    def cumulative(v: np.ndarray, per_tc_sum: bool) -> np.ndarray:
        """Counter value at the end of each step (the table repeats per-port counters for
        every traffic class; PFC frames are per class: summed)."""
        v = np.nan_to_num(np.asarray(v, np.float64))
        if per_tc_sum:
            key = r * len(grid) + sample  # (port, sample)
            uk, inv = np.unique(key, return_inverse=True)
            tot = np.bincount(inv, weights=v)
            c = np.zeros(R * K)
            np.maximum.at(c, (uk // len(grid)) * K + step_of[uk % len(grid)], tot)
        else:
            c = np.zeros(R * K)
            np.maximum.at(c, cell, v)
        # counters never decrease: a port missing from a step keeps its last value
        return np.maximum.accumulate(c.reshape(R, K), axis=1)

    def deltas(c: np.ndarray) -> np.ndarray:
        return np.diff(np.concatenate([np.zeros((R, 1)), c], axis=1), axis=1)

    end = grid[last]
    start = np.concatenate([[0.0], end[:-1]])
    dt = end - start
    cap = _capacity(tables, f, rows)
    txc = cumulative(q["tx_bytes"], False)
    sent = deltas(txc)
    denom = np.nan_to_num(cap)[:, None] / 8.0 * dt[None, :]
    util = np.divide(sent, denom, out=np.zeros_like(sent), where=denom > 0)
    steps: dict[str, np.ndarray] = {"utilization": util, "bytes": sent,
                                    "queue_bytes": cell_max(q["queue_bytes"])}
    whole: dict[str, np.ndarray] = {}
    tot_den = np.nan_to_num(cap) / 8.0 * (float(end[-1]) if len(end) else 0.0)
    whole["utilization"] = np.divide(txc[:, -1], tot_den, out=np.zeros(R), where=tot_den > 0)
    whole["bytes"] = txc[:, -1]
    whole["queue_bytes"] = steps["queue_bytes"].max(axis=1) if K else np.zeros(R)
    for name, col, per_tc in (("ecn_marks", "ecn_marks", False),
                              ("pfc_pauses", "pfc_sent", True), ("drops", "drops", False)):
        c = cumulative(q[col], per_tc)
        steps[name] = deltas(c)
        whole[name] = c[:, -1]
    metrics = ["utilization", "queue_bytes", "ecn_marks", "pfc_pauses", "drops", "bytes"]
    return LoadSeries(metrics, start, end, n_arcs, rows,
                      {m: steps[m].astype(np.float32) for m in metrics}, whole,
                      {m: METRIC_AGG[m] for m in metrics}, "packet", capacity_gbps=cap)
