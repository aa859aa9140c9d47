"""The scheduled fabric at flow level is the closed form of aifabric.sim.scheduled: every
rate is the max-min share of the edge ports (RoCE frames) and of the edges' fabric
bandwidth (cells, with the speedup), with no collision inside the fabric."""

from __future__ import annotations

import json
import math
from functools import cache

import numpy as np
import pytest

from aifabric import build_fabric
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario
from aifabric.spec.load import spec_from_dict

R = 400  # Gbit/s
MTU, HDR, WIRE = 4096, 62, 20
HOST_EFF = MTU / (MTU + HDR + WIRE)
CELLS = math.ceil((MTU + HDR) / 240)
CELL_EFF = MTU / (CELLS * 256)


def _spec(speedup: float = 1.2, scheduled: bool = True) -> dict:
    d = {"name": "k8", "hosts": {"count": 128, "gpus_per_host": 1, "nics_per_host": 1,
                                 "port_gbps": R},
         "switch_models": {"k8": {"ports": 8, "port_gbps": R}},
         "topology": {"family": "fat_tree", "k": 8, "switch": {"model": "k8"},
                      "rail_optimized": False}}
    if scheduled:
        d["scheduled"] = {"speedup": speedup}
    return d


@cache
def _fabric(spec_json: str):
    return build_fabric(spec_from_dict(json.loads(spec_json)))


def _run(spec: dict, traffic: list[dict], routing: dict | None = None):
    scn = scenario_from_dict({"name": "t", "spec": spec, "routing": routing or {},
                              "traffic": traffic, "sim": "flow"}, model=SimScenario)
    f = _fabric(json.dumps(spec, sort_keys=True))
    return scn, f, simulate(scn, f)


def _xfer(r):
    t = r.tables["transfers"]
    return {k: np.asarray(t[k]) for k in t}


def test_a_lone_flow_takes_size_over_the_frame_rate_plus_latency_and_grant():
    size = 64_000_000
    spec = _spec()
    scn, f, r = _run(spec, [{"pattern": "incast", "senders": ["host-s00-h000-gpu0"],
                             "to": "host-s31-h003-gpu0", "size_bytes": size}])
    wl = compile_workload(scn, f)
    from aifabric.sim.paths import route_dag

    paths, xconn = route_dag(f, wl.dag, scn.spec.routing.model_copy(
        update={"policy": "spray"}))
    lat = float(paths.latency_ns[xconn][0])
    want = size * 8 / (R * HOST_EFF) + lat + 1500
    x = _xfer(r)
    assert (x["end_ns"] - x["start_ns"])[0] == pytest.approx(want, rel=1e-6)
    assert r.summary["routing"]["policy"] == "scheduled"
    assert r.summary["scheduled"]["cells_per_frame"] == CELLS


def test_a_permutation_runs_every_flow_at_its_port_rate_where_ecmp_collides():
    traffic = [{"pattern": "permutation", "gpus": "all", "size_bytes": 16_000_000}]
    _, _, r = _run(_spec(), traffic)
    rate = _xfer(r)["min_rate_gbps"]
    assert rate == pytest.approx(R * HOST_EFF, rel=1e-6)  # every flow, no collision
    _, _, e = _run(_spec(scheduled=False), traffic, {"policy": "ecmp"})
    assert _xfer(e)["min_rate_gbps"].min() < 0.75 * R  # hash collisions under ECMP


def test_without_speedup_the_cells_bind_at_the_edge():
    """Speedup 1: an edge's fabric uplinks carry cells, so the edge's hosts share
    ``uplinks x R x cell efficiency`` of payload; a permutation whose flows all leave
    their edge runs at R x cell efficiency (below the port's frame rate)."""
    assert CELL_EFF < HOST_EFF
    traffic = [{"pattern": "permutation", "gpus": "all", "size_bytes": 16_000_000,
                "shift": 64}]  # every flow to the other half: all cross the fabric
    _, _, r = _run(_spec(speedup=1.0), traffic)
    assert _xfer(r)["min_rate_gbps"] == pytest.approx(R * CELL_EFF, rel=1e-6)
    s = r.summary["scheduled"]
    moved = s["fabric_payload_bytes"]
    assert s["cell_overhead_bytes"] == pytest.approx(moved * (1 / CELL_EFF - 1), rel=1e-6)


def test_an_incast_shares_the_receivers_port_max_min():
    traffic = [{"pattern": "incast", "senders": "1:33", "to": "host-s00-h000-gpu0",
                "size_bytes": 4_000_000}]
    _, _, r = _run(_spec(), traffic)
    x = _xfer(r)
    assert len(x["min_rate_gbps"]) == 32
    assert x["min_rate_gbps"] == pytest.approx(R * HOST_EFF / 32, rel=1e-6)


def test_simulate_prints_and_reports_the_closed_form_line(cli, tmp_path):
    from tests.conftest import EXAMPLES

    out = tmp_path / "rep"
    r = cli("simulate", EXAMPLES / "scenarios" / "permutation-scheduled.yaml", "--out", out)
    assert r.code == 0, r.err
    assert "routing scheduled" in r.out
    assert "scheduled fabric (closed form): 18 cells per frame" in r.out
    assert "scheduled fabric (closed form)" in (out / "report.md").read_text()
