"""Forwarding hop by hop: every policy on every family gives valid, live, valley-free,
conserved paths; host-side hops (NVLink, PXN, PCIe) are part of the path."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.errors import SpecError
from aifabric.routing import make_flows, route, route_stats
from aifabric.routing.fib import INF, Fib
from aifabric.topology import LinkKind, NodeKind
from tests.routing.helpers import SMALL_SPECS, check_routed, small

POLICIES = ["ecmp", "spray", "adaptive", "source_port"]


def _a2a(f, qps=2, step=1):
    g = f.ids(NodeKind.GPU, active_only=True)[::step]
    n = len(g)
    i, j = np.divmod(np.arange(n * n), n)
    k = i != j
    return make_flows(f, g[i[k]], g[j[k]], 1 << 16, qps_per_connection=qps)


def _policy(f, **kw):
    return f.spec.routing.model_copy(update=kw)


@pytest.mark.parametrize("name", sorted(SMALL_SPECS))
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_gives_valid_paths_on_every_family(name, policy):
    """All-to-all on each small fabric with each policy: every flow is delivered, every
    path is a live, valley-free walk GPU -> ... -> GPU, conserved at every node."""
    f = small(name)
    r = route(f, _a2a(f, qps=1 if policy == "spray" else 2), _policy(f, policy=policy))
    assert not r.unreachable.any()
    check_routed(r)
    assert r.incidence.shape == (len(r.flows), 2 * f.n_links)


def test_path_has_the_host_hops_and_pxn():
    """A cross-rail, cross-segment flow on a rail fabric: NVLink to the GPU of the
    destination's rail (GPU -> NVSwitch -> GPU), PCIe, NIC, ToR, spine, ToR, NIC, PCIe,
    GPU; the switch part stays on the destination's rail."""
    f = small("rail")
    nodes = f.nodes
    g = f.ids(NodeKind.GPU, active_only=True)
    src = g[nodes.index[g] == 0][0]
    dst = g[(nodes.index[g] == 2) & (nodes.segment[g] != nodes.segment[src])][0]
    r = route(f, make_flows(f, [src], [dst], 100))
    path = r.path_nodes(0)
    kinds = nodes.kind[path].tolist()
    assert kinds == [NodeKind.GPU, NodeKind.HOST, NodeKind.GPU, NodeKind.NIC, NodeKind.TOR,
                     NodeKind.AGG, NodeKind.TOR, NodeKind.NIC, NodeKind.GPU]
    assert nodes.rail[path[2]] == 2 and nodes.host[path[2]] == nodes.host[src]
    assert (nodes.rail[path[[3, 4, 6, 7]]] == 2).all()
    link_kinds = f.links.kind[r.path_arcs(0) // 2].tolist()
    assert link_kinds == [LinkKind.SCALEUP, LinkKind.SCALEUP, LinkKind.PCIE, LinkKind.ACCESS,
                          LinkKind.LEAF_SPINE, LinkKind.LEAF_SPINE, LinkKind.ACCESS,
                          LinkKind.PCIE]


def test_same_host_flows_stay_on_nvlink():
    """Same-host pairs go GPU -> NVSwitch -> GPU (or GPU -> GPU in a mesh), nothing else."""
    f = small("hpn2")
    g = f.ids(NodeKind.GPU, active_only=True)
    r = route(f, make_flows(f, g[:1], g[1:2], 10))
    assert (f.links.kind[r.path_arcs(0) // 2] == LinkKind.SCALEUP).all()
    assert len(r.path_arcs(0)) == 2
    m = small("single_tor")
    gm = m.ids(NodeKind.GPU, active_only=True)
    rm = route(m, make_flows(m, gm[:1], gm[1:2], 10))
    assert len(rm.path_arcs(0)) == 1


def test_same_input_same_paths():
    """Routing is deterministic: the same flows and policy give the same arcs."""
    f = small("fat_tree")
    fl = _a2a(f, step=4)
    a, b = route(f, fl), route(f, fl)
    assert (a.arcs == b.arcs).all() and (a.ptr == b.ptr).all()


def test_spray_puts_an_equal_share_on_every_equal_cost_path():
    """Spraying splits a cross-pod flow of the k=8 fat-tree evenly: 1/4 on each of the
    leaf's 4 uplinks, 1/16 on each of the 16 core links it crosses up."""
    f = small("fat_tree")
    nodes = f.nodes
    g = f.ids(NodeKind.GPU, active_only=True)
    dst = g[nodes.pod[g] != nodes.pod[g[0]]][0]
    r = route(f, make_flows(f, [g[0]], [dst], 1000), _policy(f, policy="spray"))
    arcs, frac = r.path_arcs(0), r.fractions[r.ptr[0]:r.ptr[1]]
    kind = f.links.kind[arcs // 2]
    up = arcs % 2 == 0
    ls_up = frac[(kind == LinkKind.LEAF_SPINE) & up]
    sc_up = frac[(kind == LinkKind.SPINE_CORE) & up]
    assert len(ls_up) == 4 and np.allclose(ls_up, 1 / 4)
    assert len(sc_up) == 16 and np.allclose(sc_up, 1 / 16)
    assert np.isclose(r.arc_bytes()[arcs].max(), 1000.0)


def test_adaptive_balances_better_than_ecmp():
    """Least-loaded placement never leaves a ToR uplink busier than ECMP's worst one, and
    on the k=8 fat-tree all-to-all it balances every tier to max/mean <= 1.05."""
    f = small("fat_tree")
    fl = _a2a(f, qps=1)
    e = route_stats(route(f, fl, _policy(f, policy="ecmp")))["tiers"]
    a = route_stats(route(f, fl, _policy(f, policy="adaptive")))["tiers"]
    for tier in ("leaf_spine up", "spine_core up"):
        assert a[tier]["max_over_mean"] <= e[tier]["max_over_mean"]
        assert a[tier]["max_over_mean"] <= 1.05


def test_table_selection_and_other_hashes_route_validly():
    """Every hash function with member-table selection gives valid paths too."""
    f = small("hpn2")
    fl = _a2a(f, qps=1)
    for h in ("crc32c", "crc16_ccitt", "xor"):
        r = route(f, fl, _policy(f, hash=h, selection="table", table_size=64,
                                 seed_mode="per_switch", seed=3))
        check_routed(r)


def test_fib_is_valley_free_and_groups_follow_port_order():
    """In a healthy fabric every switch reaches every class of its plane; an up group
    lists the switch's uplinks in port order; ToRs never route down to another ToR."""
    f = small("fat_tree")
    fib = Fib(f)
    assert (fib.dist < INF).all()
    tor = f.ids(NodeKind.TOR)[0]
    cls = np.flatnonzero(~fib.reach[fib.sw_row[tor]])[:1]
    start, count, members = fib.members(np.array([tor]), cls)
    arcs = members[start[0]:start[0] + count[0]]
    ports = f.links.a_port[arcs // 2]
    assert (np.diff(ports) > 0).all() and (arcs % 2 == 0).all() and len(arcs) == 4


def test_pinned_paths_are_followed_and_checked():
    """pinned: a flow follows its explicit switch path; a path that goes down then up or
    jumps between unlinked switches is refused, naming the flow."""
    f = small("rail")
    nodes = f.nodes
    g = f.ids(NodeKind.GPU, active_only=True)
    src = g[0]
    dst = g[(nodes.index[g] == 0) & (nodes.segment[g] == 1)][0]
    fl = make_flows(f, [src], [dst], 100)
    tor_s = f.links.b[(f.links.a == fl.src_nic[0]) & (f.links.kind == LinkKind.ACCESS)][0]
    tor_d = f.links.b[(f.links.a == fl.dst_nic[0]) & (f.links.kind == LinkKind.ACCESS)][0]
    spines = f.ids(NodeKind.AGG)
    pin = (np.array([0, 3]), np.array([tor_s, spines[5], tor_d]))
    r = route(f, fl, _policy(f, policy="pinned"), pinned=pin)
    check_routed(r)
    assert spines[5] in r.path_nodes(0)
    other_tor = f.ids(NodeKind.TOR)[3]
    bad = (np.array([0, 5]), np.array([tor_s, spines[1], other_tor, spines[2], tor_d]))
    with pytest.raises(SpecError, match="valley"):
        route(f, fl, _policy(f, policy="pinned"), pinned=bad)
    jump = (np.array([0, 2]), np.array([tor_s, tor_d]))
    with pytest.raises(SpecError, match="no live link"):
        route(f, fl, _policy(f, policy="pinned"), pinned=jump)
