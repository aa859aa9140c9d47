"""The plan's figures, checked against the Fabric itself and against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric import plan_fabric, spec_from_dict
from aifabric.planning import bisection_gbps
from aifabric.planning.propose import propose
from aifabric.spec import dump_spec, load_spec
from aifabric.topology import LinkKind, NodeKind, build_fabric
from tests.conftest import example


@pytest.fixture(scope="module")
def hpn_plan():
    return plan_fabric(example("hpn-pod"))


def test_hpn_pod_numbers(hpn_plan):
    """The figures of one HPN pod in the Alibaba HPN paper (SIGCOMM 2024)."""
    p = hpn_plan
    assert p["gpus"] == 15_360
    assert p["hosts"] == 1_920
    assert p["backup_hosts"] == 120
    assert p["segments"] == 15
    assert p["switches"]["tor"] == 240
    assert p["switches"]["agg"] == 120
    assert p["oversubscription"]["tor"] == 1.0667
    assert p["oversubscription"]["agg"] == 15.0
    assert p["planes"] == 2


def test_hpn_numbers_agree_with_the_fabric(hpn_plan):
    """Counts and oversubscription recomputed by hand from the arrays."""
    f = example("hpn-pod")
    n, li = f.nodes, f.links
    assert hpn_plan["gpus"] == int(((n.kind == NodeKind.GPU) & ~n.backup).sum())
    tor = f.ids(NodeKind.TOR)[0]
    down = li.capacity_gbps[(li.b == tor) & ~n.backup[li.a], 0].sum()
    up = li.capacity_gbps[li.a == tor, 0].sum()
    expect = round(128 * 200 / (60 * 400), 4)
    assert round(down / up, 4) == hpn_plan["oversubscription"]["tor"] == expect
    agg = f.ids(NodeKind.AGG)[0]
    assert li.capacity_gbps[li.b == agg, 0].sum() / li.capacity_gbps[li.a == agg, 0].sum() == 15.0
    by_tier = {(r["tier"], r["gbps"]): r["count"] for r in hpn_plan["links"]}
    assert by_tier[("access", 200.0)] == int((li.kind == LinkKind.ACCESS).sum()) == 2040 * 16
    assert by_tier[("leaf_spine", 400.0)] == 240 * 60


def test_hops_per_pair_kind(hpn_plan):
    """Same host: NVLink only; same rail in a segment: 1 ToR; cross-rail: NVLink then 1
    ToR (PXN); cross-segment: ToR-agg-ToR; cross-pod: 5."""
    hops = {k: (v["switch_hops"] if v else None) for k, v in hpn_plan["hops"].items()}
    assert hops == {"same_host": 0, "same_rail_segment": 1, "cross_rail_segment": 1,
                    "cross_segment": 3, "cross_pod": None}
    ft = plan_fabric(example("fat-tree-k64"), bisection=False)
    assert ft["hops"]["cross_pod"]["switch_hops"] == 5
    assert ft["hops"]["cross_segment"]["switch_hops"] == 3


def test_hop_latency_is_the_sum_along_the_path(hpn_plan):
    """Same rail, one segment: PCIe + access + ToR + access + PCIe."""
    s = example("hpn-pod").spec
    lat = s.latency
    access = lat.access_m * lat.cable_ns_per_m
    expect = 2 * lat.pcie_ns + 2 * access + 800
    assert hpn_plan["hops"]["same_rail_segment"]["latency_ns"] == expect


@pytest.mark.parametrize("k", [4, 8, 16])
def test_fat_tree_bisection_is_full(k):
    """A non-blocking fat-tree carries every GPU's NIC rate across the bisection."""
    spec = spec_from_dict({"hosts": {"gpus_per_host": 1, "nics_per_host": 1, "port_gbps": 400},
                           "topology": {"family": "fat_tree", "k": k,
                                        "switch": {"model": "tomahawk5"},
                                        "rail_optimized": False}})
    hosts = k**3 // 4
    assert bisection_gbps(build_fabric(spec)) == hosts // 2 * 400


@pytest.mark.parametrize("ratio", [1.0, 3.0])
def test_clos_bisection_follows_oversubscription(ratio):
    """2-tier leaf-spine with down:up = r: the bisection is limited to
    min(NIC bandwidth, leaf uplink bandwidth) of one half."""
    hosts = 24
    spec = spec_from_dict({"hosts": {"count": hosts, "gpus_per_host": 8, "nics_per_host": 8,
                                     "port_gbps": 400},
                           "topology": {"family": "clos", "oversubscription": ratio,
                                        "leaf": {"model": "tomahawk3"},
                                        "spine": {"model": "tomahawk3"}}})
    f = build_fabric(spec)
    leaves = f.ids(NodeKind.TOR)
    down = int(32 * ratio / (1 + ratio))  # physical down ports of a 32-port leaf
    per_leaf = down // 8
    assert len(leaves) == -(-hosts // per_leaf)
    up_per_leaf = 32 - down
    half_leaves = hosts // 2 // per_leaf  # the halves split on a leaf boundary here
    expect = min(hosts // 2 * 8 * 400, half_leaves * up_per_leaf * 400)
    assert bisection_gbps(f) == expect
    assert expect == hosts // 2 * 8 * 400 / ratio
    assert plan_fabric(f)["oversubscription"]["tor"] == round(int(down) / up_per_leaf, 4)


def test_propose_for_5000_gpus():
    """All five families are candidates; every one that fits really holds the GPUs; the
    pick has the fewest tiers, then the fewest switches."""
    cands, best = propose(gpus=5000, nic_gbps=400, switch_ports=128, switch_gbps=400)
    labels = [c.label.split(":")[0] for c in cands]
    assert labels == ["clos", "rail", "multiplane", "hpn", "fat_tree"]
    fitting = [c for c in cands if c.fits]
    assert len(fitting) == 5
    for c in fitting:
        assert c.plan["gpus"] >= 5000
    assert best is not None
    assert best.rank() == min(c.rank() for c in fitting)
    assert best.plan["tiers"] == 2
    # the chosen spec round-trips through YAML
    text = dump_spec(best.spec)
    assert spec_from_dict(__import__("yaml").safe_load(text)) == best.spec


def test_propose_reports_what_does_not_fit():
    """100K GPUs on 64-port switches: 2-tier designs do not fit and say why."""
    cands, _best = propose(gpus=100_000, nic_gbps=400, switch_ports=64, switch_gbps=400)
    two_tier = [c for c in cands if c.label.startswith(("clos", "rail"))]
    assert all(not c.fits and "hosts.count" in c.reason for c in two_tier)


def test_examples_load_and_dump_round_trip():
    for name in ("hpn-pod", "roce-5000", "single-tor-dcn"):
        from tests.conftest import EXAMPLES
        spec = load_spec(EXAMPLES / f"{name}.yaml")
        again = spec_from_dict(__import__("yaml").safe_load(dump_spec(spec)))
        assert again == spec
        assert np.array_equal(build_fabric(again).links.a, example(name).links.a)
