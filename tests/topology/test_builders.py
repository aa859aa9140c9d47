"""Every family builds fabrics that respect the invariants, and the counts the
literature gives in closed form come out of the Fabric's own arrays."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric import spec_from_dict
from aifabric.errors import SpecError
from aifabric.topology import BUILDERS, LinkKind, NodeKind, build_fabric
from tests.conftest import example
from tests.invariants import check_all

EXAMPLES = ["hpn-pod", "hpn-single-plane", "roce-5000", "fat-tree-k64", "multiplane-8x128",
            "single-tor-dcn"]


def count(f, kind):
    return int((f.nodes.kind == kind).sum())


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_respect_invariants(name):
    """Every example: ports used once, within port counts, all GPUs connected, links
    point up, capacities match the spec, one /32 per NIC, unique names."""
    check_all(example(name))


def test_every_family_is_registered():
    assert set(BUILDERS) == {"clos", "fat_tree", "rail", "multiplane", "hpn", "single_tor"}


SMALL = {
    "clos": {"hosts": {"count": 40, "port_gbps": 400}, "topology": {
        "family": "clos", "leaf": {"model": "tomahawk4"}, "spine": {"model": "tomahawk4"}}},
    "clos_rail_3to1": {"hosts": {"count": 30, "port_gbps": 200}, "topology": {
        "family": "clos", "rail_optimized": True, "oversubscription": 3.0,
        "leaf": {"model": "tomahawk4"}, "spine": {"model": "tomahawk4"}}},
    "rail": {"hosts": {"count": 70}, "topology": {
        "family": "rail", "leaf": {"model": "tomahawk4"}, "spine": {"model": "tomahawk4"}}},
    "single_tor": {"hosts": {"count": 50, "port_gbps": 200, "backup_per_segment": 1},
                   "topology": {"family": "single_tor", "hosts_per_tor": 6, "tors_per_pod": 3}},
    "fat_tree": {"hosts": {"count": 20, "gpus_per_host": 4, "nics_per_host": 4},
                 "topology": {"family": "fat_tree", "k": 16}},
    "multiplane": {"hosts": {"count": 100, "ports_per_nic": 2, "port_gbps": 200,
                             "scaleup": "mesh"},
                   "topology": {"family": "multiplane", "leaf": {"model": "tomahawk4"},
                                "spine": {"model": "tomahawk4"}}},
    "hpn": {"hosts": {"count": 70, "ports_per_nic": 2, "port_gbps": 200, "nics_per_host": 4,
                      "gpus_per_host": 4, "backup_per_segment": 2},
            "topology": {"family": "hpn", "hosts_per_segment": 16, "segments_per_pod": 2,
                         "tor": {"up_ports": 8}, "agg": {"down_ports": 24, "up_ports": 4},
                         "core": {"model": "tomahawk5"}}},
    "hpn_single_plane": {"hosts": {"count": 40, "ports_per_nic": 2, "port_gbps": 200,
                                   "nics_per_host": 4, "gpus_per_host": 8},
                         "topology": {"family": "hpn", "planes": 1, "hosts_per_segment": 16,
                                      "tor": {"up_ports": 8}, "core": None}},
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_fabrics_respect_invariants(name):
    """Partial segments, backups, breakouts, meshes and multi-pod cores stay valid."""
    check_all(build_fabric(spec_from_dict(SMALL[name])))


@pytest.mark.parametrize("k", [4, 8, 16, 32])
def test_fat_tree_counts_match_closed_form(k):
    """A full k-ary fat-tree has k^3/4 endpoints, 5k^2/4 switches, k pods, (k/2)^2 cores."""
    spec = spec_from_dict({"hosts": {"gpus_per_host": 1, "nics_per_host": 1},
                           "topology": {"family": "fat_tree", "k": k,
                                        "switch": {"model": "tomahawk5"},
                                        "rail_optimized": False}})
    f = build_fabric(spec)
    assert count(f, NodeKind.NIC) == k**3 // 4
    assert count(f, NodeKind.TOR) + count(f, NodeKind.AGG) + count(f, NodeKind.CORE) \
        == 5 * k * k // 4
    assert count(f, NodeKind.CORE) == (k // 2) ** 2
    assert np.unique(f.nodes.pod[f.ids(NodeKind.HOST)]).size == k
    # every switch uses exactly k ports
    for kind in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE):
        sw = f.ids(kind)
        deg = np.bincount(np.concatenate([f.links.a, f.links.b]), minlength=f.n_nodes)[sw]
        assert (deg == k).all()
    check_all(f)


def test_fat_tree_k64_example():
    """k=64: 65,536 NIC endpoints (8,192 hosts x 8 NICs) and 5,120 switches."""
    f = example("fat-tree-k64")
    assert count(f, NodeKind.NIC) == 65_536
    assert count(f, NodeKind.HOST) == 8_192
    assert f.is_switch.sum() == 5_120
    # spine i of every pod goes to core group i (and only to it)
    sc = f.links.kind == LinkKind.SPINE_CORE
    spine_idx = f.nodes.index[f.links.a[sc]]
    core_group = f.nodes.index[f.links.b[sc]] // 32  # 32 cores per group
    assert (spine_idx == core_group).all()


@pytest.mark.parametrize(("ports", "gpus", "switches"), [(128, 65_536, 1_536), (64, 16_384, 768)])
def test_multiplane_counts(ports, gpus, switches):
    """8 planes of a 2-tier fat-tree: k=128 -> 65,536 GPUs / 1,536 switches; k=64 ->
    16,384 / 768. Each plane is its own component of the switch graph."""
    model = "tomahawk5" if ports == 128 else "tomahawk4"
    f = (example("multiplane-8x128") if ports == 128 else build_fabric(spec_from_dict({
        "hosts": {"gpus": gpus}, "topology": {"family": "multiplane",
                                              "leaf": {"model": model},
                                              "spine": {"model": model}}})))
    assert count(f, NodeKind.GPU) == gpus
    assert int(f.is_switch.sum()) == switches
    # a leaf-spine link never crosses planes
    ls = f.links.kind == LinkKind.LEAF_SPINE
    assert (f.nodes.plane[f.links.a[ls]] == f.nodes.plane[f.links.b[ls]]).all()
    assert np.unique(f.nodes.plane[f.is_switch]).size == 8


def test_hpn_pod_structure():
    """HPN: each NIC's two ports go to ToR a and ToR b of its rail in its segment; in
    dual-plane a ToR's uplinks reach only aggs of its own plane; 60 x 400G uplinks."""
    f = example("hpn-pod")
    n, li = f.nodes, f.links
    acc = li.kind == LinkKind.ACCESS
    nic, tor = li.a[acc], li.b[acc]
    assert (n.side[nic] == n.side[tor]).all()
    assert (n.rail[nic] == n.rail[tor]).all()
    assert (n.segment[nic] == n.segment[tor]).all()
    assert (li.capacity_gbps[acc, 0] == 200).all()
    ls = li.kind == LinkKind.LEAF_SPINE
    assert (n.plane[li.a[ls]] == n.plane[li.b[ls]]).all()
    ups = np.bincount(li.a[ls], minlength=f.n_nodes)[f.ids(NodeKind.TOR)]
    assert (ups == 60).all()
    assert (li.capacity_gbps[ls, 0] == 400).all()
    # the two ports of a NIC share one IP and never share a ToR
    assert n.ip[nic][n.side[nic] == 0].size == n.ip[nic][n.side[nic] == 1].size
    # the ToR of the issue's example name exists, and its port names are SONiC's
    t = f.node_id("tor-s03-r5-a")
    ports = li.b_port[acc][tor == t]
    assert f.port_name(t, int(ports.min())) == "Ethernet0"
    assert len(ports) == 136


