"""``aifabric export SCENARIO --format ns3-rdma|htsim``: the input files of ns-3's RDMA
simulator (HPCC repository) and htsim for cross-checking the packet simulator.

Golden files: tests/golden/crosscheck/<case>/<format>/ (regenerate with
``python scripts/regen_crosscheck_golden.py`` after an intended change and review the
diff). Structural checks parse the files back as the reference simulators do."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import ROOT
from tests.sim.packet.nets import FT4_SCENARIO

GOLDEN = ROOT / "tests" / "golden" / "crosscheck"
CASES = sorted(p.parent.name for p in GOLDEN.glob("*/scenario.yaml"))
_spec = importlib.util.spec_from_file_location(
    "regen_crosscheck_golden", ROOT / "scripts" / "regen_crosscheck_golden.py")
assert _spec and _spec.loader
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)

#: the keys scratch/third.cc of the HPCC repository reads (all of them but PAUSE_TIME,
#: DATA_RATE, LINK_DELAY, which it ignores, and PINT's two)
NS3_KEYS = {
    "ENABLE_QCN", "USE_DYNAMIC_PFC_THRESHOLD", "PACKET_PAYLOAD_SIZE", "TOPOLOGY_FILE",
    "FLOW_FILE", "TRACE_FILE", "TRACE_OUTPUT_FILE", "FCT_OUTPUT_FILE", "PFC_OUTPUT_FILE",
    "SIMULATOR_STOP_TIME", "CC_MODE", "ALPHA_RESUME_INTERVAL", "RATE_DECREASE_INTERVAL",
    "CLAMP_TARGET_RATE", "RP_TIMER", "EWMA_GAIN", "FAST_RECOVERY_TIMES", "RATE_AI",
    "RATE_HAI", "MIN_RATE", "DCTCP_RATE_AI", "ERROR_RATE_PER_LINK", "L2_CHUNK_SIZE",
    "L2_ACK_INTERVAL", "L2_BACK_TO_ZERO", "HAS_WIN", "GLOBAL_T", "VAR_WIN", "FAST_REACT",
    "U_TARGET", "MI_THRESH", "INT_MULTI", "MULTI_RATE", "SAMPLE_FEEDBACK", "RATE_BOUND",
    "ACK_HIGH_PRIO", "LINK_DOWN", "ENABLE_TRACE", "KMAX_MAP", "KMIN_MAP", "PMAX_MAP",
    "BUFFER_SIZE", "QLEN_MON_FILE", "QLEN_MON_START", "QLEN_MON_END"}

FT = FT4_SCENARIO + "sim: packet\n"


def _scenario(tmp_path: Path, body: str, name: str = "s") -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"name: {name}\n" + FT + body)
    return p


def _load(case: str):
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.scenario import SimScenario
    from aifabric.topology import build_fabric

    scn = load_scenario(GOLDEN / case / "scenario.yaml", SimScenario)
    return scn, build_fabric(scn.spec)


def _rate_bps(s: str) -> int:
    for unit, mult in (("Gbps", 10**9), ("Mbps", 10**6), ("bps", 1)):
        if s.endswith(unit):
            return round(float(s[: -len(unit)]) * mult)
    raise AssertionError(f"not a rate: {s}")


def _delay_ps(s: str) -> int:
    for unit, mult in (("ns", 1000), ("ps", 1)):
        if s.endswith(unit):
            return round(float(s[: -len(unit)]) * mult)
    raise AssertionError(f"not a delay: {s}")


def _ns3(folder: Path) -> dict:
    """The files parsed the way scratch/third.cc reads them (tokens, in order)."""
    topo = folder.joinpath("topology.txt").read_text().split("\n")
    n_nodes, n_sw, n_links = map(int, topo[0].split())
    switches = [int(x) for x in topo[1].split()]
    links = [ln.split() for ln in topo[2:] if ln.strip()]
    flow = folder.joinpath("flow.txt").read_text().split("\n")
    flows = [ln.split() for ln in flow[1:] if ln.strip()]
    conf: dict[str, list[str]] = {}
    for ln in folder.joinpath("config.txt").read_text().splitlines():
        k, *v = ln.split()
        assert k not in conf, f"{k} given twice"
        conf[k] = v
    return {"n_nodes": n_nodes, "n_sw": n_sw, "n_links": n_links, "switches": switches,
            "links": links, "n_flows": int(flow[0]), "flows": flows, "conf": conf}


@pytest.mark.parametrize("case", CASES)
def test_export_equals_the_golden_files(case):
    """Same files, same bytes, in both formats (python scripts/regen_crosscheck_golden.py
    accepts a change)."""
    folder = GOLDEN / case
    want = regen.golden_files(folder / "scenario.yaml")
    have = regen.stored_files(folder)
    assert sorted(want) == sorted(have)
    for rel in sorted(want):
        assert want[rel] == have[rel], f"{case}/{rel} differs; run " \
            "scripts/regen_crosscheck_golden.py"


def test_there_are_golden_permutation_and_incast_cases():
    assert {"permutation", "incast"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_ns3_files_count_what_they_declare_and_flows_run_host_to_host(cli, tmp_path, case):
    """Through the CLI: the header counts equal the lines; the switch ids are the
    fabric's switches and every other id a NIC port; every flow runs between two hosts;
    flows are sorted by start; their bytes add up to the scenario's traffic."""
    from aifabric.topology import NodeKind

    out = tmp_path / "ns3"
    r = cli("export", GOLDEN / case / "scenario.yaml", "--format", "ns3-rdma", "--out", out)
    assert r.code == 0, r.err
    ns = _ns3(out)
    scn, f = _load(case)
    kind = f.nodes.kind
    assert ns["n_nodes"] == int(((kind == NodeKind.NIC) | (kind >= NodeKind.TOR)).sum())
    assert ns["n_sw"] == len(ns["switches"]) == int((kind >= NodeKind.TOR).sum())
    assert ns["n_links"] == len(ns["links"]) == int((f.links.kind >= 2).sum())
    sw = set(ns["switches"])
    hosts = set(range(ns["n_nodes"])) - sw
    assert len(hosts) == int((kind == NodeKind.NIC).sum())
    assert ns["n_flows"] == len(ns["flows"]) > 0
    starts = [float(x[5]) for x in ns["flows"]]
    assert starts == sorted(starts)
    for src, dst, pg, dport, size, _ in ns["flows"]:
        assert int(src) in hosts and int(dst) in hosts and src != dst
        assert int(pg) == 3 and int(size) > 0 and int(dport) > 0
    pat = scn.traffic[0]
    senders = 16 if pat.pattern == "permutation" else 8
    assert sum(int(x[4]) for x in ns["flows"]) == senders * pat.size_bytes
    assert set(ns["conf"]) == NS3_KEYS


