"""InfiniBand at packet level (issue 27 item 3): credit-based flow control per VL (no
drops, no PFC, a buffer never above its credits), congestion spreading per VL and no
head-of-line blocking across VLs, FECN/BECN congestion control, per-packet adaptive
routing with the receiver's reordering; bad credit and weight settings exit 2."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.sim.packet import layout as L
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.ibmodel import IbLink, credit_waits
from aifabric.sim.packet.sim import Topology
from tests.conftest import one_line_exit_2

MTU = 4096
#: 400G links, 100 ns of cable each way
GBPS, DELAY = 400, 100.0


def _cfg(cc: str = "none", ibcc: dict | None = None, **kw) -> PacketConfig:
    return PacketConfig.model_validate({"cc": {"algorithm": cc, "ibcc": ibcc or {}},
                                        "pfc": {"enabled": False},
                                        "ecn": {"enabled": False},
                                        "nic": {"mtu_payload_bytes": MTU}, **kw})


def _invariants(sim, sizes: list[int]) -> None:
    """No drop, no PFC frame, every byte delivered once, every buffer within its
    credits, every credit back at the end."""
    net = sim.net
    c = sim.counters()
    assert c["drops"] == 0 and c["pfc_frames"] == 0 and c["lossless_drops"] == 0
    assert c["delivered_bytes"] == sum(sizes) and c["duplicate_bytes"] == 0
    assert c["retx_bytes"] == 0
    vls = net.tcs
    peak = net.PT[:, L.T_INGPEAK][:, vls]
    lim = net.PT[:, L.T_CLIM][:, vls]
    assert (peak <= lim).all() and (peak > 0).any()
    assert (net.PT[:, L.T_ING][:, vls] == 0).all()  # every buffer drained
    # every credit is back, or on its way in a flow-control packet still in the heap
    cred = net.PT[:, L.T_CRED].copy()
    ht = net.HT[:int(net.G[L.HSIZE])]
    for p, b in ht[ht[:, 2] == L.E_IBCRED][:, 3:5].tolist():
        cred[p, b & 15] += b >> 4
    assert (cred[:, vls] == lim).all()


def test_two_to_one_incast_on_an_idle_fabric_takes_the_closed_form_time():
    """Two 400G hosts send 1 MB each to a third through one switch: the switch's port to
    the receiver is never idle once the first packet is there, so the last byte lands
    at (first packet's serialization + propagation) + every packet's wire time on the
    bottleneck + propagation; within 1%. No drop, no PFC frame, buffers within credits."""
    t = Topology()
    a, b, c = t.host("a"), t.host("b"), t.host("c")
    s = t.switch("s")
    for h in (a, b, c):
        t.link(h, s, GBPS, DELAY)
    cfg = _cfg()
    sim = t.sim(cfg, ib=IbLink())
    size = 1_000_000
    q1 = sim.add_flow(t.route(a, s, c), size)
    q2 = sim.add_flow(t.route(b, s, c), size)
    sim.run()
    wire = cfg.nic.header_bytes + cfg.nic.wire_overhead_bytes
    npk = math.ceil(size / MTU)
    frames = 2 * (size + npk * wire)  # bytes on the bottleneck's wire
    ps_b = 8000 / GBPS
    first = (MTU + wire) * ps_b + DELAY * 1000
    closed = first + frames * ps_b + DELAY * 1000
    last = max(q1.done_ps, q2.done_ps)
    assert last == pytest.approx(closed, rel=0.01)
    _invariants(sim, [size, size])
    # the senders waited for credit (the bottleneck drains half their rate each)
    cw = credit_waits(sim)
    assert set(cw["port"]) == {"a -> s", "b -> s"}
    assert (cw["blocked_ratio"] > 0.3).all()


def test_an_hca_draining_slower_than_the_link_backpressures_by_credits():
    """The receiving host takes 200 Gbit/s (``nic.rx_gbps``) from a 400G link: its
    receive buffer's credits hold the switch port back (no drop, no PFC), and the 2-to-1
    incast ends at 2 MB / 200 Gbit/s (within 1%)."""
    t = Topology()
    a, b, c = t.host("a"), t.host("b"), t.host("c")
    s = t.switch("s")
    for h in (a, b, c):
        t.link(h, s, GBPS, DELAY)
    sim = t.sim(_cfg(nic={"mtu_payload_bytes": MTU, "rx_gbps": 200}), ib=IbLink())
    qs = [sim.add_flow(t.route(x, s, c), 1_000_000) for x in (a, b)]
    sim.run()
    _invariants(sim, [1_000_000] * 2)
    assert max(q.done_ps for q in qs) == pytest.approx(2e6 * 8 / 200e9 * 1e12, rel=0.01)
    cw = credit_waits(sim)
    i = list(cw["port"]).index("s -> c")  # the HCA's buffer filled: the switch waited
    assert cw["credit_blocked_ns"][i] > 0
    assert 0 < cw["peak_buffer_bytes"][i] <= cw["buffer_bytes"][i]


def victim_topology() -> tuple:
    """Hosts a, b, v -> s1 -> s2 -> c, w: c's link 100G (the incast's bottleneck), v's
    150G (the victim's own limit: s1 -> s2 has room for it and the incast's 100G).
    Returns (topology, incast routes a/b -> c, victim route v -> w)."""
    t = Topology()
    a, b, v = t.host("a"), t.host("b"), t.host("v")
    c, w = t.host("c"), t.host("w")
    s1, s2 = t.switch("s1"), t.switch("s2")
    for h in (a, b):
        t.link(h, s1, GBPS, DELAY)
    t.link(v, s1, 150, DELAY)
    t.link(s1, s2, GBPS, DELAY)
    t.link(s2, c, 100, DELAY)
    t.link(s2, w, GBPS, DELAY)
    return t, [t.route(x, s1, s2, c) for x in (a, b)], t.route(v, s1, s2, w)


def _victim_net(victim_sl: int) -> tuple:
    """a, b -> c (SL 0) through s1 -> s2; victim v -> w (SL ``victim_sl``; -1: none)
    over the same s1 -> s2 link (:func:`victim_topology`). Returns (sim, victim QP,
    incast QPs, topology)."""
    t, incast, victim = victim_topology()
    ib = IbLink(sls=[0, 1], credits=[256] * 8)  # 16 KiB per VL
    sim = t.sim(_cfg(), ib=ib)
    inc = [sim.add_flow(r, 1_000_000, sl=0) for r in incast]
    vic = None
    if victim_sl >= 0:
        vic = sim.add_flow(victim, 1_000_000, sl=victim_sl)
    return sim, vic, inc, t


def _victim_alone() -> int:
    t = Topology()
    v, w = t.host("v"), t.host("w")
    s1, s2 = t.switch("s1"), t.switch("s2")
    t.link(v, s1, 150, DELAY)
    t.link(s1, s2, GBPS, DELAY)
    t.link(s2, w, GBPS, DELAY)
    sim = t.sim(_cfg(), ib=IbLink(sls=[0, 1], credits=[256] * 8))
    q = sim.add_flow(t.route(v, s1, s2, w), 1_000_000, sl=1)
    sim.run()
    return q.done_ps - q.start_ps


def test_congestion_spreads_upstream_on_its_vl_and_a_victim_on_another_vl_is_unaffected():
    """The incast's VL (0) runs out of credit upstream of its bottleneck (s1 -> s2 and the
    senders' ports: congestion spreading); the victim on SL 1 = VL 1 crosses the same
    s1 -> s2 link without waiting for credit and finishes as fast as alone (within
    2%). Put on VL 0 instead, the same victim waits behind the incast's packets
    (head-of-line blocking) and takes at least 1.5x as long."""
    alone = _victim_alone()
    sim, vic, inc, _ = _victim_net(1)
    sim.run()
    _invariants(sim, [1_000_000] * 3)
    cw = credit_waits(sim)
    rows = {(str(p), int(v)): ns for p, v, ns in
            zip(cw["port"], cw["vl"], cw["credit_blocked_ns"], strict=True)}
    assert rows.get(("s1 -> s2", 0), 0) > 1000  # spread upstream of s2 -> c, on VL 0
    assert rows.get(("a -> s1", 0), 0) > 1000 and rows.get(("b -> s1", 0), 0) > 1000
    # VL 1 never waits for credit on the shared link; the victim's own port at most for
    # a packet's collision (< 0.1% of its time)
    assert ("s1 -> s2", 1) not in rows
    assert rows.get(("v -> s1", 1), 0) < 1e-3 * (vic.done_ps - vic.start_ps) / 1000
    assert vic.done_ps - vic.start_ps == pytest.approx(alone, rel=0.02)
    assert all(q.done_ps > 0 for q in inc)
    # the same victim on the incast's VL: blocked behind it
    sim0, vic0, _, _ = _victim_net(0)
    sim0.run()
    _invariants(sim0, [1_000_000] * 3)
    assert vic0.done_ps - vic0.start_ps > 1.5 * alone
    cw0 = credit_waits(sim0)
    assert "v -> s1" in set(cw0["port"].tolist())  # spread to the victim's own port


def test_vl_arbitration_weights_share_a_link():
    """Two VLs backlogged on one 400G link with weights 3:1 share it about 3:1 (each
    turn sends up to its weight in 64-byte units, the last packet of a turn completes)."""
    t = Topology()
    a, b, c, d = t.host("a"), t.host("b"), t.host("c"), t.host("d")
    s1, s2 = t.switch("s1"), t.switch("s2")
    t.link(a, s1, GBPS, DELAY)
    t.link(b, s1, GBPS, DELAY)
    t.link(s1, s2, GBPS, DELAY)
    t.link(s2, c, GBPS, DELAY)
    t.link(s2, d, GBPS, DELAY)
    w = [0] * 8
    w[0], w[1] = 192, 64  # 12 KiB and 4 KiB turns: three MTU packets to one
    sim = t.sim(_cfg(), ib=IbLink(sls=[0, 1], weights=w))
    q0 = sim.add_flow(t.route(a, s1, s2, c), 2_000_000, sl=0)
    q1 = sim.add_flow(t.route(b, s1, s2, d), 2_000_000, sl=1)
    sim.run()
    _invariants(sim, [2_000_000] * 2)
    # while both are backlogged, VL 0 moves ~3x the bytes: it finishes first, at about
    # 2 MB / (3/4 of the link)
    assert q0.done_ps < q1.done_ps
    t0 = q0.done_ps - q0.start_ps
    assert t0 == pytest.approx(2_000_000 * 8 / (0.75 * GBPS * 1e9) * 1e12, rel=0.05)


def test_fecn_becn_lowers_the_incast_senders_rate():
    """With ibcc the switch marks FECN on the incast's queue, the receiver returns BECNs,
    each sender's CCTI rises and its rate falls below line rate; without congestion
    control no mark and line rate throughout. Both deliver every byte, no drop."""
    rates = {}
    for cc in ("none", "ibcc"):
        t = Topology()
        a, b, c = t.host("a"), t.host("b"), t.host("c")
        s = t.switch("s")
        for h in (a, b, c):
            t.link(h, s, GBPS, DELAY)
        sim = t.sim(_cfg(cc, sample_us=1), ib=IbLink())
        qs = [sim.add_flow(t.route(x, s, c), 2_000_000) for x in (a, b)]
        sim.run()
        _invariants(sim, [2_000_000] * 2)
        series = sim.qp_series()
        rates[cc] = float(series["rate_gbps"].min())
        c_ = sim.counters()
        if cc == "ibcc":
            # FECN marks (once per packet), one BECN back for each
            assert c_["ecn_marks"] > 0 and c_["cnps"] == c_["ecn_marks"]
            assert all(q.cc.becns > 0 for q in qs)
        else:
            assert c_["ecn_marks"] == 0 and c_["cnps"] == 0
    assert rates["none"] == pytest.approx(GBPS)
    assert rates["ibcc"] < 0.9 * GBPS


def test_ccti_timer_brings_the_rate_back():
    """A BECN raises CCTI by ccti_increase and the rate to the CCT's entry; each CCTI timer
    expiry lowers it by one until line rate again."""
    t = Topology()
    a, c = t.host("a"), t.host("c")
    s = t.switch("s")
    t.link(a, s, GBPS, DELAY)
    t.link(c, s, GBPS, DELAY)
    cfg = _cfg("ibcc", {"ccti_increase": 8, "ccti_timer": 1})
    sim = t.sim(cfg, ib=IbLink())
    q = sim.add_flow(t.route(a, s, c), 10_000_000)
    sim.ev.at(1_000_000, lambda _: q.cc.on_cnp(sim.ev.now), None)
    seen = {}
    sim.ev.at(1_000_001, lambda _: seen.update(r=q.cc.rate, i=q.cc.ccti), None)
    sim.ev.at(1_000_000 + 8 * 1_024_000 + 10, lambda _: seen.update(r2=q.cc.rate), None)
    sim.run()
    assert seen["i"] == 8
    assert seen["r"] == pytest.approx(GBPS * 1e9 / (1 + 8 / 64))
    assert seen["r2"] == pytest.approx(GBPS * 1e9)


def _ft4_ib(adaptive: bool) -> dict:
    return {"name": "ib-perm",
            "spec": {"name": "ft4-ib", "transport": "infiniband",
                     "infiniband": {"speed": "ndr", "routing_engine": "minhop",
                                    "adaptive_routing": adaptive},
                     "hosts": {"count": 16, "gpus_per_host": 1, "nics_per_host": 1,
                               "port_gbps": 400},
                     "switch_models": {"k4": {"ports": 4, "port_gbps": 400}},
                     "topology": {"family": "fat_tree", "k": 4, "switch": {"model": "k4"},
                                  "rail_optimized": False}},
            "routing": {"qps_per_connection": 1},
            "traffic": [{"pattern": "permutation", "gpus": "all", "size_bytes": 400_000}],
            "sim": "packet", "packet": {"nic": {"mtu_payload_bytes": MTU}}}


def _simulate(doc: dict):
    from aifabric import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario

    scn = scenario_from_dict(doc, model=SimScenario)
    f = build_fabric(scn.spec)
    return f, simulate(scn, f)


def test_adaptive_routing_spreads_a_permutation_over_more_ports_with_reordering_reported():
    """The same permutation on an NDR fat-tree: with the subnet manager's tables each
    destination's packets take one port per switch; with per-packet adaptive routing the
    switches spread them over the least-hop ports (queue and credit state): more
    switch-to-switch ports carry bytes, the receivers see out-of-order packets and the
    reorder table reports them. Both deliver every byte without a drop."""
    used = {}
    for ar in (False, True):
        _, res = _simulate(_ft4_ib(ar))
        pk = res.summary["packet"]
        assert pk["drops"] == 0 and pk["pfc_frames"] == 0
        assert pk["delivered_bytes"] == 16 * 400_000
        assert pk["infiniband"]["adaptive_routing"] is ar
        assert pk["infiniband"]["max_buffer_fill"] <= 1.0
        cw = res.tables["packet_credit_waits"]
        assert (cw["peak_buffer_bytes"] <= cw["buffer_bytes"]).all()
        links = res.tables["links"]
        tier = links["tier"].astype(str)
        moved = np.asarray(links["bytes"], dtype=float) > 0
        used[ar] = int((moved & ~np.char.startswith(tier, "access")).sum())
        if ar:
            assert pk["reorder"]["receiver"] == "ooo"
            assert pk["reorder"]["ooo_packets"] > 0
            assert "packet_reorder" in res.tables
    assert used[True] > used[False]


def test_ib_json_summary_reports_credit_waits_per_vl(cli, tmp_path):
    """The incast example on InfiniBand: exit 0, no PFC frame, no drop; the summary's
    infiniband block has FECN marks, BECNs and the credit-blocked time per VL; --out
    writes packet_credit_waits.csv like packet_pauses."""
    import json
    from pathlib import Path

    ex = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
    out = tmp_path / "rep"
    r = cli("simulate", ex / "incast-infiniband.yaml", "--json", "--out", out)
    assert r.code == 0, r.err
    d = json.loads(r.out)
    pk = d["packet"]
    assert pk["drops"] == 0 and pk["pfc_frames"] == 0 and pk["paused_queues"] == 0
    ib = pk["infiniband"]
    assert ib["fecn_marks"] > 0 and ib["becns"] > 0 and ib["cc"] == "ibcc"
    assert ib["credit_blocked_ns_by_vl"]["0"] > 0 and 0 < ib["max_buffer_fill"] <= 1
    assert pk["delivered_bytes"] == 8 * 2_000_000
    assert (out / "packet_credit_waits.csv").is_file()


@pytest.mark.parametrize(("ib", "packet", "where"), [
    ("{vl_credits: [10, 512, 512, 512, 512, 512, 512, 512]}", "{}",
     "infiniband.vl_credits.0"),
    ("{vl_weights: [0, 64, 64, 64, 64, 64, 64, 64]}", "{}", "infiniband.vl_weights.0"),
    ("{vl_weights: [300, 64, 64, 64, 64, 64, 64, 64]}", "{}", "infiniband.vl_weights.0"),
    ("{vl_credits: [0, 512, 512, 512, 512, 512, 512, 512]}", "{}",
     "infiniband.vl_credits.0"),
    ("{}", "{cc: {algorithm: dcqcn}}", "packet.cc.algorithm"),
    ("{}", "{cc: {algorithm: ibcc, ibcc: {threshold: 16}}}", "threshold"),
    ("{}", "{switch: {trim: {enabled: true}}, pfc: {enabled: false}}",
     "packet.switch.trim.enabled"),
])
def test_bad_ib_packet_settings_exit_2_with_one_line(cli, tmp_path, ib, packet, where):
    """Credits that cannot hold one packet, a zero weight on the VL in use, values out
    of range, a RoCE congestion control, trimming: exit 2, one line naming the field,
    nothing written."""
    assert where in refused_ib(cli, tmp_path, ib, packet)


def refused_ib(cli, tmp_path, ib: str, packet: str) -> str:
    """``simulate --out`` of the k=4 IB fabric with ``infiniband`` settings ``ib`` and
    ``packet`` settings (YAML texts): the one line of its refusal (exit 2), nothing
    written."""
    doc = _ft4_ib(False)
    doc["spec"]["infiniband"].update(yaml.safe_load(ib))
    doc["packet"] = yaml.safe_load(packet)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "rep"
    line = one_line_exit_2(cli("simulate", p, "--out", out))
    assert not out.exists()
    return line


def test_an_sl_outside_the_run_is_refused():
    t = Topology()
    a, c = t.host("a"), t.host("c")
    s = t.switch("s")
    t.link(a, s, GBPS, DELAY)
    t.link(c, s, GBPS, DELAY)
    sim = t.sim(_cfg(), ib=IbLink())
    with pytest.raises(SpecError, match="SL 3"):
        sim.add_flow(t.route(a, s, c), 1000, sl=3)


def _job_doc(ib_sl: dict | None) -> dict:
    doc = _ft4_ib(False)
    doc["traffic"] = [{"pattern": "incast", "senders": "8:12", "to": "host-s03-h001-gpu0",
                       "size_bytes": 200_000}]
    doc["jobs"] = [{"name": "train", "gpus": 4, "placement": "pack",
                    "parallel": {"dp": 4, "tp": 1, "pp": 1},
                    "model": {"params": 2e6, "layers": 2, "hidden": 256, "seq_len": 128},
                    "iterations": 1}]
    if ib_sl is not None:
        doc["packet"]["ib_sl"] = ib_sl
    return doc


def test_a_job_runs_on_its_own_sl_and_vl():
    """``packet.ib_sl`` puts a job's QPs on its SL's VL: the job's bytes go on VL 1, the
    other traffic's on the default SL's VL 0; without it everything is on VL 0. Every
    byte delivered, no drop either way."""
    by_vl, delivered = {}, {}
    for ib_sl in (None, {"train": 1}):
        _, res = _simulate(_job_doc(ib_sl))
        pk = res.summary["packet"]
        assert pk["drops"] == 0 and pk["qps_done"] == pk["qps"]
        by_vl[ib_sl is not None] = pk["infiniband"]["tx_bytes_by_vl"]
        delivered[ib_sl is not None] = pk["delivered_bytes"]
    assert set(by_vl[False]) == {"0"} and by_vl[False]["0"] > 0
    assert set(by_vl[True]) == {"0", "1"} and by_vl[True]["1"] > 0
    # the job (its DP AllReduce's transfers) carries most bytes, the incast 800 KB
    assert by_vl[True]["1"] > by_vl[True]["0"] > 0
    assert delivered[True] == delivered[False]


@pytest.mark.parametrize(("doc", "where"), [
    (lambda: _job_doc({"nojob": 1}), "packet.ib_sl.nojob"),
    (lambda: {**_job_doc({"train": 16})}, "packet.ib_sl.train"),
])
def test_bad_ib_sl_exits_2_with_one_line(cli, tmp_path, doc, where):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(doc(), sort_keys=False))
    r = cli("simulate", p, "--out", tmp_path / "rep")
    assert r.code == 2, r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and where in lines[0], r.err
