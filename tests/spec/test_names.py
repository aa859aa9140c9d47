"""Names that reach generated files are validated by the schema: a conservative
charset and length, one error line naming the field and the allowed pattern."""

from __future__ import annotations

import re

import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.scenario import SimScenario
from aifabric.spec import spec_from_dict
from aifabric.spec.names import NAME_MAX, NAME_PATTERN, TEXT_MAX
from tests.conftest import EXAMPLES, ROOT

BASE = {"name": "ok", "hosts": {"count": 8, "nics_per_host": 2, "gpus_per_host": 2},
        "topology": {"family": "clos", "leaf": {"model": "tomahawk3"},
                     "spine": {"model": "tomahawk3"}}}
BAD_NAMES = ["x\ntouch /tmp/p", "a" * 5000, "a b", "fab [/old]", "$(id)", "-lead", "",
             "a;b", "a`b`", "a'b", 'a"b', "a<b", "a&b", "é", "a" * (NAME_MAX + 1)]
GOOD_NAMES = ["a", "golden-hpn", "tomahawk5-64x800g", "v1.2_x", "A" * NAME_MAX]


def _problems(doc: dict) -> list[str]:
    with pytest.raises(SpecError) as exc:
        spec_from_dict(doc, "s.yaml")
    return [str(p) for p in exc.value.problems]


def _one_line_naming(problems: list[str], field: str) -> None:
    assert len(problems) == 1, problems
    text = problems[0]
    assert "\n" not in text and "\r" not in text
    assert text.startswith(f"s.yaml: {field}: ")
    assert NAME_PATTERN in text
    assert len(text) < 400  # a 5,000-character name is not echoed whole


@pytest.mark.parametrize("bad", BAD_NAMES, ids=range(len(BAD_NAMES)))
def test_spec_name(bad: str) -> None:
    _one_line_naming(_problems({**BASE, "name": bad}), "name")


@pytest.mark.parametrize("bad", ["x\ntouch /tmp/p", "a" * 5000, "a b"],
                         ids=["newline", "long", "space"])
def test_switch_model_names(bad: str) -> None:
    model = {"ports": 32, "port_gbps": 400}
    _one_line_naming(_problems({**BASE, "switch_models": {bad: model}}),
                     "switch_models." + (repr(bad) if len(bad) < 40 else
                                         f"{bad[:40]!r}... (5,000 characters)"))
    topo = {**BASE["topology"], "leaf": {"model": bad}}
    _one_line_naming(_problems({**BASE, "topology": topo}), "topology.leaf.model")


@pytest.mark.parametrize("good", GOOD_NAMES)
def test_good_names_pass(good: str) -> None:
    model = {"ports": 32, "port_gbps": 400}
    spec = spec_from_dict({**BASE, "name": good, "switch_models": {good: model},
                           "topology": {"family": "clos", "leaf": {"model": good},
                                        "spine": {"model": good}}})
    assert spec.name == good and spec.topology.leaf.model == good


def test_description_is_one_line_of_text() -> None:
    assert spec_from_dict({**BASE, "description": "5,000 GPUs: [x] & <y> :x:"}).description
    for bad, what in (("a\nb", "line break"), ("a\x1bb", "control character"),
                      ("a" * (TEXT_MAX + 1), "characters long")):
        (p,) = _problems({**BASE, "description": bad})
        assert p.startswith("s.yaml: description: ") and what in p and "\n" not in p


def test_rdma_prefix_and_expected_versions() -> None:
    (p,) = _problems({**BASE, "deploy": {"nic": {"rdma_device_prefix": "m" * 25}}})
    assert p.startswith("s.yaml: deploy.nic.rdma_device_prefix: ")
    (p,) = _problems({**BASE, "deploy": {"expect": {"driver_version": "1\n2"}}})
    assert p.startswith("s.yaml: deploy.expect.driver_version: ")


def test_job_and_collective_names() -> None:
    doc = {"name": "free text: [x] :y: is fine", "spec": BASE,
           "jobs": [{"name": "a\nb", "gpus": 4}],
           "collectives": [{"name": "$(id)", "op": "allreduce", "size_bytes": 1024,
                            "gpus": 4}]}
    with pytest.raises(SpecError) as exc:
        scenario_from_dict(doc, model=SimScenario)
    paths = sorted(p.path for p in exc.value.problems)
    assert paths == ["collectives.0.name", "jobs.0.name"]
    assert all(NAME_PATTERN in p.message for p in exc.value.problems)
    ok = scenario_from_dict({**doc, "jobs": [{"name": "j0", "gpus": 4}],
                             "collectives": []}, model=SimScenario)
    assert ok.name == "free text: [x] :y: is fine"
    with pytest.raises(SpecError, match="line break"):
        scenario_from_dict({**doc, "name": "a\nb", "jobs": [], "collectives": []},
                           model=SimScenario)


def test_cli_one_line_exit_2(cli, tmp_path) -> None:
    """The issue's examples through the command line: exit 2, one line each."""
    for bad in ("x\ntouch /tmp/p", "a" * 5000):
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({**BASE, "name": bad}), encoding="utf-8")
        r = cli("build", path, "--out", tmp_path / "out")
        assert r.code == 2, r.err
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and "name:" in lines[0] and NAME_PATTERN in lines[0]
        assert not (tmp_path / "out").exists()


def test_every_example_name_is_valid() -> None:
    """The shipped examples keep loading (and so do the golden specs)."""
    names = re.compile(NAME_PATTERN)
    for path in [*EXAMPLES.glob("*.yaml"), *(ROOT / "tests/golden").glob("*/spec.yaml")]:
        assert names.fullmatch(yaml.safe_load(path.read_text())["name"]), path


def test_documented() -> None:
    doc = (ROOT / "docs/spec.md").read_text(encoding="utf-8")
    assert NAME_PATTERN in doc


def test_lab_copy_of_a_longest_name_is_still_valid() -> None:
    """``aifabric lab`` names its scaled copy ``<name>-lab``: still a valid name."""
    from aifabric.lab.scale import SCALES, scale_spec
    from aifabric.spec import load_spec

    spec = load_spec(EXAMPLES / "hpn-pod.yaml").model_copy(update={"name": "n" * NAME_MAX})
    copy = scale_spec(spec, SCALES["small"])
    assert copy.name == "n" * (NAME_MAX - 4) + "-lab"
    assert re.fullmatch(NAME_PATTERN, copy.name)
