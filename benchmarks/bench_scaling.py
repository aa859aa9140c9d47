"""Benchmark: how plan, route and the simulators scale, 1K to 128K GPUs (issue #32 item 5).

One family at every size: the 3-tier k=128 fat-tree of Tomahawk 5 switches (400G,
rail-optimized leaves, 8 GPUs and 8 NICs per host; ``topology.pods`` as needed: 1,024 to
4,096 GPUs fit in one pod, which has no core layer; 8,192 GPUs and up are 2 to 32 pods
with cores), generated at each size; its largest point is ``bench_100k.py``'s
131,072-GPU fabric. Five stages, through the library API (:mod:`aifabric.api`):

* ``plan``: ``build_fabric`` + ``plan_fabric`` (the bisection max-flow included);
* ``route``: ``api.route`` of a ring step over every GPU (ECMP; what ``aifabric route``
  does: flows, paths, per-tier loads), the fabric built first (not timed);
* ``allreduce``: ``api.simulate`` of a ring AllReduce of 1 GiB over every GPU, 8
  channels, ECMP, flow simulator (place, compile, route, simulate, tables);
* ``alltoall``: the same with an All-to-All of 64 MiB per GPU (N x (N-1) transfers).
  The size guard refuses the All-to-Alls that would not fit ``--max-memory`` (default
  8G, the issue's memory target for a pod-scale All-to-All; the guard's own figure,
  not this machine's free memory, so the refusals are the same on every machine):
  those points are run, refused before any work, and recorded with the guard's message;
* ``packet``: ``api.simulate`` on the packet simulator of a permutation of 1 MB flows
  (every host sends to one other, DCQCN, ECMP) on a k=32 fat-tree of 100G hosts (one
  GPU and one NIC per host; 256 hosts a pod), 128 to 8,192 hosts.

Before the points, one unrecorded warm-up run per stage at its smallest size (the packet
one with 100 KB flows): the simulators' compiled loops are compiled once per checkout
(numba's cache), a cost no later run pays.

Each point runs in a fresh child process pinned to one core (``sched_setaffinity``,
one thread for numpy/numba), under a CPU-time limit (``--limit-s``, RLIMIT_CPU): a
point past it is recorded as such, never dropped. Figures are CPU seconds (user + sys,
``resource.getrusage``), not wall time: the machine may be shared. Per point:

* ``cpu_s``: the stage's CPU time, measured in the child around the stage alone;
* ``total_cpu_s``: the child's whole CPU time (imports, fabric build, stage), from
  ``os.wait4``;
* ``peak_mb``: the child's peak resident memory (the whole process: interpreter,
  numpy, scipy, the fabric and the stage), from ``os.wait4``; ``base_mb``: its resident
  memory after the imports, before any work, so ``peak_mb - base_mb`` is the work's.

Per stage it fits ``time = a * N^b`` (least squares on log-log over the measured points)
and the same for ``peak_mb - base_mb``, and prints the exponents: over every point, and
over the top of the range (the sizes within 8x of the largest), where the fixed costs no
longer flatten the curve. Refused and over-limit points are not fitted (they are printed,
written and marked on the plot). Results go to
``--out`` (default ``benchmarks/scaling.json`` and ``scaling.csv``) and the plot
(log-log, time and memory panels) to ``benchmarks/scaling.png`` (matplotlib, fixed
metadata: the same results give the same file).

    python benchmarks/bench_scaling.py [--quick] [--stages plan,route,...]
                                       [--gpus 1024,2048] [--hosts 128,256]
                                       [--limit-s 300] [--max-memory 8G] [--out DIR]
                                       [--no-plot] [--no-warmup] [--replot]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STAGES = ("plan", "route", "allreduce", "alltoall", "packet")
LABELS = {"plan": "plan (build + plan)", "route": "route (ring step)",
          "allreduce": "flow ring AllReduce 1 GiB", "alltoall": "flow All-to-All 64 MiB",
          "packet": "packet permutation 1 MB"}
GPUS = tuple(1024 << i for i in range(8))  # 1,024 .. 131,072
HOSTS = tuple(128 << i for i in range(7))  # 128 .. 8,192
QUICK_GPUS, QUICK_HOSTS = (1024, 2048), (128, 256)
FLOW_K, PACKET_K = 128, 32
#: the exponents are fitted twice: over every measured point, and over the top of the
#: range (sizes within a factor TOP_SPAN of the largest: the last three doublings),
#: where the fixed costs (a few hundredths of a second, a few MB) no longer hide the trend
TOP_SPAN = 8


# ------------------------------------------------------------------ the fit

def fit_exponent(n: Any, y: Any) -> tuple[float, float]:
    """``(a, b)`` of ``y = a * n**b``, least squares on log-log; NaNs where fewer than
    two points (or a non-positive one) leave nothing to fit."""
    import numpy as np

    n, y = np.asarray(n, dtype=float), np.asarray(y, dtype=float)
    ok = (n > 0) & (y > 0) & np.isfinite(n) & np.isfinite(y)
    if ok.sum() < 2 or np.unique(n[ok]).size < 2:
        return float("nan"), float("nan")
    b, log_a = np.polyfit(np.log(n[ok]), np.log(y[ok]), 1)
    return float(math.exp(log_a)), float(b)


# ------------------------------------------------------------------ the child

def _flow_spec(gpus: int) -> dict[str, Any]:
    return {"name": f"fat-tree-k{FLOW_K}-{gpus}",
            "description": f"3-tier fat-tree, k={FLOW_K}, Tomahawk 5, {gpus} GPUs",
            "hosts": {"count": gpus // 8, "gpus_per_host": 8, "nics_per_host": 8,
                      "port_gbps": 400},
            "topology": {"family": "fat_tree", "k": FLOW_K,
                         "switch": {"model": "tomahawk5"}, "rail_optimized": True}}


def _packet_scenario(hosts: int, size: int = 1_000_000) -> dict[str, Any]:
    return {"name": f"permutation-{hosts}",
            "spec": {"name": f"fat-tree-k{PACKET_K}-{hosts}",
                     "hosts": {"count": hosts, "gpus_per_host": 1, "nics_per_host": 1,
                               "port_gbps": 100},
                     "switch_models": {f"k{PACKET_K}": {"ports": PACKET_K,
                                                        "port_gbps": 100}},
                     "topology": {"family": "fat_tree", "k": PACKET_K,
                                  "switch": {"model": f"k{PACKET_K}"},
                                  "rail_optimized": False}},
            "routing": {"policy": "ecmp", "seed_mode": "per_switch"},
            "traffic": [{"pattern": "permutation", "gpus": "all", "size_bytes": size}],
            "sim": "packet", "packet": {"cc": {"algorithm": "dcqcn"}}}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(stage: str, n: int, warmup: bool = False) -> dict[str, Any]:
    """One point, in this (fresh) process: the stage's CPU time, what it made."""
    import aifabric as af
    from aifabric.errors import SpecError
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.scenario import SimScenario

    base = _rss_mb()
    out: dict[str, Any] = {"stage": stage, "n": n, "base_mb": base}
    try:
        if stage == "plan":
            spec = af.spec_from_dict(_flow_spec(n))
            c0 = _cpu()
            fab = af.build_fabric(spec)
            plan = af.plan_fabric(fab)
            out["cpu_s"] = _cpu() - c0
            out |= {"gpus": plan["gpus"], "links": fab.n_links,
                    "what": f"{fab.n_nodes:,} nodes, {fab.n_links:,} links"}
        elif stage == "route":
            fab = af.build_fabric(af.spec_from_dict(_flow_spec(n)))
            c0 = _cpu()
            r = af.route(fab, traffic=[{"pattern": "ring", "size_bytes": 1 << 20}],
                         policy="ecmp")
            out["cpu_s"] = _cpu() - c0
            s = r.summary["stats"]
            out |= {"gpus": n, "flows": s["flows"], "what": f"{s['flows']:,} flows"}
        elif stage in ("allreduce", "alltoall"):
            coll = ({"op": "allreduce", "size_bytes": "1GiB", "gpus": n, "channels": 8}
                    if stage == "allreduce" else
                    {"op": "alltoall", "size_bytes": "64MiB", "gpus": n})
            scn = scenario_from_dict({"name": f"{stage}-{n}", "spec": _flow_spec(n),
                                      "routing": {"policy": "ecmp"},
                                      "collectives": [coll]},
                                     base_dir=ROOT, model=SimScenario)
            fab = af.build_fabric(scn.spec)
            c0 = _cpu()
            try:
                res = af.simulate(scn, fabric=fab)
            except SpecError as err:
                out |= {"status": "refused", "cpu_s": _cpu() - c0, "gpus": n,
                        "message": str(err)}
                return out
            out["cpu_s"] = _cpu() - c0
            eng = res.summary["engine"]
            c = res.summary["collectives"][0]
            out |= {"gpus": n, "transfers": eng["transfers"],
                    "busbw_gbps": c["busbw_gbps"],
                    "what": f"{eng['transfers']:,} transfers, busbw "
                            f"{c['busbw_gbps']:.1f} Gb/s"}
        elif stage == "packet":
            scn = scenario_from_dict(_packet_scenario(n, 100_000 if warmup else 1_000_000),
                                     base_dir=ROOT, model=SimScenario)
            fab = af.build_fabric(scn.spec)
            c0 = _cpu()
            res = af.simulate(scn, fabric=fab, max_events=None)
            out["cpu_s"] = _cpu() - c0
            ev = res.summary["engine"]["events"]
            out |= {"hosts": n, "events": ev, "transfers": res.summary["engine"]["transfers"],
                    "what": f"{ev:,} events, {res.summary['engine']['transfers']:,} flows"}
        else:
            raise ValueError(stage)
    except SpecError as err:  # a refusal of the stage's input: recorded, not dropped
        out |= {"status": "refused", "message": str(err)}
        return out
    out["status"] = "ok"
    return out


