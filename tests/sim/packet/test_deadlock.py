"""PFC deadlock: a cycle of mutually paused queues is found, and only when it is real —
on a hand-built ring, and on a real fabric where failed links make switches bounce
traffic (pinned bounce paths), with the controls that must not deadlock."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from aifabric import build_fabric
from aifabric.routing.failover import live_links
from aifabric.routing.scenario import load_scenario
from aifabric.sim.packet.sim import Topology
from aifabric.sim.paths import route_dag
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario
from tests.sim.packet.nets import config


def _ring(two_hops: bool, stop: bool = True):
    """Four switches in a ring, a sender and a receiver on each. Flows that cross two
    ring links make a cyclic buffer dependency (each ring ingress holds frames waiting
    for the next ring link); flows that cross one do not."""
    t = Topology()
    n = 4
    s = [t.switch(f"s{i}") for i in range(n)]
    a = [t.host(f"a{i}") for i in range(n)]
    b = [t.host(f"b{i}") for i in range(n)]
    for i in range(n):
        t.link(a[i], s[i], 100, 1000)
        t.link(b[i], s[i], 100, 1000)
        t.link(s[i], s[(i + 1) % n], 100, 1000)
    sim = t.sim(config(cc={"algorithm": "none"}, deadlock_check_us=20))
    sim.stop_on_deadlock = stop
    for i in range(n):
        hops = [s[(i + k) % n] for k in range(3 if two_hops else 2)]
        sim.add_flow(t.route(a[i], *hops, b[(i + len(hops) - 1) % n]), 5_000_000)
    ring_arcs = {t.route(s[i], s[(i + 1) % n])[0] for i in range(n)}
    return sim, ring_arcs


def test_a_cyclic_buffer_dependency_deadlocks_and_is_reported():
    """The two-hop ring pauses itself into a cycle: the detector reports the four ring
    ports, the run stops, no flow finishes, and an alarm line names the cycle."""
    sim, ring_arcs = _ring(two_hops=True)
    sim.run(until_ns=3e6)
    assert len(sim.deadlocks) == 1
    d = sim.deadlocks[0]
    assert set(d["arcs"]) == ring_arcs
    assert sim.now_ns < 3e6
    assert sim.counters()["qps_done"] == 0
    assert any(line.startswith("PFC deadlock") for line in sim.alarms())


def test_the_reported_deadlock_is_permanent():
    """Run on past the detection: not one more byte is delivered (a real deadlock, not
    a transient pause)."""
    sim, _ = _ring(two_hops=True, stop=False)
    sim.run(until_ns=300_000)
    assert sim.deadlocks
    before = sim.counters()["delivered_bytes"]
    sim.run(until_ns=1_000_000)
    assert sim.counters()["delivered_bytes"] == before


def test_no_deadlock_without_a_cycle():
    """One-hop flows on the same ring: pauses (if any) never form a cycle; every flow
    finishes and nothing is reported."""
    sim, _ = _ring(two_hops=False)
    sim.run(until_ns=3e6)
    assert sim.deadlocks == []
    assert sim.counters()["qps_done"] == 4


# --------------------------------------------------------------------------------------
# A deadlock on a real fabric: failed leaf-spine links and bounce paths (the example
# scenario), the controls that do not deadlock, and bad pinned paths.

SCEN = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
BOUNCE = SCEN / "deadlock-bounce.yaml"


def _variant(tmp_path: Path, *, rows: list[dict] | None = None, no_paths: bool = False,
             **changes) -> Path:
    """A copy of the bounce scenario in ``tmp_path``: ``changes`` replace top-level
    fields (``packet`` and ``routing`` are merged), ``rows`` replace the CSV's rows,
    ``no_paths`` drops the path column."""
    doc = yaml.safe_load(BOUNCE.read_text())
    for k, v in changes.items():
        doc[k] = {**doc[k], **v} if k in ("packet", "routing") else v
    with (SCEN / "deadlock-bounce.csv").open(newline="") as fh:
        old = list(csv.DictReader(fh))
    rows = old if rows is None else rows
    cols = ["src", "dst", "size_bytes"] + ([] if no_paths else ["path"])
    with (tmp_path / "deadlock-bounce.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    p = tmp_path / "deadlock-bounce.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _run(path: Path, sim: str | None = None):
    scn = load_scenario(path, SimScenario)
    if sim is not None:
        scn = scn.model_copy(update={"sim": sim})
    f = build_fabric(scn.spec)
    return scn, f, simulate(scn, f)


def _link(f, u: str, v: str) -> np.ndarray:
    a, b = f.node_id(u), f.node_id(v)
    links = f.links
    return np.flatnonzero(((links.a == a) & (links.b == b)) | ((links.a == b) & (links.b == a)))


def test_bounce_paths_after_link_failures_deadlock_on_a_real_cycle():
    """The example deadlocks, and what it reports is a real cyclic buffer dependency: a
    closed chain of switch ports (each port's far end is the next port's near end) over
    live links of the fabric, turning down-then-up at a leaf (a bounce), every port of it
    paused with frames queued when the run stopped; no QP finished, and the alarm line
    and the summary name the same ports."""
    scn, f, r = _run(BOUNCE)
    pk = r.summary["packet"]
    assert len(pk["deadlocks"]) == 1
    ports = pk["deadlocks"][0]["ports"]
    ends = [tuple(p.split(" -> ")) for p in ports]
    assert len(ends) >= 3
    alive = live_links(f, scn.failures)
    for (u, v), (u2, _) in zip(ends, ends[1:] + ends[:1], strict=True):
        assert v == u2  # a closed chain
        assert f.is_switch[f.node_id(u)] and f.is_switch[f.node_id(v)]
        lk = _link(f, u, v)
        assert len(lk) and alive[lk].any()  # a live link of the fabric
    tier = {u: int(f.nodes.tier[f.node_id(u)]) for u, _ in ends}
    bounces = [v for (u, v), (_, w) in zip(ends, ends[1:] + ends[:1], strict=True)
               if tier[u] > tier[v] < tier[w]]
    assert bounces  # the cycle goes down into a leaf and up again
    q = r.tables["packet_queues"]
    last = q["time_ns"] == q["time_ns"].max()
    for p in ports:
        m = last & (q["port"] == p) & (q["tc"] == 3)
        assert m.sum() == 1 and q["paused"][m][0] == 1 and q["queue_bytes"][m][0] > 0
    assert pk["qps_done"] == 0 and pk["delivered_bytes"] < 16_000_000
    alarm = next(a for a in pk["alarms"] if a.startswith("PFC deadlock"))
    assert all(p in alarm for p in ports)


def test_the_router_s_own_paths_do_not_deadlock(tmp_path):
    """Control: the same flows, failures and PFC settings on the router's valley-free
    paths (routing.policy: ecmp, no path column) never form a cycle: no deadlock, every
    byte delivered exactly once, no drop."""
    p = _variant(tmp_path, no_paths=True, routing={"policy": "ecmp"})
    _, _, r = _run(p)
    pk = r.summary["packet"]
    assert pk["deadlocks"] == [] and not any("deadlock" in a for a in pk["alarms"])
    assert pk["qps_done"] == pk["qps"] == 4
    assert pk["delivered_bytes"] == 16_000_000 and pk["duplicate_bytes"] == 0
    assert pk["drops"] == 0


def test_bounce_paths_without_pfc_do_not_deadlock(tmp_path):
    """Control: the bounce paths with PFC off cannot deadlock (nothing pauses): no PFC
    frame, no deadlock, every byte delivered exactly once."""
    p = _variant(tmp_path, packet={"pfc": {"enabled": False}})
    _, _, r = _run(p)
    pk = r.summary["packet"]
    assert pk["pfc_frames"] == 0 and pk["deadlocks"] == []
    assert pk["qps_done"] == pk["qps"] == 4
    assert pk["delivered_bytes"] == 16_000_000 and pk["duplicate_bytes"] == 0


def test_pinned_flows_follow_their_paths_in_every_simulator():
    """Pinned connections get exactly their path (host hops included) as incidence rows;
    the flow and analytic simulators load the bounced links with every flow: the two
    links shared by all four 4 MB flows carry 16 MB, and at the flow level the four
    share them fairly, so the run takes 16 MB / 100 Gbit/s (within 1%)."""
    scn = load_scenario(BOUNCE, SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    paths, xconn = route_dag(f, wl.dag, scn.spec.routing, failures=scn.failures,
                             pinned=wl.pinned)
    src, dst, _ = f.arcs
    inc = paths.incidence.tocsr()
    for (s, d), pin in wl.pinned.items():
        c = int(np.flatnonzero((wl.dag.src == s) & (wl.dag.dst == d))[0])
        row = inc[int(paths.conn_ptr[xconn[c]])]
        arcs = row.indices
        heads, tails = dst[arcs], src[arcs]
        nodes = [s]
        while len(nodes) <= len(arcs):  # walk the row from the source GPU
            nodes.append(int(heads[tails == nodes[-1]][0]))
        sw = [n for n in nodes if f.is_switch[n]]
        assert sw == pin.nodes.tolist() and nodes[-1] == d
        assert (row.data == 1).all()
    for sim in ("flow", "analytic"):
        _, _, r = _run(BOUNCE, sim)
        lk = r.tables["links"]
        for u, v in (("leaf-s01", "spine-01"), ("leaf-s03", "spine-00")):
            m = (lk["from"] == u) & (lk["to"] == v)
            assert lk["bytes"][m].sum() == pytest.approx(16_000_000), sim
        if sim == "flow":
            assert r.makespan_ns == pytest.approx(16e6 * 8 / 100, rel=0.01)


def test_simulate_command_reports_the_deadlock(cli, tmp_path):
    """`aifabric simulate deadlock-bounce.yaml --out` exits 1 (an alarm), prints the alarm
    line with the cycle's ports, and writes them into report.md and packet_alarms.csv."""
    out = tmp_path / "out"
    r = cli("simulate", BOUNCE, "--out", out)
    assert r.code == 1, r.err
    text = re.sub(r"\s+", " ", r.out)
    assert "alarm PFC deadlock" in text
    md = (out / "report.md").read_text()
    line = next(x for x in md.splitlines() if "PFC deadlock" in x)
    assert line.count(" -> ") >= 3
    assert "PFC deadlock" in (out / "packet_alarms.csv").read_text()
    js = json.loads(cli("simulate", BOUNCE, "--json").out)
    assert js["packet"]["deadlocks"][0]["ports"] == \
        line.split("cycle of paused queues ")[1].split(" => ")


