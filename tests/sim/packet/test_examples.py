"""The packet example scenarios load and run: exactly-once delivery, no loss with PFC."""

from __future__ import annotations

from pathlib import Path

import pytest

from aifabric import build_fabric
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.packet import attach_packet_results, packet_config_from_dict, run_packet
from aifabric.sim.paths import route_dag
from aifabric.sim.results import arc_groups, build_result
from aifabric.sim.run import compile_workload
from aifabric.sim.scenario import SimScenario
from aifabric.spec.load import load_yaml

EX = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


def _run(name):
    path = EX / name
    doc = load_yaml(path)
    assert doc.pop("sim") == "packet"
    cfg = packet_config_from_dict(doc.pop("packet"), file=str(path))
    scn = scenario_from_dict(doc, file=str(path), base_dir=path.parent, model=SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    paths, xconn = route_dag(f, wl.dag, scn.spec.routing, seed=scn.seed)
    g, names = arc_groups(f)
    run = run_packet(wl.dag, f, paths, xconn, cfg, arc_group=g, n_groups=len(names))
    res = build_result(scn.name, "packet", f, wl.dag, run, job_gpus=wl.job_gpus,
                       iterations=wl.iterations)
    return wl, attach_packet_results(res, run)


@pytest.mark.parametrize("name", ["incast-dcqcn.yaml", "incast-hpcc.yaml"])
def test_incast_examples_are_lossless_and_deliver_every_byte_once(name, tmp_path):
    """The incast examples deliver the DAG's bytes exactly once without a drop; the
    result carries the packet tables, and the plots are written."""
    from aifabric.sim.packet import write_packet_plots

    wl, res = _run(name)
    pk = res.summary["packet"]
    assert pk["delivered_bytes"] == wl.dag.total_bytes()
    assert pk["drops"] == 0 and pk["duplicate_bytes"] == 0
    assert {"packet_queues", "packet_flows", "packet_alarms"} <= set(res.tables)
    assert len(res.tables["packet_queues"]["port"]) == len(res.tables["packet_queues"]["tc"])
    assert write_packet_plots(res, tmp_path) == ["packet_queues.png", "packet_rates.png"]
    assert (tmp_path / "packet_queues.png").stat().st_size > 1000
