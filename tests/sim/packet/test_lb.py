"""Per-packet load balancing at the switches (``packet.lb``: spray, adaptive) and the
out-of-order receiver (``nic.receiver: ooo``): invariants first (every byte delivered
once, no reordering without spraying, reordering over paths of unequal delay, one path
= ECMP), then the fabric's groups, the k=4 permutation's tail and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.sim.packet import layout as L
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.lb import fabric_groups
from aifabric.sim.packet.run import flow_routes, run_packet
from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import ft4_permutation, routed

MODES = [{"mode": "spray"}, {"mode": "spray", "spray": "round_robin"}, {"mode": "adaptive"},
         {"mode": "adaptive", "flowlet_gap_ns": 2000}]
RECEIVERS = ["go_back_n", "ooo"]


def diamond(slow_ns: float = 3000):
    """h0, h2 -> a -> {b, c} -> d -> h1: two 2-switch paths, the one over c
    ``slow_ns`` longer on its first link."""
    t = Topology()
    h0, h1, h2 = t.host("h0"), t.host("h1"), t.host("h2")
    a, b, c, d = t.switch("a"), t.switch("b"), t.switch("c"), t.switch("d")
    t.link(h0, a, 100, 100)
    t.link(h2, a, 100, 100)
    t.link(d, h1, 100, 100)
    t.link(a, b, 100, 100)
    t.link(b, d, 100, 100)
    t.link(a, c, 100, 100 + slow_ns)
    t.link(c, d, 100, 100)
    return t, t.route(h0, a, b, d, h1), t.route(h2, a, b, d, h1)


def cfg(lb=None, receiver="go_back_n", **kw):
    return PacketConfig.model_validate({"lb": lb or {}, "nic": {"receiver": receiver}, **kw})


def run(t, routes, c, sizes=(1_000_000, 1_000_000)):
    s = t.sim(c)
    for r, n in zip(routes, sizes, strict=False):
        s.add_flow(r, n)
    s.run()
    return s


@pytest.mark.parametrize("lb", MODES)
@pytest.mark.parametrize("receiver", RECEIVERS)
def test_every_byte_is_delivered_exactly_once(lb, receiver):
    """Two flows sprayed or balanced over the diamond: each receiver has every byte in
    order at the end, the delivered count is the bytes sent (a byte counted twice would
    exceed it), nothing is dropped (PFC), and the reorder histogram holds one entry per
    data arrival at or ahead of the expected sequence."""
    t, r0, r1 = diamond()
    s = run(t, [r0, r1], cfg(lb, receiver))
    c = s.counters()
    assert c["qps_done"] == 2 and c["drops"] == 0
    assert c["delivered_bytes"] == 2_000_000
    for q in s.qps:
        assert q.rcv_nxt == q.size and q.snd_una == q.size
    if receiver == "ooo":
        assert c["naks"] == 0 and c["retx_bytes"] == 0
        # 245 frames per flow: every one arrives once (no retransmission, no duplicate)
        assert int(s.net.QI[:2, L.NQI:L.NQI + L.NRH].sum()) == 2 * 245 and c["duplicate_bytes"] == 0


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_ecmp_never_reorders(receiver):
    """Each flow on its route: every data frame arrives in order."""
    t, r0, r1 = diamond()
    s = run(t, [r0, r1], cfg({"mode": "ecmp"}, receiver))
    r = s.reorder()
    assert r["ooo_packets"].tolist() == [0, 0] and r["reorder_max_packets"].tolist() == [0, 0]
    assert s.reorder_summary()["distance_p99_packets"] == 0


@pytest.mark.parametrize("spray", ["random", "round_robin"])
def test_spraying_over_paths_of_unequal_delay_reorders(spray):
    """Frames alternate (or pick at random) between a short and a 3 us longer path: the
    fast path's frames overtake the slow path's, by up to ~3 us of frames (at 100G a
    4 KB frame is 0.33 us: about 9 frames). The out-of-order receiver accepts them (no
    NAK, no retransmission); go-back-N pays with NAKs and retransmitted bytes."""
    t, r0, _ = diamond()
    ooo = run(t, [r0], cfg({"mode": "spray", "spray": spray}, "ooo"), sizes=(1_000_000,))
    r = ooo.reorder()
    assert r["ooo_packets"][0] > 20
    assert 3 <= r["reorder_max_packets"][0] <= 12
    assert r["naks"][0] == 0 and r["retx_bytes"][0] == 0
    gbn = run(t, [r0], cfg({"mode": "spray", "spray": spray}, "go_back_n"),
              sizes=(1_000_000,))
    g = gbn.reorder()
    assert g["naks"][0] > 0 and g["retx_bytes"][0] > 0
    assert gbn.qps[0].done_ps > ooo.qps[0].done_ps


def test_round_robin_splits_the_bytes_evenly():
    """Round robin at switch a: the two paths carry the same frames, give or take one."""
    t, r0, _ = diamond(0)
    s = run(t, [r0], cfg({"mode": "spray", "spray": "round_robin"}, "ooo"),
            sizes=(1_000_000,))
    ab, ac = (s.net.ports[t.route(3, x)[0]].tx_bytes for x in (4, 5))  # a->b, a->c
    assert abs(ab - ac) <= 4096 + 62 and ab + ac >= 1_000_000


def _line():
    t = Topology()
    h0, h1, h2 = t.host("h0"), t.host("h1"), t.host("h2")
    a, b = t.switch("a"), t.switch("b")
    for u, v in ((h0, a), (h2, a), (a, b), (b, h1)):
        t.link(u, v, 100, 500)
    return t, t.route(h0, a, b, h1), t.route(h2, a, b, h1)


@pytest.mark.parametrize("lb", MODES)
def test_one_path_sprayed_equals_ecmp(lb):
    """With one path per destination there is nothing to choose: an incast of two
    flows sprayed or balanced runs exactly as with ECMP (same FCTs, counters, events)."""
    t, r0, r1 = _line()
    base = run(t, [r0, r1], cfg({"mode": "ecmp"}, ecn={"kmin_bytes": 5000,
                                                      "kmax_bytes": 50000}))
    other = run(t, [r0, r1], cfg(lb, ecn={"kmin_bytes": 5000, "kmax_bytes": 50000}))
    fb, fo = base.fct(), other.fct()
    for k, v in fb.items():
        np.testing.assert_array_equal(v, fo[k], err_msg=k)
    cb, co = base.counters(), other.counters()
    co.pop("reorder")
    assert cb == co and cb["ecn_marks"] > 0


def test_adaptive_on_an_idle_network_follows_the_route():
    """One flow alone: every queue is empty, the tie goes to the flow's hash (its
    route): the same run as ECMP."""
    t, r0, _ = diamond()
    a = run(t, [r0], cfg({"mode": "adaptive"}), sizes=(500_000,))
    e = run(t, [r0], cfg({"mode": "ecmp"}), sizes=(500_000,))
    assert a.qps[0].done_ps == e.qps[0].done_ps and a.events == e.events


def test_seeded_spraying_is_deterministic():
    t, r0, r1 = diamond()
    one = run(t, [r0, r1], cfg({"mode": "spray"}, "ooo")).fct()
    two = run(t, [r0, r1], cfg({"mode": "spray"}, "ooo")).fct()
    other = run(t, [r0, r1], cfg({"mode": "spray", "seed": 7}, "ooo")).fct()
    for k in one:
        np.testing.assert_array_equal(one[k], two[k], err_msg=k)
    assert not np.array_equal(one["fct_ns"], other["fct_ns"])


# ---------------------------------------------------------------------- on a Fabric
@pytest.fixture(scope="module")
def perm():
    return routed(ft4_permutation(4_000_000))


def test_fabric_groups_lead_one_hop_closer(perm):
    """Every member of a switch's group toward a NIC leaves that switch and lands on a
    switch one hop closer (or on the NIC: the last hop)."""
    f = perm[0]
    src, dst, _ = f.arcs
    nics = np.unique(dst[[r[-1] for r in flow_routes(f, perm[2])]])
    g = fabric_groups(f, nics)
    rows, cols = np.nonzero(g.group >= 0)
    sw = np.flatnonzero(g.node_row >= 0)
    assert len(rows) == len(sw) * len(nics)  # k=4: every switch reaches every NIC
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):  # 20 x 16 pairs
        gid = g.group[r, c]
        arcs = g.arcs[g.ptr[gid]:g.ptr[gid + 1]]
        assert len(arcs) >= 1 and (src[arcs] == sw[r]).all()
        nxt = dst[arcs]
        if g.hops[r, c] == 1:
            assert (nxt == g.dests[c]).all()
        else:
            assert (g.hops[g.node_row[nxt], c] == g.hops[r, c] - 1).all()


def test_k4_permutation_spray_and_adaptive_beat_ecmp_on_the_tail(perm):
    """The k=4 permutation (4 MB flows, DCQCN, PFC): ECMP's hash collisions double the
    tail (p99 slowdown ~2); spraying with an out-of-order receiver and per-packet
    adaptive routing cut it (measured 2.10, 1.06 and 1.73); bytes conserved,
    no drops; spraying onto go-back-N receivers costs NAKs and retransmissions."""
    f, wl, paths, xconn = perm
    out = {}
    for lb, rx in (("ecmp", "go_back_n"), ("spray", "ooo"), ("adaptive", "ooo"),
                   ("spray", "go_back_n")):
        pr = run_packet(wl.dag, f, paths, xconn, cfg({"mode": lb}, rx))
        c = pr.counters
        assert c["delivered_bytes"] == 16 * 4_000_000 and c["drops"] == 0
        out[(lb, rx)] = (float(np.percentile(pr.fct["slowdown"], 99)), c)
    e99 = out[("ecmp", "go_back_n")][0]
    assert out[("spray", "ooo")][0] < 0.8 * e99
    assert out[("adaptive", "ooo")][0] < 0.95 * e99
    assert out[("ecmp", "go_back_n")][1]["naks"] == 0
    sg = out[("spray", "go_back_n")][1]
    assert sg["naks"] > 0 and sg["retx_bytes"] > 0 and sg["reorder"]["ooo_packets"] > 0


def test_routing_policy_spray_sprays_packets(perm):
    """Without packet.lb.mode, routing.policy spray means per-packet spraying (one
    vocabulary): its run equals packet.lb.mode spray's."""
    from aifabric.sim.packet.run import lb_config
    from aifabric.spec.models import Routing

    c = lb_config(cfg(), Routing(policy="spray"))
    assert c.lb.mode == "spray"
    assert lb_config(cfg(), Routing(policy="ecmp")).lb.mode == "ecmp"
    assert lb_config(cfg({"mode": "adaptive"}), Routing(policy="spray")).lb.mode == \
        "adaptive"


