"""``topology.oversubscription`` takes effect as documented, or is an error naming the
conflict; role fields a family would not use are errors, never silently ignored.

The ratio is measured from the built Fabric's own links: for every switch of a tier,
active down bandwidth (links to backup hosts are standby) over up bandwidth. "Honoured"
means: no switch exceeds the requested ratio, and the fullest switch could not lose one
uplink without exceeding it (the closest whole-port answer).
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from aifabric import spec_from_dict
from aifabric.errors import SpecError
from aifabric.planning import plan_fabric
from aifabric.spec import dump_spec
from aifabric.topology import NodeKind, build_fabric

RATIOS = [0.5, 1.0, 1.5, 3.0, 7.0]


def _build(topology: dict, **hosts):
    doc = {"name": "t", "hosts": {"count": 64, **hosts}, "topology": topology}
    return build_fabric(spec_from_dict(doc))


def _tier(f, kind: NodeKind):
    """Per switch of ``kind``: (active down Gb/s, up Gb/s, uplink count, uplink Gb/s)."""
    links, nodes = f.links, f.nodes
    active = ~nodes.backup[links.a]
    down = np.bincount(links.b, weights=links.capacity_gbps[:, 1] * active,
                       minlength=f.n_nodes)
    up = np.bincount(links.a, weights=links.capacity_gbps[:, 0], minlength=f.n_nodes)
    n_up = np.bincount(links.a, minlength=f.n_nodes)
    sw = np.flatnonzero(nodes.kind == kind)
    ug = np.unique(links.capacity_gbps[np.isin(links.a, sw), 0])
    assert len(ug) == 1, "one uplink speed per tier"
    return down[sw], up[sw], n_up[sw], float(ug[0])


def assert_honoured(f, kind: NodeKind, ratio: float, name: str):
    down, up, n_up, ug = _tier(f, kind)
    assert (up > 0).all()
    measured = down / up
    assert measured.max() <= ratio + 1e-9, (kind, measured.max(), ratio)
    i = int(np.argmax(measured))
    # one uplink fewer on the fullest switch would exceed the ratio: the fewest uplinks
    assert n_up[i] == 1 or down[i] / (up[i] - ug) > ratio + 1e-9, (kind, down[i], up[i])
    # and the plan summary reports what the Fabric has
    assert plan_fabric(f, bisection=False)["oversubscription"][name] == round(
        float(measured.max()), 4)


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("topology", [
    {"family": "clos"},
    {"family": "clos", "rail_optimized": True},
    {"family": "rail"},
    {"family": "single_tor"},
    {"family": "single_tor", "hosts_per_tor": 4},
], ids=["clos", "clos-rail", "rail", "single_tor", "single_tor-hosts_per_tor"])
def test_leaf_ratio_is_measured_in_the_fabric(topology, ratio):
    """The ToR/leaf tier of every family with the field: requested ratio = measured
    (to whole ports); the old builder ignored it with hosts_per_tor (all spare ports went
    up) and applied it to the switch's full port count when hosts fill fewer ports."""
    f = _build({**topology, "oversubscription": ratio})
    assert_honoured(f, NodeKind.TOR, ratio, "tor")


@pytest.mark.parametrize("ratio", [1.0, 3.0, 7.0])
@pytest.mark.parametrize("hosts_per_tor", [None, 8])
def test_agg_ratio_is_measured_in_the_fabric(ratio, hosts_per_tor):
    """single_tor with pods: the agg tier takes the ratio on the ToR links it really has
    (the old builder gave 7.0 -> 4:1 or 2:1, 1.0 -> 0.05:1 at 0.5)."""
    topo = {"family": "single_tor", "tors_per_pod": 4, "oversubscription": ratio}
    if hosts_per_tor:
        topo["hosts_per_tor"] = hosts_per_tor
    f = _build(topo, count=256)
    assert int((f.nodes.kind == NodeKind.CORE).sum()) > 0
    assert_honoured(f, NodeKind.TOR, ratio, "tor")
    assert_honoured(f, NodeKind.AGG, ratio, "agg")


def test_issue_example_hosts_per_tor_ratios_differ():
    """The issue's case: with hosts_per_tor, 1.0 and 0.5 used to give the same fabric."""
    a = _build({"family": "single_tor", "hosts_per_tor": 4, "oversubscription": 1.0})
    b = _build({"family": "single_tor", "hosts_per_tor": 4, "oversubscription": 0.5})
    ra = plan_fabric(a, bisection=False)["oversubscription"]["tor"]
    rb = plan_fabric(b, bisection=False)["oversubscription"]["tor"]
    assert (ra, rb) == (1.0, 0.5)


def test_hosts_per_tor_is_honoured_with_spare_down_ports():
    """hosts_per_tor wins over a larger tor.down_ports (it used to fill the ports)."""
    f = _build({"family": "single_tor", "hosts_per_tor": 3,
                "tor": {"model": "tomahawk5", "down_ports": 64}})
    hosts = f.nodes.kind == NodeKind.HOST
    per_tor = np.bincount(f.nodes.segment[hosts])
    assert per_tor.max() == 3


