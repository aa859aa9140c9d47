"""Simulating scenarios on real (small) fabrics through the router: closed forms where
the network adds no contention, and the HPN paper's directions where it does."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from aifabric import build_fabric
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.analytic import closed_form
from aifabric.sim.paths import route_dag
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario
from aifabric.spec.load import spec_from_dict
from tests.conftest import EXAMPLES, example

GIB = 1 << 30


def _rail(hosts: int, gpus_per_host: int = 8) -> dict:
    return {"name": f"rail-{hosts}x{gpus_per_host}",
            "hosts": {"count": hosts, "gpus_per_host": gpus_per_host,
                      "nics_per_host": gpus_per_host, "port_gbps": 400},
            "topology": {"family": "rail"}}


def _hpn(planes: int) -> dict:
    return {"name": f"hpn-mini-{planes}",
            "hosts": {"count": 64, "ports_per_nic": 2, "port_gbps": 200,
                      "scaleup_gbps": 3200},
            "topology": {"family": "hpn", "planes": planes, "hosts_per_segment": 16,
                         "tor": {"model": "tomahawk5", "down_gbps": 200, "up_ports": 8,
                                 "up_gbps": 400},
                         "agg": {"model": "tomahawk5", "down_ports": 32, "up_ports": 0},
                         "core": None}}


@cache
def _fabric(key: str, spec_json: str):
    import json

    return build_fabric(spec_from_dict(json.loads(spec_json)))


def _run(spec: dict, body: dict, routing: dict, sim: str = "flow"):
    import json

    scn = scenario_from_dict({"name": spec["name"], "spec": spec, "routing": routing,
                              "sim": sim, **body}, model=SimScenario)
    f = _fabric(spec["name"], json.dumps(spec, sort_keys=True))
    return scn, f, simulate(scn, f)


@pytest.mark.parametrize(("hosts", "gph", "channels"), [(4, 8, 8), (8, 1, 1)])
def test_ring_allreduce_on_a_non_blocking_rail_fabric_matches_the_closed_form(
        hosts, gph, channels):
    """No collisions (rail-optimized, source_port): the flow engine is within 1% of
    2(n-1) x (alpha + S/(n C B)), and busbw is the NIC line rate times the rails used
    (one NIC per channel) within 1%."""
    spec = _rail(hosts, gph)
    size = 4 * GIB
    body = {"collectives": [{"op": "allreduce", "size_bytes": size, "gpus": hosts * gph,
                             "channels": channels}]}
    scn, f, r = _run(spec, body, {"policy": "source_port"})
    n = hosts * gph
    wl = compile_workload(scn, f)
    paths, xconn = route_dag(f, wl.dag, scn.spec.routing)
    alpha = float(paths.latency_ns[xconn].max())
    want = closed_form("allreduce", "ring", n, size, 400, alpha, channels=channels)
    c = r.summary["collectives"][0]
    assert c["time_ns"] == pytest.approx(want, rel=0.01)
    assert c["busbw_gbps"] == pytest.approx(400 * channels, rel=0.01)
    # and the analytic model gives the same closed form on the same paths
    _, _, ra = _run(spec, body, {"policy": "source_port"}, sim="analytic")
    assert ra.summary["collectives"][0]["time_ns"] == pytest.approx(want, rel=1e-6)


def _busbw(r) -> float:
    return float(np.mean([c["busbw_gbps"] for c in r.summary["collectives"]]))


ROUTING = {"qps_per_connection": 2, "nic_port_choice": "round_robin"}


def test_single_plane_ecmp_gives_lower_cross_segment_busbw_than_dual_plane():
    """HPN: a cross-segment AllReduce on single-plane ECMP (aggs hash onto one ToR of a
    pair) gets lower busbw than on dual-plane; dual-plane NICs receive on both ports."""
    body = {"collectives": [{"op": "allreduce", "size_bytes": GIB, "gpus": 256,
                             "channels": 8, "placement": "spread"}]}
    _, _, single = _run(_hpn(1), body, {"policy": "ecmp", **ROUTING})
    _, _, dual = _run(_hpn(2), body, {"policy": "ecmp", **ROUTING})
    assert _busbw(single) < _busbw(dual)
    assert dual.summary["two_port"]["down"]["one_port_idle"] == 0


def test_four_concurrent_allreduce_jobs_run_faster_on_dual_plane_with_source_ports():
    """HPN: 4 concurrent AllReduce jobs finish sooner on dual-plane + source_port than on
    single-plane ECMP."""
    body = {"collectives": [{"name": f"job{i}", "op": "allreduce", "size_bytes": GIB / 4,
                             "gpus": 64, "channels": 8, "placement": "spread"}
                            for i in range(4)]}
    _, _, single = _run(_hpn(1), body, {"policy": "ecmp", **ROUTING})
    _, _, dual = _run(_hpn(2), body, {"policy": "source_port", **ROUTING})
    assert dual.makespan_ns < single.makespan_ns
    assert _busbw(dual) > _busbw(single)


def test_packed_job_sends_less_cross_segment_traffic_than_spread():
    """A job packed into 3 segments sends less cross-segment traffic than the same job
    spread over 19 segments (DCN+-like single-ToR fabric)."""
    f = example("single-tor-dcn")
    job = {"name": "j", "gpus": 320, "parallel": {"dp": 5, "tp": 8, "pp": 8},
           "micro_batches": 2, "model": {"layers": 16}}
    out = {}
    for pl, extra in (("pack", {}), ("spread", {"segments": 19})):
        scn = scenario_from_dict({"spec": "single-tor-dcn.yaml",
                                  "jobs": [{**job, "placement": pl, **extra}]},
                                 base_dir=EXAMPLES, model=SimScenario)
        wl = compile_workload(scn, f)
        seg = f.nodes.segment
        dag = wl.dag
        moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
        out[pl] = (len(np.unique(seg[wl.job_gpus[0]])),
                   moved[seg[dag.src] != seg[dag.dst]].sum())
    assert out["pack"][0] == 3 and out["spread"][0] == 19
    assert out["pack"][1] < out["spread"][1]


def test_training_job_iteration_and_exposed_communication():
    """An iteration lasts at least its compute-only critical path; the exposed
    communication is the difference; flow and analytic agree within 5% here."""
    body = {"jobs": [{"name": "j", "gpus": 64, "parallel": {"dp": 2, "tp": 8, "pp": 4},
                      "micro_batches": 4, "compute": {"fwd_ms_per_layer": 0.2},
                      "model": {"layers": 16, "params": 1e9}}]}
    _, _, r = _run(_rail(8), body, {"policy": "source_port"})
    j = r.summary["jobs"][0]
    assert j["compute_ns"] == pytest.approx((4 + 4 - 1) * 0.6e6 * 16 / 4)
    assert j["iteration_ns"] >= j["compute_ns"]
    assert j["exposed_comm_ns"] == pytest.approx(j["iteration_ns"] - j["compute_ns"])
    _, _, ra = _run(_rail(8), body, {"policy": "source_port"}, sim="analytic")
    assert ra.summary["jobs"][0]["iteration_ns"] == pytest.approx(j["iteration_ns"], rel=0.05)


def test_same_input_same_output():
    """Deterministic: the same scenario twice gives identical tables."""
    body = {"collectives": [{"op": "alltoall", "size_bytes": 1 << 20, "gpus": 32,
                             "placement": "random", "seed": 3}]}
    _, _, a = _run(_rail(8), body, {"policy": "ecmp"})
    _, _, b = _run(_rail(8), body, {"policy": "ecmp"})
    for name, table in a.tables.items():
        for col, v in table.items():
            assert np.array_equal(v, b.tables[name][col]), (name, col)


def test_routing_scenario_traffic_is_simulated_and_source_ports_reach_line_rate():
    """A routing scenario's traffic runs under simulate unchanged: on the rail
    permutation, host-chosen source ports put one flow per uplink, so every transfer
    runs at the 400G line rate (within the latency term); ECMP collisions make it slower."""
    from aifabric.routing.scenario import load_scenario

    path = EXAMPLES / "scenarios" / "rail-permutation.yaml"
    scn = load_scenario(path, SimScenario)
    f = example("roce-5000")
    sp = simulate(scn, f).summary["collectives"][0]
    assert sp["busbw_gbps"] == pytest.approx(400, rel=0.02)
    ecmp = scn.model_copy(update={"spec": scn.spec.model_copy(update={
        "routing": scn.spec.routing.model_copy(update={"policy": "ecmp"})})})
    assert simulate(ecmp, f).summary["collectives"][0]["busbw_gbps"] < sp["busbw_gbps"]


def test_an_unfinished_run_reports_no_time_and_says_how_far_it_got(cli, tmp_path):
    """A run that stops before its transfers are delivered (the deadlock example) must
    not report a completion time or a bandwidth: the collective is 'unfinished', the
    JSON has nulls, and the summary says how many transfers were left."""
    import json

    from tests.conftest import EXAMPLES

    r = cli("simulate", str(EXAMPLES / "scenarios" / "deadlock-bounce.yaml"), "--json")
    assert r.code == 1, r.err  # finished with a deadlock: exit 1 (README: exit codes)
    s = json.loads(r.out)
    assert s["finished"] is False
    assert s["transfers_undelivered"] == s["engine"]["transfers"] > 0
    c = s["collectives"][0]
    assert c["time_ns"] is None and c["busbw_gbps"] is None
    assert s["makespan_ns"] > 0  # how far the run got
    r = cli("simulate", str(EXAMPLES / "scenarios" / "deadlock-bounce.yaml"))
    assert "unfinished" in r.out and "undelivered" in r.out
