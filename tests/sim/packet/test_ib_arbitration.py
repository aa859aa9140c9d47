"""InfiniBand at packet level, the refinements of issue 27: IBTA's VL arbitration with
both tables and LimitOfHighPriority, credits in 64-byte blocks, congestion control per
SL and the switches' Victim_Mask, an SL per collective and traffic entry; bad input
exits 2 with one line."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.sim.packet import layout as L
from aifabric.sim.packet.ibmodel import IbLink, credit_waits, summary
from aifabric.sim.packet.sim import Topology
from tests.sim.packet.test_infiniband import (
    DELAY,
    GBPS,
    MTU,
    _cfg,
    _ft4_ib,
    _invariants,
    _simulate,
    refused_ib,
    victim_topology,
)

HDR = 62  # nic.header_bytes: a data packet is MTU payload + 62 bytes
PKT = MTU + HDR


def _arb_net(ib: IbLink, high_bytes: int = 2_000_000, *, low: bool = True) -> tuple:
    """Two low-priority senders a1, a2 (SL 0 = VL 0, 8 MB each) load s1 -> s2 at twice
    its rate, so VL 0 is backlogged there throughout; b sends ``high_bytes`` on SL 1 =
    VL 1 over the same link from 20 us on (without ``low``: b alone). Every link 400G.
    Returns (sim, b's QP)."""
    t = Topology()
    a1, a2, b = t.host("a1"), t.host("a2"), t.host("b")
    c1, c2, d = t.host("c1"), t.host("c2"), t.host("d")
    s1, s2 = t.switch("s1"), t.switch("s2")
    for h in (a1, a2, b):
        t.link(h, s1, GBPS, DELAY)
    t.link(s1, s2, GBPS, DELAY)
    for h in (c1, c2, d):
        t.link(s2, h, GBPS, DELAY)
    sim = t.sim(_cfg(), ib=ib)
    if low:
        for x, y in ((a1, c1), (a2, c2)):
            sim.add_flow(t.route(x, s1, s2, y), 8_000_000, sl=0)
    q = sim.add_flow(t.route(b, s1, s2, d), high_bytes, start_ns=20_000.0, sl=1)
    sim.run()
    return sim, q


def _ib(**kw) -> IbLink:
    return IbLink(sls=[0, 1], **kw)


def _alone() -> int:
    _, q = _arb_net(_ib(), low=False)
    return q.done_ps - q.start_ps


def test_a_high_priority_vl_keeps_its_latency_under_a_loaded_low_vl():
    """VL 1 in the high-priority table, no limit (255): its 2 MB cross the link that VL 0
    keeps backlogged as fast as on an idle link (within 1%: at most one low packet in
    service at each hop). With both VLs in the low table at equal weights it gets half
    the link: about twice as long. Every byte delivered, buffers within credits."""
    alone = _alone()
    sim, q = _arb_net(_ib(vlarb_high=[(1, 255)], vlarb_low=[(0, 64)], high_limit=255))
    _invariants(sim, [8_000_000, 8_000_000, 2_000_000])
    assert q.done_ps - q.start_ps == pytest.approx(alone, rel=0.01)
    sim_rr, q_rr = _arb_net(_ib())  # low table only, 64 each: round robin
    _invariants(sim_rr, [8_000_000, 8_000_000, 2_000_000])
    assert (q_rr.done_ps - q_rr.start_ps) / alone == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("limit", [0, 1, 4])
def test_the_high_limit_bounds_the_high_priority_vl(limit: int):
    """LimitOfHighPriority L (4,096-byte units): the high table sends packets until it
    has sent L x 4,096 bytes (the packet that crosses completes; L = 0: one packet),
    then the low table sends one. So of every k + 1 packets on the loaded link, k =
    max(1, ceil(L x 4096 / packet)) are the high VL's: its 2 MB take alone x (k+1)/k
    (within 3%)."""
    alone = _alone()
    sim, q = _arb_net(_ib(vlarb_high=[(1, 255)], vlarb_low=[(0, 64)], high_limit=limit))
    _invariants(sim, [8_000_000, 8_000_000, 2_000_000])
    k = max(1, -(-limit * 4096 // PKT))
    assert (q.done_ps - q.start_ps) / alone == pytest.approx((k + 1) / k, rel=0.03)


@pytest.mark.parametrize("low", [[(0, 192), (1, 64)], [(0, 64), (1, 64), (0, 64), (0, 64)]])
def test_the_low_table_shares_by_its_weights(low):
    """Low-priority table entries share a backlogged link by their weights: VL 0 with
    192 (or three entries of 64) against VL 1 with 64 gets three packets to one, so the
    VL 1 flow takes 4x as long as alone (within 5%)."""
    alone = _alone()
    sim, q = _arb_net(_ib(vlarb_low=low))
    _invariants(sim, [8_000_000, 8_000_000, 2_000_000])
    assert (q.done_ps - q.start_ps) / alone == pytest.approx(4.0, rel=0.05)


def test_credits_are_counted_in_64_byte_blocks():
    """A packet of 2,062 bytes (2,000 payload + headers) takes 33 blocks (2,112 bytes)
    of credit. A VL buffer of C credits then holds floor(C / 33) such packets, not
    floor(C x 64 / 2,062): with C = 1,354 the receive buffer of the congested ingress
    peaks at 41 packets (byte counting would have let 42 in). Every credit comes back
    in whole blocks."""
    mtu = 2000
    pkt = mtu + HDR
    blocks = -(-pkt // 64)
    c = 1354
    assert c // blocks == 41 and c * 64 // pkt == 42
    t = Topology()
    a, b, r = t.host("a"), t.host("b"), t.host("r")
    s = t.switch("s")
    t.link(a, s, GBPS, DELAY)
    t.link(b, s, GBPS, DELAY)
    t.link(s, r, 100, DELAY)  # the bottleneck: s's ingress buffers from a and b fill
    sim = t.sim(_cfg(nic={"mtu_payload_bytes": mtu}), ib=IbLink(credits=[c] * 8))
    for x in (a, b):
        sim.add_flow(t.route(x, s, r), 1_000_000)
    sim.run()
    _invariants(sim, [1_000_000] * 2)
    cw = credit_waits(sim)
    i = list(cw["port"]).index("a -> s")
    assert cw["buffer_bytes"][i] == c * 64
    assert cw["peak_buffer_bytes"][i] == 41 * pkt
    assert (sim.net.PT[:, L.T_CRED, 0] % 64 == 0).all()


def _two_sl_incast(ibcc: dict) -> tuple:
    """a (SL 0 = VL 0) and b (SL 1 = VL 1) send 2 MB each to c through one switch:
    an incast on two SLs; ibcc with ``ibcc``'s settings."""
    t = Topology()
    a, b, c = t.host("a"), t.host("b"), t.host("c")
    s = t.switch("s")
    for h in (a, b, c):
        t.link(h, s, GBPS, DELAY)
    sim = t.sim(_cfg("ibcc", ibcc, sample_us=1), ib=_ib())
    qa = sim.add_flow(t.route(a, s, c), 2_000_000, sl=0)
    qb = sim.add_flow(t.route(b, s, c), 2_000_000, sl=1)
    sim.run()
    _invariants(sim, [2_000_000] * 2)
    return sim, qa, qb


def _min_rate(sim, q) -> float:
    ser = sim.qp_series()
    return float(ser["rate_gbps"][ser["qp"] == q.id].min())


def test_congestion_control_per_sl():
    """IBTA's CACongestionSetting per SL: with SL 1 out of the CA's control map
    (``enabled: false``) b's QP gets BECNs but keeps its line rate while a's falls; with
    a larger CCTI increase on SL 1, b's CCTI climbs further than a's on the same
    marks."""
    sim, qa, qb = _two_sl_incast({"sl": {1: {"enabled": False}}})
    assert qa.cc.becns > 0 and qb.cc.becns > 0
    assert summary(sim, sim.net.ib)["becns_by_sl"] == {"0": qa.cc.becns, "1": qb.cc.becns}
    assert _min_rate(sim, qa) < 0.9 * GBPS
    assert _min_rate(sim, qb) == pytest.approx(GBPS)
    sim, qa, qb = _two_sl_incast({"ccti_increase": 1, "sl": {1: {"ccti_increase": 8}}})
    assert qa.cc.becns > 0 and qb.cc.becns > 0
    assert _min_rate(sim, qb) < _min_rate(sim, qa)
    # the same run without per-SL settings treats both alike (the incast is symmetric)
    sim, qa, qb = _two_sl_incast({})
    assert _min_rate(sim, qa) == pytest.approx(_min_rate(sim, qb), rel=0.05)


def test_the_victim_mask_decides_whether_a_victim_port_marks():
    """The incast a, b -> c (VL 0) congests s2 -> c (the root: its link to c is 100G)
    and spreads to s1 -> s2, whose VL 0 then waits for credit (a victim). The victim
    flow v -> w shares s1 -> s2 on VL 0 but not the root. With every port in the
    Victim_Mask (``all``, the default) s1 -> s2 marks it and v's QP gets hundreds of
    BECNs; with ``none`` (OpenSM's default) a port out of credit does not mark, so v gets
    next to none while the incast senders still do (the root has credit and marks)."""
    becns = {}
    for mask in ("all", "none"):
        _, vic, inc, _ = _victim_net_cc(mask)
        becns[mask] = (vic.cc.becns, [q.cc.becns for q in inc])
    assert becns["all"][0] > 100
    # (at most a mark or two from the first microseconds, when s1 -> s2 is itself
    # oversubscribed, 950G into 400G, and still has credit: a root for that moment)
    assert becns["none"][0] <= becns["all"][0] // 50
    assert all(b > 0 for b in becns["none"][1])
    assert sum(becns["none"][1]) < sum(becns["all"][1])  # s1 -> s2 no longer marks them


def _victim_net_cc(mask) -> tuple:
    """:func:`_victim_net`'s fabric, every QP on SL 0, with ibcc and ``victim_mask``."""
    t, incast, victim = victim_topology()
    sim = t.sim(_cfg("ibcc", {"victim_mask": mask}),
                ib=IbLink(sls=[0], credits=[256] * 8))
    inc = [sim.add_flow(r, 1_000_000) for r in incast]
    vic = sim.add_flow(victim, 1_000_000)
    sim.run()
    _invariants(sim, [1_000_000] * 3)
    return sim, vic, inc, t


def _two_colls(sl: dict | None, arb: dict | None = None, traffic: bool = True) -> dict:
    """A 2-tier InfiniBand Clos with one spine (4 leaves of 2 hosts, 400G, one uplink
    each): a 4-to-1 incast (traffic.0) from the hosts of leaves 2 and 3 into host 2
    (leaf 1), and a p2p collective ``side`` between host 0 (leaf 0) and host 3 (leaf 1):
    its way to host 3 comes down the spine's one link to leaf 1, which the incast's VL
    fills and stalls (its receiver drains it at 400G). 128 KiB of credits per VL
    whatever VLs are in use."""
    d = {"name": "two", "spec": {
        "name": "clos-ib", "transport": "infiniband",
        "infiniband": {"speed": "ndr", "vl_credits": [2048] * 8},
        "hosts": {"count": 8, "gpus_per_host": 1, "nics_per_host": 1, "port_gbps": 400},
        "switch_models": {"sw": {"ports": 8, "port_gbps": 400}},
        "topology": {"family": "clos", "rail_optimized": False,
                     "leaf": {"model": "sw", "down_ports": 2, "up_ports": 1},
                     "spine": {"model": "sw"}}},
        "routing": {"qps_per_connection": 1},
        "traffic": [{"pattern": "incast", "senders": "4:8", "to": "host-s01-h000-gpu0",
                     "size_bytes": 1_000_000}] if traffic else [],
        "collectives": [{"name": "side", "op": "p2p", "gpus": [0, 3], "peers": [1, 0],
                         "size_bytes": 1_000_000}],
        "sim": "packet", "packet": {"nic": {"mtu_payload_bytes": MTU}}}
    if sl is not None:
        d["packet"]["ib_sl"] = sl
    if arb is not None:
        d["spec"]["infiniband"]["vl_arbitration"] = arb
    return d


def test_two_collectives_on_their_own_sls_are_isolated():
    """``packet.ib_sl`` by traffic entry and collective name puts each on its own VL.
    On the incast's VL the collective queues behind the incast's stalled packets on the
    shared link (head-of-line blocking): more than 2x its time alone. On a VL of its own
    no stall holds it; at equal low-table weights it gets at least half the link (at
    most 2x alone, less than on the shared VL), and in the high-priority table exactly
    its time alone, and only the incast's VL waits for credit. The incast's bytes stay on
    VL 0 and the collective's go on VL 1."""
    def side(res) -> float:
        c = res.tables["collectives"]
        return float(c["time_ns"][list(c["collective"]).index("side")])

    _, alone = _simulate(_two_colls(None, traffic=False))
    t = side(alone)
    _, shared = _simulate(_two_colls({"traffic.0": 0, "side": 0}))
    _, own = _simulate(_two_colls({"traffic.0": 0, "side": 1}))
    _, high = _simulate(_two_colls({"traffic.0": 0, "side": 1},
                                   {"high": [{"vl": 1, "weight": 255}], "high_limit": 255}))
    for res in (shared, own, high):
        pk = res.summary["packet"]
        assert pk["drops"] == 0 and pk["qps_done"] == pk["qps"]
        assert pk["delivered_bytes"] == 4 * 1_000_000 + 2 * 1_000_000
    assert side(shared) > 2 * t
    assert t < side(own) <= 2 * t and side(own) < side(shared)
    assert side(high) == pytest.approx(t, rel=0.01)
    assert set(shared.summary["packet"]["infiniband"]["tx_bytes_by_vl"]) == {"0"}
    by_vl = own.summary["packet"]["infiniband"]["tx_bytes_by_vl"]
    assert set(by_vl) == {"0", "1"} and by_vl["1"] > 2 * 1_000_000  # 2 hops each way + ACKs
    # in the high-priority table the collective never waits for credit: only the
    # incast's VL does (at equal weights VL 1 backs up on its own half of the link)
    waits = high.tables["packet_credit_waits"]
    assert len(waits["vl"]) > 0 and (waits["vl"] == 0).all()


def test_packet_settings_list_the_infiniband_settings():
    """On InfiniBand the summary's packet.settings are the link's (VLs, credits in
    64-byte blocks, both arbitration tables, the congestion control per SL), not RoCE's
    PFC priorities or ECN thresholds."""
    doc = _ft4_ib(False)
    doc["spec"]["infiniband"]["vl_arbitration"] = {
        "high": [{"vl": 1, "weight": 32}], "low": [{"vl": 0, "weight": 64}],
        "high_limit": 8}
    doc["packet"]["ib_sl"] = {"traffic.0": 1}
    doc["packet"]["cc"] = {"algorithm": "ibcc",
                           "ibcc": {"sl": {1: {"ccti_increase": 4}}, "victim_mask": "none"}}
    _, res = _simulate(doc)
    st = res.summary["packet"]["settings"]
    assert "lossless_priorities" not in st and "pfc" not in st and "ecn" not in st
    assert st["vls"] == [0, 1] and st["data_vls"] == 8
    assert st["vl_arbitration"] == {"high": [[1, 32]], "low": [[0, 64]], "high_limit": 8}
    assert st["credits_64B"] == res.summary["packet"]["infiniband"]["credits"]
    assert st["cc"]["algorithm"] == "ibcc" and st["cc"]["victim_mask"] == "none"
    assert st["cc"]["per_sl"]["1"]["ccti_increase"] == 4
    assert res.summary["packet"]["infiniband"]["vl_arbitration"]["high_limit"] == 8
    assert res.summary["packet"]["infiniband"]["tx_bytes_by_vl"]["1"] > 0


@pytest.mark.parametrize(("ib", "packet", "where"), [
    ("{vl_arbitration: {high: [{vl: 9, weight: 1}]}}", "{}",
     "infiniband.vl_arbitration.high.0.vl"),
    ("{data_vls: 4, vl_arbitration: {low: [{vl: 4, weight: 1}]}}", "{}",
     "infiniband.vl_arbitration.low.0.vl"),
    ("{vl_arbitration: {high: [{vl: 1, weight: 256}]}}", "{}",
     "infiniband.vl_arbitration.high.0.weight"),
    ("{vl_arbitration: {high: [{vl: 1, weight: -1}]}}", "{}",
     "infiniband.vl_arbitration.high.0.weight"),
    ("{vl_arbitration: {high_limit: 256}}", "{}", "infiniband.vl_arbitration.high_limit"),
    ("{vl_weights: [64, 64, 64, 64, 64, 64, 64, 64], vl_arbitration: {low: []}}", "{}",
     "infiniband.vl_arbitration.low"),
    ("{vl_arbitration: {high: [{vl: 1, weight: 9}], low: [{vl: 1, weight: 9}]}}", "{}",
     "infiniband.vl_arbitration"),
    ("{}", "{cc: {algorithm: ibcc, ibcc: {sl: {16: {ccti_increase: 2}}}}}",
     "packet.cc.ibcc"),
    ("{}", "{cc: {algorithm: ibcc, ibcc: {sl: {1: {ccti_increase: 0}}}}}",
     "packet.cc.ibcc.sl.1.ccti_increase"),
    ("{}", "{cc: {algorithm: ibcc, ibcc: {victim_mask: none, victim_ports: [255]}}}",
     "packet.cc.ibcc.victim_ports.0"),
    ("{}", "{cc: {algorithm: ibcc, ibcc: {victim_ports: [1]}}}",
     "packet.cc.ibcc"),
    ("{}", "{cc: {algorithm: ibcc, ibcc: {victim_mask: some}}}",
     "packet.cc.ibcc.victim_mask"),
    ("{}", "{ib_sl: {traffic.0: 16}}", "packet.ib_sl.traffic.0"),
    ("{}", "{ib_sl: {traffic.5: 1}}", "packet.ib_sl.traffic.5"),
    ("{}", "{ib_sl: {nosuch: 1}}", "packet.ib_sl.nosuch"),
])
def test_bad_new_ib_settings_exit_2_with_one_line(cli, tmp_path, ib, packet, where):
    """A VL the ports do not have, a weight or limit out of 0..255, vl_weights with a
    low table, a VL in use no table serves, an SL out of 0..15, a port number out of
    0..254, an ib_sl key naming nothing: exit 2, one line naming the field, nothing
    written."""
    assert where in refused_ib(cli, tmp_path, ib, packet)


def test_victim_ports_are_opensms_port_numbers():
    """``victim_ports`` names switch ports by the numbers OpenSM gives them (the build's
    topology.net, which the lab's ibsim and OpenSM run): each fabric arc leaving a switch
    carries the number the net file lists for that cable. Every port number listed with
    ``victim_mask: none`` marks exactly as ``all``; none listed, as ``none`` (which
    marks far less on this incast: the ports upstream of its receiver are victims,
    their VL out of credit with full queues)."""
    import re

    from aifabric import build_fabric
    from aifabric.configs.infiniband import net_file, node_name
    from aifabric.routing.infiniband import subnet
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.packet.ibmodel import arc_port_numbers
    from aifabric.sim.scenario import SimScenario

    doc = _ft4_ib(False)
    f = build_fabric(scenario_from_dict(doc, model=SimScenario).spec)
    ports = arc_port_numbers(f)
    names = f.nodes.name
    src, dst, _ = f.arcs
    listed = {}  # (switch, port) -> the node at the far end, as the net file says
    node = None
    for line in net_file(subnet(f)).splitlines():
        m = re.match(r'(Switch|Hca)\t\d+ "([^"]+)"', line)
        if m:
            node = m.group(2) if m.group(1) == "Switch" else None
        m = re.match(r'\[(\d+)\]\t"([^"]+)"', line)
        if m and node is not None:
            listed[(node, int(m.group(1)))] = m.group(2)
    sw = np.flatnonzero(ports >= 0)
    assert len(sw) == len(listed) > 0
    for a in sw.tolist():
        far = listed[(node_name(str(names[src[a]])), int(ports[a]))]
        d = int(dst[a])
        if f.nodes.host[d] >= 0:  # an HCA port: the net file names the HCA
            assert far.startswith(node_name(f.device_name(d)) + "-hca"), (far, names[d])
        else:
            assert far == node_name(str(names[d]))

    def marks(cc: dict) -> int:
        d = _ft4_ib(False)
        d["spec"]["infiniband"]["port_buffer_kb"] = 16  # victims upstream: full queues
        d["traffic"] = [{"pattern": "incast", "senders": "0:12",
                         "to": "host-s03-h001-gpu0", "size_bytes": 200_000}]
        d["packet"]["cc"] = {"algorithm": "ibcc", "ibcc": cc}
        _, res = _simulate(d)
        return res.summary["packet"]["infiniband"]["fecn_marks"]

    every = marks({"victim_mask": "none", "victim_ports": list(range(255))})
    assert every == marks({"victim_mask": "all"}) > 0
    assert marks({"victim_mask": "none", "victim_ports": []}) == marks({"victim_mask": "none"})
    assert marks({"victim_mask": "none"}) < every / 2  # the victims' marks


def test_ib_sl_keys_reach_every_stage_they_name():
    """``packet.ib_sl`` keys: a collective's name covers every repetition, an unnamed
    ``collectives[i]`` is ``<op>-<i>``, a traffic entry ``traffic.<i>``; other stages
    keep the default (None); a name of a job and a collective is refused."""
    from aifabric import build_fabric
    from aifabric.errors import SpecError
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.packet.run import stage_sls
    from aifabric.sim.run import compile_workload
    from aifabric.sim.scenario import SimScenario

    doc = _two_colls(None)
    doc["collectives"][0]["repeat"] = 3
    doc["collectives"].append({"op": "p2p", "gpus": [1, 2], "peers": [1, 0],
                               "size_bytes": 100_000})
    scn = scenario_from_dict(doc, model=SimScenario)
    dag = compile_workload(scn, build_fabric(scn.spec)).dag
    sls = stage_sls(dag, {"side": 1, "p2p-1": 2, "traffic.0": 3})
    by_coll = {}
    for s, c in enumerate(dag.stage_coll.tolist()):
        if c >= 0 and dag.xfer_ptr[s + 1] > dag.xfer_ptr[s]:
            by_coll.setdefault(dag.collectives[c].name, set()).add(sls[s])
    assert by_coll == {"side#0": {1}, "side#1": {1}, "side#2": {1}, "p2p-1": {2},
                       "traffic.0 incast": {3}}
    assert set(stage_sls(dag, {"side": 1})) <= {1, None}
    dag.jobs.append("side")
    with pytest.raises(SpecError, match="names both a job and a collective"):
        stage_sls(dag, {"side": 1})
