"""NIC-side spraying (``packet.nic.entropy``: each packet's entropy value hashed by the
switches' real ECMP hash), fast retransmit of the out-of-order receiver, REPS around a
black-holed link, and packet trimming (``packet.switch.trim``). Invariants first: every
byte delivered once, the hash reproduces the routes, one value = the ECMP run, spraying
over paths of unequal delay reorders, the values spread over the paths exactly as the
hash says, trimming never drops a header."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from aifabric.sim.packet import layout as L
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.entropy import EntropyHash, entropy_value, ev_path
from aifabric.sim.packet.lb import fabric_groups, shortest_groups
from aifabric.sim.packet.run import flow_headers, flow_routes, run_packet
from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import ft4_permutation, incast, routed

ALGS = ["oblivious", "round_robin", "reps"]
HDR = (0x0A000001, 0x0A000002, 0xC123)  # source IP, destination IP, UDP source port


def cfg(entropy=None, receiver="ooo", **kw):
    nic = {"receiver": receiver, **kw.pop("nic", {})}
    if entropy is not None:
        nic["entropy"] = entropy
    return PacketConfig.model_validate({"nic": nic, **kw})


def fan(n_paths: int = 4, slow_ns: float = 0):
    """h0, h2 -> a -> n middle switches -> z -> h1; the last middle switch's first link
    ``slow_ns`` longer."""
    t = Topology()
    h0, h1, h2 = t.host("h0"), t.host("h1"), t.host("h2")
    a, z = t.switch("a"), t.switch("z")
    mids = [t.switch(f"m{i}") for i in range(n_paths)]
    t.link(h0, a, 100, 100)
    t.link(h2, a, 100, 100)
    t.link(z, h1, 100, 100)
    for i, m in enumerate(mids):
        t.link(a, m, 100, 100 + (slow_ns if i == n_paths - 1 else 0))
        t.link(m, z, 100, 100)
    return t, [t.route(h0, a, mids[0], z, h1), t.route(h2, a, mids[0], z, h1)], (a, mids)


def run(t, routes, c, sizes=(1_000_000, 1_000_000), headers=None):
    s = t.sim(c)
    for i, (r, n) in enumerate(zip(routes, sizes, strict=False)):
        s.add_flow(r, n, header=None if headers is None else headers[i])
    s.run()
    return s


def frames(size: int, mtu: int = 4096) -> int:
    return -(-size // mtu)


# ---------------------------------------------------------------------- invariants
@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("receiver", ["go_back_n", "ooo"])
def test_every_byte_is_delivered_exactly_once(alg, receiver):
    """Two flows sprayed by their NICs over four paths (one 3 us longer): each receiver
    has every byte in order, the delivered count is the bytes sent, nothing is dropped
    (PFC); with the out-of-order receiver every frame arrives exactly once (one entry of
    the reorder histogram per frame, no duplicate, no retransmission)."""
    t, routes, _ = fan(slow_ns=3000)
    s = run(t, routes, cfg({"algorithm": alg, "values": 16}, receiver))
    c = s.counters()
    assert c["qps_done"] == 2 and c["drops"] == 0
    assert c["delivered_bytes"] == 2_000_000
    for q in s.qps:
        assert q.rcv_nxt == q.size == q.snd_una
    if receiver == "ooo":
        assert c["retx_bytes"] == 0 and c["duplicate_bytes"] == 0 and c["naks"] == 0
        assert int(s.net.QI[:2, L.NQI:L.NQI + L.NRH].sum()) == 2 * frames(1_000_000)


def test_fixed_entropy_never_reorders():
    """The default (one value per QP): every frame on its route, in order."""
    t, routes, _ = fan(slow_ns=3000)
    s = run(t, routes, cfg({"algorithm": "fixed"}))
    assert s.reorder()["ooo_packets"].tolist() == [0, 0]


@pytest.mark.parametrize("alg", ALGS)
def test_spraying_over_paths_of_unequal_delay_reorders(alg):
    """Values over four paths, one 3 us longer: the short paths' frames overtake the
    long one's (at 100G a 4 KB frame is 0.33 us: up to ~9 frames); the out-of-order
    receiver takes them without a NAK; go-back-N pays in NAKs and retransmissions."""
    t, routes, _ = fan(slow_ns=3000)
    ooo = run(t, routes[:1], cfg({"algorithm": alg, "values": 16}), sizes=(1_000_000,))
    r = ooo.reorder()
    assert r["ooo_packets"][0] > 10 and 3 <= r["reorder_max_packets"][0] <= 12
    assert r["naks"][0] == 0
    gbn = run(t, routes[:1], cfg({"algorithm": alg, "values": 16}, "go_back_n"),
              sizes=(1_000_000,))
    g = gbn.reorder()
    assert g["naks"][0] > 0 and g["retx_bytes"][0] > 0


def _line():
    t = Topology()
    h0, h1, h2 = t.host("h0"), t.host("h1"), t.host("h2")
    a, b = t.switch("a"), t.switch("b")
    for u, v in ((h0, a), (h2, a), (a, b), (b, h1)):
        t.link(u, v, 100, 500)
    return t, [t.route(h0, a, b, h1), t.route(h2, a, b, h1)]


@pytest.mark.parametrize("alg", ALGS)
def test_one_path_sprayed_equals_ecmp(alg):
    """One path per destination: whatever the values, an incast of two flows runs exactly
    as with a fixed value (same FCTs, counters, events)."""
    t, routes = _line()
    ecn = {"kmin_bytes": 5000, "kmax_bytes": 50000}
    base = run(t, routes, cfg(None, "ooo", ecn=ecn))
    other = run(t, routes, cfg({"algorithm": alg, "values": 64}, "ooo", ecn=ecn))
    fb, fo = base.fct(), other.fct()
    for k, v in fb.items():
        np.testing.assert_array_equal(v, fo[k], err_msg=k)
    cb, co = base.counters(), other.counters()
    rb, ro = cb.pop("reorder"), co.pop("reorder")
    assert cb == co and cb["ecn_marks"] > 0
    assert ro.pop("entropy") == alg and ro.pop("entropy_values") == 64 and rb == ro


# ---------------------------------------------------------------------- the hash
def _hash_and_groups(t):
    g = shortest_groups(t.arc_src, t.arc_dst, t.is_host,
                        [i for i, h in enumerate(t.is_host) if h])
    return EntropyHash.build(len(t.names)), g


def test_round_robin_values_split_bytes_as_the_hash_says():
    """One flow, round robin over 16 values: the bytes on each of the four first-tier
    arcs are exactly the frames whose value the switch's CRC32 hash sends there."""
    t, routes, (a, mids) = fan()
    eh, g = _hash_and_groups(t)
    base = int(eh.base(np.array([HDR[0]]), np.array([HDR[1]]), np.array([HDR[2]]))[0])
    dst = np.asarray(t.arc_dst)
    h1 = t.names.index("h1")
    size = 1_000_000
    want = Counter()
    for i in range(frames(size)):  # the frames of one flow
        ev = entropy_value(HDR[2], i % 16)
        first = ev_path(eh, g, base, ev, a, h1, dst)[0]
        pay = min(4096, size - 4096 * i)
        want[first] += pay + 62
    s = run(t, routes[:1], cfg({"algorithm": "round_robin", "values": 16}),
            sizes=(size,), headers=[HDR])
    got = {arc: s.net.ports[arc].tx_bytes for arc in (t.route(a, m)[0] for m in mids)}
    assert got == {arc: want.get(arc, 0) for arc in got}
    assert sum(1 for v in got.values() if v) >= 3  # 16 values land on 3-4 of 4 paths


