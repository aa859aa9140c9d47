"""Flow completion times as users measure them (issue 12 item 7): per QP its start, first
byte sent, last byte received and last ACK back at the sender, the FCT (last byte received
- start) and the slowdown against the same flow alone on an idle path, computed in closed
form; the ``packet_fct`` table and the summary's ``packet.fct``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from aifabric.sim.packet.sim import Topology
from tests._require import require_importorskip

from .nets import FT4_SCENARIO, config, incast

MTU, HDR, OVH, ACKB = 1000, 62, 20, 64
PROPS_NS = (1000, 500, 1000)


def _ser_ns(wire_bytes: int, gbps: float) -> float:
    """Serialization of one frame, rounded to the picosecond as the simulator does."""
    return int(wire_bytes * 8000 / gbps + 0.5) / 1000


def _line(gbps: float, cfg=None):
    """h0 - s1 - s2 - h1, every link at ``gbps``, propagation PROPS_NS."""
    t = Topology()
    h0, s1, s2, h1 = t.host("h0"), t.switch("s1"), t.switch("s2"), t.host("h1")
    for (u, v), d in zip(((h0, s1), (s1, s2), (s2, h1)), PROPS_NS, strict=True):
        t.link(u, v, gbps, d)
    sim = t.sim(cfg or config(nic={"mtu_payload_bytes": MTU}))
    return sim, t.route(h0, s1, s2, h1)


@pytest.mark.parametrize("gbps", [100, 400])
@pytest.mark.parametrize("size", [1, 1000, 1001, 64_000, 1_000_000])
def test_a_lone_flow_finishes_at_the_closed_form_time_slowdown_one(gbps, size):
    """One flow on an idle 3-hop path of one rate: the last byte arrives after the
    propagation of the path, the serialization of all frames at the first hop and a full
    frame's store-and-forward at each later hop (the last frame waits behind the one
    before it); its ACK comes back over the same propagation plus an ACK frame per hop.
    The simulator's FCT and the ideal both equal that, so the slowdown is 1.00; the
    ideal sender-side completion is (frames' wire bytes)/rate + the QP's base RTT - one
    frame when every frame is full."""
    sim, route = _line(gbps)
    qp = sim.add_flow(route, size, start_ns=3)
    sim.run()
    f = sim.fct()
    n = -(-size // MTU)
    full, last = _ser_ns(MTU + HDR + OVH, gbps), _ser_ns(size - (n - 1) * MTU + HDR + OVH,
                                                         gbps)
    hops = len(route)
    rx = sum(PROPS_NS) + ((n - 1) * full + last + (hops - 1) * full if n >= 2
                          else hops * last)
    back = sum(PROPS_NS) + hops * _ser_ns(ACKB + OVH, gbps)
    assert f["start_ns"][0] == 3 and f["first_tx_ns"][0] == 3
    assert f["fct_ns"][0] == pytest.approx(rx, abs=1e-3)
    assert f["ideal_ns"][0] == pytest.approx(rx, abs=1e-3)
    assert f["slowdown"][0] == pytest.approx(1.0, abs=0.01)
    assert f["ideal_completion_ns"][0] == pytest.approx(rx + back, abs=1e-3)
    # the last ACK can queue behind the one before it (a few ns), never come sooner
    assert rx + back - 1e-3 <= f["completion_ns"][0] <= 1.01 * (rx + back)
    if size % MTU == 0:  # consistent with the QP's base RTT (Network.add_qp)
        wire = n * full
        assert f["ideal_completion_ns"][0] == pytest.approx(
            wire + qp.base_rtt_ps / 1000 - full, abs=1e-3)
    assert f["src"][0] == "h0" and f["dst"][0] == "h1"
    assert f["hops"][0] == 3 and f["bottleneck_gbps"][0] == gbps


def test_the_bottleneck_is_the_slowest_hop_and_a_lone_flow_still_gets_slowdown_one():
    """A 100G - 25G - 100G path, no congestion control (nothing slows the sender but the
    queue): every frame goes through the 25G hop once, so the FCT is the 25G
    serialization of all frames plus one frame at each 100G hop and the propagation."""
    t = Topology()
    h0, s1, s2, h1 = t.host("h0"), t.switch("s1"), t.switch("s2"), t.host("h1")
    t.link(h0, s1, 100, 1000)
    t.link(s1, s2, 25, 500)
    t.link(s2, h1, 100, 1000)
    sim = t.sim(config(nic={"mtu_payload_bytes": MTU}, cc={"algorithm": "none"}))
    size = 200_000
    sim.add_flow(t.route(h0, s1, s2, h1), size)
    sim.run()
    f = sim.fct()
    n = size // MTU
    expect = 2500 + n * _ser_ns(MTU + HDR + OVH, 25) + 2 * _ser_ns(MTU + HDR + OVH, 100)
    assert f["fct_ns"][0] == pytest.approx(expect, abs=1e-3)
    assert f["slowdown"][0] == pytest.approx(1.0, abs=0.01)
    assert f["bottleneck_gbps"][0] == 25


@pytest.mark.parametrize("size", [1000, 100_000])
def test_a_slow_receiving_host_is_the_bottleneck_of_the_ideal(size):
    """``nic.rx_gbps: 50`` on 100G links: the host takes 1000 payload bytes per 160 ns,
    slower than any link, so the last byte is delivered after one frame per link, every
    payload through the host's drain, and the propagation; the ideal counts it, and the
    lone flow's slowdown stays 1.00."""
    sim, route = _line(100, config(nic={"mtu_payload_bytes": MTU, "rx_gbps": 50},
                                   cc={"algorithm": "none"}))
    sim.add_flow(route, size)
    sim.run()
    f = sim.fct()
    expect = sum(PROPS_NS) + 3 * _ser_ns(MTU + HDR + OVH, 100) + size // MTU * 160
    assert f["fct_ns"][0] == pytest.approx(expect, abs=1e-3)
    assert f["ideal_ns"][0] == pytest.approx(expect, abs=1e-3)
    assert f["slowdown"][0] == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("cc", ["none", "dcqcn"])
def test_an_incast_is_bounded_by_the_bottleneck_and_no_flow_beats_its_ideal(cc):
    """8 -> 1 at 100G: every FCT is at least its ideal (slowdown >= 1), the last byte of
    the incast arrives after all frames crossed the receiver's link (its serialization
    bound) and, without CC, within 2% of it; the times of each flow are ordered."""
    n, size = 8, 200_000
    sim, _, _ = incast(config(cc={"algorithm": cc}, nic={"mtu_payload_bytes": MTU}),
                       n=n, size=size)
    sim.run()
    f = sim.fct()
    assert len(f["qp"]) == n and not np.isnan(f["slowdown"]).any()
    assert np.all(f["fct_ns"] >= f["ideal_ns"] - 1e-3)
    assert np.all(f["completion_ns"] >= f["ideal_completion_ns"] - 1e-3)
    assert np.all(f["start_ns"] <= f["first_tx_ns"])
    assert np.all(f["first_tx_ns"] <= f["last_rx_ns"])
    assert np.all(f["last_rx_ns"] <= f["last_ack_ns"])
    wire = n * (size + -(-size // MTU) * (HDR + OVH))
    bound = wire * 8 / 100  # ns on the receiver's 100G link
    end = f["last_rx_ns"].max() - f["start_ns"].min()
    assert end >= bound
    if cc == "none":
        assert end == pytest.approx(bound, rel=0.02)
        # the last flow to finish took the whole incast: its slowdown is bound / ideal
        assert f["slowdown"].max() == pytest.approx(bound / f["ideal_ns"][0], rel=0.03)


def test_unfinished_and_not_started_flows_are_nan():
    """A run cut short: the flow under way has a start and a first byte but NaN for
    what it did not reach; a flow that starts later has its start and nothing else."""
    sim, route = _line(100)
    sim.add_flow(route, 2_000_000)
    sim.add_flow(route, 1000, start_ns=500_000)
    sim.run(until_ns=50_000)
    f = sim.fct()
    assert f["start_ns"].tolist() == [0, 500_000]
    assert f["first_tx_ns"][0] == 0 and np.isnan(f["first_tx_ns"][1])
    for c in ("last_rx_ns", "last_ack_ns", "fct_ns", "completion_ns", "slowdown"):
        assert np.isnan(f[c]).all(), c
    assert (f["ideal_ns"] > 0).all()


def test_the_run_waits_for_the_last_acks():
    """The run goes on after the last delivery until the senders have their last ACKs
    (within 100 ns); with ``wait_for_acks`` off it stops at the delivery and the
    sender-side completion of the last flow is unknown."""
    for wait in (True, False):
        sim, route = _line(100)
        sim.wait_for_acks = wait
        sim.add_flow(route, 100_000)
        sim.run()
        f = sim.fct()
        if wait:
            assert f["last_ack_ns"][0] <= sim.now_ns <= f["last_ack_ns"][0] + 100
        else:
            assert np.isnan(f["last_ack_ns"][0])
            assert sim.now_ns == f["last_rx_ns"][0]


FT = ("name: s\n" + FT4_SCENARIO + "sim: packet\ntraffic:\n"
      "  - {pattern: permutation, gpus: all, size_bytes: 200000}\n")


def test_the_cli_writes_packet_fct_with_one_row_per_qp_and_summarizes_it(cli, tmp_path):
    """``simulate --out``: packet_fct.csv has one row per QP with ordered times and
    slowdowns >= 1; ``--json`` has packet.fct (count, slowdown and FCT percentiles)
    agreeing with the table; the console and report.md have the fct line."""
    s = tmp_path / "s.yaml"
    s.write_text(FT)
    out = tmp_path / "rep"
    r = cli("simulate", s, "--out", out)
    assert r.code == 0, r.err
    assert "fct: 16 flows; slowdown p50 " in r.out and "packet_fct.csv" in r.out
    with (out / "packet_fct.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    res = json.loads(cli("simulate", s, "--json").out)
    qps = res["packet"]["qps"]
    assert len(rows) == qps == 16
    assert {int(x["qp"]) for x in rows} == set(range(qps))
    for x in rows:
        t = [float(x[c]) for c in ("start_ns", "first_tx_ns", "last_rx_ns", "last_ack_ns")]
        assert t == sorted(t)
        assert float(x["slowdown"]) >= 1 - 1e-9
        assert float(x["fct_ns"]) == pytest.approx(t[2] - t[0])
    fc = res["packet"]["fct"]
    sd = np.array([float(x["slowdown"]) for x in rows])
    assert fc["count"] == fc["finished"] == 16
    assert fc["slowdown_max"] == pytest.approx(sd.max())
    assert fc["slowdown_p50"] == pytest.approx(np.percentile(sd, 50))
    assert fc["slowdown_p99"] == pytest.approx(np.percentile(sd, 99))
    assert fc["fct_ns_p50"] > 0 and fc["fct_ns_p99"] >= fc["fct_ns_p50"]
    md = (out / "report.md").read_text()
    assert "Flow completion: 16 flows" in md and "`packet_fct`" in md


def test_packet_fct_is_written_as_parquet_too(cli, tmp_path):
    """--format parquet writes packet_fct.parquet like the other packet tables."""
    pq = require_importorskip("pyarrow.parquet", "pyarrow")
    s = tmp_path / "s.yaml"
    s.write_text(FT)
    out = tmp_path / "rep"
    r = cli("simulate", s, "--out", out, "--format", "parquet")
    assert r.code == 0, r.err
    t = pq.read_table(Path(out) / "packet_fct.parquet")
    assert t.num_rows == 16 and "slowdown" in t.column_names
