"""The command line: exit codes, JSON, comparison, proposals, exports; bad input gives
exit code 2, one line per problem, no traceback and nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import networkx as nx
import pytest

from tests.conftest import EXAMPLES, example

HPN = str(EXAMPLES / "hpn-pod.yaml")


def test_plan_json_has_the_issue_numbers(cli):
    r = cli("plan", HPN, "--json")
    assert r.code == 0, r.err
    p = json.loads(r.out)
    assert (p["gpus"], p["hosts"], p["backup_hosts"], p["segments"]) == (15360, 1920, 120, 15)
    assert (p["switches"]["tor"], p["switches"]["agg"]) == (240, 120)
    assert p["oversubscription"] == {"tor": 1.0667, "agg": 15.0}
    assert p["bisection_gbps"] > 0


def test_plan_human_output(cli):
    r = cli("plan", HPN)
    assert r.code == 0
    for text in ("15,360", "1.0667:1", "15:1", "bisection", "cross segment"):
        assert text in r.out


def test_compare_side_by_side(cli):
    r = cli("plan", "--compare", HPN, str(EXAMPLES / "hpn-single-plane.yaml"))
    assert r.code == 0
    assert "hpn-pod" in r.out and "hpn-single-plane" in r.out
    r = cli("plan", "--compare", "--json", HPN, str(EXAMPLES / "roce-5000.yaml"))
    names = [p["name"] for p in json.loads(r.out)]
    assert names == ["hpn-pod", "roce-5000"]


def test_propose_writes_a_spec_that_plans(cli, tmp_path):
    out = tmp_path / "spec.yaml"
    r = cli("plan", "--gpus", "5000", "--nic-gbps", "400", "--switch-ports", "128",
            "--switch-gbps", "400", "--write", out)
    assert r.code == 0, r.err
    assert "chosen" in r.out
    r2 = cli("plan", out, "--json")
    assert r2.code == 0
    assert json.loads(r2.out)["gpus"] >= 5000


def test_output_is_deterministic(cli):
    assert cli("plan", HPN, "--json").out == cli("plan", HPN, "--json").out


@pytest.mark.parametrize("fmt", ["json", "graphml", "dot"])
def test_export_formats(cli, tmp_path, fmt):
    spec = str(EXAMPLES / "single-tor-dcn.yaml")
    out = tmp_path / f"f.{fmt}"
    r = cli("export", spec, "--format", fmt, "--out", out)
    assert r.code == 0, r.err
    f = example("single-tor-dcn")
    text = out.read_text()
    if fmt == "json":
        g = nx.node_link_graph(json.loads(text), edges="links")
    elif fmt == "graphml":
        g = nx.read_graphml(out, force_multigraph=True)
    else:
        g = None
        assert text.count(" -- ") == f.n_links
        if shutil.which("gc"):
            # the real Graphviz parser reads it back (gc counts nodes and edges)
            r = subprocess.run(["gc", "-n", "-e", str(out)], capture_output=True, text=True,
                               check=True, timeout=120)
            nodes, edges = map(int, r.stdout.split()[:2])
            assert (nodes, edges) == (f.n_nodes, f.n_links)
    if g is not None:
        assert g.number_of_nodes() == f.n_nodes
        assert g.number_of_edges() == f.n_links
        node = g.nodes["tor-s03"]
        assert node["kind"] == "tor"
        kinds = {d["kind"] for _, _, d in g.edges(data=True)}
        assert kinds == {"scaleup", "pcie", "access", "leaf_spine", "spine_core"}
        caps = [float(d["capacity_up_gbps"]) for _, _, d in g.edges(data=True)
                if d["kind"] == "access"]
        assert set(caps) == {200.0}
    assert cli("export", spec, "--format", fmt, "--out", out).code == 0
    assert out.read_text() == text  # deterministic, byte for byte


BAD = {
    "unknown_family": ("hosts: {count: 10}\ntopology: {family: torus}\n", ["topology.family"]),
    "ports": ("hosts: {count: 5000, ports_per_nic: 2, port_gbps: 200, backup_per_segment: 8}\n"
              "topology: {family: hpn, tor: {up_ports: 70}}\n", ["topology.tor"]),
    "too_many_hosts": ("hosts: {count: 100000}\ntopology: {family: clos}\n", ["hosts.count"]),
    "breakout": ("hosts: {count: 10, port_gbps: 300}\ntopology: {family: clos}\n",
                 ["topology.leaf.down_gbps"]),
    "negative": ("hosts: {count: -3, port_gbps: 0}\ntopology: {family: clos}\n",
                 ["hosts.count", "hosts.port_gbps"]),
    "invalid_yaml": ("hosts: {count: 10\ntopology: [\n", [""]),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("command", ["plan", "export"])
def test_bad_input_exits_2_names_the_field_writes_nothing(cli, tmp_path, case, command):
    text, paths = BAD[case]
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    out = tmp_path / "out"
    args = ["export", spec, "--out", out] if command == "export" else ["plan", spec]
    r = cli(*args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == len(paths)
    for line, path in zip(lines, paths, strict=True):
        assert line.startswith(f"error: {spec}: {path}")
    assert "Traceback" not in r.err + r.out
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_missing_file_and_no_arguments(cli, tmp_path):
    r = cli("plan", tmp_path / "nope.yaml")
    assert r.code == 2 and r.err.strip() == f"error: {tmp_path / 'nope.yaml'}: file not found"
    r = cli("plan")
    assert r.code == 2 and "--gpus" in r.err


def test_several_bad_files_reported_together(cli, tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("topology: {family: nope}\n")
    b.write_text("hosts: {count: 0}\ntopology: {family: clos}\n")
    r = cli("plan", "--compare", a, b)
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 2


def test_bad_options_exit_2(cli):
    assert cli("plan", "--gpus", "0").code == 2
    assert cli("export", HPN, "--format", "xml").code == 2


def test_write_into_missing_folder_is_an_error(cli, tmp_path):
    r = cli("plan", "--gpus", "512", "--write", tmp_path / "no" / "spec.yaml")
    assert r.code == 2 and "does not exist" in r.err


def test_console_script_runs():
    """The installed entry point, as a user runs it (python -m for the same code)."""
    r = subprocess.run([sys.executable, "-m", "aifabric", "plan", HPN, "--json",
                        "--no-bisection"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpus"] == 15360
