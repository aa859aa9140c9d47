"""One set of result tables for every simulator (analytic, flow, later packet and lab).

A simulator hands back raw arrays (:class:`~aifabric.sim.flow.engine.FlowRun`); this
module turns them into tidy tables — one row per collective, job, transfer, used link
direction and timeline interval — and a JSON-ready summary. The report and the CLI read
only these, so a new simulator plugs in by producing the same raw arrays.

Conventions (nccl-tests): algbw = size / time, busbw = algbw x factor
(2(n-1)/n for AllReduce, (n-1)/n for AllGather/ReduceScatter/All-to-All), in GB/s
(10^9 bytes/s; a byte per ns). ``*_gbps`` columns are Gbit/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.sim.flow.engine import FlowRun, Paths
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind
from aifabric.workload.dag import COMPUTE, TransferDAG

__all__ = ["SimResult", "arc_groups", "build_result", "collective_links", "needs_attention"]

Table = dict[str, np.ndarray]


def arc_groups(f: Fabric) -> tuple[np.ndarray, list[str]]:
    """Group of each arc (tier x direction) and the group names."""
    names = []
    for k in LinkKind:
        for d in ("up", "down"):
            names.append(f"{k.label} {d}")
    g = np.repeat(f.links.kind.astype(np.int64) * 2, 2) + np.tile([0, 1], f.n_links)
    return g, names


@dataclass
class SimResult:
    """Tables and summary of one simulated scenario."""

    scenario: str
    sim: str
    fabric: str
    makespan_ns: float
    tables: dict[str, Table]
    summary: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else 0.0


def build_result(scenario: str, sim: str, f: Fabric, dag: TransferDAG, run: FlowRun,
                 *, job_gpus: list[np.ndarray], iterations: list[int],
                 extra: dict[str, Any] | None = None,
                 sharp: dict[int, np.ndarray] | None = None) -> SimResult:
    """Turn a simulator's raw arrays into the shared tables and summary; ``sharp``: the
    SHARP stages' arcs (stage -> the arc each of its first transfers is)."""
    valid = np.isfinite(run.stage_end_ns)  # stages that finished
    makespan = _makespan_ns(run, valid)
    collectives = _collectives_table(dag, run, valid)
    jobs = _jobs_table(f, dag, run, valid, job_gpus, iterations, sharp)
    groups, gnames = arc_groups(f)
    links = _links_table(f, run, groups, gnames, makespan)
    transfers = _transfers_table(f, dag, run, groups, gnames)
    # per tier, the capacity (bytes per ns) of the links that carried traffic
    used = np.flatnonzero(run.arc_bytes > 0)
    cap = f.arcs[2]
    g_cap = np.bincount(groups[used], weights=cap[used] / 8.0, minlength=len(gnames))
    timeline = _timeline_table(run, g_cap, gnames)

    nc, nj = len(dag.collectives), len(dag.jobs)
    coll = dag.collectives
    top_colls = [i for i in range(nc) if coll[i].job < 0] or list(range(min(nc, 20)))
    summary: dict[str, Any] = {
        "scenario": scenario, "sim": sim, "fabric": f.name, "makespan_ns": makespan,
        "collectives": [{k: _py(collectives[k][i]) for k in collectives} for i in top_colls],
        # how many there are in all (the list above may hold the first few only; the
        # collectives table has every one)
        "collectives_total": nc,
        "jobs": [{k: _py(jobs[k][i]) for k in jobs} for i in range(nj)],
        "tiers": _tier_summary(links, groups[used], g_cap, gnames),
        "slowest_transfers": _slowest_transfers(run, transfers),
        "hot_links": _hot_links(links),
        "two_port": two_port_imbalance(f, run.arc_bytes),
        "finished": bool(valid.all()),
        "transfers_undelivered": int((~np.isfinite(run.xfer_end_ns)).sum()),
        "engine": {"events": run.events, "rate_solves": run.rate_solves,
                   "repetitions_reused": run.reps_skipped, "stages": dag.n_stages,
                   "transfers": dag.n_transfers},
    }
    if extra:
        summary.update(extra)
    return SimResult(scenario, sim, f.name, makespan,
                     {"collectives": collectives, "jobs": jobs, "transfers": transfers,
                      "links": links, "timeline": timeline}, summary,
                     meta={"two_port_ratios": two_port_ratios(f, run.arc_bytes)})


