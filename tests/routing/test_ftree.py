"""OpenSM's fat-tree engine in the twin (routing/ftree.py): its tables' invariants, its
balance on a pure fat-tree, OpenSM's refusals (one line, exit 2) and its fallback to
minhop after a failure. Equality with the real OpenSM: tests/lab/test_infiniband_lab.py."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from aifabric.api import build_fabric
from aifabric.routing.infiniband import NO_PATH, check_infiniband, lfts, subnet, trace
from aifabric.spec.load import spec_from_dict

FT = {"routing_engine": "ftree"}
FAT = {"name": "ibft", "transport": "infiniband", "infiniband": FT,
       "hosts": {"count": 32, "nics_per_host": 2, "gpus_per_host": 2},
       "topology": {"family": "fat_tree", "k": 8}}
CLOS = {"name": "ibclos", "transport": "infiniband", "infiniband": FT,
        "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2},
        "topology": {"family": "clos", "leaf": {"down_ports": 8, "up_ports": 4}}}
HPN = {"name": "ibhpn", "transport": "infiniband", "infiniband": FT,
       "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2, "ports_per_nic": 2},
       "topology": {"family": "hpn", "hosts_per_segment": 4}}
#: 10 ToRs of 4 hosts in pods of 4: the last pod's aggregation switches have half the
#: down groups of the others -- not a pure fat-tree, OpenSM's ftree refuses it
UNEVEN = {"name": "uneven", "transport": "infiniband", "infiniband": FT,
          "hosts": {"count": 40, "nics_per_host": 1, "gpus_per_host": 1},
          "topology": {"family": "single_tor", "hosts_per_tor": 4, "tors_per_pod": 4}}


def _fab(doc):
    return build_fabric(spec_from_dict(doc))


def _dist(sn):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    S = sn.n_switches
    s_, p_ = np.nonzero((sn.peer >= 0) & (sn.peer < S))
    return shortest_path(csr_matrix((np.ones(len(s_)), (s_, sn.peer[s_, p_])),
                                    shape=(S, S)), unweighted=True)


@pytest.mark.parametrize("doc", [CLOS, FAT, HPN], ids=["clos", "fat_tree", "hpn"])
def test_every_hca_lid_and_switch_lid_is_reached_on_a_least_hop_path(doc):
    fab = _fab(doc)
    check_infiniband(fab)  # OpenSM's ftree accepts these (the lab checks HPN too)
    sn = subnet(fab)
    t = lfts(sn, "ftree")
    assert t.info["minhop_fallback_subnets"] == []
    dist = _dist(sn)
    n = 0
    for c in range(sn.n_ca_ports):
        for d in range(sn.n_ca_ports):
            if c == d or sn.component[sn.ca_sw[c]] != sn.component[sn.ca_sw[d]]:
                continue
            hops = trace(t, c, int(t.ca_lid[d]))
            assert hops and hops[-1] == (sn.ca_sw[d], sn.ca_swport[d]), (c, d)
            assert len(hops) - 1 == dist[sn.ca_sw[c], sn.ca_sw[d]]
            n += 1
    assert n > 500
    # switch LIDs: ftree routes them up/down only (OpenSM leaves a pair without an
    # up/down path unrouted unless connect_roots); every entry it sets leads there
    S = sn.n_switches
    for s in range(S):
        assert t.lft[s, t.sw_lid[s]] == 0
        for d in np.flatnonzero(sn.component == sn.component[s]):
            cur, steps = s, 0
            while t.lft[cur, t.sw_lid[d]] not in (0, NO_PATH) and steps <= S:
                cur = int(sn.peer[cur, t.lft[cur, t.sw_lid[d]]])
                steps += 1
            assert t.lft[s, t.sw_lid[d]] == NO_PATH or (cur == d and steps == dist[s, d])


def test_ftree_spreads_a_fat_trees_destinations_over_every_uplink():
    """The reason ftree exists: on the k=8 fat-tree, the remote LIDs a leaf sends to
    spine i all leave that spine on one core link with minhop (its round-robin repeats
    at every tier); with ftree they are spread over all the spine's core links, and every
    up port of every leaf and spine carries the same number of HCA LIDs."""
    fab = _fab(FAT)
    sn = subnet(fab)
    S = sn.n_switches
    tier = fab.nodes.tier[sn.sw_node]
    pod = fab.nodes.pod[sn.sw_node]

    def ups(s):
        return [p for p in range(1, sn.nports[s] + 1)
                if 0 <= sn.peer[s, p] < S and tier[sn.peer[s, p]] > tier[s]]

    used = {}
    for engine in ("minhop", "ftree"):
        t = lfts(sn, engine)
        spread = []
        for leaf in np.flatnonzero(tier == tier.min()):
            remote = t.ca_lid[pod[sn.ca_sw] != pod[leaf]]
            for p in ups(leaf):
                spine = int(sn.peer[leaf, p])
                lids = remote[t.lft[leaf, remote] == p]
                spread.append(len(set(t.lft[spine, lids].tolist())) / len(ups(spine)))
        used[engine] = np.array(spread)
        if engine == "ftree":
            for s in np.flatnonzero(tier < tier.max()):
                counts = [int((t.lft[s, t.ca_lid] == p).sum()) for p in ups(s)]
                assert max(counts) == min(counts) > 0
    assert (used["minhop"] == 1 / 4).all()  # one core link of four
    assert (used["ftree"] == 1).all()


def test_the_scenario_with_ftree_meets_the_all_to_all_closed_form():
    """Through `route`/`simulate`: the k=8 fat-tree's all-to-all (128 x 127 x 4 MiB)
    on ftree's tables finishes in (n-1) x size / port rate within 1%, no spine-core
    uplink idle, where minhop's tables take more than 3x as long."""
    from aifabric import api
    from tests.conftest import ROOT

    scn = ROOT / "examples" / "scenarios" / "fat-tree-infiniband-ftree.yaml"
    res = api.route(scn)
    up = res.summary["stats"]["tiers"]["spine_core up"]
    assert up["used"] == up["arcs"] == 128 and up["max_over_mean"] == pytest.approx(1.0)
    assert res.routed.info["infiniband"]["engine"] == "ftree"
    run = api.simulate(scn, sim="flow")
    closed_s = 127 * 4 * 2**20 * 8 / 400e9
    assert run.summary["makespan_ns"] / 1e9 == pytest.approx(closed_s, rel=0.01)


