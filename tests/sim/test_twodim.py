"""NCCL's collectives over two dimensions: the flow simulation against the closed forms,
busbw against the physical limit of each dimension, bytes conserved per dimension, the
cost model's choices, today's HGX results on domains of 8, and published nccl-tests
figures (sources and settings: docs/scaleup.md)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.sim.analytic import closed_form
from aifabric.sim.twodim import DomainNet, net_from_spec, run_collective, simulate_dag
from aifabric.spec import spec_from_dict
from aifabric.workload import DAGBuilder, add_collective
from aifabric.workload.collectives.twodim import ALGORITHMS_2D, add_2d_collective, pat_steps
from aifabric.workload.tuner import TwoDim, bandwidth_ns, choose, enabled
from tests.conftest import EXAMPLES

SCALEUP = EXAMPLES / "scaleup"
GiB = 1 << 30


def _net(D: int, N: int, *, nvls: float = 2400.0, su: float = 2880.0, so: float = 376.0,
         channels: int | None = None, over: float = 1.0) -> DomainNet:
    return DomainNet(D, N, su, so, nvls, channels or min(N, 32), over, 3600.0, 400.0, D)


def _spec(path):
    return spec_from_dict(yaml.safe_load(path.read_text()))


CASES = [(1, 8), (2, 8), (4, 8), (3, 16), (1, 72), (4, 72)]
PAIRS = [(op, a) for op, algs in ALGORITHMS_2D.items() for a in algs]


@pytest.mark.parametrize("D, N", CASES)
@pytest.mark.parametrize("op, algorithm", PAIRS)
def test_simulation_matches_the_closed_form_within_1pct(D, N, op, algorithm):
    net = _net(D, N)
    if not enabled(op, algorithm, net.twodim):
        with pytest.raises(SpecError):
            run_collective(net, op, GiB, algorithm=algorithm)
        return
    # chunks small against the buffer: the tree's pipeline fill and drain stay < 1%
    r = run_collective(net, op, 4 * GiB, algorithm=algorithm, protocol="Simple",
                       chunk_bytes=1 << 20)
    assert r.simulated_ns == pytest.approx(r.closed_form_ns, rel=0.01)


def test_closed_forms_are_the_textbook_ones():
    S = 8 * GiB
    U, R = 2880.0 / 8, 376.0 / 8  # bytes per ns
    # ring in one domain: 2(n-1)/n S / U
    p = TwoDim(1, 8, 2880.0, 376.0, 2400.0, 8)
    assert bandwidth_ns("allreduce", "ring", p, S) == pytest.approx(2 * 7 / 8 * S / U)
    # NVLS: S(1 + 1/N) through the NVLS share of each GPU's links
    assert bandwidth_ns("allreduce", "nvls", p, S) == pytest.approx(S * 9 / 8 / 300.0)
    # hierarchical on D domains: intra RS + AG of S/N steps, inter ring of S/N over D
    q = TwoDim(4, 8, 2880.0, 376.0, 2400.0, 8)
    assert bandwidth_ns("allreduce", "hierarchical", q, S) == pytest.approx(
        2 * 7 * S / 8 / U + 2 * 3 * S / 8 / 4 / R)
    # a flat ring over domains with one channel per rail: every NIC carries one channel
    assert bandwidth_ns("allreduce", "ring", q, S) == pytest.approx(
        2 * 31 * max(7 * S / 32 / 8 / U, S / 32 / 8 / R))
    # PAT across domains: (n-1)/n S at the NIC rate
    assert bandwidth_ns("allgather", "pat", q, S) == pytest.approx(31 / 32 * S / R)
    assert sum(b for _, b in pat_steps(32)) == 31


def test_domains_of_eight_reproduce_todays_hgx_results():
    """Today's hierarchical AllReduce (hosts of 8 GPUs, NVLink inside, one ring per rail
    across) is the two-dimension hierarchical on domains of 8: the same DAG, and the same
    closed form as :func:`aifabric.sim.analytic.closed_form`."""
    D, N, S = 6, 8, 256 * (1 << 20)
    gpus = np.arange(D * N)
    a, b = DAGBuilder(), DAGBuilder()
    add_collective(a, "allreduce", gpus, S, algorithm="hierarchical",
                   host=gpus // N, local=gpus % N)
    add_2d_collective(b, "allreduce", "hierarchical", gpus.reshape(D, N), S,
                      switch=D * N + np.arange(D))
    da, db = a.build(), b.build()
    for col in ("src", "dst", "size_bytes", "repeat", "xfer_ptr"):
        assert np.array_equal(getattr(da, col), getattr(db, col)), col
    p = TwoDim(D, N, 3600.0, 400.0, 0.0, 1)
    today = closed_form("allreduce", "hierarchical", D * N, S, 400.0, 0.0, hosts=D,
                        intra_gbps=3600.0)
    assert bandwidth_ns("allreduce", "hierarchical", p, S) == pytest.approx(today, rel=1e-12)
    r = run_collective(DomainNet(D, N, 3600.0, 400.0, 0.0, 1, 1.0, 3600.0, 400.0, D),
                       "allreduce", S, algorithm="hierarchical", protocol="Simple")
    assert r.simulated_ns == pytest.approx(today, rel=1e-6)


@pytest.mark.parametrize("D, N", CASES)
@pytest.mark.parametrize("op, algorithm", PAIRS)
def test_busbw_never_beats_the_dimension_it_crosses(D, N, op, algorithm):
    net = _net(D, N)
    if not enabled(op, algorithm, net.twodim):
        return
    r = run_collective(net, op, GiB, algorithm=algorithm, protocol="Simple")
    # every GPU's links: no dimension carried more than its physical rate
    assert r.peak_gbps_per_gpu["scaleup"] <= net.physical_scaleup_gbps * (1 + 1e-9)
    assert r.peak_gbps_per_gpu["scaleout"] <= net.physical_scaleout_gbps * (1 + 1e-9)
    busbw = r.choice.busbw_gbs * 8  # Gbit/s
    if D == 1:  # inside a domain: the NVLink rate; NVLS saves the factor (N+1)/(2(N-1))
        cap = net.physical_scaleup_gbps * (2 * (N - 1) / (N + 1) if algorithm == "nvls"
                                           else 1.0)
        assert busbw <= cap * (1 + 1e-9)
    elif algorithm == "ring":  # a GPU sends 2(n-1)/n S over its NVLink and NIC together,
        # and a domain's C exits (one NIC each) carry every step out of it
        U, R = net.physical_scaleup_gbps, net.physical_scaleout_gbps
        assert busbw <= min(U + R, net.channels * R) * (1 + 1e-9)
    elif algorithm == "pat":  # every step has senders crossing domains, at the NIC rate
        assert busbw <= net.physical_scaleout_gbps * (1 + 1e-9)
    # and every domain's NICs together: bytes leaving a domain over the run's time
    out_per_domain = r.bytes["scaleout"] / D
    assert out_per_domain * 8 / r.simulated_ns <= N * net.physical_scaleout_gbps * 1.000001


@pytest.mark.parametrize("D, N", [(1, 8), (2, 8), (4, 72)])
@pytest.mark.parametrize("op, algorithm", PAIRS)
def test_bytes_are_conserved_per_dimension(D, N, op, algorithm):
    net = _net(D, N)
    p = net.twodim
    if not enabled(op, algorithm, p):
        return
    S = float(GiB)
    r = run_collective(net, op, S, algorithm=algorithm, protocol="Simple")
    for dim in ("scaleup", "scaleout"):  # the arcs carried what the transfers moved
        assert r.bytes[dim] == pytest.approx(r.dag_bytes[dim], rel=1e-9, abs=1.0)
    n, C = D * N, net.channels
    expect_out = {  # bytes leaving domains, by hand
        ("allreduce", "ring"): 2 * (n - 1) * D * C * S / (n * C) if D > 1 else 0.0,
        ("allreduce", "hierarchical"): 2 * (D - 1) * S,
        ("allreduce", "nvls"): 0.0,
    }.get((op, algorithm))
    if expect_out is not None:
        assert r.bytes["scaleout"] == pytest.approx(expect_out, rel=1e-9, abs=1.0)
    if (op, algorithm) == ("allreduce", "nvls"):  # up and back: 2 N S (1 + 1/N)
        assert r.bytes["scaleup"] == pytest.approx(2 * N * S * (1 + 1 / N), rel=1e-9)
    if algorithm == "pat":  # every rank sends (n-1)/n S, wherever it goes
        assert r.bytes["scaleup"] + r.bytes["scaleout"] == pytest.approx((n - 1) * S,
                                                                         rel=1e-9)


def test_oversubscribed_scaleout_slows_only_what_leaves_the_domain():
    a = run_collective(_net(4, 8), "allreduce", GiB, algorithm="ring", protocol="Simple")
    b = run_collective(_net(4, 8, over=4.0), "allreduce", GiB, algorithm="ring",
                       protocol="Simple")
    assert b.simulated_ns > a.simulated_ns * 1.5
    c = run_collective(_net(1, 8, over=4.0), "allreduce", GiB, algorithm="ring",
                       protocol="Simple")
    d = run_collective(_net(1, 8), "allreduce", GiB, algorithm="ring", protocol="Simple")
    assert c.simulated_ns == d.simulated_ns


def test_the_cost_model_picks_latency_small_and_bandwidth_large():
    p = TwoDim(1, 8, 2880.0, 376.0, 2412.0, 8)
    small, _ = choose("allreduce", p, 1024)
    big, cands = choose("allreduce", p, 8 * GiB)
    assert small.protocol == "LL"  # a few KiB: latency decides
    assert big.algorithm == "nvls"  # 8 GiB: the switch reduction's bandwidth decides
    assert [c.time_ns for c in cands] == sorted(c.time_ns for c in cands)
    pinned, _ = choose("allreduce", p, 8 * GiB, algorithm="ring", protocol="Simple")
    assert (pinned.algorithm, pinned.protocol) == ("ring", "Simple")
    with pytest.raises(ValueError, match="nvls_tree cannot run"):
        choose("allreduce", p, GiB, algorithm="nvls_tree")
    with pytest.raises(ValueError, match="Simple only"):
        choose("allreduce", p, GiB, algorithm="nvls", protocol="LL")
    no_nvls = TwoDim(1, 8, 2880.0, 376.0, 0.0, 8)
    assert all(c.algorithm != "nvls" for c in choose("allreduce", no_nvls, 8 * GiB)[1])


def test_one_gpu_per_domain_ring_is_nic_bound():
    r = run_collective(_net(8, 8, channels=1), "allreduce", GiB, algorithm="ring",
                       protocol="Simple")
    # one channel: one NIC per domain carries the ring: busbw (bandwidth time) = NIC rate
    n = 64
    assert 2 * (n - 1) / n * GiB / r.simulated_ns * 8 == pytest.approx(376.0, rel=1e-6)


# ------------------------------------------------------------------ published figures
def test_published_h100_nvswitch_allreduce():
    """NVIDIA/nccl-tests#290: single HGX H100, all_reduce_perf up to 8G, NVLS: 476 GB/s
    busbw, 'in the expected range for H100'."""
    net = net_from_spec(_spec(SCALEUP / "hgx-h100-x2.yaml"))
    r = run_collective(net, "allreduce", 8 * GiB, gpus=8)
    assert r.choice.algorithm == "nvls"
    assert r.choice.busbw_gbs == pytest.approx(476.0, rel=0.10)


def test_published_gb200_mnnvl_allreduce():
    """lixueduan.com, GB200 MNNVL: 8 GPUs over 2 compute trays of one NVL72 rack, NVLink
    only (MNNVL): 811 GB/s busbw."""
    net = net_from_spec(_spec(SCALEUP / "gb200-nvl72-x8.yaml"))
    r = run_collective(net, "allreduce", 8 * GiB, gpus=8)
    assert r.domains == 1 and r.choice.algorithm == "nvls"
    assert r.choice.busbw_gbs == pytest.approx(811.0, rel=0.10)


def test_published_two_node_400g_ring():
    """NVIDIA/nccl-tests#290 (NVIDIA): two H100 nodes with NCCL_ALGO=RING over NDR
    400 Gb/s: 46-48 GB/s per NIC, 8 NICs per node; a ring's busbw on 2+ nodes is what
    crosses the NICs (NVIDIA/nccl-tests#160): 368-384 GB/s."""
    net = net_from_spec(_spec(SCALEUP / "hgx-h100-x2.yaml"))
    r = run_collective(net, "allreduce", 8 * GiB, algorithm="ring")
    assert r.domains == 2
    assert r.choice.busbw_gbs == pytest.approx(8 * 47.0, rel=0.10)
    assert 368.0 <= r.choice.busbw_gbs <= 384.0


# ------------------------------------------------------------------ CLI
def test_nccl_cli_sweep_and_json(cli):
    r = cli("nccl", SCALEUP / "gb200-nvl72-x8.yaml", "--sizes", "1KiB,1MiB,8GiB")
    assert r.code == 0, r.err
    assert "8 domain(s) x 72 GPUs" in r.out and "8GiB" in r.out
    j = cli("nccl", SCALEUP / "hgx-h100-x2.yaml", "--gpus", "8", "--json")
    assert j.code == 0, j.err
    res = json.loads(j.out)["results"][0]
    assert res["algorithm"] == "nvls" and res["domains"] == 1
    again = cli("nccl", SCALEUP / "hgx-h100-x2.yaml", "--gpus", "8", "--json")
    assert again.out == j.out  # deterministic


@pytest.mark.parametrize("args, field", [
    (("--algorithm", "pat"), "algorithm"),
    (("--protocol", "LL256"), "--protocol"),
    (("--gpus", "12"), "gpus"),
    (("--op", "broadcast"), "op"),
    (("--size", "8G"), "--size"),
])
def test_nccl_cli_bad_input_is_one_line(cli, args, field):
    r = cli("nccl", SCALEUP / "hgx-h100-x2.yaml", *args)
    assert r.code == 2 and r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and f"{field}:" in lines[0]


def test_simulate_dag_rejects_switch_to_switch():
    net = _net(2, 8)
    b = DAGBuilder()
    b.transfers([16], [17], 1.0)
    with pytest.raises(ValueError, match="two switches"):
        simulate_dag(net, b.build())


def test_ring_channels_leave_by_distinct_gpus():
    """The rail-aware ring: with C <= N channels every GPU leaves its domain in at most
    one channel, so the C channels use C NICs."""
    net = _net(3, 8, channels=8)
    b = DAGBuilder()
    add_2d_collective(b, "allreduce", "ring", np.arange(24).reshape(3, 8), float(GiB),
                      switch=24 + np.arange(3), channels=8)
    dag = b.build()
    cross = dag.src // 8 != dag.dst // 8
    assert np.bincount(dag.src[cross], minlength=24).max() == 1
    assert math.isclose(simulate_dag(net, dag)[1]["scaleout"],
                        float(dag.size_bytes[cross].sum() * dag.repeat[0]))
