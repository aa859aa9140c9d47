"""Undo injected failures (``lab restore``) and reconcile the lab with the twin (``lab heal``).

``restore`` undoes one failure or all: a link's two ends come back up; a dead switch's
ports come back up (except those of links another failure still holds down) and its
frozen daemons are woken (SIGCONT, only pids whose command line names this lab). Then
it waits, bounded, for the BGP sessions the model expects, heals, and polls until the
kernel's ECMP groups equal the model's for the fabric with the failures that remain.

``heal`` reconciles what the twin says must be there with what the kernel holds, and
reports every change it makes:

* **Routes the lab made** (:mod:`aifabric.lab.netns`): an HPN ToR's host /32s are
  kernel routes on its member ports (what a real ToR learns by ARP), and a host's
  per-NIC default routes. The kernel deletes a route when its port goes down and never
  puts it back when the port comes up, so a restored ToR would stop announcing its
  hosts. Each missing one whose ports are up is added again, as the lab first did.
* **Kernel nexthop groups against FRR** (FRR 8.4.4, Linux 6.x, the kernel nexthop
  objects zebra uses by default): when a port goes down the kernel drops that member
  from every nexthop group using it; when it comes back zebra re-resolves the route to
  the *same* group id with both members and, finding the id already installed, does
  not send it down again -- the kernel's group keeps one member while ``show ip route``
  lists two (seen after a link flap on the small HPN copy; the twin's drift metric
  caught it). Each group whose members differ from FRR's active next hops of a route
  that uses it is replaced (``ip nexthop replace id N group A/B``) with the kernel
  nexthop objects of FRR's next hops: the kernel then holds what FRR and the model say.

Nothing else is touched: a route FRR does not list, a group no route of FRR uses, a
dead switch.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from aifabric.lab import verify
from aifabric.lab._system import LabError, run, run_many
from aifabric.lab.core import Lab
from aifabric.lab.daemons import alive as pid_alive
from aifabric.lab.daemons import vtysh
from aifabric.lab.inject import alive_links, dead_switches

__all__ = ["HealResult", "RestoreResult", "heal", "restore"]


@dataclass
class HealResult:
    """What ``heal`` changed, and what still differs from the model afterwards."""

    routes_added: list[tuple[str, str]] = field(default_factory=list)  # (device, route)
    routes_left: list[tuple[str, str, str]] = field(default_factory=list)  # (dev, route, why)
    groups_fixed: list[tuple[str, int, str, str]] = field(default_factory=list)
    # (switch, nexthop group id, kernel members before, FRR's members)

    @property
    def changed(self) -> int:
        return len(self.routes_added) + len(self.groups_fixed)


@dataclass
class RestoreResult:
    """What ``restore`` undid and how the lab settled."""

    restored: list[str]
    ports_up: int
    woken: int
    sessions_s: float | None  # until every expected BGP session was Established
    routes_s: float | None  # until the kernel's ECMP groups equal the model's
    heal: HealResult
    mismatches: verify.Diff = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)


def _name(x: dict[str, Any]) -> str:
    return str(x.get("switch") or x.get("port"))


def restore(lab: Lab, target: str | None = None, timeout_s: float = 60.0) -> RestoreResult:
    """Undo the failure ``target`` (a switch or ``device:interface`` as ``lab fail``
    took it), or every failure when None; LabError when it is not down."""
    f = lab.fabric
    failures = lab.failures
    if not failures:
        raise LabError("nothing to restore: no failure is injected in this lab")
    if target is None:
        undo, keep = failures, []
    else:
        undo = [x for x in failures if _name(x) == target]
        keep = [x for x in failures if _name(x) != target]
        if not undo:
            raise LabError(f"{target} is not down in this lab; down: "
                           + ", ".join(_name(x) for x in failures))
    alive_after = alive_links(f, keep)
    ns = lab.layout.ns
    cmds: list[list[str]] = []
    for lk in lab.layout.links:
        if not alive_after[lk.link]:
            continue
        for n, i in ((lk.ns_a, lk.if_a), (lk.ns_b, lk.if_b)):
            cmds.append(["ip", "-n", n, "link", "set", i, "up"])
    # only ports that are down now
    down = _down_ports(lab)
    cmds = [c for c in cmds if (c[2], c[5]) in down]
    run_many(cmds)
    woken = 0
    for x in undo:
        for pid in x.get("frozen", []):
            if pid_alive(pid, lab.dir):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                    woken += 1
    t0 = time.monotonic()
    lab.state["failures"] = keep
    lab.save()
    dead = dead_switches(keep)
    survivors = [s for s in lab.layout.switches if s not in set(dead)]
    want_sessions = verify.expected_sessions(f, alive_after, dead)
    deadline = t0 + timeout_s
    sessions_s = None
    while time.monotonic() < deadline:
        got = verify.bgp_sessions(lab.dir, survivors)
        if all(got.get(sw, {}).get(p) == "Established" for sw in survivors
               for p in want_sessions.get(sw, ())):
            sessions_s = time.monotonic() - t0
            break
        time.sleep(0.25)
    want = verify.model_groups(f, alive_after, survivors)
    total = HealResult()
    routes_s = None
    diff: verify.Diff = []
    while True:
        h = heal(lab)
        total.routes_added += h.routes_added
        total.groups_fixed += h.groups_fixed
        total.routes_left = h.routes_left
        diff = verify.compare_groups(verify.kernel_groups(f, ns, survivors), want)
        if not diff:
            routes_s = time.monotonic() - t0
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    return RestoreResult([_name(x) for x in undo], len(cmds), woken, sessions_s, routes_s,
                         total, diff, [_name(x) for x in keep])


def _down_ports(lab: Lab) -> set[tuple[str, str]]:
    """(namespace, interface) of every lab port that is administratively down."""
    out: set[tuple[str, str]] = set()
    for n, flags in _links(lab).items():
        out |= {(n, i) for i, fl in flags.items() if "UP" not in fl}
    return out


def _links(lab: Lab) -> dict[str, dict[str, list[str]]]:
    """namespace -> interface -> its flags (``ip -json link``)."""
    names = list(lab.layout.ns.values())
    procs = run_many([["ip", "-n", n, "-json", "link", "show"] for n in names], check=False)
    out: dict[str, dict[str, list[str]]] = {}
    for n, p in zip(names, procs, strict=True):
        try:
            links = json.loads(p.stdout or "[]")
        except ValueError:
            links = []
        out[n] = {str(x.get("ifname")): list(x.get("flags", [])) for x in links}
    return out


_ROUTE = re.compile(r"^route add (\S+)")
_TABLE = re.compile(r"\btable (\S+)")


def _lab_routes(lab: Lab, dev: str) -> list[tuple[str, str, str, list[str]]]:
    """(dst, table, the ``ip route`` arguments, ports) of every route the lab made on
    ``dev`` (its address script: ToR host /32s, host per-NIC default routes)."""
    out = []
    for line in lab.layout.scripts[dev][1]:
        m = _ROUTE.match(line)
        if not m:
            continue
        dst = m.group(1).removesuffix("/32")
        t = _TABLE.search(line)
        out.append((dst, t.group(1) if t else "main", line[len("route add "):],
                    re.findall(r"\bdev (\S+)", line)))
    return out


def _present(ns: str) -> set[tuple[str, str]]:
    """(dst, table) of every route in namespace ``ns``."""
    text = run(["ip", "-n", ns, "-json", "route", "show", "table", "all"], check=False).stdout
    try:
        routes = json.loads(text or "[]")
    except ValueError:
        return set()
    return {(str(r.get("dst", "")), str(r.get("table", "main"))) for r in routes}


def heal(lab: Lab) -> HealResult:
    """Put back the routes the lab made that the kernel lost, and make every kernel
    nexthop group equal FRR's next hops of the routes using it (see the module)."""
    res = HealResult()
    dead = set(dead_switches(lab.failures))
    links = _links(lab)
    ns = lab.layout.ns
    adds: list[tuple[str, str, list[str]]] = []
    for dev in lab.layout.switches + lab.layout.hosts:
        if dev in dead:
            continue
        have = _present(ns[dev])
        for dst, table, args, ports in _lab_routes(lab, dev):
            if (dst, table) in have:
                continue
            down = [p for p in ports if "UP" not in links[ns[dev]].get(p, [])]
            if down:
                res.routes_left.append((dev, f"{dst} table {table}",
                                        f"port {', '.join(down)} down"))
                continue
            adds.append((dev, f"{dst}" + ("" if table == "main" else f" table {table}"),
                         ["ip", "-n", ns[dev], "route", "add", *args.split()]))
    for (dev, what, _), proc in zip(adds, run_many([c for _, _, c in adds], check=False),
                                    strict=True):
        if proc.returncode == 0:
            res.routes_added.append((dev, what))
        else:
            res.routes_left.append((dev, what, (proc.stderr or "").strip()[:120]))
    for sw in lab.layout.switches:
        if sw not in dead:
            res.groups_fixed += _fix_groups(lab, sw)
    return res


