"""``aifabric export SPEC --format astra-sim|simai``: ASTRA-sim's network/system configs and
SimAI's topology file.

Neither format has a reader on PyPI, so the files are compared with golden files
(tests/golden/sims/<case>-<format>/; regenerate with ``AIFABRIC_REGEN_GOLDEN=1 python -m
pytest tests/cli/test_export_astra_simai.py`` after an intended change and review the
diff), and parsed back here the way the simulators read them: the YAML/JSON configs with
their keys and per-dimension lists, SimAI's header counts against its lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from aifabric import build_fabric
from aifabric.export_sim import astra_sim_files, simai_files
from aifabric.planning.summary import plan_fabric
from aifabric.spec.load import load_spec
from tests._require import require_importorskip, skip_allowed
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "sims"
CASES = ["hpn-mini", "dcn-mini", "rail-mini"]
#: scenarios: the astra-sim export with its workload (tests/cli/test_export_peers.py
#: parses every file back)
SCENARIOS = ["ring-single-switch", "job-single-switch"]
REGEN = os.environ.get("AIFABRIC_REGEN_GOLDEN") == "1"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aifabric", *args], capture_output=True,
                          text=True, timeout=300)


def _tree(folder):
    """Every file under ``folder`` (the workload/ subfolder too): relative path -> bytes."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _golden(tmp_path, source, gold, fmt):
    out = tmp_path / "out"
    r = _cli("export", str(source), "--format", fmt, "--out", str(out))
    assert r.returncode == 0, r.stderr
    if REGEN:
        import shutil

        shutil.rmtree(gold, ignore_errors=True)
        shutil.copytree(out, gold)
        skip_allowed("golden files regenerated")
    have, want = _tree(out), _tree(gold)
    assert sorted(have) == sorted(want)
    for rel in want:
        assert have[rel] == want[rel], rel


@pytest.mark.parametrize("fmt", ["astra-sim", "simai"])
@pytest.mark.parametrize("case", CASES)
def test_export_matches_golden(tmp_path, case, fmt):
    _golden(tmp_path, GOLDEN / f"{case}.yaml", GOLDEN / f"{case}-{fmt}", fmt)


@pytest.mark.parametrize("case", SCENARIOS)
def test_astra_sim_scenario_export_matches_golden(tmp_path, case):
    """A scenario's export: the configs plus its workload (Chakra ET files, byte for
    byte: the same inputs give the same bytes)."""
    require_importorskip("chakra.schema.protobuf.et_def_pb2", "mlc-chakra")
    _golden(tmp_path, GOLDEN / f"{case}.yaml", GOLDEN / f"{case}-astra-sim", "astra-sim")


def _fabric(case: str):
    return build_fabric(load_spec(GOLDEN / f"{case}.yaml"))


@pytest.mark.parametrize("case", CASES)
def test_astra_sim_configs_parse_and_describe_the_fabric(case):
    f = _fabric(case)
    ex = astra_sim_files(f)
    net = yaml.safe_load(ex.files["network.yml"])
    n = len(net["topology"])
    assert set(net["topology"]) <= {"Ring", "FullyConnected", "Switch"}
    assert len(net["npus_count"]) == len(net["bandwidth"]) == len(net["latency"]) == n
    plan = plan_fabric(f)
    # the dimensions multiply to the fabric's GPUs
    assert int(np.prod(net["npus_count"])) == plan["gpus"]
    # dimension 0 is the host; dimension 1 the hosts of a segment at the scale-out rate
    assert net["npus_count"][0] == f.spec.hosts.gpus_per_host
    # (ASTRA-sim's "GB/s" is 2^30 B/s; a Switch dimension's latency is per link, 2 links)
    assert net["bandwidth"][1] == pytest.approx(
        plan["scaleout_gbps_per_gpu"] * 1e9 / 8 / 2**30, abs=1e-3)
    # latencies grow outward, none beyond the farthest pair the plan measured
    assert net["latency"] == sorted(net["latency"])
    far = max(h["latency_ns"] for h in plan["hops"].values() if h)
    assert 2 * max(net["latency"]) <= far
    # bandwidth never grows outward (oversubscription only takes away)
    assert all(a >= b - 1e-9 for a, b in zip(net["bandwidth"][1:], net["bandwidth"][2:],
                                              strict=False))
    sysc = json.loads(ex.files["system.json"])
    for key in ("scheduling-policy", "endpoint-delay", "active-chunks-per-dimension",
                "preferred-dataset-splits", "all-reduce-implementation",
                "all-gather-implementation", "reduce-scatter-implementation",
                "all-to-all-implementation", "collective-optimization", "local-mem-bw",
                "boost-mode"):
        assert key in sysc
    for key in ("all-reduce-implementation", "all-to-all-implementation"):
        assert len(sysc[key]) == n
    assert json.loads(ex.files["memory.json"])["memory-type"] == "NO_MEMORY_EXPANSION"


@pytest.mark.parametrize("case", CASES)
def test_astra_sim_switch_dimension_times_a_message_as_aifabric_does(case):
    """ASTRA-sim's analytical Switch (astra-network-analytical, congestion_unaware
    BasicTopology/Switch): a message of S bytes between two NPUs of one dimension takes
    2 hops x latency + S / (bandwidth x 2^30 / 1e9) ns. For the scale-out dimension that
    must be aifabric's own base one-way latency plus S at the GPU's scale-out rate."""
    f = _fabric(case)
    net = yaml.safe_load(astra_sim_files(f).files["network.yml"])
    plan = plan_fabric(f)
    d = 1  # hosts of a segment: same rail, another host
    S = 64 * 2**20
    astra_ns = 2 * net["latency"][d] + S / (net["bandwidth"][d] * 2**30 / 1e9)
    ours_ns = (plan["hops"]["same_rail_segment"]["latency_ns"]
               + S * 8 / plan["scaleout_gbps_per_gpu"])
    assert astra_ns == pytest.approx(ours_ns, rel=1e-4)


