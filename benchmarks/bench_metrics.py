"""Speed of ``aifabric metrics RUN_DIR`` on a 320-host packet run (issue 13: under 5 s).

The run: a k=16 fat-tree of 320 hosts at 100G (20 pods' worth of ToRs), every host
sending one 2 MB flow to a permutation partner at the same instant, DCQCN, 1000-byte
payloads, 10 us samples — the size of ``bench_packet.py``'s scenario, written by
``aifabric simulate --out`` (not timed; about 15 s). Timed: ``aifabric metrics RUN_DIR
--scenario S --out run.om`` as a user runs it (a fresh process on one core: start-up, the
fabric's labels, reading the tables, building and writing the text), best of
``--repeat``. Prints the measured time against the 5 s target and the output's size.

    python benchmarks/bench_metrics.py [--repeat 3] [--format csv|parquet] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 5.0

SCENARIO = """\
name: permutation-320
spec:
  name: fat-tree-320
  hosts: {count: 320, gpus_per_host: 1, nics_per_host: 1, port_gbps: 100}
  switch_models:
    k16: {ports: 16, port_gbps: 100}
  topology: {family: fat_tree, k: 16, switch: {model: k16}, rail_optimized: false}
routing: {policy: ecmp, seed_mode: per_switch}
traffic:
  - {pattern: permutation, gpus: all, size_bytes: 2000000}
sim: packet
packet:
  nic: {mtu_payload_bytes: 1000}
  cc: {algorithm: dcqcn}
  sample_us: 10
"""


def _pin() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _aifabric(*args: str) -> None:
    """The command in a fresh process pinned to one core (as ``_harness`` does)."""
    subprocess.run([sys.executable, "-m", "aifabric", *args], check=True,
                   stdout=subprocess.DEVNULL, preexec_fn=_pin)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--format", choices=("csv", "parquet"), default="csv")
    ap.add_argument("--keep", type=Path, help="keep the run and run.om in this folder")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    work.mkdir(parents=True, exist_ok=True)
    scn, run, om = work / "permutation-320.yaml", work / "run", work / "run.om"
    scn.write_text(SCENARIO)
    t0 = time.perf_counter()
    _aifabric("simulate", str(scn), "--out", str(run), "--format", a.format)
    print(f"simulate --out ({a.format}): {time.perf_counter() - t0:.1f} s (not timed)")
    best = float("inf")
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        _aifabric("metrics", str(run), "--scenario", str(scn), "--out", str(om))
        best = min(best, time.perf_counter() - t0)
    size = om.stat().st_size
    with om.open("rb") as fh:
        lines = sum(1 for _ in fh)
    verdict = "ok" if best < TARGET_S else "SLOWER than the target"
    print(f"metrics: {best:.2f} s (best of {a.repeat}) vs target {TARGET_S:.0f} s: {verdict}; "
          f"{lines:,} lines, {size / 1e6:.1f} MB")
    if a.keep is None:
        shutil.rmtree(work)
    sys.exit(0 if best < TARGET_S else 1)


if __name__ == "__main__":
    main()
