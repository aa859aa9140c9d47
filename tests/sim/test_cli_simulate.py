"""``aifabric simulate`` / ``compare``: output, report files, and bad input (exit code 2,
one clear line per problem, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

RAIL = """name: rail-mini
hosts: {count: 5, port_gbps: 400}
topology: {family: rail}
"""


def _scenario(tmp_path: Path, body: str, name: str = "s") -> Path:
    (tmp_path / "rail.yaml").write_text(RAIL)
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"name: {name}\nspec: rail.yaml\n" + body)
    return p


GOOD = """routing: {policy: source_port}
collectives:
  - {name: ar, op: allreduce, size_bytes: 64MiB, gpus: 32, channels: 8}
  - {name: a2a, op: alltoall, size_bytes: 1MiB, gpus: [32, 33, 34, 35]}
"""


def test_simulate_prints_busbw_and_writes_a_report(cli, tmp_path):
    """simulate prints every collective's busbw; --out writes tables, plots and report.md."""
    s = _scenario(tmp_path, GOOD)
    out = tmp_path / "rep"
    r = cli("simulate", s, "--out", out)
    assert r.code == 0, r.err
    assert "busbw" in r.out and "ar" in r.out and "a2a" in r.out
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "collectives.csv", "jobs.csv", "transfers.csv", "links.csv",
            "timeline.csv", "link_util_cdf.png", "collective_timeline.png"} <= names
    md = (out / "report.md").read_text()
    assert "busbw" in md and "link_util_cdf.png" in md
    rows = (out / "transfers.csv").read_text().splitlines()
    assert len(rows) == 1 + 32 * 8 + 4 * 3  # header + ring edges + All-to-All pairs


def test_simulate_json_and_analytic_override(cli, tmp_path):
    """--json prints the summary; --sim analytic runs the alpha-beta model instead."""
    s = _scenario(tmp_path, GOOD)
    flow = json.loads(cli("simulate", s, "--json").out)
    ana = json.loads(cli("simulate", s, "--json", "--sim", "analytic").out)
    assert flow["sim"] == "flow" and ana["sim"] == "analytic"
    assert flow["collectives"][0]["time_ns"] == pytest.approx(
        ana["collectives"][0]["time_ns"], rel=0.01)


def test_compare_puts_scenarios_side_by_side(cli, tmp_path):
    """compare shows both scenarios and the relative difference."""
    a = _scenario(tmp_path, GOOD, "a")
    b = _scenario(tmp_path, GOOD.replace("64MiB", "128MiB"), "b")
    r = cli("compare", a, b)
    assert r.code == 0, r.err
    assert "difference" in r.out and "ar: time" in r.out and "%" in r.out


BAD = [
    ("collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: 4096}\n",
     "collectives[0].gpus", "larger than the fabric"),
    ("jobs:\n  - {gpus: 32, parallel: {dp: 2, tp: 8, pp: 4}}\n",
     "jobs[0].parallel", "does not match"),
    ("collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: [0, 1, 999]}\n",
     "collectives[0].gpus", "does not exist"),
    ("collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: [host-s00-h000-gpu0, nope]}\n",
     "collectives[0].gpus", "do not exist"),
    ("collectives:\n  - {op: allreduce, size_bytes: 0, gpus: 8}\n",
     "collectives.0.size_bytes", "greater than 0"),
    ("collectives:\n  - {op: allreduce, size_bytes: -5MiB, gpus: 8}\n",
     "collectives.0.size_bytes", "greater than 0"),
    ("collectives:\n  - {op: allreduce, algorithm: halving_doubling, size_bytes: 1MiB, "
     "gpus: 6}\n", "collectives[0].algorithm", "power-of-two"),
    ("collectives:\n  - {op: allreduce, algorithm: magic, size_bytes: 1MiB, gpus: 6}\n",
     "collectives.0", "allowed: ring, tree"),
]


@pytest.mark.parametrize(("body", "where", "what"), BAD)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(cli, tmp_path, body, where, what):
    """A job larger than the fabric, degrees that do not multiply to the GPU count, GPUs
    that do not exist, a size of 0 or negative, an impossible algorithm: exit 2, one
    line naming the file and the field, no traceback, no output folder."""
    s = _scenario(tmp_path, body)
    out = tmp_path / "rep"
    r = cli("simulate", s, "--out", out)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert str(s) in lines[0] and where in lines[0] and what in lines[0]
    assert "Traceback" not in r.err
    assert not out.exists()


def test_every_problem_is_reported_at_once(cli, tmp_path):
    """Two bad entries: two lines."""
    s = _scenario(tmp_path, "jobs:\n  - {gpus: 32, parallel: {dp: 3}}\n"
                  "collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: [9999]}\n")
    r = cli("simulate", s)
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 2


def test_example_scenarios_load(cli):
    """The shipped simulation scenarios are valid (their workload compiles)."""
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.run import compile_workload
    from aifabric.sim.scenario import SimScenario
    from tests.conftest import example

    for name, fab in (("allreduce-hpn", "hpn-pod"), ("gpt-hpn", "hpn-pod"),
                      ("hpn-4jobs-dual-plane", "hpn-pod"),
                      ("hpn-4jobs-single-plane", "hpn-single-plane")):
        scn = load_scenario(EXAMPLES / "scenarios" / f"{name}.yaml", SimScenario)
        assert compile_workload(scn, example(fab)).dag.n_transfers > 0
