"""A finished simulation (``aifabric simulate --out RUN_DIR``) as OpenMetrics text with
timestamps, for ``promtool tsdb create-blocks-from openmetrics`` (Prometheus backfill).

Which series (names from :mod:`~aifabric.telemetry.catalog`):

- every run (the ``timeline`` table): ``aifabric_tier_utilization_ratio`` per tier and
  direction, and ``aifabric_collective_progress_ratio`` (the ``collectives`` and
  ``transfers`` tables), sampled at every timeline interval's start and at least every
  :data:`GRID_STEP_S` of mapped time (no series goes stale between samples);
- packet runs (``packet_queues``, one row per sample, port and priority): queue depth,
  PFC pause frames sent/received and paused time per port and priority; ECN marks,
  bytes sent, drops and the link utilization of each sample interval per port; from
  ``packet_flows`` and ``packet_fct``: CNPs and retransmitted bytes per sending NIC port;
- every run with a ``collective_links`` table: ``aifabric_collective_link_bytes``, the
  bytes each collective puts on each link direction, repeated over the run so dashboards
  can join it with the link series at any time (:mod:`.collective_links`).

A series that is 0 at every sample is left out. Counters are the run's cumulative totals
(bytes, frames, simulated seconds).

Time: a sample at simulated ``t_ns`` gets the timestamp ``start + t_ns * 1e-9 *
time_scale`` (seconds, rounded to the millisecond): the default
:data:`DEFAULT_TIME_SCALE` (10^6) makes one simulated nanosecond one millisecond,
Prometheus' resolution, so a 1 ms run spans about 17 minutes of the dashboards' time
axis and ``rate()`` over imported counters is per simulated microsecond.
:data:`DEFAULT_START` is a fixed origin so the output is deterministic.

Labels: with the run's fabric (``fabric=``, built from the scenario) every port carries
:data:`~aifabric.telemetry.catalog.PORT_LABELS`; without it, ``device``, ``peer`` (node
names) and ``tier`` from the run's ``links`` table and ``port="link<index>"`` (no
interface names without the fabric; parallel links between two devices stay apart).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.telemetry.catalog import CATALOG, PORT_LABELS, Metric, by_name
from aifabric.telemetry.collective_links import collective_link_families

__all__ = ["COLUMNS", "DEFAULT_START", "DEFAULT_TIME_SCALE", "FAST", "GRID_STEP_S", "Family",
           "arc_capacity", "arc_label_source", "check_fabric", "family", "parse_start",
           "read_csv", "read_parquet", "read_run", "read_table", "render", "render_bytes",
           "run_families", "run_to_text"]

#: the wall-clock time of simulated t = 0 unless ``--start`` says otherwise (a fixed
#: origin: the same run gives the same bytes)
DEFAULT_START = "2026-01-01T00:00:00Z"
#: wall-clock seconds per simulated second (1 simulated ns -> 1 ms)
DEFAULT_TIME_SCALE = 1e6
#: the timeline's series (per tier, per collective) get a sample at least this often, in
#: wall-clock seconds (Prometheus' default scrape interval), and at most GRID_MAX of them
GRID_STEP_S = 15.0
GRID_MAX = 10_000

Table = dict[str, np.ndarray]

#: what each table must have: (numeric columns, text columns)
COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "timeline": (("start_ns", "end_ns"), ()),
    "collectives": ((), ("collective", "job", "op")),
    "transfers": (("collective", "size_bytes", "repeat", "start_ns", "end_ns"), ()),
    "links": (("link", "capacity_gbps"), ("direction", "from", "to", "tier")),
    "packet_queues": (("time_ns", "arc", "tc", "queue_bytes", "ecn_marks", "pfc_sent",
                       "pfc_received", "paused_ns", "drops", "tx_bytes"), ()),
    "packet_flows": (("time_ns", "qp", "cnps", "retx_bytes"), ()),
    "packet_fct": (("qp",), ("src",)),
    "collective_links": (("link", "bytes"), ("collective", "job", "direction", "from", "to",
                                             "tier")),
}
#: tables read with numpy's C parser (large, numeric, no blanks)
FAST = {"packet_queues", "packet_flows"}
_RUN = "allowed: a folder written by aifabric simulate --out"


def _num(v: list[str]) -> np.ndarray:
    return np.array([float(x) if x else np.nan for x in v], dtype=np.float64)


def _wanted(name: str, header: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(numeric, text) columns to read: the timeline's utilization columns too."""
    nums, strs = COLUMNS[name]
    if name == "timeline":
        nums = nums + tuple(c for c in header if c.endswith(("_up_util", "_down_util")))
    return nums, strs


