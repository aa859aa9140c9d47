"""goodput's edges: an --out naming a file is refused (nothing replaced), a typo in
``sweep.level`` and a horizon shorter than one checkpoint interval are refused at load
(before the routing and flow models run), a horizon holding fewer than one expected
interruption gets a note, and simulate/route/export name ``aifabric goodput`` for a
goodput scenario."""

from __future__ import annotations

import time

import pytest

from .test_cli import _write


def _one_error(r, *needles):
    assert r.code == 2, r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    assert "Traceback" not in r.err
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("content", [b"", b"keep me\n"])
def test_out_naming_a_file_is_refused_and_the_file_kept(cli, tmp_path, content):
    f = tmp_path / "result"
    f.write_bytes(content)
    r = cli("goodput", _write(tmp_path), "--out", f)
    _one_error(r, "--out", "is a file")
    assert f.is_file() and f.read_bytes() == content


def test_a_sweep_level_typo_is_refused_before_any_model_runs(cli, tmp_path):
    sc = _write(tmp_path, sweep={"level": "memroy", "points": 5, "trials": 50})
    started = time.perf_counter()
    r = cli("goodput", sc, "--out", tmp_path / "out")
    took = time.perf_counter() - started
    _one_error(r, "sweep.level", "'memroy'", "allowed: memory, storage")
    assert not (tmp_path / "out").exists()
    assert took < 5, took  # the whole run takes longer: refused at load


@pytest.mark.parametrize("horizon", ["0.000001", "1s", "9min"])
def test_a_horizon_shorter_than_one_checkpoint_is_refused(cli, tmp_path, horizon):
    sc = _write(tmp_path)
    r = cli("goodput", sc, "--horizon", horizon, "--out", tmp_path / "out")
    _one_error(r, "--horizon", "shorter than one checkpoint interval (10min)",
               "at least 10min")
    assert not (tmp_path / "out").exists()
    r = cli("goodput", _write(tmp_path, name="h.yaml", horizon=horizon))
    _one_error(r, "goodput", "horizon", "shorter than one checkpoint interval")


def test_the_api_refuses_it_too(tmp_path):
    from aifabric import api
    from aifabric.errors import SpecError

    with pytest.raises(SpecError) as err:
        api.goodput(_write(tmp_path), horizon="5min")
    assert err.value.problems[0].path == "horizon"


def test_a_horizon_of_one_interval_runs_and_notes_it_holds_no_failure(cli, tmp_path):
    sc = _write(tmp_path, sweep=None)
    r = cli("goodput", sc, "--horizon", "10min", "--trials", "20", "--json")
    assert r.code == 0, r.err
    import json

    s = json.loads(r.out)
    (note,) = s["notes"]
    assert "expected interruptions per run (fewer than one)" in note
    r = cli("goodput", sc, "--horizon", "10min", "--trials", "20")
    assert "note: the horizon holds" in r.out
    long = json.loads(cli("goodput", sc, "--trials", "20", "--json").out)
    assert long["notes"] == []  # 30 days: several interruptions expected


@pytest.mark.parametrize("command", [("simulate",), ("route",),
                                     ("export", "--format", "htsim", "--out")])
def test_simulate_route_export_name_the_goodput_command(cli, tmp_path, command):
    sc = _write(tmp_path)
    args = [*command, tmp_path / "x"] if command[-1] == "--out" else list(command)
    r = cli(args[0], sc, *args[1:])
    _one_error(r, "goodput:", "aifabric goodput")
    assert not (tmp_path / "x").exists()
