"""Invariant checks every fabric must pass (networkx's ``validate_path`` habit).

Each helper states the rule it checks and raises AssertionError with the offenders.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from aifabric.planning import port_usage
from aifabric.topology import Fabric, LinkKind, NodeKind


def ports_used_once(f: Fabric) -> None:
    """Every (switch, port) and every NIC port carries at most one cabled link."""
    li = f.links
    cabled = li.kind >= LinkKind.ACCESS
    sw_keys = np.concatenate([
        li.a[cabled & f.is_switch[li.a]].astype(np.int64) * 1_000_000
        + li.a_port[cabled & f.is_switch[li.a]],
        li.b[cabled & f.is_switch[li.b]].astype(np.int64) * 1_000_000
        + li.b_port[cabled & f.is_switch[li.b]],
    ])
    assert np.unique(sw_keys).size == sw_keys.size, "a switch port is used twice"
    nic = f.ids(NodeKind.NIC)
    access = li.a[li.kind == LinkKind.ACCESS]
    counts = np.bincount(access, minlength=f.n_nodes)[nic]
    assert (counts == 1).all(), f"{(counts != 1).sum()} NIC ports without exactly one cable"


def within_port_count(f: Fabric) -> None:
    """No switch uses more physical ports than its model has."""
    used, ports = port_usage(f)
    over = np.flatnonzero(used > ports)
    assert over.size == 0, f"over their port count: {f.nodes.name[over[:5]]}"


def all_gpus_connected(f: Fabric) -> None:
    """Every GPU reaches every other GPU (one connected component holds all GPUs)."""
    g = sp.csr_matrix((np.ones(f.n_links), (f.links.a, f.links.b)), shape=(f.n_nodes,) * 2)
    _, label = connected_components(g, directed=False)
    gpu_labels = np.unique(label[f.ids(NodeKind.GPU)])
    assert gpu_labels.size == 1, f"GPUs fall into {gpu_labels.size} components"


def links_point_up(f: Fabric) -> None:
    """A cabled link's end a is one tier below its end b (a -> b is up)."""
    li = f.links
    cabled = li.kind >= LinkKind.ACCESS
    ta, tb = f.nodes.tier[li.a[cabled]], f.nodes.tier[li.b[cabled]]
    assert (tb == ta + 1).all(), "a cabled link does not join adjacent tiers upward"
    tier_of_kind = li.kind[cabled] - LinkKind.ACCESS + 1
    assert (tb == tier_of_kind).all(), "link kind does not match the tier it reaches"


def capacities_match_spec(f: Fabric) -> None:
    """Link capacities are the spec's: NIC port speed on access links, NVLink per GPU on
    scale-up links, PCIe on GPU<->NIC links; both directions equal."""
    h = f.spec.hosts
    li = f.links
    cap = li.capacity_gbps
    assert (cap[:, 0] == cap[:, 1]).all()
    assert (cap[li.kind == LinkKind.ACCESS, 0] == h.port_gbps).all()
    assert (cap[li.kind == LinkKind.PCIE, 0] == h.pcie_gbps).all()
    per_gpu = np.bincount(li.a[li.kind == LinkKind.SCALEUP],
                          weights=cap[li.kind == LinkKind.SCALEUP, 0], minlength=f.n_nodes)
    if h.scaleup == "mesh" and h.gpus_per_host > 1:
        per_gpu += np.bincount(li.b[li.kind == LinkKind.SCALEUP],
                               weights=cap[li.kind == LinkKind.SCALEUP, 0], minlength=f.n_nodes)
    gpus = f.ids(NodeKind.GPU)
    if h.gpus_per_host > 1:
        assert np.allclose(per_gpu[gpus], h.scaleup_gbps)
    # uplink capacity of a tier equals the downlink capacity of the tier above on each link
    for kind in (LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE):
        sel = li.kind == kind
        if sel.any():
            speeds = np.unique(cap[sel, 0])
            assert speeds.size == 1, f"{kind.label} links at several speeds {speeds}"


def nic_addressing(f: Fabric) -> None:
    """One /32 per NIC: the ports of a NIC share it, different NICs never do."""
    nic = f.ids(NodeKind.NIC)
    key = f.nodes.host[nic].astype(np.int64) * 1024 + f.nodes.rail[nic]
    ip = f.nodes.ip[nic]
    _, first = np.unique(key, return_index=True)
    assert np.unique(ip[first]).size == first.size, "two NICs share an address"
    order = np.argsort(key, kind="stable")
    same = key[order][1:] == key[order][:-1]
    assert (ip[order][1:][same] == ip[order][:-1][same]).all(), "a NIC's ports differ in IP"


def unique_names(f: Fabric) -> None:
    """Node names are unique."""
    assert np.unique(f.nodes.name).size == f.n_nodes


ALL = (ports_used_once, within_port_count, all_gpus_connected, links_point_up,
       capacities_match_spec, nic_addressing, unique_names)


def check_all(f: Fabric) -> None:
    f.check_consistent()
    for rule in ALL:
        rule(f)
