"""The flow engine against closed forms and conservation laws, on hand-built paths."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from aifabric.sim.analytic import closed_form
from aifabric.sim.flow.engine import Paths, run_flow
from aifabric.workload import DAGBuilder, add_collective
from tests.sim.star import star_paths

GIB = 1 << 30


def _end(run):
    return float(np.nanmax(run.stage_end_ns))


@pytest.mark.parametrize("n", [2, 5, 16])
def test_ring_allreduce_matches_closed_form_on_a_star(n):
    """Ring AllReduce without collisions: 2(n-1) x (alpha + S/n/B), busbw = line rate."""
    b = DAGBuilder()
    add_collective(b, "allreduce", np.arange(n), GIB)
    dag = b.build()
    paths, conn = star_paths(dag, n, gbps=400, latency_ns=2000)
    run = run_flow(dag, paths, conn)
    want = closed_form("allreduce", "ring", n, GIB, 400, 2000)
    assert _end(run) == pytest.approx(want, rel=1e-9)
    busbw_gbps = GIB / (_end(run) - 2 * (n - 1) * 2000) * 8 * 2 * (n - 1) / n
    assert busbw_gbps == pytest.approx(400, rel=1e-9)


def test_two_transfers_of_different_sizes_share_then_the_big_one_speeds_up():
    """Two transfers into one GPU: each gets half until the small one is done, then the
    big one gets the whole link (max-min re-allocation at the finish event)."""
    b = DAGBuilder()
    b.transfers([0, 1], [2, 2], np.array([1e6, 3e6]))
    dag = b.build()
    paths, conn = star_paths(dag, 3, gbps=8, latency_ns=0)  # 1 byte per ns
    run = run_flow(dag, paths, conn)
    assert run.xfer_end_ns[0] == pytest.approx(2e6)
    assert run.xfer_end_ns[1] == pytest.approx(2e6 + 2e6)


def test_latency_is_added_to_each_transfer():
    """A chain of two dependent transfers costs 2 x (S/B + latency)."""
    b = DAGBuilder()
    s0 = b.transfers([0], [1], 8e3)
    b.transfers([1], [2], 8e3, deps=s0)
    dag = b.build()
    paths, conn = star_paths(dag, 3, gbps=8, latency_ns=500)
    run = run_flow(dag, paths, conn)
    assert _end(run) == pytest.approx(2 * (8e3 + 500))


def test_qps_split_a_transfer_into_flows():
    """A transfer over 4 QPs on the same path takes as long as one flow would."""
    b = DAGBuilder()
    b.transfers([0], [1], 8e6)
    dag = b.build()
    paths, conn = star_paths(dag, 2, gbps=8, latency_ns=0, qps=4)
    assert _end(run_flow(dag, paths, conn)) == pytest.approx(8e6)


def _random_case(seed, repeat=5):
    rng = np.random.default_rng(seed)
    n_arcs, n_conn = 12, 20
    dense = (rng.random((n_conn, n_arcs)) < 0.3).astype(float)
    dense[np.arange(n_conn), rng.integers(0, n_arcs, n_conn)] = 1.0
    paths = Paths(sp.csr_matrix(dense), np.arange(n_conn + 1),
                  rng.uniform(0, 2000, n_conn), rng.uniform(10, 100, n_arcs))
    b = DAGBuilder()
    conns = []
    s1 = b.transfers(np.arange(6), np.arange(6) + 100, rng.uniform(1e5, 1e6, 6),
                     repeat=repeat)
    conns.append(rng.integers(0, n_conn, 6))
    b.transfers(np.arange(4), np.arange(4) + 200, rng.uniform(1e6, 1e7, 4))
    conns.append(rng.integers(0, n_conn, 4))
    b.transfers(np.arange(3), np.arange(3) + 300, rng.uniform(1e5, 1e6, 3), deps=s1,
                repeat=3)
    conns.append(rng.integers(0, n_conn, 3))
    b.compute(3e5, deps=s1)
    return b.build(), paths, np.concatenate(conns), dense


@pytest.mark.parametrize("seed", range(6))
def test_capacity_respected_and_bytes_delivered_exactly_once(seed):
    """At every instant no arc carries more than its capacity, and each arc carried
    exactly the bytes of the transfers crossing it (every repetition counted once)."""
    dag, paths, conn, dense = _random_case(seed)
    run = run_flow(dag, paths, conn, record=True, tolerance=0.0)
    cap = paths.capacity_gbps / 8
    for t0, t1, load in run.intervals:
        assert t1 >= t0
        assert (load <= cap * (1 + 1e-9)).all()
    per_xfer = dag.size_bytes * dag.repeat[dag.xfer_stage]
    want = dense[conn].T @ per_xfer
    np.testing.assert_allclose(run.arc_bytes, want, rtol=1e-9)
    assert np.isfinite(run.xfer_end_ns).all()


@pytest.mark.parametrize("seed", range(4))
def test_reused_repetitions_equal_the_unrolled_steps(seed):
    """A repeating stage gives the same times as its steps written out one by one (the
    reuse of identical steps changes the cost, not the answer)."""
    rng = np.random.default_rng(seed)
    n = 6
    b1, b2 = DAGBuilder(), DAGBuilder()
    src, dst = np.arange(n), np.roll(np.arange(n), -1)
    size = rng.uniform(1e5, 1e6)
    b1.transfers(src, dst, size, repeat=7)
    b1.transfers([0], [3], 5e6)  # a concurrent long transfer (a foreign flow)
    last = None
    for _ in range(7):
        last = b2.transfers(src, dst, size, deps=last)
    b2.transfers([0], [3], 5e6)
    d1, d2 = b1.build(), b2.build()
    p1, c1 = star_paths(d1, n, latency_ns=300)
    p2, c2 = star_paths(d2, n, latency_ns=300)
    r1, r2 = run_flow(d1, p1, c1, tolerance=0), run_flow(d2, p2, c2, tolerance=0)
    assert _end(r1) == pytest.approx(_end(r2), rel=1e-9)
    assert r1.reps_skipped > 0
    np.testing.assert_allclose(r1.arc_bytes, r2.arc_bytes, rtol=1e-9)


def test_ring_steps_are_solved_once():
    """The 2(n-1) identical steps of a ring reuse one rate solution."""
    b = DAGBuilder()
    add_collective(b, "allreduce", np.arange(64), GIB, channels=2)
    dag = b.build()
    paths, conn = star_paths(dag, 64)
    run = run_flow(dag, paths, conn)
    assert run.rate_solves == 1
    assert run.reps_skipped >= 2 * 63 - 2
