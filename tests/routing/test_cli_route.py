"""``aifabric route``: the report, its JSON, the --out tables and histogram; bad input gives
exit code 2, one line per problem, and writes nothing."""

from __future__ import annotations

import csv
import json
import textwrap

import pytest

from tests._require import require_importorskip
from tests.conftest import EXAMPLES

SCEN = EXAMPLES / "scenarios"
FAT = str(SCEN / "fat-tree-polarization.yaml")


def test_route_prints_the_imbalance(cli):
    """The human report names the tiers, the idle uplinks and the busiest link."""
    r = cli("route", FAT)
    assert r.code == 0, r.err
    for text in ("spine_core up", "75.0%", "most flows on one link", "idle uplinks"):
        assert text in r.out


def test_route_json_counts_match_the_polarization(cli):
    """--json: the k=8 fat-tree with one seed uses 32 of 128 spine->core uplinks; flows =
    connections x QPs."""
    r = cli("route", FAT, "--json")
    assert r.code == 0, r.err
    rep = json.loads(r.out)
    s = rep["stats"]
    assert s["flows"] == 128 * 127 * 2 and s["connections"] == 128 * 127
    assert s["tiers"]["spine_core up"]["arcs"] == 128
    assert s["tiers"]["spine_core up"]["used"] == 32
    assert rep["policy"]["seed_mode"] == "same"


def test_route_json_reports_failures(cli):
    """A scenario with a failure reports its impact and what moved."""
    r = cli("route", str(SCEN / "single-tor-failure.yaml"), "--json")
    assert r.code == 0, r.err
    fail = json.loads(r.out)["failures"]
    assert fail["impact"]["hosts_unreachable"] == 16
    assert fail["flows"]["unreachable"] == fail["flows"]["newly_unreachable"] > 0


def test_out_writes_link_and_flow_tables_and_a_histogram(cli, tmp_path):
    """--out: one row per link direction, one per flow (with its path), a PNG, the JSON."""
    out = tmp_path / "res"
    r = cli("route", str(SCEN / "pinned-flows.yaml"), "--out", out)
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [
        "flows.csv", "link_load_hist.png", "links.csv", "report.json", "run.json"]
    flows = list(csv.DictReader((out / "flows.csv").read_text().splitlines()))
    assert len(flows) == 5
    assert flows[0]["path"].split(" > ")[3] == "spine-07"
    assert flows[0]["dport"] == "4791" and flows[0]["proto"] == "17"
    links = list(csv.DictReader((out / "links.csv").read_text().splitlines()))
    rep = json.loads((out / "report.json").read_text())
    assert len(links) % 2 == 0
    busiest = max(links, key=lambda row: int(row["flows"]))
    assert int(busiest["flows"]) == rep["stats"]["busiest_link"]["flows"] == 4
    assert (out / "link_load_hist.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_out_parquet(cli, tmp_path):
    """--format parquet writes the same tables as Parquet."""
    pq = require_importorskip("pyarrow.parquet", "pyarrow")
    out = tmp_path / "pq"
    r = cli("route", str(SCEN / "pinned-flows.yaml"), "--out", out, "--format", "parquet")
    assert r.code == 0, r.err
    assert pq.read_table(out / "flows.parquet").num_rows == 5


BAD = {
    "unknown policy": ("routing: {policy: teleport}", "routing.policy: Input should be"),
    "unknown hash": ("routing: {hash: sha256}", "routing.hash: Input should be"),
    "seed not an integer": ("routing: {seed: 1.5}", "routing.seed: Input should be a valid "
                            "integer"),
    "failure on a link that does not exist": (
        "failures: [{link: [leaf-s00-r0, spine-99]}]",
        "failures.0.link: no node called 'spine-99'"),
    "flow to a GPU that does not exist": (
        "traffic: [{pattern: incast, senders: '0:4', to: host-s99-h000-gpu0}]",
        "traffic.0.to: no GPU called 'host-s99-h000-gpu0'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exit_2_one_line_nothing_written(cli, tmp_path, case):
    """Each bad input: exit code 2, exactly one line naming file, field and what is
    allowed, no traceback, and the --out folder is not created."""
    extra, expect = BAD[case]
    spec = EXAMPLES / "roce-5000.yaml"
    text = f"spec: {spec}\n{extra}\n"
    if "traffic" not in extra:
        text += "traffic: [{pattern: permutation, gpus: '0:64', shift: 8}]\n"
    p = tmp_path / "bad.yaml"
    p.write_text(textwrap.dedent(text))
    out = tmp_path / "out"
    r = cli("route", p, "--out", out)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith(f"error: {p}: ") and expect in lines[0], lines[0]
    assert "Traceback" not in r.err
    assert not out.exists()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.yaml"]


def test_bad_format_and_missing_file(cli, tmp_path):
    """An unknown --format and a missing scenario file are one-line errors."""
    r = cli("route", FAT, "--format", "xlsx")
    assert r.code == 2 and "allowed: csv, parquet" in r.err
    r = cli("route", tmp_path / "none.yaml")
    assert r.code == 2 and "file not found" in r.err


def test_policy_override_on_the_command_line(cli):
    """--policy replaces the scenario's policy: on the rail permutation source_port puts
    at most one flow on any link, ecmp more; an unknown policy is a one-line error."""
    rail = str(SCEN / "rail-permutation.yaml")
    sp = json.loads(cli("route", rail, "--json").out)["stats"]
    ec = json.loads(cli("route", rail, "--json", "--policy", "ecmp").out)["stats"]
    assert sp["busiest_link"]["flows"] == 1 < ec["busiest_link"]["flows"]
    r = cli("route", rail, "--policy", "teleport")
    assert r.code == 2 and "--policy: unknown policy 'teleport'; allowed: ecmp" in r.err
