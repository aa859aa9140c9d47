"""SHARP at packet level: what its per-chunk Python bookkeeping (one QP per chunk and
tree edge, a callback per chunk delivered, a timer per chunk sent) costs per event,
against NCCL's ring on the same fabric and message (the packet core alone).

The fabric and AllReduce of ``examples/scenarios/allreduce-{sharp,ring}-packet.yaml``
(16 hosts of NDR 400G under 4 leaves, 4 spines) at 64 MiB. Each case runs in a fresh
process on one core (``_harness.run_isolated``), twice in turn (the shared machine's
load moves: each case's best round); the time is ``PacketSim.run``'s (the event loop and
the callbacks it makes), the wall time ``simulate``'s whole call.

    python benchmarks/bench_sharp_packet.py [--json]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from _harness import best_rounds, time_packet_loop

ROOT = Path(__file__).resolve().parents[1]
SIZE = "64MiB"
CASES = [("ring (packet core only)", "allreduce-ring-packet.yaml"),
         ("SHARP (units, per-chunk QPs and callbacks)", "allreduce-sharp-packet.yaml")]
ROUNDS = 2


def _run(case: tuple) -> dict:
    import yaml

    from aifabric.api import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario

    name, file = case
    timed = time_packet_loop()
    doc = yaml.safe_load((ROOT / "examples" / "scenarios" / file).read_text())
    out: dict = {}
    for size in ("1MiB", SIZE):  # a small run first: numba's cache
        doc["collectives"][0]["size_bytes"] = size
        scn = scenario_from_dict(doc, model=SimScenario)
        f = build_fabric(scn.spec)
        timed["s"] = 0.0
        t0 = time.perf_counter()
        res = simulate(scn, f)
        wall = time.perf_counter() - t0
        pk = res.summary["packet"]
        coll = res.summary["collectives"][0]
        out = {"name": name, "size": size, "events": int(pk["events"]),
               "loop_s": timed["s"], "wall_s": wall,
               "events_per_s": pk["events"] / timed["s"],
               "qps": int(pk.get("fct", {}).get("count", 0)),
               "time_us": float(coll["time_ns"]) / 1e3,
               "busbw_gbps": float(coll["busbw_gbps"])}
    return out


def main() -> int:
    rows = best_rounds(_run, CASES, ROUNDS, "events_per_s")
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        print(f"{r['name']}: {r['size']} AllReduce over 16 hosts in {r['time_us']:.1f} us "
              f"simulated ({r['busbw_gbps']:.1f} Gb/s busbw); {r['events']:,} events in "
              f"{r['loop_s']:.2f} s = {r['events_per_s']:,.0f} events/s, {r['qps']:,} QPs, "
              f"simulate {r['wall_s']:.2f} s, peak {r['peak_mb']:,.0f} MB")
    if len(rows) == 2:
        print(f"SHARP / ring events per second: "
              f"{rows[1]['events_per_s'] / rows[0]['events_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
