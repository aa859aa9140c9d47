"""The UEC 1.0 congestion controls (``cc.algorithm: nscc | rccc | nscc+rccc``): NSCC's
window follows its update rules step by step on a hand-computed trace; RCCC's credit
never runs ahead of the receiver's rate; every byte is delivered exactly once."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.sim.packet import layout as L
from aifabric.sim.packet.sim import Topology
from aifabric.sim.packet.transports import nscc, rccc
from tests.sim.packet.nets import config, incast

MSS = 4096


def _one_qp(cc: dict) -> tuple:
    """One 100G QP through one switch (not run): the network and the QP's row."""
    t = Topology()
    s, a, b = t.switch("s"), t.host("a"), t.host("b")
    t.link(a, s, 100, 1000)
    t.link(s, b, 100, 1000)
    sim = t.sim(config(cc=cc))
    qp = sim.add_flow(t.route(a, s, b), 10**7)
    return sim.net, qp.id


def test_nscc_constants_scale_with_the_network_bdp_and_target():
    """a = network BDP / (100G x 12 us) = 10/12, b = target / 12 us = 5/12: alpha = 4 MSS
    a b / target, fi = 5 MSS a, eta = 0.15 MSS a, fast-increase scale 0.25 a; max window
    1.5 BDP (BDP = 10 us x 100G = 125,000 bytes)."""
    net, q = _one_qp({"algorithm": "nscc", "nscc": {"network_rtt_us": 10,
                                                    "target_qdelay_us": 5}})
    CF, CI, QF = net.CF, net.CI, net.QF
    assert CF[L.NS_ALPHA] == pytest.approx(4 * MSS * (10 / 12) * (5 / 12) / 5e6)
    assert CF[L.NS_FI] == pytest.approx(17066.6667) and CF[L.NS_ETA] == pytest.approx(512)
    assert CF[L.NS_FISCALE] == pytest.approx(0.25 * 10 / 12)
    assert CI[L.NS_TARGET] == 5_000_000 and CI[L.NS_QATHR] == 20_000_000
    assert CI[L.NS_ADJP] == 10_000_000 and CI[L.NS_ADJB] == 8 * MSS
    assert QF[q, nscc.BDP] == 125_000 and QF[q, nscc.MAXW] == 187_500
    assert QF[q, L.F_WIN] == 187_500  # the first window: the max window