def _child_main(argv: list[str]) -> int:
    stage, n, warm = argv[0], int(argv[1]), len(argv) > 2 and argv[2] == "warmup"
    out = child(stage, n, warm)
    sys.stdout.write("\n@@RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


# ------------------------------------------------------------------ the parent

def run_point(stage: str, n: int, limit_s: float, max_memory: str,
              warmup: bool = False) -> dict[str, Any]:
    """Run one point in a fresh child on one core; its record (status ok, refused,
    over_limit or failed) with the child's CPU time and peak memory from ``wait4``."""
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                               else "")
    env["AIFABRIC_MAX_MEMORY"] = max_memory
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        env[var] = "1"
    cpu_lim = max(1, math.ceil(limit_s))

    def limits() -> None:  # in the child, before exec
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_lim, cpu_lim + 5))

    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", stage, str(n)]
    if warmup:
        cmd.append("warmup")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         preexec_fn=limits, cwd=str(ROOT))
    # a backstop on wall time (a child stuck waiting, not computing): generous, as the
    # machine may be shared; the CPU limit is the real one
    timer = threading.Timer(max(120.0, 20 * limit_s), p.kill)
    timer.start()
    err_chunks: list[bytes] = []
    t_err = threading.Thread(target=lambda: err_chunks.append(p.stderr.read()))
    t_err.start()
    stdout = p.stdout.read()
    t_err.join()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    timer.cancel()
    rec: dict[str, Any] = {"stage": stage, "n": n,
                           "total_cpu_s": ru.ru_utime + ru.ru_stime,
                           "peak_mb": ru.ru_maxrss / 1024}
    line = next((ln for ln in stdout.decode(errors="replace").splitlines()
                 if ln.startswith("@@RESULT ")), None)
    if line is not None and p.returncode == 0:
        rec = json.loads(line[len("@@RESULT "):]) | rec
        return rec
    stderr = b"".join(err_chunks).decode(errors="replace").strip().splitlines()
    if p.returncode in (-9, -24) and rec["total_cpu_s"] >= cpu_lim - 1:
        rec |= {"status": "over_limit", "message": f"ran past the {cpu_lim} s CPU limit"}
    else:
        rec |= {"status": "failed", "message": f"exit {p.returncode}: "
                + (stderr[-1] if stderr else "no message")}
    return rec


