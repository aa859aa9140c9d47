"""Benchmark (a measurement for issue #32 item 1): how far the transfers of an All-to-All
can be merged into classes that the flow simulator could run with multiplicities, and
still give every transfer exactly its own completion time.

The exact classes are the coarsest *equitable partition* of the flow x arc incidence
(the weights are the fractions of a flow's bytes on each arc): every arc of an arc class
carries the same weighted count of flows of each flow class, and every flow of a flow
class crosses the same weighted count of arcs of each arc class. Max-min fair rates are
constant on such classes (water-filling raises all flows of a class together and fills
all arcs of a class together), so a run over the classes is the per-transfer run, and no
coarser grouping is exact in general. Colour refinement finds it: flows start coloured
by their path latency, arcs by their capacity, and each round recolours a flow by its
colour and the weighted multiset of its arcs' colours (and an arc likewise by its flows)
until no class splits. Multisets are compared through two random projections per round
(a collision would merge two classes; it has probability ~1e-9 per pair).

What it shows, on the 3-tier Tomahawk 5 fat-tree of benchmarks/bench_scaling.py (8 rail
ToRs per 64 hosts, 64 MiB per GPU):

* under ``ecmp`` (and ``source_port``) each QP's path is the hash of its own 5-tuple, so
  the arcs carry different counts of flows and the partition is discrete: at 1,024 GPUs
  1,047,552 flows make 1,047,552 classes. No exact compression exists; an approximate
  one would break the issue's "identical completion times within 0.1%".
* under ``spray`` (a fluid even split over the equal-cost next hops) the same 1,047,552
  flows make 5 classes. ``adaptive`` gives the same 5 on this fabric, but only by
  its placement's outcome: it puts each flow on the least-loaded path given the flows
  placed before it, so no representative stands for another in general, and the
  class run (:mod:`aifabric.sim.classes`) does not use it.
* where no flow has a choice of path (256 GPUs: 32 hosts under one ToR per rail) both
  policies give the same 3 classes of 65,280 flows: the hash breaks the symmetry, not
  the fabric.

    python benchmarks/bench_a2a_classes.py                  # 1,024 GPUs, ecmp and spray
    python benchmarks/bench_a2a_classes.py --gpus 256,1024 --policies ecmp,spray,adaptive
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling import ROOT, _flow_spec

MAX_ROUNDS = 64


def _rel(sig: np.ndarray) -> np.ndarray:
    """Signatures rounded to 10 significant digits of each column's largest value: the
    same fractions summed in another order compare equal (an absolute rounding split
    alike flows on float noise)."""
    scale = np.abs(sig).max(axis=0)
    scale[scale == 0] = 1.0
    return np.round(sig / scale, 10)


def equitable_classes(inc: sp.csr_matrix, flow_colour: np.ndarray, arc_colour: np.ndarray,
                      seed: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
    """Colour refinement of the weighted bipartite graph ``inc`` (flows x arcs) from the
    given initial colours: ``(flow classes, arc classes, rounds)``, class ids dense."""
    rng = np.random.default_rng(seed)
    incT = inc.T.tocsr()
    fcol = np.unique(flow_colour, return_inverse=True)[1].ravel()
    acol = np.unique(arc_colour, return_inverse=True)[1].ravel()
    for rounds in range(1, MAX_ROUNDS + 1):
        ra = rng.random(int(acol.max()) + 1) + 1.0
        rf = rng.random(int(fcol.max()) + 1) + 1.0
        sig_f = np.c_[fcol, inc @ ra[acol], inc @ (ra[acol] ** 2)]
        sig_a = np.c_[acol, incT @ rf[fcol], incT @ (rf[fcol] ** 2)]
        nf = np.unique(_rel(sig_f), axis=0, return_inverse=True)[1].ravel()
        na = np.unique(_rel(sig_a), axis=0, return_inverse=True)[1].ravel()
        stable = nf.max() == fcol.max() and na.max() == acol.max()
        fcol, acol = nf, na
        if stable:  # refinement only splits: the same count is the same partition
            return fcol, acol, rounds
    return fcol, acol, MAX_ROUNDS


def measure(gpus: int, policy: str) -> dict[str, object]:
    import aifabric as af
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload, effective_routing
    from aifabric.sim.scenario import SimScenario

    scn = scenario_from_dict({"name": "a2a", "spec": _flow_spec(gpus),
                              "routing": {"policy": policy},
                              "collectives": [{"op": "alltoall", "size_bytes": "64MiB",
                                               "gpus": gpus}]},
                             base_dir=ROOT, model=SimScenario)
    f = af.build_fabric(scn.spec)
    paths, _ = route_dag(f, compile_workload(scn, f).dag, effective_routing(scn, f))
    inc = paths.incidence.tocsr()
    lat = np.repeat(paths.latency_ns, np.diff(paths.conn_ptr))
    t0 = time.process_time()
    fc, ac, rounds = equitable_classes(inc, np.round(lat, 3),
                                       np.round(paths.capacity_gbps, 6))
    return {"gpus": gpus, "policy": policy, "flows": inc.shape[0], "arcs": inc.shape[1],
            "flow_classes": int(fc.max()) + 1, "arc_classes": int(ac.max()) + 1,
            "rounds": rounds, "cpu_s": time.process_time() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="1024", help="comma-separated GPU counts")
    ap.add_argument("--policies", default="ecmp,spray", help="comma-separated policies")
    a = ap.parse_args(argv)
    print("All-to-All of 64 MiB per GPU, 3-tier Tomahawk 5 fat-tree: exact classes "
          "(coarsest equitable partition of flows x arcs) against the flows")
    for gpus in (int(x) for x in a.gpus.split(",")):
        for policy in a.policies.split(","):
            r = measure(gpus, policy)
            print(f"{r['gpus']:>6,} GPUs {r['policy']:<12} {r['flows']:>10,} flows -> "
                  f"{r['flow_classes']:>10,} flow classes ({r['flows'] / r['flow_classes']:,.0f}"
                  f"x fewer), {r['arcs']:,} arcs -> {r['arc_classes']:,} arc classes; "
                  f"{r['rounds']} rounds, {r['cpu_s']:.1f} s CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