def _makespan_ns(run: FlowRun, valid: np.ndarray) -> float:
    """How far the run got, in ns: the last stage end, or, when stages never finished (a
    deadlock, a run cut short), the latest of the stage ends, the deliveries and the end
    of the last interval it simulated."""
    end = run.stage_end_ns
    tl_end = float(run.timeline_ns[:, 1].max()) if len(run.timeline_ns) else 0.0
    done_x = np.isfinite(run.xfer_end_ns)
    ends = [end[valid]] if valid.all() else [end[valid], run.xfer_end_ns[done_x], [tl_end]]
    return max((float(np.max(e)) for e in ends if len(e)), default=0.0)


def _collectives_table(dag: TransferDAG, run: FlowRun, valid: np.ndarray) -> Table:
    """One row per collective: start and end (ns; end NaN while any of its stages is
    unfinished), time (ns), algbw and busbw (GB/s, nccl-tests conventions) and busbw in
    Gb/s."""
    start, end = run.stage_start_ns, run.stage_end_ns
    nc = len(dag.collectives)
    c_start = np.full(nc, np.inf)
    c_end = np.full(nc, -np.inf)
    has = (dag.stage_coll >= 0) & valid
    # a collective starts with its first stage, finished or not (a deadlocked one started)
    began = (dag.stage_coll >= 0) & np.isfinite(start)
    np.minimum.at(c_start, dag.stage_coll[began], start[began])
    np.maximum.at(c_end, dag.stage_coll[has], end[has])
    coll = dag.collectives
    c_size = np.array([c.size_bytes for c in coll], dtype=np.float64)
    # a collective is finished when every one of its stages is; else no time, no bandwidth
    c_open = np.zeros(nc, dtype=bool)
    c_open[dag.stage_coll[(dag.stage_coll >= 0) & ~valid]] = True
    c_end = np.where(c_open, np.nan, c_end)
    c_time = np.maximum(c_end - c_start, 0.0) if nc else np.zeros(0)
    c_alg = np.divide(c_size, c_time, out=np.where(c_open, np.nan, 0.0), where=c_time > 0)
    c_bus = c_alg * np.array([c.busbw_factor for c in coll]) if nc else np.zeros(0)
    return {
        "collective": np.array([c.name for c in coll], dtype=object),
        "job": np.array([dag.jobs[c.job] if c.job >= 0 else "" for c in coll], dtype=object),
        "op": np.array([c.op for c in coll], dtype=object),
        "algorithm": np.array([c.algorithm for c in coll], dtype=object),
        "gpus": np.array([c.n_gpus for c in coll], dtype=np.int64),
        "size_bytes": c_size.astype(np.int64),
        "channels": np.array([c.channels for c in coll], dtype=np.int64),
        "start_ns": c_start, "end_ns": c_end, "time_ns": c_time,
        "algbw_GBps": c_alg, "busbw_GBps": c_bus, "busbw_gbps": c_bus * 8,
    }


def _sharp_cross(f: Fabric, dag: TransferDAG, sharp: dict[int, np.ndarray],
                 cross_seg: np.ndarray) -> np.ndarray:
    """``cross_seg`` with the SHARP transfers' own answer: such a transfer is one arc of a
    reduction tree carrying its bytes once (its GPU pair is a placeholder), so it
    crosses segments when the arc joins a node of one segment to a node outside it and
    the trees' host links reach more than one segment (a tree inside one segment moves
    nothing between segments, whatever switch is its root)."""
    out = cross_seg.copy()
    src, dst, _ = f.arcs
    seg = f.nodes.segment
    host = f.nodes.host
    for s, arcs in sharp.items():  # SHARP stages: a few per bucket
        arcs = np.asarray(arcs, dtype=np.int64)
        idx = int(dag.xfer_ptr[s]) + np.arange(len(arcs))
        a, b = src[arcs], dst[arcs]
        hosted = np.concatenate([a[host[a] >= 0], b[host[b] >= 0]])
        spans = len(np.unique(seg[hosted])) > 1
        out[idx] = spans & (seg[a] != seg[b])
    return out


