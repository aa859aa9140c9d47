"""Benchmark: routing large flow sets hop by hop, on one core.

Each case runs in a fresh child process pinned to one CPU. It builds the fabric (timed
apart), then times making the flows + routing them + building the flow x arc incidence
matrix, and reports the child's peak resident memory (the whole process: interpreter,
numpy, scipy, the fabric, the flows and their paths) against the limits of issue #3.

    python benchmarks/bench_route.py [--json]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _harness import finish, run_isolated

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    # name, example fabric, pattern, QPs, policy, time limit (s), peak memory limit (MB)
    ("ring step, HPN pod", "hpn-pod", {"pattern": "ring"}, 8, "ecmp", 2.0, None),
    ("all-to-all 1,024 GPUs, HPN pod", "hpn-pod",
     {"pattern": "all_to_all", "gpus": "0:15360:15"}, 1, "ecmp", 10.0, 1024),
    ("all-to-all 1,024 GPUs, fat-tree k64", "fat-tree-k64",
     {"pattern": "all_to_all", "gpus": "0:65536:64"}, 1, "ecmp", None, None),
    ("ring step, HPN pod, spray", "hpn-pod", {"pattern": "ring"}, 8, "spray", None, None),
    ("ring step, HPN pod, adaptive", "hpn-pod", {"pattern": "ring", "channels": 8}, 1,
     "adaptive", None, None),
    ("ring step, HPN pod, source_port", "hpn-pod", {"pattern": "ring", "channels": 8}, 1,
     "source_port", None, None),
]


def _run(case: tuple) -> dict:
    from pydantic import TypeAdapter

    from aifabric import build_fabric, load_spec
    from aifabric.routing import route
    from aifabric.routing.traffic import TrafficPattern, build_traffic

    name, example, pattern, qps, policy, _, _ = case
    spec = load_spec(ROOT / "examples" / f"{example}.yaml")
    t0 = time.perf_counter()
    fabric = build_fabric(spec)
    t1 = time.perf_counter()
    pat = TypeAdapter(TrafficPattern).validate_python(
        {**pattern, "qps_per_connection": qps, "size_bytes": 1 << 20})
    flows, _ = build_traffic(fabric, [pat])
    t2 = time.perf_counter()
    routed = route(fabric, flows, spec.routing.model_copy(update={"policy": policy}))
    inc = routed.incidence
    t3 = time.perf_counter()
    return {"name": name, "build_s": t1 - t0, "flows_s": t2 - t1, "route_s": t3 - t2,
            "flows": len(flows), "nnz": int(inc.nnz),
            "unreachable": int(routed.unreachable.sum())}


def main() -> int:
    failed = False
    print(f"{'case':<36} {'flows':>10} {'entries':>11} {'build s':>8} {'flows s':>8} "
          f"{'route s':>8} {'total s':>8} {'limit s':>8} {'peak MB':>8} {'limit MB':>9}  verdict")
    results = []
    for case in CASES:
        r = run_isolated(_run, case)
        assert r is not None
        t_lim, m_lim = case[5], case[6]
        total = r["flows_s"] + r["route_s"]
        ok = (t_lim is None or total < t_lim) and (m_lim is None or r["peak_mb"] < m_lim)
        ok &= r["unreachable"] == 0
        failed |= not ok
        print(f"{r['name']:<36} {r['flows']:>10,} {r['nnz']:>11,} {r['build_s']:>8.3f} "
              f"{r['flows_s']:>8.3f} {r['route_s']:>8.3f} {total:>8.3f} {t_lim or '-':>8} "
              f"{r['peak_mb']:>8.0f} {m_lim or '-':>9}  {'ok' if ok else 'OVER LIMIT'}")
        results.append(r)
    return finish(results, failed)


if __name__ == "__main__":
    sys.exit(main())
