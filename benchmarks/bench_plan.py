"""Benchmark: build + plan of the large example fabrics, on one core.

Each case runs in a fresh child process pinned to one CPU; it reports the wall time of
``build_fabric`` + ``plan_fabric`` (bisection max-flow included) and the child's peak
resident memory (the whole process: interpreter, numpy, scipy and the fabric), against
the limits of issue #2.

    python benchmarks/bench_plan.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _harness import finish, run_isolated

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    # example, time limit (s), peak memory limit (MB)
    ("hpn-pod", 2.0, 500),
    ("multiplane-8x128", 5.0, 1500),
    ("fat-tree-k64", None, None),
    ("roce-5000", None, None),
]


def _run(name: str) -> dict:
    from aifabric import build_fabric, load_spec, plan_fabric

    spec = load_spec(ROOT / "examples" / f"{name}.yaml")
    t0 = time.perf_counter()
    fabric = build_fabric(spec)
    t1 = time.perf_counter()
    plan = plan_fabric(fabric)
    t2 = time.perf_counter()
    return {"name": name, "build_s": t1 - t0, "plan_s": t2 - t1, "gpus": plan["gpus"],
            "links": fabric.n_links}


def main() -> int:
    failed = False
    print(f"{'fabric':<18} {'GPUs':>7} {'links':>8} {'build s':>8} {'plan s':>7} "
          f"{'total s':>8} {'limit s':>8} {'peak MB':>8} {'limit MB':>9}  verdict")
    results = []
    for name, t_lim, m_lim in CASES:
        r = run_isolated(_run, name)
        assert r is not None
        total = r["build_s"] + r["plan_s"]
        ok = (t_lim is None or total < t_lim) and (m_lim is None or r["peak_mb"] < m_lim)
        failed |= not ok
        print(f"{name:<18} {r['gpus']:>7,} {r['links']:>8,} {r['build_s']:>8.3f} "
              f"{r['plan_s']:>7.3f} {total:>8.3f} {t_lim or '-':>8} {r['peak_mb']:>8.0f} "
              f"{m_lim or '-':>9}  {'ok' if ok else 'OVER LIMIT'}")
        results.append(r)
    return finish(results, failed)


if __name__ == "__main__":
    sys.exit(main())
