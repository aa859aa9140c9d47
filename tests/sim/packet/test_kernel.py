"""The compiled core's arrays: growing them mid-run changes nothing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from aifabric.sim.packet.network import Network
from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import config

LATE = 400_000


def _long_line_run(cc: str):
    """Six QPs of one NIC over a 12-hop line of switches (a route longer than the
    arrays' first width) to one receiver, and an incast of six more senders joining at
    the last switch (queues of hundreds of frames, PFC, ECN, CNPs)."""
    t = Topology()
    src, dst = t.host("src"), t.host("dst")
    late = [t.host(f"late{i}") for i in range(6)]
    sw = [t.switch(f"s{i}") for i in range(11)]
    t.link(src, sw[0], 100, 500)
    for u, v in itertools.pairwise(sw):
        t.link(u, v, 100, 500)
    t.link(sw[-1], dst, 100, 500)
    for h in late:
        t.link(h, sw[-1], 100, 500)
    sim = t.sim(config(cc={"algorithm": cc}, sample_us=5, nic={"mtu_payload_bytes": 1000}))
    qps = [sim.add_flow(t.route(src, *sw, dst), 150_000 + 1000 * i) for i in range(6)]
    qps += [sim.add_flow(t.route(h, sw[-1], dst), LATE, start_ns=20_000) for h in late]
    sim.run()
    ps, qs = sim.port_series(), sim.qp_series()
    return ([q.done_ps for q in qps], [q.rcv_nxt == q.size for q in qps], sim.counters(),
            b"".join(v.tobytes() for v in (*ps.values(), *qs.values())))


@pytest.mark.parametrize("cc", ["dcqcn", "hpcc"])
def test_growing_every_array_mid_run_gives_the_same_run(cc, monkeypatch):
    """With the frame pool, the event heap, the QP table, a NIC port's QP list and the
    route width all starting far too small (so each one grows, several times, while
    frames are in flight), the run is the same as with roomy arrays, byte for byte, and
    every QP delivers its bytes exactly once."""
    roomy = _long_line_run(cc)
    for attr, v in (("initial_frames", 2), ("initial_hops", 1), ("initial_port_qps", 1),
                    ("initial_heap", 1), ("initial_qps", 1)):
        monkeypatch.setattr(Network, attr, v)
    tight = _long_line_run(cc)
    assert all(roomy[1]) and all(tight[1])
    assert roomy[2]["duplicate_bytes"] == 0 and roomy[2]["drops"] == 0
    assert roomy[2]["delivered_bytes"] == sum(150_000 + 1000 * i for i in range(6)) + 6 * LATE
    assert roomy[0] == tight[0]
    assert roomy[2] == tight[2]
    assert roomy[3] == tight[3]
    assert np.all(np.asarray(roomy[0]) > 0)


def test_the_loop_leaves_every_arrays_reference_count_as_it_was():
    """The loop runs on borrowed views of the state's arrays (no reference count of
    their own): hundreds of calls into it (a sample every 5 us) leave each array's
    Python reference count exactly as it was, and the run delivers every byte once."""
    import sys

    t = Topology()
    src, dst = t.host("src"), t.host("dst")
    late = [t.host(f"late{i}") for i in range(4)]
    s0, s1 = t.switch("s0"), t.switch("s1")
    t.link(src, s0, 100, 500)
    t.link(s0, s1, 100, 500)
    t.link(s1, dst, 100, 500)
    for h in late:
        t.link(h, s1, 100, 500)
    sim = t.sim(config(cc={"algorithm": "dcqcn"}, sample_us=5))
    qps = [sim.add_flow(t.route(src, s0, s1, dst), 200_000)]
    qps += [sim.add_flow(t.route(h, s1, dst), 100_000) for h in late]
    net = sim.net
    net.reserve()
    before = net.S
    counts = [sys.getrefcount(before[i]) for i in range(len(before))]
    sim.run()
    after = net.S
    same = [i for i in range(len(before)) if before[i] is after[i]]
    assert len(same) >= len(before) - 4  # (an array that grew is a new object)
    assert [sys.getrefcount(before[i]) for i in same] == [counts[i] for i in same]
    assert sim.counters()["events"] > 1000
    assert all(q.rcv_nxt == q.size for q in qps)
    assert sim.counters()["duplicate_bytes"] == 0