BAD = [
    ("leaf-s03 > spine-00 > leaf-s02", "line 2: path: deadlock-bounce.csv: hop 2 "
     "spine-00 -> leaf-s02: no live link, every link between them is down"),
    ("leaf-s01 > spine-01 > leaf-s02", "line 2: path: deadlock-bounce.csv: the first "
     "switch leaf-s01 is not cabled to a live port of host-s03-h000"),
    ("leaf-s03 > spine-01 > leaf-s01", "line 2: path: deadlock-bounce.csv: the last "
     "switch leaf-s01 is not cabled to a live port of host-s02-h000"),
    ("leaf-s03 > leaf-s02", "line 2: path: deadlock-bounce.csv: hop 1 leaf-s03 -> "
     "leaf-s02: no live link, they are not cabled together"),
    ("leaf-s03 > host-s03-h000-nic0 > leaf-s02", "line 2: path: deadlock-bounce.csv: "
     "switch 2 of the path, host-s03-h000-nic0, is a"),
    ("leaf-s03 > spine-01 > leaf-s01 > spine-01 > leaf-s02", "line 2: path: "
     "deadlock-bounce.csv: visits spine-01 twice"),
]


@pytest.mark.parametrize(("path", "message"), BAD)
def test_a_bad_pinned_path_exits_2_naming_file_row_and_hop(cli, tmp_path, path, message):
    """A pinned path that the fabric cannot carry after the scenario's failures (a dead
    or missing link, ends that are not the hosts' ToRs, a NIC in the middle, a switch
    visited twice) is bad input: exit 2, one line naming the scenario file, the CSV and
    its line, and the hop; no traceback, nothing written."""
    rows = [{"src": "host-s03-h000-gpu0", "dst": "host-s02-h000-gpu0",
             "size_bytes": 1000, "path": path}]
    p = _variant(tmp_path, rows=rows)
    out = tmp_path / "out"
    r = cli("simulate", p, "--out", out)
    assert r.code == 2
    lines = [x.removeprefix("error: ") for x in r.err.strip().splitlines()]
    assert len(lines) == 1 and "Traceback" not in r.err
    assert lines[0].startswith(f"{p}: traffic.0.file line 2: path: ")
    assert message in re.sub(r"\s+", " ", lines[0])
    assert not out.exists()


