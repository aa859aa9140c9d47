"""Exit codes of every command: 0 finished, 1 finished but needs a look (a deadlock,
an alarm, a run that did not finish, deviations, invalid configs), 2 bad input.

Plus ``aifabric --version`` and ``aifabric lab down`` with no lab up (which only looks:
it needs neither root nor FRR to say so).
"""

from __future__ import annotations

import json
import shutil
from importlib.metadata import version

import pytest
import yaml

from tests.conftest import EXAMPLES

SCN = EXAMPLES / "scenarios"
DEADLOCK = SCN / "deadlock-bounce.yaml"
ALLREDUCE = SCN / "allreduce-hpn.yaml"


# ------------------------------------------------------------------ simulate / compare
def test_simulate_deadlock_exits_1_after_reporting(cli, tmp_path):
    out = tmp_path / "rep"
    r = cli("simulate", DEADLOCK, "--out", out)
    assert r.code == 1, r.err
    assert "PFC deadlock" in r.out and "unfinished" in r.out  # the report is still printed
    assert (out / "report.md").is_file()  # and written
    assert "exit 1: deadlock-bounce" in r.err and "alarm" in r.err


def test_simulate_deadlock_json_exits_1(cli):
    r = cli("simulate", DEADLOCK, "--json")
    assert r.code == 1
    s = json.loads(r.out)
    assert s["finished"] is False and s["packet"]["alarms"]


def test_same_scenario_without_pfc_deadlock_exits_0(cli):
    r = cli("simulate", DEADLOCK, "--sim", "flow")  # the flow model has no PFC
    assert r.code == 0, r.err
    assert "exit 1" not in r.err


def test_unfinished_run_without_alarm_exits_1(cli, tmp_path):
    """A run cut short (``packet.until_ms``) with no deadlock and no alarm: unfinished
    is enough for exit 1."""
    d = yaml.safe_load(DEADLOCK.read_text())
    d["packet"]["pfc"]["enabled"] = False
    d["packet"]["until_ms"] = 0.01
    shutil.copy(SCN / "deadlock-bounce.csv", tmp_path)
    p = tmp_path / "cut.yaml"
    p.write_text(yaml.safe_dump(d))
    r = cli("simulate", p, "--json")
    s = json.loads(r.out)
    assert s["finished"] is False
    assert r.code == 1
    assert "unfinished" in r.err


def test_simulate_clean_run_exits_0(cli):
    r = cli("simulate", ALLREDUCE)
    assert r.code == 0, r.err


@pytest.mark.parametrize("args", [
    ("simulate", "no-such-file.yaml"),
    ("simulate", str(ALLREDUCE), "--sim", "quantum"),
    ("compare", str(ALLREDUCE)),
    ("compare", str(ALLREDUCE), "no-such-file.yaml"),
    ("route", "no-such-file.yaml"),
    ("plan", "no-such-file.yaml"),
    ("build", "no-such-file.yaml", "--out", "x"),
    ("check", "no-such-folder"),
])
def test_bad_input_exits_2(cli, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(*args)
    assert r.code == 2, (r.code, r.out, r.err)
    assert r.err.startswith("error:") and "Traceback" not in r.err


def test_compare_with_a_deadlocked_scenario_exits_1(cli):
    r = cli("compare", ALLREDUCE, DEADLOCK)
    assert r.code == 1
    assert "side by side" in r.out  # the comparison is printed first
    assert "exit 1: deadlock-bounce" in r.err
    r = cli("compare", ALLREDUCE, DEADLOCK, "--sim", "flow")
    assert r.code == 0, r.err


# ------------------------------------------------------------------ route / plan / build / check
def test_route_plan_exit_0(cli):
    assert cli("route", SCN / "hpn-polarization.yaml").code == 0
    assert cli("plan", EXAMPLES / "single-tor-dcn.yaml").code == 0


def test_build_and_check_exit_codes(cli, tmp_path):
    out = tmp_path / "build"
    r = cli("build", EXAMPLES / "single-tor-dcn.yaml", "--out", out)
    assert r.code == 0, r.err
    facts = tmp_path / "facts.json"
    assert cli("check", out, "--template", facts).code == 0
    assert cli("check", out, "-i", facts).code == 0  # the plan matches itself
    inv = json.loads(facts.read_text())
    _break_one_value(inv)
    facts.write_text(json.dumps(inv))
    r = cli("check", out, "-i", facts)
    assert r.code == 1, r.out  # a deviation: finished, needs a look


def _break_one_value(obj) -> bool:
    """Change the first string value found under the first device (a deviation)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, str) and k not in ("name", "device", "hostname"):
                obj[k] = v + "-changed"
                return True
            if _break_one_value(v):
                return True
    elif isinstance(obj, list):
        return any(_break_one_value(v) for v in obj)
    return False


# ------------------------------------------------------------------ --version, lab down
def test_version(cli):
    r = cli("--version")
    assert r.code == 0
    assert r.out.strip() == f"aifabric {version('aifabric')}"


def test_lab_down_with_nothing_up_says_so_and_exits_0(cli, tmp_path):
    lab = tmp_path / "lab"  # a folder no lab ever used: nothing to take down
    r = cli("lab", "down", "--dir", lab)
    assert r.code == 0, r.err
    out = " ".join(r.out.split())  # the console wraps a long tmp path's line
    assert "no lab is up" in out and "nothing to take down" in out
    assert not lab.exists()  # it only looked
