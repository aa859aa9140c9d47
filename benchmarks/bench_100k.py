"""Benchmark: 100K-GPU clusters plan, route and simulate (issue #32 item 2), on one core.

Two fabrics: eight HPN pods (``examples/hpn-pod.yaml`` with ``hosts.count: 15360``,
122,880 GPUs) and the 3-tier k=128 fat-tree of Tomahawk 5 switches (16,384 hosts x 8
GPUs = 131,072 GPUs, rail-optimized leaves). On each, a ring AllReduce of 1 GiB over
every GPU (8 channels, ECMP) on the flow simulator.

Each case runs twice, each time in a fresh child process pinned to one CPU:

* timed: build, plan (bisection max-flow included), then ``simulate`` (place, compile,
  route, simulate, result tables) with the routing alone timed apart; the child's peak
  resident memory (the whole process: interpreter, numpy, scipy, fabric and run);
* traced: the same run under ``tracemalloc`` (numpy's allocations included), the peak
  of what the fabric and the run allocate, against the size guard's estimate of it (the
  fabric's arrays, which a simulation holds, plus the workload's peak,
  :func:`aifabric.workload.estimate.estimate_workload`). The estimate must not be below
  the measured peak (the guard would let through a run that does not fit) nor more
  than twice it (it would refuse runs that fit); its node and link counts of the fabric
  must be exact.

Targets (issue #32): plan (build + plan) under 5 s; the ring AllReduce (simulate, the
routing included) under 10 s. The verdict uses the CPU time (user + sys) of each part:
on an idle core it is the wall time; on a shared machine the wall time also counts the
wait for a CPU (both are printed).

    python benchmarks/bench_100k.py [--only hpn-8pod|fat-tree-k128] [--json]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _harness import finish, run_isolated

ROOT = Path(__file__).resolve().parents[1]
PLAN_LIMIT_S, SIM_LIMIT_S = 5.0, 10.0


def _spec(name: str) -> dict[str, Any]:
    if name == "hpn-8pod":
        doc = yaml.safe_load((ROOT / "examples" / "hpn-pod.yaml").read_text())
        doc["name"] = "hpn-8pod"
        doc["hosts"]["count"] = 15360
        return doc
    return {"name": "fat-tree-k128", "description": "3-tier fat-tree, k=128, Tomahawk 5",
            "hosts": {"count": 16384, "gpus_per_host": 8, "nics_per_host": 8,
                      "port_gbps": 400},
            "topology": {"family": "fat_tree", "k": 128, "switch": {"model": "tomahawk5"},
                         "rail_optimized": True}}


def _run(name: str, traced: bool) -> dict[str, Any]:
    import tracemalloc

    from aifabric import build_fabric, load_spec, plan_fabric
    from aifabric.guard import estimate_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim import paths as sim_paths
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario
    from aifabric.workload.estimate import estimate_workload

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"{name}.yaml"
        p.write_text(yaml.safe_dump(_spec(name)))
        spec = load_spec(p)
        gpus = int(spec.hosts.count) * int(spec.hosts.gpus_per_host)
        scn = scenario_from_dict({"name": f"ring-{name}", "spec": str(p), "routing":
                                  {"policy": "ecmp"}, "collectives": [
                                      {"op": "allreduce", "size_bytes": "1GiB",
                                       "gpus": gpus, "channels": 8}]},
                                 base_dir=Path(d), model=SimScenario)
        fest = estimate_fabric(spec)
        est = fest.array_bytes + estimate_workload(scn, gpus).peak_bytes
        if traced:
            tracemalloc.start()
        t0, c0 = time.perf_counter(), time.process_time()
        f = build_fabric(spec)
        t1 = time.perf_counter()
        plan = plan_fabric(f)
        t2, c2 = time.perf_counter(), time.process_time()
        route_s = [0.0]
        real_route = sim_paths.route_dag

        def timed_route(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            out = real_route(*a, **k)
            route_s[0] += time.perf_counter() - t
            return out

        import aifabric.sim.run as sim_run

        sim_run.route_dag = timed_route  # type: ignore[assignment]
        r = simulate(scn, f)
        t3, c3 = time.perf_counter(), time.process_time()
        peak = tracemalloc.get_traced_memory()[1] if traced else 0
        if traced:
            tracemalloc.stop()
    c = r.summary["collectives"][0]
    return {"case": name, "gpus": plan["gpus"], "links": f.n_links,
            "nodes_ok": fest.nodes == f.n_nodes and fest.links == f.n_links,
            "build_s": t1 - t0, "plan_s": t2 - t1, "route_s": route_s[0],
            "sim_s": t3 - t2, "plan_cpu_s": c2 - c0, "sim_cpu_s": c3 - c2,
            "transfers": r.summary["engine"]["transfers"],
            "busbw_gbps": c["busbw_gbps"], "traced_mb": peak / 2**20,
            "est_mb": est / 2**20}


def main() -> int:
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    failed = False
    out = []
    print(f"{'case':<14} {'GPUs':>8} {'links':>8} {'plan CPU s':>10} {'(wall)':>6} "
          f"{'limit':>5} {'route s':>7} {'sim CPU s':>9} {'(wall)':>6} {'limit':>5} "
          f"{'RSS MB':>7} {'traced MB':>9} {'guard MB':>8} {'guard/traced':>12}  verdict")
    for name in ("hpn-8pod", "fat-tree-k128"):
        if only and only != name:
            continue
        r = run_isolated(_run, name, False)
        tr = run_isolated(_run, name, True)
        assert r is not None and tr is not None
        plan_s = r["build_s"] + r["plan_s"]
        ratio = tr["est_mb"] / tr["traced_mb"]
        ok = (r["plan_cpu_s"] < PLAN_LIMIT_S and r["sim_cpu_s"] < SIM_LIMIT_S
              and 1.0 <= ratio <= 2.0 and r["nodes_ok"])
        failed |= not ok
        print(f"{name:<14} {r['gpus']:>8,} {r['links']:>8,} {r['plan_cpu_s']:>10.2f} "
              f"{plan_s:>6.2f} {PLAN_LIMIT_S:>5g} {r['route_s']:>7.2f} "
              f"{r['sim_cpu_s']:>9.2f} {r['sim_s']:>6.2f} "
              f"{SIM_LIMIT_S:>5g} {r['peak_mb']:>7.0f} {tr['traced_mb']:>9.0f} "
              f"{tr['est_mb']:>8.0f} {ratio:>12.2f}  {'ok' if ok else 'OVER'}"
              + ("" if r["nodes_ok"] else "  (guard's node/link count wrong)"))
        out.append(r | {"traced_mb": tr["traced_mb"], "est_mb": tr["est_mb"]})
    return finish(out, failed)


if __name__ == "__main__":
    sys.exit(main())
