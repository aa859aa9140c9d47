"""Small hand-built networks for the packet simulator's tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.sim import PacketSim, Topology

#: a k=4 fat-tree of 16 single-GPU 100G hosts with per-switch ECMP: the head of a scenario
#: file (append ``sim:``, ``packet:``, ``traffic:``)
FT4_SCENARIO = """spec:
  name: ft4
  hosts: {count: 16, gpus_per_host: 1, nics_per_host: 1, port_gbps: 100}
  switch_models:
    k4: {ports: 4, port_gbps: 100}
  topology: {family: fat_tree, k: 4, switch: {model: k4}, rail_optimized: false}
routing: {policy: ecmp, seed_mode: per_switch}
"""


def steady_goodput(sim: PacketSim, qp: Any) -> float:
    """Delivered payload bit/s of ``qp`` between 25% and 75% of its time (samples)."""
    q = sim.qp_series()
    m = q["qp"] == qp.id
    t, d = q["time_ns"][m], q["delivered_bytes"][m]
    t0, t1 = qp.first_tx_ps / 1e3, qp.done_ps / 1e3
    i, j = np.searchsorted(t, [t0 + 0.25 * (t1 - t0), t0 + 0.75 * (t1 - t0)])
    return float((d[j] - d[i]) * 8e9 / (t[j] - t[i]))


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
