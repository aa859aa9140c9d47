"""``aifabric goodput``: outputs, determinism, bad input (one line, exit 2, nothing
written), and the dual-ToR vs single-ToR answer through the whole model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from aifabric.reliability.model import run_goodput
from aifabric.reliability.spec import GoodputScenario
from aifabric.routing.scenario import scenario_from_dict
from aifabric.topology import build_fabric

from .test_routing import HPN, SINGLE

JOB = {"name": "j", "gpus": 128, "parallel": {"dp": 16, "tp": 8},
       "model": {"params": 2e10, "layers": 4, "hidden": 1024, "seq_len": 1024},
       "compute": {"fwd_ms_per_layer": 0.1}}
#: two QPs per connection, one on each port of a dual-ToR NIC: losing a port halves it
ROUTING = {"qps_per_connection": 2, "nic_port_choice": "round_robin"}


def _goodput(**kw):
    g = {"horizon": "30d", "trials": 200, "seed": 3,
         "checkpoint": {"levels": [
             {"name": "memory", "store": "host_memory", "every": "10min"},
             {"name": "storage", "store": "storage", "every": "1h", "restore": "10min"}]},
         "slowdown": "none", "sweep": {"points": 5, "trials": 50}}
    g.update(kw)
    return g


def _write(tmp_path, name="s.yaml", spec=HPN, **kw):
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"name": "small", "spec": spec, "jobs": [JOB], "routing": ROUTING,
                                 "goodput": _goodput(**kw)}), encoding="utf-8")
    return p


def test_writes_tables_json_plots_deterministically(cli, tmp_path):
    sc = _write(tmp_path)
    r = cli("goodput", sc, "--out", tmp_path / "a")
    assert r.code == 0, r.err
    assert "effective training time ratio" in r.out
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["causes.csv", "classes.csv", "ettr_hist.png", "goodput.json",
                     "sweep.csv", "sweep.png", "time_lost.png", "trials.csv"]
    assert cli("goodput", sc, "--out", tmp_path / "b").code == 0
    for f in ("goodput.json", "classes.csv", "trials.csv", "sweep.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    s = json.loads((tmp_path / "a" / "goodput.json").read_text())
    assert 0 < s["ettr"]["p5"] <= s["ettr"]["mean"] <= s["ettr"]["p95"] <= 1
    assert set(s["time_lost_hours"]) == {"detect", "wait", "restart", "recompute",
                                         "stalls", "slowdown"}
    assert s["sweep"]["optimum_interval_s"] > 0
    # the same run again replaces the previous output
    assert cli("goodput", sc, "--out", tmp_path / "a").code == 0
    # --json prints the same summary; overrides apply
    r = cli("goodput", sc, "--json", "--trials", "20", "--horizon", "7d", "--seed", "1")
    j = json.loads(r.out)
    assert j["trials"] == 20 and j["horizon_days"] == 7 and j["seed"] == 1


BAD = [
    ({"failures": {"gpu": {"rate_per_month": -0.1}}}, "goodput.failures.gpu.rate_per_month"),
    ({"failures": {"tor": {"mtbf": "-3d"}}}, "goodput.failures.tor.mtbf"),
    ({"failures": {"disk": {"rate_per_month": 0.1}}}, "unknown failure class"),
    ({"horizon": 0}, "goodput.horizon"),
    ({"horizon": "0d"}, "goodput.horizon"),
    ({"checkpoint": {"levels": [{"name": "m", "store": "host_memory", "every": "10s",
                                 "save": "20s"}]}}, "slower than its interval"),
    ({"checkpoint": {"levels": [{"name": "s", "store": "storage", "every": "1min",
                                 "save": "1s", "upload": "2min"}]}},
     "slower than its interval"),
    ({"checkpoint": {"levels": [{"name": "m", "store": "host_memory", "every": "10min"},
                                {"name": "s", "store": "storage", "every": "25min"}]}},
     "whole multiple"),
    ({"trials": 0}, "goodput.trials"),
    ({"recovery": {"detect": "-1min"}}, "goodput.recovery.detect"),
    ({"job": "nope"}, "goodput.job"),
]


@pytest.mark.parametrize("change,expect", BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)])
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path, change, expect):
    sc = _write(tmp_path, **change)
    out = tmp_path / "out"
    r = cli("goodput", sc, "--out", out)
    assert r.code == 2, r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    assert expect in lines[0]
    assert "Traceback" not in r.err
    assert not out.exists()


@pytest.mark.parametrize("args", [("--horizon", "0"), ("--horizon", "-2d"),
                                  ("--horizon", "soon"), ("--trials", "0")])
def test_bad_options_are_one_line_and_exit_2(cli, tmp_path, args):
    r = cli("goodput", _write(tmp_path), *args)
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 1 and args[0] in r.err


def _tor_only(spec, slowdown="none"):
    rates = {c: {"rate_per_month": 0} for c in ("gpu", "host", "nic_port", "access_link",
                                                 "agg", "core", "fabric_link", "software")}
    rates["tor"] = {"rate_per_month": 2.0, "repair": "8h"}
    sc = scenario_from_dict({"name": "t", "spec": spec, "jobs": [JOB], "routing": ROUTING,
                             "goodput": _goodput(failures=rates, slowdown=slowdown,
                                                 sweep=None)}, model=GoodputScenario)
    return run_goodput(sc, build_fabric(sc.spec))


def test_tor_failures_slow_dual_tor_and_stop_single_tor():
    """The routing model's verdict carried through: the same ToR failure rate costs the
    dual-ToR job no interruption (only slowdown, from the flow model), and the single-ToR
    job one interruption per failure of a ToR under it."""
    dual = _tor_only(HPN, slowdown="flow").summary
    assert dual["interruptions"]["per_trial_mean"] == 0
    tor = next(c for c in dual["classes"] if c["class"] == "tor")
    assert tor["interrupting"] == 0 and tor["degrading"] > 0
    assert tor["slowdown"] > 1.0  # measured by the flow model with that ToR down
    assert dual["time_lost_hours"]["slowdown"] > 0
    single = _tor_only(SINGLE).summary
    tor = next(c for c in single["classes"] if c["class"] == "tor")
    assert tor["interrupting"] == 2  # 16 hosts of the job, 8 per ToR
    mu = 2.0 * 2 * 30 / 30  # rate 2/month x 2 ToRs x 30 days
    n = single["interruptions"]["per_trial_mean"]
    assert abs(n - mu) < 4 * np.sqrt(mu / single["trials"])
    # the dual-ToR job pays in slowdown instead: (1 - 1/s) of each 8 h repair
    dtor = next(c for c in dual["classes"] if c["class"] == "tor")
    expect = dtor["degradations_per_day"] * 30 * 8 * (1 - 1 / dtor["slowdown"])
    assert abs(dual["time_lost_hours"]["slowdown"] / expect - 1) < 0.05


def test_a_foreign_out_folder_is_refused_before_the_run(cli, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "mine.txt").write_text("keep\n")
    r = cli("goodput", _write(tmp_path), "--out", notes)
    assert r.code == 2 and r.err.startswith("error: --out: ") and "goodput.json" in r.err
    assert sorted(p.name for p in notes.iterdir()) == ["mine.txt"]
    f = tmp_path / "file"
    f.write_text("x")
    r = cli("goodput", _write(tmp_path), "--out", f)
    assert r.code == 2 and "is a file" in r.err
