"""The analytic model: alpha-beta closed forms on the fabric's bottleneck bandwidth.

Every collective is a sequence of steps; a step costs ``alpha + bytes / B`` where
alpha is the one-way latency of the path and B the bandwidth a transfer gets when the
network core is ideal (non-blocking, no ECMP collisions) and only the host side is
shared: NVLink, PCIe and the NIC ports. This is the baseline the flow engine is checked
against; the difference between the two is what the network's core costs.

:func:`closed_form` gives the textbook formulae (time of one collective from n, S, B,
alpha); :func:`run_analytic` applies the same step model to every stage of a DAG on a
real fabric (the bottleneck bandwidth of each step from its paths) and returns the same
raw results as the flow engine, so both feed one set of tables.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from aifabric.sim.flow.engine import FlowRun, Paths
from aifabric.workload.collectives.tree import binary_tree
from aifabric.workload.dag import COMPUTE, TransferDAG

__all__ = ["closed_form", "conn_matrix", "run_analytic", "solo_gbps"]


def closed_form(op: str, algorithm: str, n: int, size_bytes: float, bw_gbps: float,
                alpha_ns: float = 0.0, *, channels: int = 1, hosts: int = 1,
                intra_gbps: float | None = None, chunk_bytes: float = 4 << 20) -> float:
    """Time in ns of one collective by the alpha-beta model.

    ``bw_gbps`` is the bandwidth of one channel's transfer (for hierarchical: the
    inter-host bandwidth per rail); ``channels`` parallel rings split the buffer.
    ``hosts`` and ``intra_gbps`` (NVLink per GPU) are for ``hierarchical``.
    """
    if n < 2:
        return 0.0
    b = bw_gbps / 8.0  # bytes per ns
    s = size_bytes
    if op == "allreduce" and algorithm == "ring":
        return 2 * (n - 1) * (alpha_ns + s / (n * channels) / b)
    if op in ("reduce_scatter", "allgather") and algorithm == "ring":
        return (n - 1) * (alpha_ns + s / (n * channels) / b)
    if algorithm == "halving_doubling":
        steps = int(math.log2(n))
        one = steps * alpha_ns + (n - 1) / n * s / b
        return 2 * one if op == "allreduce" else one
    if op == "allreduce" and algorithm == "tree":
        # two trees of S/2 in chunks; after the pipe fills, every tree edge moves one
        # chunk up and one down per step, so the busiest GPU moves c chunks per step
        half = s / 2
        k = max(1, math.ceil(half / chunk_bytes))
        par, dep = binary_tree(n)
        kids = np.bincount(par[par >= 0], minlength=n)
        per_tree = kids + (par >= 0)  # chunks a GPU sends (= receives) per step
        c = int((per_tree + per_tree[::-1]).max())  # tree 2 is tree 1 on reversed ranks
        # latency: every step of the pipe; bandwidth: the k full steps (the fill and drain
        # steps move less, by at most (2 depth - 1) steps' worth: see tree_fill_ns)
        steps = k + 2 * int(dep.max()) - 1
        return steps * alpha_ns + k * c * (half / k) / b
    if op == "allreduce" and algorithm == "hierarchical":
        k = n // hosts
        bi = (intra_gbps if intra_gbps is not None else bw_gbps) / 8.0
        intra = 2 * (k - 1) * (alpha_ns + s / k / bi) if k > 1 else 0.0
        m = hosts
        inter = 2 * (m - 1) * (alpha_ns + s / k / (m * channels) / b) if m > 1 else 0.0
        return intra + inter
    if op == "alltoall":
        return alpha_ns + (n - 1) / n * s / b
    if op == "broadcast":
        k = max(1, math.ceil(s / chunk_bytes))
        return (k + n - 2) * (alpha_ns + s / k / b)
    if op == "p2p":
        return alpha_ns + s / b
    raise ValueError(f"no closed form for {op}/{algorithm}")


def conn_matrix(paths: Paths) -> sp.csr_matrix:
    """(n_conns x n_arcs): fraction of a connection's bytes on each arc (QPs split evenly)."""
    nq = np.diff(paths.conn_ptr)
    conn_of_row = np.repeat(np.arange(paths.n_conns), nq)
    agg = sp.csr_matrix((1.0 / nq[conn_of_row], (conn_of_row, np.arange(len(conn_of_row)))),
                        shape=(paths.n_conns, paths.incidence.shape[0]))
    out = (agg @ paths.incidence).tocsr()
    out.sort_indices()
    return out


def solo_gbps(w: sp.csr_matrix, capacity_gbps: np.ndarray) -> np.ndarray:
    """Rate of each connection alone on the fabric: min over its arcs of capacity / fraction."""
    ratio = capacity_gbps[w.indices] / w.data
    out = np.full(w.shape[0], np.inf)
    nz = np.diff(w.indptr) > 0
    out[nz] = np.minimum.reduceat(ratio, w.indptr[:-1][nz])
    return out


