"""Failures: ECMP groups recomputed from live links, dual-ToR NICs fail over to their other
port, hosts behind a dead single ToR are unreachable; bad failure names are refused."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.errors import SpecError
from aifabric.routing import failed_links, failure_impact, make_flows, route
from aifabric.routing.failover import compare_routes
from aifabric.routing.scenario import load_scenario
from aifabric.routing.traffic import build_traffic
from aifabric.topology import LinkKind, NodeKind, build_fabric
from tests.conftest import EXAMPLES
from tests.routing.helpers import check_routed, small

SCEN = EXAMPLES / "scenarios"


def _run(name):
    sc = load_scenario(SCEN / f"{name}.yaml")
    f = build_fabric(sc.spec)
    flows, _ = build_traffic(f, sc.traffic, seed=sc.seed, base_dir=sc.base_dir)
    down = failed_links(f, sc.failures)
    return f, flows, sc, down


def test_hpn_tor_failure_keeps_every_host_reachable():
    """One HPN ToR dies: every dual-ToR host stays reachable, each affected NIC loses
    exactly one port — 6.25% of a host's 16 x 200G — and every QP that used the dead
    side moves to the NIC's other port (its own source port, or its destination's)."""
    f, flows, sc, down = _run("hpn-tor-failure")
    tor = f.node_id("tor-s00-r0-a")
    assert down.sum() == ((f.links.a == tor) | (f.links.b == tor)).sum()
    r = route(f, flows, sc.policy, failures=~down)
    check_routed(r)
    assert not r.unreachable.any()
    im = failure_impact(f, ~down)
    hosts_under = int(((f.links.b == tor) & (f.links.kind == LinkKind.ACCESS)).sum())
    assert hosts_under == 136  # 128 active + 8 backup hosts
    assert im["nic_ports_down"] == 136 and im["nics_degraded"] == 136
    assert im["nics_isolated"] == 0 and im["hosts_unreachable"] == 0
    assert im["host_bandwidth_lost"] == [{"fraction": 0.0625, "hosts": 128}]
    # no flow uses a port behind the dead ToR, in either direction
    dead_ports = f.links.a[(f.links.b == tor) & (f.links.kind == LinkKind.ACCESS)]
    assert not np.isin(r.flows.src_nic, dead_ports).any()
    assert not np.isin(r.flows.dst_nic, dead_ports).any()
    base = route(f, flows, sc.policy)
    moved_expected = np.isin(base.flows.src_nic, dead_ports) | np.isin(base.flows.dst_nic,
                                                                        dead_ports)
    assert (r.moved == moved_expected).all()
    cmp = compare_routes(base, r)
    assert cmp["moved_port"] == int(moved_expected.sum()) > 0
    assert cmp["unreachable"] == 0


def test_single_tor_failure_makes_its_hosts_unreachable():
    """In the single-ToR fabric the hosts behind a dead ToR have no live port: they are
    unreachable and so is every flow to or from them; all other flows still arrive."""
    f, flows, sc, down = _run("single-tor-failure")
    r = route(f, flows, sc.policy, failures=~down)
    check_routed(r)
    im = failure_impact(f, ~down)
    tor = f.node_id("tor-s00")
    behind = np.unique(f.nodes.host[f.links.a[(f.links.b == tor)
                                              & (f.links.kind == LinkKind.ACCESS)]])
    assert im["hosts_unreachable"] == len(behind) == 16
    assert im["host_bandwidth_lost"] == [{"fraction": 1.0, "hosts": 16}]
    touches = np.isin(f.nodes.host[flows.src_gpu], behind) | \
        np.isin(f.nodes.host[flows.dst_gpu], behind)
    assert (r.unreachable == touches).all()
    assert touches.any() and not touches.all()


def test_ecmp_groups_are_recomputed_around_a_dead_uplink():
    """Killing links takes them out of every ECMP group: no path uses them, everything
    stays reachable, and only flows that used them are rerouted."""
    f = small("fat_tree")
    g = f.ids(NodeKind.GPU, active_only=True)
    fl = make_flows(f, g, np.roll(g, -40), 1000, qps_per_connection=4)
    base = route(f, fl)
    used = np.unique(base.arcs[f.links.kind[base.arcs // 2] == LinkKind.SPINE_CORE] // 2)
    kill = used[:5]
    alive = np.ones(f.n_links, dtype=bool)
    alive[kill] = False
    r = route(f, fl, failures=alive)
    check_routed(r)
    assert not r.unreachable.any()
    assert not np.isin(r.arcs // 2, kill).any()
    crossed = np.zeros(len(fl), dtype=bool)
    crossed[base.entry_flow[np.isin(base.arcs // 2, kill)]] = True
    assert compare_routes(base, r)["rerouted"] >= int(crossed.sum()) > 0


def test_failure_by_link_and_port_names():
    """A failure names a link by its two ends, or a port as device:interface (switch lane
    or host ens<nic>f<port>), each resolving to exactly that link."""
    f = small("hpn2")
    li = f.links
    ls = np.flatnonzero(li.kind == LinkKind.LEAF_SPINE)[3]
    a, b = str(f.nodes.name[li.a[ls]]), str(f.nodes.name[li.b[ls]])
    assert np.flatnonzero(failed_links(f, [{"link": [a, b]}])).tolist() == [ls]
    port = f"{a}:Ethernet{int(li.a_port[ls])}"
    assert np.flatnonzero(failed_links(f, [{"port": port}])).tolist() == [ls]
    nic = f.ids(NodeKind.NIC)[1]
    host = str(f.nodes.name[f.host_node[f.nodes.host[nic]]])
    iface = f.port_name(int(nic), 0)
    acc = np.flatnonzero((li.a == nic) & (li.kind == LinkKind.ACCESS)).tolist()
    assert np.flatnonzero(failed_links(f, [{"port": f"{host}:{iface}"}])).tolist() == acc


@pytest.mark.parametrize(("item", "path", "text"), [
    ({"link": ["tor-nope", "agg-p00-pl0-00"]}, "failures.0.link", "no node called 'tor-nope'"),
    ({"switch": "core-zz"}, "failures.0.switch", "no node called 'core-zz'"),
    ({"port": "tor-s00-r0-a:Ethernet9999"}, "failures.0.port", "no interface"),
    ({"port": "tor-s00-r0-a:eth0"}, "failures.0.port", "Ethernet<lane>"),
])
def test_bad_failure_names_are_refused(item, path, text):
    """A failure naming a node, link or port that does not exist is bad input that names
    the field."""
    f = small("hpn2")
    with pytest.raises(SpecError) as exc:
        failed_links(f, [item])
    (p,) = exc.value.problems
    assert p.path == path and text in p.message


def test_a_link_between_unlinked_nodes_is_refused():
    """Two real nodes with no link between them do not name a link."""
    f = small("hpn2")
    tors = f.nodes.name[f.ids(NodeKind.TOR)]
    with pytest.raises(SpecError, match="no link between"):
        failed_links(f, [{"link": [str(tors[0]), str(tors[1])]}])
