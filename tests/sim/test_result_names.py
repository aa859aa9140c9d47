"""The name columns of the result tables at 100K-GPU scale: each distinct node name is
made into a Python string once and shared (``_name_objs``), the bottleneck arcs'
``"<from> -> <to>"`` labels are built vectorized (``_arc_labels``), and the GPU-name
table of a scenario that names its GPUs is built on first use. The tables must hold
exactly what the one-string-per-row code made: the same strings, in the same order, as
object arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric import build_fabric
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim import results as sim_results
from aifabric.sim.results import _arc_labels, _name_objs
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario

SPEC = {"name": "rail-4x8",
        "hosts": {"count": 4, "gpus_per_host": 8, "nics_per_host": 8, "port_gbps": 400},
        "topology": {"family": "rail"}}

# names of the fabric's own shape, and odd ones: empty, unicode, one as wide as the dtype
NAMES = np.array(["host-s00-h000-gpu0", "tor-p0-s01-r3", "", "gpu-é", "x" * 40, "a -> b",
                  "core-17"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(NAMES) - 1), max_size=300), st.sampled_from([0, 1 << 30]))
def test_name_objs_is_the_per_row_conversion(idx, share_from):
    """Converted directly or through the distinct ids (``share_from`` 0), an index array
    gives the object array of ``str`` that ``names[idx].astype(object)`` gives, element
    by element, type included."""
    idx = np.array(idx, dtype=np.int64)
    saved, sim_results._SHARE_FROM = sim_results._SHARE_FROM, share_from
    try:
        got = _name_objs(NAMES, idx)
    finally:
        sim_results._SHARE_FROM = saved
    want = NAMES[idx].astype(object)
    assert got.dtype == object and got.shape == want.shape
    assert got.tolist() == want.tolist()
    assert all(type(x) is str for x in got.tolist())


def test_name_objs_shares_one_string_per_distinct_name():
    """A large index array holds one Python string per distinct name (the point of it:
    a million transfers over 100K GPUs make 100K strings, not a million)."""
    idx = np.tile(np.arange(len(NAMES)), 1000)
    got = _name_objs(NAMES, idx)
    assert len({id(x) for x in got.tolist()}) == len(NAMES)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(NAMES) - 1), st.integers(0, len(NAMES) - 1)),
                max_size=50))
def test_arc_labels_are_the_formatted_strings(pairs):
    """Each label is exactly ``f"{from} -> {to}"`` of its arc's ends."""
    src_n = np.array([p[0] for p in pairs], dtype=np.int64)
    dst_n = np.array([p[1] for p in pairs], dtype=np.int64)
    arcs = np.arange(len(pairs))
    got = _arc_labels(NAMES, src_n, dst_n, arcs)
    assert got.dtype == object
    assert got.tolist() == [f"{NAMES[a]} -> {NAMES[b]}" for a, b in pairs]


@pytest.mark.parametrize("share_from", [0, 1 << 30])
def test_transfers_and_links_tables_name_the_right_nodes(tmp_path, monkeypatch, share_from):
    """On a real run (a ring AllReduce over 32 GPUs, 8 channels), with the name columns
    shared through the distinct ids (``share_from`` 0) and converted row by row, every
    name column names the node its id column points to, and each bottleneck label is
    its arc's."""
    monkeypatch.setattr(sim_results, "_SHARE_FROM", share_from)
    scn = scenario_from_dict({"name": "t", "spec": SPEC, "routing": {"policy": "ecmp"},
                              "collectives": [{"op": "allreduce", "size_bytes": "64MiB",
                                               "gpus": 32, "channels": 8}]},
                             base_dir=tmp_path, model=SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    res = simulate(scn, f, workload=wl)
    names = f.nodes.name
    tr = res.tables["transfers"]
    assert tr["src_gpu"].tolist() == [str(names[g]) for g in wl.dag.src]
    assert tr["dst_gpu"].tolist() == [str(names[g]) for g in wl.dag.dst]
    src_n, dst_n, _ = f.arcs
    lk = res.tables["links"]
    arc = 2 * lk["link"] + (lk["direction"] == "down")
    assert lk["from"].tolist() == [str(names[src_n[a]]) for a in arc]
    assert lk["to"].tolist() == [str(names[dst_n[a]]) for a in arc]
    labels = {f"{names[src_n[a]]} -> {names[dst_n[a]]}" for a in arc}
    bott = [b for b in tr["bottleneck"].tolist() if b]
    assert bott and set(bott) <= labels


def test_gpus_given_by_name_still_place(tmp_path):
    """The GPU-name table is built on first use: a collective that names its GPUs places
    on exactly those GPUs, in the order given."""
    from aifabric.topology.fabric import NodeKind

    base = scenario_from_dict({"name": "t", "spec": SPEC, "collectives": [
        {"op": "allreduce", "size_bytes": "1MiB", "gpus": 2}]}, base_dir=tmp_path,
        model=SimScenario)
    f = build_fabric(base.spec)
    g = f.ids(NodeKind.GPU)
    want = [str(f.nodes.name[g[19]]), str(f.nodes.name[g[1]]), str(f.nodes.name[g[30]])]
    scn = scenario_from_dict({"name": "t", "spec": SPEC, "collectives": [
        {"op": "allreduce", "size_bytes": "1MiB", "gpus": want}]}, base_dir=tmp_path,
        model=SimScenario)
    wl = compile_workload(scn, f)
    assert [str(f.nodes.name[x]) for x in wl.coll_gpus[0]] == want