def test_oblivious_values_spread_over_the_paths_the_hash_gives_them():
    """Random values out of 64: the frames use exactly the first-tier arcs the hash gives
    the 64 values (all four here), none other; one value: one path, its hash's."""
    t, routes, (a, mids) = fan()
    eh, g = _hash_and_groups(t)
    base = int(eh.base(np.array([HDR[0]]), np.array([HDR[1]]), np.array([HDR[2]]))[0])
    dst = np.asarray(t.arc_dst)
    h1 = t.names.index("h1")
    arcs = [t.route(a, m)[0] for m in mids]
    for n in (64, 1):
        hashed = {ev_path(eh, g, base, entropy_value(HDR[2], i), a, h1, dst)[0]
                  for i in range(n)}
        s = run(t, routes[:1], cfg({"algorithm": "oblivious", "values": n}),
                sizes=(1_000_000,), headers=[HDR])
        used = {arc for arc in arcs if s.net.ports[arc].tx_bytes > 0}
        assert used == hashed
        assert len(used) == (4 if n == 64 else 1)
        if n == 64:  # spread: no path gets more than half the frames
            assert max(s.net.ports[arc].tx_bytes for arc in arcs) < 0.5 * 1_000_000


@pytest.fixture(scope="module")
def perm():
    return routed(ft4_permutation(1_000_000))


