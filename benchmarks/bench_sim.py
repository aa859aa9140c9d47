"""Benchmark: the flow-level simulator on the HPN pod (issue #4's speed targets), on one core.

Each case runs in a fresh child process pinned to one CPU and reports the wall time of
placing + compiling + routing + simulating (the fabric build is shown apart), and the
child's peak resident memory (interpreter, numpy, scipy, fabric and run together).
ECMP routing, so hash collisions are part of the work.

Peers, measured on a 2-core machine: ASTRA-sim's analytical congestion-aware backend
takes 20.6 s for a ring AllReduce on 1,024 NPUs and 78 s (1.24 GB) for an All-to-All on
1,024, on a single switch; SimAI's packet-level mode about 6 minutes for one AllReduce
on 128 GPUs.

    python benchmarks/bench_sim.py [--only NAME] [--limit-s 900]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _harness import run_isolated

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    # name, collective, time limit (s), memory limit (MB), peer
    ("ring-allreduce-1024", {"op": "allreduce", "size_bytes": "1GiB", "gpus": 1024,
                             "channels": 8}, 1.0, None, "ASTRA-sim 20.6 s (1 switch)"),
    ("alltoall-1024", {"op": "alltoall", "size_bytes": "64MiB", "gpus": 1024}, 10.0, 1200,
     "ASTRA-sim 78 s, 1.24 GB (1 switch)"),
    ("ring-allreduce-15360", {"op": "allreduce", "size_bytes": "1GiB", "gpus": 15360,
                              "channels": 8}, 10.0, None, "-"),
]


def _run(name: str, coll: dict) -> dict:
    from aifabric import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario

    scn = scenario_from_dict({"name": name, "spec": "hpn-pod.yaml",
                              "routing": {"policy": "ecmp"}, "collectives": [coll]},
                             base_dir=ROOT / "examples", model=SimScenario)
    t0 = time.perf_counter()
    fabric = build_fabric(scn.spec)
    t1 = time.perf_counter()
    r = simulate(scn, fabric)
    t2 = time.perf_counter()
    c = r.summary["collectives"][0]
    return {"build_s": t1 - t0, "sim_s": t2 - t1,
            "busbw_gbps": c["busbw_gbps"], "time_ms": c["time_ns"] / 1e6,
            "events": r.summary["engine"]["events"],
            "transfers": r.summary["engine"]["transfers"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="run one case")
    ap.add_argument("--limit-s", type=float, default=900.0,
                    help="give up on a case after this long (reported as such)")
    args = ap.parse_args()
    failed = False
    print(f"{'case':<22} {'transfers':>10} {'build s':>8} {'sim s':>8} {'limit s':>8} "
          f"{'peak MB':>8} {'limit MB':>9} {'busbw Gb/s':>11} {'events':>7}  verdict  peer")
    for name, coll, t_lim, m_lim, peer in CASES:
        if args.only and args.only != name:
            continue
        r = run_isolated(_run, name, coll, timeout_s=args.limit_s)
        if r is None:
            print(f"{name:<22} {'':>10} {'':>8} {'>' + format(args.limit_s, 'g'):>8} "
                  f"{t_lim:>8g} {'':>8} {m_lim or '-':>9} {'':>11} {'':>7}  SLOW     {peer}")
            failed = True
            continue
        ok = r["sim_s"] < t_lim and (m_lim is None or r["peak_mb"] < m_lim)
        failed |= not ok
        print(f"{name:<22} {r['transfers']:>10,} {r['build_s']:>8.2f} {r['sim_s']:>8.2f} "
              f"{t_lim:>8g} {r['peak_mb']:>8.0f} {m_lim or '-':>9} {r['busbw_gbps']:>11.1f} "
              f"{r['events']:>7,}  {'ok' if ok else 'SLOW':<7}  {peer}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
