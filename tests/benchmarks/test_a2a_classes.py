"""benchmarks/bench_a2a_classes.py: colour refinement finds the coarsest equitable
partition (hand-made incidences), and on a sprayed All-to-All the flow simulator gives
every flow of a class the same completion time, the property that makes a run over the
classes exact."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_a2a_classes.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_a2a_classes", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _classes(rows: list[list[float]], arc_colour=None):
    inc = sp.csr_matrix(np.array(rows, dtype=float))
    nf, na = inc.shape
    fc, ac, _ = _bench().equitable_classes(
        inc, np.zeros(nf), np.zeros(na) if arc_colour is None else np.asarray(arc_colour))
    return fc.tolist(), ac.tolist()


def test_symmetric_flows_are_one_class():
    # two flows, each alone on its own arc, and a shared arc crossed by both
    fc, ac = _classes([[1, 0, 1], [0, 1, 1]])
    assert fc == [0, 0] and ac[0] == ac[1] != ac[2]


def test_a_shared_arc_splits_the_flows_that_cross_it():
    # arc 0 carries flows 0 and 1, arc 1 carries flow 2 alone: flow 2 is not like them
    fc, ac = _classes([[1, 0], [1, 0], [0, 1]])
    assert fc[0] == fc[1] != fc[2] and ac[0] != ac[1]


def test_refinement_goes_past_the_first_round():
    # a path 0-1-2-3 of flows (each flow on two consecutive arcs of a line of 5 arcs):
    # the two end flows are alike, the two middle ones are alike, but only the second
    # round tells them apart (every flow crosses two arcs)
    rows = [[1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]
    fc, _ = _classes(rows)
    assert fc[0] == fc[3] and fc[1] == fc[2] and fc[0] != fc[1]


def test_capacity_colours_split_arcs():
    fc, ac = _classes([[1, 0], [0, 1]], arc_colour=[100.0, 400.0])
    assert fc[0] != fc[1] and ac[0] != ac[1]


def test_a_sprayed_all_to_all_finishes_each_class_at_one_time():
    """The invariant the classes rest on, from the real engine: on a k=8 fat-tree, every
    flow of an exact class of a sprayed All-to-All completes at the same time, and the
    classes are far fewer than the flows; under ECMP the hash makes them (nearly) one
    per flow."""
    import aifabric as af
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.flow.engine import run_flow
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload, effective_routing
    from aifabric.sim.scenario import SimScenario

    bench = _bench()
    spec = {"name": "ft8", "hosts": {"count": 64, "gpus_per_host": 1, "nics_per_host": 1,
                                     "port_gbps": 100},
            "switch_models": {"k8": {"ports": 8, "port_gbps": 100}},
            "topology": {"family": "fat_tree", "k": 8, "switch": {"model": "k8"},
                         "rail_optimized": False}}
    counts = {}
    for policy in ("spray", "ecmp"):
        scn = scenario_from_dict({"name": "a2a", "spec": spec, "routing": {"policy": policy},
                                  "collectives": [{"op": "alltoall", "size_bytes": "4MiB",
                                                   "gpus": 64}]},
                                 base_dir=ROOT, model=SimScenario)
        f = af.build_fabric(scn.spec)
        dag = compile_workload(scn, f).dag
        paths, xconn = route_dag(f, dag, effective_routing(scn, f))
        inc = paths.incidence.tocsr()
        assert inc.shape[0] == paths.n_conns == 64 * 63  # one QP per connection
        lat = np.repeat(paths.latency_ns, np.diff(paths.conn_ptr))
        fc, _, _ = bench.equitable_classes(inc, np.round(lat, 3),
                                           np.round(paths.capacity_gbps, 6))
        counts[policy] = int(fc.max()) + 1
        run = run_flow(dag, paths, xconn, tolerance=1e-9)
        flow_of_xfer = paths.conn_ptr[xconn]
        end = run.xfer_end_ns
        cls = fc[flow_of_xfer]
        lo = np.full(counts[policy], np.inf)
        hi = np.full(counts[policy], -np.inf)
        np.minimum.at(lo, cls, end)
        np.maximum.at(hi, cls, end)
        assert np.all(hi - lo <= 1e-6 * hi), (policy, np.max((hi - lo) / hi))
    print("exact classes of 4,032 flows:", counts)
    assert counts["spray"] <= 16 < 64 * 63 // 4 < counts["ecmp"], counts
