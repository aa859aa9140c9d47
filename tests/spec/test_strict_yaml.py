"""Strict input: a key given twice in one mapping is an error with its line (specs,
scenarios, collected facts), and a YAML boolean is never a number (``count: true`` is
not 1 host) in any input model (issue 11, item 10)."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from aifabric.configs.check import Inventory
from aifabric.errors import SpecError
from aifabric.routing.scenario import Scenario
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.scenario import SimScenario
from aifabric.spec import load_yaml, spec_from_dict
from aifabric.spec.models import Spec
from aifabric.spec.problems import models_in
from tests.configs.conftest import SMALL

RAIL = "name: rail-mini\nhosts: {count: 5, port_gbps: 400}\ntopology: {family: rail}\n"


def _err_line(r) -> str:
    assert r.code == 2, (r.out, r.err)
    assert "Traceback" not in r.err
    (line,) = r.err.strip().splitlines()
    return line


# ------------------------------------------------------------------ duplicate keys
DUPLICATES = {
    "top level": ("name: a\nhosts: {count: 16}\nhosts: {count: 32}\ntopology: {family: "
                  "clos}\n", "line 3, column 1: duplicate key 'hosts' (first on line 2)"),
    "nested, flow style": ("name: a\nhosts: {count: 16, count: 32}\ntopology: {family: "
                           "clos}\n", "line 2, column 20: duplicate key 'count' (first on "
                           "line 2)"),
    "nested, block style": ("name: a\nhosts:\n  count: 16\n  gpus_per_host: 8\n  count: 8\n"
                            "topology: {family: clos}\n",
                            "line 5, column 3: duplicate key 'count' (first on line 3)"),
}


@pytest.mark.parametrize("case", sorted(DUPLICATES))
def test_duplicate_key_in_a_spec(cli, tmp_path, case):
    text, words = DUPLICATES[case]
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    line = _err_line(cli("plan", p))
    assert line == f"error: {p}: invalid YAML: {words}; allowed: each key once in a mapping"


def _scenario_error(cli, tmp_path, command, text):
    """Run ``command`` on a scenario ``text`` over the small rail spec; (path, error line)."""
    (tmp_path / "rail.yaml").write_text(RAIL)
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p, _err_line(cli(command, p))


@pytest.mark.parametrize("command", ["route", "simulate"])
def test_duplicate_key_in_a_scenario(cli, tmp_path, command):
    p, line = _scenario_error(cli, tmp_path, command,
                              "name: s\nspec: rail.yaml\nseed: 1\ntraffic: [{pattern: "
                              "permutation, gpus: '0:16', shift: 8}]\nseed: 2\n")
    assert line.startswith(f"error: {p}: invalid YAML: line 5, column 1: duplicate key "
                           "'seed' (first on line 3)"), line


def test_merge_keys_may_still_override(tmp_path):
    """``<<:`` merges are how YAML shares settings: a key after a merge is not a
    duplicate."""
    text = "a: &x {b: 1, c: 2}\nd:\n  <<: *x\n  b: 3\n"
    (tmp_path / "m.yaml").write_text(text)
    assert load_yaml(tmp_path / "m.yaml") == yaml.safe_load(text)
    assert load_yaml(tmp_path / "m.yaml")["d"] == {"b": 3, "c": 2}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    from aifabric.configs import write_build
    from aifabric.topology import build_fabric

    d = tmp_path_factory.mktemp("built") / "b"
    write_build(build_fabric(spec_from_dict(SMALL["hpn"])), d)
    return d


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_duplicate_key_in_collected_facts(cli, tmp_path, built, suffix):
    """check --inventory: a device given twice (its facts would silently be the last
    ones) is an error, in YAML (with its line) and in JSON."""
    inv = tmp_path / f"facts{suffix}"
    if suffix == ".yaml":
        inv.write_text("hosts:\n  h1: {driver: mlx5_core}\n  h1: {driver: other}\n")
        want = "invalid YAML/JSON: line 3, column 3: duplicate key 'h1' (first on line 2)"
    else:
        inv.write_text('{"hosts": {"h1": {"driver": "a"}, "h1": {"driver": "b"}}}')
        want = "invalid JSON: duplicate key 'h1'"
    line = _err_line(cli("check", built, "--inventory", inv))
    assert line.startswith(f"error: {inv}: {want}"), line


# ------------------------------------------------------------------ booleans as numbers
def test_count_true_is_not_one_host(cli, tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text("name: a\nhosts: {count: true}\ntopology: {family: clos}\n")
    line = _err_line(cli("plan", p))
    assert line.startswith(f"error: {p}: hosts.count: expected an integer, got a boolean"), line


BOOLS = {
    "spec float": ("topology: {family: clos, oversubscription: true}",
                   "topology.oversubscription: expected a number, got a boolean"),
    "deploy": ("deploy: {qos: {roce_dscp: false}}",
               "deploy.qos.roce_dscp: expected an integer, got a boolean"),
    "IP network": ("addressing: {nic_pool: true}",
                   "addressing.nic_pool: expected an IP network, got a boolean"),
    "list of integers": ("switch_models: {sw: {ports: 64, port_gbps: 400, "
                         "breakouts: [1, true]}}",
                         "switch_models.sw.breakouts.1: expected an integer, got a boolean"),
}


@pytest.mark.parametrize("case", sorted(BOOLS))
def test_booleans_are_not_numbers_in_a_spec(case):
    extra, want = BOOLS[case]
    data = yaml.safe_load("name: a\nhosts: {count: 16}\ntopology: {family: clos}\n")
    data.update(yaml.safe_load(extra))
    with pytest.raises(SpecError) as exc:
        spec_from_dict(data, "f.yaml")
    (problem,) = exc.value.problems
    assert str(problem).startswith(f"f.yaml: {want}"), str(problem)


@pytest.mark.parametrize("command", ["route", "simulate"])
def test_booleans_are_not_numbers_in_a_scenario(cli, tmp_path, command):
    p, line = _scenario_error(cli, tmp_path, command,
                              "name: s\nspec: rail.yaml\ntraffic: [{pattern: permutation, "
                              "gpus: '0:16', shift: 8, size_bytes: true}]\n")
    assert line.startswith(f"error: {p}: traffic.0.size_bytes: expected an integer, got a "
                           "boolean"), line


def test_integers_still_fill_floats_and_booleans_stay_booleans():
    s = spec_from_dict({"name": "a", "hosts": {"count": 16},
                        "topology": {"family": "clos", "oversubscription": 2,
                                     "rail_optimized": True}})
    assert s.topology.oversubscription == 2.0
    assert s.topology.rail_optimized is True


def _models(roots: list[type[BaseModel]]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []
    todo = list(roots)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.append(m)
        for f in m.model_fields.values():
            todo.extend(models_in(f.annotation))
    return seen


def _field_errors(model: type[BaseModel], name: str, value) -> list[dict]:
    try:
        model.model_validate({name: value})
    except ValidationError as err:
        return [e for e in err.errors() if e["loc"][:1] == (name,)]
    return []


def _takes_bool(annotation) -> bool:
    if annotation is bool:
        return True
    return any(_takes_bool(a) for a in typing.get_args(annotation))


MODELS = _models([Spec, SimScenario, Scenario, PacketConfig, Inventory])


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_no_numeric_field_of_any_input_model_takes_a_boolean(model):
    """Every field of every input model that takes a plain number (1, 2, 8, 64, 1000,
    0.5) refuses True and False, unless the field is declared to take a boolean."""
    for name, field in model.model_fields.items():
        if _takes_bool(field.annotation):
            continue
        if all(_field_errors(model, name, v) for v in (1, 2, 8, 64, 1000, 0.5)):
            continue  # not a number field
        for b in (True, False):
            errs = _field_errors(model, name, b)
            assert errs and errs[0]["type"] == "bool_not_number", (model.__name__, name, b,
                                                                   errs)
            assert errs[0]["msg"] in ("expected an integer, got a boolean",
                                      "expected a number, got a boolean",
                                      "expected an IP network, got a boolean")


def test_every_input_model_is_checked():
    """The walk above reaches the numeric fields of the input models (a floor, so that
    the property test cannot pass by checking nothing)."""
    numeric = 0
    for m in MODELS:
        for name, f in m.model_fields.items():
            if not _takes_bool(f.annotation) and not all(
                    _field_errors(m, name, v) for v in (1, 2, 8, 64, 1000, 0.5)):
                numeric += 1
    assert numeric >= 40, numeric
