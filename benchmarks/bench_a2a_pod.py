"""Benchmark (issue #32 item 1): an All-to-All of 1 GiB per GPU over a whole 15,360-GPU
HPN pod (``examples/hpn-pod.yaml``, 235.9 M transfers), run as exact classes
(:mod:`aifabric.sim.classes`), against the issue's limits: under 60 s of CPU on one core
and under 8 GB peak memory.

Each point runs in a fresh child process pinned to one core (``sched_setaffinity``, one
thread for numpy/numba): ``api.simulate`` of the scenario from its file (fabric build,
placement, classes, run, tables). Figures: the child's CPU time (user + sys, from
``os.wait4``) and its peak resident memory (the whole process, interpreter included).

It also compares, on 1,024 GPUs of bench_scaling.py's 3-tier fat-tree, the class run with
the per-transfer run (``classes: off``) of the same scenario: their CPU times and peak
memory, and that the collective time and the busiest link's bytes agree (the HPN design
at 1,024 GPUs runs as classes too; its per-transfer spray run needs ~24 GB).

    python benchmarks/bench_a2a_pod.py [--policies spray,adaptive] [--skip-1024]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIMIT_S, LIMIT_GB = 60.0, 8.0


def _scenario(folder: Path, gpus: int, policy: str, classes: str,
              family: str = "hpn") -> Path:
    if family == "hpn":
        spec = yaml.safe_load((ROOT / "examples" / "hpn-pod.yaml").read_text())
        if gpus < 15360:  # the same design, fewer hosts: 16 per segment
            spec["name"] = f"hpn-{gpus}"
            spec["hosts"]["count"] = gpus // 8
            spec["topology"]["hosts_per_segment"] = 16
    else:  # bench_scaling.py's 3-tier Tomahawk 5 fat-tree, rail-optimized
        sys.path.insert(0, str(HERE))
        from bench_scaling import _flow_spec

        spec = _flow_spec(gpus)
    (folder / f"spec-{family}-{gpus}.yaml").write_text(yaml.safe_dump(spec))
    scn = {"name": f"a2a-{gpus}-{policy}-{classes}", "spec": f"spec-{family}-{gpus}.yaml",
           "routing": {"policy": policy}, "classes": classes,
           "collectives": [{"op": "alltoall", "size_bytes": "1GiB", "gpus": gpus}]}
    p = folder / f"a2a-{family}-{gpus}-{policy}-{classes}.yaml"
    p.write_text(yaml.safe_dump(scn))
    return p


def _child(path: str) -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from aifabric import api
    from aifabric.errors import SpecError
    from aifabric.guard import set_limit

    set_limit("8G")  # the memory target: a per-transfer fallback is refused
    try:
        res = api.simulate(path).raw
    except SpecError as e:
        print(json.dumps({"refused": str(e)}))
        return
    s = res.summary
    lk = res.tables["links"]["bytes"]
    print(json.dumps({"classes": s.get("classes"), "time_ns": s["collectives"][0]["time_ns"],
                      "busbw_GBps": s["collectives"][0]["busbw_GBps"],
                      "transfers": s["engine"]["transfers"],
                      "max_link_bytes": float(lk.max()), "links": len(lk)}))


def measure(path: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
               PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, __file__, "--child", str(path)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    out, err = p.stdout.read(), p.stderr.read()  # type: ignore[union-attr]
    if status:
        raise SystemExit(f"{path.name} failed: {err.strip().splitlines()[-1:]}")
    r = json.loads(out.strip().splitlines()[-1])
    r.setdefault("classes", None)
    r["cpu_s"] = ru.ru_utime + ru.ru_stime
    r["peak_gb"] = ru.ru_maxrss * 1024 / 1e9
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--policies", default="spray,adaptive")
    ap.add_argument("--skip-1024", action="store_true")
    a = ap.parse_args(argv)
    if a.child:
        _child(a.child)
        return 0
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"All-to-All 1 GiB per GPU, HPN pod (15,360 GPUs), one core; limits "
              f"{LIMIT_S:.0f} s CPU, {LIMIT_GB:.0f} GB peak")
        for policy in a.policies.split(","):
            r = measure(_scenario(folder, 15360, policy, "auto"))
            if "refused" in r:
                print(f"  {policy:<9} refused ({r['cpu_s']:.1f} s CPU): "
                      f"{r['refused'].split(': ', 1)[-1]}")
                continue
            c = r["classes"] or {}
            if not c.get("used"):
                print(f"  {policy:<9} no class run: {c.get('reason')}")
                continue
            good = r["cpu_s"] < LIMIT_S and r["peak_gb"] < LIMIT_GB
            ok &= good
            print(f"  {policy:<9} {r['transfers']:,} transfers as {c['classes']} classes "
                  f"({c['arc_classes']} arc classes, {c['groups_routed']:,} groups routed, "
                  f"{c['refinement_rounds']} rounds, {c['exact']}): collective "
                  f"{r['time_ns'] / 1e6:.3f} ms, busbw {r['busbw_GBps']:.2f} GB/s; "
                  f"{r['cpu_s']:.1f} s CPU, {r['peak_gb']:.2f} GB peak -> "
                  f"{'within' if good else 'OVER'} the limits")
        if not a.skip_1024:
            print("1,024 GPUs, 3-tier Tomahawk 5 fat-tree (bench_scaling.py's), spray: "
                  "classes vs per transfer (classes: off)")
            rc = measure(_scenario(folder, 1024, "spray", "auto", "fat-tree"))
            rp = measure(_scenario(folder, 1024, "spray", "off", "fat-tree"))
            same_t = abs(rc["time_ns"] - rp["time_ns"]) <= 1e-3 * rp["time_ns"]
            same_b = abs(rc["max_link_bytes"] - rp["max_link_bytes"]) <= \
                1e-6 * rp["max_link_bytes"]
            ok &= same_t and same_b
            print(f"  per transfer: {rp['transfers']:,} transfers, {rp['cpu_s']:.1f} s CPU, "
                  f"{rp['peak_gb']:.2f} GB peak; collective {rp['time_ns'] / 1e6:.4f} ms")
            print(f"  classes:      {rc['classes']['classes']} classes, {rc['cpu_s']:.1f} s "
                  f"CPU, {rc['peak_gb']:.2f} GB peak; collective {rc['time_ns'] / 1e6:.4f} "
                  f"ms; {rp['cpu_s'] / rc['cpu_s']:.1f}x less CPU, "
                  f"{rp['peak_gb'] / rc['peak_gb']:.0f}x less memory; collective time "
                  f"{'equal' if same_t else 'DIFFERENT'}, busiest link's bytes "
                  f"{'equal' if same_b else 'DIFFERENT'}")
            # the HPN design at 1,024 GPUs: its per-transfer spray run does not fit here
            # (every flow sprayed over both planes' aggs: 23.6 GB, killed on this machine)
            r = measure(_scenario(folder, 1024, "spray", "auto"))
            print(f"  HPN design, 1,024 GPUs (8 x 16 hosts): {r['transfers']:,} transfers "
                  f"as {r['classes']['classes']} classes, {r['cpu_s']:.1f} s CPU, "
                  f"{r['peak_gb']:.2f} GB peak; collective {r['time_ns'] / 1e6:.4f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
