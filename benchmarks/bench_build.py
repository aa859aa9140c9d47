"""Benchmark: ``aifabric build`` of the 15,360-GPU HPN pod on one core, then validation.

The build runs in a fresh child process pinned to one CPU, through the real command
line (``aifabric build examples/hpn-pod.yaml --out DIR``: spec, fabric, address plan,
every file, written once into a temporary folder and moved into place). Its wall time
is compared with the issue's limit (60 s). Then, outside the timed part, every
config_db.json is validated against SONiC's YANG models with yanglint and every
frr.conf with FRR (vtysh dry run), as the tests do for the small fabrics.

    python benchmarks/bench_build.py [--no-validate] [--keep DIR]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _harness import run_isolated

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "hpn-pod.yaml"
LIMIT_S = 60.0


def _build(out: str) -> dict:
    from aifabric.cli import main

    sys.argv = ["aifabric", "build", str(EXAMPLE), "--out", out]
    t0 = time.perf_counter()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    dt = time.perf_counter() - t0
    return {"code": code, "build_s": dt}


def _validate(out: Path) -> dict:
    from aifabric.configs.frrcheck import validate_frr_confs
    from aifabric.configs.yang import validate_config_dbs

    names = sorted(p.name for p in (out / "switches").iterdir())
    t0 = time.perf_counter()
    dbs = [(n, json.loads((out / "switches" / n / "config_db.json").read_text()))
           for n in names]
    yang = validate_config_dbs(dbs)
    t1 = time.perf_counter()
    frr = validate_frr_confs([(n, (out / "switches" / n / "frr.conf").read_text())
                              for n in names])
    t2 = time.perf_counter()
    return {"switches": len(names), "yang_invalid": yang, "yang_s": t1 - t0,
            "frr_rejected": frr, "frr_s": t2 - t1}


def main() -> int:
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    tmp = Path(tempfile.mkdtemp(prefix="aifabric-bench-"))
    out = Path(keep) if keep else tmp / "build"
    try:
        r = run_isolated(_build, str(out))
        assert r is not None
        files = [f for f in out.rglob("*") if f.is_file()]
        size_mb = sum(f.stat().st_size for f in files) / 1e6
        switches = len(list((out / "switches").iterdir()))
        hosts = len(list((out / "hosts").iterdir()))
        ok = r["code"] == 0 and r["build_s"] < LIMIT_S
        print(f"{'fabric':<9} {'switches':>8} {'hosts':>6} {'files':>6} {'MB':>6} "
              f"{'build s':>8} {'limit s':>8} {'peak MB':>8}  verdict")
        print(f"{'hpn-pod':<9} {switches:>8,} {hosts:>6,} {len(files):>6,} {size_mb:>6.0f} "
              f"{r['build_s']:>8.1f} {LIMIT_S:>8.0f} {r['peak_mb']:>8.0f}  "
              f"{'ok' if ok else 'OVER LIMIT'}")
        if "--no-validate" not in sys.argv:
            try:
                v = _validate(out)
            except FileNotFoundError as e:  # no YANG models or yanglint: say so, fail
                print(f"validation not run: {e} (or pass --no-validate)")
                return 1
            print(f"validation: {v['switches']} config_db.json with yanglint in "
                  f"{v['yang_s']:.1f} s: {len(v['yang_invalid'])} invalid; "
                  f"{v['switches']} frr.conf with vtysh --dryrun in {v['frr_s']:.1f} s: "
                  f"{len({f[0] for f in v['frr_rejected']})} rejected")
            for label, msg in (v["yang_invalid"] + v["frr_rejected"])[:10]:
                print(f"  {label}: {msg}")
            ok &= not v["yang_invalid"] and not v["frr_rejected"]
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
