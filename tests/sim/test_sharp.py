"""SHARP AllReduce at flow level (sim/sharp.py): each host link carries the buffer once
per direction (a ring: 2(n-1)/n times), the flow engine's time equals the closed form on
an idle fabric (within 1%), and the trees follow the subnet manager's tables."""

from __future__ import annotations

import pytest

from aifabric.api import build_fabric
from aifabric.errors import SpecError
from aifabric.spec.load import spec_from_dict
from aifabric.topology import NodeKind

NDR_2TIER = {"name": "ndr-2tier", "transport": "infiniband",
             "hosts": {"count": 16, "gpus_per_host": 8, "nics_per_host": 8},
             "topology": {"family": "clos", "rail_optimized": True,
                          "leaf": {"down_ports": 8, "up_ports": 8}}}


@pytest.mark.parametrize("rail_optimized", [True, False])
def test_sharp_halves_host_link_bytes_and_meets_the_closed_form(rail_optimized):
    from aifabric.sim.sharp import sharp_allreduce

    doc = {**NDR_2TIER, "topology": {**NDR_2TIER["topology"],
                                      "rail_optimized": rail_optimized}}
    fab = build_fabric(spec_from_dict(doc))
    gpus = fab.ids(NodeKind.GPU)
    size = 1 << 30
    r = sharp_allreduce(fab, gpus, size)
    n = len(gpus)
    assert r["gpus"] == n == 128
    # every host link carries the buffer once up; a ring 2(n-1)/n times
    assert r["host_link_bytes_up"] == pytest.approx(size)
    assert r["ring_host_link_bytes_up"] == pytest.approx(2 * (n - 1) / n * size)
    assert r["host_link_bytes_up"] / r["ring_host_link_bytes_up"] == pytest.approx(
        n / (2 * (n - 1)))
    # no link of the trees carries more than the buffer (aggregation, not forwarding)
    assert r["max_link_bytes"] <= size * (1 + 1e-9)
    # the flow engine on the idle fabric: the closed form S / B + one link latency
    assert r["time_ns"] == pytest.approx(r["closed_form_ns"], rel=0.01)
    closed = size * 8 / 400 + 0  # ns at 400 Gbit/s (NDR port), latency aside
    assert r["time_ns"] == pytest.approx(closed, rel=0.01)
    # busbw: SHARP ~2(n-1)/n x the port rate; the ring's bound is the port rate
    assert r["ring_busbw_gbps"] == pytest.approx(400, rel=1e-6)
    assert r["busbw_gbps"] / r["ring_busbw_gbps"] == pytest.approx(2 * (n - 1) / n, rel=0.01)
    assert len(r["trees"]) == 8 and all(t["depth"] >= 1 for t in r["trees"])


def test_sharp_needs_infiniband_and_two_gpus():
    from aifabric.sim.sharp import sharp_allreduce

    roce = build_fabric(spec_from_dict({**NDR_2TIER, "transport": "roce"}))
    with pytest.raises(SpecError, match="transport"):
        sharp_allreduce(roce, roce.ids(NodeKind.GPU), 1 << 20)
    ib = build_fabric(spec_from_dict(NDR_2TIER))
    with pytest.raises(SpecError, match="gpus"):
        sharp_allreduce(ib, ib.ids(NodeKind.GPU)[:1], 1 << 20)
