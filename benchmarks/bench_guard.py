"""Benchmark: the size guard refuses runs too big for the memory limit quickly and
cheaply, each in a fresh process.

Each case runs the real command line (``python -m aifabric ...``) in a fresh child
process pinned to one CPU; it reports the child's wall time (interpreter start and
imports included), its CPU time and its peak resident memory (``os.wait4`` rusage, the
whole process), against the limits of issue #11 item 6: the 10,000,000-GPU HPN spec is
refused in under 2 s and 300 MB. The time verdict uses the CPU time (user + sys): on an
idle core it is the wall time, on a shared machine the wall time also counts the wait
for a CPU (both are printed).

    python benchmarks/bench_guard.py              # the refusals
    python benchmarks/bench_guard.py --calibrate  # measure the guard's bytes per node,
                                                  # link and transfer row (a few minutes)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _harness import finish, run_isolated

ROOT = Path(__file__).resolve().parents[1]
HPN = ROOT / "examples" / "hpn-pod.yaml"


def _cases(tmp: Path) -> list[tuple[str, list[str], float, float]]:
    doc = yaml.safe_load(HPN.read_text())
    doc["hosts"].pop("count")
    doc["hosts"]["gpus"] = 10_000_000
    big = tmp / "hpn-10m.yaml"
    big.write_text(yaml.safe_dump(doc))
    a2a = tmp / "a2a-15360.yaml"
    a2a.write_text(yaml.safe_dump({"name": "a2a", "spec": str(HPN), "collectives": [
        {"op": "alltoall", "size_bytes": "1GiB", "gpus": 15360}]}))
    route = tmp / "route-a2a.yaml"
    route.write_text(yaml.safe_dump({"name": "r", "spec": str(HPN), "traffic": [
        {"pattern": "all_to_all", "gpus": "all"}]}))
    return [
        # case, arguments, time limit (s), peak memory limit (MB)
        ("plan 10M-GPU hpn", ["plan", str(big)], 2.0, 300),
        ("export 10M-GPU hpn", ["export", str(big)], 2.0, 300),
        ("plan --gpus 10M", ["plan", "--gpus", "10000000"], 2.0, 300),
        ("simulate a2a 15,360", ["simulate", str(a2a)], 4.0, 500),
        ("route a2a 15,360", ["route", str(route)], 4.0, 500),
    ]


def _run(args: list[str]) -> dict:
    """``python -m aifabric ARGS`` in a fresh process on one core; its exit code, stderr,
    wall and CPU time and peak RSS."""
    core = min(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "aifabric", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return {"code": os.waitstatus_to_exitcode(status), "err": err.strip(), "wall_s": wall,
            "cpu_s": ru.ru_utime + ru.ru_stime, "peak_mb": ru.ru_maxrss / 1024}


def refusals() -> int:
    failed = False
    print(f"{'case':<22} {'exit':>4} {'wall s':>7} {'CPU s':>6} {'limit s':>7} "
          f"{'peak MB':>8} {'limit MB':>8}  verdict")
    results = []
    with tempfile.TemporaryDirectory() as d:
        for name, args, t_lim, m_lim in _cases(Path(d)):
            r = _run([*args, "--max-memory", "8G"])
            one_line = len(r["err"].splitlines()) >= 1 and "Traceback" not in r["err"] \
                and "--max-memory" in r["err"]
            ok = r["code"] == 2 and one_line and r["cpu_s"] < t_lim and r["peak_mb"] < m_lim
            failed |= not ok
            print(f"{name:<22} {r['code']:>4} {r['wall_s']:>7.2f} {r['cpu_s']:>6.2f} "
                  f"{t_lim:>7} {r['peak_mb']:>8.0f} {m_lim:>8}  "
                  f"{'ok' if ok else 'OVER LIMIT' if r['code'] == 2 else 'NOT REFUSED'}")
            results.append({"case": name, **r})
    print(f"\nfirst message: {results[0]['err'][:400]}")
    return finish(results, failed)


# ------------------------------------------------------------------ calibration
# numpy allocations are traced (tracemalloc): the bytes a run adds, without the
# interpreter, the libraries and the compiled kernels that the process holds anyway
# (its whole RSS is shown too; the harness measures it)
def _fabric_peak(path: str) -> dict:
    import tracemalloc
    from dataclasses import fields

    from aifabric import build_fabric, load_spec, plan_fabric
    from aifabric.guard import estimate_fabric

    spec = load_spec(path)
    est = estimate_fabric(spec)
    tracemalloc.start()
    f = build_fabric(spec)
    _, build_peak = tracemalloc.get_traced_memory()
    plan_fabric(f)
    _, plan_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    real = sum(getattr(t, x.name).nbytes for t in (f.nodes, f.links) for x in fields(t))
    return {"name": Path(path).stem, "nodes": f.n_nodes, "est_nodes": est.nodes,
            "links": f.n_links, "est_links": est.links, "array_mb": real / 2**20,
            "build_peak_mb": build_peak / 2**20, "plan_peak_mb": plan_peak / 2**20,
            "est_peak_mb": est.peak_bytes / 2**20}


def _workload_peak(sim: str, n: int, qps: int) -> dict:
    import tracemalloc

    from aifabric.guard import estimate_traffic
    from aifabric.routing.scenario import load_scenario
    from aifabric.topology import build_fabric
    from aifabric.workload.estimate import estimate_workload

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.yaml"
        doc = {"name": "cal", "spec": str(HPN), "routing": {"qps_per_connection": qps}}
        if sim == "route":
            doc["traffic"] = [{"pattern": "all_to_all", "gpus": f"0:{n}"}]
        else:
            doc |= {"sim": sim, "collectives": [{"op": "alltoall", "size_bytes": "64MiB",
                                                 "gpus": n}]}
        p.write_text(yaml.safe_dump(doc))
        if sim == "route":
            from aifabric.routing.scenario import run_scenario

            sc = load_scenario(p)
            f = build_fabric(sc.spec)
            est = estimate_traffic(sc.traffic, n, qps)
            tracemalloc.start()
            run_scenario(sc, f)
        else:
            from aifabric.sim.run import compile_workload, simulate
            from aifabric.sim.scenario import SimScenario

            sc = load_scenario(p, SimScenario)
            f = build_fabric(sc.spec)
            est = estimate_workload(sc, 15360)
            tracemalloc.start()
            simulate(sc, f, workload=compile_workload(sc, f))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return {"sim": sim, "gpus": n, "qps": qps, "rows": est.rows, "traced_mb": peak / 2**20,
            "bytes_per_row": peak / est.rows, "est_peak_mb": est.peak_bytes / 2**20}


def calibrate() -> int:
    print(f"{'fabric':<18} {'nodes':>8} {'links':>8} {'arrays MB':>9} {'build MB':>9} "
          f"{'plan MB':>8} {'build/arrays':>12} {'predicted MB':>12}")
    bad = False
    for p in sorted((ROOT / "examples").glob("*.yaml")):
        r = run_isolated(_fabric_peak, str(p))
        assert r is not None
        bad |= r["est_peak_mb"] < r["plan_peak_mb"]
        print(f"{r['name']:<18} {r['nodes']:>8,} {r['links']:>8,} {r['array_mb']:>9.1f} "
              f"{r['build_peak_mb']:>9.1f} {r['plan_peak_mb']:>8.1f} "
              f"{r['build_peak_mb'] / r['array_mb']:>12.2f} {r['est_peak_mb']:>12.1f}")
    print(f"\n{'run':<10} {'GPUs':>5} {'QPs':>3} {'rows':>10} {'traced MB':>9} {'B/row':>6} "
          f"{'predicted MB':>12} {'RSS MB':>7}")
    for sim, n, qps in [("analytic", 256, 1), ("analytic", 512, 1), ("analytic", 256, 4),
                        ("flow", 256, 1), ("flow", 512, 1), ("flow", 256, 4),
                        ("route", 256, 1), ("route", 1024, 1), ("route", 256, 4)]:
        r = run_isolated(_workload_peak, sim, n, qps)
        assert r is not None
        bad |= r["est_peak_mb"] < r["traced_mb"]
        print(f"{sim:<10} {n:>5} {qps:>3} {r['rows']:>10,} {r['traced_mb']:>9.1f} "
              f"{r['bytes_per_row']:>6.0f} {r['est_peak_mb']:>12.1f} {r['peak_mb']:>7.0f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(calibrate() if "--calibrate" in sys.argv else refusals())
