"""InfiniBand routing (routing/infiniband.py): the LFTs' invariants, OpenSM's rules that
can be checked without OpenSM, and the spec's bad input (one line, exit 2, nothing
written). The tables' equality with a real OpenSM is tests/lab/test_infiniband_lab.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import yaml

from aifabric.api import build_fabric
from aifabric.routing.infiniband import NO_PATH, lfts, subnet, trace
from aifabric.spec.load import spec_from_dict

CLOS = {"name": "ibclos", "transport": "infiniband",
        "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2},
        "topology": {"family": "clos", "leaf": {"down_ports": 8, "up_ports": 4}}}
FAT = {"name": "ibft", "transport": "infiniband",
       "hosts": {"count": 32, "nics_per_host": 2, "gpus_per_host": 2},
       "topology": {"family": "fat_tree", "k": 8}}
HPN = {"name": "ibhpn", "transport": "infiniband", "infiniband": {"lmc": 1},
       "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2, "ports_per_nic": 2},
       "topology": {"family": "hpn", "hosts_per_segment": 4}}


def _fab(doc):
    return build_fabric(spec_from_dict(doc))


def _walks(t):
    """Every (switch, HCA destination LID) walk: (start switch, dest port, hops)."""
    sn = t.subnet
    for c in range(sn.n_ca_ports):
        for d in range(sn.n_ca_ports):
            if c == d or sn.component[sn.ca_sw[c]] != sn.component[sn.ca_sw[d]]:
                continue
            for off in range(1 << t.lmc):
                yield c, d, trace(t, c, int(t.ca_lid[d]) + off)


@pytest.mark.parametrize("doc", [CLOS, FAT, HPN], ids=["clos", "fat_tree", "hpn"])
@pytest.mark.parametrize("engine", ["minhop", "updn"])
def test_every_lid_reaches_its_port_on_a_least_hop_path(doc, engine):
    fab = _fab(doc)
    sn = subnet(fab)
    lmc = doc.get("infiniband", {}).get("lmc", 0)
    t = lfts(sn, engine, lmc=lmc)
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path
    S = sn.n_switches
    s_, p_ = np.nonzero((sn.peer >= 0) & (sn.peer < S))
    dist = shortest_path(csr_matrix((np.ones(len(s_)), (s_, sn.peer[s_, p_])),
                                    shape=(S, S)), unweighted=True)
    n = 0
    for c, d, hops in _walks(t):
        assert hops, (c, d)
        last_sw, last_port = hops[-1]
        assert last_sw == sn.ca_sw[d] and last_port == sn.ca_swport[d]
        # minhop: least hops; updn: legal up/down paths are never shorter than least
        assert len(hops) - 1 >= dist[sn.ca_sw[c], sn.ca_sw[d]]
        if engine == "minhop":
            assert len(hops) - 1 == dist[sn.ca_sw[c], sn.ca_sw[d]]
        n += 1
    assert n > 100


def test_updn_paths_never_turn_down_then_up():
    """Up/down's deadlock freedom: along every path the rank (distance from the roots)
    first falls (up) then rises (down), never the reverse."""
    fab = _fab(FAT)
    sn = subnet(fab)
    t = lfts(sn, "updn")
    assert t.roots is not None and t.roots.sum() > 0
    core = fab.nodes.tier[sn.sw_node] == fab.nodes.tier[sn.sw_node].max()
    assert np.array_equal(t.roots, core)  # OpenSM's histogram rule finds the cores
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path
    S = sn.n_switches
    s_, p_ = np.nonzero((sn.peer >= 0) & (sn.peer < S))
    d = shortest_path(csr_matrix((np.ones(len(s_)), (s_, sn.peer[s_, p_])), shape=(S, S)),
                      unweighted=True)
    rank = d[:, t.roots].min(axis=1)
    for _, _, hops in _walks(t):
        r = [rank[s] for s, _ in hops]
        turn = int(np.argmin(r))
        assert all(a > b for a, b in itertools.pairwise(r[:turn + 1]))
        assert all(a < b for a, b in itertools.pairwise(r[turn:]))


def test_minhop_spreads_destinations_evenly_over_a_leafs_up_ports():
    """OpenSM's balance: a leaf gives each remote HCA LID to the least used up port, so
    the up ports' counts differ by at most one."""
    fab = _fab(CLOS)
    sn = subnet(fab)
    t = lfts(sn, "minhop")
    S = sn.n_switches
    for s in range(S):
        ups = [p for p in range(1, sn.nports[s] + 1) if 0 <= sn.peer[s, p] < S]
        if fab.nodes.tier[sn.sw_node[s]] != 1 or not ups:
            continue
        remote = np.flatnonzero(sn.ca_sw != s)
        ports = t.lft[s, t.ca_lid[remote]]
        counts = [(ports == p).sum() for p in ups]
        assert sum(counts) == len(remote) and max(counts) - min(counts) <= 1


def test_lmc_gives_each_lid_of_a_port_another_path():
    fab = _fab({**CLOS, "infiniband": {"lmc": 2}})
    sn = subnet(fab)
    t = lfts(sn, "minhop", lmc=2)
    S = sn.n_switches
    leaf = next(s for s in range(S) if sum(0 <= sn.peer[s, p] < S
                                           for p in range(1, sn.nports[s] + 1)) >= 4)
    far = np.flatnonzero(sn.ca_sw != leaf)
    ports = t.lft[leaf][t.ca_lid[far][:, None] + np.arange(4)[None, :]]
    assert (ports != NO_PATH).all()
    # the four LIDs of a port leave the leaf on four different up links
    assert all(len(set(row.tolist())) == 4 for row in ports)


