"""Every YAML and JSON input is bounded before it is validated (issue 31, item 3): an
alias bomb ("billion laughs"), a recursive alias, nesting past MAX_DEPTH and a file past
the size limit are refused in one line naming the file and the limit, exit 2, within a
second, on every entry point (spec, scenario, sweep file, goodput scenario, collected
facts, run record)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.spec.load import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    FastStrictLoader,
    StrictLoader,
    load_json,
    load_yaml,
    max_input_bytes,
)
from tests.conftest import EXAMPLES, one_line_exit_2

#: 9 ** 9 = 387,420,489 strings once expanded, in 11 lines
LOL = "\n".join(
    ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi",
                                                                   strict=True)]) + "\n"
SPEC = (EXAMPLES / "single-tor-dcn.yaml").read_text()


def _bomb_spec() -> str:
    return LOL + "name: bomb\nhosts: {count: 4, port_gbps: 400}\ntopology: {family: *i}\n"


def _files(tmp: Path) -> dict[str, Path]:
    """Each kind of input file, the bomb in it."""
    (tmp / "bomb-spec.yaml").write_text(_bomb_spec())
    (tmp / "spec.yaml").write_text(SPEC)
    (tmp / "scenario.yaml").write_text(
        LOL + "name: s\nspec: spec.yaml\ncollectives:\n"
        "  - {op: allreduce, size_bytes: 1MiB, gpus: 8, placement: *i}\n")
    (tmp / "scenario-bomb-spec.yaml").write_text(
        "name: s\nspec: bomb-spec.yaml\ncollectives:\n  - {op: allreduce, size_bytes: 1MiB, "
        "gpus: 8}\n")
    (tmp / "goodput.yaml").write_text(LOL + "name: g\nspec: spec.yaml\ngoodput: *i\n")
    (tmp / "sweep.yaml").write_text(LOL + "name: sw\nscenario: scenario-ok.yaml\n"
                                    "grid: {seed: *i}\n")
    (tmp / "sweep-bomb-scenario.yaml").write_text("name: sw\nscenario: scenario.yaml\n"
                                                  "grid: {seed: [1, 2]}\n")
    (tmp / "scenario-ok.yaml").write_text(
        "name: s\nspec: spec.yaml\ncollectives:\n  - {op: allreduce, size_bytes: 1MiB, "
        "gpus: 8}\n")
    (tmp / "inventory.yaml").write_text(LOL + "hosts: *i\nswitches: {}\n")
    return {p.stem: p for p in tmp.glob("*.yaml")}


def _commands(f: dict[str, Path], tmp: Path) -> list[tuple[str, ...]]:
    return [
        ("plan", f["bomb-spec"]),
        ("export", f["bomb-spec"], "--out", tmp / "out.json"),
        ("simulate", f["scenario"]),
        ("simulate", f["scenario-bomb-spec"]),
        ("route", f["scenario"]),
        ("compare", f["scenario"], f["scenario-ok"]),
        ("goodput", f["goodput"]),
        ("sweep", "run", f["sweep"], "--out", tmp / "store"),
        ("sweep", "run", f["sweep-bomb-scenario"], "--out", tmp / "store"),
        ("check", f["spec"], "--inventory", f["inventory"]),
    ]


def test_an_alias_bomb_is_refused_on_every_entry_point_within_a_second(cli, tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = _files(tmp_path)
    cli("plan", f["spec"])  # imports done: the timing below is the refusal's
    for cmd in _commands(f, tmp_path):
        t0 = time.perf_counter()
        r = cli(*cmd)
        took = time.perf_counter() - t0
        line = one_line_exit_2(r)
        assert f"aliases expand to more than {MAX_ALIAS_NODES:,} further nodes" in line, cmd
        assert ".yaml" in line, (cmd, line)  # names the file
        assert took < 1.0, (cmd, took)
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "store").exists()


def test_the_python_api_refuses_the_bomb_too(tmp_path):
    import aifabric as af

    f = _files(tmp_path)
    for call in (lambda: af.load_spec(f["bomb-spec"]),
                 lambda: af.load_scenario(f["scenario"]),
                 lambda: af.load_scenario(f["goodput"]),
                 lambda: af.load_scenario(f["scenario-bomb-spec"])):
        t0 = time.perf_counter()
        with pytest.raises(SpecError, match="an alias bomb"):
            call()
        assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_the_count_is_exact_at_the_limit(loader):
    """Aliases adding exactly MAX_ALIAS_NODES nodes load; one more node is refused."""
    per = 1000  # a list of 999 scalars: 1,000 nodes
    n = MAX_ALIAS_NODES // per
    base = "a: &a [" + ", ".join(["0"] * (per - 1)) + "]\n"
    ok = base + "b: [" + ", ".join(["*a"] * n) + "]\n"
    assert len(yaml.load(ok, Loader=loader)["b"]) == n
    bad = base + "b: [" + ", ".join(["*a"] * n) + ", *a]\n"
    with pytest.raises(yaml.YAMLError, match="alias bomb"):
        yaml.load(bad, Loader=loader)


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_merge_keys_and_shared_anchors_still_load(loader):
    doc = yaml.load("base: &b {x: 1, y: 2}\nm: {<<: *b, y: 3}\nl: [*b, *b]\n", Loader=loader)
    assert doc == {"base": {"x": 1, "y": 2}, "m": {"x": 1, "y": 3},
                   "l": [{"x": 1, "y": 2}, {"x": 1, "y": 2}]}


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_a_merge_key_bomb_is_refused(loader):
    lines = ["a0: &a0 {k0: 1}"] + [
        f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 9)}], k{i}: 1}}" for i in range(1, 10)]
    with pytest.raises(yaml.YAMLError, match="alias bomb"):
        yaml.load("\n".join(lines) + "\n", Loader=loader)


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_a_recursive_alias_is_refused(loader):
    with pytest.raises(yaml.YAMLError, match="inside what it names"):
        yaml.load("a: &a [1, *a]\n", Loader=loader)


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_nesting_is_bounded_without_overflowing_the_stack(loader):
    assert yaml.load("[" * MAX_DEPTH + "]" * MAX_DEPTH, Loader=loader) is not None
    for depth in (MAX_DEPTH + 1, 100_000):  # libyaml's own composer crashes at 100,000
        with pytest.raises(yaml.YAMLError, match=f"nested deeper than {MAX_DEPTH} levels"):
            yaml.load("[" * depth + "]" * depth, Loader=loader)
    # deep through aliases: each anchor one level deeper than the last
    chain = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n"
                                      for i in range(1, MAX_DEPTH + 1))
    with pytest.raises(yaml.YAMLError, match="nested deeper"):
        yaml.load(chain, Loader=loader)


def test_deep_nesting_in_a_spec_is_one_line_exit_2(cli, tmp_path):
    p = tmp_path / "deep.yaml"
    p.write_text("name: d\nhosts: {count: 4}\ntopology: {family: "
                 + "[" * 200 + "]" * 200 + "}\n")
    line = one_line_exit_2(cli("plan", p))
    assert str(p) in line and f"nested deeper than {MAX_DEPTH} levels" in line


def test_a_file_past_the_size_limit_is_refused_before_parsing(cli, tmp_path, monkeypatch):
    assert max_input_bytes() == 64 * 2**20
    p = tmp_path / "big.yaml"
    p.write_text(SPEC + "#" * 2_000_000 + "\n")
    assert cli("plan", p).code == 0  # under the default limit
    monkeypatch.setenv("AIFABRIC_MAX_INPUT_BYTES", "1M")
    line = one_line_exit_2(cli("plan", p))
    assert str(p) in line and "larger than the input limit of 1.0 MiB" in line
    assert "AIFABRIC_MAX_INPUT_BYTES" in line
    j = tmp_path / "inv.json"
    j.write_text(json.dumps({"hosts": {}, "switches": {}, "pad": "x" * 2_000_000}))
    line = one_line_exit_2(cli("check", EXAMPLES / "single-tor-dcn.yaml", "--inventory", j))
    assert str(j) in line and "larger than the input limit" in line
    monkeypatch.setenv("AIFABRIC_MAX_INPUT_BYTES", "0")  # no limit
    assert cli("plan", p).code == 0
    monkeypatch.setenv("AIFABRIC_MAX_INPUT_BYTES", "lots")
    assert "AIFABRIC_MAX_INPUT_BYTES" in one_line_exit_2(cli("plan", p))


def test_json_inputs_are_bounded(tmp_path, monkeypatch):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SpecError, match="nested deeper than Python's parser allows"):
        load_json(deep)
    dup = tmp_path / "dup.json"
    dup.write_text('{"a": 1, "a": 2}')
    with pytest.raises(SpecError, match="duplicate key 'a'"):
        load_json(dup)
    from aifabric.runinfo import read_record

    with pytest.raises(SpecError, match="nested deeper"):
        read_record(deep)
    monkeypatch.setenv("AIFABRIC_MAX_INPUT_BYTES", "10")
    with pytest.raises(SpecError, match="larger than the input limit of 10 bytes"):
        load_json(dup)
    with pytest.raises(SpecError, match="larger than the input limit"):
        load_yaml(deep)


def test_facts_files_past_the_limits_are_deviations_not_crashes(tmp_path):
    from aifabric.configs import BuildContext
    from aifabric.configs.check import read_facts_folder
    from aifabric.spec import load_spec
    from aifabric.topology import build_fabric

    ctx = BuildContext.of(build_fabric(load_spec(EXAMPLES / "single-tor-dcn.yaml")))
    (tmp_path / "sw1.json").write_text("[" * 100_000 + "]" * 100_000)
    t0 = time.perf_counter()
    _doc, bad = read_facts_folder(tmp_path, ctx, {})
    assert time.perf_counter() - t0 < 1.0
    assert [(d.device, d.field) for d in bad] == [("sw1", "file")]
    assert "nested deeper" in bad[0].found
