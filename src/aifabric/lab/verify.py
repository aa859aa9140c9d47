"""The verifiers: does the real control plane agree with the twin?

* :func:`bgp_sessions` -- every eBGP session of every switch, from ``vtysh -c "show bgp
  summary json"``, against the sessions the fabric expects (one per live
  switch-to-switch link between two live switches).
* :func:`kernel_groups` / :func:`model_groups` / :func:`compare_groups` -- every
  switch's ECMP next-hop set toward every NIC /32, read from the kernel (``ip -json
  route`` in the switch's namespace; each next-hop address maps back to the one fabric
  link whose far end owns it) and computed by :class:`aifabric.routing.Fib` for the
  same fabric and the same live links. A ToR that delivers to the NIC itself holds a
  route with no gateway (``direct``); an unreachable NIC has no /32 at all.
* :func:`ping_matrix` -- every live NIC port pings every NIC of every other host once,
  in parallel, from its NIC's address and out of that port (a firewall mark selects
  it), so each port's path is tested on its own. The model says for each probe whether
  it must work (its way there and every way back the destination's ECMP may hash the
  reply to), must fail, or depends on that hash. The TTL of a reply gives the switch
  hops of the way back (64 - TTL), checked against the fabric's valley-free hop count.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aifabric.configs.addressing import ip_str
from aifabric.lab._system import run
from aifabric.lab.daemons import vtysh
from aifabric.lab.netns import PORT_TABLE_BASE
from aifabric.routing import Fib
from aifabric.routing.fib import INF
from aifabric.topology import Fabric, LinkKind

__all__ = ["Nic", "Port", "Report", "bgp_sessions", "compare_groups", "expected_probes",
           "expected_sessions", "gateway_links", "host_groups", "kernel_groups", "live_ports",
           "model_groups", "nics", "ping_matrix", "route_groups"]

DIRECT = "direct"
_TTL = re.compile(r"ttl=(\d+)")


@dataclass(frozen=True)
class Nic:
    """One NIC of the lab: host namespace, its /32, its number (host * N + rail)."""

    host: str
    ip: str
    number: int
    port: int  # one of its NIC-port node ids


def nics(f: Fabric) -> list[Nic]:
    """Every NIC of ``f`` (one entry per /32), in host then rail order."""
    nodes = f.nodes
    acc = f.links.kind == LinkKind.ACCESS
    wired = np.unique(f.links.a[acc])
    N = f.spec.hosts.nics_per_host
    out: dict[int, Nic] = {}
    for p in wired.tolist():
        no = int(nodes.host[p]) * N + int(nodes.rail[p])
        if no not in out:
            out[no] = Nic(f.device_name(p), str(ip_str(nodes.ip[p:p + 1])[0]), no, p)
    return [out[k] for k in sorted(out)]


def _ns_cmd(ns: str, cmd: list[str]) -> list[str]:
    if shutil.which("nsenter"):
        return ["nsenter", f"--net=/run/netns/{ns}", *cmd]
    return ["ip", "netns", "exec", ns, *cmd]


# ------------------------------------------------------------------- sessions
def expected_sessions(f: Fabric, alive: np.ndarray, dead_switches: Iterable[str] = ()
                      ) -> dict[str, set[str]]:
    """switch -> next-hop addresses of its sessions expected Established."""
    from aifabric.configs import plan_addresses

    plan = plan_addresses(f)
    dead = {f.node_id(s) for s in dead_switches}
    links = f.links
    out: dict[str, set[str]] = {str(n): set() for n in f.nodes.name[f.is_switch]}
    for lid in plan.p2p.tolist():
        a, b = int(links.a[lid]), int(links.b[lid])
        if not alive[lid] or a in dead or b in dead:
            continue
        ips = ip_str(np.array([plan.p2p_a[lid], plan.p2p_b[lid]], dtype=np.uint32))
        out[str(f.nodes.name[a])].add(str(ips[1]))
        out[str(f.nodes.name[b])].add(str(ips[0]))
    return out


def bgp_sessions(lab: Path, switches: list[str]) -> dict[str, dict[str, str]]:
    """switch -> {peer address: BGP state} from each switch's bgpd."""
    def one(sw: str) -> dict[str, str]:
        text = vtysh(lab, sw, "show bgp ipv4 unicast summary json")
        try:
            peers = json.loads(text).get("peers", {})
        except ValueError:
            return {}
        return {ip: str(p.get("state", "?")) for ip, p in peers.items()}

    with ThreadPoolExecutor(max_workers=16) as pool:
        return dict(zip(switches, pool.map(one, switches), strict=True))


