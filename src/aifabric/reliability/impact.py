"""What a failure does to a job, asked of the routing model once per kind of component.

For every failure class the components (GPUs, hosts, NIC ports, access links, ToRs,
aggs, cores, switch-to-switch links) are grouped by what they touch: whether a host of
the job hangs off them, their dual-ToR side, plane, and whether their pod/segment holds
the job. One representative of each group is failed in the routing model
(:func:`aifabric.routing.route` on the job's traffic with that component's links down):

* **interrupts** when a flow between two GPUs of the job has no live path left (the
  host's NIC lost every port, the single ToR of a segment is gone);
* **degrades** when nothing is cut off but a host of the job lost part of its scale-out
  bandwidth (a dual-ToR NIC lost one port: its QPs moved to the other port); the
  slowdown of the job's iteration with that failure comes from the flow model
  (:func:`aifabric.sim.run.simulate`, once per group);
* otherwise it costs the job nothing.

The answers are cached per group (:class:`ImpactTable`), so the Monte Carlo never asks
the routing model during a trial. The job's traffic for this question: every GPU of the
job to the same-index GPU of the next host of the job and of the host half-way round
(a ring and a shift over the job's hosts: every NIC of the job sends and receives, within
and across segments).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.routing import make_flows, route
from aifabric.routing.failover import Failure
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["Group", "ImpactTable", "component_groups", "job_flows", "job_impact"]


@dataclass
class Group:
    """Components of one class that behave alike: how many, one of them, the answer."""

    cls: str
    key: tuple[Any, ...]
    count: int
    rep_name: str  # the representative, as a failure entry names it
    rep_links: np.ndarray  # its links (the ones that go down)
    interrupts: bool = False
    degrades: bool = False
    slowdown: float = 1.0
    members: np.ndarray | None = None  # ids (nodes or links) of every component in it


@dataclass
class ImpactTable:
    """Every group of every network class, with the routing model's answer."""

    groups: list[Group] = field(default_factory=list)
    route_calls: int = 0

    def of(self, cls: str) -> list[Group]:
        return [g for g in self.groups if g.cls == cls]


def job_flows(fabric: Fabric, gpus: np.ndarray) -> Any:
    """The job's flows for the reachability question (one QP per connection)."""
    f = fabric
    host = f.nodes.host[gpus].astype(np.int64)
    local = f.nodes.index[gpus].astype(np.int64)
    hosts = np.unique(host)
    if len(hosts) < 2:
        return None
    rank = np.searchsorted(hosts, host)
    grid = np.full((len(hosts), int(local.max()) + 1), -1, dtype=np.int64)
    grid[rank, local] = gpus
    src, dst = [], []
    for shift in sorted({1, len(hosts) // 2} - {0}):
        nxt = np.roll(grid, -shift, axis=0)
        ok = (grid >= 0) & (nxt >= 0)
        src.append(grid[ok])
        dst.append(nxt[ok])
    s, d = np.concatenate(src), np.concatenate(dst)
    if not len(s):
        return None
    return make_flows(f, s, d, 1 << 20, qps_per_connection=1)


def _node_links(f: Fabric, node: int) -> np.ndarray:
    return np.flatnonzero((f.links.a == node) | (f.links.b == node))


def component_groups(fabric: Fabric, job_hosts: np.ndarray) -> list[Group]:
    """The network components of ``fabric`` grouped by class and by what they touch
    (``job_hosts``: host indices of the job)."""
    f = fabric
    nodes, links = f.nodes, f.links
    in_job = np.zeros(len(f.host_node), dtype=bool)
    in_job[job_hosts] = True
    job_segs = np.unique(nodes.segment[f.host_node[job_hosts]])
    job_pods = np.unique(nodes.pod[f.host_node[job_hosts]])
    acc = np.flatnonzero(links.kind == LinkKind.ACCESS)
    acc_host = nodes.host[links.a[acc]]
    acc_job = in_job[acc_host] & ~nodes.backup[links.a[acc]]
    # switches with a job host under them
    under = np.zeros(f.n_nodes, dtype=bool)
    under[links.b[acc[acc_job]]] = True
    out: list[Group] = []

    def grouped(cls: str, ids: np.ndarray, keys: np.ndarray, is_link: bool) -> None:
        if not len(ids):
            return
        uk, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        cnt = np.bincount(inv, minlength=len(uk))
        for g in range(len(uk)):
            rep = int(ids[first[g]])
            if is_link:
                name = f"{nodes.name[links.a[rep]]} - {nodes.name[links.b[rep]]}"
                rl = np.array([rep])
            else:
                name = str(nodes.name[rep])
                rl = _node_links(f, rep)
            out.append(Group(cls, tuple(int(x) for x in uk[g]), int(cnt[g]), name, rl,
                             members=ids[inv == g]))

    nic = f.ids(NodeKind.NIC)
    nic = nic[~nodes.backup[nic]]
    grouped("nic_port", nic, np.stack([in_job[nodes.host[nic]], nodes.side[nic]], 1), False)
    grouped("access_link", acc[~nodes.backup[links.a[acc]]],
            np.stack([acc_job, nodes.side[links.a[acc]]], 1)[~nodes.backup[links.a[acc]]],
            True)
    for cls, kind in (("tor", NodeKind.TOR), ("agg", NodeKind.AGG), ("core", NodeKind.CORE)):
        ids = f.ids(kind)
        near = np.isin(nodes.segment[ids], job_segs) if kind == NodeKind.TOR else \
            np.isin(nodes.pod[ids], job_pods)
        grouped(cls, ids, np.stack([under[ids], nodes.side[ids], nodes.plane[ids],
                                    near], 1), False)
    fl = np.flatnonzero((links.kind == LinkKind.LEAF_SPINE) | (links.kind == LinkKind.SPINE_CORE))
    grouped("fabric_link", fl, np.stack([links.kind[fl], under[links.a[fl]], links.plane[fl],
                                         np.isin(links.pod[fl], job_pods)], 1), True)
    return out


def job_impact(fabric: Fabric, gpus: np.ndarray, policy: Any,
               groups: list[Group]) -> ImpactTable:
    """Ask the routing model, once per group, whether failing its representative cuts
    the job off (interrupts) or only takes bandwidth from its hosts (degrades)."""
    f = fabric
    flows = job_flows(f, gpus)
    job_hosts = np.unique(f.nodes.host[gpus])
    in_job = np.zeros(len(f.host_node), dtype=bool)
    in_job[job_hosts] = True
    acc = f.links.kind == LinkKind.ACCESS
    job_access = acc & in_job[np.maximum(f.nodes.host[f.links.a], 0)] & \
        (f.nodes.kind[f.links.a] == NodeKind.NIC)
    table = ImpactTable()
    for g in groups:
        if flows is None:
            g.interrupts = False
        else:
            alive = np.ones(f.n_links, dtype=bool)
            alive[g.rep_links] = False
            routed = route(f, flows, policy, failures=alive)
            table.route_calls += 1
            g.interrupts = bool(routed.unreachable.any())
        g.degrades = not g.interrupts and bool(job_access[g.rep_links].any())
        table.groups.append(g)
    return table


def failure_entry(fabric: Fabric, g: Group) -> Failure:
    """The representative of ``g`` as a scenario failure entry (for the flow model)."""
    if " - " in g.rep_name:
        a, b = g.rep_name.split(" - ", 1)
        return Failure(link=[a, b])
    del fabric
    return Failure(switch=g.rep_name)