@pytest.mark.parametrize("case", CASES)
def test_ns3_link_rates_and_delays_match_the_fabric(case, tmp_path):
    """Every link line carries its fabric link's speed, and the delays along a
    host-to-host path add up to the packet simulator's latency of that path (link
    propagation + forwarding latency of every switch it enters)."""
    from aifabric.crosscheck import export_scenario
    from aifabric.sim.paths import arc_latency_ns
    from aifabric.topology import NodeKind

    scn, f = _load(case)
    ex = export_scenario(scn, f, "ns3-rdma")
    for rel, text in ex.files.items():
        (tmp_path / rel).write_text(text)
    ns = _ns3(tmp_path)
    kind = f.nodes.kind
    ids = np.concatenate([np.flatnonzero(kind == NodeKind.NIC),
                          np.flatnonzero(kind >= NodeKind.TOR)])  # ns-3 id -> fabric node
    pair = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(f.links.a, f.links.b,
                                                               strict=True))}
    delay = {}
    for a, b, rate, d, err in ns["links"]:
        fa, fb = int(ids[int(a)]), int(ids[int(b)])
        li = pair[(fa, fb)]
        assert _rate_bps(rate) == round(f.links.capacity_gbps[li].min() * 1e9)
        assert float(err) == 0
        delay[frozenset((fa, fb))] = _delay_ps(d)
    # a path NIC -> ToR -> agg -> ToR -> NIC, arc by arc
    src, dst, _ = f.arcs
    lat = arc_latency_ns(f)
    nic = int(np.flatnonzero(kind == NodeKind.NIC)[0])
    path = [nic]
    for want in (NodeKind.TOR, NodeKind.AGG, NodeKind.TOR, NodeKind.NIC):
        nxt = [int(dst[a]) for a in np.flatnonzero(src == path[-1])
               if kind[dst[a]] == want and int(dst[a]) not in path]
        path.append(nxt[0])
    arcs = [int(np.flatnonzero((src == u) & (dst == v))[0]) for u, v in itertools.pairwise(path)]
    ours_ps = round(float(lat[arcs].sum()) * 1000)
    theirs_ps = sum(delay[frozenset((u, v))] for u, v in itertools.pairwise(path))
    assert theirs_ps == ours_ps