def _jobs_table(f: Fabric, dag: TransferDAG, run: FlowRun, valid: np.ndarray,
                job_gpus: list[np.ndarray], iterations: list[int],
                sharp: dict[int, np.ndarray] | None = None) -> Table:
    """One row per job, per iteration: its time (ns; NaN when unfinished), its compute-only
    critical path (ns), the communication exposed beyond it (ns), the bytes its transfers
    move and those that cross segments (a SHARP transfer by its tree arc:
    :func:`_sharp_cross`)."""
    start, end = run.stage_start_ns, run.stage_end_ns
    xs = dag.xfer_stage
    moved = dag.size_bytes * dag.repeat[xs]
    comp = np.where(dag.stage_kind == COMPUTE, dag.duration_ns, 0.0)
    _, comp_end = dag.critical_path_ns(comp)
    seg = f.nodes.segment
    cross_seg = seg[dag.src] != seg[dag.dst] if dag.n_transfers else np.zeros(0, bool)
    if sharp:
        cross_seg = _sharp_cross(f, dag, sharp, cross_seg)
    xjob = dag.stage_job[xs]
    nj = len(dag.jobs)
    j_rows: dict[str, list[Any]] = {k: [] for k in (
        "job", "gpus", "segments", "iterations", "iteration_ns", "compute_ns",
        "exposed_comm_ns", "comm_bytes", "cross_segment_bytes")}
    for j in range(nj):  # jobs, a handful
        st = (dag.stage_job == j) & valid
        t_it = float(end[st].max() - start[st].min()) / iterations[j] if st.any() else 0.0
        if ((dag.stage_job == j) & ~valid).any():
            t_it = np.nan  # the job never finished its iterations
        t_c = float(comp_end[dag.stage_job == j].max()) / iterations[j] if st.any() else 0.0
        mine = xjob == j
        j_rows["job"].append(dag.jobs[j])
        j_rows["gpus"].append(len(job_gpus[j]))
        j_rows["segments"].append(len(np.unique(seg[job_gpus[j]])))
        j_rows["iterations"].append(iterations[j])
        j_rows["iteration_ns"].append(t_it)
        j_rows["compute_ns"].append(t_c)
        j_rows["exposed_comm_ns"].append(max(t_it - t_c, 0.0) if np.isfinite(t_it) else np.nan)
        j_rows["comm_bytes"].append(float(moved[mine].sum()) / iterations[j])
        j_rows["cross_segment_bytes"].append(float(moved[mine & cross_seg].sum())
                                             / iterations[j])
    return {k: np.array(v, dtype=object if k == "job" else None) for k, v in j_rows.items()}

_UP_DOWN = np.array(["up", "down"], dtype=object)  # an arc's direction by its parity
_SHARE_FROM = 4096  # name columns this long share one string per distinct name


