"""Runs that would hang are refused: every scenario parameter has a physical range (one
line naming the field and the range), a packet run's events are estimated before it
starts and a run above ``--max-events`` is refused with the estimate and how to shrink
it; the estimate is close to what runs report; progress is reported while it runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.scenario import SimScenario
from tests.sim.packet.nets import FT4, config, incast

EX = Path(__file__).resolve().parents[3] / "examples" / "scenarios"

INCAST = ("traffic:\n  - {pattern: incast, senders: \"1:5\", to: host-s00-h000-gpu0, "
          "size_bytes: %s}\n")


def _scenario(tmp_path: Path, body: str, qps: int = 1) -> Path:
    p = tmp_path / "s.yaml"
    head = {"name": "s", **FT4, "routing": {**FT4["routing"], "qps_per_connection": qps},
            "sim": "packet"}
    p.write_text(yaml.safe_dump(head, sort_keys=False) + body)
    return p


def _one_line(r) -> str:
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert r.code == 2 and len(lines) == 1, (r.code, r.err)
    assert "Traceback" not in r.err
    return lines[0]


def test_a_3_byte_mtu_is_refused_naming_the_field_and_its_range(cli, tmp_path):
    """``mtu_payload_bytes: 3`` ran for minutes (a 2 MB incast in 3-byte packets); it is
    refused when the scenario is read: RoCE's path MTU is 256..4096 bytes."""
    s = _scenario(tmp_path, "packet: {nic: {mtu_payload_bytes: 3}}\n" + INCAST % "2000000")
    out = tmp_path / "rep"
    line = _one_line(cli("simulate", s, "--out", out))
    assert "s.yaml" in line and "packet.nic.mtu_payload_bytes" in line
    assert "allowed: 256..4096" in line and "got 3" in line
    assert not out.exists()


@pytest.mark.parametrize(("doc", "field", "allowed"), [
    ({"packet": {"nic": {"rto_us": 1e-9}}}, "packet.nic.rto_us", "1..10000000"),
    ({"packet": {"cc": {"dcqcn": {"rpg_time_reset": 1e-7}}}},
     "packet.cc.dcqcn.rpg_time_reset", "1..1000000"),
    ({"packet": {"sample_us": 1e-6}}, "packet.sample_us", "1..1000000"),
    ({"packet": {"deadlock_check_us": 0.001}}, "packet.deadlock_check_us", "1..1000000"),
    ({"packet": {"until_ms": 1e12}}, "packet.until_ms", "above 0 and at most 60000"),
    ({"packet": {"buffer": {"size_bytes": 10}}}, "packet.buffer.size_bytes", "16384.."),
    ({"packet": {"buffer": {"alpha": 1e6}}}, "packet.buffer.alpha", "0.0078125..64"),
    ({"packet": {"nic": {"ack_interval_packets": 10**9}}},
     "packet.nic.ack_interval_packets", "1..1024"),
    ({"packet": {"cc": {"dcqcn": {"rpg_ai_rate": 1e12}}}}, "packet.cc.dcqcn.rpg_ai_rate",
     "at most 1600000"),
    ({"packet": {"pfc": {"watchdog_ms": 0}}}, "packet.pfc.watchdog_ms", "0.001..60000"),
    ({"collectives": [{"op": "allreduce", "size_bytes": "2000TB", "gpus": 2}]},
     "collectives.0.size_bytes", "above 0 and at most 1125899906842624"),
    ({"collectives": [{"op": "allreduce", "size_bytes": 1e20, "gpus": 2}]},
     "collectives.0.size_bytes", "at most 1125899906842624"),
    ({"collectives": [{"op": "allreduce", "size_bytes": 1000, "gpus": 2, "channels": 1000}]},
     "collectives.0.channels", "1..64"),
    ({"collectives": [{"op": "allreduce", "size_bytes": 1000, "gpus": 2, "repeat": 10**9}]},
     "collectives.0.repeat", "1..100000"),
    ({"jobs": [{"gpus": 2, "iterations": 10**9}]}, "jobs.0.iterations", "1..10000"),
    ({"jobs": [{"gpus": 2, "model": {"layers": 10**9}}]}, "jobs.0.model.layers", "1..10000"),
    ({"traffic": [{"pattern": "ring", "size_bytes": 2**60}]}, "traffic.0.size_bytes",
     "0..1125899906842624"),
    ({"traffic": [{"pattern": "ring", "channels": 999}]}, "traffic.0.channels", "at most 64"),
    ({"seed": -1}, "seed", "0..18446744073709551615"),
])
def test_every_scenario_parameter_has_a_physical_range(doc, field, allowed):
    """Timers that would fire every picosecond, buffers of 10 bytes, 10^20-byte
    collectives, a billion iterations: one problem each, naming the field (and, for a
    number, its whole range)."""
    base = {"spec": {"topology": {"family": "clos"}}}
    with pytest.raises(SpecError) as err:
        scenario_from_dict({**base, **doc}, file="s.yaml", model=SimScenario)
    probs = err.value.problems
    assert len(probs) == 1, probs
    assert probs[0].path == field
    assert f"allowed: {allowed}" in probs[0].message or allowed in probs[0].message


