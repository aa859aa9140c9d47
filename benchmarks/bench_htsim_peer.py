"""The packet simulator against htsim (C++), the same permutation on k-ary fat-trees.

The peer is csg-htsim's RoCE datacenter binary (``htsim_roce``, github.com/Broadcom/
csg-htsim, ``sim/datacenter``), fed by ``aifabric export SCENARIO --format htsim``: the
same fat-tree (3 tiers, k-port switches at 100 Gbit/s, the exported latencies), the same
host pairs, the same packets (each flow's frame count at the packet simulator's full
frame size). Every host sends ``--mb`` MB to its permutation partner at time 0. Both
sides run without congestion control (``htsim_roce`` has none: ``cc.algorithm: none``
here), lossless with PFC; they hash flows onto paths with different functions (and
htsim_roce reseeds its path choice from the clock in every RoceSrc, ``roce.cpp``:
``srand(time(NULL))``, so its own runs differ), so the flow completion times are compared
as distributions (the fastest flow, alone on its path, is the closest check), not flow
by flow. See the export's NOTES.md for what maps
one to one and what only approximately (queue size and PFC thresholds in htsim's
packets).

Host counts are full 3-tier fat-trees, k^3/4 hosts: 128 (k=8), 432 (k=12), 1,024
(k=16), 2,000 (k=20). Each case is a fresh process pinned to one core, timed from start
to exit (CPU = user + system of that process, wall, and its peak resident memory from
``wait4``); the sides are interleaved, ``--reps`` runs each (the median counts), after
one untimed run of the packet simulator per size (numba's cache warm; its ``--out``
tables give the flow completion times compared). The packet simulator is run as
``python -m aifabric simulate SCENARIO`` (``--json``: the summary, nothing written) and,
unless ``--no-out``, also with ``--out DIR`` (every table, the plots and the report
written). Targets (issue 32):

- 1,024 hosts: CPU time at most 0.5x htsim's;
- memory per simulated host (one QP per host here: per QP alike) at most 2x htsim's:
  the growth of peak memory from the smallest to the largest host count, divided by
  the hosts added (what each side's fixed start-up costs, the interpreter, numpy and
  numba for the one, a C++ binary for the other, do not enter);
- 128 hosts: the whole process (wall, start to exit) under 1 s.

Without an htsim binary (``--htsim PATH`` or ``$HTSIM``: the binary or its folder) it
says how to build one and measures the packet simulator alone (exit 0). With one, the
exit code is 1 when a target is missed.

    python benchmarks/bench_htsim_peer.py [--htsim PATH] [--hosts 128,432,1024] [--mb 1]
                                          [--reps 3] [--no-out] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUILD = """\
htsim is not built here (no --htsim PATH, no $HTSIM); to build the peer (C++, g++ and make):
  git clone https://github.com/Broadcom/csg-htsim && cd csg-htsim/sim
  make libhtsim.a && make -C datacenter htsim_roce
then: python benchmarks/bench_htsim_peer.py --htsim csg-htsim/sim/datacenter/htsim_roce
Measuring the packet simulator alone (no ratios, no targets checked)."""

TIME_RATIO = 0.5  # 1,024 hosts: at most this x htsim's CPU time
MEM_RATIO = 2.0  # memory per host: at most this x htsim's
SMALL_S = 1.0  # 128 hosts: whole process, wall


def scenario(hosts: int, mb: float) -> str:
    """The permutation on a full k-ary fat-tree of ``hosts`` = k^3/4 hosts at 100G."""
    k = fat_tree_k(hosts)
    return f"""\
name: htsim-peer-permutation-{hosts}
spec:
  name: fat-tree-k{k}-100g
  hosts: {{count: {hosts}, gpus_per_host: 1, nics_per_host: 1, port_gbps: 100}}
  switch_models:
    k{k}: {{ports: {k}, port_gbps: 100}}
  topology: {{family: fat_tree, k: {k}, switch: {{model: k{k}}}, rail_optimized: false}}
routing: {{policy: ecmp, seed_mode: per_switch}}
traffic:
  - {{pattern: permutation, gpus: all, size_bytes: {round(mb * 1e6)}}}
sim: packet
packet:
  cc: {{algorithm: none}}
