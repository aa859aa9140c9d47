"""``sim: packet`` on a Fabric: the same DAG and routes as the flow engine."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from aifabric.sim.flow.engine import run_flow
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.run import flow_routes, run_packet
from aifabric.sim.results import arc_groups, build_result
from aifabric.topology.fabric import NodeKind
from tests.sim.packet.nets import ft4_permutation, routed


@pytest.fixture(scope="module")
def perm():
    return routed(ft4_permutation(4_000_000))


@pytest.fixture(scope="module")
def small():
    return routed(ft4_permutation(500_000))


def test_routes_run_nic_to_nic_along_the_routed_arcs(small):
    """Each flow's packet route is a connected chain of the router's arcs from the
    source NIC to the destination NIC."""
    f, _, paths, _ = small
    src, dst, _ = f.arcs
    inc = paths.incidence.tocsr()
    for r, route in enumerate(flow_routes(f, paths)):
        assert f.nodes.kind[src[route[0]]] == NodeKind.NIC
        assert f.nodes.kind[dst[route[-1]]] == NodeKind.NIC
        assert all(dst[a] == src[b] for a, b in itertools.pairwise(route))
        assert set(route) <= set(inc.indices[inc.indptr[r]:inc.indptr[r + 1]].tolist())


def test_permutation_fct_agrees_with_the_flow_simulator(perm):
    """A permutation of 4 MB flows over a k=4 fat-tree (ECMP, PFC, no CC so the packet
    engine shares a link the way max-min does): per-flow completion times of the two
    simulators agree within 10% (the distribution is printed); the packet one is never
    faster than header overhead allows."""
    f, wl, paths, xconn = perm
    fr = run_flow(wl.dag, paths, xconn)
    pr = run_packet(wl.dag, f, paths, xconn, PacketConfig.model_validate(
        {"cc": {"algorithm": "none"}}))
    ratio = pr.xfer_end_ns / fr.xfer_end_ns
    print(f"packet/flow FCT ratio: min {ratio.min():.3f} p50 {np.median(ratio):.3f} "
          f"p90 {np.percentile(ratio, 90):.3f} max {ratio.max():.3f}")
    assert np.all(np.abs(ratio - 1) <= 0.10), ratio
    assert pr.counters["delivered_bytes"] == wl.dag.total_bytes()
    assert pr.counters["drops"] == 0


def test_packet_run_feeds_the_shared_result_tables_deterministically(small):
    """build_result accepts a packet run; two runs give the same tables byte for byte."""
    f, wl, paths, xconn = small
    g, names = arc_groups(f)
    outs = []
    for _ in range(2):
        pr = run_packet(wl.dag, f, paths, xconn, PacketConfig(), arc_group=g,
                        n_groups=len(names))
        r = build_result("perm", "packet", f, wl.dag, pr, job_gpus=wl.job_gpus,
                         iterations=wl.iterations)
        assert r.makespan_ns == pytest.approx(np.nanmax(pr.xfer_end_ns))
        assert len(r.tables["transfers"]["end_ns"]) == wl.dag.n_transfers
        outs.append(b"".join(np.asarray(v).tobytes() for t in r.tables.values()
                             for v in t.values() if np.asarray(v).dtype != object)
                    + b"".join(pr.port_series[k].tobytes() for k in pr.port_series))
    assert outs[0] == outs[1]