def test_hpn_single_plane_aggs_see_both_tors_of_a_pair():
    """Single-plane: the two ToRs of a pair share their aggs (two next hops per host)."""
    f = example("hpn-single-plane")
    n, li = f.nodes, f.links
    ls = li.kind == LinkKind.LEAF_SPINE
    a_tor = f.node_id("tor-s00-r0-a")
    b_tor = f.node_id("tor-s00-r0-b")
    aggs_a = set(li.b[ls][li.a[ls] == a_tor].tolist())
    aggs_b = set(li.b[ls][li.a[ls] == b_tor].tolist())
    assert aggs_a == aggs_b and len(aggs_a) == 60
    assert (n.plane[f.is_switch] == 0).all()


def test_build_is_deterministic():
    """The same spec builds the same arrays, byte for byte."""
    spec = spec_from_dict(SMALL["hpn"])
    f1, f2 = build_fabric(spec), build_fabric(spec)
    for table in ("nodes", "links"):
        t1, t2 = getattr(f1, table), getattr(f2, table)
        for key, arr in vars(t1).items():
            assert np.array_equal(arr, getattr(t2, key)), key


def test_backup_hosts_use_their_own_tor_ports():
    """Backup hosts are wired (standby) but are not counted as GPUs."""
    f = example("hpn-pod")
    backup_hosts = f.ids(NodeKind.HOST)[f.nodes.backup[f.ids(NodeKind.HOST)]]
    assert len(backup_hosts) == 120
    names = f.nodes.name[backup_hosts]
    assert all("-b" in str(x) for x in names[:8])