def test_a_qps_own_source_port_hashes_to_its_route(perm):
    """The switches' hash of each QP's own UDP source port (value 0) walks exactly the
    route the fabric's ECMP gave it (k=4 fat-tree, per-switch seeds): the kernel's hash is
    the routing's."""
    f, wl, paths, _ = perm
    routes = flow_routes(f, paths)
    _, dst, _ = f.arcs
    hd = flow_headers(f, wl.dag, len(routes), f.spec.routing, seed=0)
    g = fabric_groups(f, dst[[r[-1] for r in routes]])
    eh = EntropyHash.build(f.n_nodes, f.spec.routing)
    for r, h in zip(routes, hd, strict=True):  # 16 QPs
        base = int(eh.base(np.array([h[0]]), np.array([h[1]]), np.array([h[2]]))[0])
        assert tuple(ev_path(eh, g, base, h[2], dst[r[0]], dst[r[-1]], dst)) == r[1:]


def test_one_value_on_the_fabric_equals_the_ecmp_run(perm):
    """Oblivious over one value (the QP's own port): every packet hashed by the switches
    on the way takes its route, the ACKs too: the same run as ECMP, byte for byte."""
    f, wl, paths, xconn = perm
    base = run_packet(wl.dag, f, paths, xconn, cfg(None, "ooo"))
    one = run_packet(wl.dag, f, paths, xconn, cfg({"algorithm": "oblivious", "values": 1}))
    for k, v in base.fct.items():
        np.testing.assert_array_equal(v, one.fct[k], err_msg=k)
    np.testing.assert_array_equal(base.arc_bytes, one.arc_bytes)
    assert base.counters["events"] == one.counters["events"]


def test_k4_permutation_nic_spraying_beats_ecmp_on_the_tail(perm):
    """The k=4 permutation: NIC-side spraying (256 values, ooo receiver) cuts ECMP's
    collision tail; bytes conserved, no drops."""
    f, wl, paths, xconn = perm
    e = run_packet(wl.dag, f, paths, xconn, cfg(None, "go_back_n"))
    e99 = float(np.percentile(e.fct["slowdown"], 99))
    for alg in ALGS:
        pr = run_packet(wl.dag, f, paths, xconn, cfg({"algorithm": alg}))
        assert pr.counters["delivered_bytes"] == 16 * 1_000_000 and pr.counters["drops"] == 0
        assert float(np.percentile(pr.fct["slowdown"], 99)) < 0.8 * e99, alg


# ---------------------------------------------------------------------- REPS, failures
def test_reps_learns_around_a_black_holed_path():
    """Four paths, one black-holed (its link fails, the switch still hashes onto it):
    oblivious keeps losing a quarter of the frames; REPS recycles the values that came
    back and, after its first losses, sends on them only (freezing): far fewer drops;
    fast retransmit repairs every loss without a timeout; every byte arrives once."""
    t, routes, (a, mids) = fan()
    out = {}
    for alg in ("oblivious", "reps"):
        s = t.sim(cfg({"algorithm": alg, "values": 64}, "ooo",
                      nic={"fast_retransmit_packets": 3}))
        s.blackhole(t.route(a, mids[1]) + t.route(mids[1], a))
        s.add_flow(routes[0], 2_000_000, header=HDR)
        s.run()
        c = s.counters()
        assert c["qps_done"] == 1 and c["delivered_bytes"] == 2_000_000
        assert s.qps[0].rcv_nxt == 2_000_000
        out[alg] = c
    assert out["oblivious"]["drops"] > 50
    assert out["reps"]["drops"] < out["oblivious"]["drops"] / 4
    assert out["reps"]["timeouts"] == 0