def _name_objs(names: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``names[idx]`` as an object array of str, each distinct name made into a Python
    string once (a million transfers name ~100K GPUs: the strings are shared)."""
    idx = np.asarray(idx)
    if len(idx) < _SHARE_FROM:
        return names[idx].astype(object)
    uniq, inv = np.unique(idx, return_inverse=True)
    return names[uniq].astype(object)[inv.reshape(idx.shape)]


def _arc_labels(names: np.ndarray, src_n: np.ndarray, dst_n: np.ndarray,
                arcs: np.ndarray) -> np.ndarray:
    """``"<from> -> <to>"`` of each arc in ``arcs``, as str objects (vectorized)."""
    if not len(arcs):
        return np.zeros(0, dtype=object)
    lab = np.strings.add(np.strings.add(names[src_n[arcs]], " -> "), names[dst_n[arcs]])
    return lab.astype(object)


def _links_table(f: Fabric, run: FlowRun, groups: np.ndarray, gnames: list[str],
                 makespan: float) -> Table:
    """One row per arc (link direction) that carried traffic: its tier, capacity (Gb/s),
    bytes, mean utilization over the makespan (``makespan`` ns), peak utilization and
    how many transfers it was the bottleneck of."""
    names = f.nodes.name
    src_n, dst_n, cap = f.arcs
    used = np.flatnonzero(run.arc_bytes > 0)
    bott = run.xfer_bottleneck_arc
    bott_count = np.bincount(bott[bott >= 0], minlength=len(cap))
    denom = cap[used] / 8.0 * makespan
    return {
        "link": used // 2,
        "direction": _UP_DOWN[used % 2],
        "from": _name_objs(names, src_n[used]),
        "to": _name_objs(names, dst_n[used]),
        "tier": np.array(gnames, dtype=object)[groups[used]],
        "capacity_gbps": cap[used],
        "bytes": run.arc_bytes[used],
        "mean_util": np.divide(run.arc_bytes[used], denom, out=np.zeros(len(used)),
                               where=denom > 0),
        "peak_util": run.arc_peak_gbps[used] / cap[used],
        "bottleneck_of": bott_count[used],
    }


def _transfers_table(f: Fabric, dag: TransferDAG, run: FlowRun, groups: np.ndarray,
                     gnames: list[str]) -> Table:
    """One row per transfer: stage, job, collective, GPUs, size (bytes), repeats, start
    and delivery (ns), lowest rate (Gb/s) and the arc that set it (name and tier; "" when
    none)."""
    names = f.nodes.name
    src_n, dst_n, cap = f.arcs
    xs = dag.xfer_stage
    xjob = dag.stage_job[xs]
    bott = run.xfer_bottleneck_arc
    arc_name = np.full(len(cap), "", dtype=object)
    bu = np.unique(bott[bott >= 0])
    arc_name[bu] = _arc_labels(names, src_n, dst_n, bu)
    transfers: Table = {
        "transfer": np.arange(dag.n_transfers),
        "stage": xs,
        "job": np.array([*dag.jobs, ""], dtype=object)[xjob],
        "collective": dag.stage_coll[xs],
        "src_gpu": _name_objs(names, dag.src),
        "dst_gpu": _name_objs(names, dag.dst),
        "size_bytes": dag.size_bytes,
        "repeat": dag.repeat[xs],
        "start_ns": run.xfer_start_ns,
        "end_ns": run.xfer_end_ns,
        "min_rate_gbps": run.xfer_min_rate_gbps,
        "bottleneck": arc_name[np.maximum(bott, 0)] if len(bott) else np.zeros(0, object),
        "bottleneck_tier": np.where(bott >= 0, np.array(gnames, dtype=object)[
            groups[np.maximum(bott, 0)]], "") if len(bott) else np.zeros(0, object),
    }
    transfers["bottleneck"] = np.where(bott >= 0, transfers["bottleneck"], "")
    return transfers


def _timeline_table(run: FlowRun, g_cap: np.ndarray, gnames: list[str]) -> Table:
    """The utilization timeline: per interval (start, end in ns) the utilization of each
    tier's links that carried traffic (``g_cap``: their capacity per tier, bytes per ns;
    a tier with none has no column)."""
    tl = run.timeline_ns
    dt = (tl[:, 1] - tl[:, 0]) if len(tl) else np.zeros(0)
    tg = run.timeline_group_bytes
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where((dt[:, None] > 0) & (g_cap[None, :] > 0),
                        tg / (dt[:, None] * g_cap[None, :]), 0.0)
    timeline: Table = {"start_ns": tl[:, 0] if len(tl) else np.zeros(0),
                       "end_ns": tl[:, 1] if len(tl) else np.zeros(0)}
    for gi in np.flatnonzero(g_cap > 0):
        timeline[gnames[gi].replace(" ", "_") + "_util"] = util[:, gi]
    return timeline


def _tier_summary(links: Table, link_group: np.ndarray, g_cap: np.ndarray,
                  gnames: list[str]) -> dict[str, dict[str, Any]]:
    """Per tier with links that carried traffic (``link_group``: the tier of each row of
    ``links``): how many, their mean utilization (mean, p50, p99) and highest peak."""
    tiers = {}
    for gi in np.flatnonzero(g_cap > 0):
        sel = link_group == gi
        mu, pu = links["mean_util"][sel], links["peak_util"][sel]
        tiers[gnames[gi]] = {"links": int(sel.sum()), "mean_util": float(mu.mean()),
                             "p50_mean_util": _pct(mu, 50), "p99_mean_util": _pct(mu, 99),
                             "max_peak_util": float(pu.max())}
    return tiers


def _slowest_transfers(run: FlowRun, transfers: Table) -> list[dict[str, Any]]:
    """The 10 transfers with the lowest rate (Gb/s) and the link that held each back."""
    order = np.argsort(np.where(np.isnan(run.xfer_min_rate_gbps), np.inf,
                                run.xfer_min_rate_gbps), kind="stable")[:10]
    return [{"src": str(transfers["src_gpu"][i]), "dst": str(transfers["dst_gpu"][i]),
             "job": str(transfers["job"][i]),
             "min_rate_gbps": float(run.xfer_min_rate_gbps[i]),
             "bottleneck": str(transfers["bottleneck"][i]),
             "tier": str(transfers["bottleneck_tier"][i])} for i in order]


def _hot_links(links: Table) -> list[dict[str, Any]]:
    """Up to 10 links that were the bottleneck of the most transfers, with their
    utilization."""
    hot = np.argsort(-links["bottleneck_of"], kind="stable")[:10]
    return [{"link": f"{links['from'][i]} -> {links['to'][i]}",
             "tier": str(links["tier"][i]), "bottleneck_of": int(links["bottleneck_of"][i]),
             "mean_util": float(links["mean_util"][i]),
             "peak_util": float(links["peak_util"][i])}
            for i in hot if links["bottleneck_of"][i] > 0]


def collective_links(f: Fabric, dag: TransferDAG, paths: Paths, xfer_conn: np.ndarray
                     ) -> Table:
    """The ``collective_links`` table: one row per (collective, link direction) that the
    collective's transfers cross, with the bytes it puts there (repeats included; a
    transfer's bytes split evenly over its connection's QPs, as the simulators send
    them, each QP's share spread over its arcs by the routed fractions; rounded to whole
    bytes, rows under half a byte left out). Link naming as in the ``links`` table.
    Sparse products (collectives x connections x flows x arcs), no loop over transfers,
    flows or arcs."""
    import scipy.sparse as sp

    names = f.nodes.name
    src_n, dst_n, cap = f.arcs
    xc = dag.stage_coll[dag.xfer_stage] if dag.n_transfers else np.zeros(0, np.int64)
    nc = len(dag.collectives)
    inc = sp.csr_matrix(paths.incidence)
    ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
    n_conn, n_flows = len(ptr) - 1, inc.shape[0]
    nq = np.diff(ptr)
    mine = xc >= 0
    # bytes of each collective per connection, then per QP (flow), then per arc
    moved = (dag.size_bytes * dag.repeat[dag.xfer_stage]).astype(np.float64)
    per_q = np.divide(moved[mine], nq[xfer_conn[mine]], out=np.zeros(int(mine.sum())),
                      where=nq[xfer_conn[mine]] > 0)
    cb = sp.csr_matrix((per_q, (xc[mine], xfer_conn[mine])), shape=(nc, n_conn))
    flow_conn = np.repeat(np.arange(n_conn), nq)
    qf = sp.csr_matrix((np.ones(n_flows), (flow_conn, np.arange(n_flows))),
                       shape=(n_conn, n_flows))
    m = sp.csr_matrix((cb @ qf) @ inc)
    m.sum_duplicates()
    m.data = np.round(m.data)
    m.eliminate_zeros()
    m.sort_indices()
    coll = np.repeat(np.arange(nc), np.diff(m.indptr))
    arc = m.indices.astype(np.int64)
    groups, gnames = arc_groups(f)
    c_names = np.array([c.name for c in dag.collectives], dtype=object)
    c_jobs = np.array([dag.jobs[c.job] if c.job >= 0 else "" for c in dag.collectives],
                      dtype=object)
    return {
        "collective": c_names[coll] if nc else np.zeros(0, object),
        "job": c_jobs[coll] if nc else np.zeros(0, object),
        "link": arc // 2,
        "direction": _UP_DOWN[arc % 2],
        "from": _name_objs(names, src_n[arc]),
        "to": _name_objs(names, dst_n[arc]),
        "tier": np.array(gnames, dtype=object)[groups[arc]],
        # whole numbers as integers: the csv writer formats floats 20x slower
        "capacity_gbps": (cap[arc].astype(np.int64) if (cap == np.round(cap)).all()
                          else cap[arc]),
        "bytes": m.data.astype(np.int64),
    }


def needs_attention(summary: dict[str, Any]) -> list[str]:
    """Why a run that produced results still calls for a look (the CLI then exits 1): it
    did not finish (a deadlock, a run cut short: ``finished`` false) or it raised alarms
    (any ``alarms`` line or deadlock a simulator reports, whatever their kind). Empty for a
    clean run."""
    out = []
    if not summary.get("finished", True):
        out.append(f"unfinished ({summary.get('transfers_undelivered', 0):,} transfers "
                   "undelivered)")
    alarms = list(summary.get("alarms") or [])
    for part in summary.values():
        if isinstance(part, dict):
            alarms += list(part.get("alarms") or [])
            if not part.get("alarms") and part.get("deadlocks"):
                alarms.append("deadlock")
    if alarms:
        out.append(f"{len(alarms)} alarm{'s' if len(alarms) != 1 else ''}")
    return out


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def two_port_ratios(f: Fabric, arc_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """Per dual-port NIC that carried traffic: busier port's bytes / other port's
    (inf when one port carried nothing), for sending (up) and receiving (down)."""
    links = f.links
    acc = np.flatnonzero(links.kind == LinkKind.ACCESS)
    nic = links.a[acc]
    nodes = f.nodes
    ok = nodes.kind[nic] == NodeKind.NIC
    acc, nic = acc[ok], nic[ok]
    if not len(acc) or f.spec.hosts.ports_per_nic < 2:
        return {"up": np.zeros(0), "down": np.zeros(0)}
    key = nodes.host[nic].astype(np.int64) * (int(nodes.rail[nic].max()) + 1) + nodes.rail[nic]
    side = nodes.side[nic].astype(np.int64)
    out = {}
    for name, off in (("up", 0), ("down", 1)):
        m = np.zeros((int(key.max()) + 1, 2))
        np.add.at(m, (key, np.minimum(side, 1)), arc_bytes[2 * acc + off])
        m = m[m.sum(axis=1) > 0]
        hi, lo = m.max(axis=1), m.min(axis=1)
        with np.errstate(divide="ignore"):
            out[name] = np.where(lo > 0, hi / np.where(lo > 0, lo, 1), np.inf)
    return out


def two_port_imbalance(f: Fabric, arc_bytes: np.ndarray) -> dict[str, Any]:
    """Summary of :func:`two_port_ratios`: NICs, median and max ratio, one-port-idle NICs."""
    r = two_port_ratios(f, arc_bytes)
    out: dict[str, Any] = {}
    for k, v in r.items():
        fin = v[np.isfinite(v)]
        out[k] = {"nics": len(v), "median_ratio": _pct(fin, 50) if len(fin) else None,
                  "max_ratio": float(fin.max()) if len(fin) else None,
                  "one_port_idle": int(np.isinf(v).sum())}
    return out
