"""Failures and failover: links, ports or whole switches go down; ECMP groups are
recomputed from the live links (:class:`~aifabric.routing.fib.Fib`), a dual-ToR NIC
moves its QPs to its surviving port (its ports share IP and QP context, so the flows
survive), and a host whose NIC has no live port left is unreachable (the job stops).

A failure names what is down, by the names the Fabric gives (``aifabric export`` lists
them):

* ``switch: tor-s00-r0-a`` — every link of the switch (also any node: a NIC port
  ``host-s00-h000-nic0a``, a GPU, a host);
* ``link: [tor-s00-r0-a, agg-p00-pl0-00]`` — every link between the two nodes;
* ``port: tor-s00-r0-a:Ethernet520`` or ``port: host-s00-h000:ens0f1`` — one interface.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from aifabric.errors import Problem, SpecError
from aifabric.routing.hostside import host_side
from aifabric.spec.base import StrictModel
from aifabric.topology.fabric import SWITCH_KINDS, Fabric, LinkKind, NodeKind

__all__ = ["Failure", "compare_routes", "failed_links", "failure_impact", "live_links",
           "rerouted_flows"]


class Failure(StrictModel):
    """One thing that is down: a switch (or any node), a link, or a port."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    switch: str | None = Field(default=None, description="a switch (or any node) name")
    link: list[str] | None = Field(default=None, description="the two ends of the link(s)")
    port: str | None = Field(default=None, description="device:interface")

    @model_validator(mode="after")
    def _exactly_one(self) -> Failure:
        given = [k for k in ("switch", "link", "port") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of switch, link, port")
        if self.link is not None and len(self.link) != 2:
            raise ValueError("a link is named by its two ends: [node a, node b]")
        return self


def _node(f: Fabric, name: str, path: str) -> int:
    if not f.has_node(name):
        raise SpecError.at(path, f"no node called {name!r} in fabric {f.name!r}; allowed: "
                           "the names of `aifabric export` (e.g. "
                           f"{f.nodes.name[f.ids(NodeKind.TOR)[0]]})")
    return f.node_id(name)


def _port_links(f: Fabric, text: str, path: str) -> np.ndarray:
    dev, sep, ifname = text.rpartition(":")
    if not sep:
        node = _node(f, text, path)
        if f.nodes.kind[node] != NodeKind.NIC:
            raise SpecError.at(path, f"{text!r} is not a port; allowed: device:interface "
                               "(tor-s00-r0-a:Ethernet8, host-s00-h000:ens0f1) or a NIC port")
        return np.flatnonzero((f.links.a == node) & (f.links.kind == LinkKind.ACCESS))
    node = _node(f, dev, path)
    links = f.links
    kind = f.nodes.kind[node]
    if kind in SWITCH_KINDS:
        if not ifname.startswith("Ethernet") or not ifname[8:].isdigit():
            raise SpecError.at(path, f"interface {ifname!r}: allowed: Ethernet<lane>")
        lane = int(ifname[8:])
        sel = ((links.a == node) & (links.a_port == lane)) | \
              ((links.b == node) & (links.b_port == lane))
    elif kind == NodeKind.HOST:
        hs = host_side(f)
        h = int(f.nodes.host[node])
        ok = (ifname.startswith("ens") and "f" in ifname[3:])
        rail, side = [*ifname[3:].split("f", 1), ""][:2] if ok else ("", "")
        if not (rail.isdigit() and side.isdigit() and int(rail) < hs.N and int(side) < hs.P):
            raise SpecError.at(path, f"interface {ifname!r} of host {dev!r}: allowed: "
                               f"ens<nic>f<port> with nic < {hs.N}, port < {hs.P}")
        nic = hs.nic_port[h, int(rail), int(side)]
        sel = (links.a == nic) & (links.kind == LinkKind.ACCESS)
    else:
        raise SpecError.at(path, f"{dev!r} is a {NodeKind(int(kind)).label}; allowed: a "
                           "switch or a host")
    found = np.flatnonzero(sel)
    if not len(found):
        raise SpecError.at(path, f"{dev!r} has no interface {ifname!r} in use")
    return found


def failed_links(fabric: Fabric, failures: list[Failure] | list[dict[str, Any]],
                 *, path: str = "failures", file: str | None = None) -> np.ndarray:
    """Bool per link: True where a failure takes the link down.

    Every bad name is reported (one problem each, with its field path) before failing.
    """
    f = fabric
    down = np.zeros(f.n_links, dtype=bool)
    problems: list[Problem] = []
    links = f.links
    for i, item in enumerate(failures):
        fail = item if isinstance(item, Failure) else Failure.model_validate(item)
        where = f"{path}.{i}"
        try:
            if fail.switch is not None:
                n = _node(f, fail.switch, f"{where}.switch")
                down |= (links.a == n) | (links.b == n)
            elif fail.link is not None:
                u = _node(f, fail.link[0], f"{where}.link")
                v = _node(f, fail.link[1], f"{where}.link")
                sel = ((links.a == u) & (links.b == v)) | ((links.a == v) & (links.b == u))
                if not sel.any():
                    raise SpecError.at(f"{where}.link", f"no link between {fail.link[0]!r} and "
                                       f"{fail.link[1]!r}; allowed: two nodes that are cabled "
                                       "together")
                down |= sel
            else:
                assert fail.port is not None
                down[_port_links(f, fail.port, f"{where}.port")] = True
        except SpecError as err:
            problems.extend(Problem(p.path, p.message, p.file or file) for p in err.problems)
    if problems:
        raise SpecError(problems)
    return down


def live_links(fabric: Fabric, failures: Any) -> np.ndarray:
    """Bool per link, True = up. ``failures``: None, a bool mask of *live* links, or a list
    of :class:`Failure` (or mappings)."""
    if failures is None:
        return np.ones(fabric.n_links, dtype=bool)
    if isinstance(failures, np.ndarray) and failures.dtype == bool:
        if failures.shape != (fabric.n_links,):
            raise ValueError(f"a live-link mask needs {fabric.n_links} entries")
        return failures
    return ~failed_links(fabric, list(failures))


def failure_impact(fabric: Fabric, alive: np.ndarray) -> dict[str, Any]:
    """What the dead links do to the hosts, counted from the fabric.

    ``nic_ports_down``: NIC ports whose access link is down; ``nics_degraded``: NICs with
    some but not all ports down; ``nics_isolated``: NICs with every port down;
    ``hosts_degraded``/``hosts_unreachable``: active hosts with a lost port / with an
    isolated NIC (a rail-aligned job cannot run on them); ``host_bandwidth_lost``: the
    distinct fractions of a host's scale-out bandwidth lost, with the number of hosts.
    """
    f = fabric
    hs = host_side(f)
    nodes = f.nodes
    ports = hs.nic_port  # (H, N, P)
    acc = hs.access_link[ports]
    up = (acc >= 0) & alive[np.maximum(acc, 0)]
    cap = np.where(acc >= 0, f.links.capacity_gbps[np.maximum(acc, 0), 0], 0.0)
    lost_ports = (~up & (acc >= 0)).sum(axis=2)  # (H, N)
    n_ports = (acc >= 0).sum(axis=2)
    isolated = (lost_ports == n_ports) & (n_ports > 0)
    degraded = (lost_ports > 0) & ~isolated
    active = ~nodes.backup[f.host_node]
    host_lost = (cap * ~up).sum(axis=(1, 2)) / np.maximum(cap.sum(axis=(1, 2)), 1e-12)
    hit = active & (host_lost > 0)
    fr, cnt = np.unique(np.round(host_lost[hit], 6), return_counts=True)
    unreachable = active & isolated.any(axis=1)
    names = nodes.name[f.host_node[np.flatnonzero(unreachable)]]
    return {
        "links_down": int((~alive).sum()),
        "nic_ports_down": int(lost_ports.sum()),
        "nics_degraded": int(degraded.sum()),
        "nics_isolated": int(isolated.sum()),
        "hosts_degraded": int((active & (lost_ports > 0).any(axis=1) & ~unreachable).sum()),
        "hosts_unreachable": int(unreachable.sum()),
        "unreachable_hosts": [str(x) for x in names[:20]],
        "host_bandwidth_lost": [{"fraction": float(x), "hosts": int(c)}
                                for x, c in zip(fr, cnt, strict=True)],
    }


def rerouted_flows(before: Any, after: Any) -> np.ndarray:
    """Bool per flow: delivered before and after (two :class:`Routed` of the same
    flows), on a path that differs anywhere (the flows :func:`compare_routes` counts as
    ``rerouted``)."""
    lb, la = np.diff(before.ptr), np.diff(after.ptr)
    both = ~after.unreachable & ~before.unreachable
    differ = both & (lb != la)
    idx = np.flatnonzero(both & (lb == la))
    if len(idx):
        cnt = la[idx]
        rep = np.repeat(idx, cnt)
        off = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        neq = before.arcs[before.ptr[rep] + off] != after.arcs[after.ptr[rep] + off]
        differ[np.unique(rep[neq])] = True
    return differ


def compare_routes(before: Any, after: Any) -> dict[str, int]:
    """What a failure did to the same flows routed without it (two :class:`Routed`).

    ``moved_port``: flows that left on the other port of their NIC; ``rerouted``: flows
    still delivered whose path changed anywhere; ``unreachable``: flows with no path
    after; ``newly_unreachable``: of those, the ones that had a path before.
    """
    differ = rerouted_flows(before, after)
    return {
        "moved_port": int(after.moved.sum()),
        "rerouted": int(differ.sum()),
        "unreachable": int(after.unreachable.sum()),
        "newly_unreachable": int((after.unreachable & ~before.unreachable).sum()),
    }
