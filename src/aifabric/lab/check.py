"""``lab test``: every check of a running lab, waited for within a bound.

A freshly started lab needs a few seconds for its BGP sessions to come up and its
routes to settle; :func:`check_lab` polls the sessions and the ECMP groups until they
are right or ``timeout_s`` passes, then pings every NIC pair once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from aifabric.lab import verify
from aifabric.lab.core import Lab
from aifabric.lab.inject import alive_links, dead_switches

__all__ = ["LabTest", "check_lab"]


@dataclass
class LabTest:
    """The outcome of ``lab test`` (every list empty and counts equal = passed)."""

    sessions_up: int = 0
    sessions_expected: int = 0
    sessions_bad: list[tuple[str, str, str]] = field(default_factory=list)  # sw, peer, state
    groups: int = 0  # (switch, destination) pairs compared
    ecmp_groups: int = 0  # of those, groups with 2 or more next hops
    group_diffs: verify.Diff = field(default_factory=list)
    pairs: int = 0  # NIC pairs (different hosts)
    reachable: int = 0  # of those, pairs where some port of the source got a reply
    probes: int = 0  # (live source port, destination NIC) pings
    probes_ok: int = 0
    expected_reachable: int = 0  # probes the model says must work
    hash_dependent: int = 0  # probes whose way back depends on the host's ECMP hash
    reach_wrong: list[tuple[str, str, bool]] = field(default_factory=list)  # port, dst, got
    lost: list[str] = field(default_factory=list)  # NICs no probe reached
    hops_checked: int = 0
    hops_wrong: list[tuple[str, str, int, tuple[int, int]]] = field(default_factory=list)
    hop_counts: dict[int, int] = field(default_factory=dict)
    converged_s: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.sessions_up == self.sessions_expected and not self.sessions_bad
                and not self.group_diffs and not self.reach_wrong and not self.hops_wrong)


def check_lab(lab: Lab, *, timeout_s: float = 60.0) -> LabTest:
    """Check sessions, ECMP groups, reachability and hop counts of ``lab``."""
    f = lab.fabric
    alive = alive_links(f, lab.failures)
    dead = dead_switches(lab.failures)
    switches = [s for s in lab.layout.switches if s not in dead]
    want_sessions = verify.expected_sessions(f, alive, dead)
    want_groups = verify.model_groups(f, alive, switches)
    out = LabTest(failures=[x.get("switch") or x.get("port", "") for x in lab.failures])
    t0 = time.monotonic()
    while True:
        sessions = verify.bgp_sessions(lab.dir, switches)
        bad = [(sw, peer, sessions.get(sw, {}).get(peer, "missing"))
               for sw in switches for peer in sorted(want_sessions[sw])
               if sessions.get(sw, {}).get(peer) != "Established"]
        diffs = []
        if not bad:
            diffs = verify.compare_groups(verify.kernel_groups(f, lab.layout.ns, switches),
                                          want_groups)
        if (not bad and not diffs) or time.monotonic() - t0 > timeout_s:
            break
        time.sleep(0.5)
    out.converged_s = time.monotonic() - t0
    out.sessions_expected = sum(len(v) for v in want_sessions.values())
    out.sessions_up = out.sessions_expected - len(bad)
    out.sessions_bad = bad
    if bad:  # the groups were not read while sessions were missing
        diffs = verify.compare_groups(verify.kernel_groups(f, lab.layout.ns, switches),
                                      want_groups)
    out.group_diffs = diffs
    out.groups = sum(len(g) for g in want_groups.values())
    out.ecmp_groups = sum(1 for g in want_groups.values() for v in g.values()
                          if isinstance(v, frozenset) and len(v) > 1)
    rep = verify.ping_matrix(f, lab.layout.ns, alive)
    pairs = rep.nic_pairs()
    out.pairs, out.reachable = len(pairs), sum(pairs.values())
    out.probes, out.probes_ok = len(rep.probes), int(rep.ok.sum())
    out.expected_reachable = int((rep.expect == 1).sum())
    out.hash_dependent = int((rep.expect < 0).sum())
    out.reach_wrong = [(f"{p.nic.host}:{p.ifname}", d.ip, bool(ok)) for (p, d), ok, w
                       in zip(rep.probes, rep.ok, rep.wrong_reach, strict=True) if w]
    checked = rep.ok & (rep.expect == 1)
    out.hops_checked = int(checked.sum())
    out.hops_wrong = [(f"{p.nic.host}:{p.ifname}", d.ip, int(h), span) for (p, d), h, span, w
                      in zip(rep.probes, rep.hops, rep.expect_hops, rep.wrong_hops, strict=True)
                      if w]
    for h in rep.hops[checked].tolist():
        out.hop_counts[h] = out.hop_counts.get(h, 0) + 1
    out.lost = [f"{n.host} {n.ip}" for n in rep.lost()]
    return out
