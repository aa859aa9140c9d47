"""The out-of-band management network of a spec: its addresses, switches and cables.

Present only when the spec has a ``management:`` section (every existing spec plans and
builds exactly as before without one). What it manages, one **managed port** each:

* every fabric switch's ``eth0`` (SONiC's management port), in node order;
* every host (active and backup) its OS management NIC (``management.host_interface``,
  default ``eno1``) and, with ``management.bmc`` (default), its BMC, host by host.

Managed port ``j`` is cabled (1000BASE-T copper, ``management.access_m``) to port
``j % P + 1`` of access switch ``j // P`` (``P = management.ports_per_switch``), so
there are ``ceil(ports / P)`` access switches, filled in that order (a host's two
ports share a switch unless they fall on the boundary). With more than one access
switch there is an aggregation layer, in ``B = ceil(access switches / A)`` blocks
(``A = management.agg_ports``) of ``U = management.uplinks`` switches each: uplink ``u``
of access switch ``a`` (at ``management.uplink_gbps``, on ``management.uplink_medium``,
from its port ``P + u + 1``) goes to aggregation switch ``(a // A) * U + u`` on its port
``a % A + 1``. With one block (``B == 1``) that is aggregation switch ``u``, port
``a + 1``, and the aggregation switches' own uplinks to the site's management router
(the pool's gateway) are the site's, not in the BOM. With more than one block there is
a **management core** of ``U`` switches (``A`` ports at ``management.uplink_gbps``, the
aggregation switches' model): aggregation switch ``g = b * U + u`` uplinks from its port
``A + 1`` (one port beyond its ``A`` access-facing ones) to core switch ``u`` on core port
``b + 1``, so every access switch reaches every core switch through its block; the core
switches' own uplinks to the management router are the site's. A core switch has ``A``
ports, one per block: more than ``A`` blocks (more than ``A * A`` access switches) is
refused, naming ``management.agg_ports``.

Addresses come from ``management.pool``, one flat subnet: the first host address is the
gateway (the site's management router), then every managed port in the order above,
then the access switches, the aggregation switches and the core switches (their
management SVIs). The pool must hold them all and overlap none of the fabric's pools.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric
from aifabric.topology.parts import fmt

__all__ = ["KINDS", "ManagementPlan", "plan_management"]

#: ``kind`` of an address row: a switch's eth0, a host's OS NIC, a host's BMC, a
#: management access switch, a management aggregation switch, a management core switch
KINDS = ("switch", "host", "bmc", "mgmt_access", "mgmt_agg", "mgmt_core")
#: SONiC's management port
SWITCH_PORT = "eth0"


@dataclass(eq=False)
class ManagementPlan:
    """Every management address and cable of one fabric (numpy arrays, row order as in
    the module docstring: managed ports, then access, aggregation and core switches)."""

    fabric: Fabric
    device: np.ndarray  # str: the device of each address row
    interface: np.ndarray  # str: its interface
    kind: np.ndarray  # int8: index into KINDS
    node: np.ndarray  # int64: the fabric node (switch or host node), -1 for mgmt switches
    address: np.ndarray  # uint32
    ports: int  # managed ports (access cables)
    access_switches: int
    agg_switches: int
    gateway: int
    prefixlen: int
    core_switches: int = 0  # the management core (more than one aggregation block)

    @property
    def spec(self) -> Any:
        return self.fabric.spec.management

    @property
    def gateway_str(self) -> str:
        return str(ipaddress.IPv4Address(self.gateway))

    @cached_property
    def node_address(self) -> np.ndarray:
        """uint32 per fabric node: a switch's eth0 and a host's OS NIC address (0 for
        every other node)."""
        out = np.zeros(self.fabric.n_nodes, dtype=np.uint32)
        sel = (self.kind == KINDS.index("switch")) | (self.kind == KINDS.index("host"))
        out[self.node[sel]] = self.address[sel]
        return out

    @cached_property
    def node_row(self) -> np.ndarray:
        """int64 per fabric node: the address row of a switch's eth0 or a host's OS NIC
        (-1 for every other node)."""
        out = np.full(self.fabric.n_nodes, -1, dtype=np.int64)
        sel = np.flatnonzero(self.kind <= KINDS.index("host"))
        out[self.node[sel]] = sel
        return out

    @cached_property
    def bmc_address(self) -> np.ndarray:
        """uint32 per fabric node: a host's BMC address (0 elsewhere, or without BMCs)."""
        out = np.zeros(self.fabric.n_nodes, dtype=np.uint32)
        sel = self.kind == KINDS.index("bmc")
        out[self.node[sel]] = self.address[sel]
        return out

    @cached_property
    def access_switch_names(self) -> np.ndarray:
        return _names("mgmt-acc-", self.access_switches)

    @cached_property
    def agg_switch_names(self) -> np.ndarray:
        return _names("mgmt-agg-", self.agg_switches)

    @cached_property
    def core_switch_names(self) -> np.ndarray:
        return _names("mgmt-core-", self.core_switches)

    @property
    def agg_blocks(self) -> int:
        """Aggregation blocks (0 without an aggregation layer)."""
        return self.agg_switches // self.spec.uplinks

    def access_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(access switch name, its port name) of every managed port, in row order."""
        j = np.arange(self.ports, dtype=np.int64)
        per = self.spec.ports_per_switch
        return self.access_switch_names[j // per], fmt("p", j % per + 1)

    def uplinks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(access switch, its port, aggregation switch, its port) of every uplink
        (none without an aggregation layer), access switch by access switch: uplink ``u``
        of access switch ``a`` to aggregation switch ``(a // agg_ports) * uplinks + u``,
        port ``a % agg_ports + 1``."""
        if not self.agg_switches:
            e = np.array([], dtype=np.str_)
            return e, e, e, e
        m = self.spec
        acc = np.repeat(np.arange(self.access_switches, dtype=np.int64), m.uplinks)
        u = np.tile(np.arange(m.uplinks, dtype=np.int64), self.access_switches)
        agg = (acc // m.agg_ports) * m.uplinks + u
        return (self.access_switch_names[acc], fmt("p", m.ports_per_switch + u + 1),
                self.agg_switch_names[agg], fmt("p", acc % m.agg_ports + 1))

    def core_uplinks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(aggregation switch, its port, core switch, its port) of every core uplink
        (none without a core), aggregation switch by aggregation switch: switch
        ``g = b * uplinks + u`` from its port ``agg_ports + 1`` to core switch ``u``, port
        ``b + 1``."""
        if not self.core_switches:
            e = np.array([], dtype=np.str_)
            return e, e, e, e
        m = self.spec
        g = np.arange(self.agg_switches, dtype=np.int64)
        return (self.agg_switch_names, np.full(len(g), f"p{m.agg_ports + 1}"),
                self.core_switch_names[g % m.uplinks], fmt("p", g // m.uplinks + 1))

    def as_dict(self) -> dict[str, Any]:
        """The ``management`` key of a plan."""
        m = self.spec
        kinds = np.bincount(self.kind, minlength=len(KINDS))
        uplinks = (self.access_switches * m.uplinks if self.agg_switches else 0) + (
            self.agg_switches if self.core_switches else 0)
        out: dict[str, Any] = {
            "pool": str(m.pool), "gateway": self.gateway_str,
            "addresses": len(self.address),
            "managed_ports": self.ports,
            "switch_ports": int(kinds[0]), "host_ports": int(kinds[1]),
            "bmc_ports": int(kinds[2]),
            "access_switches": self.access_switches, "ports_per_switch": m.ports_per_switch,
            "agg_switches": self.agg_switches, "agg_ports": m.agg_ports,
            "uplinks_per_switch": m.uplinks,
            "copper_cables": self.ports, "uplink_cables": uplinks,
            "uplink_medium": m.uplink_medium,
        }
        if self.core_switches:  # (only with a core: a one-block site's plan is unchanged)
            out["agg_blocks"] = self.agg_blocks
            out["core_switches"] = self.core_switches
        if m.uplink_medium == "optic":
            out["uplink_transceivers"] = 2 * uplinks
        return out


def _names(prefix: str, n: int) -> np.ndarray:
    if n == 0:
        return np.array([], dtype=np.str_)
    return fmt(prefix, (np.arange(n), max(2, len(str(n - 1)))))


def _pool_problems(spec: Any, need: int) -> list[Problem]:
    m = spec.management
    pool = m.pool
    others = {"addressing.nic_pool": spec.addressing.nic_pool,
              "deploy.pools.loopback": spec.deploy.pools.loopback,
              "deploy.pools.p2p": spec.deploy.pools.p2p}
    fe = getattr(spec, "frontend", None)
    if fe is not None:  # the frontend (storage) network's own pools
        others.update({f"frontend.pools.{k}": getattr(fe.pools, k)
                       for k in ("hosts", "loopback", "p2p")})
    out = [Problem("management.pool", f"{pool} overlaps {name} {net}; allowed: a pool "
                   "disjoint from the fabric's pools") for name, net in others.items()
           if pool.overlaps(net)]
    usable = max(pool.num_addresses - 2, 0)
    if need > usable:
        bits = 32 - math.ceil(math.log2(need + 2))
        out.append(Problem("management.pool", f"{pool} holds {usable} addresses; the "
                           f"management network needs {need} (the gateway, every managed "
                           f"port and every management switch); allowed: a /{bits} or "
                           "larger"))
    return out


def plan_management(f: Fabric) -> ManagementPlan | None:
    """The management network of ``f`` (None when its spec has none); SpecError naming
    the field when the pool is too small or overlaps a fabric pool, or a core switch
    cannot hold every aggregation block."""
    spec = f.spec
    m = getattr(spec, "management", None)
    if m is None:
        return None
    nodes = f.nodes
    sw = np.flatnonzero(f.is_switch).astype(np.int64)
    hosts = np.asarray(f.host_node, dtype=np.int64)
    per_host = 2 if m.bmc else 1
    ports = len(sw) + per_host * len(hosts)
    n_acc = math.ceil(ports / m.ports_per_switch)
    blocks = math.ceil(n_acc / m.agg_ports) if n_acc > 1 else 0
    n_agg = blocks * m.uplinks
    n_core = m.uplinks if blocks > 1 else 0
    problems = _pool_problems(spec, 1 + ports + n_acc + n_agg + n_core)
    if blocks > m.agg_ports:  # a core switch has agg_ports ports, one per block
        least = math.isqrt(n_acc - 1) + 1  # the least A with ceil(n_acc / A) <= A
        problems.append(Problem("management.agg_ports", f"the {n_acc} access switches "
                                f"({ports:,} managed ports / {m.ports_per_switch} per switch) "
                                f"need {blocks} aggregation blocks of {m.agg_ports}; a core "
                                f"switch of {m.agg_ports} ports holds {m.agg_ports} blocks; "
                                f"allowed: agg_ports >= {least}, or more ports_per_switch"))
    if problems:
        raise SpecError(problems)
    # managed ports: switches' eth0, then per host its OS NIC (and BMC)
    h_node = np.repeat(hosts, per_host)
    h_kind = np.tile(np.array([1, 2][:per_host], dtype=np.int8), len(hosts))
    h_if = np.tile(np.array([m.host_interface, "bmc"][:per_host]), len(hosts))
    acc_names, agg_names = _names("mgmt-acc-", n_acc), _names("mgmt-agg-", n_agg)
    n_sw = n_acc + n_agg + n_core  # the management switches, each with its Vlan1
    device = np.concatenate([nodes.name[sw].astype(np.str_),
                             nodes.name[h_node].astype(np.str_), acc_names, agg_names,
                             _names("mgmt-core-", n_core)])
    interface = np.concatenate([np.full(len(sw), SWITCH_PORT), h_if,
                                np.full(n_sw, "Vlan1")])
    kind = np.concatenate([np.zeros(len(sw), dtype=np.int8), h_kind,
                           np.full(n_acc, KINDS.index("mgmt_access"), dtype=np.int8),
                           np.full(n_agg, KINDS.index("mgmt_agg"), dtype=np.int8),
                           np.full(n_core, KINDS.index("mgmt_core"), dtype=np.int8)])
    node = np.concatenate([sw, h_node, np.full(n_sw, -1, dtype=np.int64)])
    base = int(m.pool.network_address)
    address = (base + 2 + np.arange(len(device), dtype=np.int64)).astype(np.uint32)
    return ManagementPlan(fabric=f, device=device, interface=interface, kind=kind, node=node,
                          address=address, ports=ports, access_switches=n_acc,
                          agg_switches=n_agg, gateway=base + 1, prefixlen=m.pool.prefixlen,
                          core_switches=n_core)
