"""Operating the lab as an SRE would (issue 29), on the small HPN copy with an sshd per
namespace: real FRR, real ansible-playbook over real SSH, the build's own playbooks.

* Safe rollouts: a canary per plane, then batches; a batch with a failure is rolled
  back as a whole to the files it replaced and the rollout stops -- checked on the
  running config of every switch afterwards. The rollback of a failed batch of 7 is
  timed against the issue's bound.
* ``lab deploy``: a changed spec reaches the lab through the same playbooks, and the
  facts preflight then collects belong to the new plan (no hand-patched digest).
* ``lab restore`` / ``lab heal``: a restored ToR gets its host /32s back; after a link
  flap the kernel's nexthop groups equal FRR's and the model's.
* A dead bgpd fails the pre-flight check on that switch, with the reason.

Every wait is bounded; every process the lab starts is stopped by pid at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from aifabric.lab import core as lab_core
from aifabric.lab import verify
from aifabric.lab.daemons import daemon_pids, vtysh
from aifabric.lab.inject import alive_links
from tests.conftest import EXAMPLES
from tests.lab.live import established_lab, live, sessions_missing
from tests.lab.test_deploy import _need_tools, _settled, playbook, recap

pytestmark = live

#: the issue's bound on rolling back a failed batch of 7 switches (raise it on a machine
#: shared with other work: AIFABRIC_ROLLBACK_LIMIT_S)
ROLLBACK_LIMIT_S = float(os.environ.get("AIFABRIC_ROLLBACK_LIMIT_S", "30"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    _need_tools()
    lab_dir = tmp_path_factory.mktemp("operate") / "lab"
    with established_lab(lab_dir, EXAMPLES / "hpn-pod.yaml", ssh=True) as up:
        yield up


def _plane(lab, sw: str) -> int:
    return int(lab.fabric.nodes.plane[lab.fabric.node_id(sw)])


def _frr(lab, sw: str) -> Path:
    return lab.dir / "build" / "switches" / sw / "frr.conf"


def _new_timers(lab, keepalive: int) -> None:
    for sw in lab.layout.switches:
        p = _frr(lab, sw)
        p.write_text(re.sub(r"timers bgp \d+ \d+", f"timers bgp {keepalive} {3 * keepalive}",
                            p.read_text()))


def _break(lab, sw: str) -> None:
    """A wrong remote-as on one neighbour of ``sw`` (its session cannot come up)."""
    text = _frr(lab, sw).read_text()
    m = re.search(r"^ neighbor (\S+) remote-as (\d+)$", text, re.M)
    assert m
    _frr(lab, sw).write_text(text.replace(m.group(0), f" neighbor {m.group(1)} remote-as "
                                          f"{int(m.group(2)) + 1}"))


def _running(lab) -> dict[str, str]:
    """Every switch's running config, but for ``[no] ipv6 forwarding``: the lab's
    namespaces start with IPv6 forwarding off, frr.conf does not mention it, so the first
    frr-reload.py on a switch turns it on (FRR 8.4.4) -- a change of the reload, not of
    the rollout or the rollback."""
    return {s: re.sub(r"^(no )?ipv6 forwarding\n", "", vtysh(lab.dir, s, "show running-config"),
                      flags=re.M) for s in lab.layout.switches}


def _installed(lab) -> dict[str, str]:
    return {s: (lab.dir / "frr" / s / "frr.conf").read_text() for s in lab.layout.switches}


def _rollout(lab) -> dict:
    return json.loads((lab.dir / "build" / "rollout.json").read_text())


def test_canary_then_batches_a_failed_batch_is_rolled_back_and_nothing_else_touched(lab):
    """New timers everywhere, a wrong remote-as on a switch of plane 0's second batch
    (canary 1, batches of 3): the canary keeps the new config (its gate passed); every
    switch of the failed batch runs and holds exactly the config it had before; every
    other switch was never touched; rollout.json says so, and the fabric settles back
    to the model."""
    plane0 = [s for s in lab.layout.switches if _plane(lab, s) == 0]
    canary, batch2 = plane0[0], plane0[1:4]
    broken = batch2[1]
    before_run, before_inst = _running(lab), _installed(lab)
    _new_timers(lab, 4)
    _break(lab, broken)
    r = playbook(lab.dir / "build", "deploy-switches.yml", "-e", "aifabric_batch=3",
                 "-e", "aifabric_gate_timeout=8", "-e", "aifabric_rollback_gate_timeout=45")
    assert r.returncode != 0
    assert "ROLLED BACK" in r.stdout and "Deploy switch configs, plane 1" not in r.stdout
    assert set(recap(r.stdout)) == {canary, *batch2}
    after_run, after_inst = _running(lab), _installed(lab)
    assert "timers bgp 4 12" in after_run[canary]
    assert after_inst[canary] == _frr(lab, canary).read_text()
    for sw in lab.layout.switches:
        if sw != canary:
            assert after_run[sw] == before_run[sw], sw
            assert after_inst[sw] == before_inst[sw], sw
    s = _rollout(lab)["summary"]
    assert s["changed"] == [canary] and sorted(s["rolled_back"]) == sorted(batch2)
    assert s["never_touched"] == sorted(set(lab.layout.switches) - {canary, *batch2})
    assert s["rolled_back_gate_failed"] == [] and not s["ok"]
    assert "not Established" in s["failed"][broken]
    assert sessions_missing(lab) == [] and _settled(lab) == []


def test_rollback_of_a_failed_batch_of_seven_is_within_the_bound(lab):
    """Plane 0 (7 switches) in one batch, no canary, one switch broken: all 7 are
    rolled back (restore, frr-reload.py, gate again) within ROLLBACK_LIMIT_S."""
    plane0 = [s for s in lab.layout.switches if _plane(lab, s) == 0]
    assert len(plane0) == 7
    before_run = _running(lab)
    _new_timers(lab, 5)
    _break(lab, plane0[-1])
    r = playbook(lab.dir / "build", "deploy-switches.yml", "--limit", "plane0",
                 "-e", "aifabric_canary=0", "-e", "aifabric_gate_timeout=8",
                 "-e", "aifabric_rollback_gate_timeout=45")
    assert r.returncode != 0
    doc = _rollout(lab)
    s = doc["summary"]
    assert sorted(s["rolled_back"]) == sorted(plane0), r.stdout[-6000:]
    assert s["rolled_back_gate_failed"] == []
    assert len(doc["batches"]) == 1 and doc["targets"] == sorted(plane0)
    took = s["rollback_s"][0]
    print(f"rollback of a failed batch of {len(plane0)} switches: {took:.1f} s")
    assert took < ROLLBACK_LIMIT_S
    assert _running(lab) == before_run
    assert sessions_missing(lab) == [] and _settled(lab) == []


def test_lab_deploy_brings_a_changed_spec_through_the_playbooks(lab, cli, tmp_path):
    """ECN thresholds changed in the spec: ``lab deploy`` rewrites the lab's build and
    runs the rollout (every switch changed: its config_db.json is the new build's);
    preflight's facts then match the new plan with no hand edit; the lab's spec is the
    new one. A spec whose copy would rewire the lab is refused, nothing changed."""
    import yaml

    spec = yaml.safe_load((EXAMPLES / "hpn-pod.yaml").read_text())
    spec.setdefault("deploy", {}).setdefault("qos", {})["ecn"] = {
        "min_threshold_bytes": 200_000, "max_threshold_bytes": 2_000_000,
        "max_mark_percent": 10}
    new = tmp_path / "hpn-ecn.yaml"
    new.write_text(yaml.safe_dump(spec))
    r = cli("lab", "deploy", new, "--dir", lab.dir, "--batch", "4", "--gate-timeout", "20")
    assert r.code == 0, r.out + r.err
    s = _rollout(lab)["summary"]
    assert sorted(s["changed"]) == sorted(lab.layout.switches) and s["ok"]
    for sw in lab.layout.switches:
        db = json.loads((lab.dir / "root" / sw / "etc/sonic/config_db.json").read_text())
        assert db == json.loads((lab.dir / "build/switches" / sw / "config_db.json")
                                .read_text())
        assert {p["green_min_threshold"] for p in db["WRED_PROFILE"].values()} == {"200000"}
    state = json.loads((lab.dir / "state.json").read_text())
    assert state["spec_file"] == str(new) and state["deployed"]["ok"]
    p = playbook(lab.dir / "build", "preflight.yml")
    assert p.returncode == 0, p.stdout[-3000:]
    c = cli("check", lab.dir / "build", "--facts", lab.dir / "build" / "facts", "--json")
    assert c.code == 0, c.out
    spec["addressing"] = {"nic_pool": "10.64.0.0/10"}  # every host re-addressed
    bad = tmp_path / "rewired.yaml"
    bad.write_text(yaml.safe_dump(spec))
    digest = (lab.dir / "build/ansible/inventory.yml").read_text()
    r = cli("lab", "deploy", bad, "--dir", lab.dir)
    assert r.code == 2 and "cannot be rewired" in r.err and len(r.err.strip().splitlines()) == 1
    assert (lab.dir / "build/ansible/inventory.yml").read_text() == digest


def _lab_now(lab):
    return lab_core.load_lab(lab.dir)


def test_restore_brings_back_a_dead_tors_host_routes(lab, cli):
    """`lab fail` a dual-ToR ToR: the kernel drops its host /32s (routes on its member
    ports). `lab restore` wakes it, puts every one of them back (as the lab made them)
    and waits until the kernel's ECMP groups equal the model's; nothing stays failed."""
    from aifabric.lab import fail
    from aifabric.lab.heal import _lab_routes, restore

    current = _lab_now(lab)
    tor = next(s for s in current.layout.switches if s.startswith("tor-"))
    mine = {dst for dst, table, _, _ in _lab_routes(current, tor) if table == "main"}
    assert mine
    fail(current, tor, timeout_s=20)
    ns = current.layout.ns[tor]
    from aifabric.lab.heal import _present

    assert not mine & {d for d, _ in _present(ns)}
    res = restore(_lab_now(lab), tor, timeout_s=60)
    assert res.restored == [tor] and res.remaining == [] and res.woken == 2
    assert {what for dev, what in res.heal.routes_added if dev == tor} == mine
    assert res.routes_s is not None and res.mismatches == []
    assert mine <= {d for d, _ in _present(ns)}
    print(f"restore of {tor}: sessions {res.sessions_s:.1f} s, routes {res.routes_s:.1f} s")
    r = cli("lab", "restore", "--all", "--dir", lab.dir)
    assert r.code == 2 and "nothing to restore" in r.err


def test_heal_after_a_link_flap_makes_kernel_groups_equal_frr_and_the_model(lab, cli):
    """A cable pulled and put back by hand (both ends down, then up): once BGP is back,
    any kernel nexthop group left with fewer members than FRR lists (FRR 8.4) differs
    from the model; `lab heal` replaces exactly those and the kernel then equals the
    model. What heal reports is what differed: nothing when nothing did."""
    import subprocess

    current = _lab_now(lab)
    tor, agg = current.layout.ns["tor-s00-r0-a"], current.layout.ns["agg-p00-pl0-00"]
    lk = next(x for x in current.layout.links if {x.ns_a, x.ns_b} == {tor, agg})
    for n, i in ((lk.ns_a, lk.if_a), (lk.ns_b, lk.if_b)):
        subprocess.run(["ip", "-n", n, "link", "set", i, "down"], check=True)
    time.sleep(2)
    for n, i in ((lk.ns_a, lk.if_a), (lk.ns_b, lk.if_b)):
        subprocess.run(["ip", "-n", n, "link", "set", i, "up"], check=True)
    assert sessions_missing(current, timeout_s=60) == []
    time.sleep(2)  # routes re-announced after the session came back
    f = current.fabric
    sws = current.layout.switches
    want = verify.model_groups(f, alive_links(f, []), sws)
    drift = verify.compare_groups(verify.kernel_groups(f, current.layout.ns, sws), want)
    print(f"after the flap: {len(drift)} kernel ECMP groups differ from the model")
    r = cli("lab", "heal", "--dir", lab.dir)
    assert r.code == 0, r.out
    assert "kernel ECMP groups = model: yes" in r.out
    fixed = len(re.findall(r"^  nexthop group \d+ on ", r.out, re.M))
    assert (fixed > 0) == bool(drift), r.out
    assert verify.compare_groups(verify.kernel_groups(f, current.layout.ns, sws), want) == []
    r = cli("lab", "heal", "--dir", lab.dir)  # nothing left to do
    assert r.code == 0 and "nothing to do" in r.out


def test_a_dead_bgpd_fails_the_preflight_check_on_that_switch(lab, cli):
    """bgpd killed (by its pid file) on one ToR: preflight collects it without a BGP
    fact and with the reason; `check --facts` flags that ToR (missing: bgpd is not
    running) and its two aggs (one session fewer), exit 1. Last: the ToR stays dead
    until the module's lab goes down."""
    current = _lab_now(lab)
    tor = next(s for s in current.layout.switches if s.startswith("tor-"))
    pid = daemon_pids(lab.dir)[f"{tor}/bgpd"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()
    p = playbook(lab.dir / "build", "preflight.yml")
    assert p.returncode == 0, p.stdout[-3000:]
    doc = json.loads((lab.dir / "build/facts" / f"{tor}.json").read_text())
    assert "bgp_established" not in doc["facts"]
    assert doc["unread"] == {"bgp_established": "bgpd is not running"}
    c = cli("check", lab.dir / "build", "--facts", lab.dir / "build/facts", "--json")
    assert c.code == 1
    got = {(d["device"], d["field"], d["found"]) for d in json.loads(c.out)}
    f = current.fabric
    peers = sorted({str(f.nodes.name[int(f.links.b[k])]) for k in np.flatnonzero(
        f.links.a == f.node_id(tor))} | {str(f.nodes.name[int(f.links.a[k])])
                                          for k in np.flatnonzero(f.links.b == f.node_id(tor))})
    aggs = [x for x in peers if x.startswith("agg-")]
    assert (tor, "bgp_established", "missing: bgpd is not running") in got
    assert {d for d, fld, _ in got if fld == "bgp_established"} == {tor, *aggs}
