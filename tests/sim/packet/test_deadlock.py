"""PFC deadlock: a cycle of mutually paused queues is found, and only when it is real."""

from __future__ import annotations

from aifabric.sim.packet.sim import Topology
from tests.sim.packet.nets import config


def _ring(two_hops: bool, stop: bool = True):
    """Four switches in a ring, a sender and a receiver on each. Flows that cross two
    ring links make a cyclic buffer dependency (each ring ingress holds frames waiting
    for the next ring link); flows that cross one do not."""
    t = Topology()
    n = 4
    s = [t.switch(f"s{i}") for i in range(n)]
    a = [t.host(f"a{i}") for i in range(n)]
    b = [t.host(f"b{i}") for i in range(n)]
    for i in range(n):
        t.link(a[i], s[i], 100, 1000)
        t.link(b[i], s[i], 100, 1000)
        t.link(s[i], s[(i + 1) % n], 100, 1000)
    sim = t.sim(config(cc={"algorithm": "none"}, deadlock_check_us=20))
    sim.stop_on_deadlock = stop
    for i in range(n):
        hops = [s[(i + k) % n] for k in range(3 if two_hops else 2)]
        sim.add_flow(t.route(a[i], *hops, b[(i + len(hops) - 1) % n]), 5_000_000)
    ring_arcs = {t.route(s[i], s[(i + 1) % n])[0] for i in range(n)}
    return sim, ring_arcs


def test_a_cyclic_buffer_dependency_deadlocks_and_is_reported():
    """The two-hop ring pauses itself into a cycle: the detector reports the four ring
    ports, the run stops, no flow finishes, and an alarm line names the cycle."""
    sim, ring_arcs = _ring(two_hops=True)
    sim.run(until_ns=3e6)
    assert len(sim.deadlocks) == 1
    d = sim.deadlocks[0]
    assert set(d["arcs"]) == ring_arcs
    assert sim.now_ns < 3e6
    assert sim.counters()["qps_done"] == 0
    assert any(line.startswith("PFC deadlock") for line in sim.alarms())


def test_the_reported_deadlock_is_permanent():
    """Run on past the detection: not one more byte is delivered (a real deadlock, not
    a transient pause)."""
    sim, _ = _ring(two_hops=True, stop=False)
    sim.run(until_ns=300_000)
    assert sim.deadlocks
    before = sim.counters()["delivered_bytes"]
    sim.run(until_ns=1_000_000)
    assert sim.counters()["delivered_bytes"] == before


def test_no_deadlock_without_a_cycle():
    """One-hop flows on the same ring: pauses (if any) never form a cycle; every flow
    finishes and nothing is reported."""
    sim, _ = _ring(two_hops=False)
    sim.run(until_ns=3e6)
    assert sim.deadlocks == []
    assert sim.counters()["qps_done"] == 4