def test_unset_ratio_with_ports_keeps_the_documented_split():
    """hosts_per_tor without a ratio: the ToR's other ports all go up (the examples)."""
    f = _build({"family": "single_tor", "hosts_per_tor": 4})
    _down, _up, n_up, _ug = _tier(f, NodeKind.TOR)
    assert (n_up == 128 - 4 * 8).all()


def test_explicit_ratio_survives_a_yaml_round_trip():
    spec = spec_from_dict({"name": "t", "hosts": {"count": 64}, "topology": {
        "family": "single_tor", "hosts_per_tor": 4, "oversubscription": 1.0}})
    again = spec_from_dict(yaml.safe_load(dump_spec(spec)))
    assert again == spec
    assert plan_fabric(build_fabric(again), bisection=False)["oversubscription"]["tor"] == 1.0


def _problem(topology: dict, **hosts) -> str:
    with pytest.raises(SpecError) as err:
        _build(topology, **hosts)
    return "\n".join(str(p) for p in err.value.problems)


@pytest.mark.parametrize("topology, other", [
    ({"family": "clos", "leaf": {"up_ports": 16}}, "topology.leaf.up_ports"),
    ({"family": "rail", "leaf": {"down_ports": 64, "up_ports": 64}}, "topology.leaf.up_ports"),
    ({"family": "single_tor", "tor": {"up_ports": 32}}, "topology.tor.up_ports"),
    ({"family": "single_tor", "tors_per_pod": 4, "agg": {"up_ports": 8}},
     "topology.agg.up_ports"),
])
def test_ratio_and_up_ports_conflict(topology, other):
    """Both fix the same ratio: an error naming both fields, not one silently ignored."""
    msg = _problem({**topology, "oversubscription": 2.0}, count=256)
    assert "topology.oversubscription" in msg and other in msg


def test_ratio_that_cannot_fit_names_both_fields():
    """8 hosts x 8 ports on a 128-port ToR at 0.5:1 need 128 uplinks: say so."""
    msg = _problem({"family": "single_tor", "hosts_per_tor": 8, "oversubscription": 0.5})
    assert msg.startswith("topology.oversubscription")
    assert "topology.hosts_per_tor" in msg and "at least 1:1" in msg


@pytest.mark.parametrize("topology, field", [
    ({"family": "clos", "leaf": {"count": 4}}, "topology.leaf.count"),
    ({"family": "clos", "spine": {"up_ports": 4}}, "topology.spine.up_ports"),
    ({"family": "rail", "leaf": {"count": 4}}, "topology.leaf.count"),
    ({"family": "multiplane", "leaf": {"count": 4}}, "topology.leaf.count"),
    ({"family": "multiplane", "spine": {"up_ports": 4}}, "topology.spine.up_ports"),
    ({"family": "single_tor", "tor": {"count": 4}}, "topology.tor.count"),
    ({"family": "single_tor", "agg": {"up_ports": 4}}, "topology.agg.up_ports"),
    ({"family": "single_tor", "tors_per_pod": 4, "core": {"count": 2}}, "topology.core.count"),
    ({"family": "fat_tree", "k": 16, "switch": {"down_ports": 4}}, "topology.switch.down_ports"),
    ({"family": "fat_tree", "k": 16, "switch": {"count": 4}}, "topology.switch.count"),
    ({"family": "hpn", "hosts_per_segment": 8, "tor": {"count": 4}}, "topology.tor.count"),
    ({"family": "hpn", "hosts_per_segment": 8, "core": {"count": 4}}, "topology.core.count"),
    ({"family": "hpn", "hosts_per_segment": 8, "core": None,
      "agg": {"down_ports": 120, "up_ports": 8}}, "topology.agg.up_ports"),
])
def test_role_fields_a_family_does_not_use_are_errors(topology, field):
    """Each of these used to build a fabric that ignored the field."""
    hosts = {"ports_per_nic": 2, "port_gbps": 200} if topology["family"] == "hpn" else {}
    msg = _problem(topology, count=64, **hosts)
    assert msg.startswith(field), msg


def test_fat_tree_down_gbps_is_the_nic_facing_speed():
    """switch.down_gbps names the leaves' NIC-facing speed; spines and cores used to take
    it too and put 400G links on 200G half-ports (12 of 16 physical ports used)."""
    def fabric(switch):
        return _build({"family": "fat_tree", "k": 16, "switch": switch}, port_gbps=200)
    plain = fabric({"model": "tomahawk4"})
    given = fabric({"model": "tomahawk4", "down_gbps": 200})
    for name in ("a", "b", "a_port", "b_port", "capacity_gbps"):
        assert np.array_equal(getattr(plain.links, name), getattr(given.links, name)), name


def test_core_down_gbps_must_match_the_agg_uplinks():
    msg = _problem({"family": "single_tor", "tors_per_pod": 4, "core": {"down_gbps": 200}},
                   count=256)
    assert msg.startswith("topology.core.down_gbps") and "400G" in msg
