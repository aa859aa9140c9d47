"""``aifabric nccl --pipeline K``: the hierarchical AllReduce's three phases (ring
reduce-scatter inside the domains, the per-rail ring across them, ring all-gather inside)
pipelined over K chunks as NCCL runs them, against its closed form."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from aifabric.sim.twodim import net_from_spec, run_collective, simulate_dag
from aifabric.spec import spec_from_dict
from aifabric.workload.collectives.twodim import add_2d_collective
from aifabric.workload.dag import DAGBuilder
from aifabric.workload.tuner import bandwidth_ns
from tests.conftest import EXAMPLES

S = 8 * 2**30


def _net(nics: int, gbps: int, hosts: int):
    d = yaml.safe_load((EXAMPLES / "scaleup" / "hgx-h100-x2.yaml").read_text())
    d["hosts"] = {**d["hosts"], "nics_per_host": nics, "port_gbps": gbps, "count": hosts}
    return net_from_spec(spec_from_dict(d))


def _sim(net, K: int):
    D, N = net.domains, net.per_domain
    b = DAGBuilder()
    add_2d_collective(b, "allreduce", "hierarchical", np.arange(net.n).reshape(D, N), S,
                      switch=net.n + np.arange(D), pipeline=K)
    dag = b.build()
    run, by_arc, by_dag = simulate_dag(net, dag)
    return float(run.stage_end_ns.max()), by_arc, by_dag, dag


def _phases(net):
    p = net.twodim
    D, N = net.domains, net.per_domain
    U, R = p.scaleup_gbps / 8, p.scaleout_gbps / 8
    rs = (N - 1) * (S / N) / U  # = the all-gather
    inter = 2 * (D - 1) * (S / N / D) / R
    return rs, inter


# (NICs, Gb/s, hosts): NIC-bound (one 100G NIC per 8 GPUs; 8 x 400G over 16 domains;
# 2 x 400G) and NVLink-bound (8 x 400G over 4 domains)
SHAPES = [(1, 100, 4), (8, 400, 16), (2, 400, 4), (8, 400, 4), (4, 400, 8)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("K", [1, 2, 8, 64])
def test_pipelined_time_is_the_closed_form_within_1_percent(shape, K):
    """T = max(rs/K + inter + ag/K, rs + ag): the scale-out steps back to back between
    the first chunk's reduce-scatter and the last chunk's all-gather, or NVLink busy with
    both intra-domain phases throughout; K = 1 is the sequential rs + inter + ag."""
    net = _net(*shape)
    rs, inter = _phases(net)
    t, *_ = _sim(net, K)
    closed = max(2 * rs / K + inter, 2 * rs) if K > 1 else 2 * rs + inter
    assert t == pytest.approx(closed, rel=0.01)
    assert bandwidth_ns("allreduce", "hierarchical", net.twodim, S, pipeline=K) == \
        pytest.approx(closed, rel=1e-12)
    # never slower than the phases one after the other, never faster than either dimension
    assert max(2 * rs, inter) * (1 - 1e-9) <= t <= (2 * rs + inter) * (1 + 1e-9)


@pytest.mark.parametrize("shape", SHAPES[:3])
def test_pipelining_moves_the_same_bytes_and_hides_the_nvlink_phases(shape):
    """The pipelined run moves exactly the sequential run's bytes on each dimension
    (2(D-1) S leave the domains); the time saved tends to the NVLink phases (2 rs) as K
    grows, and with a NIC-bound scale-out it is within 2 rs / K of it."""
    net = _net(*shape)
    rs, inter = _phases(net)
    t1, arc1, dag1, _ = _sim(net, 1)
    tk, arck, dagk, _ = _sim(net, 64)
    assert arck == pytest.approx(arc1, rel=1e-9) and dagk == pytest.approx(dag1, rel=1e-9)
    assert dagk["scaleout"] == pytest.approx(2 * (net.domains - 1) * S, rel=1e-9)
    assert inter >= 2 * rs / 64  # NIC-bound at K = 64
    assert t1 - tk == pytest.approx(2 * rs - 2 * rs / 64, rel=0.01)


def test_pipeline_of_one_is_todays_dag():
    """--pipeline 1 compiles the very DAG of the sequential hierarchical algorithm."""
    net = _net(8, 400, 4)
    D, N = net.domains, net.per_domain
    dags = []
    for kw in ({}, {"pipeline": 1}):
        b = DAGBuilder()
        add_2d_collective(b, "allreduce", "hierarchical", np.arange(net.n).reshape(D, N), S,
                          switch=net.n + np.arange(D), **kw)
        dags.append(b.build())
    for col in ("src", "dst", "size_bytes", "xfer_stage", "repeat"):
        assert np.array_equal(getattr(dags[0], col), getattr(dags[1], col)), col


def test_run_collective_reports_the_pipelined_closed_form():
    """run_collective with pipeline: the simulated bandwidth time equals its closed form
    (1e-6) and the cost model prices the pipelined time."""
    net = net_from_spec(spec_from_dict(yaml.safe_load(
        (EXAMPLES / "scaleup" / "gb200-nvl72-x8.yaml").read_text())))
    seq = run_collective(net, "allreduce", S, algorithm="hierarchical", protocol="Simple")
    pipe = run_collective(net, "allreduce", S, algorithm="hierarchical", protocol="Simple",
                          pipeline=16)
    assert pipe.simulated_ns == pytest.approx(pipe.closed_form_ns, rel=1e-6)
    assert pipe.simulated_ns < seq.simulated_ns
    assert pipe.choice.time_ns < seq.choice.time_ns


def test_bad_pipeline_is_one_line(cli):
    r = cli("nccl", EXAMPLES / "scaleup" / "hgx-h100-x2.yaml", "--pipeline", "0")
    assert r.code == 2 and r.err.strip().count("\n") == 0 and "--pipeline" in r.err
