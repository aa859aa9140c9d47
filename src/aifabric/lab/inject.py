"""The failure injector: take a link or a switch down and watch the fabric converge.

* A **link** (``tor-s01-r0-a:Ethernet0``, ``host-s00-h000:ens0f1``) goes down at both
  ends (``ip link set ... down`` in both namespaces), as a pulled cable.
* A **switch** (``tor-s01-r0-a``) dies: every one of its ports goes down -- its peers
  see their veth lose carrier, as when a box loses power -- and its daemons are frozen
  (SIGSTOP), so it neither forwards nor speaks BGP. ``lab down`` wakes and stops them.

Then the injector polls, from the moment of the failure: the kernel ECMP groups of
every surviving switch until they equal the routing model's for the fabric without
the failed links (*routes converged*), then pings every NIC pair until every pair the
model says is reachable answers and every other does not (*traffic flows*). It reports
both times and the routes that moved: hosts' NIC default routes (ports before -> after)
and switches' routes (next hops before -> after).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.errors import SpecError
from aifabric.lab import verify
from aifabric.lab._system import LabError, run_many
from aifabric.lab.core import Lab
from aifabric.lab.daemons import alive as pid_alive
from aifabric.lab.daemons import daemon_pids
from aifabric.routing import failed_links
from aifabric.topology import Fabric
from aifabric.topology.fabric import SWITCH_KINDS

__all__ = ["FailResult", "alive_links", "dead_switches", "fail", "parse_target"]


def parse_target(f: Fabric, target: str) -> dict[str, Any]:
    """``switch`` or ``device:interface`` -> a failure record; SpecError if unknown."""
    item: dict[str, Any] = {"port": target} if ":" in target else {"switch": target}
    is_switch = f.has_node(target) and int(f.nodes.kind[f.node_id(target)]) in \
        [int(k) for k in SWITCH_KINDS]
    if "switch" in item and not is_switch:
        sw = f.nodes.name[f.is_switch]
        raise SpecError.at("target", f"no switch called {target!r} in the lab; allowed: "
                           f"a switch ({', '.join(map(str, sw[:4]))}, ...) or "
                           "device:interface (tor-s00-r0-a:Ethernet0)")
    mask = failed_links(f, [item], path="target")
    if not mask.any():
        raise SpecError.at("target", f"{target!r} names no cable of the lab")
    return item


def alive_links(f: Fabric, failures: list[dict[str, Any]]) -> np.ndarray:
    """Bool per link: up after every failure injected so far."""
    if not failures:
        return np.ones(f.n_links, dtype=bool)
    return ~failed_links(f, [{k: v for k, v in x.items() if k in ("switch", "port")}
                             for x in failures])


def dead_switches(failures: list[dict[str, Any]]) -> list[str]:
    return [x["switch"] for x in failures if "switch" in x]


@dataclass
class FailResult:
    """What one failure did."""

    target: str
    links_down: int
    routes_s: float | None  # time until kernel ECMP groups equal the model's
    traffic_s: float | None  # time until reachability equals the model's
    moved: verify.Diff = field(default_factory=list)
    reachable: int = 0  # NIC pairs where some port of the source got a reply
    pairs: int = 0
    probes: int = 0  # (live port, destination NIC) pings of the last round
    probes_ok: int = 0
    expected_ok: int = 0  # probes the model says must work
    hash_dependent: int = 0  # probes whose way back depends on the host's ECMP hash
    wrong: int = 0  # probes that disagree with the model
    lost: list[str] = field(default_factory=list)  # "host ip" of every NIC nobody reaches
    mismatches: verify.Diff = field(default_factory=list)
    report: verify.Report | None = None  # the last ping round


def _survivors(lab: Lab, dead: list[str]) -> list[str]:
    return [s for s in lab.layout.switches if s not in dead]


def fail(lab: Lab, target: str, *, timeout_s: float = 30.0) -> FailResult:
    """Inject ``target``'s failure into the running lab and measure convergence."""
    f = lab.fabric
    item = parse_target(f, target)
    if any(x.get("switch") == target or x.get("port") == target for x in lab.failures):
        raise LabError(f"{target} is already down in this lab")
    before_alive = alive_links(f, lab.failures)
    failures = [*lab.failures, item]
    after_alive = alive_links(f, failures)
    dead = dead_switches(failures)
    survivors = _survivors(lab, dead)
    ns = lab.layout.ns
    before = verify.kernel_groups(f, ns, survivors)
    hosts = lab.layout.hosts
    before_hosts = verify.host_groups(f, ns, hosts)
    newly = np.flatnonzero(before_alive & ~after_alive)
    by_link = {lk.link: lk for lk in lab.layout.links}
    cmds = []
    record: dict[str, Any] = dict(item)
    if "switch" in item:
        ports = sorted({lk.if_a for lk in lab.layout.links if lk.ns_a == ns[target]}
                       | {lk.if_b for lk in lab.layout.links if lk.ns_b == ns[target]})
        cmds = [["ip", "-n", ns[target], "link", "set", p, "down"] for p in ports]
        pids = {k: v for k, v in daemon_pids(lab.dir).items() if k.split("/")[0] == target}
        record["frozen"] = sorted(pids.values())
    else:
        for lid in newly.tolist():
            lk = by_link[lid]
            cmds += [["ip", "-n", lk.ns_a, "link", "set", lk.if_a, "down"],
                     ["ip", "-n", lk.ns_b, "link", "set", lk.if_b, "down"]]
    t0 = time.monotonic()
    run_many(cmds)
    for pid in record.get("frozen", []):
        if pid_alive(pid, lab.dir):
            os.kill(pid, signal.SIGSTOP)
    lab.state["failures"] = [*failures[:-1], record]
    lab.save()
    want = verify.model_groups(f, after_alive, survivors)
    routes_s = traffic_s = None
    deadline = t0 + timeout_s
    groups = before
    while time.monotonic() < deadline:
        groups = verify.kernel_groups(f, ns, survivors)
        if not verify.compare_groups(groups, want):
            routes_s = time.monotonic() - t0
            break
        time.sleep(0.05)
    while True:  # at least one round, even when the routes never converged
        rep = verify.ping_matrix(f, ns, after_alive, wait_s=0.5)
        if not rep.wrong_reach.any():
            traffic_s = time.monotonic() - t0
            break
        if time.monotonic() >= deadline:
            break
    after_hosts = verify.host_groups(f, ns, hosts)
    moved = [(h, ip, before_hosts[h].get(ip), after_hosts[h].get(ip)) for h in hosts
             for ip in before_hosts[h] if before_hosts[h].get(ip) != after_hosts[h].get(ip)]
    moved += [(sw, ip, before[sw].get(ip), groups[sw].get(ip)) for sw in survivors
              for ip in before[sw] if before[sw].get(ip) != groups[sw].get(ip)]
    res = FailResult(target, len(newly), routes_s, traffic_s, moved)
    pairs = rep.nic_pairs()
    res.reachable, res.pairs = sum(pairs.values()), len(pairs)
    res.probes, res.probes_ok = len(rep.probes), int(rep.ok.sum())
    res.expected_ok = int((rep.expect == 1).sum())
    res.hash_dependent = int((rep.expect < 0).sum())
    res.wrong = int(rep.wrong_reach.sum())
    res.lost = [f"{n.host} {n.ip}" for n in rep.lost()]
    res.mismatches = verify.compare_groups(groups, want)
    res.report = rep
    return res