"""


def fat_tree_k(hosts: int) -> int:
    """k of the full 3-tier fat-tree with ``hosts`` hosts (k even, k^3/4 = hosts)."""
    k = round((4 * hosts) ** (1 / 3))
    if k < 4 or k % 2 or k ** 3 // 4 != hosts:
        raise ValueError(f"{hosts} hosts: not a full 3-tier fat-tree (k^3/4 for an even "
                         "k >= 4: 16, 54, 128, 250, 432, 686, 1024, 1458, 2000, ...)")
    return k


def host_counts(text: str) -> list[int]:
    """``--hosts``: comma-separated, each a full fat-tree's host count; sorted, unique."""
    try:
        ns = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--hosts {text!r}: comma-separated integers") from None
    if not ns:
        raise ValueError("--hosts: at least one host count")
    for n in ns:
        fat_tree_k(n)
    return ns


def find_htsim(arg: str | None) -> Path | None:
    """The ``htsim_roce`` binary: ``arg``, else ``$HTSIM`` (the binary or its folder, as
    the export's run.sh takes it); None when neither is given. A path given that is not
    an executable ``htsim_roce`` is an error."""
    raw = arg if arg is not None else os.environ.get("HTSIM")
    if not raw:
        return None
    p = Path(raw).expanduser()
    if p.is_dir():
        p = p / "htsim_roce"
    if not (p.is_file() and os.access(p, os.X_OK)):
        src = "--htsim" if arg is not None else "$HTSIM"
        raise ValueError(f"{src} {raw}: no executable htsim_roce there (the binary, or "
                         "csg-htsim's sim/datacenter folder)")
    return p.resolve()


