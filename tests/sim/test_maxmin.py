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
