"""Start-up time of the command line: what a user waits for before any work.

Each case is a fresh process (``aifabric`` as installed, else ``python -m aifabric``)
pinned to one core, timed from start to exit, several times; the median counts:

- ``aifabric --help`` and ``aifabric --version``: target under 0.5 s;
- ``python -c "import aifabric"``: reported (no target);
- a whole 128-host packet run, process start to exit: ``aifabric simulate`` of a k=8
  fat-tree (128 hosts at 100G, ECMP), every host sending one 100 KB flow to a
  permutation partner, DCQCN; target under 1 s (htsim, C++, takes 0.78 s for it) with
  numba's cache warm (one untimed run first fills it: the cache is ``$NUMBA_CACHE_DIR``
  if set, else a temporary folder of this benchmark, so ``--cold`` figures are never
  mixed in).

The exit code is 1 when a target is missed. Each line also gives the median CPU time
(user + system) of the runs: on a busy machine the wall figures grow, the CPU time
hardly does.

    python benchmarks/bench_startup.py [--reps 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = """\
name: startup-permutation-128
spec:
  name: fat-tree-k8-100g
  hosts: {count: 128, gpus_per_host: 1, nics_per_host: 1, port_gbps: 100}
  switch_models:
    k8: {ports: 8, port_gbps: 100}
  topology: {family: fat_tree, k: 8, switch: {model: k8}, rail_optimized: false}
routing: {policy: ecmp, seed_mode: per_switch}
traffic:
  - {pattern: permutation, gpus: all, size_bytes: 100000}
sim: packet
packet:
  cc: {algorithm: dcqcn}
"""


def _cli() -> list[str]:
    exe = shutil.which("aifabric")
    return [exe] if exe else [sys.executable, "-m", "aifabric"]


def _pin() -> None:
    # the child runs on one core (the last: the other benchmarks pin to the first)
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _time(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd``, process start to exit."""
    c0, t0 = _cpu(), time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       preexec_fn=_pin, check=False)
    dt, dc = time.perf_counter() - t0, _cpu() - c0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr.decode()[-2000:]}")
    return dt, dc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7, help="runs per case (the median counts)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    cli = _cli()
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "permutation-128.yaml"
        scenario.write_text(SCENARIO)
        env = dict(os.environ)
        env.setdefault("NUMBA_CACHE_DIR", str(Path(tmp) / "numba"))
        # as users run it: Python keeps the compiled bytecode of aifabric's modules (the
        # untimed first run writes it); with PYTHONDONTWRITEBYTECODE every start compiles
        # ~70 modules from source again (+0.1-0.25 s CPU on this machine)
        no_pyc = env.pop("PYTHONDONTWRITEBYTECODE", None) is not None
        cases = [
            ("aifabric --help", [*cli, "--help"], 0.5),
            ("aifabric --version", [*cli, "--version"], 0.5),
            ('python -c "import aifabric"', [sys.executable, "-c", "import aifabric"], None),
            ("128-host packet run (warm cache)", [*cli, "simulate", str(scenario)], 1.0),
        ]
        _time(cases[-1][1], env)  # fills numba's (and Python's) cache: the runs are warm
        rows = []
        for name, cmd, target in cases:
            runs = [_time(cmd, env) for _ in range(args.reps)]
            wall = [w for w, _ in runs]
            med = statistics.median(wall)
            rows.append({"case": name, "median_s": med, "min_s": min(wall),
                         "max_s": max(wall),
                         "cpu_median_s": statistics.median(c for _, c in runs),
                         "target_s": target,
                         "met": None if target is None else med < target})
    missed = any(r["met"] is False for r in rows)
    if args.json:
        print(json.dumps(rows, indent=2))
        sys.exit(1 if missed else 0)
    print(f"{args.reps} fresh processes per case, one core; {' '.join(cli)}")
    if no_pyc:
        print("(PYTHONDONTWRITEBYTECODE was set: unset for the runs, as a user's shell has it)")
    for r in rows:
        verdict = ("" if r["target_s"] is None else
                   f" vs target < {r['target_s']:g} s -> {'MET' if r['met'] else 'NOT MET'}")
        print(f"{r['case']:<34} median {r['median_s']:.2f} s  (min {r['min_s']:.2f}, "
              f"max {r['max_s']:.2f}; CPU {r['cpu_median_s']:.2f} s){verdict}")
    if any(r["median_s"] > 1.3 * r["cpu_median_s"] + 0.05 for r in rows):
        print("note: wall well above CPU time: the machine is busy, the wall figures are "
              "inflated (CPU time is what an idle core would take, give or take I/O)")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
