"""Scenarios: a spec by path or embedded, routing overrides merged into the spec's, traffic
patterns, failures; subclass-friendly; every problem named as file: field: message."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import yaml
from pydantic import Field

from aifabric.errors import SpecError
from aifabric.routing.scenario import Scenario, load_scenario
from aifabric.routing.traffic import build_traffic, select_gpus
from aifabric.topology import NodeKind
from tests.conftest import EXAMPLES
from tests.routing.helpers import SMALL_SPECS, small

SCEN = EXAMPLES / "scenarios"


def _write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_every_example_scenario_loads():
    """Each file under examples/scenarios/ is a valid scenario: a routing scenario (spec and
    traffic), or a simulation scenario (``sim:``; traffic, collectives or jobs) that the
    simulator's subclass of Scenario loads."""
    from aifabric.sim.scenario import SimScenario

    files = sorted(SCEN.glob("*.yaml"))
    assert len(files) >= 6
    for p in files:
        if "goodput" in yaml.safe_load(p.read_text()):  # aifabric goodput's scenarios
            from aifabric.reliability.spec import GoodputScenario

            sc = load_scenario(p, GoodputScenario)
            assert sc.jobs
        elif "sim" in yaml.safe_load(p.read_text()):
            sc = load_scenario(p, SimScenario)
            assert sc.traffic or sc.collectives or sc.jobs or sc.workload is not None
        else:
            sc = load_scenario(p)
            assert sc.traffic
        assert sc.file == str(p)


def test_spec_path_is_relative_to_the_scenario_and_routing_overrides_merge(tmp_path):
    """``spec: ../x.yaml`` is resolved against the scenario's folder; ``routing`` changes
    only the fields it names, the others keep the spec's values."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "f.yaml").write_text(
        "name: f\ntopology: {family: rail}\nhosts: {count: 8}\n"
        "routing: {hash: crc16_ccitt, seed: 9}\n")
    (tmp_path / "sc").mkdir()
    p = _write(tmp_path / "sc", """
        spec: ../specs/f.yaml
        routing: {policy: spray, qps_per_connection: 4}
        traffic: [{pattern: ring}]
    """)
    sc = load_scenario(p)
    r = sc.policy
    assert (r.policy, r.qps_per_connection, r.hash, r.seed) == ("spray", 4, "crc16_ccitt", 9)
    assert sc.spec.routing == r and sc.spec_file.endswith("f.yaml")


def test_embedded_spec_and_its_problems_are_named_under_spec(tmp_path):
    """An embedded spec is validated like a spec file; its problems carry ``spec.``."""
    p = _write(tmp_path, """
        spec: {hosts: {count: 0}, topology: {family: rail}}
        traffic: []
    """)
    with pytest.raises(SpecError) as exc:
        load_scenario(p)
    assert [str(q) for q in exc.value.problems] == [
        f"{p}: spec.hosts.count: Input should be greater than or equal to 1 (got 0); "
        "allowed: 1..1000000"]


def test_all_problems_are_reported_with_file_and_field(tmp_path):
    """Unknown policy, unknown hash, a seed that is not an integer, an unknown pattern and
    an unknown field are all reported at once, one line each."""
    p = _write(tmp_path, f"""
        spec: {EXAMPLES / 'roce-5000.yaml'}
        routing: {{policy: magic, hash: md5, seed: seven}}
        traffic: [{{pattern: zigzag}}, {{pattern: ring, colour: red}}]
        colour: blue
    """)
    with pytest.raises(SpecError) as exc:
        load_scenario(p)
    lines = [str(q) for q in exc.value.problems]
    assert len(lines) == 6
    assert all(line.startswith(f"{p}: ") for line in lines)
    text = "\n".join(lines)
    for frag in ("routing.policy: Input should be 'ecmp'", "routing.hash: Input should be",
                 "routing.seed: Input should be a valid integer",
                 "traffic.0.pattern: unknown pattern 'zigzag'; allowed: permutation",
                 "traffic.1.colour: unknown field; allowed: channels, gpus",
                 "colour: unknown field; allowed: description, failures, name"):
        assert frag in text, text


def test_a_missing_spec_file_is_named(tmp_path):
    """A spec path that does not exist is reported against that path."""
    p = _write(tmp_path, "spec: nowhere.yaml\ntraffic: []\n")
    with pytest.raises(SpecError, match=r"nowhere\.yaml: file not found"):
        load_scenario(p)


def test_subclass_adds_fields_and_keeps_the_loader(tmp_path):
    """Later stages subclass Scenario; load_scenario(path, Sub) validates the new fields
    and still reports unknown ones with the subclass's allowed list."""

    class SimScenario(Scenario):
        sim: str = Field(default="flow")
        jobs: list[dict] = Field(default_factory=list)

    p = _write(tmp_path, f"""
        spec: {EXAMPLES / 'roce-5000.yaml'}
        sim: packet
        jobs: [{{name: a}}]
    """)
    sc = load_scenario(p, SimScenario)
    assert isinstance(sc, SimScenario) and sc.sim == "packet" and sc.file == str(p)
    bad = _write(tmp_path, f"spec: {EXAMPLES / 'roce-5000.yaml'}\nsimm: x\n", "b.yaml")
    with pytest.raises(SpecError, match=r"simm: unknown field; allowed: .*jobs.*sim"):
        load_scenario(bad, SimScenario)