# --------------------------------------------------------------- ECMP groups
#: an ECMP group: link ids of the next hops, DIRECT (delivered by this ToR) or None (no route)
Group = frozenset[int] | str | None
Groups = dict[str, dict[str, Group]]  # switch (or host) -> nic ip -> group
Diff = list[tuple[str, str, Group, Group]]


def gateway_links(f: Fabric) -> dict[tuple[int, str], int]:
    """(switch node, next-hop address) -> link id."""
    from aifabric.configs import plan_addresses

    plan = plan_addresses(f)
    links = f.links
    out = {}
    ia = ip_str(plan.p2p_a[plan.p2p]).tolist()
    ib = ip_str(plan.p2p_b[plan.p2p]).tolist()
    for lid, a_ip, b_ip in zip(plan.p2p.tolist(), ia, ib, strict=True):
        out[(int(links.b[lid]), a_ip)] = lid  # b's next hop is a's address
        out[(int(links.a[lid]), b_ip)] = lid
    return out


def route_groups(routes: list[dict], node: int, targets: Iterable[str],
                 gw_link: dict[tuple[int, str], int]) -> dict[str, Group]:
    """Switch ``node``'s group toward every address of ``targets`` from its kernel routes
    (``ip -json route`` output); ``gw_link`` from :func:`gateway_links`."""
    got: dict[str, Group] = {ip: None for ip in targets}
    for r in routes:
        dst = r.get("dst", "")
        if dst.endswith("/32"):
            dst = dst[:-3]
        if dst not in got or "linkdown" in r.get("flags", []):
            continue
        hops = r.get("nexthops") or ([r] if r.get("gateway") else [])
        if not hops:
            got[dst] = DIRECT
            continue
        ids = {gw_link.get((node, h.get("gateway", "")), -1) for h in hops
               if "linkdown" not in h.get("flags", []) and "dead" not in h.get("flags", [])}
        got[dst] = frozenset(ids) if ids else None
    return got


def kernel_groups(f: Fabric, ns: dict[str, str], switches: list[str]) -> Groups:
    """Every switch's next hops toward every NIC /32, from its kernel."""
    targets = {n.ip for n in nics(f)}
    gw_link = gateway_links(f)

    def one(sw: str) -> dict[str, Group]:
        out = run(["ip", "-n", ns[sw], "-json", "route", "show", "table", "main"],
                  check=False).stdout
        routes = json.loads(out) if out.strip() else []
        return route_groups(routes, f.node_id(sw), targets, gw_link)

    with ThreadPoolExecutor(max_workers=16) as pool:
        return dict(zip(switches, pool.map(one, switches), strict=True))


def host_groups(f: Fabric, ns: dict[str, str], hosts: list[str]) -> Groups:
    """Every host's live next-hop ports per NIC (its ECMP default route toward its ToRs),
    as ``{host: {nic ip: frozenset of access-link ids}}``."""
    from aifabric.lab.netns import HOST_TABLE_BASE

    by_host: dict[str, list[Nic]] = {}
    for n in nics(f):
        by_host.setdefault(n.host, []).append(n)
    links = f.links
    acc = np.flatnonzero(links.kind == LinkKind.ACCESS)
    port_link = {(f.device_name(int(links.a[lid])),
                  f.port_name(int(links.a[lid]), int(links.a_port[lid]))): lid
                 for lid in acc.tolist()}
    N = f.spec.hosts.nics_per_host

    def one(host: str) -> dict[str, Group]:
        got: dict[str, Group] = {}
        for n in by_host.get(host, []):
            table = HOST_TABLE_BASE + n.number % N
            out = run(["ip", "-n", ns[host], "-json", "route", "show", "table", str(table)],
                      check=False).stdout
            routes = json.loads(out) if out.strip() else []
            ids: set[int] = set()
            for r in routes:
                for h in r.get("nexthops") or [r]:
                    flags = h.get("flags", []) + r.get("flags", [])
                    if "linkdown" in flags or "dead" in flags:
                        continue
                    ids.add(port_link.get((host, h.get("dev", "")), -1))
            got[n.ip] = frozenset(ids) if ids else None
        return got

    with ThreadPoolExecutor(max_workers=16) as pool:
        return dict(zip(hosts, pool.map(one, hosts), strict=True))


