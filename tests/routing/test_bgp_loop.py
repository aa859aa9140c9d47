"""After a link failure the model routes as eBGP would: a path never crosses two switches
of one ASN (the spines of a pod share one), so traffic inside a pod never detours over the
core through a sibling spine; the spine that lost its down link is simply avoided."""

from __future__ import annotations

import numpy as np

from aifabric import build_fabric, spec_from_dict
from aifabric.routing import Fib, live_links, make_flows, route
from aifabric.topology import LinkKind, NodeKind


def test_spine_that_lost_a_leaf_is_avoided_not_crossed_twice():
    f = build_fabric(spec_from_dict({
        "hosts": {"count": 8, "gpus_per_host": 1, "nics_per_host": 1},
        "topology": {"family": "fat_tree", "k": 4, "switch": {"model": "tomahawk5"},
                     "rail_optimized": False}}))
    spine, leaf = f.node_id("spine-p01-00"), f.node_id("leaf-p01-00")
    li = f.links
    assert (f.nodes.kind == NodeKind.CORE).sum() == 2
    # every GPU of pod 1 sends to every other GPU of pod 1 (both leaves)
    gpus = f.ids(NodeKind.GPU)
    pod1 = gpus[f.nodes.pod[gpus] == 1]
    src, dst = np.meshgrid(pod1, pod1, indexing="ij")
    off = src != dst
    flows = make_flows(f, src[off], dst[off], 1 << 20, qps_per_connection=4)
    routed = route(f, flows, failures=[{"link": ["spine-p01-00", "leaf-p01-00"]}])
    assert not routed.unreachable.any()
    used_arcs = np.flatnonzero(np.asarray(routed.incidence.sum(axis=0)).ravel() > 0)
    used_links = used_arcs // 2
    # no flow of pod 1 reaches the core: two spines of one pod would share an ASN
    assert not (li.kind[used_links] == LinkKind.SPINE_CORE).any()
    # the spine with the dead link to leaf-p01-00 carries nothing toward that leaf
    dead = np.flatnonzero((li.a == leaf) & (li.b == spine))
    assert len(dead) == 1 and dead[0] not in used_links
    acc = li.kind == LinkKind.ACCESS
    hosts_under = f.nodes.host[li.a[acc & (li.b == leaf)]]
    to_leaf = np.flatnonzero(np.isin(f.nodes.host[flows.dst_gpu], hosts_under))
    assert len(to_leaf) > 0
    for i in to_leaf:
        assert spine not in routed.path_nodes(int(i))


def test_fib_of_the_spine_has_no_route_like_bgp():
    """The spine's own table: eBGP rejects the detour over the core (it would cross a
    sibling spine of the same ASN), so the spine has no route to the hosts of the leaf it
    lost; its sibling keeps its route down, and a spine of the other pod keeps its two core
    uplinks (two pods: every core reaches every spine)."""
    f = build_fabric(spec_from_dict({
        "hosts": {"count": 8, "gpus_per_host": 1, "nics_per_host": 1},
        "topology": {"family": "fat_tree", "k": 4, "switch": {"model": "tomahawk5"},
                     "rail_optimized": False}}))
    alive = live_links(f, [{"link": ["spine-p01-00", "leaf-p01-00"]}])
    fib = Fib(f, alive)
    li = f.links
    acc = li.kind == LinkKind.ACCESS
    nic = li.a[acc & (li.b == f.node_id("leaf-p01-00"))][0]
    cls = fib.nic_class[fib.nic_no(np.array([nic]))]
    for name, expect in (("spine-p01-00", 0), ("spine-p01-01", 1), ("spine-p00-00", 2)):
        _, count, _ = fib.members(np.array([f.node_id(name)]), cls)
        assert count[0] == expect, name
