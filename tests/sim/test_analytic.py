"""The analytic model: its DAG evaluation equals the textbook closed forms, and the flow
engine agrees with it where the network adds no contention."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.sim.analytic import closed_form, run_analytic
from aifabric.sim.flow.engine import run_flow
from aifabric.workload import DAGBuilder, add_collective
from tests.sim.star import star_paths

S = 1 << 28


def _dag(op, algorithm, n, **kw):
    b = DAGBuilder()
    add_collective(b, op, np.arange(n), S, algorithm=algorithm, **kw)
    return b.build()


CASES = [("allreduce", "ring", 8, {"channels": 2}), ("allreduce", "ring", 5, {}),
         ("reduce_scatter", "ring", 6, {}), ("allgather", "ring", 6, {}),
         ("allreduce", "halving_doubling", 16, {}), ("allgather", "halving_doubling", 8, {}),
         ("allreduce", "tree", 16, {"chunk_bytes": S / 64}),
         ("allreduce", "tree", 7, {"chunk_bytes": S / 16}),
         ("alltoall", "direct", 12, {}), ("broadcast", "ring", 9, {"chunk_bytes": S / 32})]


@pytest.mark.parametrize(("op", "algorithm", "n", "kw"), CASES)
def test_stage_model_equals_closed_form(op, algorithm, n, kw):
    """On an ideal single switch the analytic run of the compiled collective equals the
    closed form alpha-beta formula, and so does the flow engine (no core contention)."""
    dag = _dag(op, algorithm, n, **kw)
    paths, conn = star_paths(dag, n, gbps=200, latency_ns=1500)
    edge = np.ones(2 * n, bool)
    channels = kw.get("channels", 1)
    chunk = kw.get("chunk_bytes", 4 << 20)
    # the channels of a ring share the GPU's one link here: B per channel = 200 / C
    want = closed_form(op, algorithm, n, S, 200 / channels, 1500, channels=channels,
                       chunk_bytes=chunk)
    got = run_analytic(dag, paths, conn, edge).stage_end_ns.max()
    if algorithm == "tree":  # the closed form counts full-bandwidth steady steps only
        depth = int(np.log2(n)) + 1
        assert want <= got <= want + (2 * depth - 1) * 4 * chunk / 25.0
    else:
        assert got == pytest.approx(want, rel=1e-9)
    flow = np.nanmax(run_flow(dag, paths, conn).stage_end_ns)
    assert flow == pytest.approx(got, rel=0.01)


def test_hierarchical_closed_form():
    """Hierarchical AllReduce = intra-host ReduceScatter + per-rail ring + AllGather."""
    k, m = 4, 3
    host, local = np.repeat(np.arange(m), k), np.tile(np.arange(k), m)
    b = DAGBuilder()
    add_collective(b, "allreduce", np.arange(k * m), S, algorithm="hierarchical",
                   host=host, local=local)
    dag = b.build()
    paths, conn = star_paths(dag, k * m, gbps=100, latency_ns=700)
    got = run_analytic(dag, paths, conn, np.ones(2 * k * m, bool)).stage_end_ns.max()
    want = closed_form("allreduce", "hierarchical", k * m, S, 100, 700, hosts=m)
    assert got == pytest.approx(want, rel=1e-9)
