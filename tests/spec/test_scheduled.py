"""The ``scheduled:`` section (a GSE/DSF scheduled fabric): its checks refuse a cell that
cannot hold its header, a speedup below 1, a reorder buffer smaller than one cell per
fabric uplink and a family without a separate edge, each as one line naming the field,
exit 2 and nothing written; ``plan`` shows the edge, the fabric elements, the cell
overhead and the usable bandwidth, which follow from the spec in closed form."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from aifabric import build_fabric
from aifabric.spec import load_spec
from aifabric.spec.scheduled import cell_efficiency, cells_per_packet
from aifabric.topology.scheduled import ROCE_FRAME_BYTES, edge_uplinks, scheduled_elements
from tests.conftest import EXAMPLES

K8 = EXAMPLES / "fat-tree-k8-scheduled.yaml"


def _spec(tmp_path, **scheduled):
    data = yaml.safe_load(K8.read_text())
    data["scheduled"] = {**data["scheduled"], **scheduled}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_the_example_builds_and_its_edge_is_the_leaves():
    f = build_fabric(load_spec(K8))
    edges, up, hp = edge_uplinks(f)
    assert len(edges) == 32 and (up == 4).all() and (hp == 4).all()
    assert f.is_switch[edges].all()


def test_cells_per_frame_and_efficiency_are_the_closed_form():
    # 4158-byte frame, 240 payload bytes per 256-byte cell: ceil(4158/240) = 18 cells
    assert cells_per_packet(4158, 256, 16) == 18
    assert cell_efficiency(4158, 256, 16) == pytest.approx(4158 / (18 * 256))
    assert cells_per_packet(1, 256, 16) == 1
    assert cells_per_packet(240, 256, 16) == 1 and cells_per_packet(241, 256, 16) == 2


def test_plan_shows_elements_overhead_and_usable_bandwidth(cli):
    r = cli("plan", K8, "--json", "--no-bisection")
    assert r.code == 0, r.err
    s = json.loads(r.out)["scheduled"]
    eff = ROCE_FRAME_BYTES / (math.ceil(ROCE_FRAME_BYTES / 240) * 256)
    assert s["edge_switches"] == 32 and s["fabric_switches"] == 48
    assert s["voqs_per_edge"] == 128  # one per destination port of the fabric
    assert s["cell_efficiency"] == pytest.approx(eff, abs=1e-6)
    assert s["cell_overhead_percent"] == pytest.approx(100 * (1 / eff - 1), abs=1e-3)
    # speedup 1.2 x 4 uplinks of 400G carry 4 x 400G of frames: the edge ports bind
    assert 1.2 * eff > 1 and s["usable_fraction"] == 1.0
    assert s["usable_gbps"] == pytest.approx(128 * 400)
    r = cli("plan", K8)
    assert "scheduled fabric" in r.out and "cell overhead" in r.out


def test_without_speedup_the_cell_overhead_takes_its_share(tmp_path):
    f = build_fabric(load_spec(_spec(tmp_path, speedup=1.0)))
    s = scheduled_elements(f)
    eff = cell_efficiency(ROCE_FRAME_BYTES, 256, 16)
    assert s["usable_fraction"] == pytest.approx(eff, abs=1e-6)
    assert s["usable_gbps"] == pytest.approx(128 * 400 * eff, rel=1e-6)


def test_a_spec_without_the_section_plans_as_before(cli):
    r = cli("plan", EXAMPLES / "single-tor-dcn.yaml", "--json", "--no-bisection")
    assert r.code == 0 and "scheduled" not in json.loads(r.out)


@pytest.mark.parametrize("change,field", [
    ({"cell_bytes": 64, "cell_header_bytes": 64}, "scheduled.cell_header_bytes"),
    ({"cell_bytes": 128, "cell_header_bytes": 200}, "scheduled.cell_header_bytes"),
    ({"speedup": 0.95}, "scheduled.speedup"),
    ({"reorder_buffer_bytes": 100}, "scheduled.reorder_buffer_bytes"),
    # 4 fabric uplinks per edge x 256-byte cells = 1,024 bytes at least (a built check)
    ({"reorder_buffer_bytes": 1000}, "scheduled.reorder_buffer_bytes"),
    ({"spray": "hash"}, "scheduled.spray"),
])
def test_bad_scheduled_settings_are_one_line_exit_2_nothing_written(cli, tmp_path, change,
                                                                     field):
    out = tmp_path / "out"
    r = cli("build", _spec(tmp_path, **change), "--out", out)
    assert r.code == 2, r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{field}:" in lines[0], r.err
    assert "Traceback" not in r.err
    assert not out.exists()


def test_reorder_buffer_of_one_cell_per_uplink_is_enough(tmp_path):
    f = build_fabric(load_spec(_spec(tmp_path, reorder_buffer_bytes=4 * 256)))
    assert scheduled_elements(f)["reorder_buffer_bytes"] == 1024


def test_a_family_without_a_separate_edge_is_refused(cli, tmp_path):
    p = tmp_path / "hpn.yaml"
    p.write_text("name: h\nhosts: {count: 16}\ntopology: {family: hpn, hosts_per_segment: 8}\n"
                 "scheduled: {}\n")
    out = tmp_path / "out"
    r = cli("build", p, "--out", out)
    assert r.code == 2
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "scheduled:" in lines[0] and "hpn" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("family", ["clos", "rail", "single_tor", "multiplane", "fat_tree"])
def test_two_and_three_tier_families_take_a_scheduled_fabric(tmp_path, family):
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\nhosts: {{count: 4}}\ntopology: {{family: {family}}}\n"
                 "scheduled: {}\n")
    s = scheduled_elements(build_fabric(load_spec(p)))
    assert s["edge_switches"] >= 1 and s["fabric_switches"] >= 1


def test_plan_compare_adds_the_scheduled_rows_only_when_a_spec_has_them(cli):
    plain = EXAMPLES / "scenarios" / "scheduled" / "fat-tree-k8.yaml"
    r = cli("plan", "--compare", K8, plain, "--no-bisection")
    assert r.code == 0 and "scheduled: cell overhead" in r.out and "10.82%" in r.out
    r = cli("plan", "--compare", plain, plain, "--no-bisection")
    assert r.code == 0 and "scheduled:" not in r.out
