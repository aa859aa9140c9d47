"""Speed of the packet simulator on the issue's reference scenario.

A 320-host 3-tier fat-tree: 5 pods, each 4 ToRs x 16 hosts at 100G and 4 aggs; 400G
ToR-agg and agg-core links; 16 cores, one link per pod to each; 1 us links. Every host
sends one 2 MB flow to a permutation partner at the same instant, DCQCN, 1000-byte
payloads. The case runs in a fresh process pinned to one core (``_harness``).
Target: under 60 s and under 1 GB (ns-3's RDMA simulator: 91.5 s DCQCN, 105 s HPCC,
380 MB on 2 cores), build + run.

The event loop is compiled by numba and cached (``__pycache__``): a machine's first run
compiles it; ``--cold`` measures that first run (an empty numba cache of its own).

Besides the speed it prints the flows' slowdowns (:meth:`PacketSim.fct`: FCT against
the same flow alone on its path) p50/p90/p99, with the NIC window (``--window``) and the
path of the ACKs (``--ack-path``) as options: ``hashed`` gives each flow's ACKs a return
route of their own random ECMP choice (a separate random stream: the data routes stay
the same), ``reverse`` the data route reversed. ``--lb spray|adaptive`` balances per
packet at every switch over all shortest paths (``packet.lb``), ``--receiver ooo``
accepts packets out of order (``packet.nic.receiver``); the reorder line says what it
cost. ``--hosts N`` sizes the tree to at least
N hosts with more pods of the same design (ceil(N / 64) pods: 1,024 hosts in 16 pods,
4,096 in 64; still non-blocking, the cores get one port per pod); ``--hosts-per-tor``
makes the ToRs larger instead (oversubscribed above 16: 52 gives 1,040 hosts at 3.25:1).

    python benchmarks/bench_packet.py [--cc dcqcn|hpcc] [--hosts-per-tor 16] [--hosts N]
                                      [--mb 2] [--ack-interval 1] [--window none|bdp|BYTES]
                                      [--ack-path hashed|reverse] [--cold] [--progress]
                                      [--limit-s 900] [--lb ecmp|spray|adaptive]
                                      [--receiver go_back_n|ooo]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

from _harness import run_isolated

from aifabric.sim.packet import PacketConfig, Topology


def build(hosts_per_tor: int, seed: int = 1, ack_path: str = "reverse", pods: int = 5):
    """The tree, the data route of every flow and its ACK route (None: reversed)."""
    t = Topology()
    tors, aggs, cores = 4, 4, 16
    core = [t.switch(f"core{i}") for i in range(cores)]
    hosts, tor_of, agg_of = [], [], []
    for p in range(pods):
        ag = [t.switch(f"agg{p}.{a}") for a in range(aggs)]
        agg_of.append(ag)
        for a, sw in enumerate(ag):
            for c in range(cores // aggs):
                t.link(sw, core[a * (cores // aggs) + c], 400, 1000)
        for r in range(tors):
            tor = t.switch(f"tor{p}.{r}")
            for sw in ag:
                t.link(tor, sw, 400, 1000)
            for h in range(hosts_per_tor):
                hid = t.host(f"h{p}.{r}.{h}")
                t.link(hid, tor, 100, 1000)
                hosts.append(hid)
                tor_of.append((p, tor))
    rng = random.Random(seed)
    back_rng = random.Random(seed + 1_000_003)  # the ACKs' own hash: data routes unchanged
    perm = list(range(len(hosts)))
    rng.shuffle(perm)

    def path(r: random.Random, i: int, j: int) -> list[int]:
        (ps, ts), (pd, td) = tor_of[i], tor_of[j]
        if ts == td:
            return t.route(hosts[i], ts, hosts[j])
        a = r.randrange(aggs)  # ECMP: a per-flow hash choice at each tier
        if ps == pd:
            return t.route(hosts[i], ts, agg_of[ps][a], td, hosts[j])
        c = a * (cores // aggs) + r.randrange(cores // aggs)
        return t.route(hosts[i], ts, agg_of[ps][a], core[c], agg_of[pd][a], td, hosts[j])

    routes, backs = [], []
    for i, j in enumerate(perm):
        if i == j:
            continue
        routes.append(path(rng, i, j))
        backs.append(path(back_rng, j, i) if ack_path == "hashed" else None)
    return t, routes, backs


def _run(cc: str, hosts_per_tor: int, mb: float, ack_interval: int,
         progress: bool = False, window: str = "none", ack_path: str = "hashed",
         pods: int = 5, lb: str = "ecmp", receiver: str = "go_back_n") -> dict:
    import numpy as np

    t0 = time.perf_counter()
    topo, routes, backs = build(hosts_per_tor, ack_path=ack_path, pods=pods)
    cfg = PacketConfig.model_validate({"cc": {"algorithm": cc},
                                       "nic": {"mtu_payload_bytes": 1000,
                                               "ack_interval_packets": ack_interval,
                                               "window": int(window) if window.isdigit()
                                               else window, "ack_path": ack_path,
                                               "receiver": receiver},
                                       "lb": {"mode": lb},
                                       "sample_us": 50, "deadlock_check_us": 200})
    sim = topo.sim(cfg)
    for r, b in zip(routes, backs, strict=True):
        sim.add_flow(r, int(mb * 1e6), ack_route=b)
    calls = []
    if progress:  # what the CLI's progress bar gets: a call every 0.1-0.5 s of wall time
        sim.progress = calls.append
    t1 = time.perf_counter()
    sim.run()
    t2 = time.perf_counter()
    f = sim.fct()
    sd = f["slowdown"][~np.isnan(f["slowdown"])]
    pct = {f"slowdown_p{q}": float(np.percentile(sd, q)) if len(sd) else float("nan")
           for q in (50, 90, 99)}
    return {"flows": len(routes), "nodes": len(topo.names), "build_s": t1 - t0,
            "run_s": t2 - t1, "progress_calls": len(calls), **sim.counters(), **pct,
            "slowdown_max": float(sd.max()) if len(sd) else float("nan"),
            "fct_p99_us": float(np.nanpercentile(f["fct_ns"], 99)) / 1e3
            if len(sd) else float("nan"),
            "hosts": sum(topo.is_host),
            "reorder": sim.reorder_summary()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", default="dcqcn")
    ap.add_argument("--hosts-per-tor", type=int, default=16)
    ap.add_argument("--hosts", type=int, default=None, help="at least this many hosts: "
                    "pods of 4 ToRs x hosts-per-tor, as many as it takes (default: 5)")
    ap.add_argument("--window", default="none", help="packet.nic.window: none, bdp or "
                    "bytes")
    ap.add_argument("--ack-path", default="hashed", choices=("hashed", "reverse"),
                    help="ACKs on their own random ECMP route, or the data route reversed")
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--lb", default="ecmp", choices=("ecmp", "spray", "adaptive"),
                    help="packet.lb.mode: each flow on its route, or per packet at every "
                    "switch")
    ap.add_argument("--receiver", default="go_back_n", choices=("go_back_n", "ooo"),
                    help="packet.nic.receiver")
    ap.add_argument("--ack-interval", type=int, default=1, help="ACK every n packets")
    ap.add_argument("--cold", action="store_true", help="compile the event loop afresh "
                    "(a machine's first run)")
    ap.add_argument("--limit-s", type=float, default=900.0)
    ap.add_argument("--progress", action="store_true", help="with progress reports (what "
                    "the CLI's progress bar costs)")
    args = ap.parse_args()
    if args.window not in ("none", "bdp") and not args.window.isdigit():
        ap.error(f"--window {args.window!r}: allowed: none, bdp or a byte count")
    hpt = args.hosts_per_tor
    pods = -(-args.hosts // (4 * hpt)) if args.hosts else 5
    with tempfile.TemporaryDirectory() as cache:
        if args.cold:  # the child (spawned) inherits it
            os.environ["NUMBA_CACHE_DIR"] = cache
        c = run_isolated(_run, args.cc, hpt, args.mb, args.ack_interval,
                         args.progress, args.window, args.ack_path, pods, args.lb,
                         args.receiver, timeout_s=args.limit_s)
    if c is None:
        print(f"ran past {args.limit_s:g} s: target (< 60 s) NOT MET")
        return
    calls = f"  ({c['progress_calls']} progress reports)" if args.progress else ""
    print(f"flows {c['flows']}  hosts {c['hosts']}  nodes {c['nodes']}  cc {args.cc}  "
          f"window {args.window}  ACKs {args.ack_path}  "
          f"ACK every {args.ack_interval} packet(s)"
          f"{'  (cold: compiling the event loop)' if args.cold else ''}{calls}")
    print(f"simulated {c['time_ns'] / 1e3:.1f} us, {c['events']:,} events, "
          f"{c['delivered_bytes'] / 1e6:.1f} MB delivered, {c['qps_done']}/{c['qps']} done, "
          f"drops {c['drops']}, PFC frames {c['pfc_frames']}, CNPs {c['cnps']}")
    print(f"slowdown (FCT / the flow alone on its path) p50 {c['slowdown_p50']:.2f}  "
          f"p90 {c['slowdown_p90']:.2f}  p99 {c['slowdown_p99']:.2f}  (max "
          f"{c['slowdown_max']:.2f}); FCT p99 {c['fct_p99_us']:.1f} us")
    ro = c["reorder"]
    print(f"lb {args.lb}, receiver {args.receiver}: out of order {ro['ooo_share']:.1%} of "
          f"data arrivals, distance p99 {ro['distance_p99_packets']} / max "
          f"{ro['distance_max_packets']} packets; NAKs {ro['naks']:,}, retransmitted "
          f"{ro['retx_bytes'] / 1e6:.1f} MB")
    print(f"build {c['build_s']:.2f} s, run {c['run_s']:.2f} s "
          f"({c['events'] / c['run_s'] / 1e6:.2f} M events/s), peak RSS {c['peak_mb']:.0f} MB")
    total = c["build_s"] + c["run_s"]
    if c["hosts"] != 320:  # the target is the 320-host reference's
        print(f"measured {total:.1f} s / {c['peak_mb']:.0f} MB ({c['hosts']:,} hosts)")
        return
    ok = total < 60 and c["peak_mb"] < 1024
    print(f"measured {total:.1f} s / {c['peak_mb']:.0f} MB vs target < 60 s / < 1024 MB "
          f"(ns-3: 91.5 s DCQCN, 105 s HPCC, 380 MB) -> {'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
