"""Benchmark: goodput of a 16,384-GPU job over 54 days, 1,000 Monte Carlo trials, on one
core (issue 15: under 10 s).

Each case runs in a fresh child process pinned to one CPU and times the whole run as
``aifabric goodput`` does it (load the scenario, build the fabric, place the job, ask the
routing model once per group of components, run the Monte Carlo), with the phases apart;
the CPU time is reported beside the wall time (a shared machine stretches the wall).

    python benchmarks/bench_goodput.py [--json]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _harness import finish, run_isolated

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "scenarios" / "goodput-16k-published.yaml"
CASES = [
    # name, sweep on?, time limit (s) for the whole run
    ("16,384 GPUs, 54 days, 1,000 trials", False, 10.0),
    ("  + sweep of 25 intervals x 250 trials", True, None),
]


def _run(case: tuple) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    from aifabric.reliability.model import run_goodput
    from aifabric.reliability.spec import GoodputScenario
    from aifabric.routing.scenario import load_scenario
    from aifabric.topology import build_fabric

    name, sweep, _ = case
    sc = load_scenario(SCENARIO, GoodputScenario)
    if not sweep:
        sc = sc.model_copy(update={"goodput": sc.goodput.model_copy(update={"sweep": None})})
    fabric = build_fabric(sc.spec)
    t1 = time.perf_counter()
    res = run_goodput(sc, fabric, trials=1000)
    t2, c2 = time.perf_counter(), time.process_time()
    s = res.summary
    return {"name": name, "load_build_s": t1 - t0, "run_s": t2 - t1, "total_s": t2 - t0,
            "cpu_s": c2 - c0, **{f"{k}_s": v for k, v in res.timing.items()},
            "interruptions": s["interruptions"]["per_trial_mean"],
            "ettr": s["ettr"]["mean"], "route_calls": s["routing"]["route_calls"]}


def main() -> int:
    failed = False
    print(f"{'case':<40} {'load s':>7} {'route s':>8} {'MC s':>7} {'total s':>8} "
          f"{'CPU s':>7} {'limit s':>8} {'peak MB':>8} {'interr.':>8} {'ETTR':>7}  verdict")
    results = []
    for case in CASES:
        r = run_isolated(_run, case)
        assert r is not None
        lim = case[2]
        ok = lim is None or r["cpu_s"] < lim
        failed |= not ok
        print(f"{r['name']:<40} {r['load_build_s']:>7.2f} {r['routing_s']:>8.2f} "
              f"{r['monte_carlo_s']:>7.2f} {r['total_s']:>8.2f} {r['cpu_s']:>7.2f} "
              f"{lim or '-':>8} {r['peak_mb']:>8.0f} {r['interruptions']:>8.1f} "
              f"{r['ettr']:>7.4f}  {'ok' if ok else 'OVER LIMIT'}")
        results.append(r)
    return finish(results, failed)


if __name__ == "__main__":
    sys.exit(main())