def test_reps_does_not_reuse_marked_values():
    """A REPS sender only recycles values whose ACK came back unmarked: every ECN mark
    forfeits its value (the buffer never holds one): with every frame marked (Kmin 0,
    Kmax 0) it never recycles and falls back to random values; unmarked, it does."""
    from aifabric.sim.packet import kernel as K

    t, routes, _ = fan()
    s = t.sim(cfg({"algorithm": "reps", "values": 64, "reps_buffer": 4}))
    qp = s.add_flow(routes[0], 10_000, header=HDR)
    S, q = s.net.S, qp.id
    QI = s.net.QI
    K.ev_feedback(S, q, np.int64(5 + 65536))  # marked: not kept
    assert QI[q, L.Q_EVC] == 0
    for v in (5, 6, 7, 8, 9):  # unmarked: kept, the oldest dropped when full
        K.ev_feedback(S, q, np.int64(v))
    assert QI[q, L.Q_EVC] == 4
    QI[q, L.Q_EVI] = QI[q, L.Q_EVX]  # past the first window
    assert [int(K.ev_next(S, q)) for _ in range(4)] == [6, 7, 8, 9]
    assert QI[q, L.Q_EVC] == 0


# ---------------------------------------------------------------------- trimming
def _lossy(trim: bool, receiver: str = "ooo", threshold=100_000):
    return PacketConfig.model_validate({
        "pfc": {"enabled": False}, "cc": {"algorithm": "none"},
        "buffer": {"size_bytes": 300_000}, "nic": {"receiver": receiver},
        "switch": {"trim": {"enabled": trim, "threshold_bytes": threshold}}})


@pytest.mark.parametrize("receiver", ["go_back_n", "ooo"])
def test_trimming_never_drops_a_header(receiver):
    """An 8:1 incast into a 300 KB lossy buffer: without trimming frames are dropped
    (and the tail waits for timeouts); trimming above 100 KB cuts payloads instead: no
    frame is dropped, every trimmed header reaches the receiver and comes back as a
    NACK, every byte is delivered once, and the incast ends sooner."""
    sim, qps, _ = incast(_lossy(False, receiver))
    sim.run()
    lossy = sim.counters()
    assert lossy["drops"] > 0
    sim, qps, arc = incast(_lossy(True, receiver))
    sim.run()
    c = sim.counters()
    assert c["drops"] == 0 and c["qps_done"] == 8
    assert c["delivered_bytes"] == 8 * 500_000
    assert all(q.rcv_nxt == q.size for q in qps)
    tr = c["trim"]
    assert tr["trimmed"] > 0 and tr["trim_nacks"] == tr["trimmed"]
    assert sim.now_ns < 0.5 * lossy["time_ns"]
    # the queue over the threshold by at most the frames admitted before they trim
    assert max(sim.net.ports[arc].q_peak) <= 100_000 + 2 * 8 * (4096 + 62)


def test_trim_repairs_exactly_the_trimmed_packets():
    """The ooo receiver NACKs each trimmed packet by its sequence; the sender queues it
    for repair and retransmits that packet alone: the retransmitted bytes are the
    trimmed payloads (at most one MTU each), no packet arrives twice."""
    sim, _qps, _ = incast(_lossy(True, "ooo"))
    sim.run()
    c = sim.counters()
    n = c["trim"]["trimmed"]
    assert n > 100 and 0 < c["retx_bytes"] <= n * 4096
    assert c["retx_bytes"] >= n * 288  # the smallest payload: a flow's last packet
    assert c["duplicate_bytes"] == 0 and c["timeouts"] == 0