def test_ns3_ecn_maps_cover_every_switch_port_speed_in_kb(tmp_path):
    """KMIN/KMAX/PMAX_MAP list every switch port rate once, in bit/s, with thresholds in
    units of 1000 bytes (ns-3's SwitchMmu::ConfigEcn multiplies by 1000), from the
    scenario's packet.ecn."""
    from aifabric.crosscheck import export_scenario

    scn, f = _load("permutation")
    conf = dict(ln.split(" ", 1) for ln in
                export_scenario(scn, f, "ns3-rdma").files["config.txt"].splitlines())
    speeds = {round(x * 1e9) for x in np.unique(f.links.capacity_gbps[f.links.kind >= 2])}
    for key, want in (("KMIN_MAP", "100"), ("KMAX_MAP", "400"), ("PMAX_MAP", "0.2")):
        n, *rest = conf[key].split()
        assert int(n) == len(speeds) == len(rest) // 2
        assert {int(x) for x in rest[::2]} == speeds
        assert set(rest[1::2]) == {want}
    assert conf["CC_MODE"] == "1" and conf["PACKET_PAYLOAD_SIZE"] == "1024"
    assert conf["EWMA_GAIN"] == str(5 / 1024)  # (1024 - dce_tcp_g) / 1024
    assert conf["BUFFER_SIZE"] == "16" and conf["SIMULATOR_STOP_TIME"] == "0.05"


def test_ns3_config_follows_the_deployed_qos_when_the_scenario_sets_none(tmp_path):
    """A scenario without packet.ecn takes the spec's deploy.qos.ecn (the effective packet
    config): changing the deployed thresholds changes KMIN_MAP."""
    from aifabric.crosscheck import export_scenario
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.scenario import SimScenario
    from aifabric.topology import build_fabric

    body = "traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 10000}\n"
    plain = _scenario(tmp_path, body)
    deployed = tmp_path / "d.yaml"
    doc = yaml.safe_load(plain.read_text())
    doc["spec"]["deploy"] = {"qos": {"ecn": {"min_threshold_bytes": 50000,
                                             "max_threshold_bytes": 900000}}}
    deployed.write_text(yaml.safe_dump(doc))
    kmin = []
    for p in (plain, deployed):
        scn = load_scenario(p, SimScenario)
        conf = export_scenario(scn, build_fabric(scn.spec), "ns3-rdma").files["config.txt"]
        kmin.append(next(ln for ln in conf.splitlines() if ln.startswith("KMIN_MAP")))
    assert kmin[1] == "KMIN_MAP 1 100000000000 50"
    assert kmin[0] != kmin[1]