def _read_csv_arrow(path: Path, nums: tuple[str, ...]) -> Table | None:
    """pyarrow's multi-threaded CSV reader where pyarrow is installed (the parquet extra;
    5x numpy's), else None."""
    try:
        from pyarrow import csv as pacsv
    except ImportError:
        return None
    t = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(include_columns=list(nums)))
    return {c: np.asarray(t.column(c).to_numpy(), dtype=np.float64) for c in nums}


def read_csv(path: Path, name: str, shown: str) -> Table:
    with path.open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), [])
        nums, strs = _wanted(name, header)
        missing = [c for c in (*nums, *strs) if c not in header]
        if missing:
            raise SpecError(Problem(shown, f"has no column {missing[0]!r}; {_RUN}"))
        if name in FAST:
            fast = _read_csv_arrow(path, nums)
            if fast is not None:
                return fast
            cols = [header.index(c) for c in nums]
            data = np.loadtxt(fh, delimiter=",", usecols=cols, dtype=np.float64, ndmin=2,
                              quotechar='"')
            return {c: data[:, i] for i, c in enumerate(nums)}
        rows = list(csv.reader(fh))
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(header)
    out: Table = {c: _num(list(cols[header.index(c)])) for c in nums}
    out.update({c: np.array(cols[header.index(c)], dtype=object) for c in strs})
    return out


def read_parquet(path: Path, name: str, shown: str) -> Table:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise SpecError(Problem(shown, "reading parquet needs pyarrow: pip install "
                                "'aifabric[parquet]'")) from None
    t = pq.read_table(path)
    nums, strs = _wanted(name, t.column_names)
    missing = [c for c in (*nums, *strs) if c not in t.column_names]
    if missing:
        raise SpecError(Problem(shown, f"has no column {missing[0]!r}; {_RUN}"))
    out: Table = {}
    for c in nums:
        out[c] = np.asarray(t.column(c).to_numpy(zero_copy_only=False), dtype=np.float64)
    for c in strs:
        out[c] = np.array(["" if x is None else str(x) for x in t.column(c).to_pylist()],
                          dtype=object)
    return out


def read_table(path: Path, name: str, shown: str) -> Table:
    """One table ``name`` (a key of :data:`COLUMNS`) of a run folder, csv or parquet by its
    suffix; a missing column is a SpecError on ``shown``."""
    return (read_csv if path.suffix == ".csv" else read_parquet)(path, name, shown)


