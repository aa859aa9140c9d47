"""busbw never beats the wires: an invariant over every example scenario and simulator.

nccl-tests defines busbw = algbw x factor (2(n-1)/n for AllReduce, (n-1)/n for
AllGather, ReduceScatter and All-to-All, 1 otherwise), n the GPUs of one group. A
collective of size S that ran for T moved, through every arc of the fabric, at most
capacity x T. So T >= T_min = max over the host-side arcs it crosses (NVLink, PCIe, NIC
ports: the ones every simulator shares the way the wires do) of
bytes-of-the-collective-on-the-arc / capacity, and

    busbw <= factor(op, n) x S / T_min.

For a ring inside one host this is the NVLink (scale-up) rate of a GPU; for rings
across hosts it is the NIC line rate the ring's GPUs send at: the line rate of the
slowest link class the collective crosses, derived from the Fabric's link capacities
and the routed paths, not a number written here. ``n`` is found from the transfers
themselves (the size of a connected group of GPUs), not from the code under test.

Packet-level runs of the example scenarios take minutes, so for ``sim: packet`` every
transfer (and each collective's size with it) is scaled down by one common factor to at
most ``PACKET_MAX_TRANSFER_BYTES``; a job, a collective or a traffic pattern uses at
most ``PACKET_MAX_GPUS`` GPUs (a job keeps its TP and PP and loses DP replicas), a job
runs ``PACKET_MAX_MICRO_BATCHES`` micro-batch, a collective one repeat and at most two
channels. The fabric,
the algorithms, the placement policies and the routing stay as they are.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from aifabric.errors import SpecError
from aifabric.routing.scenario import load_scenario
from aifabric.sim.analytic import conn_matrix
from aifabric.sim.paths import host_side_arcs, route_dag
from aifabric.sim.run import Workload, _sharp_paths, compile_workload, simulate
from aifabric.sim.scenario import SimScenario
from aifabric.topology import build_fabric
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p for p in (ROOT / "examples" / "scenarios").glob("*.yaml")
                   if "\ngoodput:" not in p.read_text())  # aifabric goodput's
SIMS = ("flow", "analytic", "packet")
PACKET_MAX_TRANSFER_BYTES = 4096
PACKET_MAX_MICRO_BATCHES = 1
PACKET_MAX_GPUS = 64
# example scenarios written for ``aifabric route`` that no simulator can run, and why
REFUSED = {"single-tor-failure": "have no path"}
# example scenarios a simulator refuses (SHARP runs on the flow and packet simulators)
REFUSED_BY = {("allreduce-ndr-sharp", "analytic"): "sim: flow",
              ("job-ndr-sharp", "analytic"): "sim: flow",
              ("allreduce-sharp-packet", "analytic"): "sim: flow"}
# the flow solver lets flows that end within ``tolerance`` (relative) of each other end
# in one event, so its times may be short by that much
SLACK = 1e-6


def nccl_factor(op: str, n: int) -> float:
    """busbw / algbw as nccl-tests defines it (its PERFORMANCE.md)."""
    if n < 2:
        return 1.0
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def group_size(src: np.ndarray, dst: np.ndarray) -> int:
    """GPUs in the largest group that exchanges data (a connected component)."""
    if not len(src):
        return 0
    ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    m = len(src)
    g = sp.coo_matrix((np.ones(m), (inv[:m], inv[m:])), shape=(len(ids), len(ids)))
    _, lab = connected_components(g, directed=False)
    return int(np.bincount(lab).max())


def line_rate_bounds(scn: SimScenario, f: Fabric, wl: Workload
                     ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per collective: the busbw bound (Gb/s), the group size n and the tier of the arc
    that sets the bound."""
    dag = wl.dag
    paths, xconn = route_dag(f, dag, scn.spec.routing, failures=scn.failures or None,
                             seed=int(scn.seed or 0), pinned=wl.pinned or None)
    # SHARP's transfers are on the arcs of its trees, as simulate puts them
    paths, xconn = _sharp_paths(f, dag, paths, xconn, wl.sharp)
    w = conn_matrix(paths)  # connection x arc: fraction of its bytes on the arc
    host = host_side_arcs(f)
    cap = f.arcs[2] / 8.0  # bytes per ns
    xs = dag.xfer_stage
    coll = dag.stage_coll[xs]
    moved = dag.size_bytes * dag.repeat[xs]
    nc = len(dag.collectives)
    ok = coll >= 0
    per = sp.csr_matrix((moved[ok], (coll[ok], xconn[ok])), shape=(nc, paths.n_conns))
    load = (per @ w).tocsr()  # collective x arc: its bytes on each arc
    bound = np.full(nc, np.inf)
    ns = np.zeros(nc, dtype=np.int64)
    tiers: list[str] = []
    for c in range(nc):  # collectives: a few hundred at most
        row = load.getrow(c)
        a, b = row.indices, row.data
        keep = host[a] & (b > 0)
        sel = np.flatnonzero(coll == c)
        ns[c] = group_size(dag.src[sel], dag.dst[sel])
        if not keep.any():
            tiers.append("-")
            continue
        t = b[keep] / cap[a[keep]]
        k = int(np.argmax(t))
        t_min = float(t[k])
        arc = int(a[keep][k])
        tiers.append(LinkKind(int(f.links.kind[arc // 2])).label)
        col = dag.collectives[c]
        bound[c] = nccl_factor(col.op, int(ns[c])) * col.size_bytes / t_min * 8
    return bound, ns, tiers


def _shrink_for_packet(scn: SimScenario, n_gpus: int) -> SimScenario:
    """At most ``PACKET_MAX_GPUS`` GPUs per job (fewer DP replicas), collective and
    traffic pattern, one micro-batch, one repeat."""
    m = PACKET_MAX_GPUS
    jobs = []
    for j in scn.jobs:
        par = j.parallel
        upd: dict = {"micro_batches": min(j.micro_batches, PACKET_MAX_MICRO_BATCHES)}
        if isinstance(j.gpus, int) and j.gpus > m:
            dp = max(1, m // (par.tp * par.pp))
            upd["gpus"] = dp * par.tp * par.pp
            upd["parallel"] = par.model_copy(update={"dp": dp, "ep": math.gcd(par.ep, dp)})
        jobs.append(j.model_copy(update=upd))
    colls = [c.model_copy(update={"repeat": 1, "channels": min(c.channels, 2),
                                  **({"gpus": m} if isinstance(c.gpus, int)
                                                  and c.gpus > m else {})})
             for c in scn.collectives]
    traffic = []
    for t in scn.traffic if n_gpus > m else ():
        upd = {}
        if (getattr(t, "gpus", None) is not None and t.gpus == "all") or (
                isinstance(getattr(t, "gpus", None), str) and ":" in t.gpus):
            upd["gpus"] = f"0:{m}"
        if getattr(t, "shift", None) is not None and t.shift >= m // 2:
            upd["shift"] = m // 2
        traffic.append(t.model_copy(update=upd))
    return scn.model_copy(update={"jobs": jobs, "collectives": colls,
                                  "traffic": traffic if n_gpus > m else scn.traffic})


def _shrink_dag(wl: Workload) -> Workload:
    dag = wl.dag
    big = float(dag.size_bytes.max()) if dag.n_transfers else 0.0
    k = min(1.0, PACKET_MAX_TRANSFER_BYTES / big) if big else 1.0
    if k == 1.0:
        return wl
    dag = replace(dag, size_bytes=np.maximum(np.floor(dag.size_bytes * k), 1.0),
                  collectives=[replace(c, size_bytes=max(int(c.size_bytes * k), 1))
                               for c in dag.collectives])
    return replace(wl, dag=dag)


def run_checked(path: Path, sim: str):
    scn = load_scenario(path, SimScenario).model_copy(update={"sim": sim})
    f = build_fabric(scn.spec)
    if sim == "packet":
        scn = _shrink_for_packet(scn, len(f.ids(NodeKind.GPU, active_only=True)))
    wl = compile_workload(scn, f)
    if sim == "packet":
        wl = _shrink_dag(wl)
    res = simulate(scn, f, workload=wl)
    return scn, f, wl, res


@pytest.mark.parametrize("sim", SIMS)
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_busbw_within_line_rate(path: Path, sim: str) -> None:
    if path.stem in REFUSED:  # a routing example: simulators refuse it, one clear line
        with pytest.raises(SpecError, match=REFUSED[path.stem]):
            run_checked(path, sim)
        return
    if (path.stem, sim) in REFUSED_BY:
        with pytest.raises(SpecError, match=REFUSED_BY[(path.stem, sim)]):
            run_checked(path, sim)
        return
    scn, f, wl, res = run_checked(path, sim)
    c = res.tables["collectives"]
    bound, ns, tiers = line_rate_bounds(scn, f, wl)
    busbw = np.asarray(c["busbw_gbps"], dtype=np.float64)
    tol = SLACK + (scn.tolerance if sim == "flow" else 0.0)
    done = np.isfinite(busbw)
    over = np.flatnonzero(done & (busbw > bound * (1 + tol)))
    assert not len(over), "busbw above the line rate: " + "; ".join(
        f"{c['collective'][i]} ({c['op'][i]}, n={ns[i]}): {busbw[i]:.1f} Gb/s > "
        f"{bound[i]:.1f} Gb/s ({tiers[i]})" for i in over[:5])
    # and the factor itself is nccl-tests' for the group's size (both directions: a DP
    # AllReduce of 16 GPUs in 8 groups must not get the factor of n = 8)
    alg = np.asarray(c["algbw_GBps"], dtype=np.float64)
    want = np.array([nccl_factor(str(o), int(n)) for o, n in zip(c["op"], ns, strict=True)])
    pos = done & (alg > 0)
    np.testing.assert_allclose(busbw[pos] / 8 / alg[pos], want[pos], rtol=1e-9)
    # the table's group size is the group's, not the number of groups
    grouped = np.isin(c["op"], ("allreduce", "allgather", "reduce_scatter", "alltoall"))
    assert np.array_equal(np.asarray(c["gpus"])[grouped], ns[grouped])