def test_a_huge_incast_is_refused_with_the_estimate_and_how_to_shrink_it(cli, tmp_path):
    """4 x 200 GB into one port: minutes of simulation with no output before; now one
    line, exit 2: the estimated events, the limit, and the ways to shrink the run."""
    s = _scenario(tmp_path, INCAST % "200000000000")
    out = tmp_path / "rep"
    line = _one_line(cli("simulate", s, "--out", out))
    assert "--max-events" in line and "s.yaml" in line
    m = re.search(r"estimated at ([0-9.e+]+) events", line)
    assert m is not None and float(m.group(1)) > 2e8
    assert "limit of 2e+08" in line
    for way in ("size_bytes", "fewer GPUs", "--sim flow", "raise --max-events"):
        assert way in line
    assert not out.exists()
    # compare takes the same option and refuses the same run (one line per scenario)
    r = cli("compare", s, s, "--max-events", "1e9")
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert r.code == 2 and len(lines) == 2
    assert all("--max-events" in x and "limit of 1e+09" in x for x in lines)


def test_the_limit_refuses_exactly_the_runs_estimated_above_it(cli, tmp_path):
    """A small run reports its estimate; ``--max-events`` just below it refuses the run,
    just above runs it; 0 means no limit; a negative limit is bad input."""
    s = _scenario(tmp_path, INCAST % "200000")
    est = json.loads(cli("simulate", s, "--json").out)["packet"]["estimated_events"]
    assert est > 0
    line = _one_line(cli("simulate", s, "--json", "--max-events", str(est - 1)))
    assert f"estimated at {est:.3g} events" in line
    assert cli("simulate", s, "--json", "--max-events", str(est + 1)).code == 0
    assert cli("simulate", s, "--json", "--max-events", "0").code == 0
    assert "--max-events" in _one_line(cli("simulate", s, "--max-events", "-5"))


@pytest.mark.parametrize(("name", "body"), [
    ("incast-dcqcn", None),
    ("incast-hpcc", None),
    ("permutation-packet", None),
    ("allreduce ring, 2 QPs", "collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: 8}\n"),
    ("ACK every 4, 1 KiB MTU", "packet: {nic: {ack_interval_packets: 4, "
     "mtu_payload_bytes: 1024}}\n" + INCAST % "300000"),
    ("alltoall, TIMELY", "packet: {cc: {algorithm: timely}}\n"
     "collectives:\n  - {op: alltoall, size_bytes: 2MiB, gpus: 6}\n"),
])
def test_the_estimate_is_within_2x_of_the_events_a_run_reports(cli, tmp_path, name, body):
    """Congested and uncongested, every CC, collectives with repeated stages, several
    QPs per connection, delayed ACKs: estimate / events within [0.5, 2]."""
    s = EX / f"{name}.yaml" if body is None else _scenario(tmp_path, body,
                                                            qps=2 if "2 QPs" in name else 1)
    r = cli("simulate", s, "--json")
    pk = json.loads(r.out)["packet"]
    assert pk["qps_done"] == pk["qps"] > 0
    assert 0.5 <= pk["estimated_events"] / pk["events"] <= 2, pk


def test_progress_is_reported_while_running_and_changes_nothing():
    """With a progress callback the run reports rising event counts up to its total,
    and ends with the same events and counters as without one."""
    seen: list[int] = []
    runs = []
    for progress in (None, seen.append):
        sim, _, _ = incast(config(), n=4, size=400_000)
        sim.progress = progress
        sim.run()
        runs.append(sim.counters())
    assert runs[0] == runs[1]
    assert len(seen) > 1 and seen == sorted(seen)
    assert seen[-1] <= runs[1]["events"]


@pytest.mark.parametrize("name", ["allreduce-hpn", "deadlock-bounce", "permutation-packet"])
def test_the_hops_of_the_estimate_are_the_routes_the_run_takes(name):
    """The estimate's hops come from the flow x arc matrix alone (no loop over flows):
    for every flow row, the length of the route the packet run follows."""
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.packet.run import flow_routes, route_hops
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload
    from aifabric.topology import build_fabric

    scn = load_scenario(EX / f"{name}.yaml", SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    paths, _ = route_dag(f, wl.dag, scn.spec.routing, failures=scn.failures or None,
                         seed=scn.seed, pinned=wl.pinned or None)
    lengths = [len(r) for r in flow_routes(f, paths)]
    assert lengths and route_hops(f, paths).tolist() == lengths
