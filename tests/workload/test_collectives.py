"""Collectives compile into transfers that move the bytes the algorithms prescribe."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.workload import DAGBuilder, add_collective, busbw_factor
from aifabric.workload.collectives import binary_tree, ring_orders

S = 1 << 24


def _compile(op, n, algorithm=None, **kw):
    b = DAGBuilder()
    add_collective(b, op, np.arange(n), S, algorithm=algorithm, **kw)
    return b.build()


def _sent_received(dag, n):
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    return (np.bincount(dag.src, weights=moved, minlength=n),
            np.bincount(dag.dst, weights=moved, minlength=n))


@pytest.mark.parametrize(("op", "algorithm", "factor"), [
    ("allreduce", "ring", lambda n: 2 * (n - 1) / n),
    ("allreduce", "halving_doubling", lambda n: 2 * (n - 1) / n),
    ("reduce_scatter", "ring", lambda n: (n - 1) / n),
    ("allgather", "ring", lambda n: (n - 1) / n),
    ("reduce_scatter", "halving_doubling", lambda n: (n - 1) / n),
    ("allgather", "halving_doubling", lambda n: (n - 1) / n),
    ("alltoall", "direct", lambda n: (n - 1) / n),
])
@pytest.mark.parametrize("n", [2, 8, 16])
def test_every_gpu_sends_and_receives_the_textbook_bytes(op, algorithm, factor, n):
    """Ring/halving-doubling/All-to-All: each GPU sends and receives factor(n) x S."""
    dag = _compile(op, n, algorithm)
    sent, recv = _sent_received(dag, n)
    np.testing.assert_allclose(sent, factor(n) * S)
    np.testing.assert_allclose(recv, factor(n) * S)


def test_ring_has_2n_minus_2_identical_steps_and_channels_split_the_buffer():
    """A ring AllReduce is one stage repeated 2(n-1) times; C channels carry S/C each."""
    dag = _compile("allreduce", 8, channels=4)
    assert list(dag.repeat) == [14]
    assert dag.n_transfers == 4 * 8
    np.testing.assert_allclose(dag.size_bytes, S / (8 * 4))


def test_rail_aware_rings_keep_inter_host_hops_on_one_rail():
    """Every channel is a ring through all GPUs; host-to-host hops join GPUs of the same
    local index (rail), and the channels of one host boundary use distinct rails."""
    k, m, C = 4, 8, 4
    host, local = np.repeat(np.arange(m), k), np.tile(np.arange(k), m)
    orders = ring_orders(k * m, C, host, local)
    rails = []
    for ring in orders:
        assert sorted(ring) == list(range(k * m))
        nxt = np.roll(ring, -1)
        cross = host[ring] != host[nxt]
        assert cross.sum() == m  # enters and leaves each host once
        assert (local[ring][cross] == local[nxt][cross]).all()
        rails.append(local[ring][cross & (host[ring] == 0)][0])
    assert len(set(rails)) == C


def test_double_binary_tree_spans_all_gpus_with_complementary_trees():
    """Both trees span the n GPUs; a GPU that is inner in one tree is a leaf in the other
    (but at most one GPU), and every tree edge carries S/2 up and S/2 down."""
    n = 16
    par, _dep = binary_tree(n)
    assert (par == -1).sum() == 1
    inner1 = set(par[par >= 0])
    par2 = np.empty(n, dtype=np.int64)
    par2[::-1] = np.where(par >= 0, n - 1 - par, -1)
    inner2 = set(par2[par2 >= 0])
    assert len(inner1 & inner2) <= 1
    dag = _compile("allreduce", n, "tree", chunk_bytes=S / 32)
    sent, _ = _sent_received(dag, n)
    assert sent.sum() == pytest.approx(2 * 2 * (n - 1) * S / 2)


def test_broadcast_delivers_the_buffer_to_every_gpu_once():
    """Pipelined broadcast: every GPU but the root receives exactly S; the root none."""
    dag = _compile("broadcast", 6, root=2, chunk_bytes=S / 10)
    _, recv = _sent_received(dag, 6)
    want = np.full(6, float(S))
    want[2] = 0
    np.testing.assert_allclose(recv, want)


def test_hierarchical_allreduce_keeps_inter_host_traffic_on_rails():
    """Hierarchical AllReduce: inter-host transfers join GPUs of the same local index and
    each GPU sends 2(m-1)/m x S/k across hosts."""
    k, m = 8, 4
    host, local = np.repeat(np.arange(m), k), np.tile(np.arange(k), m)
    b = DAGBuilder()
    add_collective(b, "allreduce", np.arange(k * m), S, algorithm="hierarchical",
                   host=host, local=local)
    dag = b.build()
    inter = host[dag.src] != host[dag.dst]
    assert (local[dag.src][inter] == local[dag.dst][inter]).all()
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    per_gpu = np.bincount(dag.src[inter], weights=moved[inter], minlength=k * m)
    np.testing.assert_allclose(per_gpu, 2 * (m - 1) / m * S / k)


def test_halving_doubling_needs_a_power_of_two():
    """Halving-doubling on 6 GPUs is refused."""
    with pytest.raises(ValueError, match="power-of-two"):
        _compile("allreduce", 6, "halving_doubling")


def test_busbw_factors_follow_nccl_tests():
    """busbw = algbw x 2(n-1)/n (AllReduce), (n-1)/n (AllGather, ReduceScatter,
    All-to-All), 1 (Broadcast)."""
    assert busbw_factor("allreduce", 8) == pytest.approx(1.75)
    assert busbw_factor("allgather", 8) == pytest.approx(0.875)
    assert busbw_factor("broadcast", 8) == 1.0


def test_unknown_operation_or_algorithm_is_refused():
    """An unknown op/algorithm names what is allowed."""
    with pytest.raises(ValueError, match="allowed"):
        _compile("allreduce", 4, "magic")
    with pytest.raises(ValueError, match="allowed"):
        _compile("scan", 4)