def read_run(run_dir: str | Path) -> dict[str, Table]:
    """The tables of a run folder that the metrics come from (csv or parquet, as
    ``simulate --out`` wrote them). Raises a one-line :class:`SpecError` when the folder
    is missing, is not a run, or has no time series."""
    run = Path(run_dir)
    if not run.is_dir():
        raise SpecError(Problem("RUN_DIR", f"{run} is not a folder; {_RUN}"))
    tables: dict[str, Table] = {}
    for name in COLUMNS:
        for ext, reader in (("csv", read_csv), ("parquet", read_parquet)):
            p = run / f"{name}.{ext}"
            if p.is_file():
                try:
                    tables[name] = reader(p, name, str(p))
                except SpecError:
                    raise
                except Exception as exc:  # a damaged table: name it, no traceback
                    raise SpecError(Problem(str(p), f"cannot be read ({type(exc).__name__}:"
                                            f" {exc}); {_RUN}")) from None
                break
    def rows(name: str) -> int:
        t = tables.get(name)
        return len(next(iter(t.values()))) if t else 0

    if not (rows("timeline") or rows("packet_queues")):
        raise SpecError(Problem("RUN_DIR", f"{run} has no time series (no rows in "
                                "timeline or packet_queues, as csv or parquet); " + _RUN))
    for name, cols in _TIMES.items():  # times must be times: a damaged table says so
        for c in cols:
            t = tables.get(name, {}).get(c)
            if t is None or not len(t):
                continue
            v = np.asarray(t, dtype=np.float64)
            bad = ~np.isfinite(v) | (v < 0)
            if name == "transfers":  # a transfer that never ran has no times
                bad &= ~np.isnan(v)
            if bad.any():
                raise SpecError(Problem(f"{run / name}", f"column {c} row {int(np.argmax(bad))}"
                                        f" is {t[int(np.argmax(bad))]!r}, not a time; allowed: "
                                        "nanoseconds >= 0 as simulate wrote them; " + _RUN))
    return tables


#: the time columns of each table, checked by :func:`read_run`
_TIMES = {"timeline": ("start_ns", "end_ns"), "transfers": ("start_ns", "end_ns"),
          "packet_queues": ("time_ns",), "packet_flows": ("time_ns",)}


@dataclass
class Family:
    """The samples of one catalog metric: label values per series, and per sample its
    series, simulated time (ns) and value."""

    metric: Metric
    labels: dict[str, np.ndarray]
    series: np.ndarray
    t_ns: np.ndarray
    value: np.ndarray


def family(name: str, labels: dict[str, np.ndarray], series: np.ndarray, t_ns: np.ndarray,
            value: np.ndarray) -> Family:
    m = by_name(name)
    assert set(labels) == set(m.labels), (name, sorted(labels))
    return Family(m, labels, np.asarray(series, np.int64), np.asarray(t_ns, np.float64),
                  np.asarray(value, np.float64))


def check_fabric(tables: dict[str, Table], fabric: Any) -> None:
    """The run's links table names the same nodes at each link as ``fabric`` (else the
    scenario is not the one the run came from)."""
    lk = tables.get("links")
    if lk is None or not len(lk["link"]):
        return
    link = lk["link"].astype(np.int64)
    bad = (link < 0) | (link >= fabric.n_links)
    if not bad.any():
        down = lk["direction"] == "down"
        a, b = fabric.links.a[link], fabric.links.b[link]
        names = fabric.nodes.name
        frm = np.where(down, names[b], names[a]).astype(str)
        bad = frm != lk["from"].astype(str)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SpecError(Problem("--scenario", f"the run's link {int(link[i])} "
                                f"({lk['from'][i]} -> {lk['to'][i]}) is not in the "
                                "scenario's fabric; allowed: the scenario the run was "
                                "simulated from"))


