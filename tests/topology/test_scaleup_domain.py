"""Scale-up domains in the spec: what ``plan`` counts, what is refused, and that a domain
of one 8-GPU host changes nothing of today's results."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.planning import plan_fabric
from aifabric.spec import spec_from_dict
from aifabric.topology import build_fabric
from tests.conftest import EXAMPLES

SCALEUP = EXAMPLES / "scaleup"

HGX16 = {"name": "hgx16",
         "hosts": {"count": 16, "gpus_per_host": 8, "nics_per_host": 8, "port_gbps": 400},
         "topology": {"family": "clos", "rail_optimized": True}}


def _spec(**domain):
    return spec_from_dict({**HGX16, "scaleup_domain": domain} if domain else HGX16)


@pytest.mark.parametrize("family", [
    {"family": "clos", "rail_optimized": True}, {"family": "rail"},
    {"family": "single_tor"}, {"family": "multiplane"}, {"family": "fat_tree", "k": 16},
    {"family": "hpn", "hosts_per_segment": 8,
     "tor": {"down_gbps": 200, "up_ports": 8, "up_gbps": 400},
     "agg": {"down_ports": 16}, "core": None}])
def test_every_family_takes_a_domain(family):
    d = {**HGX16, "topology": family, "scaleup_domain": {"gpus": 16, "switch": "nvswitch4"}}
    if family["family"] == "hpn":
        d["hosts"] = {**HGX16["hosts"], "ports_per_nic": 2, "port_gbps": 200}
    f = build_fabric(spec_from_dict(d))
    p = plan_fabric(f, bisection=False)
    u = p["scaleup"]
    assert u["domains"] * u["gpus_per_domain"] == p["gpus"]
    assert u["hosts_per_domain"] == 2 and u["switch_trays_per_domain"] > 0


def test_domain_of_one_host_builds_the_same_fabric():
    a, b = build_fabric(_spec()), build_fabric(_spec(gpus=8, switch="nvswitch3"))
    for col in ("a", "b", "kind", "capacity_gbps", "latency_ns", "a_port", "b_port"):
        assert np.array_equal(getattr(a.links, col), getattr(b.links, col)), col
    assert np.array_equal(a.nodes.name, b.nodes.name)
    pa, pb = plan_fabric(a), plan_fabric(b)
    assert "scaleup" not in pa  # a spec without a domain plans exactly as before
    pb.pop("scaleup")
    assert pa == pb


def test_simulate_output_is_byte_identical_with_a_domain_of_eight(cli, tmp_path):
    outs = []
    for name, spec in (("a", _spec()), ("b", None)):
        d = tmp_path / name
        d.mkdir()
        doc = dict(HGX16)
        if spec is None:
            doc["scaleup_domain"] = {"gpus": 8, "switch": "nvswitch3"}
        (d / "spec.yaml").write_text(yaml.safe_dump(doc))
        (d / "scn.yaml").write_text(yaml.safe_dump({
            "name": "two", "spec": "spec.yaml", "sim": "flow", "collectives": [
                {"name": "hier", "op": "allreduce", "algorithm": "hierarchical",
                 "size_bytes": "64MiB", "gpus": 64},
                {"name": "ring", "op": "allreduce", "algorithm": "ring",
                 "size_bytes": "64MiB", "gpus": 64, "channels": 8}]}))
        r = cli("simulate", d / "scn.yaml", "--json")
        assert r.code == 0, r.err
        outs.append(r.out)
    assert outs[0] == outs[1]


def test_plan_counts_an_nvl72_rack_row():
    f = build_fabric(spec_from_dict(yaml.safe_load((SCALEUP / "gb200-nvl72-x8.yaml")
                                                   .read_text())))
    u = plan_fabric(f, bisection=False)["scaleup"]
    # 576 GPUs in domains of 72 over 18 trays of 4; 18 links per GPU on 72-port chips
    assert u["domains"] == 576 // 72 and u["hosts_per_domain"] == 72 // 4
    assert u["switch_chips_per_domain"] == math.ceil(72 * 18 / 72) == 18
    assert u["switch_chips"] == 8 * 18 and u["switch_trays"] == 8 * 9
    assert u["nvlink_links"] == 576 * 18 == u["nvlink_cables"]
    assert u["cartridges"] == 8 * math.ceil(72 * 18 / 324) == 32
    assert u["scaleup_gbps_per_gpu"] == 18 * 400 and u["scaleout_gbps_per_gpu"] == 800
    assert u["scaleup_to_scaleout"] == 9.0


def test_hgx_domain_has_no_cables_and_pinned_chip_count():
    f = build_fabric(spec_from_dict(yaml.safe_load((SCALEUP / "hgx-h100-x2.yaml")
                                                   .read_text())))
    u = plan_fabric(f, bisection=False)["scaleup"]
    assert u["switch_chips"] == 2 * 4 and u["switch_trays"] == 0
    assert u["nvlink_cables"] == 0 and u["cartridges"] == 0
    assert u["scaleup_gbps_per_gpu"] == 3600


def test_plan_shows_both_dimensions(cli):
    r = cli("plan", SCALEUP / "gb200-nvl72-x8.yaml")
    assert r.code == 0, r.err
    assert "scale-up domains: 8 x 72 GPUs" in r.out
    assert "7.20 Tb/s (18 x 400G)" in r.out and "800 Gb/s" in r.out and "9:1" in r.out


@pytest.mark.parametrize("domain, field, words", [
    ({"gpus": 12}, "scaleup_domain.gpus", "multiple of hosts.gpus_per_host"),
    ({"gpus": 48}, "scaleup_domain.gpus", "do not divide"),
    ({"gpus": 8, "switch": "nvswitch2", "nvls": True}, "scaleup_domain.nvls",
     "cannot reduce"),
    ({"gpus": 8, "switch": "nvswitch9"}, "scaleup_domain.switch", "allowed: nvswitch2"),
    ({"gpus": 8, "switch_chips": 1}, "scaleup_domain.switch_chips", "at least 3"),
    ({"gpus": 8, "link_gbps": 400}, "scaleup_domain.link_gbps", "at most 200"),
])
def test_bad_domains_are_refused_naming_the_field(domain, field, words):
    with pytest.raises(SpecError) as e:
        build_fabric(_spec(**domain))
    assert len(e.value.problems) == 1
    p = e.value.problems[0]
    assert p.path == field and words in p.message


def test_a_mesh_host_cannot_join_a_multi_host_domain():
    d = {**HGX16, "hosts": {**HGX16["hosts"], "scaleup": "mesh"},
         "scaleup_domain": {"gpus": 16}}
    with pytest.raises(SpecError) as e:
        build_fabric(spec_from_dict(d))
    assert e.value.problems[0].path == "scaleup_domain.gpus"
    assert "mesh" in e.value.problems[0].message


def test_bad_domain_on_the_command_line_writes_nothing(cli, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({**HGX16, "scaleup_domain": {"gpus": 48}}))
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "scaleup_domain.gpus" in lines[0]
    assert not out.exists()
    r = cli("plan", spec, "--json")
    assert r.code == 2 and r.out == "" and "scaleup_domain.gpus" in r.err


def test_nvls_on_a_non_reducing_switch_is_one_line(cli, tmp_path):
    spec = tmp_path / "a100.yaml"
    spec.write_text(yaml.safe_dump({**HGX16, "scaleup_domain": {
        "gpus": 8, "switch": "nvswitch2", "nvls": True}}))
    r = cli("nccl", spec)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "scaleup_domain.nvls" in r.err and r.out == ""


def test_plan_json_of_a_domain_is_deterministic(cli):
    a = cli("plan", SCALEUP / "gb200-nvl72-x8.yaml", "--json").out
    b = cli("plan", SCALEUP / "gb200-nvl72-x8.yaml", "--json").out
    assert a == b and json.loads(a)["scaleup"]["nvls"] is True


def test_plan_compare_adds_domain_rows_only_with_a_domain(cli):
    r = cli("plan", SCALEUP / "hgx-b200-x72.yaml", SCALEUP / "gb200-nvl72-x8.yaml")
    assert r.code == 0, r.err
    assert "72 x 8 GPUs" in r.out and "8 x 72 GPUs" in r.out
    plain = cli("plan", EXAMPLES / "hpn-pod.yaml", EXAMPLES / "roce-5000.yaml")
    assert plain.code == 0 and "scale-up domains" not in plain.out
