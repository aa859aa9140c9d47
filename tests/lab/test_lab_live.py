"""The lab on real FRR in network namespaces (needs root, `ip netns` and FRR; CI has them).

Each test states the rule it checks. Expected values are computed from the fabric (the
number of switch-to-switch links, the NICs behind a ToR), never written in by hand.
"""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

from aifabric.lab import LabError, check_lab, lab_namespaces, lab_prefix, load_lab
from aifabric.lab import core as lab_core
from aifabric.lab import fail as lab_fail
from aifabric.lab.daemons import alive, daemon_pids
from aifabric.lab.verify import kernel_groups, nics
from aifabric.topology import LinkKind, NodeKind
from tests.conftest import EXAMPLES
from tests.lab.live import live

pytestmark = live

#: a bounded wait for sessions and routes to settle on a freshly started lab
SETTLE_S = 60.0


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines()}


def _assert_gone(lab_dir, prefix, pids, root_links_before):
    """Nothing of the lab remains: no namespace with its prefix, no daemon, no new link
    in the root namespace, no state."""
    assert lab_namespaces(prefix) == []
    assert [p for p in pids if alive(p, lab_dir)] == []
    assert _root_links() <= root_links_before
    assert not (lab_dir / "state.json").exists()


def _nics_behind(f, tor_name):
    """NIC numbers with a port on ``tor_name`` and how many ToRs each NIC has."""
    links, nodes = f.links, f.nodes
    acc = links.kind == LinkKind.ACCESS
    N = f.spec.hosts.nics_per_host
    tors: dict[int, set[int]] = {}
    for a, b in zip(links.a[acc].tolist(), links.b[acc].tolist(), strict=True):
        tors.setdefault(int(nodes.host[a]) * N + int(nodes.rail[a]), set()).add(b)
    t = f.node_id(tor_name)
    return {no: len(ts) for no, ts in tors.items() if t in ts}


@pytest.fixture(scope="module")
def hpn_lab(tmp_path_factory):
    lab_dir = tmp_path_factory.mktemp("hpn") / "lab"
    before = _root_links()
    lab = lab_core.up(EXAMPLES / "hpn-pod.yaml", "small", lab_dir)
    yield lab, before
    if (lab_dir / "state.json").exists():
        lab_core.teardown(lab_dir)


def test_hpn_lab_sessions_groups_reachability_hops(hpn_lab):
    """Small HPN copy: every eBGP session (2 per switch-to-switch link) is established,
    every kernel ECMP group of every switch toward every NIC equals the routing model's,
    every probe answers as the model says and every NIC pair is reachable, with the
    plan's hop counts -- all within a bounded wait."""
    lab, _ = hpn_lab
    f = lab.fabric
    r = check_lab(load_lab(lab.dir), timeout_s=SETTLE_S)
    p2p = int(np.isin(f.links.kind, (LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE)).sum())
    assert r.sessions_expected == 2 * p2p and r.sessions_up == r.sessions_expected
    assert r.groups == int(f.is_switch.sum()) * len(nics(f))
    assert r.ecmp_groups > 0 and not r.group_diffs
    assert r.pairs > 0 and r.reachable == r.pairs and not r.lost
    assert r.probes_ok == r.probes == r.expected_reachable
    assert r.hops_checked == r.probes and not r.hops_wrong
    assert set(r.hop_counts) == {1, 3}  # same rail + segment: its ToR; else ToR-agg-ToR
    assert r.converged_s < SETTLE_S
    assert r.ok


def test_second_lab_in_the_same_folder_is_refused(hpn_lab, cli):
    """`lab up` where a lab is already up: exit 2, one line; the running lab is untouched."""
    lab, _ = hpn_lab
    n = len(lab_namespaces(lab.prefix))
    r = cli("lab", "up", EXAMPLES / "hpn-pod.yaml", "--dir", lab.dir)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "already up" in r.err
    assert len(lab_namespaces(lab.prefix)) == n


