"""Max-min fair rates by progressive filling, on hand-built examples and random ones."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from aifabric.sim.flow.maxmin import max_min_rates


def _rates(rows, cap, count=None):
    return max_min_rates(sp.csr_matrix(np.array(rows, dtype=float)), np.array(cap, float),
                         count)


def test_two_flows_sharing_a_link_get_half_each():
    """Two flows on one 100 Gb/s link: 50 each."""
    rate, bott, load = _rates([[1], [1]], [100])
    assert rate == pytest.approx([50, 50])
    assert list(bott) == [0, 0]
    assert load[0] == pytest.approx(100)


def test_flow_bottlenecked_elsewhere_frees_capacity():
    """A crosses X (10) and Y (2); B crosses only X: A is held to 2 by Y, B takes 8."""
    rate, bott, _ = _rates([[1, 1], [1, 0]], [10, 2])
    assert rate == pytest.approx([2, 8])
    assert list(bott) == [1, 0]


def test_parking_lot():
    """One long flow over 3 unit links, one short flow per link: everyone gets 1/2."""
    rows = [[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    rate, _, _ = _rates(rows, [1, 1, 1])
    assert rate == pytest.approx([0.5] * 4)


def test_sprayed_flow_uses_both_paths():
    """A flow sprayed half/half over two unit paths reaches 2; multiplicity 2 halves it."""
    rate, _, _ = _rates([[0.5, 0.5]], [1, 1])
    assert rate == pytest.approx([2])
    rate, _, _ = _rates([[0.5, 0.5]], [1, 1], np.array([2]))
    assert rate == pytest.approx([1])


@pytest.mark.parametrize("seed", range(8))
def test_random_instances_are_feasible_and_max_min_fair(seed):
    """Capacity is never exceeded, and every flow has a saturated bottleneck arc on which
    no other flow gets more (the characterisation of max-min fairness)."""
    rng = np.random.default_rng(seed)
    k, a = 60, 25
    dense = (rng.random((k, a)) < 0.15).astype(float)
    dense[np.arange(k), rng.integers(0, a, k)] = 1.0
    cap = rng.uniform(1, 10, a)
    rate, bott, load = max_min_rates(sp.csr_matrix(dense), cap)
    assert (load <= cap * (1 + 1e-9)).all()
    for f in range(k):
        arcs = np.flatnonzero(dense[f])
        ok = [np.isclose(load[x], cap[x]) and rate[f] >= rate[dense[:, x] > 0].max() - 1e-9
              for x in arcs]
        assert any(ok), f"flow {f} has no bottleneck"
        assert dense[f, bott[f]] > 0


def _random_problem(rng, k=70, a=24, spray=False):
    dense = (rng.random((k, a)) < 0.2).astype(float)
    dense[np.arange(k), rng.integers(0, a, k)] = 1.0
    if spray:
        dense *= rng.choice([0.5, 1.0], size=dense.shape)
    cap = rng.choice([1.0, 2.0, 3.3, 4.0, 8.0], size=a)
    return sp.csr_matrix(dense), cap


@pytest.mark.parametrize("seed", range(12))
def test_compiled_solver_equals_the_vectorised_reference(seed):
    """The compiled water-filling and the numpy rounds are independent implementations
    of progressive filling: same rates, same loads, on random instances with counts and
    sprayed rows."""
    from aifabric.sim.flow.maxmin import max_min_rates_numpy

    rng = np.random.default_rng(seed)
    m, cap = _random_problem(rng, spray=seed % 2 == 1)
    count = rng.integers(1, 4, m.shape[0]).astype(float)
    r1, _, l1 = max_min_rates(m, cap, count)
    r2, _, l2 = max_min_rates_numpy(m, cap, count)
    np.testing.assert_allclose(r1, r2, rtol=1e-9)
    np.testing.assert_allclose(l1, l2, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_warm_started_solves_equal_cold_ones(seed):
    """After flows leave (counts only fall), the solver restarts from the water level
    below which nothing changed; every solve of a shrinking sequence equals a cold one."""
    from aifabric.sim.flow.maxmin import _Fill, max_min_rates_numpy

    rng = np.random.default_rng(100 + seed)
    m, cap = _random_problem(rng, spray=seed % 2 == 1)
    f = _Fill(m, cap)
    count = rng.integers(1, 4, m.shape[0]).astype(float)
    for _ in range(8):
        on = count > 0
        if not on.any():
            break
        warm, _ = f(count)
        cold, _, _ = max_min_rates_numpy(m[on], cap, count[on])
        np.testing.assert_allclose(warm[on], cold, rtol=1e-9)
        fall = rng.random(len(count)) < 0.25
        # in place, as the engine does with its count array
        count[:] = np.where(fall, np.maximum(count - rng.integers(1, 3, len(count)), 0), count)


def _alltoall_on_small_hpn():
    """An All-to-All over 64 GPUs of the HPN pod (dual-plane: NVLink inside hosts, PXN
    over NVLink then PCIe to the rail's NIC, NIC ports to ToRs): (dag, paths, xconn)."""
    from aifabric import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload
    from aifabric.sim.scenario import SimScenario
    from tests.conftest import EXAMPLES

    scn = scenario_from_dict({"name": "a2a", "spec": "hpn-pod.yaml",
                              "routing": {"policy": "ecmp"},
                              "collectives": [{"op": "alltoall", "size_bytes": "8MiB",
                                               "gpus": 64}]},
                             base_dir=EXAMPLES, model=SimScenario)
    f = build_fabric(scn.spec)
    dag = compile_workload(scn, f).dag
    paths, xconn = route_dag(f, dag, scn.spec.routing)
    return dag, paths, xconn


def test_reduction_drops_only_arcs_that_never_bind_and_keeps_every_rate():
    """On an All-to-All, the PCIe and NVLink hops are dropped from the flows that leave
    their server (each is bounded by the NIC ports it feeds), identical rows merge, and
    with the NVLink-only flows inactive the reduced problem gives exactly the full
    problem's rates; while those flows are active the full matrix is used."""
    from aifabric.sim.flow.maxmin import MaxMin

    _, paths, _ = _alltoall_on_small_hpn()
    inc, cap = paths.incidence, paths.capacity_gbps / 8
    mm = MaxMin(inc, cap, site=paths.arc_site, reduce_above=0)
    full = MaxMin(inc, cap)
    assert mm.reduced_rows is not None and mm.reduced_rows < inc.shape[0] / 3
    dep = np.zeros(inc.shape[0], dtype=bool)
    dep[mm._dep] = True
    # the dependent rows are exactly the flows that never leave their server
    n_arcs_row = np.diff(inc.indptr)
    assert dep.any() and (n_arcs_row[dep] == 2).all()
    rng = np.random.default_rng(0)
    for active_dep in (False, True):
        count = (rng.random(inc.shape[0]) < 0.7).astype(float)
        if not active_dep:
            count[dep] = 0
        r1, _, l1 = mm.solve(count)
        r2, _, l2 = full.solve(count)
        on = count > 0
        np.testing.assert_allclose(r1[on], r2[on], rtol=1e-9)
        np.testing.assert_allclose(l1, l2, rtol=1e-9, atol=1e-9)
        assert (l1 <= cap * (1 + 1e-9)).all()


def test_engine_with_the_reduction_gives_the_same_run(monkeypatch):
    """The flow engine on an All-to-All with the solver's reduction (forced on) and
    without it: the same transfer end times, bytes per arc and peak loads."""
    from aifabric.sim.flow import maxmin
    from aifabric.sim.flow.engine import run_flow

    dag, paths, xconn = _alltoall_on_small_hpn()
    runs = []
    for above in (0, 10**9):
        monkeypatch.setattr(maxmin, "REDUCE_ABOVE", above)
        runs.append(run_flow(dag, paths, xconn, tolerance=1e-2))
    a, b = runs
    np.testing.assert_allclose(a.xfer_end_ns, b.xfer_end_ns, rtol=1e-9)
    np.testing.assert_allclose(a.arc_bytes, b.arc_bytes, rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(a.arc_peak_gbps, b.arc_peak_gbps, rtol=1e-9, atol=1e-9)
    # and every byte crossed each arc once: the arc totals equal the transfers' bytes
    # on their connections' rows (one QP per connection here)
    per_conn = np.bincount(xconn, weights=dag.size_bytes, minlength=paths.n_conns)
    qps = np.diff(paths.conn_ptr)
    per_row = np.repeat(per_conn / qps, qps)
    np.testing.assert_allclose(a.arc_bytes, paths.incidence.T @ per_row, rtol=1e-9,
                               atol=1e-6)
