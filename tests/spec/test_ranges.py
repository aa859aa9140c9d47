"""Every number an input holds has a physical range: each numeric field of the spec and
scenario models has a finite lower and upper bound (or is bounded by a validator, which is
probed here), every rate in Gbit/s is at least 1 Gbit/s, docs/spec.md lists each with its
range, an absurd value is one line naming the field, and every example still loads."""

from __future__ import annotations

import copy

import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.reliability.spec import GoodputScenario
from aifabric.routing.scenario import Scenario
from aifabric.sim.scenario import SimScenario
from aifabric.spec.models import Spec
from aifabric.spec.ranges import CHECKED_IN_CODE, markdown, numeric_ranges
from tests.conftest import EXAMPLES, ROOT

#: the models of docs/spec.md's table (as scripts/spec_ranges.py lists them)
MODELS = [Spec, Scenario, SimScenario, GoodputScenario]
RANGES = numeric_ranges(MODELS)
DOC = (ROOT / "docs" / "spec.md").read_text()


def test_the_walk_finds_the_fields_it_should():
    paths = {r.path for r in RANGES}
    for p in ("Hosts.scaleup_gbps", "Latency.cable_ns_per_m", "SwitchModel.buffer_mb",
              "CollectiveSpec.size_bytes", "PfcConfig.xoff_bytes", "GoodputSpec.horizon",
              "CheckpointLevel.gbytes_per_s", "Spec.seed", "Routing.seed"):
        assert p in paths, p
    assert len(RANGES) > 150


@pytest.mark.parametrize("r", [r for r in RANGES if r.path not in CHECKED_IN_CODE],
                         ids=lambda r: r.path)
def test_every_numeric_field_has_a_finite_lower_and_upper_bound(r):
    assert r.finite, f"{r.path}: {r.text()}"
    assert r.lower <= r.upper


def test_every_rate_in_gbps_is_at_least_1_gbps():
    """A rate of 1e-12 Gbit/s is a unit slip; it would give makespans of 1e16 ms."""
    for r in RANGES:
        if r.path.endswith("_gbps") or r.path.endswith("_gbps.*"):
            lowest = r.lower + (1 if r.lower_open and r.kind == "int" else 0)
            assert lowest >= 1 and not (r.lower_open and r.kind == "float" and lowest < 1), \
                (r.path, r.text())


def test_docs_list_every_range():
    """docs/spec.md's "Physical ranges" table is the one the models give (regenerate it
    with ``python scripts/spec_ranges.py``)."""
    assert "## Physical ranges" in DOC
    section = DOC.split("## Physical ranges", 1)[1]
    for line in markdown(MODELS).splitlines()[2:]:
        assert line in section, line


def _spec_doc():
    return yaml.safe_load((EXAMPLES / "hpn-pod.yaml").read_text())


@pytest.mark.parametrize("where,value", [
    (("hosts", "scaleup_gbps"), 1e-12),
    (("hosts", "pcie_gbps"), 0.5),
    (("hosts", "gpus_per_host"), 10**9),
    (("latency", "cable_ns_per_m"), 1.0),
    (("latency", "access_m"), 0.0),
    (("routing", "seed"), -1),
    (("routing", "qps_per_connection"), 10**6),
    (("seed",), 1 << 64),
])
def test_an_absurd_value_is_one_problem_naming_the_field_and_its_range(where, value):
    from aifabric.spec.load import spec_from_dict

    doc = copy.deepcopy(_spec_doc())
    at = doc
    for k in where[:-1]:
        at = at.setdefault(k, {})
    at[where[-1]] = value
    with pytest.raises(SpecError) as err:
        spec_from_dict(doc, "s.yaml")
    (problem,) = err.value.problems
    assert problem.path == ".".join(where), problem
    assert "allowed" in problem.message or "greater" in problem.message \
        or "less" in problem.message, problem


def test_the_reported_scaleup_slip_is_refused_in_one_line(cli, tmp_path):
    doc = _spec_doc()
    doc["hosts"]["scaleup_gbps"] = 1e-12
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(doc))
    sc = tmp_path / "c.yaml"
    sc.write_text(yaml.safe_dump({"name": "c", "spec": str(spec), "collectives": [
        {"op": "allreduce", "size_bytes": "1MiB", "gpus": 16}]}))
    r = cli("simulate", sc)
    assert r.code == 2, r.out
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "hosts.scaleup_gbps" in lines[0], r.err
    assert "Traceback" not in r.err


def test_fields_checked_in_code_refuse_out_of_range_values():
    """The fields :data:`CHECKED_IN_CODE` lists are bounded: a validator refuses a value
    out of the range it names."""
    from aifabric.sim.packet.config import NicConfig, PfcConfig
    from aifabric.sim.scenario import CollectiveSpec, JobSpec

    probes = {
        "CollectiveSpec.gpus": lambda: CollectiveSpec.model_validate(
            {"op": "allreduce", "size_bytes": 1024, "gpus": 10**8}),
        "JobSpec.gpus": lambda: JobSpec.model_validate({"gpus": 0, "parallel": {"dp": 1}}),
        "PfcConfig.priorities.*": lambda: PfcConfig.model_validate({"priorities": [8]}),
        "NicConfig.dscp_to_tc.*": lambda: NicConfig.model_validate({"dscp_to_tc": {26: 9}}),
        "NicConfig.window": lambda: NicConfig.model_validate({"window": 1 << 40}),
    }
    for path, probe in probes.items():
        with pytest.raises(ValueError):
            probe()
            pytest.fail(f"{path}: accepted")
    # explicit GPUs (JobSpec.gpus.*, CollectiveSpec.gpus.*) are checked against the
    # fabric's active GPUs when placed: tests/sim covers "GPU -1 does not exist"
    assert set(probes) | {"JobSpec.gpus.*", "CollectiveSpec.gpus.*"} == set(CHECKED_IN_CODE)


def _examples():
    specs = sorted(p for p in EXAMPLES.glob("*.yaml"))
    scenarios = sorted((EXAMPLES / "scenarios").glob("*.yaml"))
    return specs, scenarios


def test_every_example_still_loads():
    from aifabric import api
    from aifabric.spec import load_spec

    specs, scenarios = _examples()
    assert specs and scenarios
    for p in specs:
        load_spec(p)
    for p in scenarios:
        api.load_scenario(p)