def test_nscc_window_follows_its_update_rules_step_by_step():
    """A hand-computed trace (network RTT 10 us = base RTT, target 5 us, 100G, window
    100,000 bytes; alpha = 0.00113778, fi = 17066.67, eta = 512, fast scale 0.208333;
    whole bytes as the reference simulator keeps them):

    1. 1 us, no mark, delay 2 us, 4096 B: proportional, inc = 0.00113778 x 4096 x 3e6
       = 13,981,013; quick adapt's first period starts (ends at 1 + 10 + 5 = 16 us).
    2. 2 us, no mark, delay 6 us, 4096 B: fair, inc += 17066.67 x 4096 -> 83,886,079.
    3. 12 us, no mark, delay 0.5 us, 32768 B: below 1 us but 32768 < cwnd: still
       proportional, inc += 0.00113778 x 32768 x 4.5e6 -> 251,658,239; 40,960 bytes acked
       > 8 MSS: cwnd += 251,658,239 // 100,000 = 2,516 -> 102,516, and the period (10 us)
       is over: + eta -> 103,028.
    4. 13 us, mark, delay 8 us (average 7 us): decrease by 0.8 x (7 - 5)/7: x 0.771429
       -> 79,478.
    5. 14 us, mark, delay 8 us: no second decrease within a base RTT.
    6. 20 us, no mark, delay 0.2 us, 200,000 B: quick adapt's period is over but 245,056
       bytes were acked in it (>= 187,500 / 8): no quick adapt, a new period to 20 + 10 +
       5 = 35 us; more than a window below 1 us: fast increase, cwnd += 200,000 x
       0.208333 -> 121,144.
    7. 30 us, no mark, delay 25 us, 4096 B: fair, inc = 69,905,066; a period since the
       last adjustment: cwnd += 69,905,066 // 121,144 = 577, + eta -> 122,233.
    8. 46 us, no mark, delay 25 us (> 4 x target), 4096 B: the period is over with 8,192
       bytes acked in it, under 187,500 / 8: quick adapt, cwnd = 8,192 (next period to
       61 us)."""
    net, q = _one_qp({"algorithm": "nscc", "nscc": {"network_rtt_us": 10,
                                                    "target_qdelay_us": 5,
                                                    "init_window_bytes": 100_000}})
    QF, QI = net.QF, net.QI
    us = 1_000_000
    trace = [  # (time, mark, delay, newly acked) -> window after, collected increase
        (1 * us, False, 2 * us, 4096, 100_000, 13_981_013),
        (2 * us, False, 6 * us, 4096, 100_000, 83_886_079),
        (12 * us, False, us // 2, 32768, 103_028, 0),
        (13 * us, True, 8 * us, 4096, 79_478, 0),
        (14 * us, True, 8 * us, 4096, 79_478, 0),
        (20 * us, False, us // 5, 200_000, 121_144, 0),
        (30 * us, False, 25 * us, 4096, 122_233, 0),
        (46 * us, False, 25 * us, 4096, 8192, 0),
    ]
    for i, (t, mark, delay, newly, win, inc) in enumerate(trace, 1):
        if i == 4:
            QF[q, nscc.AVGD] = 7 * us
        nscc.update(net.S, q, t, mark, float(delay), newly)
        assert (QF[q, L.F_WIN], QF[q, nscc.INC]) == (win, inc), f"step {i}"
    assert QI[q, nscc.QAEND] == 61 * us and QI[q, nscc.LASTDEC] == 13 * us
    assert QI[q, nscc.LASTADJ] == 30 * us


def test_nscc_learns_the_base_rtt_and_averages_the_delay():
    """An RTT sample below the base RTT becomes the base RTT (BDP and max window follow);
    a sample above it moves the average delay by delay_ewma (0.0125) of the difference."""
    net, q = _one_qp({"algorithm": "nscc", "nscc": {"network_rtt_us": 10}})
    QF, QI = net.QF, net.QI
    d = nscc.delay_sample(net.S, q, 8_000_000, False)
    assert d == 0 and QI[q, nscc.BASE] == 8_000_000
    assert QF[q, nscc.BDP] == 100_000 and QF[q, nscc.MAXW] == 150_000
    d = nscc.delay_sample(net.S, q, 10_000_000, True)
    assert d == 2_000_000 and QF[q, nscc.AVGD] == pytest.approx(0.0125 * 2_000_000)


def test_nscc_incast_shares_the_link_without_loss():
    """8 NSCC senders into one 100G port (lossy): every byte arrives once, nothing is
    dropped, and the incast finishes within 10% of the link's payload time."""
    sim, qps, _ = incast(config(cc={"algorithm": "nscc"}, pfc={"enabled": False}), n=8,
                         size=1_000_000)
    sim.run(until_ns=5e6)
    c = sim.counters()
    assert c["drops"] == 0 and c["delivered_bytes"] == 8_000_000
    end = max(qp.done_ps for qp in qps) / 1e3
    ideal = 8e6 * 8 / (100 * 4096 / (4096 + 82)) + 2000  # payload time + one-way delay
    assert ideal * 0.98 <= end <= ideal * 1.10, end


def _credit_rate_check(alg: str, rx_gbps: float) -> None:
    """An incast under ``alg`` with receiver_gbps ``rx_gbps`` (below the 100G line):
    between any two samples the receiver granted no more than its pacer's rate allows
    (0.99 x the rate on its link, of which 4096 / (4096 + 82) is payload; plus one pull),
    and the senders got all their bytes through at about that rate."""
    cfg = config(cc={"algorithm": alg, "rccc": {"receiver_gbps": rx_gbps}},
                 pfc={"enabled": False}, sample_us=2)
    sim, qps, _ = incast(cfg, n=8, size=500_000)
    net = sim.net
    ids = [qp.id for qp in qps]
    seen: list[tuple[int, int]] = []

    def sample(_: object) -> None:
        seen.append((sim.ev.now, int(net.QI[ids, L.Q_RGRANT].sum())))
        if any(qp.done_ps < 0 for qp in qps):
            sim.ev.at(sim.ev.now + 1_000_000, sample, None)

    sim.ev.at(0, sample, None)
    sim.run(until_ns=5e6)
    rate = rx_gbps * 1e9 * 0.99 / 8e12 * 4096 / (4096 + 62 + 20)  # payload bytes per ps
    pull = 4 * 4096
    t = np.array([s[0] for s in seen], dtype=np.float64)
    g = np.array([s[1] for s in seen], dtype=np.float64)
    assert len(t) > 20 and g[-1] > 0
    dt = t[None, :] - t[:, None]
    dg = g[None, :] - g[:, None]
    later = dt > 0
    assert np.all(dg[later] <= dt[later] * rate + pull), (dg - dt * rate)[later].max()
    assert sim.counters()["delivered_bytes"] == 8 * 500_000
    spec = sum(net.QF[qp.id, rccc.MAXCRED] for qp in qps)  # the speculative credit
    end = max(qp.done_ps for qp in qps)
    # the receiver's bytes beyond the speculative credit came at most at its rate
    assert (8 * 500_000 - spec) / rate <= end
    assert end <= 1.15 * (8 * 500_000 - spec) / rate + 20_000_000


@pytest.mark.parametrize("alg", ["rccc", "nscc+rccc"])
def test_rccc_credits_never_exceed_the_receivers_rate(alg):
    _credit_rate_check(alg, 40.0)


def test_rccc_credit_frames_and_grants_add_up():
    """Every byte a receiver granted reached its sender (credit frames are lossless
    here), and no QP waits for credit after the run."""
    cfg = config(cc={"algorithm": "rccc", "rccc": {"receiver_gbps": 100}},
                 pfc={"enabled": False})
    sim, qps, _ = incast(cfg, n=4, size=300_000)
    sim.run(until_ns=5e6)
    QI = sim.net.QI
    ids = [qp.id for qp in qps]
    assert np.array_equal(QI[ids, L.Q_RGRANT], QI[ids, L.Q_RRECV])
    cc = qps[0].cc  # (the Python view of the same state)
    assert cc.credit_granted == cc.credit_received == QI[ids[0], L.Q_RGRANT] > 0
    assert cc.speculating == 0
    assert (QI[ids, L.Q_RIN] == 0).all() and (sim.net.NU[:, L.U_CRH] == -1).all()


def _spray_permutation(alg: str) -> tuple:
    """A 2-leaf, 4-spine leaf-spine (100G hosts, 100G uplinks), 8 hosts each sending
    500 kB across, sprayed per packet, out-of-order receiver."""
    t = Topology()
    sp = [t.switch(f"sp{i}") for i in range(4)]
    hs, tors = [], []
    for r in range(2):
        tor = t.switch(f"t{r}")
        for s in sp:
            t.link(tor, s, 100, 500)
        for h in range(4):
            hs.append(t.host(f"h{r}{h}"))
            t.link(hs[-1], tor, 100, 500)
            tors.append(tor)
    cc = {"algorithm": alg, "rccc": {"receiver_gbps": 100}}
    sim = t.sim(config(cc=cc, pfc={"enabled": False}, lb={"mode": "spray"},
                       nic={"receiver": "ooo"}))
    qps = [sim.add_flow(t.route(hs[i], tors[i], sp[i % 4], tors[(i + 4) % 8],
                                hs[(i + 4) % 8]), 500_000) for i in range(8)]
    return sim, qps


@pytest.mark.parametrize("alg", ["nscc", "rccc", "nscc+rccc"])
def test_uec_cc_delivers_every_byte_exactly_once(alg):
    """Sprayed over four spines (reordered on arrival): every QP's receiver has all its
    bytes in order, no byte twice, the network delivered exactly the bytes sent, and
    every byte was sent once (none lost or retransmitted)."""
    sim, qps = _spray_permutation(alg)
    sim.run(until_ns=5e6)
    c = sim.counters()
    assert c["qps_done"] == 8 and c["delivered_bytes"] == 8 * 500_000
    assert c["duplicate_bytes"] == 0 and c["drops"] == 0 and c["retx_bytes"] == 0
    QI = sim.net.QI
    ids = [qp.id for qp in qps]
    assert (QI[ids, L.Q_RCVNXT] == 500_000).all() and (QI[ids, L.Q_SNDUNA] == 500_000).all()
    assert (QI[ids, L.Q_HIGH] == 500_000).all()  # every byte sent once: none again
    assert c["reorder"]["ooo_share"] > 0  # (the spraying did reorder)


def test_rccc_holds_an_incast_queue_to_the_speculative_credit():
    """16 senders into one 100G port, lossy: without congestion control the receiver's
    port queue grows until the buffer drops; under RCCC it never holds more than the
    senders' speculative credit (their packets with headers) and nothing is lost; the
    incast still finishes at about the receiver's rate."""
    def run(cc):
        cfg = config(cc=cc, pfc={"enabled": False}, buffer={"size_bytes": 4 << 20})
        sim, qps, arc = incast(cfg, n=16, size=500_000)
        sim.run(until_ns=20e6)
        return sim, qps, max(sim.net.ports[arc].q_peak)

    sim0, _, peak0 = run({"algorithm": "none"})
    assert sim0.counters()["drops"] > 0  # (what RCCC prevents)
    sim, qps, peak = run({"algorithm": "rccc", "rccc": {"receiver_gbps": 100}})
    spec = sum(sim.net.QF[qp.id, rccc.MAXCRED] for qp in qps)
    assert sim.counters()["drops"] == 0 and sim.counters()["delivered_bytes"] == 16 * 500_000
    assert peak <= spec * (4096 + 62) / 4096 and peak < peak0
    end = max(qp.done_ps for qp in qps)
    ideal = 16 * 500_000 * 8 / (100 * 4096 / (4096 + 82)) * 1000  # ps at the payload rate
    assert end <= 1.10 * ideal / 0.99 + 20_000_000
