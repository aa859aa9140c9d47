"""The lab's management network: the plan's out-of-band addresses, reachable from the
root namespace, where Prometheus (and any other monitoring) runs.

Built only for a spec with ``management:`` (:mod:`aifabric.topology.management`); a
spec without one gets exactly the lab it got before. What ``lab up`` adds:

* one Linux bridge in the root namespace, ``<prefix>mg`` (the lab's namespace prefix
  without its dash: unique to the lab folder), holding the pool's gateway address
  (``management.pool``'s first address, the prefix length of the pool) -- the site's
  management router of the plan;
* per switch and host one veth pair: ``<prefix>m<i>`` in the root namespace, enslaved
  to the bridge, and in the device's namespace the device's management interface of
  the plan (a switch's ``eth0``, a host's ``management.host_interface``) with its
  management address. A BMC has no namespace of its own in the lab: its address is
  planned and cabled, not emulated;
* where ``prometheus-node-exporter`` is installed, one node exporter per namespace
  listening only on the device's management address, at the port the build's
  ``prometheus.yml`` scrapes it on (switches 9101, the ``sonic`` job; hosts 9100, the
  ``node`` job) with the ``netdev`` collector: the namespace's own kernel interface
  counters. The lab's switches are Linux and FRR, not SONiC, so on a switch this
  answers the ``sonic`` job with node exporter's series (``node_network_*``), not the
  SONiC exporter's -- what it stands in for is the target being reached out of band.

The connected route of the pool lands in the devices' main tables; the generated
``frr.conf`` redistributes only loopbacks and host /32s (prefix lists), so the
management subnet never enters BGP. SONiC's management VRF (``MGMT_VRF_CONFIG``) is not
emulated: many kernels (this project's CI included) lack the ``vrf`` module.

Bounds and safety: every interface name is checked (at most 15 characters, only
``[A-Za-z0-9_.-]``) and the devices are at most :data:`MAX_DEVICES`; ``lab up``
refuses, before creating anything, a pool that overlaps a route of the root namespace
(the machine's own networks, or another lab's management bridge) or a bridge name that
exists. ``lab down`` stops the exporters by pid (only the node exporter's binary, in
the lab's namespaces), deletes the namespaces (each veth goes with its namespace) and
then the bridge.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aifabric.configs import BuildContext
from aifabric.configs.addressing import ip_str
from aifabric.errors import Problem, SpecError
from aifabric.lab._system import LabError, run, run_many, terminate

__all__ = ["EXPORTER", "MAX_DEVICES", "MgmtLayout", "answering", "bridge_name", "bridge_up",
           "mgmt_layout", "remove_bridge", "start_exporters", "stop_exporters"]

#: the scrape ports of the build's ``prometheus.yml`` (:mod:`aifabric.telemetry.
#: monitoring`, a layer above the lab; a test keeps them equal)
SONIC_EXPORTER_PORT = 9101
NODE_EXPORTER_PORT = 9100
#: the most devices one lab's management network holds (veth names carry the index)
MAX_DEVICES = 99_999
#: Debian's node exporter (upstream's binary is ``node_exporter``)
EXPORTER = ("prometheus-node-exporter", "node_exporter")
_IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


def bridge_name(prefix: str) -> str:
    """The root-namespace bridge of the lab with namespace prefix ``prefix``."""
    return _checked(prefix.rstrip("-") + "mg")


def _checked(name: str) -> str:
    if not _IFNAME.match(name):
        raise LabError(f"interface name {name!r} is not a Linux interface name (at most 15 "
                       "characters of A-Z a-z 0-9 _ . -)")
    return name


@dataclass(frozen=True)
class MgmtPort:
    """One device's management interface in the lab."""

    device: str
    ns: str
    root_if: str  # the veth end in the root namespace (on the bridge)
    ifname: str  # the device's management interface in its namespace
    address: str
    port: int  # where its exporter listens (the build's scrape port)