def _fix_groups(lab: Lab, sw: str) -> list[tuple[str, int, str, str]]:
    n = lab.layout.ns[sw]
    try:
        objs = json.loads(run(["ip", "-n", n, "-json", "nexthop", "show"],
                              check=False).stdout or "[]")
        rib = json.loads(vtysh(lab.dir, sw, "show ip route json") or "{}")
    except ValueError:
        return []
    single = {(o.get("gateway"), o.get("dev")): int(o["id"]) for o in objs
              if "gateway" in o and "group" not in o}
    members_of = {int(o["id"]): sorted(int(g["id"]) for g in o["group"]) for o in objs
                  if "group" in o}
    by_id = {int(o["id"]): (o.get("gateway"), o.get("dev")) for o in objs if "gateway" in o}
    want: dict[int, list[int]] = {}
    for routes in rib.values():
        for r in routes if isinstance(routes, list) else []:
            gid = r.get("installedNexthopGroupId")
            if not (r.get("selected") and r.get("installed")) or gid not in members_of:
                continue
            hops = {(h.get("ip"), h.get("interfaceName")) for h in r.get("nexthops", [])
                    if h.get("active") and h.get("ip")}
            ids = sorted(single[h] for h in hops if h in single)
            if len(ids) == len(hops) and len(ids) > 1:
                want.setdefault(int(gid), ids)
    fixed = []
    for gid, ids in sorted(want.items()):
        if members_of[gid] == ids:
            continue
        p = run(["ip", "-n", n, "nexthop", "replace", "id", str(gid), "group",
                 "/".join(map(str, ids)), "proto", "zebra"], check=False)
        if p.returncode == 0:
            fixed.append((sw, gid, _hops(by_id, members_of[gid]), _hops(by_id, ids)))
    return fixed


def _hops(by_id: dict[int, tuple[Any, Any]], ids: list[int]) -> str:
    return ", ".join(f"{by_id.get(i, ('?', '?'))[0]} dev {by_id.get(i, ('?', '?'))[1]}"
                     for i in ids) or "-"