def _read_simai(text: str) -> dict:
    """SimAI's reader: header, the switch ids, then ``link_num`` link lines."""
    lines = text.splitlines()
    head = lines[0].split()
    nodes, gph, nvs, sw, links = (int(x) for x in head[:5])
    ids = [int(x) for x in lines[1].split()]
    rows = [ln.split() for ln in lines[2:]]
    return {"nodes": nodes, "gph": gph, "nvs": nvs, "sw": sw, "links": links,
            "gpu_type": head[5], "ids": ids, "rows": rows}


@pytest.mark.parametrize("case", CASES)
def test_simai_topology_is_consistent_with_its_header_and_the_fabric(case):
    f = _fabric(case)
    ex = simai_files(f)
    t = _read_simai(ex.files[f"{case}.topo"])
    plan = plan_fabric(f, bisection=False)
    G = plan["gpus"]
    assert t["nodes"] == G + t["nvs"] + t["sw"]
    assert t["nvs"] == plan["hosts"] and t["gph"] == f.spec.hosts.gpus_per_host
    assert t["sw"] == plan["switches"]["total"]
    assert t["ids"] == list(range(G, t["nodes"]))
    assert len(t["rows"]) == t["links"]
    src = np.array([int(r[0]) for r in t["rows"]])
    dst = np.array([int(r[1]) for r in t["rows"]])
    bw = np.array([float(r[2].removesuffix("Gbps")) for r in t["rows"]])
    assert all(r[3].endswith("ms") and r[4] == "0" for r in t["rows"])
    assert ((src >= 0) & (src < t["nodes"]) & (dst >= 0) & (dst < t["nodes"])).all()
    # every GPU: one NVSwitch link and one link per NIC port, at the port speed
    gpu_links = src < G
    assert (np.bincount(src[gpu_links], minlength=G) == 1 + f.spec.hosts.ports_per_nic).all()
    to_switch = gpu_links & (dst >= G + t["nvs"])
    assert bw[to_switch].sum() == pytest.approx(plan["scaleout_gbps_per_gpu"] * G)
    # switch-to-switch links: exactly the fabric's uplinks
    n_up = sum(r["count"] for r in plan["links"] if r["tier"] in ("leaf_spine", "spine_core"))
    assert int((src >= G + t["nvs"]).sum()) == n_up


def test_bad_gpu_type_and_a_shared_nic_are_one_line_exit_2(tmp_path):
    r = _cli("export", str(GOLDEN / "rail-mini.yaml"), "--format", "simai", "--out",
             str(tmp_path / "x"), "--gpu-type", "H100; rm")
    assert r.returncode == 2 and not (tmp_path / "x").exists()
    assert len((r.stdout + r.stderr).strip().splitlines()) == 1
    spec = tmp_path / "shared.yaml"
    spec.write_text(yaml.safe_dump({"name": "shared", "hosts": {
        "count": 4, "gpus_per_host": 8, "nics_per_host": 4, "port_gbps": 400},
        "topology": {"family": "clos"}}))
    r = _cli("export", str(spec), "--format", "simai", "--out", str(tmp_path / "y"))
    assert r.returncode == 2 and not (tmp_path / "y").exists()
    msg = (r.stdout + r.stderr).strip().splitlines()
    assert len(msg) == 1 and "one GPU per NIC" in msg[0]


def test_export_of_a_scenario_uses_its_spec(tmp_path):
    scn = tmp_path / "s.yaml"
    scn.write_text(yaml.safe_dump({"name": "s", "spec": str(GOLDEN / "rail-mini.yaml"),
                                   "collectives": [{"op": "allreduce", "size_bytes": 1024,
                                                    "gpus": 8}]}))
    r = _cli("export", str(scn), "--format", "astra-sim", "--out", str(tmp_path / "a"))
    assert r.returncode == 0, r.stderr
    gold = GOLDEN / "rail-mini-astra-sim" / "network.yml"
    assert (tmp_path / "a" / "network.yml").read_text() == gold.read_text()


def test_simai_numbers_are_plain_decimals_as_its_generator_writes_them():
    """SimAI's gen_Topo_Template.py writes "0.000025ms" (NVLink) and "400Gbps"; %g wrote
    25 ns as "2.5e-05ms" and 1.6 Pb/s as "1.6e+06Gbps", which ns-3's DataRate parser
    does not take. The rail fabric with a 25 ns NVLink and its access links, exported."""
    from aifabric.export_sim import _fixed, _ms

    assert _ms(np.array([25.0, 500.0, 1000.0, 0.0])).tolist() == [
        "0.000025ms", "0.0005ms", "0.001ms", "0ms"]
    assert _fixed(np.array([400.0, 3600.0, 12.5, 1.6e6]), 6).tolist() == [
        "400", "3600", "12.5", "1600000"]
    f = _fabric("rail-mini")
    t = _read_simai(simai_files(f).files["rail-mini.topo"])
    assert not any("e" in r[2].removesuffix("Gbps") or "e" in r[3].removesuffix("ms")
                   for r in t["rows"])
