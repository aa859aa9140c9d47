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

    python benchmarks/bench_infiniband.py [--json] [WORD ...]   (WORD: only cases naming it)
"""

from __future__ import annotations

import json
import sys
import time

from _harness import run_isolated

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


def main() -> int:
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
