"""Placement policies and the iteration DAG of a training job."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.workload import DAGBuilder
from aifabric.workload.job import GpuPool, JobModel, add_job, place

G = 8


def _pool(hosts=80, hosts_per_segment=4):
    return GpuPool(node=np.arange(hosts * G) + 10_000, host=np.repeat(np.arange(hosts), G),
                   segment=np.repeat(np.arange(hosts) // hosts_per_segment, G),
                   local=np.tile(np.arange(G), hosts), gpus_per_host=G)


def test_pack_uses_the_fewest_segments_and_spread_the_most():
    """pack: ceil(hosts / hosts per segment) segments; spread over k: k segments."""
    pool = _pool()
    pos = place(pool, 10 * G, "pack", taken=np.zeros(len(pool.node), bool))
    assert len(np.unique(pool.segment[pos])) == 3
    pos = place(pool, 10 * G, "spread", taken=np.zeros(len(pool.node), bool), segments=10)
    assert len(np.unique(pool.segment[pos])) == 10
    assert (np.bincount(pool.segment[pos]) <= 1 * G).all()


def test_jobs_never_share_gpus_and_random_is_seeded():
    """Two jobs get disjoint GPUs; the same seed gives the same random placement."""
    pool = _pool()
    taken = np.zeros(len(pool.node), bool)
    a = place(pool, 16 * G, "pack", taken=taken)
    b = place(pool, 16 * G, "random", taken=taken, seed=3)
    assert not set(a) & set(b)
    c = place(pool, 16 * G, "random", taken=np.zeros(len(pool.node), bool), seed=5)
    d = place(pool, 16 * G, "random", taken=np.zeros(len(pool.node), bool), seed=5)
    assert list(c) == list(d)
    with pytest.raises(ValueError, match="free"):
        place(pool, 79 * G, "pack", taken=taken)


def _job_dag(**kw):
    pool = _pool()
    job = JobModel(name="j", **kw)
    pos = place(pool, job.gpus, "pack", taken=np.zeros(len(pool.node), bool))
    b = DAGBuilder()
    b.job = 0
    add_job(b, job, pool.node[pos], pool.host[pos], pool.local[pos])
    return b.build(), pool, pos


def test_compute_only_critical_path_is_the_gpipe_formula():
    """With free communication an iteration lasts (M + PP - 1) x (fwd + bwd) x layers per
    stage (GPipe: the pipeline bubble plus M micro-batches)."""
    M, pp, L = 4, 4, 16
    dag, _, _ = _job_dag(dp=2, tp=8, pp=pp, layers=L, micro_batches=M,
                         fwd_ns_per_layer=1e5, bwd_ns_per_layer=2e5)
    stage_t = np.where(dag.stage_kind == 1, dag.duration_ns, 0.0)
    _, end = dag.critical_path_ns(stage_t)
    assert end.max() == pytest.approx((M + pp - 1) * 3e5 * L / pp)


def test_job_traffic_matches_its_parallelism():
    """TP traffic stays inside hosts; each GPU's DP gradient traffic is
    2(dp-1)/dp x params x bytes / (tp x pp) sent."""
    dp, tp, pp = 4, 8, 2
    params = 1e9
    dag, pool, pos = _job_dag(dp=dp, tp=tp, pp=pp, params=params, micro_batches=2)
    host_of = dict(zip(pool.node, pool.host, strict=True))
    names = [c.name for c in dag.collectives]
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    coll_of_stage = dag.stage_coll[dag.xfer_stage]
    tp_st = np.array([" tp" in names[c] if c >= 0 else False for c in coll_of_stage])
    hs = np.array([host_of[x] for x in dag.src])
    hd = np.array([host_of[x] for x in dag.dst])
    assert (hs[tp_st] == hd[tp_st]).all()
    dp_st = np.array([" dp " in names[c] if c >= 0 else False for c in coll_of_stage])
    sent = np.bincount(np.searchsorted(pool.node, dag.src[dp_st]), weights=moved[dp_st],
                       minlength=len(pool.node))[pos]
    np.testing.assert_allclose(sent, 2 * (dp - 1) / dp * params * 2 / (tp * pp))
