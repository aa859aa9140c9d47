"""Benchmark: the InfiniBand forwarding tables (OpenSM's minhop, updn and ftree, routing/
infiniband.py and routing/ftree.py) of fat-trees, on one core.

Each case runs in a fresh child process pinned to one CPU: it builds the fabric and its
subnet (timed apart), then times computing every switch's LFT, and reports the entries
written per second and the child's peak memory. What it is measured against: OpenSM
itself routes the 80-switch fat-tree of docs/infiniband.md in the lab, and the twin's
tables equal its tables entry for entry there (tests/lab/test_infiniband_lab.py); here
the question is how the twin scales past what ibsim can hold (256 switches). The ftree
cases run twice: compiled (routing/_ftree_kernel.py) and with the plain-Python walk it
replaced (tests/routing/_ftree_reference.py, byte-identical tables), the before/after.

``--packet``: the packet simulator instead (issue 27: "IB packet runs no slower per
event than RoCE runs"): the same k=16 fat-tree (1,024 hosts, 400G) and the same
permutation (every host sends 256 KiB to its partner), once as RoCE (ECMP, lossless
with PFC, DCQCN as deployed) and once as InfiniBand (minhop tables, credits per VL,
FECN/BECN), then with per-packet adaptive routing; each in a fresh child pinned to one
CPU, a small run first (numba's cache), then the events of the packet run's loop and
their wall time (the routing and result tables apart); two rounds of the three, each
case's faster round reported.

    python benchmarks/bench_infiniband.py [--json] [WORD ...]   (WORD: only cases naming it)
    python benchmarks/bench_infiniband.py --packet [--json]
"""

from __future__ import annotations

import json
import sys
import time

from _harness import best_rounds, run_isolated, time_packet_loop

CASES = [
    # name, k, engine, lmc
    ("fat-tree k=16 (320 switches, 1,024 HCA ports), minhop", 16, "minhop", 0),
    ("fat-tree k=16 (320 switches, 1,024 HCA ports), updn", 16, "updn", 0),
    ("fat-tree k=16, minhop, LMC 2", 16, "minhop", 2),
    ("fat-tree k=24 (720 switches, 3,456 HCA ports), minhop", 24, "minhop", 0),
    ("fat-tree k=24 (720 switches, 3,456 HCA ports), updn", 24, "updn", 0),
    ("fat-tree k=16 (320 switches, 1,024 HCA ports), ftree", 16, "ftree", 0),
    ("fat-tree k=24 (720 switches, 3,456 HCA ports), ftree", 24, "ftree", 0),
    ("fat-tree k=16, ftree with the Python walk (before)", 16, "ftree-python", 0),
    ("fat-tree k=24, ftree with the Python walk (before)", 24, "ftree-python", 0),
]


