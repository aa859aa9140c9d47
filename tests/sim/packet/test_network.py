"""Links, queues, PFC, ECN and the RoCE NIC against closed forms and conservation laws."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import config, incast

MTU, HDR, OVH = 4096, 62, 20


@pytest.mark.parametrize(("cc", "size", "hops"), [("none", 1_000_000, 2), ("dcqcn", 3_000_001, 3),
                                                  ("dctcp", 700_000, 2)])
def test_single_flow_reaches_line_rate_and_its_fct_is_the_closed_form(cc, size, hops):
    """One flow alone: store-and-forward over equal-rate hops takes
    FCT = (all frames on the first link) + (hops-1) x (one full frame) + propagation,
    within 1%; its goodput is the line rate x payload / (payload + headers)."""
    gbps, delay = 100.0, 1000.0
    t = Topology()
    nodes = [t.host("a")] + [t.switch(f"s{i}") for i in range(hops - 1)] + [t.host("b")]
    for u, v in itertools.pairwise(nodes):
        t.link(u, v, gbps, delay)
    sim = t.sim(config(cc={"algorithm": cc}))
    qp = sim.add_flow(t.route(*nodes), size)
    sim.run()
    n = -(-size // MTU)
    ps_per_byte = 8000 / gbps
    want_ps = ((size + n * (HDR + OVH)) * ps_per_byte + (hops - 1) * (MTU + HDR + OVH)
               * ps_per_byte + hops * delay * 1000)
    assert qp.done_ps == pytest.approx(want_ps, rel=0.01)
    serial_ps = qp.done_ps - hops * delay * 1000 - (hops - 1) * (MTU + HDR + OVH) * ps_per_byte
    goodput = size * 8 / (serial_ps / 1000)
    assert goodput == pytest.approx(gbps * MTU / (MTU + HDR + OVH), rel=0.01)
    assert sim.counters()["drops"] == 0 and qp.retx_bytes == 0


def test_incast_with_pfc_is_lossless_pauses_and_delivers_every_byte_once():
    """8 -> 1 at line rate, PFC on, no CC: the switch pauses its ingress ports instead of
    dropping; every byte is delivered exactly once; pause frames are counted at both
    ends and the paused senders are the incast hosts."""
    sim, qps, _ = incast(config(cc={"algorithm": "none"}), n=8, size=500_000)
    sim.run()
    c = sim.counters()
    assert c["drops"] == 0 and c["retx_bytes"] == 0 and c["duplicate_bytes"] == 0
    assert c["pfc_frames"] > 0
    assert all(q.rcv_nxt == q.size == 500_000 for q in qps)
    assert c["delivered_bytes"] == 8 * 500_000
    ports = sim.net.ports
    host_ports = [ports[q.route[0]] for q in qps]
    assert sum(p.pfc_rx[3] for p in host_ports) == c["pfc_frames"]
    assert sum(p.paused_ps[3] for p in host_ports) > 0
    assert max(p.q_peak[3] for p in ports.values() if not p.host) > 0
    # the receiver's link ran at line rate: the incast takes the serialization of all
    # frames over it (+ a few frame times of pipeline)
    wire = 8 * (500_000 + -(-500_000 // MTU) * (HDR + OVH))
    assert sim.now_ns == pytest.approx(wire * 8 / 100, rel=0.02)


def test_incast_without_pfc_drops_retransmits_and_still_delivers_exactly_once():
    """Lossy mode (PFC off), no CC, a 300 KB buffer: the switch drops, the NICs recover
    with go-back-N (NAKs, timeouts) — and every byte still arrives exactly once."""
    cfg = config(cc={"algorithm": "none"}, pfc={"enabled": False},
                 buffer={"size_bytes": 300_000}, nic={"rto_us": 50})
    sim, qps, _ = incast(cfg, n=8, size=300_000)
    sim.run()
    c = sim.counters()
    assert c["drops"] > 0
    assert c["retx_bytes"] > 0 and c["naks"] + c["timeouts"] > 0
    assert c["pfc_frames"] == 0
    assert all(q.rcv_nxt == q.size == 300_000 and q.done_ps > 0 for q in qps)
    assert c["delivered_bytes"] == 8 * 300_000  # duplicates are not delivered again
    assert c["duplicate_bytes"] >= 0


def test_ecn_marks_follow_wred():
    """No marks while the queue stays under Kmin; with Pmax = 1 and Kmin = Kmax every
    packet that finds the queue above Kmin is marked."""
    low = config(cc={"algorithm": "none"}, ecn={"kmin_bytes": 10_000_000,
                                                "kmax_bytes": 20_000_000})
    sim, _, _ = incast(low, n=4, size=200_000)
    sim.run()
    assert sim.counters()["ecn_marks"] == 0
    step = config(cc={"algorithm": "none"}, pfc={"enabled": False},
                  ecn={"kmin_bytes": 0, "kmax_bytes": 0, "pmax": 1.0})
    sim, _, bott = incast(step, n=2, size=200_000)
    sim.run()
    port = sim.net.ports[bott]
    assert 0 < port.ecn_marks < 2 * (-(-200_000 // MTU))


def test_dscp_maps_to_traffic_class_and_cnps_use_their_own_class():
    """Data goes to the class of the NIC's DSCP, CNPs to the class of cnp_dscp."""
    cfg = config(nic={"dscp": 10, "cnp_dscp": 46, "dscp_to_tc": {10: 2, 46: 5}},
                 pfc={"priorities": [2]})
    sim, qps, bott = incast(cfg, n=4, size=300_000)
    sim.run()
    assert {q.tc for q in qps} == {2}
    assert sim.net.ports[bott].q_peak[2] > 0 and sim.net.ports[bott].q_peak[3] == 0
    assert sim.counters()["cnps"] > 0
    assert sim.counters()["drops"] == 0


def test_same_seed_same_output_byte_for_byte():
    """Two runs of the same input give identical time series and counters."""
    out = []
    for _ in range(2):
        sim, _, _ = incast(config(ecn={"pmax": 0.5}, seed=3), n=4, size=200_000)
        sim.run()
        ps, qs = sim.port_series(), sim.qp_series()
        out.append(b"".join(v.tobytes() for v in (*ps.values(), *qs.values()))
                   + repr(sim.counters()).encode())
    assert out[0] == out[1]


def test_alarm_lines_for_a_pause_past_the_watchdog():
    """A watchdog detection time shorter than the pauses of an incast raises one storm
    line per paused queue (see test_watchdog.py for the semantics)."""
    cfg = config(cc={"algorithm": "none"}, pfc={"watchdog_ms": 0.001})
    sim, _, _ = incast(cfg, n=4, size=1_500_000)
    sim.run()
    lines = sim.alarms()
    assert len(lines) == len(sim.pauses()["port"]) == 4
    assert all(x.startswith("PFC watchdog: storm on ") for x in lines)
    quiet, _, _ = incast(config(cc={"algorithm": "none"}), n=1, size=300_000)
    quiet.run()
    assert quiet.alarms() == []


def test_time_series_account_for_every_byte_sent():
    """The last sample of each port's cumulative bytes equals the port's counter, and
    the queue series never exceeds the recorded peak."""
    sim, _, bott = incast(config(), n=4, size=200_000)
    sim.run()
    ps = sim.port_series()
    m = ps["arc"] == bott
    assert ps["tx_bytes"][m][-1] == sim.net.ports[bott].tx_bytes
    assert np.all(ps["queue_bytes"][m] <= max(sim.net.ports[bott].q_peak))
    assert np.all(np.diff(ps["time_ns"][m & (ps["tc"] == 3)]) > 0)