def _pin() -> None:
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def child_env() -> dict[str, str]:
    """The children's environment: as a user's shell has it, Python keeps the compiled
    bytecode of aifabric's modules (the untimed first run writes it); with
    PYTHONDONTWRITEBYTECODE every start would compile ~100 modules from source again
    (0.15-0.3 s of CPU on this project's machines)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(cmd: list[str], cwd: Path, stdout: Any = subprocess.DEVNULL) -> dict[str, float]:
    """One run of ``cmd`` on one core: wall and CPU seconds, peak RSS (MB) of that
    process (``wait4``'s own rusage, not the children's maximum)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,
                         preexec_fn=_pin, env=child_env())
    err = p.stderr.read() if p.stderr else b""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{shlex.join(cmd)} exited {p.returncode}:\n{err.decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_mb": ru.ru_maxrss / 1024}


def htsim_finished(text: str) -> list[float]:
    """The flows' "finished at" times (us) in htsim_roce's output."""
    return [float(x) for x in re.findall(r"finished at ([0-9.eE+-]+)", text)]


def ours_finished(path: Path) -> list[float]:
    """The flows' sender-side completion (us; the last ACK back, htsim's "finished at")
    in a ``packet_fct.csv``; unfinished flows left out."""
    with path.open(newline="") as fh:
        return [float(r["completion_ns"]) / 1e3 for r in csv.DictReader(fh)
                if r["completion_ns"] not in ("", "nan")]


def dist(v: list[float]) -> dict[str, float]:
    s = sorted(v)
    if not s:
        return {"n": 0}

    def q(p: float) -> float:
        return s[min(len(s) - 1, round(p * (len(s) - 1)))]
    return {"n": len(s), "min": s[0], "p50": q(0.5), "p99": q(0.99), "max": s[-1]}


def per_host(rows: dict[int, dict[str, float]], key: str = "peak_mb") -> float | None:
    """Peak memory added per host (KB) from the smallest to the largest host count."""
    ns = sorted(rows)
    if len(ns) < 2:
        return None
    a, b = ns[0], ns[-1]
    return (rows[b][key] - rows[a][key]) * 1024 / (b - a)


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--htsim", help="htsim_roce (csg-htsim's sim/datacenter binary, or "
                    "that folder); default $HTSIM")
    ap.add_argument("--hosts", default="128,432,1024", help="host counts, each k^3/4 "
                    "(default 128,432,1024)")
    ap.add_argument("--mb", type=float, default=1.0, help="MB each host sends (default 1)")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per side and size")
    ap.add_argument("--no-out", action="store_true", help="do not also time the packet "
                    "simulator with --out (tables, plots, report written)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    try:
        hosts = host_counts(args.hosts)
        htsim = find_htsim(args.htsim)
    except ValueError as e:
        ap.error(str(e))
    if args.reps < 1:
        ap.error("--reps: at least 1")
    if not 0 < args.mb <= 1000:
        ap.error("--mb: above 0, at most 1000")
    if htsim is None:
        print(BUILD)
    ours = [sys.executable, "-m", "aifabric", "simulate"]
    import aifabric  # which aifabric the runs measure (PYTHONPATH as the benchmark's)

    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cases: dict[int, dict[str, Any]] = {}
        for n in hosts:  # the files, htsim's command line, one untimed run
            d = tmp / str(n)
            d.mkdir()
            (d / "perm.yaml").write_text(scenario(n, args.mb))
            subprocess.run([sys.executable, "-m", "aifabric", "export", "perm.yaml",
                            "--format", "htsim", "--out", "htsim"], cwd=d, check=True,
                           stdout=subprocess.DEVNULL, env=child_env())
            words = shlex.split((d / "htsim" / "command.txt").read_text())
            measure([*ours, "perm.yaml", "--out", "warm"], d)  # numba's cache, FCTs
            cases[n] = {"dir": d, "htsim_cmd": [str(htsim), *words[1:]] if htsim else None,
                        "ours": [], "ours_out": [], "htsim": [],
                        "ours_fct": ours_finished(d / "warm" / "packet_fct.csv")}
        for rep in range(args.reps):  # interleaved; who goes first alternates
            for n in hosts:
                c = cases[n]
                side = ["ours", "htsim"] if rep % 2 == 0 else ["htsim", "ours"]
                for s in side:
                    if s == "htsim" and c["htsim_cmd"]:
                        with (c["dir"] / f"htsim{rep}.txt").open("wb") as fh:
                            c["htsim"].append(measure(c["htsim_cmd"], c["dir"] / "htsim",
                                                      stdout=fh))
                    elif s == "ours":
                        c["ours"].append(measure([*ours, "perm.yaml", "--json"], c["dir"]))
                        if not args.no_out:
                            c["ours_out"].append(measure([*ours, "perm.yaml", "--out",
                                                          f"out{rep}"], c["dir"]))
        rows = []
        for n in hosts:
            c = cases[n]
            r: dict[str, Any] = {"hosts": n, "k": fat_tree_k(n), "mb": args.mb,
                                 "ours": _median(c["ours"]),
                                 "ours_out": _median(c["ours_out"]) if c["ours_out"] else None,
                                 "ours_fct_us": dist(c["ours_fct"])}
            if c["htsim"]:
                r["htsim"] = _median(c["htsim"])
                r["htsim_fct_us"] = [dist(htsim_finished((c["dir"] / f"htsim{i}.txt")
                                                         .read_text()))
                                     for i in range(args.reps)]
                r["cpu_ratio"] = r["ours"]["cpu_s"] / r["htsim"]["cpu_s"]
                r["htsim_command"] = shlex.join(["htsim_roce", *c["htsim_cmd"][1:]])
            rows.append(r)
    by = {r["hosts"]: r for r in rows}
    out = {"aifabric": str(Path(aifabric.__file__).parent), "python": sys.executable,
           "htsim": str(htsim) if htsim else None, "reps": args.reps,
           "no_pyc": "PYTHONDONTWRITEBYTECODE" in os.environ, "rows": rows,
           "per_host_kb": {"ours": per_host({n: by[n]["ours"] for n in by})}}
    if not args.no_out:
        out["per_host_kb"]["ours_out"] = per_host({n: by[n]["ours_out"] for n in by})
    verdicts: list[tuple[str, bool]] = []
    if htsim:
        out["per_host_kb"]["htsim"] = per_host({n: by[n]["htsim"] for n in by})
        big = by.get(1024)
        if big:
            verdicts.append((f"1,024 hosts: CPU {big['cpu_ratio']:.2f}x htsim's "
                             f"(target <= {TIME_RATIO:g}x)", big["cpu_ratio"] <= TIME_RATIO))
        ph = out["per_host_kb"]
        if big and ph["ours"] is not None and ph["htsim"]:  # the target is at 1,024
            for key, what in (("ours", "memory per host"),
                              ("ours_out", "memory per host with --out")):
                if ph.get(key) is not None:
                    ratio = ph[key] / ph["htsim"]
                    verdicts.append((f"{what}: {ph[key]:.0f} KB vs htsim's "
                                     f"{ph['htsim']:.0f} KB = {ratio:.2f}x (target <= "
                                     f"{MEM_RATIO:g}x)", ratio <= MEM_RATIO))
    if 128 in by:
        w = by[128]["ours"]["wall_s"]
        verdicts.append((f"128 hosts: whole process {w:.2f} s wall (CPU "
                         f"{by[128]['ours']['cpu_s']:.2f} s; target < {SMALL_S:g} s)",
                         w < SMALL_S))
    out["targets"] = [{"what": w, "met": ok} for w, ok in verdicts]
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print(out, args)
    return 1 if htsim and any(not ok for _, ok in verdicts) else 0


def _print(out: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"aifabric: {out['aifabric']} ({out['python']}); htsim: {out['htsim'] or '(none)'}")
    print(f"permutation of {args.mb:g} MB per host on k-ary fat-trees, no CC, PFC; one "
          f"core, {args.reps} interleaved run(s) per side, medians")
    if out["no_pyc"]:
        print("(PYTHONDONTWRITEBYTECODE was set: unset for the runs, as a user's shell has it)")
    hdr = (f"{'hosts':>6} {'k':>3} | {'aifabric CPU':>12} {'wall':>6} {'peak':>7} | "
           f"{'--out CPU':>9} {'peak':>7} | {'htsim CPU':>9} {'wall':>6} {'peak':>7} | "
           f"{'CPU ratio':>9}")
    print(hdr)
    for r in out["rows"]:
        o, oo, h = r["ours"], r["ours_out"], r.get("htsim")
        print(f"{r['hosts']:>6} {r['k']:>3} | {o['cpu_s']:>10.2f} s {o['wall_s']:>5.2f}s "
              f"{o['peak_mb']:>4.0f} MB | "
              + (f"{oo['cpu_s']:>7.2f} s {oo['peak_mb']:>4.0f} MB | " if oo else
                 f"{'-':>9} {'-':>7} | ")
              + (f"{h['cpu_s']:>7.2f} s {h['wall_s']:>5.2f}s {h['peak_mb']:>4.0f} MB | "
                 f"{r['cpu_ratio']:>8.2f}x" if h else f"{'-':>9} {'-':>6} {'-':>7} | "))
    print("flow completion at the sender (us): min / p50 / p99 / max (flows finished)")
    print("(htsim reseeds its paths from the clock, roce.cpp: srand(time(NULL)): each of "
          "its runs is listed)")
    for r in out["rows"]:
        for side, ds in (("aifabric", [r["ours_fct_us"]]), ("htsim", r.get("htsim_fct_us", []))):
            for d in ds:
                if d["n"]:
                    print(f"{r['hosts']:>6} {side:<9} {d['min']:8.1f} {d['p50']:8.1f} "
                          f"{d['p99']:8.1f} {d['max']:8.1f}  ({d['n']:,} of {r['hosts']:,})")
    ph = out["per_host_kb"]
    print("peak memory added per host, smallest to largest run: " + (", ".join(
        f"{k} {v:.0f} KB" for k, v in ph.items() if v is not None)
        or "(needs two host counts)"))
    for t in out["targets"]:
        print(f"{t['what']} -> {'MET' if t['met'] else 'NOT MET'}")
    if any(r["ours"]["wall_s"] > 1.3 * r["ours"]["cpu_s"] + 0.05 for r in out["rows"]):
        print("note: wall well above CPU time: the machine is busy, the wall figures are "
              "inflated (and the CPU times of both sides too, htsim's more)")
    if out["rows"] and out["rows"][0].get("htsim_command"):
        print(f"htsim command ({out['rows'][-1]['hosts']} hosts): "
              f"{out['rows'][-1]['htsim_command']}")


if __name__ == "__main__":
    sys.exit(main())