def test_hpn_tor_failure_keeps_dual_tor_hosts_reachable(hpn_lab, cli):
    """Failing one ToR of a dual-ToR pair: the kernel routes converge to the model's for
    the fabric without that ToR (time reported), every NIC behind it stays reachable from
    every other NIC through its surviving ToR, its hosts' default routes move to the
    surviving port, and the surviving plane still routes to it."""
    lab, _ = hpn_lab
    f = lab.fabric
    target = "tor-s01-r0-a"
    behind = _nics_behind(f, target)
    assert behind and all(n == 2 for n in behind.values())  # dual-ToR NICs
    res = lab_fail(load_lab(lab.dir), target, timeout_s=30)
    assert res.routes_s is not None and res.routes_s < 30
    assert res.traffic_s is not None and res.traffic_s < 30
    assert not res.mismatches and res.report is not None
    assert not res.lost
    pairs = res.report.nic_pairs()
    ip_of = {n.number: n.ip for n in nics(f)}
    for no in behind:
        to_it = [ok for (s, d), ok in pairs.items() if d == ip_of[no]]
        assert to_it and all(to_it), f"{ip_of[no]} not reached from every NIC"
    survivor = f.node_id("tor-s01-r0-b")
    host_moves = [m for m in res.moved if m[1] in {ip_of[no] for no in behind}
                  and f.nodes.kind[f.node_id(m[0])] == NodeKind.HOST]
    assert len(host_moves) == len(behind)
    for _, _, before, after in host_moves:
        assert len(before) == 2 and len(after) == 1
        (lid,) = after
        assert int(f.links.b[lid]) == survivor
    groups = kernel_groups(f, lab.layout.ns, lab.layout.switches)
    plane1 = [s for s in lab.layout.switches if s != target
              and f.nodes.plane[f.node_id(s)] == 1]
    for sw in plane1:
        for no in behind:
            assert groups[sw][ip_of[no]] is not None, (sw, ip_of[no])
    # status shows the failure; lab test still agrees with the model
    r = cli("lab", "status", "--dir", lab.dir)
    assert r.code == 0 and "failed" in r.out
    t = check_lab(load_lab(lab.dir), timeout_s=10)
    assert t.ok and t.failures == [target]


def test_hpn_lab_down_leaves_nothing(hpn_lab, cli):
    """`lab down` stops every FRR daemon (frozen ones too) and removes every namespace and
    veth it made, and the lab folder's state -- and nothing else."""
    lab, before = hpn_lab
    pids = list(daemon_pids(lab.dir).values())
    assert pids and lab_namespaces(lab.prefix)
    bystander = lab.prefix[:-1] + "x-bystander"  # looks alike, is not the lab's
    subprocess.run(["ip", "netns", "add", bystander], check=True)
    try:
        r = cli("lab", "down", "--dir", lab.dir)
        assert r.code == 0, r.err
        _assert_gone(lab.dir, lab.prefix, pids, before)
        assert bystander in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                           text=True, check=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", bystander], check=False)


def test_fat_tree_lab_cli_and_single_attached_leaf_failure(cli, tmp_path):
    """Small fat-tree through the CLI: `lab test` passes; failing a leaf cuts off exactly
    the NICs attached only to it and every other NIC stays reachable; `lab down` leaves
    nothing behind."""
    lab_dir = tmp_path / "lab"
    before = _root_links()
    r = cli("lab", "up", EXAMPLES / "fat-tree-k64.yaml", "--dir", lab_dir)
    assert r.code == 0, r.err
    try:
        r = cli("lab", "test", "--dir", lab_dir)
        assert r.code == 0 and "PASS" in r.out, r.out
        lab = load_lab(lab_dir)
        f = lab.fabric
        assert len(set(f.nodes.pod[f.ids(NodeKind.TOR)].tolist())) >= 2
        target = str(f.nodes.name[f.ids(NodeKind.TOR)[0]])
        behind = _nics_behind(f, target)
        assert behind and all(n == 1 for n in behind.values())  # single-attached
        t0 = time.monotonic()
        res = lab_fail(lab, target, timeout_s=30)
        assert res.routes_s is not None and res.traffic_s is not None
        assert res.routes_s <= time.monotonic() - t0
        ip_of = {n.number: n.ip for n in nics(f)}
        assert sorted(x.split()[1] for x in res.lost) == sorted(ip_of[no] for no in behind)
        pairs = res.report.nic_pairs()
        assert all(ok for (s, d), ok in pairs.items()
                   if d not in res.lost and {s, d}.isdisjoint(ip_of[no] for no in behind))
        pids = list(daemon_pids(lab_dir).values())
    finally:
        r = cli("lab", "down", "--dir", lab_dir)
    assert r.code == 0, r.err
    _assert_gone(lab_dir, lab_prefix(lab_dir), pids, before)


def test_lab_failing_half_way_is_torn_down(monkeypatch, tmp_path):
    """A lab whose FRR rejects a config half-way through `up` is torn down: LabError,
    and no namespace, daemon or state is left."""
    real = lab_core.layout

    def broken(*args, **kwargs):
        lay = real(*args, **kwargs)
        sw = lay.switches[-1]
        lay.frr_conf[sw] = lay.frr_conf[sw].replace("router bgp", "router bgp-typo", 1)
        return lay

    monkeypatch.setattr(lab_core, "layout", broken)
    lab_dir = tmp_path / "lab"
    before = _root_links()
    with pytest.raises(LabError, match="rejected"):
        lab_core.up(EXAMPLES / "fat-tree-k64.yaml", "small", lab_dir)
    _assert_gone(lab_dir, lab_prefix(lab_dir), [], before)
    assert not lab_dir.exists() or not list(lab_dir.glob("frr/*/*.pid"))