def _run(case: tuple) -> dict:
    from aifabric.api import build_fabric
    from aifabric.routing.infiniband import lfts, subnet
    from aifabric.spec.load import spec_from_dict

    name, k, engine, lmc = case
    if engine == "ftree-python":  # the walk as it was before it was compiled
        import os

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        from tests.routing._ftree_reference import python_router

        from aifabric.routing import ftree

        ftree._route = python_router
        engine = "ftree"
    spec = spec_from_dict({
        "name": f"ib-k{k}", "transport": "infiniband",
        "infiniband": {"routing_engine": engine, "lmc": lmc},
        "hosts": {"count": k ** 3 // 4, "gpus_per_host": 1, "nics_per_host": 1},
        "switch_models": {"sw": {"ports": k, "port_gbps": 400}},
        "topology": {"family": "fat_tree", "k": k, "switch": {"model": "sw"},
                     "rail_optimized": False}})
    t0 = time.perf_counter()
    sn = subnet(build_fabric(spec))
    t1 = time.perf_counter()
    lfts(sn, engine, lmc=lmc)  # the first call compiles the selection loop (cached)
    t2 = time.perf_counter()
    t = lfts(sn, engine, lmc=lmc)
    t3 = time.perf_counter()
    entries = int(sn.n_switches) * len(t.destinations())
    return {"name": name, "switches": int(sn.n_switches), "hca_ports": int(sn.n_ca_ports),
            "build_s": t1 - t0, "first_s": t2 - t1, "lft_s": t3 - t2, "entries": entries,
            "entries_per_s": entries / (t3 - t2)}


PACKET_CASES = [
    # name, transport, adaptive routing
    ("RoCE (ECMP, PFC, DCQCN)", "roce", False),
    ("InfiniBand (minhop LFTs, credits per VL, FECN/BECN)", "infiniband", False),
    ("InfiniBand with per-packet adaptive routing", "infiniband", True),
]


def _packet_doc(k: int, transport: str, ar: bool, size: int) -> dict:
    spec = {"name": f"k{k}-{transport}",
            "hosts": {"count": k ** 3 // 4, "gpus_per_host": 1, "nics_per_host": 1,
                      "port_gbps": 400},
            "switch_models": {"sw": {"ports": k, "port_gbps": 400}},
            "topology": {"family": "fat_tree", "k": k, "switch": {"model": "sw"},
                         "rail_optimized": False}}
    if transport == "infiniband":
        spec.update(transport="infiniband",
                    infiniband={"speed": "ndr", "routing_engine": "minhop",
                                "adaptive_routing": ar})
    return {"name": "perm", "spec": spec, "routing": {"qps_per_connection": 1},
            "traffic": [{"pattern": "permutation", "gpus": "all", "size_bytes": size}],
            "sim": "packet", "packet": {"nic": {"mtu_payload_bytes": 4096}}}


def _run_packet(case: tuple) -> dict:
    from aifabric.api import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario

    name, transport, ar = case
    timed = time_packet_loop()
    out = {}
    for k, size in ((4, 16384), (16, 262144)):  # a small run first: numba's cache
        scn = scenario_from_dict(_packet_doc(k, transport, ar, size), model=SimScenario)
        f = build_fabric(scn.spec)
        timed["s"] = 0.0
        res = simulate(scn, f)
        pk = res.summary["packet"]
        out = {"name": name, "hosts": k ** 3 // 4, "events": int(pk["events"]),
               "loop_s": timed["s"], "events_per_s": pk["events"] / timed["s"],
               "delivered_bytes": int(pk["delivered_bytes"]), "drops": int(pk["drops"]),
               "makespan_us": float(res.summary["makespan_ns"]) / 1e3}
    return out


#: rounds of the three cases, in turn (the machine's load moves: each case's best round)
ROUNDS = 2


def main_packet() -> int:
    rows = best_rounds(_run_packet, PACKET_CASES, ROUNDS, "events_per_s")
    for r in rows:
        if "--json" not in sys.argv:
            print(f"{r['name']}: {r['events']:,} events in {r['loop_s']:.2f} s = "
                  f"{r['events_per_s']:,.0f} events/s ({r['hosts']:,} hosts, makespan "
                  f"{r['makespan_us']:.1f} us, {r['drops']} drops), peak {r['peak_mb']:,.0f} MB")
    if len(rows) == len(PACKET_CASES) and "--json" not in sys.argv:
        for r in rows[1:]:
            print(f"{r['name']} / RoCE events per second: "
                  f"{r['events_per_s'] / rows[0]['events_per_s']:.2f}")
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
    return 0


def main() -> int:
    if "--packet" in sys.argv:
        return main_packet()
    rows = []
    words = [a for a in sys.argv[1:] if not a.startswith("--")]
    for case in CASES:
        if words and not any(w in case[0] for w in words):
            continue
        r = run_isolated(_run, case, timeout_s=600)
        if r is None:
            print(f"{case[0]}: ran past 600 s")
            continue
        rows.append(r)
        if "--json" not in sys.argv:
            print(f"{r['name']}: {r['entries']:,} LFT entries in {r['lft_s']:.2f} s "
                  f"({r['entries_per_s']:,.0f}/s; first call with compile {r['first_s']:.2f} s)"
                  f", fabric {r['build_s']:.2f} s, peak {r['peak_mb']:,.0f} MB")
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
