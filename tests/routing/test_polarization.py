"""The numbers the issue states: hash polarization (fat-tree and HPN core), HPN's two-port
load ratio (single vs dual plane), and the source_port ideal — from the example scenarios.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest

from aifabric.routing import route, route_stats, two_port_ratio
from aifabric.routing.scenario import load_scenario
from aifabric.routing.traffic import build_traffic
from aifabric.topology import LinkKind, NodeKind, build_fabric
from tests.conftest import EXAMPLES
from tests.routing.helpers import check_routed

SCEN = EXAMPLES / "scenarios"


@cache
def _scenario(name: str):
    sc = load_scenario(SCEN / f"{name}.yaml")
    fabric = build_fabric(sc.spec)
    flows, _ = build_traffic(fabric, sc.traffic, seed=sc.seed, base_dir=sc.base_dir)
    return sc, fabric, flows


def _core_uplinks_used(routed) -> np.ndarray:
    """Per agg/spine that sends traffic to the core: how many of its core uplinks carry it."""
    f = routed.fabric
    by = routed.arc_bytes()[0::2]  # up direction of every link
    sel = (f.links.kind == LinkKind.SPINE_CORE) & (by > 0)
    senders = np.unique(f.links.a[sel])
    return np.bincount(f.links.a[sel], minlength=f.n_nodes)[senders]


def _uplinks_per_agg(f) -> int:
    a = f.links.a[f.links.kind == LinkKind.SPINE_CORE]
    return int(np.bincount(a).max())


@pytest.mark.parametrize(("name", "same", "per_switch"), [
    ("fat-tree-polarization", 1, 4),   # k/2 = 4 core uplinks per spine
    ("hpn-core-polarization", 2, 8),   # 8 core uplinks per agg
])
def test_polarization_from_identical_seeds_and_its_cure(name, same, per_switch):
    """Same hash, same seed, hash mod n everywhere: in the k-ary fat-tree a flow reached
    spine i because hash mod k/2 = i at the leaf, so spine i sends ALL its core traffic up
    one core link; in HPN, hash mod 60 = i at the ToR fixes hash mod 4, so every agg uses
    exactly 2 of its 8 core uplinks. Per-switch seeds (seed + hash-bit offset) make every
    agg use all of its core uplinks."""
    sc, f, flows = _scenario(name)
    assert sc.policy.seed_mode == "same" and sc.policy.selection == "mod"
    r = route(f, flows, sc.policy)
    check_routed(r)
    used = _core_uplinks_used(r)
    n_aggs = int(((f.nodes.kind == NodeKind.AGG)).sum())
    assert len(used) == n_aggs  # every agg forwards cross-pod traffic
    assert (used == same).all(), np.unique(used, return_counts=True)
    assert _uplinks_per_agg(f) == per_switch
    cured = route(f, flows, sc.policy.model_copy(update={"seed_mode": "per_switch"}))
    check_routed(cured)
    assert (_core_uplinks_used(cured) == per_switch).all()


def test_hpn_core_polarization_is_the_tor_choice_mod_4():
    """The mechanism, flow by flow: with one hash everywhere, the core uplink an HPN agg
    picks (hash mod 8) is congruent mod 4 to the ToR uplink that led to it (hash mod 60)."""
    sc, f, flows = _scenario("hpn-core-polarization")
    r = route(f, flows, sc.policy)
    kind = f.links.kind[r.arcs // 2]
    ent = r.entry_flow
    up = r.arcs % 2 == 0
    ls = up & (kind == LinkKind.LEAF_SPINE)
    sc_up = up & (kind == LinkKind.SPINE_CORE)
    tor_member = np.full(len(flows), -1)
    core_member = np.full(len(flows), -1)
    # member index = the uplink's rank in its switch's port order
    for sel, out in ((ls, tor_member), (sc_up, core_member)):
        links = r.arcs[sel] // 2
        a = f.links.a[links]
        rank = _port_rank(f, links, a, f.links.kind[links][0])
        out[ent[sel]] = rank
    both = (tor_member >= 0) & (core_member >= 0)
    assert both.sum() > 1000
    assert (tor_member[both] % 4 == core_member[both] % 4).all()


def _port_rank(f, links, a, kind):
    sel = f.links.kind == kind
    la, lp = f.links.a[sel], f.links.a_port[sel]
    order = np.lexsort((lp, la))
    rank = np.empty(len(order), dtype=np.int64)
    sa = la[order]
    start = np.r_[0, np.flatnonzero(sa[1:] != sa[:-1]) + 1]
    rank[order] = np.arange(len(order)) - np.repeat(start, np.diff(np.r_[start, len(order)]))
    idx_of_link = np.full(f.n_links, -1)
    idx_of_link[np.flatnonzero(sel)] = rank
    return idx_of_link[links]


def test_hpn_single_plane_two_port_ratio_is_at_least_2():
    """HPN §2: single-plane dual-ToR, 8 QPs per connection, ecmp, cross-segment traffic:
    an agg has both ToRs of a pair as next hops, so a NIC's ports carry unequal loads;
    the p99 two-port ratio is >= 2 and the worst NIC reaches 3x (as seen in production)."""
    sc, f, flows = _scenario("hpn-polarization")
    assert sc.policy.qps_per_connection == 8 and sc.policy.policy == "ecmp"
    nodes = f.nodes
    assert (nodes.segment[flows.src_gpu] != nodes.segment[flows.dst_gpu]).all()
    r = route(f, flows, sc.policy)
    ratio = two_port_ratio(r)
    assert len(ratio) == 15360
    assert np.percentile(ratio, 99, method="inverted_cdf") >= 2.0
    assert ratio.max() >= 3.0


def test_hpn_dual_plane_two_port_ratio_is_exactly_one():
    """The same traffic on the dual-plane pod: a QP that leaves on port a arrives on port
    a, and the NIC balances its 8 QPs 4/4, so every port carries exactly its share."""
    sc, f, flows = _scenario("hpn-dual-plane")
    r = route(f, flows, sc.policy)
    ratio = two_port_ratio(r)
    assert len(ratio) == 15360
    assert (ratio == 1.0).all()
    two = route_stats(r)["two_port_ratio"]
    assert (two["p50"], two["p99"], two["max"]) == (1.0, 1.0, 1.0)


def test_source_port_reaches_the_least_possible_load_and_ecmp_does_not():
    """Rail-optimized permutation: no network link carries more flows than the least
    possible, ceil(flows leaving a leaf / its uplinks), with host-chosen source ports;
    plain ECMP hashing of the same flows exceeds it."""
    sc, f, flows = _scenario("rail-permutation")
    assert sc.policy.policy == "source_port"
    r = route(f, flows, sc.policy)
    check_routed(r)
    assert r.info["source_ports_unmatched"] == 0
    nf = r.arc_flows()
    kind = np.repeat(f.links.kind, 2)
    net = kind >= LinkKind.LEAF_SPINE
    # lower bound: the flows leaving the busiest leaf over its uplinks (pigeonhole)
    up = (kind == LinkKind.LEAF_SPINE) & (np.arange(len(nf)) % 2 == 0)
    src = f.arcs[0]
    leaving = np.bincount(src[up], weights=nf[up], minlength=f.n_nodes)
    uplinks = np.bincount(src[up], minlength=f.n_nodes)
    busy = leaving > 0
    bound = max(math.ceil(x) for x in leaving[busy] / uplinks[busy])
    assert nf[net].max() == bound == 1
    e = route(f, flows, sc.policy.model_copy(update={"policy": "ecmp"}))
    assert e.arc_flows()[net].max() > bound
