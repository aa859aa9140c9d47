"""Load balancing beyond ECMP, packet by packet, on the k=8 fat-tree permutation.

128 single-GPU hosts at 100G on a k=8 fat-tree (80 switches, per-switch ECMP seeds,
the fabric's own link latencies), every GPU sends one flow (``--mb``, default 4 MB)
to a permutation partner at the same instant; DCQCN, PFC, 4 KB payloads, the scenario
path (:func:`aifabric.sim.packet.run.run_packet`: the fabric's routes and its real ECMP
hash). Each case runs in a fresh process pinned to one core (``_harness``):

- ``ecmp``: every packet on its flow's hashed route (the default);
- ``spray`` / ``adaptive``: switch-side per-packet load balancing (``packet.lb``);
- ``oblivious`` / ``round_robin`` / ``reps``: NIC-side spraying (``packet.nic.entropy``,
  256 entropy values): the switches hash each packet's UDP source port;

all but ``ecmp`` with the out-of-order receiver (``nic.receiver: ooo``); the NIC-side
cases with fast retransmit after ``--frx`` (8) selective ACKs (what recovers a loss on a
black hole without a 1 ms timeout; the switch-side cases without, as measured when
``packet.lb`` was built: on a lossless fabric it only adds spurious repairs). Then one
spine (core) link black-holed in both directions (failed, the routing not yet converged:
the switches still hash onto it) for ``ecmp``, ``oblivious`` and ``reps``.

Targets (issue 25): spray and adaptive beat ECMP on the tail FCT (p99); REPS keeps the
tail within 20% of its no-failure tail with one failed spine link.

    python benchmarks/bench_lb.py [--mb 2] [--only ecmp,reps,...] [--limit-s 600]
"""

from __future__ import annotations

import argparse
import time

from _harness import run_isolated

FT8 = {"name": "ft8-perm",
       "spec": {"name": "ft8",
                "hosts": {"count": 128, "gpus_per_host": 1, "nics_per_host": 1,
                          "port_gbps": 100},
                "switch_models": {"k8": {"ports": 8, "port_gbps": 100}},
                "topology": {"family": "fat_tree", "k": 8, "switch": {"model": "k8"},
                             "rail_optimized": False}},
       "routing": {"policy": "ecmp", "seed_mode": "per_switch"}}

CASES = {
    "ecmp": ({"mode": "ecmp"}, "go_back_n", "fixed"),
    "spray": ({"mode": "spray"}, "ooo", "fixed"),
    "adaptive": ({"mode": "adaptive"}, "ooo", "fixed"),
    "oblivious": ({"mode": "ecmp"}, "ooo", "oblivious"),
    "round_robin": ({"mode": "ecmp"}, "ooo", "round_robin"),
    "reps": ({"mode": "ecmp"}, "ooo", "reps"),
}
FAIL_CASES = ("ecmp", "oblivious", "reps")


