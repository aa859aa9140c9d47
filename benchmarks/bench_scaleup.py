"""Benchmark: 1,024 GB200 NVL72 domains (73,728 GPUs), on one core.

Two cases, each in a fresh child process pinned to one CPU (see ``_harness``):

* ``plan``: ``build_fabric`` + ``plan_fabric`` (scale-up domains counted, bisection
  max-flow included) of ``examples/scaleup/gb200-nvl72-x1024.yaml``; limit 5 s.
* ``hierarchical``: an 8 GiB hierarchical AllReduce over all 73,728 GPUs (ring
  reduce-scatter in each domain, a ring per rail across the 1,024 domains, all-gather
  in each domain) compiled and run in the two-dimension flow simulator; limit 30 s.
  The simulated bandwidth time is printed beside its closed form.

    python benchmarks/bench_scaleup.py [--json]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _harness import finish, run_isolated

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "scaleup" / "gb200-nvl72-x1024.yaml"
PLAN_LIMIT_S, HIER_LIMIT_S = 5.0, 30.0


def _plan() -> dict:
    from aifabric import build_fabric, load_spec, plan_fabric

    spec = load_spec(SPEC)
    t0 = time.perf_counter()
    plan = plan_fabric(build_fabric(spec))
    t = time.perf_counter() - t0
    u = plan["scaleup"]
    return {"case": "plan", "s": t, "gpus": plan["gpus"], "domains": u["domains"],
            "switch_chips": u["switch_chips"]}


def _hierarchical() -> dict:
    from aifabric import load_spec
    from aifabric.sim.twodim import net_from_spec, run_collective

    net = net_from_spec(load_spec(SPEC))
    t0 = time.perf_counter()
    r = run_collective(net, "allreduce", 8 << 30, algorithm="hierarchical",
                       protocol="Simple")
    t = time.perf_counter() - t0
    return {"case": "hierarchical", "s": t, "gpus": r.gpus, "domains": r.domains,
            "simulated_ms": r.simulated_ns / 1e6, "closed_form_ms": r.closed_form_ns / 1e6,
            "busbw_gbs": r.choice.busbw_gbs, "leaving_domains_tb": r.bytes["scaleout"] / 1e12}


def main() -> int:
    failed = False
    results = []
    print(f"{'case':<13} {'GPUs':>7} {'domains':>8} {'wall s':>7} {'limit s':>8} "
          f"{'peak MB':>8}  verdict  detail")
    for fn, limit in ((_plan, PLAN_LIMIT_S), (_hierarchical, HIER_LIMIT_S)):
        r = run_isolated(fn)
        assert r is not None
        ok = r["s"] < limit
        failed |= not ok
        detail = (f"{r['switch_chips']:,} NVLink switch chips" if r["case"] == "plan" else
                  f"simulated {r['simulated_ms']:.3f} ms vs closed form "
                  f"{r['closed_form_ms']:.3f} ms, busbw {r['busbw_gbs']:.1f} GB/s, "
                  f"{r['leaving_domains_tb']:.2f} TB left the domains")
        print(f"{r['case']:<13} {r['gpus']:>7,} {r['domains']:>8,} {r['s']:>7.2f} "
              f"{limit:>8.0f} {r['peak_mb']:>8.0f}  {'ok' if ok else 'OVER LIMIT':<7}  "
              f"{detail}")
        results.append(r)
    return finish(results, failed)


if __name__ == "__main__":
    sys.exit(main())