def test_paths_need_the_pinned_policy_and_one_path_per_pair(cli, tmp_path):
    """A path column under another policy would be silently ignored: refused, naming
    the policy; the same GPU pair pinned to two paths (one pair is one connection) is
    refused at the second row. One line each, exit 2."""
    p = _variant(tmp_path, routing={"policy": "ecmp"})
    r = cli("simulate", p)
    assert r.code == 2
    assert [x.removeprefix("error: ") for x in r.err.strip().splitlines()] == [
        f"{p}: traffic.0.file: 'deadlock-bounce.csv' pins paths (a path column) but "
        "routing.policy is ecmp; allowed: routing.policy: pinned (follow them), or a CSV "
        "without paths"]
    row = {"src": "host-s03-h000-gpu0", "dst": "host-s02-h000-gpu0", "size_bytes": 1000}
    p = _variant(tmp_path, rows=[{**row, "path": "leaf-s03 > spine-01 > leaf-s02"},
                                 {**row, "path": "leaf-s03 > spine-00 > leaf-s01 > "
                                  "spine-01 > leaf-s02"}])
    r = cli("simulate", p)
    assert r.code == 2
    lines = [x.removeprefix("error: ") for x in r.err.strip().splitlines()]
    assert len(lines) == 1
    assert lines[0].startswith(f"{p}: traffic.0.file line 3: path: deadlock-bounce.csv: "
                               "host-s03-h000-gpu0 -> host-s02-h000-gpu0 is pinned to "
                               "another path at traffic.0.file line 2")


