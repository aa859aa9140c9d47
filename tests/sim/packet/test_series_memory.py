"""What the packet run keeps of its samples and how it reads them: the series merged once
(the same table on every call), the queue plot's labels made per (port, class) equal to
labelling every row, and the deadlock check's cycle test equal to networkx's."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from aifabric.sim.packet.results import _queue_keys
from aifabric.sim.packet.sim import _has_cycle
from tests.sim.packet.nets import config, incast


def _labels_per_row(q):
    key = np.char.add(q["port"].astype(str), np.char.add(" TC", q["tc"].astype(str)))
    return np.unique(key, return_inverse=True)


def test_series_are_merged_once_and_read_the_same_every_time():
    sim, _, _ = incast(config(), n=4, size=200_000)
    sim.run()
    assert len(sim._port_blocks) > 1
    first = {k: v.copy() for k, v in sim.port_series().items()}
    assert len(sim._port_blocks) == 1  # the blocks let go: one table held
    again = sim.port_series()
    assert first.keys() == again.keys()
    for k in first:
        assert first[k].dtype == again[k].dtype and np.array_equal(first[k], again[k])
    qs1 = {k: v.copy() for k, v in sim.qp_series().items()}
    qs2 = sim.qp_series()
    assert all(np.array_equal(qs1[k], qs2[k]) for k in qs1)
    # the run can go on: later samples are added after the merged ones
    sim.run(until_ns=sim.now_ns + 50_000)
    later = sim.port_series()
    n = len(first["time_ns"])
    assert len(later["time_ns"]) > n
    assert all(np.array_equal(later[k][:n], first[k]) for k in first)


@pytest.mark.parametrize("with_arc", [True, False])
def test_queue_labels_per_pair_equal_labels_per_row(with_arc):
    """Two arcs with one name (parallel links) share a label, as labelling every row
    does; without an ``arc`` column (a table read back) the ports' names are used."""
    rng = np.random.default_rng(5)
    names = np.array(["a -> b", "a -> b", "b -> c", "c -> a", "x"], dtype=object)
    arc = rng.integers(0, len(names), 400)
    q = {"port": names[arc], "tc": rng.choice([0, 3, 6, 10], 400)}
    if with_arc:
        q["arc"] = arc.astype(np.int64)
    uniq, inv = _queue_keys(q)
    want_u, want_inv = _labels_per_row(q)
    assert uniq.tolist() == want_u.tolist()
    assert np.array_equal(inv, want_inv)


def test_queue_labels_of_an_empty_table():
    q = {"port": np.zeros(0, dtype=object), "tc": np.zeros(0, np.int64),
         "arc": np.zeros(0, np.int64)}
    uniq, inv = _queue_keys(q)
    assert len(uniq) == 0 and len(inv) == 0


def test_cycle_test_agrees_with_networkx():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        m = int(rng.integers(1, 14))
        edges = [(int(a), int(b), 3) for a, b in rng.integers(0, n, (m, 2))]
        g = nx.DiGraph([(a, b) for a, b, _ in edges])
        try:
            nx.find_cycle(g)
            cyclic = True
        except nx.NetworkXNoCycle:
            cyclic = False
        assert _has_cycle(edges) == cyclic, edges


def test_peak_rates_are_the_fastest_interval_of_each_arc():
    """``arc_peak_bps``: per arc, the most bytes it moved in one sampling interval over
    that interval (bit/s), from the recorded intervals; every arc that sent is there,
    and no rate is above the link's."""
    sim, _, _ = incast(config(), n=4, size=300_000)
    sim.run()
    want: dict[int, float] = {}
    for t0, t1, moved in sim.interval_bytes:
        for a, d in moved.items():
            if t1 > t0:
                want[a] = max(want.get(a, 0.0), d * 8e12 / (t1 - t0))
    got = sim.arc_peak_bps
    assert got.keys() == {a for a, p in sim.net.ports.items() if p.tx_bytes > 0}
    assert got == pytest.approx(want, rel=1e-12)
    # a frame is counted when it starts: one interval may hold a frame more than the
    # link carries in it, never two
    frame = (4096 + 62 + 20) * 8e12
    shortest = min(t1 - t0 for t0, t1, _ in sim.interval_bytes if t1 > t0)
    for a, bps in got.items():
        assert bps <= sim.net.ports[a].gbps * 1e9 + frame / shortest
