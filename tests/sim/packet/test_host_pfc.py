"""Host-side back-pressure (issue 12 item 6): a NIC whose host drains its receive buffer
at ``packet.nic.rx_gbps`` pauses the ToR port feeding it (host PFC) or, with host PFC
off, drops what does not fit; with rx_gbps none (the default) nothing changes."""

from __future__ import annotations

import math

import pytest

from aifabric.errors import SpecError
from aifabric.sim.packet.config import packet_config_from_dict
from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import config, steady_goodput

MTU = 4096
SIZE = 3_000_000


def _pair(cfg, size=SIZE):
    """h0 -> s -> h1, 100G, 1 us links; returns (sim, qp, ToR port into h1, h1's port)."""
    t = Topology()
    h0, h1, s = t.host("h0"), t.host("h1"), t.switch("s")
    t.link(h0, s, 100, 1000)
    down = t.link(s, h1, 100, 1000)
    sim = t.sim(cfg)
    qp = sim.add_flow(t.route(h0, s, h1), size)
    return sim, qp, sim.net.ports[2 * down], sim.net.ports[2 * down + 1]



@pytest.mark.parametrize("cc", ["none", "dcqcn"])
def test_a_receiver_draining_at_half_rate_pauses_its_tor_port(cc):
    """rx_gbps 50 behind a 100G link, host PFC on: the NIC sends pause frames, the ToR
    port into it is paused for a while and receives them, nothing is dropped, the
    receive buffer never overflows, and the flow is delivered at the drain rate (DCQCN:
    at most it; the ToR queue behind the pause marks ECN and cuts the sender's rate)."""
    sim, qp, tor, nic = _pair(config(cc={"algorithm": cc}, sample_us=2,
                                     nic={"rx_gbps": 50}))
    sim.run()
    c = sim.counters()
    assert qp.done_ps > 0 and c["drops"] == 0 and c["retx_bytes"] == 0
    assert nic.pfc_tx[3] > 0 and tor.pfc_rx[3] == nic.pfc_tx[3]
    assert tor.paused_ps[3] > 0 and c["pfc_frames"] >= nic.pfc_tx[3]
    g = steady_goodput(sim, qp)
    assert g == pytest.approx(50e9, rel=0.01) if cc == "none" else g < 50.5e9
    p = sim.pauses()
    assert "s -> h1" in list(p["port"])


def test_with_host_pfc_off_a_slow_receiver_drops_and_the_sender_retransmits():
    sim, qp, tor, nic = _pair(config(cc={"algorithm": "none"},
                                     nic={"rx_gbps": 50, "host_pfc": {"enabled": False}}))
    sim.run()
    c = sim.counters()
    assert qp.done_ps > 0 and sim.net.delivered == SIZE
    assert c["drops"] > 0 and tor.drops == c["drops"]  # counted on the port into the NIC
    assert c["retx_bytes"] > 0 and c["pfc_frames"] == 0 and nic.pfc_tx[3] == 0


def test_default_is_the_run_without_a_receive_model():
    """rx_gbps none (the default): host_pfc settings change nothing (same counters,
    same events). A drain faster than the link (1600G) only delays each frame by its
    drain time: same bytes and pauses, one more event per data frame, the last byte
    later by exactly one frame's drain time."""
    base, qb, _, _ = _pair(config(cc={"algorithm": "none"}))
    base.run()
    other, qo, _, _ = _pair(config(cc={"algorithm": "none"}, nic={
        "host_pfc": {"enabled": False, "rx_buffer_bytes": 4096, "xoff_bytes": 2048}}))
    other.run()
    assert other.counters() == base.counters() and qo.done_ps == qb.done_ps
    fast, qf, _, _ = _pair(config(cc={"algorithm": "none"}, nic={"rx_gbps": 1600}))
    fast.run()
    cb, cf = base.counters(), fast.counters()
    frames = math.ceil(SIZE / MTU)
    assert cf["events"] == cb["events"] + frames
    assert cf["delivered_bytes"] == cb["delivered_bytes"] and cf["pfc_frames"] == 0
    last = SIZE - (frames - 1) * MTU
    assert qf.done_ps - qb.done_ps == round(last * 8000 / 1600)


def test_pauses_from_a_slow_nic_reach_the_senders_through_the_fabric():
    """Two senders into a 25G-draining receiver on a lossless fabric: the ToR port
    into the receiver is paused by the NIC, the ToR's queue then pauses the senders'
    links (PFC spreads upstream) and the receiver gets its drain rate, no drops."""
    t = Topology()
    s, d = t.switch("s"), t.host("d")
    t.link(s, d, 100, 1000)
    hs = [t.host(f"h{i}") for i in range(2)]
    for h in hs:
        t.link(h, s, 100, 1000)
    sim = t.sim(config(cc={"algorithm": "none"}, sample_us=2, nic={"rx_gbps": 25}))
    qps = [sim.add_flow(t.route(h, s, d), SIZE) for h in hs]
    sim.run()
    assert all(q.done_ps > 0 for q in qps) and sim.net.drops == 0
    assert sim.net.ports[0].pfc_rx[3] > 0  # s -> d, paused by the NIC
    assert sim.net.ports[2].pfc_rx[3] > 0 and sim.net.ports[4].pfc_rx[3] > 0  # senders
    end = max(q.done_ps for q in qps) - min(q.first_tx_ps for q in qps)
    assert 2 * SIZE * 8e12 / end == pytest.approx(25e9, rel=0.02)


@pytest.mark.parametrize("nic, path", [
    ({"rx_gbps": 0}, "packet.nic.rx_gbps"),
    ({"host_pfc": {"xoff_bytes": 200_000}}, "packet.nic.host_pfc"),
    ({"host_pfc": {"xoff_bytes": 50_000, "xon_bytes": 60_000}}, "packet.nic.host_pfc"),
    ({"host_pfc": {"rx_buffer_bytes": 10}}, "packet.nic.host_pfc.rx_buffer_bytes"),
])
def test_bad_host_settings_are_one_problem(nic, path):
    with pytest.raises(SpecError) as err:
        packet_config_from_dict({"nic": nic})
    assert [p.path for p in err.value.problems] == [path]


def test_a_buffer_too_small_for_the_links_headroom_is_one_problem():
    with pytest.raises(SpecError) as err:
        _pair(config(nic={"rx_gbps": 50, "host_pfc": {"rx_buffer_bytes": 40_000}}))
    (p,) = err.value.problems
    assert p.path == "packet.nic.host_pfc.rx_buffer_bytes" and "headroom" in p.message
    # a NIC by its name (both have the same link: the first one found is named)
    assert any(f"NIC {h}'s link" in p.message for h in ("h0", "h1")), p.message


def test_an_xon_above_the_default_xoff_is_one_problem():
    """xon_bytes set, xoff_bytes left to its default (the buffer less the link's
    headroom): an XON above that XOFF would resume at once after every pause."""
    with pytest.raises(SpecError) as err:
        _pair(config(nic={"rx_gbps": 50, "host_pfc": {"xon_bytes": 100_000}}))
    (p,) = err.value.problems
    assert p.path == "packet.nic.host_pfc.xon_bytes" and "xoff" in p.message.lower()
