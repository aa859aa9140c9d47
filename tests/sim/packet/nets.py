"""Small hand-built networks for the packet simulator's tests."""

from __future__ import annotations

from typing import Any

from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.sim import PacketSim, Topology


def config(**kw: Any) -> PacketConfig:
    return PacketConfig.model_validate(kw)


def incast(cfg: PacketConfig, n: int = 8, size: int = 500_000, gbps: float = 100,
           delay_ns: float = 1000) -> tuple[PacketSim, list, int]:
    """n hosts -> one switch -> one receiver; returns (sim, qps, bottleneck arc)."""
    t = Topology()
    s = t.switch("s")
    d = t.host("d")
    link = t.link(s, d, gbps, delay_ns)
    hs = [t.host(f"h{i}") for i in range(n)]
    for h in hs:
        t.link(h, s, gbps, delay_ns)
    sim = t.sim(cfg)
    qps = [sim.add_flow(t.route(h, s, d), size) for h in hs]
    return sim, qps, 2 * link