def test_patterns_make_the_connections_they_promise():
    """permutation: each GPU sends once and receives once; all_to_all: n(n-1); ring: one
    successor per GPU per channel, the host-to-host hop of channel c on rail c; incast:
    every sender to one GPU."""
    f = small("rail")
    g = f.ids(NodeKind.GPU, active_only=True)
    n = len(g)
    pats = [{"pattern": "permutation"}, {"pattern": "all_to_all", "gpus": "0:10"},
            {"pattern": "ring", "channels": 4},
            {"pattern": "incast", "senders": "0:8", "to": str(f.nodes.name[g[50]])}]
    from pydantic import TypeAdapter

    from aifabric.routing.traffic import TrafficPattern

    ta = TypeAdapter(TrafficPattern)
    parts = [build_traffic(f, [ta.validate_python({**p, "qps_per_connection": 1})])[0]
             for p in pats]
    perm, a2a, ring, inc = parts
    assert sorted(perm.src_gpu.tolist()) == sorted(g.tolist())
    assert sorted(perm.dst_gpu.tolist()) == sorted(g.tolist())
    assert (perm.src_gpu != perm.dst_gpu).all()
    assert len(a2a) == 90
    assert len(ring) == 4 * n
    for c in range(4):
        sel = slice(c * n, (c + 1) * n)
        s, d = ring.src_gpu[sel], ring.dst_gpu[sel]
        assert sorted(d.tolist()) == sorted(g.tolist())
        cross = f.nodes.host[s] != f.nodes.host[d]
        assert (f.nodes.index[d[cross]] == c).all()
        assert (f.nodes.rail[ring.src_nic[sel][cross]] == c).all()
    assert (inc.dst_gpu == g[50]).all() and len(inc) == 8


def test_gpu_sets_and_their_errors():
    """GPU sets: all, a range, or names; a range outside the GPUs, a name that is no GPU
    and a malformed range are refused naming the field."""
    f = small("rail")
    g = f.ids(NodeKind.GPU, active_only=True)
    assert (select_gpus(f, "8:16:2", "x") == g[8:16:2]).all()
    names = [str(f.nodes.name[g[3]]), str(f.nodes.name[g[1]])]
    assert select_gpus(f, names, "x").tolist() == [g[3], g[1]]
    for bad, text in (("0:99999", "outside"), ("a:b", "allowed: all"),
                      (["host-zz-gpu0"], "no GPU called")):
        with pytest.raises(SpecError, match=text):
            select_gpus(f, bad, "traffic.0.gpus")
    assert np.unique(g).size == len(g)
    assert SMALL_SPECS  # the small fabrics are shared with the other routing tests
