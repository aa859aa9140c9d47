"""SHARP AllReduce at packet level on InfiniBand (``sim: packet`` with ``algorithm:
sharp`` or ``dp_algorithm: sharp``; :mod:`aifabric.sim.packet.sharp`): on an idle 2-tier
NDR fabric the time is the pipeline's closed form (chunks x wire time + the fill of the
tree's store-and-forward edges + their path latency) within 1%, and the flow level's
within the headers, ACKs and fill it leaves out; every host link carries the message
exactly once up and once down (plus the packet model's headers and ACKs), where the
ring carries 2(n-1)/n of it; no switch holds more trees or operations than its model;
beyond a limit a collective is refused and a job runs the ring, naming the switch; the
gain over the ring has the flow level's direction and size; bad input is one line,
exit 2."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from aifabric import api
from aifabric.routing.scenario import load_scenario
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.paths import arc_latency_ns
from aifabric.sim.run import gpu_pool
from aifabric.sim.scenario import SimScenario
from aifabric.sim.sharp import sharp_tree
from aifabric.topology import build_fabric
from aifabric.topology.fabric import LinkKind
from tests.conftest import ROOT, one_line_exit_2
from tests.sim.test_sharp_job import dp_algorithms

EX = ROOT / "examples" / "scenarios"
SHARP = EX / "allreduce-sharp-packet.yaml"
RING = EX / "allreduce-ring-packet.yaml"
JOB = EX / "job-ndr-sharp.yaml"
S = 16 << 20  # the example's message
NIC = PacketConfig().nic  # the packet model's frame sizes (InfiniBand keeps them)


def _scenario(tmp_path, change, base=SHARP, name="s.yaml"):
    doc = copy.deepcopy(yaml.safe_load(base.read_text()))
    change(doc)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _wire_ns(nbytes, gbps, acks=False):
    """Wire time of ``nbytes`` of payload in MTU frames (headers and preamble/gap), with
    ``acks`` the ACK frame the receiver returns for each (ack_interval_packets 1) on the
    same link in the other direction's stream (both directions carry data and ACKs)."""
    frames = -(-nbytes // NIC.mtu_payload_bytes)
    per = NIC.header_bytes + NIC.wire_overhead_bytes
    extra = frames * (NIC.ack_bytes + NIC.wire_overhead_bytes) if acks else 0
    return (nbytes + frames * per + extra) * 8 / gbps


def _tree_path_ns(path, agg_ns=200.0):
    """The latency of the 4 store-and-forward edges of the example's tree (host -> leaf
    unit -> root unit -> leaf unit -> host) for the last frame of a chunk: every arc's
    propagation and switch latency, the units' latency on the arc into them, and the
    frame's serialization on each hop after an edge's first (400G tree links; the units'
    internal links at 64 x 400G)."""
    scn = load_scenario(path, model=SimScenario)
    f = build_fabric(scn.spec)
    lat = arc_latency_ns(f)
    tr = sharp_tree(f, gpu_pool(f).node)[0]
    links = f.links
    acc = int(np.flatnonzero((links.kind == LinkKind.ACCESS) & (links.a == tr.nics[0]))[0])
    up = int(tr.up_arcs[0])
    frame = NIC.mtu_payload_bytes + NIC.header_bytes + NIC.wire_overhead_bytes
    ser400, ser_unit = frame * 8 / 400, frame * 8 / (64 * 400)
    host_up = lat[2 * acc] + agg_ns + ser_unit
    leaf_up = 0 + lat[up] + agg_ns + ser400 + ser_unit
    root_down = 0 + lat[up ^ 1] + agg_ns + ser400 + ser_unit
    host_down = 0 + lat[2 * acc + 1] + ser400
    assert len(tr.up_arcs) == 4 and tr.depth == 1  # 4 leaves under one root spine
    return host_up + leaf_up + root_down + host_down


def test_sharp_at_packet_level_meets_the_pipelined_closed_form_within_1_percent():
    """16 hosts under 4 leaves, one root spine: 32 chunks of 512 KiB stream through 4
    store-and-forward edges (up to the leaf's unit, up to the root's, down, down): the
    last chunk reaches its host after (N + E - 1) chunk times (each with its frames'
    headers and the ACKs sharing the host links) plus the edges' path latency, within 1%
    -- not E x S / B, which is what store and forward of the whole message would take."""
    res = api.simulate(SHARP)
    coll = res.summary["collectives"][0]
    assert coll["algorithm"] == "sharp" and coll["gpus"] == 16
    chunk, edges = 512 << 10, 4
    n = S // chunk
    closed = (n + edges - 1) * _wire_ns(chunk, 400, acks=True) + _tree_path_ns(SHARP)
    t = coll["time_ns"]
    assert t == pytest.approx(closed, rel=0.01)
    assert t < 0.4 * edges * S * 8 / 400  # pipelined: far from E x S / B
    sh = res.summary["packet"]["sharp"]
    assert sh["chunk_bytes"] == chunk and sh["aggregation_units"] == 5
    op = sh["operations"][0]
    assert op["chunks"] == n and op["hosts"] == 16
    assert op["chunk_qps"] == n * (16 + 4 + 4 + 16)  # one QP per chunk per tree edge
    pk = res.summary["packet"]
    assert pk["drops"] == 0 and pk["retx_bytes"] == 0


def test_a_smaller_chunk_shortens_the_fill_as_the_closed_form_says(tmp_path):
    """128 KiB chunks: 128 of them, the same 4 edges; the fill shrinks by 4x and the
    time follows (N + E - 1) x chunk time + path within 1%."""
    path = _scenario(tmp_path, lambda d: d.setdefault("packet", {}).update(
        {"sharp": {"chunk_bytes": "128KiB"}}))
    t = api.simulate(path).summary["collectives"][0]["time_ns"]
    chunk = 128 << 10
    closed = (S // chunk + 3) * _wire_ns(chunk, 400, acks=True) + _tree_path_ns(path)
    assert t == pytest.approx(closed, rel=0.01)


def test_packet_and_flow_sharp_agree_within_the_headers_acks_and_pipeline_fill():
    """The flow level is the pipeline's fluid limit (S / B + a link latency); packet by
    packet adds each frame's headers, the ACKs on the host links, the fill of 3 chunk
    times and the tree's path latency: the packet time is above the flow's by at most
    those (plus 0.5%)."""
    pkt = api.simulate(SHARP).summary["collectives"][0]["time_ns"]
    flow = api.simulate(SHARP, sim="flow").summary["collectives"][0]["time_ns"]
    assert flow == pytest.approx(S * 8 / 400, rel=0.01)
    per_frame = NIC.header_bytes + NIC.wire_overhead_bytes + NIC.ack_bytes + \
        NIC.wire_overhead_bytes
    headers = per_frame / NIC.mtu_payload_bytes
    fill = 3 * (512 << 10) / S
    path = _tree_path_ns(SHARP) / flow
    assert flow < pkt <= flow * ((1 + headers) * (1 + fill) + path + 0.005)


def test_each_host_link_carries_the_message_once_up_and_once_down():
    """Bytes conserved, exactly: every host link and tree link carries S of payload in
    each direction, in S / MTU frames with their headers, plus one ACK per frame of the
    other direction (ack_interval_packets 1); the ring's host links carry 2(n-1)/n x S
    each way. No switch holds more trees or operations than its model allows."""
    res = api.simulate(SHARP)
    # every tree edge (16 hosts up, 4 leaves up, 4 down, 16 hosts down) delivers S once
    assert res.summary["packet"]["delivered_bytes"] == (16 + 4 + 4 + 16) * S
    assert res.summary["packet"]["duplicate_bytes"] == 0
    frames = S // NIC.mtu_payload_bytes
    expect = S + frames * (NIC.header_bytes + NIC.ack_bytes)
    lk = res.raw.tables["links"]
    by_tier: dict[str, list[float]] = {}
    for t, b in zip(lk["tier"], lk["bytes"], strict=True):
        if b > 0:
            by_tier.setdefault(str(t), []).append(float(b))
    assert sorted(by_tier) == ["access down", "access up", "leaf_spine down",
                               "leaf_spine up"]
    assert [len(by_tier[k]) for k in sorted(by_tier)] == [16, 16, 4, 4]
    for rows in by_tier.values():
        assert rows == [expect] * len(rows)
    ring = api.simulate(RING)
    rl = ring.raw.tables["links"]
    ring_up = [float(b) for b, t in zip(rl["bytes"], rl["tier"], strict=True)
               if t == "access up"]
    assert len(ring_up) == 16
    # the ring's payload is 2(n-1)/n x S (its frames' headers and ACKs on top)
    assert min(ring_up) >= 2 * 15 / 16 * S
    assert min(ring_up) / expect == pytest.approx(2 * 15 / 16, rel=0.02)
    sh = res.summary["packet"]["sharp"]
    assert sh["trees_per_switch"] == {"leaf-s00": 1, "leaf-s01": 1, "leaf-s02": 1,
                                      "leaf-s03": 1, "spine-00": 1}
    assert max(sh["trees_per_switch"].values()) <= 511  # quantum2's sharp_trees default
    assert max(sh["operations_per_switch"].values()) <= 64  # one per port


def test_sharp_beats_the_ring_at_packet_level_as_at_flow_level():
    """The gain's direction and size: the ring moves 2(n-1)/n = 1.875 x S over each
    host link, SHARP S; at flow level the ring takes 2.19x as long here (1.875 and the
    ring's 30 steps' latency); packet by packet the ring is no faster than at flow level
    and SHARP slower by at most its headers, ACKs, fill and path latency (the bound of
    the test above), so the packet gain is the flow gain divided by at most that."""
    t = {}
    for sim in ("packet", "flow"):
        for name, path in (("sharp", SHARP), ("ring", RING)):
            t[sim, name] = api.simulate(path, sim=sim).summary["collectives"][0]["time_ns"]
    gain_flow = t["flow", "ring"] / t["flow", "sharp"]
    gain_pkt = t["packet", "ring"] / t["packet", "sharp"]
    assert gain_flow > 2 * 15 / 16 and gain_pkt > 1.8
    assert t["packet", "ring"] >= t["flow", "ring"]
    per_frame = NIC.header_bytes + NIC.wire_overhead_bytes + NIC.ack_bytes + \
        NIC.wire_overhead_bytes
    over = (1 + per_frame / NIC.mtu_payload_bytes) * (1 + 3 / 32) + \
        _tree_path_ns(SHARP) / t["flow", "sharp"] + 0.005
    assert gain_flow / over <= gain_pkt <= gain_flow


def test_several_gpus_per_host_reduce_their_slices_on_each_rail(tmp_path):
    """8 hosts x 4 GPUs on 4 rails (NCCL's CollNet): each GPU's NIC carries its S/4
    slice once up and once down its rail's tree; the NVLink phases run inside the host;
    repeats and a start delay run in order; every byte is delivered once."""
    def change(doc):
        doc["spec"]["hosts"] = {"count": 8, "gpus_per_host": 4, "nics_per_host": 4,
                                "port_gbps": 400}
        doc["spec"]["topology"].update(rail_optimized=True,
                                       leaf={"model": "quantum2", "down_ports": 8,
                                             "up_ports": 8})
        doc["collectives"] = [{"name": "ar", "op": "allreduce", "algorithm": "sharp",
                               "size_bytes": "4MiB", "gpus": 32, "repeat": 2,
                               "start_ms": 0.01}]
    res = api.simulate(_scenario(tmp_path, change))
    colls = res.summary["collectives"]
    assert [c["collective"] for c in colls] == ["ar#0", "ar#1"]
    assert colls[0]["start_ns"] == pytest.approx(10_000)
    assert colls[1]["start_ns"] == pytest.approx(colls[0]["end_ns"])
    slice_ = (4 << 20) // 4
    frames = slice_ // NIC.mtu_payload_bytes
    expect = 2 * (slice_ + frames * (NIC.header_bytes + NIC.ack_bytes))  # 2 repeats
    lk = res.raw.tables["links"]
    acc = [float(b) for b, t in zip(lk["bytes"], lk["tier"], strict=True)
           if t in ("access up", "access down")]
    assert len(acc) == 64 and acc == [expect] * 64
    sh = res.summary["packet"]["sharp"]
    assert len(sh["operations"]) == 2 and sh["aggregation_units"] >= 5
    assert sum(sh["operations_per_switch"].values()) == sh["aggregation_units"]
    assert res.summary["finished"] and res.summary["packet"]["drops"] == 0


def test_a_sharp_packet_run_is_deterministic(tmp_path):
    path = _scenario(tmp_path, lambda d: d["collectives"][0].update(size_bytes="1MiB"))
    a, b = api.simulate(path), api.simulate(path)
    assert a.summary["makespan_ns"] == b.summary["makespan_ns"]
    assert list(a.raw.tables["links"]["bytes"]) == list(b.raw.tables["links"]["bytes"])


def _small_jobs(limit_field=None, limit=None):
    """Two 64-GPU jobs (TP 8 x DP 8) of a tiny model on the job example's fabric, at
    packet level."""
    def change(doc):
        doc["sim"] = "packet"
        if limit_field:
            doc["spec"]["switch_models"]["quantum2"][limit_field] = limit
        job = doc["jobs"][0]
        job.update(gpus=64, parallel={"dp": 8, "tp": 8}, buckets=1)
        job["model"] = {"params": 4e6, "layers": 2, "hidden": 256, "seq_len": 64}
        job["compute"] = {"fwd_ms_per_layer": 0.001}
        doc["jobs"] = [job, {**copy.deepcopy(job), "name": "llm-b"}]
    return change


def test_sharp_jobs_run_at_packet_level_and_one_beyond_a_limit_runs_the_ring(tmp_path):
    """Packet level counts the switches' SHARP limits as the flow level does: within
    them both jobs' DP AllReduces are reduced in the switches (each host link carries
    each GPU's gradients once each way); with spines that hold 6 trees the second job
    runs NCCL's ring and the results name the switch and the limit."""
    ok = api.simulate(_scenario(tmp_path, _small_jobs(), base=JOB, name="ok.yaml"))
    algos = {c["algorithm"] for c in ok.summary["collectives"] if " dp " in c["collective"]}
    assert algos == {"sharp"} and "notes" not in ok.summary
    assert len(ok.summary["packet"]["sharp"]["operations"]) == 2  # one bucket per job
    # TP stays in the host: a host link carries its GPU's gradients (4e6 x 2 B / TP 8)
    # once each way, in 512 KiB chunks of MTU frames, and one ACK per frame back
    grad, chunk = int(4e6 * 2 / 8), 512 << 10
    sizes = [min(chunk, grad - i) for i in range(0, grad, chunk)]
    frames = sum(-(-x // NIC.mtu_payload_bytes) for x in sizes)
    lk = ok.raw.tables["links"]
    acc = [float(b) for b, t in zip(lk["bytes"], lk["tier"], strict=True)
           if t in ("access up", "access down") and b > 0]
    assert len(acc) == 2 * 128
    assert set(acc) == {grad + frames * (NIC.header_bytes + NIC.ack_bytes)}
    res = api.simulate(_scenario(tmp_path, _small_jobs("sharp_trees", 6), base=JOB))
    assert dp_algorithms(res) == {"llm-7b": {"sharp"}, "llm-b": {"ring"}}
    notes = res.summary["notes"]
    assert len(notes) == 1 and notes[0].startswith("jobs[1] (llm-b)")
    assert "switch spine-0" in notes[0] and "sharp_trees is 6" in notes[0]
    sh = res.summary["packet"]["sharp"]
    assert max(sh["trees_per_switch"].values()) <= 6


def test_a_collective_beyond_a_switch_limit_is_refused_at_packet_level(tmp_path, cli):
    """As at flow level: two SHARP AllReduces on switches that run one operation at
    once; one line naming the limit's field and the switch, exit 2."""
    def change(doc):
        doc["spec"]["switch_models"]["quantum2"]["sharp_active_ops"] = 1
        doc["collectives"] = [
            {"op": "allreduce", "algorithm": "sharp", "size_bytes": "1MiB", "gpus": 8},
            {"op": "allreduce", "algorithm": "sharp", "size_bytes": "1MiB", "gpus": 8}]
    out = tmp_path / "out"
    line = one_line_exit_2(cli("simulate", _scenario(tmp_path, change), "--out", out))
    assert "switch_models.quantum2.sharp_active_ops:" in line and "at most 1" in line
    assert "switch " in line and not out.exists()


def _roce(doc):
    doc["spec"].pop("transport")
    doc["spec"].pop("infiniband")


def _not_capable(doc):
    doc["spec"]["switch_models"]["quantum2"]["sharp"] = False


def _analytic(doc):
    doc["sim"] = "analytic"


def _tiny_chunk(doc):
    doc["packet"] = {"sharp": {"chunk_bytes": 100}}


@pytest.mark.parametrize("change, field, words", [
    (_roce, "collectives[0].algorithm", "InfiniBand"),
    (_not_capable, "switch_models.quantum2.sharp", "does not aggregate"),
    (_analytic, "collectives[0].algorithm", "sim: packet"),
    (_tiny_chunk, "packet.sharp.chunk_bytes", "256"),
], ids=["roce", "switch-does-not-aggregate", "analytic", "chunk"])
def test_bad_sharp_packet_input_is_one_line_exit_2(tmp_path, cli, change, field, words):
    out = tmp_path / "out"
    line = one_line_exit_2(cli("simulate", _scenario(tmp_path, change), "--out", out))
    assert f"{field}:" in line and words in line, line
    assert not out.exists()


def test_compare_shows_the_host_link_bytes_sharp_saves():
    """``aifabric compare`` of the ring and SHARP at packet level has a row with the
    most bytes a host link carried: S plus headers and ACKs with SHARP, 2(n-1)/n of
    it with the ring."""
    from aifabric.report.markdown import comparison_rows

    runs = [api.simulate(RING).raw, api.simulate(SHARP).raw]
    rows = {label: (vals, diff) for label, vals, diff, _ in comparison_rows(runs)}
    vals, diff = rows["access up: max bytes per host link"]
    frames = S // NIC.mtu_payload_bytes
    sharp = S + frames * (NIC.header_bytes + NIC.ack_bytes)
    assert vals[1] == f"{sharp / 2**20:.2f} MiB"
    assert diff.startswith("-4")  # about 1 - 1 / 1.875 = 47% less


def test_the_event_estimate_counts_the_chunks_of_every_tree_edge():
    """The packet run's estimate (what --max-events refuses) counts every tree edge's
    chunks, not the flow level's one-arc placeholders: within 15% of the events run."""
    from aifabric.errors import SpecError

    res = api.simulate(SHARP)
    pk = res.summary["packet"]
    assert pk["estimated_events"] == pytest.approx(pk["events"], rel=0.15)
    with pytest.raises(SpecError, match="--max-events"):
        api.simulate(SHARP, max_events=pk["events"] / 2)


def test_a_unit_slower_than_its_ports_is_the_bottleneck(tmp_path):
    """``packet.sharp.aggregation_gbps``: a unit that reduces at one port's rate (400G)
    takes every stream through it on its internal link: a leaf's unit receives its 4
    hosts' chunks and the root's result (5 x S) and sends 5 x S, so the AllReduce takes
    at least 5 x S / 400G, where a unit at line rate on every port takes S / 400G plus
    the fill."""
    def slow(doc):
        doc["collectives"][0]["size_bytes"] = "4MiB"
        doc["packet"] = {"sharp": {"aggregation_gbps": 400}}

    def fast(doc):
        doc["collectives"][0]["size_bytes"] = "4MiB"
    s = 4 << 20
    t_slow = api.simulate(_scenario(tmp_path, slow)).summary["collectives"][0]["time_ns"]
    res = api.simulate(_scenario(tmp_path, fast, name="f.yaml"))
    t_fast = res.summary["collectives"][0]["time_ns"]
    assert t_slow >= 5 * s * 8 / 400
    assert t_fast < 0.3 * t_slow
    assert res.summary["packet"]["sharp"]["unit_gbps"]["spine-00/sharp"] == 64 * 400
