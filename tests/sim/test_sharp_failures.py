"""SHARP under the scenario's ``failures`` (flow and packet level): the aggregation
manager lays its trees on the live fabric after the subnet manager's re-sweep, so a tree
never crosses a failed link or switch; on an idle fabric the rebuilt tree keeps the
closed-form time (within 1%) and every host link still carries exactly the buffer once
up and once down; where the failures leave a GPU no tree, NCCL runs its ring and the
results say what failed; a scenario SHARP and the ring cannot run at all is one line,
exit 2. The transfers table names each SHARP transfer by the arc it streams over."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from aifabric import api
from aifabric.routing.failover import live_links
from aifabric.routing.scenario import load_scenario
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.paths import arc_latency_ns
from aifabric.sim.run import compile_workload
from aifabric.sim.scenario import SimScenario
from aifabric.topology import build_fabric
from aifabric.topology.fabric import LinkKind
from tests.conftest import ROOT, edited_yaml, one_line_exit_2

EX = ROOT / "examples" / "scenarios"
SHARP = EX / "allreduce-sharp-packet.yaml"
JOB = EX / "job-ndr-sharp.yaml"
S = 16 << 20  # the example's message
NIC = PacketConfig().nic


def _four_spines(doc):
    """The example's 16 hosts under 4 leaves, now with 4 spines (one cable from each
    leaf to each): a failed spine or cable leaves other roots."""
    doc["spec"]["topology"]["spine"] = {"model": "quantum2", "count": 4}


def _scenario(tmp_path, sim, failures=None, change=_four_spines, base=SHARP,
              name="s.yaml"):
    return edited_yaml(base, tmp_path / name, change, sim=sim, failures=failures)


def _trees(path):
    """The fabric, the live links and every SHARP tree the workload laid."""
    scn = load_scenario(path, model=SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    trees = [tr for ops in wl.sharp_trees.values() for op in ops for tr in op]
    return f, live_links(f, scn.failures or None), trees


def _root(f, trees):
    roots = {str(f.nodes.name[tr.root]) for tr in trees}
    assert len(roots) == 1
    return roots.pop()


def _wire_ns(nbytes, gbps):
    """Wire time of ``nbytes`` of payload in MTU frames with the ACK of each frame
    sharing the link (as in tests/sim/packet/test_sharp_packet.py)."""
    frames = -(-nbytes // NIC.mtu_payload_bytes)
    per = NIC.header_bytes + NIC.wire_overhead_bytes + NIC.ack_bytes + \
        NIC.wire_overhead_bytes
    return (nbytes + frames * per) * 8 / gbps


def _packet_closed_ns(f, tr, agg_ns=200.0):
    """The pipeline's closed form on the tree ``tr`` (one level: 4 store-and-forward
    edges): (N + 3) chunk times plus each edge's path latency for a chunk's last frame
    (propagation, switch latency, the units' latency, a frame's serialization per hop
    after an edge's first)."""
    lat = arc_latency_ns(f)
    links = f.links
    acc = int(np.flatnonzero((links.kind == LinkKind.ACCESS) & (links.a == tr.nics[0]))[0])
    up = int(tr.up_arcs[0])
    frame = NIC.mtu_payload_bytes + NIC.header_bytes + NIC.wire_overhead_bytes
    ser400, ser_unit = frame * 8 / 400, frame * 8 / (64 * 400)
    path = (lat[2 * acc] + agg_ns + ser_unit) + (lat[up] + agg_ns + ser400 + ser_unit) \
        + (lat[up ^ 1] + agg_ns + ser400 + ser_unit) + (lat[2 * acc + 1] + ser400)
    chunk = 512 << 10
    return (S // chunk + 3) * _wire_ns(chunk, 400) + path


FAILURES = {
    "tree-link": [{"link": ["leaf-s00", "spine-00"]}],
    "root-switch": [{"switch": "spine-00"}],
}


@pytest.mark.parametrize("what", sorted(FAILURES))
def test_a_failed_tree_link_or_root_moves_the_tree_and_keeps_s_over_b(tmp_path, what):
    """Flow level. Healthy, the tree's root is spine-00; with the cable leaf-s00 --
    spine-00 or spine-00 itself down the aggregation manager roots it on spine-01 (the
    next top switch every leaf reaches directly): no tree arc is a failed link, the
    failed link carries nothing, every host link carries exactly S each way, each tree
    link S each way, and the time is still S / 400 Gbit/s (within 1%)."""
    healthy = _scenario(tmp_path, "flow", name="h.yaml")
    f, _, trees = _trees(healthy)
    assert _root(f, trees) == "spine-00"
    path = _scenario(tmp_path, "flow", FAILURES[what])
    f, alive, trees = _trees(path)
    assert _root(f, trees) == "spine-01"
    for tr in trees:  # the invariant: no tree arc on a failed link
        assert alive[tr.up_arcs // 2].all() and tr.depth == 1
    res = api.simulate(path)
    coll = res.summary["collectives"][0]
    assert coll["algorithm"] == "sharp" and "notes" not in res.summary
    assert coll["time_ns"] == pytest.approx(S * 8 / 400, rel=0.01)
    assert coll["time_ns"] == pytest.approx(
        api.simulate(healthy).summary["collectives"][0]["time_ns"], rel=0.01)
    lk = res.raw.tables["links"]
    dead = np.flatnonzero(~alive)
    assert not np.isin(lk["link"], dead).any()  # nothing on a failed link
    rows: dict[str, list[float]] = {}
    for t, b, a, z in zip(lk["tier"], lk["bytes"], lk["from"], lk["to"], strict=True):
        rows.setdefault(str(t), []).append(float(b))
        if str(t).startswith("leaf_spine"):
            assert "spine-01" in (a, z)
    assert {k: len(v) for k, v in rows.items()} == {
        "pcie up": 16, "pcie down": 16, "access up": 16, "access down": 16,
        "leaf_spine up": 4, "leaf_spine down": 4}
    for v in rows.values():
        assert v == [float(S)] * len(v)


@pytest.mark.parametrize("what", sorted(FAILURES))
def test_at_packet_level_the_rebuilt_tree_meets_the_pipelined_closed_form(tmp_path, what):
    """Packet level, the same failures: the chunks run on the rebuilt tree (root
    spine-01), within 1% of the pipeline's closed form on it; every edge delivers S once
    (16 hosts up, 4 leaves up, 4 down, 16 hosts down); every host link and tree link
    carries S of payload each way in frames with their headers and ACKs, the failed
    link nothing; the units sit on the new root."""
    path = _scenario(tmp_path, "packet", FAILURES[what])
    f, alive, trees = _trees(path)
    assert _root(f, trees) == "spine-01"
    res = api.simulate(path)
    t = res.summary["collectives"][0]["time_ns"]
    assert t == pytest.approx(_packet_closed_ns(f, trees[0]), rel=0.01)
    pk = res.summary["packet"]
    assert pk["delivered_bytes"] == (16 + 4 + 4 + 16) * S
    assert pk["drops"] == 0 and pk["duplicate_bytes"] == 0
    assert sorted(pk["sharp"]["trees_per_switch"]) == ["leaf-s00", "leaf-s01",
                                                       "leaf-s02", "leaf-s03", "spine-01"]
    lk = res.raw.tables["links"]
    assert not np.isin(lk["link"], np.flatnonzero(~alive)).any()
    frames = S // NIC.mtu_payload_bytes
    expect = S + frames * (NIC.header_bytes + NIC.ack_bytes)
    net = [float(b) for b, tier in zip(lk["bytes"], lk["tier"], strict=True)
           if str(tier).startswith(("access", "leaf_spine"))]
    assert net == [expect] * (16 + 16 + 4 + 4)


def _dual_port(doc):
    """Each host's NIC with two ports (a and b, each to its own leaf port): a host that
    loses port a still reaches the fabric through b."""
    _four_spines(doc)
    doc["spec"]["hosts"]["ports_per_nic"] = 2
    doc["spec"]["topology"]["leaf"] = {"model": "quantum2", "down_ports": 8,
                                       "up_ports": 8}


def test_a_gpu_the_failures_cut_off_from_its_tree_runs_nccls_ring_and_says_so(tmp_path,
                                                                             cli):
    """host-s00-h000's NIC port a (the port SHARP uses) is down: the aggregation manager
    cannot put that GPU on a tree, so NCCL runs the AllReduce with its ring (on the
    surviving port b), exactly as ``algorithm: ring`` with the same failure, and the
    results' note names the GPU, its NIC port and the failed link; the CLI prints it."""
    fail = [{"link": ["host-s00-h000-nic0a", "leaf-s00"]}]
    path = _scenario(tmp_path, "flow", fail, change=_dual_port)
    res = api.simulate(path)
    coll = res.summary["collectives"][0]
    assert coll["algorithm"] == "ring"
    (note,) = res.summary["notes"]
    assert note.startswith("collectives[0] (allreduce-16MiB): no SHARP tree after the "
                           "failures (GPU host-s00-h000-gpu0's NIC port "
                           "host-s00-h000-nic0a cannot join a tree: its link to leaf-s00 "
                           "is down)"), note
    assert note.endswith("its AllReduce runs NCCL's ring instead")

    def ring(doc):
        _dual_port(doc)
        doc["collectives"][0]["algorithm"] = "ring"
    rp = _scenario(tmp_path, "flow", fail, change=ring, name="r.yaml")
    assert coll["time_ns"] == api.simulate(rp).summary["collectives"][0]["time_ns"]
    healthy = api.simulate(_scenario(tmp_path, "flow", change=_dual_port, name="h.yaml"))
    assert healthy.summary["collectives"][0]["algorithm"] == "sharp"
    assert coll["time_ns"] > 1.8 * healthy.summary["collectives"][0]["time_ns"]
    r = cli("simulate", path)
    assert r.code == 0 and "no SHARP tree after the failures" in r.out


def test_a_job_keeps_sharp_around_a_failed_spine(tmp_path):
    """job-ndr-sharp.yaml (16 DP groups of one rail each, 8 trees spread over the
    spines) with spine-00 down: no tree touches it, every tree link is live, the step
    keeps its time (within 1%) and every host link carries the gradients once each way
    (the healthy run's bytes)."""
    healthy = api.simulate(JOB)
    path = _scenario(tmp_path, "flow", [{"switch": "spine-00"}], change=lambda d: None,
                     base=JOB)
    f, alive, trees = _trees(path)
    assert trees and all(alive[tr.up_arcs // 2].all() for tr in trees)
    assert "spine-00" not in {str(f.nodes.name[tr.root]) for tr in trees}
    res = api.simulate(path)
    assert "notes" not in res.summary
    it = res.summary["jobs"][0]["iteration_ns"]
    assert it == pytest.approx(healthy.summary["jobs"][0]["iteration_ns"], rel=0.01)

    def host_bytes(r):
        lk = r.raw.tables["links"]
        return sorted(float(b) for b, t in zip(lk["bytes"], lk["tier"], strict=True)
                      if str(t).startswith("access"))
    assert host_bytes(res) == host_bytes(healthy)


def test_a_sharp_job_whose_gpu_has_no_live_port_is_one_line_exit_2(tmp_path, cli):
    """A job GPU's only NIC port down: SHARP cannot run (the note's case), and NCCL's
    ring cannot reach that GPU either: one line naming routing, exit 2, nothing
    written -- no traceback."""
    path = _scenario(tmp_path, "flow", [{"link": ["host-s00-h000-nic0", "leaf-s00-r0"]}],
                     change=lambda d: None, base=JOB)
    out = tmp_path / "out"
    line = one_line_exit_2(cli("simulate", path, "--out", out))
    assert "routing:" in line and "no path" in line, line
    assert not out.exists()


def test_a_sharp_job_whose_gpu_is_cut_off_from_its_tree_runs_the_ring_and_says_so(
        tmp_path):
    """job-ndr-sharp.yaml with dual-port NICs and host-s00-h000's NIC 0 port a down: that
    GPU cannot join its DP group's tree, so the job's DP AllReduce runs NCCL's ring (on
    port b), the note names the GPU, port and link, and the step is exactly the same job
    with ``dp_algorithm: ring`` and the same failure."""
    def dual(algo):
        def change(doc):
            doc["spec"]["hosts"]["ports_per_nic"] = 2
            doc["spec"]["topology"]["leaf"] = {"model": "quantum2", "down_ports": 16,
                                               "up_ports": 16}
            doc["jobs"][0]["dp_algorithm"] = algo
        return change
    fail = [{"link": ["host-s00-h000-nic0a", "leaf-s00-r0"]}]
    res = api.simulate(_scenario(tmp_path, "flow", fail, change=dual("sharp"), base=JOB))
    assert res.summary["notes"] == [
        "jobs[0] (llm-7b): no SHARP tree after the failures (GPU host-s00-h000-gpu0's NIC "
        "port host-s00-h000-nic0a cannot join a tree: its link to leaf-s00-r0 is down); "
        "its DP AllReduce runs NCCL's ring instead"]
    ring = api.simulate(_scenario(tmp_path, "flow", fail, change=dual("ring"), base=JOB,
                                  name="r.yaml"))
    assert res.summary["jobs"][0]["iteration_ns"] == ring.summary["jobs"][0]["iteration_ns"]
    healthy = api.simulate(_scenario(tmp_path, "flow", change=dual("sharp"), base=JOB,
                                     name="h.yaml"))
    assert "notes" not in healthy.summary
    assert healthy.summary["jobs"][0]["iteration_ns"] < \
        0.6 * res.summary["jobs"][0]["iteration_ns"]


def test_failures_naming_unknown_links_keep_their_message(tmp_path, cli):
    path = _scenario(tmp_path, "flow", [{"link": ["leaf-s00", "spine-99"]}])
    line = one_line_exit_2(cli("simulate", path))
    assert "failures.0.link: no node called 'spine-99'" in line, line


@pytest.mark.parametrize("sim", ["flow", "packet"])
def test_the_transfers_table_names_each_sharp_transfer_by_its_arc(tmp_path, sim):
    """Each SHARP transfer streams over one arc: its row names that arc's ends, a switch
    as its aggregation unit (``leaf-s00/sharp``): GPU -> NIC and back (PCIe), NIC ->
    leaf unit and back, leaf unit -> root unit and back; no row is a GPU pair standing in
    for it. The slowest transfers read the same names. Flow level: the bytes of each
    row's arc are the row's size."""
    path = _scenario(tmp_path, sim, FAILURES["tree-link"])
    res = api.simulate(path)
    tr = res.raw.tables["transfers"]
    pairs = sorted(zip(tr["src_gpu"], tr["dst_gpu"], strict=True))
    assert len(pairs) == 16 * 4 + 8
    gpu = [(a, b) for a, b in pairs if a.endswith("-gpu0")]
    nic_up = [(a, b) for a, b in pairs if a.endswith("-nic0") and b.endswith("/sharp")]
    assert len(gpu) == 16 and all(b == a[:-4] + "nic0" for a, b in gpu)
    assert len(nic_up) == 16 and all(b == f"leaf-s{a[6:8]}/sharp" for a, b in nic_up)
    tree = [(a, b) for a, b in pairs if a.endswith("/sharp") and b.endswith("/sharp")]
    assert sorted(tree) == sorted(
        [(f"leaf-s0{i}/sharp", "spine-01/sharp") for i in range(4)]
        + [("spine-01/sharp", f"leaf-s0{i}/sharp") for i in range(4)])
    assert not any(a.endswith("-gpu0") and b.endswith("-gpu0") for a, b in pairs)
    for x in res.summary["slowest_transfers"]:
        assert (x["src"], x["dst"]) in set(pairs)
    if sim == "flow":
        lk = res.raw.tables["links"]
        by = {(a, b): float(n) for a, b, n in zip(lk["from"], lk["to"], lk["bytes"],
                                                   strict=True)}
        for a, b, size in zip(tr["src_gpu"], tr["dst_gpu"], tr["size_bytes"],
                              strict=True):
            assert by[(a.removesuffix("/sharp"), b.removesuffix("/sharp"))] == size


def test_packet_ack_paths_count_no_sharp_placeholders(tmp_path):
    """With ``packet.nic.ack_path: hashed`` the ACK-paths count is of the run's routed
    QPs only: the SHARP AllReduce's transfers are tree arcs (their chunk QPs' ACKs
    retrace them), so a run of nothing else routes none."""
    def hashed(doc):
        _four_spines(doc)
        doc["packet"] = {"nic": {"ack_path": "hashed"}}
    res = api.simulate(_scenario(tmp_path, "packet", change=hashed))
    ap = res.summary["packet"]["ack_paths"]
    assert ap["mode"] == "hashed" and ap["qps"] == 0, ap


def test_the_bare_sharp_allreduce_takes_the_scenario_failures():
    """``sharp_allreduce(fab, gpus, size, failures)``: the same trees as a scenario's,
    on the live fabric: root spine-01 with spine-00 down, S / B + a link latency."""
    from aifabric.sim.run import gpu_pool
    from aifabric.sim.sharp import SharpUnavailable, sharp_allreduce

    doc = yaml.safe_load(SHARP.read_text())
    _four_spines(doc)
    scn = SimScenario.model_validate(doc)
    f = build_fabric(scn.spec)
    gpus = gpu_pool(f).node
    out = sharp_allreduce(f, gpus, S, failures=[{"switch": "spine-00"}])
    assert [t["root"] for t in out["trees"]] == ["spine-01"]
    assert out["time_ns"] == pytest.approx(out["closed_form_ns"], rel=0.01)
    assert out["host_link_bytes_up"] == S
    with pytest.raises(SharpUnavailable, match="host-s00-h000-nic0 cannot join"):
        sharp_allreduce(f, gpus, S, failures=[{"switch": "leaf-s00"}])