def _run(case: str, mb: float, fail: bool, until_ms: float, frx: int = 3,
         reps_buffer: int = 8, values: int = 256) -> dict:
    import numpy as np

    from aifabric import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.packet.config import PacketConfig
    from aifabric.sim.packet.run import run_packet
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload
    from aifabric.sim.scenario import SimScenario

    lb, rx, ent = CASES[case]
    doc = {**FT8, "traffic": [{"pattern": "permutation", "gpus": "all",
                               "size_bytes": int(mb * 1e6)}]}
    t0 = time.perf_counter()
    scn = scenario_from_dict(doc, model=SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    paths, xconn = route_dag(f, wl.dag, scn.spec.routing, seed=0)
    cfg = PacketConfig.model_validate({
        "lb": lb, "until_ms": until_ms,
        "nic": {"receiver": rx, "entropy": {"algorithm": ent, "values": values,
                                            "reps_buffer": reps_buffer},
                "fast_retransmit_packets": frx if ent != "fixed" else 0}})
    failed = ""
    if fail:  # the busiest spine link of the ECMP routes, black-holed both ways
        from aifabric.sim.packet import run as prun

        src, dst, _ = f.arcs
        tier = f.nodes.tier if hasattr(f.nodes, "tier") else None
        top = int(np.max(tier)) if tier is not None else None
        routes = prun.flow_routes(f, paths)
        use = np.bincount([a for r in routes for a in r], minlength=len(src))
        spine = (tier[dst] == top) if tier is not None else np.zeros(len(src), bool)
        arc = int(np.argmax(np.where(spine, use, -1)))
        failed = f"{f.nodes.name[src[arc]]} <-> {f.nodes.name[dst[arc]]}"
        orig = prun._make_sim

        def make(*a, **k):
            s = orig(*a, **k)
            s.blackhole([arc, arc ^ 1])
            return s

        prun._make_sim = make
    t1 = time.perf_counter()
    pr = run_packet(wl.dag, f, paths, xconn, cfg, max_events=None)
    t2 = time.perf_counter()
    fct = pr.fct
    sd = fct["slowdown"]
    done = ~np.isnan(sd)
    c = pr.counters
    ro = c.get("reorder", {})
    load = pr.arc_bytes[pr.arc_bytes > 0]
    return {"case": case, "fail": failed, "flows": len(sd), "done": int(done.sum()),
            "p50": float(np.percentile(sd[done], 50)) if done.any() else float("nan"),
            "p99": float(np.percentile(sd[done], 99)) if done.any() else float("nan"),
            "max": float(sd[done].max()) if done.any() else float("nan"),
            "fct_p99_us": float(np.percentile(fct["fct_ns"][done], 99)) / 1e3
            if done.any() else float("nan"),
            "fct_max_us": float(fct["fct_ns"][done].max()) / 1e3 if done.any()
            else float("nan"),
            "load_cv": float(load.std() / load.mean()) if len(load) else 0.0,
            "ooo": ro.get("ooo_share", 0.0), "retx_mb": c["retx_bytes"] / 1e6,
            "drops": c["drops"], "timeouts": c["timeouts"], "events": c["events"],
            "delivered": c["delivered_bytes"], "build_s": t1 - t0, "run_s": t2 - t1}


def _line(c: dict) -> str:
    return (f"{c['case']:<12} {c['done']:>3}/{c['flows']:<3} slowdown p50 {c['p50']:6.2f} "
            f"p99 {c['p99']:6.2f} max {c['max']:6.2f}  FCT p99 {c['fct_p99_us']:8.1f} us  "
            f"max {c['fct_max_us']:8.1f} us  ooo {c['ooo']:5.1%}  retx {c['retx_mb']:6.2f} MB"
            f"  drops {c['drops']:>4}  timeouts {c['timeouts']:>3}  {c['events']:>9,} events"
            f"  {c['run_s']:.1f} s  {c['peak_mb']:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--only", default="", help="comma-separated cases (default: all)")
    ap.add_argument("--no-failure", action="store_true", help="skip the failed-link runs")
    ap.add_argument("--until-ms", type=float, default=20.0,
                    help="simulated time limit (flows stuck on a black hole stop here)")
    ap.add_argument("--limit-s", type=float, default=600.0)
    ap.add_argument("--frx", type=int, default=8, help="packet.nic.fast_retransmit_packets "
                    "of the ooo cases")
    ap.add_argument("--reps-buffer", type=int, default=8,
                    help="packet.nic.entropy.reps_buffer")
    ap.add_argument("--values", type=int, default=256, help="packet.nic.entropy.values")
    args = ap.parse_args()
    only = [x for x in args.only.split(",") if x] or list(CASES)
    print(f"k=8 fat-tree, 128 hosts at 100G, permutation of {args.mb:g} MB flows, DCQCN, "
          "PFC; slowdown = FCT / the flow alone on its path")
    res = {}
    for case in only:
        c = run_isolated(_run, case, args.mb, False, args.until_ms, args.frx,
                         args.reps_buffer, args.values, timeout_s=args.limit_s)
        if c is None:
            print(f"{case}: ran past {args.limit_s:g} s")
            continue
        res[case] = c
        print(_line(c), flush=True)
    fres = {}
    if not args.no_failure:
        for case in [x for x in FAIL_CASES if x in only]:
            c = run_isolated(_run, case, args.mb, True, args.until_ms, args.frx,
                             args.reps_buffer, args.values, timeout_s=args.limit_s)
            if c is None:
                print(f"{case} (failed link): ran past {args.limit_s:g} s")
                continue
            fres[case] = c
            print(_line(c) + f"  [black hole: {c['fail']}]", flush=True)
    if "ecmp" in res:
        e = res["ecmp"]["fct_p99_us"]
        for case in ("spray", "adaptive", "oblivious", "round_robin", "reps"):
            if case in res:
                x = res[case]["fct_p99_us"]
                print(f"tail FCT p99: {case} {x:.1f} us vs ecmp {e:.1f} us -> "
                      f"{'beats' if x < e else 'does NOT beat'} ECMP ({x / e:.2f}x)")
    if "reps" in res and "reps" in fres:
        a, b = res["reps"], fres["reps"]
        ok = b["done"] == b["flows"] and b["fct_p99_us"] <= 1.2 * a["fct_p99_us"]
        print(f"REPS with one failed spine link: FCT p99 {b['fct_p99_us']:.1f} us vs "
              f"{a['fct_p99_us']:.1f} us without ({b['fct_p99_us'] / a['fct_p99_us']:.2f}x;"
              f" target <= 1.20x) -> {'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