@pytest.mark.parametrize(("doc", "path"), [
    ({"hosts": {"count": 3000}, "topology": {"family": "clos", "leaf": {"model": "tomahawk4"},
                                             "spine": {"model": "tomahawk4"}}}, "hosts.count"),
    ({"hosts": {"count": 10, "port_gbps": 300}, "topology": {"family": "rail"}},
     "topology.leaf.down_gbps"),
    ({"hosts": {"count": 100, "ports_per_nic": 2, "port_gbps": 200, "backup_per_segment": 8},
      "topology": {"family": "hpn", "tor": {"up_ports": 64}}}, "topology.tor"),
    ({"hosts": {"count": 10, "ports_per_nic": 1}, "topology": {"family": "hpn"}},
     "hosts.ports_per_nic"),
    ({"hosts": {"count": 5000, "ports_per_nic": 2, "port_gbps": 200},
      "topology": {"family": "hpn", "core": None}}, "topology.core"),
    ({"hosts": {"count": 10}, "topology": {"family": "clos", "leaf": {"model": "nope"}}},
     "topology.leaf.model"),
    ({"hosts": {"gpus": 12}, "topology": {"family": "clos"}}, "hosts.gpus"),
    ({"hosts": {"count": 10, "nics_per_host": 3}, "topology": {"family": "clos"}},
     "hosts.nics_per_host"),
    ({"hosts": {"count": 100000}, "topology": {"family": "fat_tree", "k": 16}}, "hosts.count"),
    ({"hosts": {"count": 4}, "topology": {"family": "fat_tree", "k": 7}}, "topology.k"),
    ({"hosts": {"count": 4}, "topology": {"family": "fat_tree", "k": 12}},
     "topology.rail_optimized"),
    ({"hosts": {"count": 10, "port_gbps": 100},
      "switch_models": {"x": {"ports": 32, "port_gbps": 400, "breakouts": [1, 2]}},
      "topology": {"family": "clos", "leaf": {"model": "x"}, "spine": {"model": "x"}}},
     "topology.leaf.down_gbps"),
    ({"hosts": {"count": 10}, "addressing": {"nic_pool": "10.0.0.0/28"},
      "topology": {"family": "clos"}}, "addressing.nic_pool"),
])
def test_impossible_fabrics_name_the_field(doc, path):
    """A fabric that cannot be built stops with a SpecError naming the field."""
    with pytest.raises(SpecError) as info:
        build_fabric(spec_from_dict(doc))
    paths = [p.path for p in info.value.problems]
    assert paths == [path], info.value
    assert "allowed" in str(info.value) or "need" in str(info.value)