def arc_label_source(tables: dict[str, Table], fabric: Any) -> Any:
    """A function arcs -> PORT_LABELS + direction (``up``/``down``)."""
    if fabric is not None:
        from aifabric.telemetry.catalog import arc_labels

        def from_fabric(arcs: np.ndarray) -> dict[str, np.ndarray]:
            bad = (arcs < 0) | (arcs >= 2 * fabric.n_links)
            if bad.any():
                raise SpecError(Problem("--scenario", f"the run has port {int(arcs[bad][0])}"
                                        " that the scenario's fabric lacks; allowed: the "
                                        "scenario the run was simulated from"))
            return arc_labels(fabric, arcs)
        return from_fabric
    lk = tables.get("links")
    if lk is not None and len(lk["link"]):
        arc_of = lk["link"].astype(np.int64) * 2 + (lk["direction"] == "down")
        order = np.argsort(arc_of)
        known = arc_of[order]
    else:
        known = order = np.zeros(0, np.int64)

    def from_links(arcs: np.ndarray) -> dict[str, np.ndarray]:
        i = np.clip(np.searchsorted(known, arcs), 0, max(len(known) - 1, 0))
        ok = (known[i] == arcs) if len(known) else np.zeros(len(arcs), bool)
        row = order[i] if len(known) else i

        def col(c: str) -> np.ndarray:
            out = np.full(len(arcs), "", dtype=object)
            if ok.any():
                out[ok] = lk[c][row[ok]]  # type: ignore[index]
            return out
        blank = np.full(len(arcs), "", dtype=object)
        # without the fabric there are no interface names: every port is named by its
        # link's index, so parallel links between two devices stay apart
        port = np.char.add("link", (arcs // 2).astype(str)).astype(object)
        tier = col("tier")  # "access up" -> "access"
        tier = np.char.partition(tier.astype(str), " ")[:, 0].astype(object) if len(tier) \
            else tier
        return {"device": col("from"), "port": port, "peer": col("to"),
                "tier": tier, "plane": blank, "rail": blank, "segment": blank,
                "direction": np.array(["up", "down"], dtype=object)[arcs % 2]}
    return from_links


def _packet_families(tables: dict[str, Table], arc_src: Any, fabric: Any) -> list[Family]:
    q = tables["packet_queues"]
    if not len(q["time_ns"]):
        return []
    t, arc, tc = q["time_ns"], q["arc"].astype(np.int64), q["tc"].astype(np.int64)
    out: list[Family] = []
    # ---- per (port, priority)
    key = arc * 256 + tc
    uk, sid = np.unique(key, return_inverse=True)
    lab = arc_src(uk // 256)
    lab.pop("direction")
    lab_p = {**lab, "priority": (uk % 256).astype(str).astype(object)}
    out.append(family("aifabric_queue_depth_bytes", lab_p, sid, t, q["queue_bytes"]))
    n = len(uk)
    out.append(family(
        "aifabric_pfc_pause_frames_total",
        {k: np.concatenate([v, v]) for k, v in lab_p.items()}
        | {"direction": np.repeat(np.array(["tx", "rx"], dtype=object), n)},
        np.concatenate([sid, sid + n]), np.concatenate([t, t]),
        np.concatenate([q["pfc_sent"], q["pfc_received"]])))
    out.append(family("aifabric_pfc_paused_seconds_total", lab_p, sid, t,
                       q["paused_ns"] * 1e-9))
    # ---- per port (the table repeats these for every priority: one row per sample)
    first = np.ones(len(t), bool)
    order = np.lexsort((tc, t, arc))
    first[order[1:]] = (arc[order[1:]] != arc[order[:-1]]) | (t[order[1:]] != t[order[:-1]])
    r = order[first[order]]  # one row per (port, sample), by port then time
    ua, aid = np.unique(arc[r], return_inverse=True)
    lab_a = arc_src(ua)
    lab_port = {k: v for k, v in lab_a.items() if k != "direction"}
    tx = {**lab_port, "direction": np.full(len(ua), "tx", dtype=object)}
    out.append(family("aifabric_interface_bytes_total", tx, aid, t[r], q["tx_bytes"][r]))
    out.append(family("aifabric_interface_drops_total", tx, aid, t[r], q["drops"][r]))
    out.append(family("aifabric_ecn_marked_packets_total", lab_port, aid, t[r],
                       q["ecn_marks"][r]))
    # utilization of each sample interval: bytes sent since the previous sample over
    # what the link carries in that time (a port first appears the sample after it was
    # idle: 0 bytes at the previous sample time)
    grid = np.unique(t)
    prev_t = np.concatenate([[0.0], grid[:-1]])[np.searchsorted(grid, t[r])]
    txb = q["tx_bytes"][r]
    same = np.concatenate([[False], aid[1:] == aid[:-1]])
    prev_b = np.where(same, np.concatenate([[0.0], txb[:-1]]), 0.0)
    cap = arc_capacity(tables, fabric, ua)[aid]
    dt = t[r] - prev_t
    ok = (dt > 0) & (cap > 0)
    util = np.zeros(len(r))
    util[ok] = (txb - prev_b)[ok] * 8.0 / (cap[ok] * dt[ok])
    out.append(family("aifabric_link_utilization_ratio", lab_a, aid[ok], t[r][ok], util[ok]))
    out.extend(_qp_families(tables, fabric))
    return out


def arc_capacity(tables: dict[str, Table], fabric: Any, arcs: np.ndarray) -> np.ndarray:
    """Gbit/s of each arc (NaN where unknown)."""
    if fabric is not None:
        return fabric.links.capacity_gbps.reshape(-1)[arcs].astype(np.float64)
    cap = np.full(len(arcs), np.nan)
    lk = tables.get("links")
    if lk is not None and len(lk["link"]):
        a = lk["link"].astype(np.int64) * 2 + (lk["direction"] == "down")
        order = np.argsort(a)
        i = np.clip(np.searchsorted(a[order], arcs), 0, len(a) - 1)
        hit = a[order][i] == arcs
        cap[hit] = lk["capacity_gbps"][order[i[hit]]]
    return cap


def _nic_labels(fabric: Any, names: np.ndarray) -> dict[str, np.ndarray]:
    """PORT_LABELS of NIC ports given by node name (their access link's NIC end)."""
    if fabric is None:
        blank = np.full(len(names), "", dtype=object)
        return {k: (names.astype(object) if k == "device" else blank) for k in PORT_LABELS}
    from aifabric.telemetry.catalog import port_labels
    from aifabric.topology.fabric import LinkKind

    nodes = np.array([fabric.node_id(str(n)) if fabric.has_node(str(n)) else -1
                      for n in names], dtype=np.int64)
    if (nodes < 0).any():
        raise SpecError(Problem("--scenario", f"the run has NIC {names[nodes < 0][0]} that "
                                "the scenario's fabric lacks; allowed: the scenario the run "
                                "was simulated from"))
    acc = np.flatnonzero(fabric.links.kind == LinkKind.ACCESS)
    a = fabric.links.a[acc]
    srt = np.argsort(a, kind="stable")
    i = np.searchsorted(a[srt], nodes)
    return port_labels(fabric, acc[srt][np.clip(i, 0, len(acc) - 1)], 0)


def _qp_families(tables: dict[str, Table], fabric: Any) -> list[Family]:
    fl, fct = tables.get("packet_flows"), tables.get("packet_fct")
    if fl is None or fct is None or not len(fl["time_ns"]) or not len(fct["qp"]):
        return []
    times, ti = np.unique(fl["time_ns"], return_inverse=True)
    qp = fl["qp"].astype(np.int64)
    src_of = np.full(int(max(qp.max(), fct["qp"].max())) + 1, -1, np.int64)
    nics, nic_idx = np.unique(fct["src"].astype(str), return_inverse=True)
    src_of[fct["qp"].astype(np.int64)] = nic_idx
    lab = _nic_labels(fabric, nics)
    out = []
    for name, col in (("aifabric_cnp_received_total", "cnps"),
                      ("aifabric_retransmitted_bytes_total", "retx_bytes")):
        # cumulative per QP; a QP's rows stop once it is done: carry its last value on
        uq, qi = np.unique(qp, return_inverse=True)
        m = np.full((len(times), len(uq)), np.nan)
        m[ti, qi] = fl[col]
        have = ~np.isnan(m)
        last = np.where(have, np.arange(len(times))[:, None], 0)
        np.maximum.accumulate(last, axis=0, out=last)
        m = np.where(np.maximum.accumulate(have, axis=0), m[last, np.arange(len(uq))], 0.0)
        owner = src_of[uq]
        per_nic = np.zeros((len(times), len(nics)))
        np.add.at(per_nic.T, owner[owner >= 0], m.T[owner >= 0])
        series = np.tile(np.arange(len(nics)), len(times))
        out.append(family(name, lab, series, np.repeat(times, len(nics)), per_nic.ravel()))
    return out


def _grid(tl: Table, tr: Table | None, step_ns: float) -> np.ndarray:
    """Sample times of the timeline's series: every interval start, the end of the run and
    a regular step between (so no gap is longer than ``step_ns``; at most
    :data:`GRID_MAX` regular points)."""
    ends = [tl["end_ns"]]
    if tr is not None:
        ends.append(tr["end_ns"][np.isfinite(tr["end_ns"])])
    span = float(max(np.max(e, initial=0.0) for e in ends))
    step = max(step_ns, span / GRID_MAX)
    return np.unique(np.concatenate([[0.0, span], tl["start_ns"], np.arange(0.0, span, step)]))


def _progress(start: np.ndarray, end: np.ndarray, moved: np.ndarray,
              t: np.ndarray) -> np.ndarray:
    """Bytes delivered by each time ``t`` when every transfer moves its bytes at a constant
    rate from its start to its end (one that never finished delivers nothing): a piecewise
    linear function, evaluated at its breakpoints by cumulative sums."""
    ok = np.isfinite(start) & np.isfinite(end)
    s, e, m = start[ok], np.maximum(end[ok], start[ok]), moved[ok]
    dur = e - s
    jump = dur == 0
    slope = np.where(jump, 0.0, m / np.where(jump, 1.0, dur))
    x = np.concatenate([s, e])
    order = np.argsort(x, kind="stable")
    x = x[order]
    dslope = np.concatenate([slope, -slope])[order]
    djump = np.concatenate([np.where(jump, m, 0.0), np.zeros(len(s))])[order]
    slope_after = np.cumsum(dslope)
    # F(x_k) after event k: F(x_{k-1}) + slope after k-1 times the gap, plus jumps at x_k
    gain = np.concatenate([[0.0], slope_after[:-1] * np.diff(x)])
    f_at = np.cumsum(gain + djump)
    k = np.searchsorted(x, t, side="right") - 1
    before = k < 0
    kk = np.clip(k, 0, None)
    val = f_at[kk] + slope_after[kk] * (t - x[kk]) if len(x) else np.zeros(len(t))
    return np.where(before, 0.0, val)


def _timeline_families(tables: dict[str, Table], step_ns: float) -> list[Family]:
    tl = tables.get("timeline")
    if tl is None or not len(tl["start_ns"]):
        return []
    out = []
    co, tr = tables.get("collectives"), tables.get("transfers")
    grid = _grid(tl, tr, step_ns)
    cols = [c for c in tl if c.endswith(("_up_util", "_down_util"))]
    if cols:
        # the utilization of the interval each grid time falls in (0 between intervals)
        k = np.searchsorted(tl["start_ns"], grid, side="right") - 1
        inside = (k >= 0) & (grid < tl["end_ns"][np.clip(k, 0, None)])
        vals = np.stack([np.where(inside, tl[c][np.clip(k, 0, None)], 0.0) for c in cols])
        tier = np.array([c.rsplit("_", 2)[0] for c in cols], dtype=object)
        direction = np.array([c.rsplit("_", 2)[1] for c in cols], dtype=object)
        out.append(family("aifabric_tier_utilization_ratio",
                           {"tier": tier, "direction": direction},
                           np.repeat(np.arange(len(cols)), len(grid)),
                           np.tile(grid, len(cols)), vals.ravel()))
    if co is not None and tr is not None and len(co["collective"]):
        c = tr["collective"]
        moved = tr["size_bytes"] * np.nan_to_num(tr["repeat"], nan=1.0)
        nc = len(co["collective"])
        vals = np.zeros((nc, len(grid)))
        for j in range(nc):  # a loop over collectives (a handful), not samples
            mine = c == j
            total = moved[mine].sum()
            if total > 0:
                vals[j] = _progress(tr["start_ns"][mine], tr["end_ns"][mine], moved[mine],
                                    grid) / total
        out.append(family("aifabric_collective_progress_ratio",
                           {"collective": co["collective"], "training_job": co["job"],
                            "op": co["op"]},
                           np.repeat(np.arange(nc), len(grid)), np.tile(grid, nc),
                           np.clip(vals, 0.0, 1.0).ravel()))
    return out


def run_families(tables: dict[str, Table], fabric: Any = None,
                 step_ns: float = GRID_STEP_S * 1e9 / DEFAULT_TIME_SCALE) -> list[Family]:
    """The metric families of a run's tables (:func:`read_run`), in catalog order;
    ``fabric``: the run's fabric, for full port labels (see the module docstring);
    ``step_ns``: the longest gap between samples of the timeline's series."""
    if fabric is not None:
        check_fabric(tables, fabric)
    fams = _timeline_families(tables, step_ns)
    fams += collective_link_families(tables, fabric, step_ns)
    if "packet_queues" in tables:
        fams += _packet_families(tables, arc_label_source(tables, fabric), fabric)
    rank = {m.name: i for i, m in enumerate(CATALOG)}
    return sorted(fams, key=lambda f: rank[f.metric.name])


def parse_start(text: str) -> float:
    """``--start``: ISO 8601 (``2026-01-01T00:00:00Z``; no zone = UTC) or Unix seconds,
    as Unix seconds."""
    bad = SpecError(Problem("--start", f"{text!r} is not a time; allowed: ISO 8601 like "
                            "2026-01-01T00:00:00Z, or Unix seconds from 0 to 1e11"))
    try:
        t = float(text)
    except ValueError:
        try:
            d = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise bad from None
        t = (d if d.tzinfo else d.replace(tzinfo=UTC)).timestamp()
    if not 0 <= t <= 1e11:  # nan, inf and times Prometheus cannot hold
        raise bad
    return t


def _escape(v: np.ndarray) -> np.ndarray:
    s = v.astype(str)
    if any(np.char.find(s, ch).max(initial=-1) >= 0 for ch in ('\\', '"', "\n")):
        s = np.char.replace(np.char.replace(np.char.replace(s, "\\", "\\\\"), '"', '\\"'),
                            "\n", "\\n")
    return s.astype(object)


def _label_strings(labels: dict[str, np.ndarray], names: tuple[str, ...], n: int) -> np.ndarray:
    """``{a="x",b="y"}`` per series (empty values left out), as an object array."""
    out = np.full(n, "", dtype=object)
    for k in names:
        v = _escape(np.asarray(labels[k]))
        out = out + np.where(v == "", "", f'{k}="' + v + '",')
    # each pair ends with '",', so the only commas stripped are the last pair's (a value
    # holding ",}" is left as it is)
    out = np.char.rstrip(out.astype(str), ",").astype(object)
    return np.where(out == "", "", "{" + out + "}").astype(object)


def _bytes_table(strs: list[bytes] | np.ndarray) -> np.ndarray:
    """Byte strings as a NUL-padded uint8 matrix, one row each (text never holds NUL)."""
    a = np.asarray(strs, dtype=np.bytes_)
    return a.view(np.uint8).reshape(len(a), a.dtype.itemsize)


def _values(v: np.ndarray) -> np.ndarray:
    """Sample values as a padded byte matrix (one row per sample): whole numbers as
    integers, others as numpy's shortest repr that reads back to the same float; each
    distinct value formatted once."""
    uv, inv = np.unique(v, return_inverse=True)
    whole = np.isfinite(uv) & (uv == np.round(uv)) & (np.abs(uv) < 2**53)
    out = np.empty(len(uv), dtype=object)
    out[whole] = uv[whole].astype(np.int64).astype(np.bytes_)
    if (~whole).any():
        out[~whole] = uv[~whole].astype(np.bytes_)
    return _bytes_table(out.tolist())[inv]


def render_bytes(families: list[Family], *, start_s: float,
                 time_scale: float = DEFAULT_TIME_SCALE, fmt: str = "openmetrics") -> bytes:
    """:func:`render`, UTF-8 encoded. Each sample line is assembled from three padded
    byte matrices (series prefix, value, timestamp) whose padding is then dropped: no
    Python work per sample."""
    parts: list[bytes] = []
    start_ms = round(start_s * 1000)
    for f in families:
        m = f.metric
        nz = np.zeros(len(next(iter(f.labels.values()))), bool)
        np.logical_or.at(nz, f.series, f.value != 0)
        keep = nz[f.series]
        s, t, v = f.series[keep], f.t_ns[keep], f.value[keep]
        if fmt == "openmetrics":
            head = f"# TYPE {m.family} {m.type}\n"
            if m.unit:
                head += f"# UNIT {m.family} {m.unit}\n"
            head += f"# HELP {m.family} {m.help}\n"
        else:
            head = f"# HELP {m.name} {m.help}\n# TYPE {m.name} {m.type}\n"
        parts.append(head.encode())
        if not len(s):
            continue
        order = np.lexsort((t, s))
        s, t, v = s[order], t[order], v[order]
        ut, ti = np.unique(t, return_inverse=True)
        ms = start_ms + np.round(ut * time_scale / 1e6).astype(np.int64)
        tms = ms[ti]
        # samples of a series that land on the same millisecond: the last one stays
        last = np.ones(len(s), bool)
        last[:-1] = (s[1:] != s[:-1]) | (tms[1:] != tms[:-1])
        s, v, ti = s[last], v[last], ti[last]
        if fmt == "openmetrics":
            stamp = [f" {x // 1000}.{x % 1000:03d}\n".encode() for x in ms.tolist()]
        else:
            stamp = [f" {x}\n".encode() for x in ms.tolist()]
        labels = _label_strings(f.labels, m.labels, len(nz))
        prefix = [f"{m.name}{x} ".encode() for x in labels.tolist()]  # per series
        rows = np.concatenate([_bytes_table(prefix)[s], _values(v), _bytes_table(stamp)[ti]],
                              axis=1)
        parts.append(rows[rows != 0].tobytes())
    if fmt == "openmetrics":
        parts.append(b"# EOF\n")
    return b"".join(parts)


def render(families: list[Family], *, start_s: float, time_scale: float = DEFAULT_TIME_SCALE,
           fmt: str = "openmetrics") -> str:
    """The families as text: ``openmetrics`` (what ``promtool tsdb create-blocks-from
    openmetrics`` imports: TYPE/UNIT/HELP lines, timestamps in seconds, ``# EOF``) or
    ``prometheus`` (the text exposition format 0.0.4 that ``promtool check metrics``
    reads: timestamps in milliseconds). Series that are 0 at every sample are left out;
    each series' samples are in time order."""
    return render_bytes(families, start_s=start_s, time_scale=time_scale,
                        fmt=fmt).decode("utf-8")


def run_to_text(run_dir: str | Path, *, fabric: Any = None, start_s: float | None = None,
                time_scale: float = DEFAULT_TIME_SCALE, fmt: str = "openmetrics") -> str:
    """:func:`read_run` + :func:`run_families` + :func:`render` (``start_s`` None:
    :data:`DEFAULT_START`)."""
    start = parse_start(DEFAULT_START) if start_s is None else start_s
    fams = run_families(read_run(run_dir), fabric, GRID_STEP_S * 1e9 / time_scale)
    return render(fams, start_s=start,
                  time_scale=time_scale, fmt=fmt)