def fits(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per stage: the exponents of time and of the work's memory over its ok points."""
    out = {}
    for st in STAGES:
        pts = [r for r in records if r["stage"] == st and r["status"] == "ok"]
        if not pts:
            continue
        ns = [r["n"] for r in pts]
        top = [r for r in pts if r["n"] * TOP_SPAN >= max(ns)]
        _, bt = fit_exponent(ns, [r["cpu_s"] for r in pts])
        _, bm = fit_exponent(ns, [r["peak_mb"] - r["base_mb"] for r in pts])
        _, bp = fit_exponent(ns, [r["peak_mb"] for r in pts])
        _, btt = fit_exponent([r["n"] for r in top], [r["cpu_s"] for r in top])
        _, bmt = fit_exponent([r["n"] for r in top],
                              [r["peak_mb"] - r["base_mb"] for r in top])
        out[st] = {"points": len(pts), "n_min": min(ns), "n_max": max(ns),
                   # JSON has no NaN: null where there is nothing to fit
                   "time_exponent": _num(bt), "memory_exponent": _num(bm),
                   "rss_exponent": _num(bp),
                   "top_points": len(top), "top_n_min": min(r["n"] for r in top),
                   "top_time_exponent": _num(btt), "top_memory_exponent": _num(bmt)}
    return out


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _fmt_b(x: float | None, w: int) -> str:
    return f"{'-':>{w}}" if x is None else f"{x:>{w}.2f}"


def _fmt_n(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def print_tables(records: list[dict[str, Any]], fit: dict[str, dict[str, Any]],
                 stream: Any = sys.stdout) -> None:
    def cell(r: dict[str, Any] | None) -> str:
        if r is None:
            return "-"
        if r["status"] == "ok":
            return f"{r['cpu_s']:.2f} s / {r['peak_mb']:.0f} MB"
        return {"refused": "refused (guard)", "over_limit": "over limit"}.get(
            r["status"], "failed")

    by = {(r["stage"], r["n"]): r for r in records}
    flow = [s for s in STAGES[:4] if any(r["stage"] == s for r in records)]
    if flow:
        ns = sorted({r["n"] for r in records if r["stage"] in flow})
        w = 24
        print("GPUs     " + "".join(f"{s:>{w}}" for s in flow), file=stream)
        for n in ns:
            print(f"{n:<9,}" + "".join(f"{cell(by.get((s, n))):>{w}}" for s in flow),
                  file=stream)
    if any(r["stage"] == "packet" for r in records):
        print(f"\n{'hosts':<9}{'packet':>24}{'events':>14}", file=stream)
        for n in sorted({r["n"] for r in records if r["stage"] == "packet"}):
            r = by[("packet", n)]
            ev = f"{r['events']:,}" if r.get("events") else "-"
            print(f"{n:<9,}{cell(r):>24}{ev:>14}", file=stream)
    print(f"\n{'stage':<28}{'points':>7}{'range':>14}{'time b':>8}{'memory b':>10}"
          f"{'(RSS b)':>9}{'top range':>14}{'time b':>8}{'memory b':>10}", file=stream)
    for st, f in fit.items():
        rng = f"{_fmt_n(f['n_min'])}-{_fmt_n(f['n_max'])}"
        top = f"{_fmt_n(f['top_n_min'])}-{_fmt_n(f['n_max'])}"
        print(f"{LABELS[st]:<28}{f['points']:>7}{rng:>14}{_fmt_b(f['time_exponent'], 8)}"
              f"{_fmt_b(f['memory_exponent'], 10)}{_fmt_b(f['rss_exponent'], 9)}"
              f"{top:>14}{_fmt_b(f['top_time_exponent'], 8)}"
              f"{_fmt_b(f['top_memory_exponent'], 10)}", file=stream)
    notes = [r for r in records if r["status"] != "ok"]
    for r in notes:
        print(f"{r['stage']} at {r['n']:,}: {r['status']}: {r['message']}", file=stream)


def write_results(records: list[dict[str, Any]], fit: dict[str, dict[str, Any]],
                  out: Path, meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta, "fits": fit, "points": records}
    (out / "scaling.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    cols = ["stage", "n", "status", "cpu_s", "total_cpu_s", "peak_mb", "base_mb",
            "what", "message"]
    with open(out / "scaling.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore",
                           lineterminator="\n")
        w.writeheader()
        for r in records:
            w.writerow({k: (f"{r[k]:.4f}" if isinstance(r.get(k), float) else r.get(k, ""))
                        for k in cols})


def plot(records: list[dict[str, Any]], fit: dict[str, dict[str, Any]], path: Path) -> None:
    """Log-log: stage CPU time and the work's peak memory against size, one line per
    stage (packet against hosts), refusals and over-limit points marked. Fixed
    metadata: the same records make the same bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "aifabric"
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=100)
    markers = dict(zip(STAGES, "osD^v", strict=True))
    for ax, key, ylabel in ((axes[0], "cpu_s", "CPU seconds (one core)"),
                            (axes[1], "mem", "peak memory above imports (MB)")):
        for st in STAGES:
            pts = [r for r in records if r["stage"] == st]
            ok = [r for r in pts if r["status"] == "ok"]
            if not pts:
                continue
            xs = [r["n"] for r in ok]
            ys = [r["cpu_s"] if key == "cpu_s" else r["peak_mb"] - r["base_mb"] for r in ok]
            f = fit.get(st) or {}
            kind = "time" if key == "cpu_s" else "memory"
            b, bt = f.get(f"{kind}_exponent"), f.get(f"top_{kind}_exponent")
            lab = LABELS[st] + (" (hosts)" if st == "packet" else "")
            if b is not None:
                lab += f", b = {b:.2f}"
            if bt is not None and f.get("top_points", 0) < f.get("points", 0):
                lab += f" (top {bt:.2f})"
            line, = ax.plot(xs, ys, marker=markers[st], label=lab)
            bad = [r for r in pts if r["status"] != "ok"]
            if bad and ys:
                ax.scatter([r["n"] for r in bad], [max(ys)] * len(bad), marker="x",
                           color=line.get_color(), zorder=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("GPUs (packet: hosts)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("aifabric scaling: 3-tier k=128 fat-tree (packet: k=32), "
                 "x = refused by the size guard / over the limit", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"sizes {QUICK_GPUS} GPUs, {QUICK_HOSTS} hosts")
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--gpus", help="comma-separated GPU counts (multiples of 8)")
    ap.add_argument("--hosts", help="comma-separated host counts of the packet stage")
    ap.add_argument("--limit-s", type=float, default=300.0,
                    help="CPU seconds per point (the child's whole process)")
    ap.add_argument("--max-memory", default="8G", help="the size guard's limit")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="skip the unrecorded warm-up runs (the first point of a stage "
                    "then pays for compiling its loops on a fresh checkout)")
    ap.add_argument("--replot", action="store_true",
                    help="no runs: fit, print, write and plot again the points of "
                    "OUT/scaling.json")
    args = ap.parse_args(argv)
    if args.replot:
        doc = json.loads((args.out / "scaling.json").read_text())
        records, fit = doc["points"], fits(doc["points"])
        print_tables(records, fit)
        write_results(records, fit, args.out, doc["meta"])
        plot(records, fit, args.out / "scaling.png")
        return 0
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    bad = [s for s in stages if s not in STAGES]
    if bad:
        ap.error(f"--stages {','.join(bad)}: allowed: {', '.join(STAGES)}")

    def sizes(text: str | None, default: tuple[int, ...], quick: tuple[int, ...],
              opt: str, mult: int) -> list[int]:
        if text is None:
            return list(quick if args.quick else default)
        try:
            vals = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            ap.error(f"{opt} {text!r}: allowed: comma-separated whole numbers")
        if not vals or any(v <= 0 or v % mult for v in vals):
            ap.error(f"{opt} {text!r}: allowed: positive multiples of {mult}")
        return vals

    gpus = sizes(args.gpus, GPUS, QUICK_GPUS, "--gpus", 8)
    hosts = sizes(args.hosts, HOSTS, QUICK_HOSTS, "--hosts", 2)
    points = [(s, n) for s in stages if s != "packet" for n in gpus]
    points += [("packet", n) for n in hosts if "packet" in stages]
    for st in stages if args.warmup else ():  # numba's cache: compiled once per
        # checkout, loaded by every later run
        n = min(hosts) if st == "packet" else min(gpus)
        w = run_point(st, n, args.limit_s, args.max_memory, warmup=True)
        print(f"warm-up ({st}, {n:,}; not recorded): {w['status']}, "
              f"{w['total_cpu_s']:.1f} CPU s", flush=True)
    records = []
    t0 = time.time()
    for st, n in points:
        r = run_point(st, n, args.limit_s, args.max_memory)
        records.append(r)
        shown = (f"{r['cpu_s']:.2f} CPU s, peak {r['peak_mb']:.0f} MB, {r.get('what', '')}"
                 if r["status"] == "ok" else f"{r['status']}: {r['message']}")
        print(f"{st:<10} {n:>8,}  {shown}", flush=True)
    fit = fits(records)
    print()
    print_tables(records, fit)
    meta = {"date": time.strftime("%Y-%m-%d", time.gmtime(t0)),
            "cpu": _cpu_model(), "limit_s": args.limit_s, "max_memory": args.max_memory,
            "python": sys.version.split()[0],
            "note": "CPU seconds (user + sys) of one core; peak_mb: the child's whole "
                    "process; base_mb: after imports"}
    write_results(records, fit, args.out, meta)
    if not args.no_plot:
        plot(records, fit, args.out / "scaling.png")
    print(f"\nwrote {args.out / 'scaling.json'}, scaling.csv"
          + ("" if args.no_plot else ", scaling.png"))
    # refusals and points past the limit are results; a point that crashed is not
    return 1 if any(r["status"] == "failed" for r in records) else 0


def _cpu_model() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
