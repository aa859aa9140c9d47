"""Small hand-built networks for the packet simulator's tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import yaml

from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.sim import PacketSim, Topology

#: a k=4 fat-tree of 16 single-GPU 100G hosts with per-switch ECMP (a scenario's ``spec``
#: and ``routing``)
FT4 = {"spec": {"name": "ft4",
                "hosts": {"count": 16, "gpus_per_host": 1, "nics_per_host": 1,
                          "port_gbps": 100},
                "switch_models": {"k4": {"ports": 4, "port_gbps": 100}},
                "topology": {"family": "fat_tree", "k": 4, "switch": {"model": "k4"},
                             "rail_optimized": False}},
       "routing": {"policy": "ecmp", "seed_mode": "per_switch"}}
#: the same as the head of a scenario file (append ``sim:``, ``packet:``, ``traffic:``)
FT4_SCENARIO = yaml.safe_dump(FT4, sort_keys=False)


def ft4_permutation(size_bytes: int) -> dict[str, Any]:
    """A scenario: every GPU of :data:`FT4` sends ``size_bytes`` to a permutation partner."""
    return {"name": "perm", **FT4,
            "traffic": [{"pattern": "permutation", "gpus": "all", "size_bytes": size_bytes}]}


def routed(doc: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """``doc``'s fabric, workload, routed paths and transfer -> connection map, as
    ``simulate`` builds them (routing seed 0)."""
    from aifabric import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload
    from aifabric.sim.scenario import SimScenario

    scn = scenario_from_dict(doc, model=SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    paths, xconn = route_dag(f, wl.dag, scn.spec.routing, seed=0)
    return f, wl, paths, xconn


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
