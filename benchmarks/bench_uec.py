"""The UEC calibration anchor: NSCC on uet-htsim's 8,192-node 400G leaf-spine permutation.

The UEC consortium's reference simulator (uet-htsim, ``sim/datacenter/results/
400g_nscc.txt``) publishes, for ``htsim_uec -tm perm_8192n_8192c_1MB.cm -paths 32
-linkspeed 400000 -topo leaf_spine_8192_400g.topo -q 100 -ecn 25 75 -cwnd 150
-sender_cc_only``, a tail FCT of 38.7 us (38.6172 us when built and run on this project's
machine: 54.7 s CPU, 902 MB). The network: 128 ToRs of 64 hosts down and 64 links up,
64 spines of 128 ports, 400 Gbit/s, 1 us links, no switch latency, 100-packet queues,
ECN from 25 to 75 packets; every host sends 1 MB to its permutation partner at time 0
(the connection matrix's pairs are regenerated here with the same seedless shuffle
recipe: a random permutation without fixed points, seeded ``--seed``).

Settings, all documented ``packet:`` fields, set to what uet-htsim models:

- ``nic``: ``mtu_payload_bytes`` 4086, ``header_bytes`` 64, ``wire_overhead_bytes`` 0
  (uet-htsim's data packets: 4150 bytes on the wire, no preamble or gap), ``ack_bytes``
  64, ``ack_interval_packets`` 4 (its receiver ACKs every 16 KB), ``receiver: ooo``
  with ``ooo_acks: coalesced`` (its UecSink: every packet taken, in order or not,
  counts toward the 16 KB; an ECN-marked packet, the first, a duplicate and one the
  sender flags ``ar`` are ACKed at once);
- ``buffer``: lossy (``pfc.enabled`` false), ``size_bytes`` 128 x 100 x 4150 with
  ``alpha`` 1/128: a queue may hold about 100 packets while the switch is nearly empty;
- ``ecn``: ``kmin_bytes`` 25 x 4150, ``kmax_bytes`` 75 x 4150, ``pmax`` 1.0 (htsim's
  CompositeQueue: probability 0 to 1 between the two, marked at dequeue:
  ``switch.ecn_mark: dequeue``); ``switch.trim.enabled`` (uet-htsim trims by
  default, ``-disable_trim`` off: a packet the queue would drop leaves as its header);
- ``cc``: ``nscc`` with ``network_rtt_us`` 8.33712 (uet-htsim's network_max_unloaded_rtt
  for this network), ``target_qdelay_us`` 0.75 x that (its default with trimming on),
  ``init_window_bytes`` 150 x 4150 (``-cwnd 150``), the rest NSCC's defaults;
- load balancing: the NIC's entropy values, ``--ev reps --evs 32`` (default): each
  packet's EV chosen by REPS over 32 values (``packet.nic.entropy``), hashed by the
  switches (``lb.mode: ecmp``), as uet-htsim's ``-paths 32``; any other ``--ev NAME``
  (oblivious, round_robin) is passed as ``packet.nic.entropy.algorithm`` the same way;
  ``--ev spray``: per-packet random spraying at the switches (``packet.lb.mode:
  spray``); ``--ev ecmp`` each flow on its hash; ``--set KEY=VALUE`` sets any other
  ``packet:`` field (dotted path), e.g. ``--set switch.trim.enabled=false`` (no
  trimming: a drop waits for the retransmission timeout) or ``--set
  nic.ooo_acks=per_packet`` (a selective ACK for every packet ahead of a hole).

The case runs in a fresh process pinned to one core (``_harness``); it prints the tail
(max) FCT against the reference (target: within 10%), the CPU time of build + run
(target: under 30 s) and the peak memory (target: under 1 GB). An FCT here is a flow's
completion at its sender (``completion_ns``: the ACK of its last byte is back), what
uet-htsim prints as "finished at".

    python benchmarks/bench_uec.py [--ev reps|NAME|spray|ecmp] [--evs 32] [--hosts 8192]
                                   [--seed 1] [--set KEY=VALUE ...] [--limit-s 600]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from typing import Any

from _harness import run_isolated

from aifabric.sim.packet import PacketConfig, Topology

REF_TAIL_US = 38.7  # uet-htsim's published tail FCT (results/400g_nscc.txt: 38.7065)
REF_HERE_US = 38.6172  # uet-htsim built and run on this project's machine
PKT = 4150  # uet-htsim's data packet on the wire
RTT_US = 8.33712  # uet-htsim's network_max_unloaded_rtt of this network


def build(hosts: int, seed: int) -> tuple[Topology, list[list[int]]]:
    """The leaf-spine (64 hosts per ToR, 64 spines) and one route per permutation flow
    through a spine of the flow's hash."""
    per_tor, spines = 64, 64
    t = Topology()
    sp = [t.switch(f"spine{i}") for i in range(spines)]
    hs, tor_of = [], []
    for r in range(-(-hosts // per_tor)):
        tor = t.switch(f"tor{r}")
        for s in sp:
            t.link(tor, s, 400, 1000)
        for h in range(per_tor):
            if len(hs) < hosts:
                hs.append(t.host(f"h{r}.{h}"))
                t.link(hs[-1], tor, 400, 1000)
                tor_of.append(tor)
    rng = random.Random(seed)
    while True:  # a permutation without fixed points
        perm = list(range(len(hs)))
        rng.shuffle(perm)
        if all(i != j for i, j in enumerate(perm)):
            break
    routes = []
    for i, j in enumerate(perm):
        a, b = tor_of[i], tor_of[j]
        routes.append(t.route(hs[i], a, hs[j]) if a == b else
                      t.route(hs[i], a, sp[rng.randrange(spines)], b, hs[j]))
    return t, routes


def settings(ev: str, evs: int, sets: list[str]) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "nic": {"mtu_payload_bytes": 4086, "header_bytes": 64, "wire_overhead_bytes": 0,
                "ack_bytes": 64, "ack_interval_packets": 4, "receiver": "ooo",
                "ooo_acks": "coalesced"},
        "pfc": {"enabled": False},
        "buffer": {"size_bytes": 128 * 100 * PKT, "alpha": 1 / 128},
        "ecn": {"kmin_bytes": 25 * PKT, "kmax_bytes": 75 * PKT, "pmax": 1.0},
        "switch": {"ecn_mark": "dequeue", "trim": {"enabled": True}},
        "cc": {"algorithm": "nscc", "nscc": {"network_rtt_us": RTT_US,
                                             "target_qdelay_us": 0.75 * RTT_US,
                                             "init_window_bytes": 150 * PKT}},
        "lb": {"mode": "spray" if ev == "spray" else "ecmp"},
        "sample_us": 1000, "deadlock_check_us": 1000,
    }
    if ev not in ("spray", "ecmp"):  # NIC-side entropy values, hashed by the switches
        cfg["nic"]["entropy"] = {"algorithm": ev, "values": evs}
    for kv in sets:
        key, _, val = kv.partition("=")
        d = cfg
        *path, last = key.split(".")
        for p in path:
            d = d.setdefault(p, {})
        d[last] = json.loads(val) if val[:1] in "0123456789-[{tf" else val
    return cfg


def _run(hosts: int, seed: int, ev: str, evs: int, sets: list[str]) -> dict[str, Any]:
    import numpy as np

    c0 = time.process_time()
    topo, routes = build(hosts, seed)
    sim = topo.sim(PacketConfig.model_validate(settings(ev, evs, sets)))
    for r in routes:
        sim.add_flow(r, 1_000_000)
    c1 = time.process_time()
    sim.run(until_ns=2e6)
    c2 = time.process_time()
    f = sim.fct()
    fct = f["completion_ns"] / 1e3  # the last ACK back: uet-htsim's "finished at"
    cnt = sim.counters()
    return {"flows": len(routes), "done": int(np.isfinite(fct).sum()),
            "tail_us": float(np.nanmax(fct)), "p50_us": float(np.nanpercentile(fct, 50)),
            "p99_us": float(np.nanpercentile(fct, 99)), "min_us": float(np.nanmin(fct)),
            "build_cpu_s": c1 - c0, "run_cpu_s": c2 - c1, "events": cnt["events"],
            "drops": cnt["drops"], "retx_bytes": cnt["retx_bytes"],
            "timeouts": cnt["timeouts"], "ecn_marks": cnt["ecn_marks"],
            "data_packets": int(sum(-(-1_000_000 // 4086) for _ in routes)),
            "peak_mb_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ev", default="reps", help="a NIC EV algorithm "
                    "(packet.nic.entropy.algorithm: reps, the default, oblivious, "
                    "round_robin), spray (switch-side per-packet spraying) or ecmp")
    ap.add_argument("--evs", type=int, default=32, help="entropy values per QP (with a "
                    "NIC EV algorithm)")
    ap.add_argument("--hosts", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="any packet: field, dotted (e.g. cc.nscc.gamma=0.5)")
    ap.add_argument("--limit-s", type=float, default=600.0)
    a = ap.parse_args()
    from aifabric.errors import SpecError
    from aifabric.sim.packet.config import packet_config_from_dict

    try:  # bad settings: one line, exit 2, before the run
        packet_config_from_dict(settings(a.ev, a.evs, a.set))
    except SpecError as err:
        print(f"error: {err}")
        sys.exit(2)
    c = run_isolated(_run, a.hosts, a.seed, a.ev, a.evs, a.set, timeout_s=a.limit_s)
    if c is None:
        print(f"ran past {a.limit_s:g} s: NOT MET")
        sys.exit(1)
    cpu = c["build_cpu_s"] + c["run_cpu_s"]
    print(f"{c['flows']:,} flows of 1 MB on {a.hosts:,} hosts, {c['data_packets']:,} data "
          f"packets, ev {a.ev}{f' x {a.evs}' if a.ev not in ('spray', 'ecmp') else ''}; "
          f"{c['done']:,} done; drops {c['drops']}, retransmitted {c['retx_bytes']:,} B, "
          f"timeouts {c['timeouts']}, ECN marks {c['ecn_marks']:,}")
    print(f"FCT min {c['min_us']:.2f}  p50 {c['p50_us']:.2f}  p99 {c['p99_us']:.2f}  tail "
          f"{c['tail_us']:.2f} us")
    err = c["tail_us"] / REF_TAIL_US - 1
    print(f"tail FCT {c['tail_us']:.2f} us vs uet-htsim {REF_TAIL_US} us published "
          f"({REF_HERE_US} us run here): {err:+.1%} -> "
          f"{'MET' if abs(err) <= 0.10 else 'NOT MET'} (within 10%)")
    ok = cpu < 30 and c["peak_mb"] < 1024
    met = ok and abs(err) <= 0.10
    print(f"CPU {cpu:.1f} s (build {c['build_cpu_s']:.1f} + run {c['run_cpu_s']:.1f}; "
          f"{c['events'] / max(c['run_cpu_s'], 1e-9) / 1e6:.2f} M events/s), peak RSS "
          f"{c['peak_mb']:.0f} MB vs target < 30 s / < 1024 MB (uet-htsim here: 54.7 s, "
          f"902 MB) -> {'MET' if ok else 'NOT MET'}")
    if not met:
        sys.exit(1)


if __name__ == "__main__":
    main()
