"""Bad usage of the command line (a bad choice or number, a missing option or argument, an
extra argument, an unknown option or command) is one line like every other bad input:
``error: OPTION: ...`` naming what is allowed, exit 2, no usage box, nothing written.
Also: the old spellings of the results store still work, ``--listen`` takes port 0 in
``serve`` and ``monitor lab`` alike, and a spec error never shows pydantic's internal
names."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES

SCN = EXAMPLES / "scenarios"
ALLREDUCE = str(SCN / "allreduce-hpn.yaml")
SWEEP = str(EXAMPLES / "sweeps" / "hpn-planes.yaml")


def _one_line(r) -> str:
    assert r.code == 2, (r.code, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    for noise in ("Usage:", "╭", "Try '", "Traceback"):
        assert noise not in r.err, r.err
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize(("args", "needles"), [
    (["results", "query", "--limit", "-1", "SELECT 1"], ["--limit", "at least 0"]),
    (["results", "query", "--format", "xml", "SELECT 1"],
     ["--format", "'xml'", "table, csv, json"]),
    (["results", "query", "--limit", "many", "SELECT 1"], ["--limit", "an integer"]),
    (["metrics", str(SCN)], ["--out", "missing", "--out FILE"]),
    (["export", str(EXAMPLES / "hpn-pod.yaml"), "--format", "bogus"],
     ["--format", "'bogus'", "ns3-rdma, htsim, astra-sim, simai"]),
    (["simulate", ALLREDUCE, "--sim", "quantum"], ["--sim", "flow, analytic, packet"]),
    (["simulate", ALLREDUCE, "--format", "xlsx"], ["--format", "csv, parquet"]),
    (["route", ALLREDUCE, "--policy", "random"], ["--policy", "ecmp", "source_port"]),
    (["simulate"], ["SCENARIO", "missing", "aifabric simulate [OPTIONS] SCENARIO"]),
    (["simulate", ALLREDUCE, "extra.yaml"], ["extra.yaml", "unexpected"]),
    (["simulate", ALLREDUCE, "--bogus"], ["--bogus", "no such option"]),
    (["simulate", ALLREDUCE, "--out"], ["--out", "needs a value", "--out DIR"]),
    (["frobnicate"], ["no such command 'frobnicate'", "plan", "serve"]),
    (["lab", "frobnicate"], ["no such command", "allowed: up, ", "status", "down"]),
    (["plan", "--gpus", "0"], ["--gpus", "at least 1"]),
    (["sweep", "run", SWEEP, "--engine", "slurm", "--dry-run"], ["--engine", "local, ray"]),
    (["monitor", "lab", "--probes", "ten"], ["--probes", "an integer"]),
])
def test_bad_usage_is_one_line_exit_2(cli, tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    line = _one_line(cli(*args))
    for needle in needles:
        assert needle in line, (needle, line)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_sweep_run_still_takes_out_and_o(cli, tmp_path):
    """``sweep run --out DIR`` / ``-o DIR`` (the old spelling of ``--store``) still work;
    both spellings at once is one line."""
    for opt in ("--store", "--out", "-o"):
        r = cli("sweep", "run", SWEEP, opt, tmp_path / "s", "--dry-run")
        assert r.code == 0, (opt, r.err)
        assert "points" in r.out
    line = _one_line(cli("sweep", "run", SWEEP, "--store", tmp_path / "a", "--out",
                         tmp_path / "b", "--dry-run"))
    assert "--store" in line and "one of them" in line


def test_sweep_report_takes_the_store_as_option_or_old_positional(cli, tmp_path):
    missing = tmp_path / "nowhere"
    a = _one_line(cli("sweep", "report", "--store", missing))
    b = _one_line(cli("sweep", "report", missing))
    assert a == b and "--store" in a and str(missing) in a


def test_port_0_means_any_free_port_for_serve_and_monitor():
    from aifabric.telemetry.exporter import parse_listen

    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:65535") == ("::1", 65535)


@pytest.mark.parametrize("args", [
    ["serve", str(EXAMPLES / "hpn-pod.yaml"), "--listen", "127.0.0.1:70000"],
    ["monitor", "lab", "--listen", "127.0.0.1:70000"],
])
def test_a_bad_port_names_the_same_range_everywhere(cli, args):
    line = _one_line(cli(*args))
    assert "--listen" in line and "0-65535" in line and "0: any free port" in line


def test_a_union_field_is_one_problem_without_internal_names(cli, tmp_path):
    """``backup_hosts: -3`` (``fabric`` or a count): one line saying both, none of
    pydantic's member labels (``literal['fabric']``, ``constrained-int``)."""
    text = (SCN / "goodput-hpn.yaml").read_text()
    assert "backup_hosts: fabric}" in text
    p = tmp_path / "g.yaml"
    p.write_text(text.replace("backup_hosts: fabric}", "backup_hosts: -3}").replace(
        "spec: ../", f"spec: {EXAMPLES}/"))
    line = _one_line(cli("goodput", p))
    assert "goodput.recovery.backup_hosts:" in line
    assert "'fabric'" in line and "at least 0" in line and "(got -3)" in line
    for internal in ("literal[", "constrained-", "int]"):
        assert internal not in line, line


def test_repeated_stages_blame_the_workload_not_start_times(cli, tmp_path):
    """A Chakra scenario's ring AllReduce repeats its steps: htsim (and ns-3) cannot
    express that; the refusal names the workload and the format, whatever
    ``--start-times`` says."""
    for fmt in ("htsim", "ns3-rdma"):
        line = _one_line(cli("export", SCN / "chakra-gpt-pp2-dp8.yaml", "--format", fmt,
                             "--out", tmp_path / fmt))
        assert ": workload: --format " + fmt in line and "repeated stages" in line, line
        assert not (tmp_path / fmt).exists()