def test_a_failed_link_is_routed_around_and_live_entries_are_kept():
    fab = _fab(FAT)
    sn = subnet(fab)
    t0 = lfts(sn, "minhop")
    s = 0
    p = next(p for p in range(1, sn.nports[s] + 1) if sn.peer[s, p] < sn.n_switches)
    lost = np.array([sn.port_link[s, p]])
    t1 = lfts(sn.without(lost), "minhop", existing=t0.lft)
    assert not (t1.lft[s] == p).any()
    moved = (t0.lft != t1.lft)
    assert moved.sum() > 0
    kept = (t0.lft == p)[s].sum()
    assert moved.sum() < (t0.lft != NO_PATH).sum() - kept  # not a full reshuffle


def _write(tmp_path, doc):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("change, field", [
    ({"infiniband": {"data_vls": 16}}, "infiniband.data_vls"),
    ({"infiniband": {"data_vls": 4, "sl2vl": [0, 1, 2, 3, 5] + [0] * 11}},
     "infiniband.sl2vl.4"),
    ({"infiniband": {"data_vls": 2, "vl_credits": [10, 10, 10]}}, "infiniband.vl_credits"),
    ({"infiniband": {"speed": "hdr"}}, "hosts.port_gbps"),
    ({"infiniband": {"routing_engine": "ftree"}, "hosts": {"count": 4, "nics_per_host": 1,
     "gpus_per_host": 1}, "topology": {"family": "clos"}}, "infiniband.routing_engine"),
    ({"infiniband": {"lmc": 8}}, "infiniband.lmc"),
])
def test_bad_input_is_one_line_naming_the_field_and_nothing_is_written(
        tmp_path, cli, change, field):
    path = _write(tmp_path, {**CLOS, **change})
    out = tmp_path / "out"
    r = cli("build", path, "--out", out)
    assert r.code == 2
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and f"{field}:" in lines[0], r.err
    assert "Traceback" not in r.err
    assert not out.exists()


def test_roce_stays_the_default_and_ignores_the_block():
    spec = spec_from_dict({"topology": {"family": "clos"}})
    assert spec.transport == "roce"
    from aifabric.spec.load import dump_spec
    assert "infiniband" not in dump_spec(spec) and "transport" not in dump_spec(spec)


def test_route_follows_the_lfts_and_shows_minhops_fat_tree_polarization():
    """`aifabric route` on an IB spec: every flow's switch hops are the LFT walk of its
    destination LID; on the k=8 fat-tree, minhop's round-robin at the leaf and again at the
    spine sends all LIDs a leaf gives spine i up one core link (75% of the spine-core
    uplinks idle), a collision pattern of the tables, not of a hash."""
    from aifabric import api
    from aifabric.routing.infiniband import fabric_lfts, lft_paths
    from tests.conftest import ROOT

    res = api.route(ROOT / "examples" / "scenarios" / "fat-tree-infiniband.yaml")
    r = res.routed
    f = r.fabric
    assert r.info["infiniband"] == {"engine": "minhop", "lmc": 0, "adaptive_routing": False}
    assert not r.unreachable.any()
    ptr, nodes = lft_paths(f, r.flows.src_nic, r.flows.dst_nic, r.flows.qp)
    _, dst, _ = f.arcs
    t = fabric_lfts(f)
    for i in range(0, len(r.flows), 997):
        arcs = r.arcs[r.ptr[i]:r.ptr[i + 1]]
        hops = [int(dst[a]) for a in arcs if f.is_switch[dst[a]]]
        assert hops == nodes[ptr[i]:ptr[i + 1]].tolist()
        # the table walk: each switch's port toward the next is its LFT entry
        assert len(hops) in (1, 3, 5)
    up = res.summary["stats"]["tiers"]["spine_core up"]
    assert up["arcs"] == 128 and up["used"] == 32
    assert t.lft.shape[0] == int(f.is_switch.sum())


def test_adaptive_routing_fills_the_core_and_meets_the_all_to_all_closed_form():
    """AR (a flow split over its least-hop paths, the AR group of every switch) removes
    minhop's polarization: every spine-core uplink carries the same bytes, and the
    all-to-all on the full-bisection fat-tree finishes in the closed form
    (n-1) x size / port rate within 1% (flow simulator, idle fabric)."""
    from aifabric import api
    from tests.conftest import ROOT

    scn = ROOT / "examples" / "scenarios" / "fat-tree-infiniband-ar.yaml"
    res = api.route(scn)
    up = res.summary["stats"]["tiers"]["spine_core up"]
    assert up["used"] == up["arcs"] == 128 and up["max_over_mean"] == pytest.approx(1.0)
    assert res.routed.info["infiniband"]["adaptive_routing"] is True
    run = api.simulate(scn, sim="flow")
    n, size, gbps = 128, 4 * 2**20, 400
    closed_s = (n - 1) * size * 8 / (gbps * 1e9)
    makespan_s = run.summary["makespan_ns"] / 1e9
    assert makespan_s == pytest.approx(closed_s, rel=0.01)
    # the tables alone (minhop) are 3.5x slower: the polarized core is the bottleneck
    slow = api.simulate(ROOT / "examples" / "scenarios" / "fat-tree-infiniband.yaml",
                        sim="flow")
    slow_s = slow.summary["makespan_ns"] / 1e9
    assert slow_s > 3 * closed_s
