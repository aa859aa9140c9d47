"""The NIC's per-QP in-flight window (``packet.nic.window``, issue 12 item 1): a sender
never has more than the window un-acknowledged, so one flow moves min(line, W / RTT);
``bdp`` windows bound an incast's queue; ``window_scales_with_rate`` shrinks the window
with the congestion control's rate (W x rate / line, HPCC's reference ns-3 simulator)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aifabric.errors import SpecError
from aifabric.sim.packet.config import packet_config_from_dict
from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import config, incast, steady_goodput

MTU = 4096
LINE_GOODPUT = 100e9 * MTU / (MTU + 62 + 20)  # payload bit/s of a 100G link


def _one_flow(cfg, size):
    t = Topology()
    h0, h1, s = t.host("h0"), t.host("h1"), t.switch("s")
    t.link(h0, s, 100, 1000)
    t.link(s, h1, 100, 1000)
    sim = t.sim(cfg)
    qp = sim.add_flow(t.route(h0, s, h1), size)
    return sim, qp



@pytest.mark.parametrize("packets", [2, 6, 24])
def test_one_flow_moves_min_of_line_and_window_over_rtt(packets):
    """Window W (whole packets: 2 and 6 below the path's BDP of ~14 packets, 24 above),
    RTT R (the QP's unloaded RTT): steady goodput = min(line goodput, W / R) within 1%;
    and in flight never more than W."""
    w = packets * MTU
    sim, qp = _one_flow(config(cc={"algorithm": "none"}, sample_us=2,
                               nic={"window": w}), 3_000_000)
    seen = []

    def watch(_):
        seen.append(qp.snd_nxt - qp.snd_una)
        if qp.done_ps < 0:
            sim.ev.at(sim.ev.now + 500_000, watch)

    sim.ev.at(0, watch)
    sim.run()
    assert qp.done_ps > 0 and qp.nic_window == w
    want = min(LINE_GOODPUT, w * 8e12 / qp.base_rtt_ps)
    assert steady_goodput(sim, qp) == pytest.approx(want, rel=0.01)
    assert 0 < max(seen) <= w


def test_bdp_window_is_base_rtt_times_line_rate_per_qp():
    """bdp: the QP's base RTT x line rate, rounded up to whole packets (a window of 4.5
    packets would hold the sender to 4)."""
    _, qp = _one_flow(config(nic={"window": "bdp"}), 10_000)
    bdp = qp.base_rtt_ps * qp.line_bps / 8e12
    assert qp.nic_window == math.ceil(bdp / MTU) * MTU and qp.nic_window - bdp < MTU
    _, qp = _one_flow(config(), 10_000)
    assert qp.nic_window == np.inf


@pytest.mark.parametrize("delay_ns", [50, 100, 300])
def test_a_lone_flow_with_a_bdp_window_runs_at_line_rate(delay_ns):
    """Path BDPs of 4.5, 7.0 and 16.7 packets (400G, two hops): the flow alone finishes
    as fast as without a window (slowdown 1.00 within 1%)."""
    t = Topology()
    a, d, s = t.host("a"), t.host("d"), t.switch("s")
    t.link(a, s, 400, delay_ns)
    t.link(s, d, 400, delay_ns)
    sim = t.sim(config(cc={"algorithm": "none"}, nic={"window": "bdp"}))
    sim.add_flow(t.route(a, s, d), 4_000_000)
    sim.run()
    assert sim.fct()["slowdown"][0] == pytest.approx(1.0, rel=0.01)


@pytest.mark.parametrize("window", ["bdp", 8192])
def test_a_window_never_stalls_below_one_ack_interval(window):
    """ACK every 2 packets: a window is never smaller than 2 packets (bdp and rate-scaled
    windows are raised to it; a byte count below it is refused), so no round waits for
    the retransmission timeout."""
    sim, qp = _one_flow(config(cc={"algorithm": "none"},
                               nic={"window": window, "ack_interval_packets": 2}), 200_000)
    sim.run()
    assert qp.done_ps > 0 and qp.timeouts == 0
    # at least the window per round trip (a stall would cost rto_us = 1 ms per round)
    w = min(qp.nic_window, 200_000)
    assert qp.done_ps - qp.start_ps < 2 * (200_000 / w + 1) * qp.base_rtt_ps


def test_a_window_below_one_ack_interval_is_refused():
    with pytest.raises(SpecError) as err:
        packet_config_from_dict({"nic": {"window": 4096, "ack_interval_packets": 2}})
    (p,) = err.value.problems
    assert p.path == "packet.nic.window" and "ack_interval_packets" in p.message


@pytest.mark.parametrize("cc", ["none", "dcqcn"])
def test_incast_with_bdp_windows_keeps_the_queue_under_16_bdp(cc):
    """16 senders to one receiver: with ``bdp`` windows the bottleneck queue stays under
    16 windows (each QP has at most one window in flight; a window is the BDP rounded up
    to whole packets, so 16 windows is at most 16 x BDP + 16 packets); without windows it
    is several times that."""
    peaks = {}
    for window in ("bdp", "none"):
        sim, qps, arc = incast(config(cc={"algorithm": cc}, nic={"window": window}), n=16,
                               size=2_000_000)
        sim.run()
        assert all(q.done_ps > 0 for q in qps)
        bdp = qps[0].base_rtt_ps * qps[0].line_bps / 8e12
        peaks[window] = max(sim.net.ports[arc].q_peak)
        w = math.ceil(bdp / MTU) * MTU
    assert peaks["bdp"] < 16 * w <= 16 * bdp + 16 * MTU
    assert peaks["none"] > 3 * 16 * w


def _cut_rate(scale):
    """One DCQCN flow with an 8-packet window (below the BDP); at 60 us a CNP cuts its
    rate (no recovery: timer and byte counter out of reach). Returns samples of (rate /
    line, bytes in flight) every 0.5 us and the window."""
    w = 8 * MTU
    cfg = config(sample_us=1000, nic={"window": w, "window_scales_with_rate": scale},
                 cc={"dcqcn": {"rpg_time_reset": 1_000_000, "rpg_byte_reset": 1 << 31}})
    sim, qp = _one_flow(cfg, 6_000_000)
    seen = []

    def watch(_):
        seen.append((qp.cc.rate / qp.line_bps, qp.snd_nxt - qp.snd_una, sim.ev.now))
        if qp.done_ps < 0 and sim.ev.now < 200_000_000:
            sim.ev.at(sim.ev.now + 500_000, watch)

    sim.ev.at(0, watch)
    sim.ev.at(60_000_000, lambda _: qp.cc.on_cnp(sim.ev.now))
    sim.run(until_ns=200_000)
    return np.array(seen), w


def test_window_scales_with_rate_follows_the_rate():
    """With ``window_scales_with_rate`` the bytes in flight stay within W x rate / line
    and reach it (less one packet) both at line rate and after a CNP halves the rate;
    without it, the flow keeps more than W x rate / line in flight after the cut."""
    s, w = _cut_rate(True)
    before, after = s[(s[:, 2] > 20e6) & (s[:, 2] < 60e6)], s[s[:, 2] > 80e6]
    assert np.all(before[:, 0] == 1) and 0.4 < after[0, 0] < 0.6
    assert np.all(after[:, 0] == after[0, 0])  # no recovery in the test's time
    for part in (before, after):
        lim = w * part[:, 0]
        assert np.all(part[:, 1] <= lim)
        assert part[:, 1].max() > lim[0] - MTU
    s, w = _cut_rate(False)
    after = s[s[:, 2] > 80e6]
    assert after[:, 1].max() > w * after[0, 0]


@pytest.mark.parametrize("bad", [1000, 4095, "bpd", "4096", -1, True])
def test_a_window_below_one_mtu_or_not_a_window_is_one_problem(bad):
    with pytest.raises(SpecError) as err:
        packet_config_from_dict({"nic": {"window": bad}})
    probs = err.value.problems
    assert len(probs) == 1 and probs[0].path == "packet.nic.window"