def run_analytic(dag: TransferDAG, paths: Paths, xfer_conn: np.ndarray,
                 edge_arc: np.ndarray, *, arc_group: np.ndarray | None = None,
                 n_groups: int = 1) -> FlowRun:
    """Alpha-beta time of every stage, then the DAG's critical path.

    A step of a stage takes ``max latency + max(bytes on a host-side arc / its capacity,
    bytes of a transfer / its solo rate)``: host-side arcs (``edge_arc`` true: NVLink,
    PCIe, NIC ports) are shared by the step's transfers, the core is ideal.
    """
    cap = np.asarray(paths.capacity_gbps, dtype=np.float64)
    w = conn_matrix(paths)
    solo = solo_gbps(w, cap)
    n_arcs = len(cap)
    group = np.zeros(n_arcs, dtype=np.int64) if arc_group is None else arc_group
    S, T = dag.n_stages, dag.n_transfers
    step_ns = np.zeros(S)
    x_rate = np.full(T, np.nan)
    x_bott = np.full(T, -1, dtype=np.int64)
    arc_bytes = np.zeros(n_arcs)
    arc_peak = np.zeros(n_arcs)
    stage_arc_load: list[tuple[int, np.ndarray, np.ndarray]] = []
    for s in range(S):  # per stage, vectorised over its transfers
        if dag.stage_kind[s] == COMPUTE:
            step_ns[s] = dag.duration_ns[s]
            continue
        xs = np.arange(dag.xfer_ptr[s], dag.xfer_ptr[s + 1])
        if not len(xs):
            continue
        conns = xfer_conn[xs]
        size = dag.size_bytes[xs]
        uc, cinv = np.unique(conns, return_inverse=True)
        byconn = np.bincount(cinv, weights=size)  # bytes per step per connection
        sub = w[uc]
        ent_val = sub.data * np.repeat(byconn, np.diff(sub.indptr))
        arcs_u, ainv = np.unique(sub.indices, return_inverse=True)
        arc_load = np.bincount(ainv, weights=ent_val)  # bytes per step on each arc used
        t_edge = arc_load / (cap[arcs_u] / 8.0)
        host_side = edge_arc[arcs_u]
        t_solo = size / (solo[conns] / 8.0)
        t_host = float(t_edge[host_side].max()) if host_side.any() else 0.0
        t_net = float(t_solo.max())
        beta = max(t_host, t_net)
        alpha = float(paths.latency_ns[conns].max())
        step_ns[s] = dag.repeat[s] * (alpha + beta)
        # the rate each transfer gets: bytes over the step's bandwidth time
        x_rate[xs] = size / beta * 8.0 if beta > 0 else np.inf
        if t_host >= t_net and host_side.any():
            hs = np.flatnonzero(host_side)
            x_bott[xs] = arcs_u[hs[np.argmax(t_edge[hs])]]
        else:  # each transfer's own narrowest arc
            ratio = sub.data / cap[sub.indices]
            rows = np.repeat(np.arange(len(uc)), np.diff(sub.indptr))
            order = np.lexsort((-ratio, rows))
            first = np.unique(rows[order], return_index=True)[1]
            narrow = np.full(len(uc), -1, dtype=np.int64)
            narrow[np.unique(rows)] = sub.indices[order][first]
            x_bott[xs] = narrow[cinv]
        total = arc_load * dag.repeat[s]
        arc_bytes[arcs_u] += total
        if beta > 0:
            np.maximum.at(arc_peak, arcs_u, arc_load / beta * 8.0)
        stage_arc_load.append((s, arcs_u, total))
    start, end = dag.critical_path_ns(step_ns)
    xs_stage = dag.xfer_stage
    tl_t, tl_g = [], []
    for s, idx, byt in stage_arc_load:
        if end[s] > start[s]:
            tl_t.append((start[s], end[s]))
            tl_g.append(np.bincount(group[idx], weights=byt, minlength=n_groups))
    return FlowRun(
        stage_start_ns=start, stage_end_ns=end, xfer_start_ns=start[xs_stage],
        xfer_end_ns=end[xs_stage], xfer_min_rate_gbps=x_rate, xfer_bottleneck_arc=x_bott,
        arc_bytes=arc_bytes, arc_peak_gbps=arc_peak,
        timeline_ns=np.array(tl_t, dtype=np.float64).reshape(-1, 2),
        timeline_group_bytes=np.array(tl_g, dtype=np.float64).reshape(len(tl_t), n_groups),
        events=S, rate_solves=0, reps_skipped=0)