def model_groups(f: Fabric, alive: np.ndarray, switches: list[str]) -> Groups:
    """Every switch's ECMP group toward every NIC /32, from the routing model."""
    fib = Fib(f, alive)
    nl = nics(f)
    out: Groups = {}
    cls = np.array([fib.nic_class[n.number] for n in nl], dtype=np.int64)
    for sw in switches:
        node = f.node_id(sw)
        groups: dict[str, Group] = {}
        nodes_arr = np.full(len(nl), node, dtype=np.int64)
        ok = cls >= 0
        reach = np.zeros(len(nl), dtype=bool)
        reach[ok] = fib.reachable(nodes_arr[ok], cls[ok])
        direct = np.zeros(len(nl), dtype=bool)
        direct[ok] = fib.delivers(nodes_arr[ok], cls[ok])
        start, count, arcs = _members(fib, nodes_arr[ok], cls[ok])
        j = 0
        for i, nic in enumerate(nl):
            if not ok[i]:
                groups[nic.ip] = None
                continue
            mem = arcs[start[j]:start[j] + count[j]]
            j += 1
            if direct[i]:
                groups[nic.ip] = DIRECT
            elif not reach[i] or not len(mem):
                groups[nic.ip] = None
            else:
                groups[nic.ip] = frozenset((mem // 2).tolist())
        out[sw] = groups
    return out


def _members(fib: Fib, node: np.ndarray, cls: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Fib.members`` as ``(start, count, arcs)`` (older versions return ``(ptr, arcs)``)."""
    got = fib.members(node, cls)
    if len(got) == 3:
        return got  # type: ignore[return-value]
    ptr, arcs = got  # type: ignore[misc]
    return ptr[:-1], np.diff(ptr), arcs


def compare_groups(kernel: Groups, model: Groups) -> Diff:
    """``[(switch, nic ip, kernel, model)]`` for every group that differs."""
    diff: Diff = []
    for sw, groups in model.items():
        for ip, want in groups.items():
            got = kernel.get(sw, {}).get(ip)
            if got != want:
                diff.append((sw, ip, got, want))
    return diff


# ------------------------------------------------------------------ pinging
@dataclass(frozen=True)
class Port:
    """One live NIC port that probes leave from."""

    nic: Nic
    ifname: str
    tor: int  # node id of the ToR at its other end


@dataclass
class Report:
    """One ping round: every live NIC port pings every NIC of the other hosts.

    ``expect`` per probe: 1 = the model says both ways work whatever the hosts' ECMP
    hashes pick, 0 = no way works, -1 = it depends on the port the reply is hashed to
    (not asserted).
    """

    probes: list[tuple[Port, Nic]]
    ok: np.ndarray
    hops: np.ndarray  # measured switch hops of the reply path (-1 without a reply)
    expect: np.ndarray
    expect_hops: list[tuple[int, int]] = field(default_factory=list)  # (lo, hi) per probe

    @property
    def wrong_reach(self) -> np.ndarray:
        return (self.expect >= 0) & (self.ok != (self.expect == 1))

    @property
    def wrong_hops(self) -> np.ndarray:
        lo = np.array([h[0] for h in self.expect_hops], dtype=np.int64)
        hi = np.array([h[1] for h in self.expect_hops], dtype=np.int64)
        return self.ok & (self.expect == 1) & ((self.hops < lo) | (self.hops > hi))

    def nic_pairs(self) -> dict[tuple[str, str], bool]:
        """(source ip, destination ip) -> some port of the source got a reply."""
        out: dict[tuple[str, str], bool] = {}
        for (port, dst), ok in zip(self.probes, self.ok.tolist(), strict=True):
            key = (port.nic.ip, dst.ip)
            out[key] = out.get(key, False) or bool(ok)
        return out

    def lost(self) -> list[Nic]:
        """NICs that no probe reached."""
        reached = {d.ip for (_, d), ok in zip(self.probes, self.ok.tolist(), strict=True) if ok}
        seen: dict[str, Nic] = {d.ip: d for _, d in self.probes}
        return [n for ip, n in sorted(seen.items()) if ip not in reached]


def live_ports(f: Fabric, alive: np.ndarray) -> list[Port]:
    """Every NIC port whose access link is up, with its ToR."""
    links = f.links
    by_no = {n.number: n for n in nics(f)}
    N = f.spec.hosts.nics_per_host
    nodes = f.nodes
    out = []
    for lid in np.flatnonzero((links.kind == LinkKind.ACCESS) & alive).tolist():
        p = int(links.a[lid])
        no = int(nodes.host[p]) * N + int(nodes.rail[p])
        out.append(Port(by_no[no], f.port_name(p, int(nodes.side[p])), int(links.b[lid])))
    return out


def expected_probes(f: Fabric, alive: np.ndarray, probes: list[tuple[Port, Nic]],
                    ports: list[Port]) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The model's verdict on every probe and the (min, max) switch hops of its reply."""
    fib = Fib(f, alive)
    tors_of: dict[int, list[int]] = {}
    for p in ports:
        tors_of.setdefault(p.nic.number, []).append(p.tor)

    def hops(tor: int, cls: int) -> int:
        d = int(fib.dist[fib.sw_row[tor], cls]) if cls >= 0 else int(INF)
        return d + 1 if d < INF else -1

    expect = np.zeros(len(probes), dtype=np.int8)
    span = []
    for i, (port, dst) in enumerate(probes):
        cs, cd = int(fib.nic_class[port.nic.number]), int(fib.nic_class[dst.number])
        there = hops(port.tor, cd)
        back = [hops(t, cs) for t in tors_of.get(dst.number, [])]
        good = [b for b in back if b > 0]
        if there < 0 or not good:
            expect[i] = 0
        else:
            expect[i] = 1 if len(good) == len(back) else -1
        span.append((min(good), max(good)) if good else (-1, -1))
    return expect, span


def ping_matrix(f: Fabric, ns: dict[str, str], alive: np.ndarray, *, wait_s: float = 1.0,
                workers: int = 32) -> Report:
    """Every live NIC port pings every NIC of the other hosts once (``ping -m <mark> -I
    <nic ip>``: the mark's policy rule sends it out of that port, from its NIC's address;
    the reply may come back on any port)."""
    ports = live_ports(f, alive)
    nl = nics(f)
    probes = [(p, d) for p in ports for d in nl if p.nic.host != d.host]

    def one(probe: tuple[Port, Nic]) -> int:
        p, d = probe
        mark = PORT_TABLE_BASE + 8 * int(p.ifname[3:].split("f")[0]) + \
            int(p.ifname.rsplit("f", 1)[1])
        proc = run(_ns_cmd(ns[p.nic.host], ["ping", "-n", "-c", "1", "-W", f"{wait_s:g}",
                                            "-m", str(mark), "-I", p.nic.ip, d.ip]),
                   check=False, timeout=wait_s + 10)
        m = _TTL.search(proc.stdout)
        return 64 - int(m.group(1)) if proc.returncode == 0 and m else -1

    with ThreadPoolExecutor(max_workers=workers) as pool:
        hops = np.array(list(pool.map(one, probes)), dtype=np.int64)
    expect, span = expected_probes(f, alive, probes, ports)
    return Report(probes, hops >= 0, hops, expect, span)