@dataclass(frozen=True)
class MgmtLayout:
    bridge: str
    gateway: str
    prefixlen: int
    pool: ipaddress.IPv4Network
    ports: tuple[MgmtPort, ...]

    def root_batch(self) -> list[str]:
        """``ip -batch`` lines run in the root namespace once the namespaces exist."""
        out = [f"link add {self.bridge} type bridge", f"link set {self.bridge} up",
               f"address add {self.gateway}/{self.prefixlen} dev {self.bridge}"]
        for p in self.ports:
            out += [f"link add {p.root_if} type veth peer name {p.ifname} netns {p.ns}",
                    f"link set {p.root_if} master {self.bridge} up"]
        return out

    def ns_batch(self, p: MgmtPort) -> list[str]:
        """``ip -batch`` lines run in the device's namespace."""
        return [f"link set {p.ifname} up",
                f"address add {p.address}/{self.prefixlen} dev {p.ifname}"]


def mgmt_layout(ctx: BuildContext, ns: dict[str, str], prefix: str) -> MgmtLayout | None:
    """The lab's management network (None when the spec has none)."""
    mg = ctx.mgmt
    if mg is None:
        return None
    f = ctx.fabric
    sw = ctx.plan.switches
    hosts = np.asarray(f.host_node, dtype=np.int64)
    nodes = np.concatenate([sw, hosts])
    if len(nodes) > MAX_DEVICES:
        raise LabError(f"{len(nodes)} devices exceed the lab management network's "
                       f"{MAX_DEVICES}")
    names = f.nodes.name[nodes].astype(str).tolist()
    addrs = ip_str(mg.node_address[nodes]).tolist()
    host_if = _checked(mg.spec.host_interface)
    core = prefix.rstrip("-")
    ports = []
    for i, (dev, addr) in enumerate(zip(names, addrs, strict=True)):
        is_sw = i < len(sw)
        ports.append(MgmtPort(dev, ns[dev], _checked(f"{core}m{i}"),
                              "eth0" if is_sw else host_if, addr,
                              SONIC_EXPORTER_PORT if is_sw else NODE_EXPORTER_PORT))
    return MgmtLayout(bridge_name(prefix), mg.gateway_str, mg.prefixlen, mg.spec.pool,
                      tuple(ports))


def preflight_mgmt(lay: MgmtLayout) -> None:
    """Refuse (SpecError naming ``management.pool``, exit 2) a pool that a route of the
    root namespace already covers or is covered by, and (LabError) a bridge that exists;
    before anything is created."""
    out = run(["ip", "-4", "-json", "route", "show", "table", "all"], check=False).stdout
    try:
        routes = json.loads(out or "[]")
    except ValueError:
        routes = []
    for r in routes:
        dst = r.get("dst", "")
        if dst in ("", "default") or r.get("type") in ("local", "broadcast"):
            continue
        with contextlib.suppress(ValueError):
            net = ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False)
            if net.overlaps(lay.pool):
                raise SpecError(Problem("management.pool", f"{lay.pool} overlaps the route "
                                        f"{dst} dev {r.get('dev', '?')} of this machine (its "
                                        "own network, or another lab's management network); "
                                        "allowed: a pool no route here covers"))
    probe = run(["ip", "link", "show", lay.bridge], check=False)
    if probe.returncode == 0:
        raise LabError(f"the management bridge {lay.bridge} exists already; take the old "
                       "lab down first (`aifabric lab down`)")


def exporter_binary() -> str | None:
    for name in EXPORTER:
        path = shutil.which(name)
        if path:
            return path
    return None