@pytest.mark.parametrize("case", CASES)
def test_htsim_matrix_counts_and_hosts_under_their_tor(cli, tmp_path, case):
    """Nodes = NIC ports, Connections = lines, ids 1..M; host i is under htsim ToR
    i / Radix_Down, and that groups exactly the NIC ports of one fabric ToR."""
    from aifabric.crosscheck import _htsim_topology
    from aifabric.topology import NodeKind

    out = tmp_path / "ht"
    r = cli("export", GOLDEN / case / "scenario.yaml", "--format", "htsim", "--out", out)
    assert r.code == 0, r.err
    lines = out.joinpath("connections.cm").read_text().splitlines()
    _scn, f = _load(case)
    n_nics = int((f.nodes.kind == NodeKind.NIC).sum())
    assert lines[0] == f"Nodes {n_nics}"
    m = int(lines[1].split()[1])
    conns = [ln.split() for ln in lines[2:]]
    assert len(conns) == m > 0
    assert [int(c[2]) for c in conns] == list(range(1, m + 1))
    for c in conns:
        s, d = map(int, c[0].split("->"))
        assert 0 <= s < n_nics and 0 <= d < n_nics and s != d
        assert c[1] == "id" and c[3] == "start" and c[5] == "size" and int(c[6]) > 0
    topo = out.joinpath("fabric.topo").read_text()
    assert f"Nodes {n_nics}\n" in topo
    r0 = int(topo.split("Radix_Down ")[1].split()[0])
    _, hid, _ = _htsim_topology(f)
    tor_of = {}
    for a, b, k in zip(f.links.a, f.links.b, f.links.kind, strict=True):
        if k == 2:
            nic, tor = (a, b) if f.nodes.kind[a] == NodeKind.NIC else (b, a)
            tor_of[int(nic)] = int(tor)
    groups: dict[int, set[int]] = {}
    for nic, tor in tor_of.items():
        groups.setdefault(int(hid[nic]) // r0, set()).add(tor)
    assert all(len(g) == 1 for g in groups.values())
    assert len(groups) == int((f.nodes.kind == NodeKind.TOR).sum())
    cmd = out.joinpath("command.txt").read_text()
    assert f"-nodes {n_nics} " in cmd and "-tm connections.cm" in cmd
    assert "-topo fabric.topo" in cmd and (out / "run.sh").stat().st_mode & 0o100


def test_start_times_flow_follows_the_dag_and_zero_refuses_it(cli, tmp_path):
    """Two all-to-alls, the second at start_ms 0.5: --start-times zero refuses (exit 2,
    one line); --start-times flow starts the second's flows at exactly 0.5 ms (ns-3:
    seconds, htsim: picoseconds) and the first's at 0."""
    s = _scenario(tmp_path, "collectives:\n"
                  "  - {name: a, op: alltoall, size_bytes: 1MiB, gpus: 4}\n"
                  "  - {name: b, op: alltoall, size_bytes: 1MiB, gpus: 4, start_ms: 0.5}\n")
    r = cli("export", s, "--format", "ns3-rdma", "--out", tmp_path / "z")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "--start-times" in r.err and not (tmp_path / "z").exists()
    assert cli("export", s, "--format", "ns3-rdma", "--out", tmp_path / "n",
               "--start-times", "flow").code == 0
    flows = [ln.split() for ln in (tmp_path / "n" / "flow.txt").read_text().splitlines()[1:]]
    assert sorted({x[5] for x in flows}) == ["0.000000000", "0.000500000"]
    assert sum(x[5] == "0.000500000" for x in flows) == 12  # 4 x 3 peers
    assert cli("export", s, "--format", "htsim", "--out", tmp_path / "h",
               "--start-times", "flow").code == 0
    cm = (tmp_path / "h" / "connections.cm").read_text().splitlines()[2:]
    assert sorted({ln.split()[4] for ln in cm}) == ["0", "500000000"]


def test_export_is_deterministic(tmp_path, cli):
    """Two exports of the same scenario: the same bytes."""
    p = GOLDEN / "permutation" / "scenario.yaml"
    for name in ("a", "b"):
        assert cli("export", p, "--format", "ns3-rdma", "--out", tmp_path / name).code == 0
    for f in (tmp_path / "a").iterdir():
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes()


@pytest.mark.parametrize(("args", "needle"), [
    (["--format", "ns3-rdma"], "needs a scenario"),
    (["--format", "htsim"], "needs a scenario"),
])
def test_a_spec_given_to_a_simulator_format_exits_2(cli, tmp_path, args, needle):
    """A cluster spec where a scenario is needed: exit 2, one line, nothing written."""
    out = tmp_path / "o"
    r = cli("export", ROOT / "examples" / "fat-tree-k64.yaml", *args, "--out", out)
    assert r.code == 2 and needle in r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not out.exists()


@pytest.mark.parametrize(("body", "fmt", "needle"), [
    ("collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: 4}\n", "ns3-rdma",
     "repeated stages"),
    ("traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 1000}\n"
     "failures:\n  - {switch: core-00}\n", "ns3-rdma", "failures"),
    ("traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 5000000000}\n",
     "ns3-rdma", "32-bit unsigned"),
    ("traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 3000000000}\n",
     "htsim", "32-bit"),
])
def test_what_the_formats_cannot_express_exits_2_with_one_line(cli, tmp_path, body, fmt,
                                                               needle):
    """A ring's repeated steps, failed switches, a QP larger than the 32-bit sizes ns-3
    and htsim read: exit 2, one line, no output folder."""
    s = _scenario(tmp_path, body)
    out = tmp_path / "o"
    r = cli("export", s, "--format", fmt, "--out", out)
    assert r.code == 2, (r.code, r.err)
    assert needle in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not out.exists()


def test_htsim_refuses_a_fabric_its_fat_tree_file_cannot_describe(cli, tmp_path):
    """htsim's fat-tree file has one radix per tier: a fabric whose aggs have two down
    radixes (examples/single-tor-dcn.yaml) is refused with one line pointing at
    ns3-rdma, which takes the same scenario."""
    s = tmp_path / "st.yaml"
    s.write_text(f"name: st\nspec: {ROOT / 'examples' / 'single-tor-dcn.yaml'}\n"
                 "traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 1000}\n")
    r = cli("export", s, "--format", "htsim", "--out", tmp_path / "o")
    assert r.code == 2, r.err
    assert "ns3-rdma" in r.err and len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    assert cli("export", s, "--format", "ns3-rdma", "--out", tmp_path / "n").code == 0


def test_graph_formats_still_take_a_spec_and_now_a_scenario(cli, tmp_path):
    """json from a spec as before; a scenario gives its fabric's graph."""
    import json

    a = tmp_path / "a.json"
    assert cli("export", GOLDEN / "permutation" / "scenario.yaml", "--out", a).code == 0
    g = json.loads(a.read_text())
    assert len(g["nodes"]) > 16


TWO_SPEEDS = """name: two-speeds
spec:
  name: c2
  hosts: {count: 4, gpus_per_host: 1, nics_per_host: 1, port_gbps: 100}
  topology: {family: clos, leaf: {model: tomahawk3, down_ports: 2, up_ports: 2},
             spine: {model: tomahawk3}}
traffic:
  - {pattern: permutation, gpus: all, size_bytes: 100000}
sim: packet
packet:
  ecn:
    by_speed:
      100: {kmin_bytes: 50000, kmax_bytes: 200000, pmax: 0.1}
      400: {kmin_bytes: 200000, kmax_bytes: 800000, pmax: 0.2}
"""


def test_ecn_by_speed_gives_one_map_entry_per_port_speed(cli, tmp_path):
    """packet.ecn.by_speed on 100G access and 400G leaf-spine ports: each map has one
    entry per speed with that speed's profile; the leaf-spine links, parallel here, are
    named in NOTES.md (ns-3 routes over one interface per neighbour); htsim's file
    cannot express them and refuses with one line."""
    s = tmp_path / "two.yaml"
    s.write_text(TWO_SPEEDS)
    assert cli("export", s, "--format", "ns3-rdma", "--out", tmp_path / "n").code == 0
    conf = dict(ln.split(" ", 1) for ln in
                (tmp_path / "n" / "config.txt").read_text().splitlines())
    assert conf["KMIN_MAP"] == "2 100000000000 50 400000000000 200"
    assert conf["KMAX_MAP"] == "2 100000000000 200 400000000000 800"
    assert conf["PMAX_MAP"] == "2 100000000000 0.1 400000000000 0.2"
    assert "parallel links" in (tmp_path / "n" / "NOTES.md").read_text()
    r = cli("export", s, "--format", "htsim", "--out", tmp_path / "h")
    assert r.code == 2 and "parallel" in r.err and len(r.err.strip().splitlines()) == 1


def test_a_previous_export_is_replaced_another_folder_never(cli, tmp_path):
    """The folder is written atomically: a previous export (it has a NOTES.md) is
    replaced whole; a folder that is not an export is refused (exit 2, one line) and left
    as it was."""
    p = GOLDEN / "incast" / "scenario.yaml"
    out = tmp_path / "x"
    assert cli("export", p, "--format", "ns3-rdma", "--out", out).code == 0
    (out / "stale.txt").write_text("old")
    assert cli("export", p, "--format", "htsim", "--out", out).code == 0
    assert sorted(q.name for q in out.iterdir()) == sorted(
        ["NOTES.md", "command.txt", "connections.cm", "fabric.topo", "run.sh"])
    other = tmp_path / "mine"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    r = cli("export", p, "--format", "ns3-rdma", "--out", other)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert [q.name for q in other.iterdir()] == ["keep.txt"]


def test_ns3_refuses_more_nodes_than_its_addresses_hold(cli, tmp_path):
    """A k=64 fat-tree has 65,536 NIC ports and 5,120 switches: more than ns-3's 16-bit
    node ids (third.cc node_id_to_ip); exit 2, one line, before any routing."""
    s = tmp_path / "k64.yaml"
    s.write_text(f"name: k64\nspec: {ROOT / 'examples' / 'fat-tree-k64.yaml'}\ntraffic:\n"
                 "  - {pattern: permutation, gpus: '0:2', size_bytes: 1000}\n")
    r = cli("export", s, "--format", "ns3-rdma", "--out", tmp_path / "o")
    assert r.code == 2 and "70656 nodes" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("fmt", ["ns3-rdma", "htsim", "uet-htsim", "astra-sim", "simai"])
@pytest.mark.parametrize(("scenario", "needle"), [
    ("permutation-scheduled.yaml", "scheduled fabric"),
    ("fat-tree-infiniband.yaml", "transport: infiniband"),
])
def test_a_technology_the_peer_does_not_model_is_refused(cli, tmp_path, fmt, scenario,
                                                         needle):
    """A scheduled fabric or an InfiniBand fabric exported for an Ethernet/RoCE peer would
    silently become plain ECMP: exit 2, one line naming --format, nothing written."""
    out = tmp_path / "o"
    r = cli("export", ROOT / "examples" / "scenarios" / scenario, "--format", fmt,
            "--out", out)
    assert r.code == 2, (r.code, r.err)
    assert needle in r.err and "--format" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not out.exists()
