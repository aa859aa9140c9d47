"""Which failures interrupt a job is the routing model's answer, not a flag.

Dual-ToR (HPN): no single ToR failure cuts a job off; the jobs with a host under it only
lose a port. Single-ToR baseline: a ToR failure cuts off every job with a host under it
and no other. "Under it" is read from the cabling (the access links), the verdict from
:func:`aifabric.routing.route` with the ToR's links down.
"""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.reliability.impact import Group, component_groups, job_impact
from aifabric.reliability.spec import GoodputScenario
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.run import compile_workload
from aifabric.topology import build_fabric
from aifabric.topology.fabric import LinkKind, NodeKind

HPN = {"name": "hpn-small",
       "hosts": {"count": 64, "gpus_per_host": 8, "nics_per_host": 8, "ports_per_nic": 2,
                 "port_gbps": 200, "backup_per_segment": 2},
       "topology": {"family": "hpn", "planes": 2, "hosts_per_segment": 16,
                    "tor": {"up_ports": 8, "up_gbps": 400, "down_gbps": 200},
                    "agg": {"down_ports": 32, "up_ports": 0}, "core": None}}
SINGLE = {"name": "single-tor-small",
          "hosts": {"count": 64, "gpus_per_host": 8, "nics_per_host": 8, "port_gbps": 200},
          "topology": {"family": "single_tor", "hosts_per_tor": 8}}
# three jobs: one inside a segment, one across two, one spread over all
JOBS = [{"name": "a", "gpus": 64, "parallel": {"dp": 8, "tp": 8}},
        {"name": "b", "gpus": 192, "parallel": {"dp": 24, "tp": 8}},
        {"name": "c", "gpus": 64, "placement": "spread", "parallel": {"dp": 8, "tp": 8}}]
GOODPUT = {"checkpoint": {"levels": [{"name": "m", "store": "host_memory", "every": "10min",
                                      "save": 1}]}, "slowdown": "none", "sweep": None}


def _setup(spec):
    sc = scenario_from_dict({"name": "t", "spec": spec, "jobs": JOBS, "goodput": GOODPUT},
                            model=GoodputScenario)
    f = build_fabric(sc.spec)
    return sc, f, compile_workload(sc, f).job_gpus


def _hosts_under(f, tor: int) -> np.ndarray:
    acc = (f.links.kind == LinkKind.ACCESS) & (f.links.b == tor)
    return np.unique(f.nodes.host[f.links.a[acc]])


def _one(f, tor: int) -> Group:
    links = np.flatnonzero((f.links.a == tor) | (f.links.b == tor))
    return Group("tor", (tor,), 1, str(f.nodes.name[tor]), links)


@pytest.fixture(scope="module")
def hpn():
    return _setup(HPN)


@pytest.fixture(scope="module")
def single():
    return _setup(SINGLE)


def test_dual_tor_a_tor_failure_never_interrupts(hpn):
    sc, f, jobs = hpn
    tors = f.ids(NodeKind.TOR)
    degraded_any = 0
    for gpus in jobs:
        hosts = np.unique(f.nodes.host[gpus])
        table = job_impact(f, gpus, sc.policy, [_one(f, int(t)) for t in tors])
        assert table.route_calls == len(tors)
        for t, g in zip(tors, table.groups, strict=True):
            assert not g.interrupts, g.rep_name
            under = np.isin(_hosts_under(f, int(t)), hosts).any()
            assert g.degrades == under, g.rep_name
            degraded_any += g.degrades
    assert degraded_any > 0


def test_single_tor_interrupts_exactly_the_jobs_under_it(single):
    sc, f, jobs = single
    tors = f.ids(NodeKind.TOR)
    seen = set()
    for j, gpus in enumerate(jobs):
        hosts = np.unique(f.nodes.host[gpus])
        table = job_impact(f, gpus, sc.policy, [_one(f, int(t)) for t in tors])
        for t, g in zip(tors, table.groups, strict=True):
            under = bool(np.isin(_hosts_under(f, int(t)), hosts).any())
            assert g.interrupts == under, (j, g.rep_name)
            assert not g.degrades
            seen.add(under)
    assert seen == {True, False}  # both answers occur


@pytest.mark.parametrize("which", ["hpn", "single"])
def test_cached_group_answers_hold_for_every_member(which, request):
    """The model asks the routing model once per group; each ToR, and a sample of the NIC
    ports and access links, answers the same when failed on its own."""
    sc, f, jobs = request.getfixturevalue(which)
    rng = np.random.default_rng(0)
    for gpus in jobs:
        hosts = np.unique(f.nodes.host[gpus])
        groups = component_groups(f, hosts)
        table = job_impact(f, gpus, sc.policy, groups)
        assert table.route_calls == len(groups) < 40
        for g in table.groups:
            if g.cls not in ("tor", "nic_port", "access_link", "agg"):
                continue
            assert g.members is not None and len(g.members) == g.count
            pick = g.members if g.count <= 8 else rng.choice(g.members, 4, replace=False)
            singles = []
            for m in pick:
                m = int(m)
                if g.cls == "access_link":
                    links, name = np.array([m]), f"link {m}"
                else:
                    links = np.flatnonzero((f.links.a == m) | (f.links.b == m))
                    name = str(f.nodes.name[m])
                singles.append(Group(g.cls, g.key, 1, name, links))
            answers = job_impact(f, gpus, sc.policy, singles)
            for s in answers.groups:
                assert (s.interrupts, s.degrades) == (g.interrupts, g.degrades), \
                    (g.cls, g.key, s.rep_name)


def test_groups_cover_every_component_once(hpn):
    _, f, jobs = hpn
    hosts = np.unique(f.nodes.host[jobs[0]])
    groups = component_groups(f, hosts)
    by = {c: sum(g.count for g in groups if g.cls == c) for c in
          ("tor", "agg", "access_link", "nic_port", "fabric_link")}
    assert by["tor"] == len(f.ids(NodeKind.TOR))
    assert by["agg"] == len(f.ids(NodeKind.AGG))
    active_nic = f.ids(NodeKind.NIC, active_only=True)
    assert by["nic_port"] == len(active_nic)
    acc = f.links.kind == LinkKind.ACCESS
    assert by["access_link"] == int((acc & ~f.nodes.backup[f.links.a]).sum())
    sw = (f.links.kind == LinkKind.LEAF_SPINE) | (f.links.kind == LinkKind.SPINE_CORE)
    assert by["fabric_link"] == int(sw.sum())
