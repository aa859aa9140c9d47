"""Congestion control: DCQCN fairness and queue, HPCC's low queue, TIMELY and DCTCP."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import config, incast

GOODPUT = 100 * 4096 / (4096 + 82)  # payload Gbit/s of a 100G link


def _two_flows(cfg, until_ns=4e6, window=(2e6, 4e6)):
    t = Topology()
    s, d = t.switch("s"), t.host("d")
    link = t.link(s, d, 100, 1000)
    hs = [t.host("h0"), t.host("h1")]
    for h in hs:
        t.link(h, s, 100, 1000)
    sim = t.sim(cfg)
    a = sim.add_flow(t.route(hs[0], s, d), 10**9)
    b = sim.add_flow(t.route(hs[1], s, d), 10**9, start_ns=100_000)  # joins later
    sim.run(until_ns=until_ns)
    q, ps = sim.qp_series(), sim.port_series()
    rates = []
    for qp in (a, b):
        m = q["qp"] == qp.id
        tt, dv = q["time_ns"][m], q["delivered_bytes"][m]
        i, j = np.searchsorted(tt, window)
        j = min(j, len(tt) - 1)
        rates.append((dv[j] - dv[i]) * 8 / (tt[j] - tt[i]))
    m = (ps["arc"] == 2 * link) & (ps["tc"] == 3) & (ps["time_ns"] >= window[0])
    return sim, np.array(rates), ps["queue_bytes"][m]


def test_dcqcn_two_flows_converge_to_the_fair_share_and_the_queue_sits_between_kmin_and_kmax():
    """Two long DCQCN flows on one 100G bottleneck, the second joining 100 us later:
    over the steady-state window each gets the fair share (half of what the link
    delivered) within 10%, the link stays busy (>= 85% of goodput), and the mean queue
    lies between Kmin and Kmax (NVIDIA defaults except rpg_time_reset = 55 us, the
    DCQCN paper's timer)."""
    cfg = config(cc={"algorithm": "dcqcn", "dcqcn": {"rpg_time_reset": 55}}, sample_us=5)
    _, rates, q = _two_flows(cfg)
    fair = rates.sum() / 2
    assert np.all(np.abs(rates - fair) <= 0.10 * fair), rates
    assert rates.sum() >= 0.85 * GOODPUT
    assert cfg.ecn.kmin_bytes <= q.mean() <= cfg.ecn.kmax_bytes, q.mean()


def test_dcqcn_cut_and_recovery_follow_the_nvidia_formulas():
    """A CNP cuts rc by rc x alpha/2^rpg_gd (alpha ~ 1023/1024: about half), a second
    CNP inside rate_reduce_monitor_period waits for the period's end, and the timer
    brings the rate back towards the target (fast recovery: halfway)."""
    sim, qps, _ = incast(config(cc={"algorithm": "dcqcn"}, ecn={"enabled": False}), n=1,
                         size=10**8)
    qp = qps[0]
    sim.run(until_ns=10_000)
    cc = qp.cc
    line = qp.line_bps
    cc.on_cnp(sim.ev.now)
    assert cc.rate == pytest.approx(line * (1 - 1023 / 2048), rel=1e-3)
    first = cc.rate
    cc.on_cnp(sim.ev.now + 1)  # inside the monitor period: deferred
    assert cc.rate == first and cc.pending
    sim.run(until_ns=10_000 + 4_000 + 1)
    assert cc.rate < first
    cut2 = cc.rate
    sim.run(until_ns=10_000 + 4_000 + 300_000 + 10)  # one rpg_time_reset later
    assert cut2 < cc.rate <= line


def test_hpcc_keeps_the_queue_far_below_dcqcn_on_the_same_incast():
    """8 -> 1 incast of 1 MB each: HPCC's mean bottleneck queue is under a tenth of
    DCQCN's (measured ratio printed), and both deliver every byte."""
    means = {}
    for cc in ("dcqcn", "hpcc"):
        sim, qps, bott = incast(config(cc={"algorithm": cc}, sample_us=2), n=8,
                                size=1_000_000)
        sim.run()
        assert all(q.rcv_nxt == q.size for q in qps)
        ps = sim.port_series()
        means[cc] = ps["queue_bytes"][(ps["arc"] == bott) & (ps["tc"] == 3)].mean()
    ratio = means["hpcc"] / means["dcqcn"]
    print(f"mean queue HPCC {means['hpcc']:.0f} B, DCQCN {means['dcqcn']:.0f} B, "
          f"ratio {ratio:.3f}")
    assert ratio < 0.1


def test_hpcc_int_window_tracks_the_bottleneck():
    """Two HPCC flows on one bottleneck settle near eta x capacity in total and share it
    within 15%."""
    cfg = config(cc={"algorithm": "hpcc"}, sample_us=5)
    _, rates, q = _two_flows(cfg, until_ns=2e6, window=(1e6, 2e6))
    assert rates.sum() == pytest.approx(0.95 * GOODPUT, rel=0.08)
    assert np.all(np.abs(rates - rates.mean()) <= 0.15 * rates.mean()), rates
    assert q.mean() < 20_000


@pytest.mark.parametrize("cc", ["timely", "dctcp"])
def test_timely_and_dctcp_complete_an_incast_losslessly_with_a_smaller_queue(cc):
    """With TIMELY or DCTCP an 8 -> 1 incast delivers every byte, and the bottleneck
    queue's mean is below the queue of the same incast without congestion control."""
    sims = {}
    for name in ("none", cc):
        sim, qps, bott = incast(config(cc={"algorithm": name}, sample_us=2), n=8,
                                size=1_000_000)
        sim.run()
        assert all(q.rcv_nxt == q.size for q in qps)
        ps = sim.port_series()
        sims[name] = ps["queue_bytes"][(ps["arc"] == bott) & (ps["tc"] == 3)].mean()
    assert sims[cc] < sims["none"]