def test_the_first_switch_picks_the_nic_port_and_nvlink_carries_the_rest(tmp_path):
    """On a small dual-ToR (HPN) fabric a path that starts at the rail-3 ToR of side b
    leaves GPU 0 over NVLink to GPU 3, whose NIC port 3b is cabled to that ToR, and
    arrives on the destination NIC port cabled to the last ToR; every QP follows it,
    while a row without a path is routed (here over its own rail)."""
    (tmp_path / "f.csv").write_text(
        "src,dst,size_bytes,path\n"
        "host-s00-h000-gpu0,host-s01-h000-gpu0,1000000,"
        "tor-s00-r3-b > agg-p00-pl1-00 > tor-s01-r0-b\n"
        "host-s00-h000-gpu1,host-s01-h000-gpu1,1000000,\n")
    (tmp_path / "s.yaml").write_text(
        "name: dual-tor\n"
        "spec:\n"
        "  hosts: {count: 4, port_gbps: 400, ports_per_nic: 2}\n"
        "  topology: {family: hpn, hosts_per_segment: 2, tor: {up_ports: 4},\n"
        "             agg: {down_ports: 16, up_ports: 0}, core: null}\n"
        "routing: {policy: pinned, qps_per_connection: 2}\n"
        "traffic:\n  - {pattern: flows, file: f.csv}\n")
    scn = load_scenario(tmp_path / "s.yaml", SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    paths, xconn = route_dag(f, wl.dag, scn.spec.routing, pinned=wl.pinned)
    src, dst, _ = f.arcs
    names = f.nodes.name
    inc = paths.incidence.tocsr()

    def hops(row):
        arcs = inc[row].indices
        s = [str(names[src[a]]) for a in arcs]
        d = [str(names[dst[a]]) for a in arcs]
        start = next(x for x in s if x not in d)
        seq = [start]
        while seq[-1] in s:
            seq.append(d[s.index(seq[-1])])
        return seq

    c0, c1 = (int(paths.conn_ptr[xconn[x]]) for x in (0, 1))
    want = ["host-s00-h000-gpu0", "host-s00-h000", "host-s00-h000-gpu3",
            "host-s00-h000-nic3b", "tor-s00-r3-b", "agg-p00-pl1-00", "tor-s01-r0-b",
            "host-s01-h000-nic0b", "host-s01-h000-gpu0"]
    assert hops(c0) == want and hops(c0 + 1) == want
    routed = hops(c1)
    assert routed[0] == "host-s00-h000-gpu1" and routed[-1] == "host-s01-h000-gpu1"
    assert "host-s00-h000" not in routed and any("-r1-" in x for x in routed)