def start_exporters(lab: Path, lay: MgmtLayout, timeout_s: float = 60.0) -> dict[str, int]:
    """One node exporter per device, listening only on its management address; returns
    device -> pid once every one answers over the management network (bounded by
    ``timeout_s``), or {} when no node exporter is installed."""
    exe = exporter_binary()
    if exe is None:
        return {}
    logs = lab / "mgmt"
    logs.mkdir(parents=True, exist_ok=True)
    cmds = []
    for p in lay.ports:
        argv = [exe, f"--web.listen-address={p.address}:{p.port}",
                "--collector.disable-defaults", "--collector.netdev",
                "--web.disable-exporter-metrics"]
        # started in the background by a shell that exits at once: the exporter outlives
        # `lab up` (re-parented to init), and its pid is what the shell prints
        line = (" ".join(shlex.quote(a) for a in argv)
                + f" >{shlex.quote(str(logs / (p.device + '.log')))} 2>&1 </dev/null & echo $!")
        cmds.append(["ip", "netns", "exec", p.ns, "setsid", "sh", "-c", line])
    out = run_many(cmds)
    pids = {p.device: int(o.stdout.split()[-1]) for p, o in zip(lay.ports, out, strict=True)}
    deadline = time.monotonic() + timeout_s
    waiting = list(lay.ports)
    while waiting:
        waiting = [p for p in waiting if not _answers(p.address, p.port)]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise LabError(f"the node exporter did not answer over the management network in "
                           f"{timeout_s:.0f} s on {', '.join(p.device for p in waiting[:3])} "
                           f"(logs: {logs})")
        time.sleep(0.1)
    return pids


def answering(lay: MgmtLayout) -> list[str]:
    """The devices whose exporter answers on its management address now (from here, over
    the bridge), in layout order."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=16) as pool:
        ok = list(pool.map(lambda p: _answers(p.address, p.port), lay.ports))
    return [p.device for p, good in zip(lay.ports, ok, strict=True) if good]


def bridge_up(lay: MgmtLayout) -> bool:
    """Whether the lab's management bridge exists and holds the gateway address."""
    out = run(["ip", "-4", "-json", "addr", "show", "dev", lay.bridge], check=False).stdout
    try:
        info = json.loads(out or "[]")
    except ValueError:
        return False
    return any(a.get("local") == lay.gateway for i in info for a in i.get("addr_info", []))


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def stop_exporters(namespaces: list[str], timeout_s: float = 5.0) -> int:
    """Stop every node exporter running in the lab's ``namespaces`` (by the pids ``ip
    netns pids`` lists, only the node exporter's binary); returns how many."""
    bins = {os.path.realpath(b) for b in (shutil.which(n) for n in EXPORTER) if b}
    if not bins:
        return 0
    mine: list[int] = []
    for n in namespaces:
        out = run(["ip", "netns", "pids", n], check=False).stdout
        for x in out.split():
            if x.isdigit():
                with contextlib.suppress(OSError):
                    if os.path.realpath(os.readlink(f"/proc/{x}/exe")) in bins:
                        mine.append(int(x))
    terminate(mine, timeout_s)
    return len(mine)


def remove_bridge(prefix: str) -> bool:
    """Delete the lab's management bridge, and any root-side veth of the lab still there
    (the kernel destroys a deleted namespace's veths asynchronously: one may outlive
    ``ip netns del`` for a moment); True when the bridge was removed."""
    name = bridge_name(prefix)
    veth = re.compile(re.escape(prefix.rstrip("-")) + r"m\d+")

    def links() -> list[str]:
        out = run(["ip", "-o", "link", "show"], check=False).stdout
        return [line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines()
                if line.count(":") >= 2]

    had = name in links()
    if had:
        run(["ip", "link", "del", name], check=False)
    deadline = time.monotonic() + 5.0
    while True:  # bounded: a veth the kernel is destroying may show a moment longer
        left = [x for x in links() if veth.fullmatch(x)]
        if not left or time.monotonic() > deadline:
            break
        # deleting one end deletes the pair
        run(["ip", "-batch", "-"], input="".join(f"link del {x}\n" for x in left),
            check=False)
        time.sleep(0.05)
    return had