def test_after_a_leaf_uplink_fails_ftree_refuses_and_minhop_keeps_live_entries():
    """OpenSM re-runs ftree after a failure; a leaf with one up group less is not a pure
    fat-tree any more, ftree fails and minhop routes, keeping the live entries."""
    fab = _fab(FAT)
    sn = subnet(fab)
    t0 = lfts(sn, "ftree")
    S = sn.n_switches
    s = int(np.flatnonzero(sn.nports > 0)[0])
    p = next(p for p in range(1, sn.nports[s] + 1) if 0 <= sn.peer[s, p] < S)
    down = sn.without(np.array([sn.port_link[s, p]]))
    t1 = lfts(down, "ftree", existing=t0.lft)
    assert t1.info["minhop_fallback_subnets"] == [0]
    assert "up-going groups" in t1.info["fallback_why"][0]
    assert not (t1.lft[s] == p).any()
    fresh = lfts(down, "minhop")
    assert np.array_equal(t1.lft, lfts(down, "minhop", existing=t0.lft).lft)
    assert not np.array_equal(t1.lft, fresh.lft)  # the kept entries matter


def _write(tmp_path, doc):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("doc, field, words", [
    (UNEVEN, "infiniband.routing_engine", "not a pure fat-tree"),
    ({**CLOS, "hosts": {"count": 4, "nics_per_host": 1, "gpus_per_host": 1},
      "topology": {"family": "clos"}}, "infiniband.routing_engine", "two leaf switches"),
    ({**FAT, "infiniband": {**FT, "lmc": 1}}, "infiniband.lmc", "LMC 0 only"),
], ids=["uneven-pods", "one-leaf", "lmc"])
def test_topologies_ftree_cannot_route_are_one_line_exit_2(tmp_path, cli, doc, field, words):
    path = _write(tmp_path, doc)
    out = tmp_path / "out"
    r = cli("build", path, "--out", out)
    assert r.code == 2
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and f"{field}:" in lines[0] and words in lines[0], r.err
    assert "Traceback" not in r.err
    assert not out.exists()


#: a fat-tree with 29 of 32 hosts: leaves short of compute nodes route dummy targets
PARTIAL = {**FAT, "hosts": {"count": 29, "nics_per_host": 2, "gpus_per_host": 2}}


@pytest.mark.parametrize("doc", [CLOS, FAT, HPN, PARTIAL],
                         ids=["clos", "fat_tree", "hpn", "partial"])
def test_the_compiled_walk_writes_the_same_bytes_as_the_python_transcription(
        doc, monkeypatch):
    """The compiled walk (routing/_ftree_kernel.py) is OpenSM's recursion on an explicit
    stack; the plain-Python transcription it replaced (tests/routing/_ftree_reference.py)
    must give byte-identical tables: on a fresh sweep, and on re-sweeps after a link and
    after a whole switch went down (ftree again where the rest is still a pure fat-tree,
    e.g. HPN's other plane; minhop's fallback elsewhere)."""
    from aifabric.routing import ftree
    from tests.routing._ftree_reference import python_router

    sn = subnet(_fab(doc))
    S = sn.n_switches
    cases = [sn]
    for s in (int(np.flatnonzero(sn.nports > 0)[0]), S - 1):
        ps = [p for p in range(1, sn.nports[s] + 1) if 0 <= sn.peer[s, p] < S]
        cases.append(sn.without(np.array([sn.port_link[s, p] for p in ps[:1]])))
        cases.append(sn.without(np.array([sn.port_link[s, p] for p in ps])))
    routed = 0
    for case in cases:
        fast = lfts(case, "ftree")
        with monkeypatch.context() as mp:
            mp.setattr(ftree, "_route", python_router)
            slow = lfts(case, "ftree")
        assert fast.lft.tobytes() == slow.lft.tobytes()
        assert fast.info == slow.info
        routed += len(np.unique(case.component)) - len(fast.info["minhop_fallback_subnets"])
    assert routed >= 1 + (doc is HPN) * 4  # ftree itself routed, not only the fallback