def test_layout_columns_do_not_overlap():
    assert L.Q_DSTI == L.Q_X1 + 1 and L.Q_EVB == L.Q_OOODROP + 1
    assert L.LB_MODE == L.DC_X2 + 1 and L.EV_ALG == L.QX_H + 1
    # NIC-side spraying and trimming (test_entropy.py) after them
    assert L.TRIM_ON == L.FRX + 1 and L.TRQ_N == L.TRIM_B + 1 and L.NS_TARGET == L.QX_TRQ + 1
    assert L.Q_TNAKS == L.Q_FRREC + 1 and L.Q_TRH == L.Q_TNAKS + 1 and L.Q_RCRED == L.Q_TRC + 1
    # the port columns (numbered for the cache, not in order): each of 0..NPI-1 once
    pi = [getattr(L, n) for n in dir(L) if n.startswith("P_") and n not in
          ("P_PPB", "P_GBPS", "P_PMAX", "P_XF0")]
    assert sorted(pi) == list(range(L.NPI)) and L.K_AR == L.K_EV + 1 and L.NKI == L.K_AR + 1
    # the UEC congestion controls' columns after those (test_uec_cc.py), then the ooo
    # receiver's coalesced ACKs (test_ooo_acks.py: its QP state in the NIC spare columns)
    assert L.ACKCO == L.RC_PULL + 1 and L.NQI == L.Q_RSPEC + 1
    assert (L.Q_OOON, L.Q_ACKRQ) == (L.Q_X0, L.Q_X1)
    # InfiniBand's (test_infiniband.py) after those: 16 VL weights, then the VL
    # arbitration's tables, the Victim_Mask and the per-SL CC (test_ib_arbitration.py)
    assert L.IB_ON == L.ACKCO + 1 and L.IB_W0 == L.IB_AR + 1 and L.IB_HN == L.IB_W0 + 16
    assert L.NCI == L.IB_SLCC0 + 1 and L.P_VLHCUR == L.P_FECNC + 1
    assert L.T_CRED == L.T_DROPS + 1 and L.NPT == L.T_VTXB + 1
