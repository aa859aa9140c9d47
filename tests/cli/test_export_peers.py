"""The exports as the peers read them: every file of the htsim and ASTRA-sim exports
parsed back and checked for the values it must carry.

* htsim (csg-htsim ``htsim_roce``): ``-mtu`` is htsim's payload and it adds a 64-byte
  header (RocePacket::ACKSIZE); it sends only full packets; ``-q`` and
  ``-pfc_thresholds`` are counts of ``-mtu`` bytes (main_roce.cpp: ``memFromPkt``,
  ``data_packet_size() * high_pfc``). So each flow's packets x (``-mtu`` + 64) must be
  the packet simulator's frames, and the byte limits the scenario's.
* ASTRA-sim: ``<prefix>.<rank>.et`` per rank (Workload::Workload), decoded here with
  aifabric's own wire decoder and Chakra's protobuf classes; the system config's splits;
  and the export read back by ``aifabric simulate`` gives the scenario's own time.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests._require import require_importorskip
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
CROSS = sorted(p.parent for p in (GOLDEN / "crosscheck").glob("*/scenario.yaml"))
RING = GOLDEN / "sims" / "ring-single-switch.yaml"
JOB = GOLDEN / "sims" / "job-single-switch.yaml"


def _load(path: Path):
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.scenario import SimScenario
    from aifabric.topology import build_fabric

    scn = load_scenario(path, SimScenario)
    return scn, build_fabric(scn.spec)


def _htsim_cmd(folder: Path) -> dict[str, list[str]]:
    """command.txt as main_roce.cpp parses it: flag -> its arguments."""
    toks = folder.joinpath("command.txt").read_text().split()
    assert toks[0] == "htsim_roce"
    out: dict[str, list[str]] = {}
    i = 1
    while i < len(toks):
        assert toks[i].startswith("-"), toks[i]
        n = 2 if toks[i] == "-pfc_thresholds" else 1
        out[toks[i]] = toks[i + 1:i + 1 + n]
        i += 1 + n
    return out


def _htsim_cm(folder: Path) -> list[tuple[int, int, int, int, int]]:
    """connections.cm as ConnectionMatrix::load reads it: (src, dst, id, start, size)."""
    lines = folder.joinpath("connections.cm").read_text().splitlines()
    assert lines[0].startswith("Nodes ") and lines[1].startswith("Connections ")
    rows = []
    for ln in lines[2:]:
        t = ln.split()
        s, d = map(int, t[0].split("->"))
        assert (t[1], t[3], t[5]) == ("id", "start", "size")
        rows.append((s, d, int(t[2]), int(t[4]), int(t[6])))
    assert len(rows) == int(lines[1].split()[1])
    return rows


@pytest.mark.parametrize("case", CROSS, ids=lambda p: p.name)
def test_htsim_sends_the_packet_simulators_frames_and_byte_limits(cli, tmp_path, case):
    from aifabric.crosscheck import scenario_flows
    from aifabric.sim.packet.config import effective_packet_config

    out = tmp_path / "h"
    assert cli("export", case / "scenario.yaml", "--format", "htsim", "--out", out).code == 0
    scn, f = _load(case / "scenario.yaml")
    cfg = effective_packet_config(scn.packet, scn.spec.deploy, file=scn.file)
    nic = cfg.nic
    cmd = _htsim_cmd(out)
    mtu = int(cmd["-mtu"][0])
    frame = nic.mtu_payload_bytes + nic.header_bytes + nic.wire_overhead_bytes
    assert mtu + 64 == frame  # htsim's packet = -mtu + its 64-byte header
    flows = scenario_flows(scn, f)
    rows = _htsim_cm(out)
    assert len(rows) == len(flows.size_bytes)
    sizes = np.array([r[4] for r in rows])
    # htsim sends ceil(size / -mtu) full packets: the packet simulator's frame count
    n_htsim = -(-sizes // mtu)
    n_aif = -(-flows.size_bytes // nic.mtu_payload_bytes)
    assert (sizes % mtu == 0).all() and (n_htsim == n_aif).all()
    wire_htsim = n_htsim * (mtu + 64)
    wire_aif = flows.size_bytes + n_aif * (nic.header_bytes + nic.wire_overhead_bytes)
    # the same bytes but for the last frame, which htsim sends full
    short = n_aif * nic.mtu_payload_bytes - flows.size_bytes
    assert (wire_htsim - wire_aif == short).all() and (short < nic.mtu_payload_bytes).all()
    # -q: packets of -mtu bytes, at most alpha/(1+alpha) x buffer
    q = int(cmd["-q"][0])
    limit = cfg.buffer.size_bytes * cfg.buffer.alpha / (1 + cfg.buffer.alpha)
    assert q * mtu <= limit < (q + 1) * mtu
    lo, hi = map(int, cmd["-pfc_thresholds"])
    assert hi > lo >= 0  # htsim asserts high > low
    assert abs(hi * mtu - cfg.pfc.xoff_bytes) <= mtu / 2
    assert abs(lo * mtu - cfg.pfc.xon_bytes) <= mtu / 2
    # fabric.topo: FatTreeTopology::load's keys, each tier's ports within htsim's limits
    tiers: dict[int, dict[str, int]] = {}
    cur = None
    for ln in out.joinpath("fabric.topo").read_text().splitlines():
        t = ln.split()
        if not t or t[0].startswith("#"):
            continue
        if t[0] == "Tier":
            cur = tiers.setdefault(int(t[1]), {})
        elif cur is not None:
            cur[t[0]] = int(t[1])
    assert tiers[0]["Radix_Down"] + tiers[0]["Radix_Up"] <= 96
    assert all(v["Radix_Down"] + v.get("Radix_Up", 0) <= 64 for k, v in tiers.items() if k)
    notes = out.joinpath("NOTES.md").read_text()
    assert f"-mtu {mtu}" in notes and "one to one\n" not in notes
    # run.sh runs exactly command.txt's line from htsim's folder
    cmd_line = out.joinpath("command.txt").read_text().strip()
    assert out.joinpath("run.sh").read_text().rstrip().endswith("/" + cmd_line)


def test_htsim_refuses_a_switch_with_more_ports_than_its_fat_tree_builds(cli, tmp_path):
    """A 1,024-port ToR: htsim asserts < 96 ports per ToR and aborts at start-up; the
    export exits 2 with one line naming the limits and the switch, writing nothing."""
    s = tmp_path / "big.yaml"
    s.write_text("name: big\nspec:\n  name: big\n"
                 "  hosts: {count: 1024, gpus_per_host: 1, nics_per_host: 1, port_gbps: 100}\n"
                 "  switch_models:\n    big: {ports: 2048, port_gbps: 100}\n"
                 "  topology: {family: single_tor, hosts_per_tor: 1024, tors_per_pod: 1, "
                 "tor: {model: big}}\n"
                 "traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 2000000}\n"
                 "sim: packet\n")
    out = tmp_path / "o"
    r = cli("export", s, "--format", "htsim", "--out", out)
    assert r.code == 2, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert "2048 ports" in r.err and "96 ports per ToR" in r.err and "64 per agg" in r.err
    assert "tor-" in r.err and not out.exists()


def _et(path: Path):
    """One rank file decoded twice: aifabric's wire decoder and Chakra's protobuf
    classes (they must agree)."""
    from chakra.schema.protobuf import et_def_pb2 as pb

    from aifabric.workload.chakra import read_rank

    fast = read_rank(path)
    slow = read_rank(path, fast=False)
    for a in ("ntype", "comm_type", "comm_size", "pg", "src", "dst", "dep_ptr", "dep_idx",
              "duration_us"):
        assert np.array_equal(getattr(fast, a), getattr(slow, a)), a
    # framing: varint length + message, the first a GlobalMetadata
    data = path.read_bytes()
    n, shift, i = 0, 0, 0
    while True:
        b = data[i]
        n |= (b & 0x7F) << shift
        i += 1
        shift += 7
        if not b & 0x80:
            break
    meta = pb.GlobalMetadata()
    meta.ParseFromString(data[i:i + n])
    assert meta.version == "0.0.4"
    return fast


def _export(cli, tmp_path: Path, scenario: Path) -> Path:
    out = tmp_path / "astra"
    r = cli("export", scenario, "--format", "astra-sim", "--out", out)
    assert r.code == 0, r.err
    return out


def test_astra_ring_allreduce_files_carry_the_collective_and_the_channels(cli, tmp_path):
    require_importorskip("chakra.schema.protobuf.et_def_pb2", "mlc-chakra")
    scn, _ = _load(RING)
    out = _export(cli, tmp_path, RING)
    (cs,) = scn.collectives
    net = yaml.safe_load(out.joinpath("network.yml").read_text())
    n = int(np.prod(net["npus_count"]))
    files = sorted(out.joinpath("workload").glob("aifabric.*.et"))
    assert [p.name for p in files] == sorted(f"aifabric.{r}.et" for r in range(n))
    for r in range(n):
        g = _et(out / "workload" / f"aifabric.{r}.et")
        assert list(g.ntype) == [7]  # one COMM_COLL_NODE
        assert int(g.comm_type[0]) == 0 and int(g.comm_size[0]) == cs.size_bytes
        assert int(g.pg[0]) == -1  # every rank: no process group
    assert json.loads(out.joinpath("workload/comm_group.json").read_text()) == {}
    assert json.loads(out.joinpath("memory.json").read_text()) == {
        "memory-type": "NO_MEMORY_EXPANSION"}
    system = json.loads(out.joinpath("system.json").read_text())
    assert system["preferred-dataset-splits"] == 8 * cs.channels
    assert system["active-chunks-per-dimension"] == 8 * cs.channels
    assert system["all-reduce-implementation"] == ["ring"] * len(net["topology"])
    notes = out.joinpath("NOTES.md").read_text()
    assert "--workload-configuration=workload/aifabric" in notes
    assert "Congestion-unaware" in notes and "NIC sharing" in notes


def test_astra_ring_allreduce_closed_form_is_aifabrics_time(cli, tmp_path):
    """The exported single Switch dimension, timed as a ring: 2(n-1)/n x S / B plus
    2(n-1) steps of 2 link latencies; aifabric's flow simulation of the scenario lands
    within 1 % of it (the reviewer's bar for ASTRA-sim's congestion-aware run: 5 %)."""
    from aifabric.sim.run import simulate

    out = _export(cli, tmp_path, RING)
    scn, f = _load(RING)
    (cs,) = scn.collectives
    net = yaml.safe_load(out.joinpath("network.yml").read_text())
    assert net["topology"] == ["Switch"]
    n = net["npus_count"][0]
    bw = net["bandwidth"][0] * 2**30 / 1e9  # bytes per ns
    lat = net["latency"][0]
    closed = 2 * (n - 1) / n * cs.size_bytes / bw + 2 * (n - 1) * 2 * lat
    res = simulate(scn, f)
    t = float(res.makespan_ns)
    assert t == pytest.approx(closed, rel=0.01)


@pytest.mark.parametrize("scenario", [RING, JOB], ids=["ring", "job"])
def test_aifabric_reads_the_astra_workload_back_to_the_same_time(cli, tmp_path, scenario):
    """The exported workload folder, simulated by aifabric as a Chakra trace on the same
    fabric, takes exactly the scenario's own time (collectives, jobs' compute, TP/EP/DP
    collectives, pipeline sends and the process groups all carried)."""
    require_importorskip("chakra.schema.protobuf.et_def_pb2", "mlc-chakra")
    from aifabric.sim.run import simulate

    out = _export(cli, tmp_path, scenario)
    scn, f = _load(scenario)
    want = float(simulate(scn, f).makespan_ns)
    doc = yaml.safe_load(scenario.read_text())
    for k in ("jobs", "collectives"):
        doc.pop(k, None)
    doc["name"] += "-back"
    doc["workload"] = {"chakra": str(out / "workload" / "aifabric")}
    back = tmp_path / "back.yaml"
    back.write_text(yaml.safe_dump(doc))
    scn2, f2 = _load(back)
    assert float(simulate(scn2, f2).makespan_ns) == pytest.approx(want, rel=1e-9)
    groups = json.loads(out.joinpath("workload/comm_group.json").read_text())
    n = len(list(out.joinpath("workload").glob("*.et")))
    for name, ranks in groups.items():
        assert int(name) >= 1 and len(ranks) == len(set(ranks)) and max(ranks) < n
    # every process group a node names is in comm_group.json, with that node's rank
    for r in range(n):
        g = _et(out / "workload" / f"aifabric.{r}.et")
        for i in np.flatnonzero(g.pg >= 0):
            assert r in groups[g.pg_names[int(g.pg[i])]]


def test_astra_without_a_scenario_writes_no_workload_and_says_so(cli, tmp_path):
    out = _export(cli, tmp_path, GOLDEN / "sims" / "dcn-mini.yaml")
    assert not (out / "workload").exists()
    notes = out.joinpath("NOTES.md").read_text()
    assert "No workload is written for a spec" in notes


def test_astra_refuses_traffic_patterns_with_one_line(cli, tmp_path):
    s = tmp_path / "t.yaml"
    s.write_text(f"name: t\nspec: {GOLDEN / 'sims' / 'dcn-mini.yaml'}\n"
                 "traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 1000}\n")
    out = tmp_path / "o"
    r = cli("export", s, "--format", "astra-sim", "--out", out)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "traffic patterns" in r.err and not out.exists()



def test_astra_collective_sizes_and_groups_as_astra_sim_reads_them(cli, tmp_path):
    """AllGather: ASTRA-sim gathers comm_size from every rank, so the file holds
    size_bytes / n; the others hold size_bytes. A collective on part of the ranks names
    its process group, whose members are exactly its ranks; p2p is a send on the sender
    and a receive on the peer with the same size and tag."""
    require_importorskip("chakra.schema.protobuf.et_def_pb2", "mlc-chakra")
    s = tmp_path / "c.yaml"
    s.write_text("name: c\nspec:\n  name: ss8\n"
                 "  hosts: {count: 8, gpus_per_host: 1, nics_per_host: 1, port_gbps: 400}\n"
                 "  topology: {family: single_tor, hosts_per_tor: 8, tors_per_pod: 1}\n"
                 "collectives:\n"
                 "  - {op: allgather, size_bytes: 64MiB, gpus: 4}\n"
                 "  - {op: reduce_scatter, size_bytes: 1MiB, gpus: 2}\n"
                 "  - {op: p2p, size_bytes: 4096, gpus: 2, peers: [1, 0]}\n")
    out = _export(cli, tmp_path, s)
    groups = json.loads(out.joinpath("workload/comm_group.json").read_text())
    assert sorted(groups.values()) == [[0, 1, 2, 3], [4, 5]]
    for r in range(8):
        g = _et(out / "workload" / f"aifabric.{r}.et")
        coll = np.flatnonzero(g.ntype == 7)
        if r < 4:
            assert list(g.comm_type[coll]) == [2] and list(g.comm_size[coll]) == [2**24]
            assert groups[g.pg_names[int(g.pg[coll[0]])]] == [0, 1, 2, 3]
        elif r < 6:
            assert list(g.comm_type[coll]) == [7] and list(g.comm_size[coll]) == [2**20]
            assert groups[g.pg_names[int(g.pg[coll[0]])]] == [4, 5]
        else:
            send, recv = np.flatnonzero(g.ntype == 5), np.flatnonzero(g.ntype == 6)
            assert len(send) == len(recv) == 1
            peer = 13 - r  # 6 <-> 7
            assert (int(g.src[send[0]]), int(g.dst[send[0]])) == (r, peer)
            assert (int(g.src[recv[0]]), int(g.dst[recv[0]])) == (peer, r)
            assert int(g.comm_size[send[0]]) == int(g.comm_size[recv[0]]) == 4096
            assert int(g.tag[send[0]]) == int(g.tag[recv[0]])
