"""SHARP in-network AllReduce at flow level, on an InfiniBand fabric's aggregation tree.

With SHARP (NVIDIA's Scalable Hierarchical Aggregation and Reduction Protocol) the
switches reduce: every GPU's NIC sends its buffer once up a reduction tree of switches,
each switch adds what its children send and passes one buffer up, the root sends the
result back down the same tree (multicast), and every NIC receives it once. So every link
of the tree, the host links included, carries the buffer ``S`` once in each direction,
where a ring AllReduce moves ``2(n-1)/n x S`` over each host link in each direction.

The tree (:func:`sharp_tree`): the NICs of the job's GPUs (each GPU's own rail NIC, port
1), their switches as leaves, and as root the first switch of the top tier that every
leaf reaches; each leaf's path to the root follows the subnet manager's forwarding tables
towards the root's LID (destination-based routing towards one LID is a tree), which is
how an aggregation manager lays a tree on a fat-tree. One tree per rail when the GPUs use
several rails, each on the next top-tier switch (trees spread over the roots). Under a
scenario's failures the trees are laid on the live fabric (the subnet manager's
re-sweep, the tables every other flow follows): no tree arc is a failed link or touches
a failed switch, and where the failures leave a GPU no tree (:class:`SharpUnavailable`)
the caller runs NCCL's ring and says what failed (:func:`live_trees`).

The run (:func:`sharp_allreduce`): streaming aggregation pipelines the buffer through the
tree, so every tree link and host link carries its ``S`` at the same time; each is a flow
of the real flow engine (:func:`aifabric.sim.flow.engine.run_flow`, max-min fair, on an
idle fabric or not), and the AllReduce ends when the last has drained plus the latency of
its link. Closed form on an idle fabric: ``S / B_min`` + one link latency, ``B_min`` the
slowest link of the tree (the NIC port on a full-bisection fabric); the ring's bandwidth
term is ``2(n-1)/n x S / B``. The limits on trees and concurrent operations per switch
are counted by :func:`sharp_limits` (a scenario's collectives: refused beyond them) and
:func:`sharp_usage` / :func:`sharp_over` (a job's DP AllReduce: ring beyond them);
switch reduction latency and packet-level behaviour are not modelled here (they are
in :mod:`aifabric.sim.packet.sharp`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind

__all__ = ["SharpTree", "SharpUnavailable", "live_trees", "sharp_allreduce",
           "sharp_flow_arcs", "sharp_limits", "sharp_over", "sharp_transfer_names",
           "sharp_tree", "sharp_usage"]


class SharpUnavailable(Exception):
    """The failures leave no SHARP tree for these GPUs (a GPU's NIC port cut off, the
    leaves in different subnets): a runtime condition, not bad input. NCCL then runs
    the collective without SHARP (its ring), as it does when the aggregation manager
    cannot give a communicator its trees; the message says what failed."""


@dataclass(eq=False)
class SharpTree:
    """One reduction tree: the NIC ports of its GPUs and the tree's switch links as
    directed *up* arcs (``fabric.arcs`` numbering; the down arc is the other direction)."""

    rail: int
    root: int  # fabric node id of the root switch
    gpus: np.ndarray
    nics: np.ndarray
    up_arcs: np.ndarray
    depth: int


def _arc_from(fab: Fabric, link: int, node: int) -> int:
    """The arc of ``link`` that leaves ``node``."""
    return 2 * link if int(fab.links.a[link]) == node else 2 * link + 1


def sharp_tree(fab: Fabric, gpus: np.ndarray, first_root: int = 0,
               alive: np.ndarray | None = None) -> list[SharpTree]:
    """The SHARP reduction trees of the GPUs ``gpus`` (fabric GPU node ids): one per rail
    plane (module doc). ``first_root``: the trees already laid (by other jobs or groups),
    so that this set starts on the next top-tier switch and the next parallel cable.

    ``alive`` (bool per link; None: all up): the trees are laid on the live fabric, as
    the aggregation manager lays them after the subnet manager's re-sweep: the walks
    follow the failed-fabric tables (:func:`aifabric.routing.infiniband.fabric_lfts`
    with ``alive``, the ones every other flow of the run follows), so no tree arc is a
    failed link or touches a failed switch; among the top-tier switches the root is the
    first (in the rotation above) whose tree is shallowest (a leaf that lost its link to
    a root would otherwise reach it through another leaf). A GPU whose NIC port (or its
    PCIe link) is down, or leaves the failures split into two subnets, raise
    :class:`SharpUnavailable`."""
    from aifabric.routing.infiniband import fabric_lfts

    if getattr(fab.spec, "transport", "roce") != "infiniband":
        raise SpecError(Problem("transport", "SHARP reduces in InfiniBand switches; "
                                "allowed: a spec with transport: infiniband"))
    gpus = np.asarray(gpus, dtype=np.int64)
    if len(gpus) < 2:
        raise SpecError(Problem("gpus", f"{len(gpus)} GPU(s); allowed: 2 or more"))
    failed = alive is not None and not bool(np.all(alive))
    t = fabric_lfts(fab, alive if failed else None)
    sn = t.subnet
    links = fab.links
    # each GPU's NIC port: the PCIe link from the GPU, its port 1 (side 0)
    pcie = np.flatnonzero(links.kind == LinkKind.PCIE)
    nic_of = {}
    pcie_of = {}
    for lk in pcie[np.isin(links.a[pcie], gpus)]:
        nic = int(links.b[lk])
        if int(fab.nodes.side[nic]) == 0:
            nic_of[int(links.a[lk])] = nic
            pcie_of[int(links.a[lk])] = int(lk)
    missing = [int(g) for g in gpus if int(g) not in nic_of]
    if missing:
        raise SpecError(Problem("gpus", f"GPU {fab.nodes.name[missing[0]]} has no NIC "
                                "port of its own; allowed: GPUs with a backend NIC"))
    nics = np.array([nic_of[int(g)] for g in gpus], dtype=np.int64)
    ca_of = np.full(fab.n_nodes, -1, dtype=np.int64)
    ca_of[sn.ca_node] = np.arange(sn.n_ca_ports)
    cas = ca_of[nics]
    if failed:
        assert alive is not None
        _check_attached(fab, gpus, nics,
                        np.array([pcie_of[int(g)] for g in gpus], dtype=np.int64),
                        np.where(cas >= 0, sn.ca_sw[np.maximum(cas, 0)], -1), alive)
    rails = fab.nodes.rail[nics].astype(np.int64)
    tier = fab.nodes.tier[sn.sw_node].astype(np.int64)
    out: list[SharpTree] = []
    for r in np.unique(rails):
        mine = rails == r
        leaves = np.unique(sn.ca_sw[cas[mine]])
        comp = sn.component[leaves]
        if failed and len(np.unique(comp)) != 1 and (leaves >= 0).all():
            raise SharpUnavailable(f"the failures split the rail-{int(r)} NICs of the GPUs "
                                   f"into {len(np.unique(comp))} subnets")
        if len(np.unique(comp)) != 1 or (leaves < 0).any():
            raise SpecError(Problem("gpus", f"the rail-{int(r)} NICs of the GPUs are not "
                                    "in one subnet; allowed: GPUs whose NICs share a subnet"))
        # the root: a top-tier switch of the subnet every leaf reaches
        cands = np.flatnonzero((sn.component == comp[0]) &
                               (tier == tier[sn.component == comp[0]].max()))
        root = -1
        best = -1
        # one tree per rail, on different roots where there are several (as an
        # aggregation manager spreads trees over the top switches); after failures the
        # shallowest tree (module doc)
        for c in np.roll(cands, -(len(out) + first_root)):
            lid = int(t.sw_lid[c])
            walks = [_walk(t, sn, int(s), lid, int(c)) for s in leaves]
            if any(w is None for w in walks):
                continue
            d = max((len(w) for w in walks if w is not None), default=0)
            if root < 0 or d < best:
                root, best = int(c), d
            if not failed:
                break
        if root < 0:
            if failed:
                raise SharpUnavailable(f"no top-tier switch is reachable from every rail-"
                                       f"{int(r)} leaf of the GPUs over the live links")
            raise SpecError(Problem("gpus", "no switch of the top tier is reachable from "
                                    "every leaf of the job; allowed: a connected job"))
        up: set[int] = set()
        depth = 0
        for s in leaves:
            hops = _walk(t, sn, int(s), int(t.sw_lid[root]), root) or []
            depth = max(depth, len(hops))
            for sw, port in hops:
                # parallel cables to the same next switch: tree k takes the k-th
                same = np.flatnonzero(sn.peer[sw] == sn.peer[sw, port])
                port = int(same[(len(out) + first_root) % len(same)])
                up.add(_arc_from(fab, int(sn.port_link[sw, port]), int(sn.sw_node[sw])))
        out.append(SharpTree(rail=int(r), root=int(sn.sw_node[root]), gpus=gpus[mine],
                             nics=nics[mine], up_arcs=np.array(sorted(up), dtype=np.int64),
                             depth=depth))
    return out


def _check_attached(fab: Fabric, gpus: np.ndarray, nics: np.ndarray, pcie: np.ndarray,
                    leaf: np.ndarray, alive: np.ndarray) -> None:
    """:class:`SharpUnavailable` naming the first GPU whose NIC port is cut off by the
    failures (its access link or its PCIe link ``pcie`` down): it cannot join a tree."""
    links = fab.links
    names = fab.nodes.name
    acc = np.flatnonzero(links.kind == LinkKind.ACCESS)
    acc_of = np.full(fab.n_nodes, -1, dtype=np.int64)
    acc_of[links.a[acc]] = acc
    a = acc_of[nics]
    a_up = (a >= 0) & alive[np.maximum(a, 0)]
    bad = np.flatnonzero((leaf < 0) | ~alive[pcie] | ~a_up)
    if not len(bad):
        return
    k = int(bad[0])
    g, nic, lk = int(gpus[k]), int(nics[k]), int(a[k])
    where = (f"its link to {names[int(links.b[lk])]} is down" if lk >= 0 and not a_up[k]
             else "its PCIe link is down" if not alive[pcie[k]]
             else "it has no live link to a switch")
    more = f" (and {len(bad) - 1} more GPU(s))" if len(bad) > 1 else ""
    raise SharpUnavailable(f"GPU {names[g]}'s NIC port {names[nic]} cannot join a tree: "
                           f"{where}{more}")


def live_trees(fab: Fabric, gpus: np.ndarray, first_root: int = 0,
               alive: np.ndarray | None = None) -> list[SharpTree]:
    """:func:`sharp_tree` on the live fabric ``alive``: what cannot work on the whole
    fabric either is bad input as without failures (the :class:`SpecError` of the
    healthy fabric, checked first); what only the failures prevent raises
    :class:`SharpUnavailable`."""
    if alive is None or bool(np.all(alive)):
        return sharp_tree(fab, gpus, first_root)
    sharp_tree(fab, gpus, first_root)  # bad input is bad input, failures or not
    return sharp_tree(fab, gpus, first_root, alive=alive)


def _walk(t: Any, sn: Any, s: int, lid: int, target: int) -> list[tuple[int, int]] | None:
    """The (switch, port) hops from switch ``s`` to switch ``target`` along the LFTs."""
    S = sn.n_switches
    hops: list[tuple[int, int]] = []
    while s != target:
        if len(hops) > S:
            return None
        port = int(t.lft[s, lid]) if lid < t.lft.shape[1] else 255
        if port in (0, 255):
            return None
        hops.append((s, port))
        s = int(sn.peer[s, port])
        if not 0 <= s < S:
            return None
    return hops


def sharp_allreduce(fab: Fabric, gpus: np.ndarray, size_bytes: float,
                    failures: Any = None) -> dict[str, Any]:
    """An AllReduce of ``size_bytes`` per GPU over ``gpus`` with SHARP, on the flow
    engine: the time, the closed forms (SHARP and ring), the bytes on each host link and
    the trees (module doc). ``failures`` (as a scenario's, or a bool mask of live links):
    the trees are laid on the live fabric (:func:`live_trees`; :class:`SharpUnavailable`
    when they leave a GPU no tree)."""
    from aifabric.routing.failover import live_links
    from aifabric.sim.flow.engine import Paths, run_flow
    from aifabric.workload.dag import TransferDAG

    trees = live_trees(fab, gpus, alive=None if failures is None
                       else live_links(fab, failures))
    src_arc, _, cap = fab.arcs
    arcs_a, host_up_a = sharp_flow_arcs(fab, trees)
    host_up = host_up_a.tolist()
    links = fab.links
    n = len(arcs_a)
    size = float(size_bytes)
    lat = links.latency_ns[arcs_a // 2].astype(np.float64)
    paths = Paths(incidence=sp.csr_matrix((np.ones(n), (np.arange(n), arcs_a)),
                                          shape=(n, len(cap))),
                  conn_ptr=np.arange(n + 1, dtype=np.int64), latency_ns=lat,
                  capacity_gbps=np.asarray(cap, dtype=np.float64))
    # one stage: every link's share of the stream at once (pipelined aggregation)
    gid = np.asarray(gpus, dtype=np.int64)
    dag = TransferDAG(stage_kind=np.zeros(1, np.int8), repeat=np.ones(1, np.int64),
                      duration_ns=np.zeros(1), stage_job=np.zeros(1, np.int32),
                      stage_coll=np.full(1, -1, np.int32), stage_label=["sharp allreduce"],
                      xfer_ptr=np.array([0, n], np.int64), dep_ptr=np.zeros(2, np.int64),
                      dep_idx=np.zeros(0, np.int64), src=np.resize(gid, n),
                      dst=np.resize(np.roll(gid, 1), n), size_bytes=np.full(n, size))
    run = run_flow(dag, paths, np.arange(n, dtype=np.int64))
    time_ns = float(run.stage_end_ns[0] - run.stage_start_ns[0])
    k = len(gid)
    b_min = float(cap[arcs_a].min())
    closed_ns = size * 8 / b_min + float(lat.max())
    nic_gbps = float(cap[np.array(host_up)].min())
    ring_ns = 2 * (k - 1) / k * size * 8 / nic_gbps
    algbw = size * 8 / time_ns  # Gbit/s
    factor = 2 * (k - 1) / k
    host_bytes = run.arc_bytes[np.array(host_up)]
    return {
        "gpus": k, "size_bytes": size, "time_ns": time_ns, "closed_form_ns": closed_ns,
        "ring_closed_form_ns": ring_ns, "algbw_gbps": algbw, "busbw_gbps": algbw * factor,
        "ring_busbw_gbps": size * 8 / ring_ns * factor,
        "host_link_bytes_up": float(host_bytes.max()),
        "ring_host_link_bytes_up": factor * size,
        "trees": [{"rail": tr.rail, "root": str(fab.nodes.name[tr.root]),
                   "gpus": len(tr.gpus), "switch_links": len(tr.up_arcs),
                   "depth": tr.depth} for tr in trees],
        "max_link_bytes": float(run.arc_bytes.max()),
        "switch_nodes": int(sum(len(np.unique(src_arc[tr.up_arcs])) for tr in trees)),
    }


def sharp_flow_arcs(fab: Fabric, trees: list[SharpTree]) -> tuple[np.ndarray, np.ndarray]:
    """The arcs that each carry the buffer once in an AllReduce on ``trees``: every
    GPU's PCIe and host link both ways, every tree link both ways (one flow each; the
    stream is pipelined, so they all run at once); and the host links' up arcs."""
    links = fab.links
    pcie_all = np.flatnonzero(links.kind == LinkKind.PCIE)
    acc_all = np.flatnonzero(links.kind == LinkKind.ACCESS)
    host_up: list[int] = []
    arcs: list[int] = []
    for tr in trees:
        for g, nic in zip(tr.gpus, tr.nics, strict=True):
            pcie = int(pcie_all[(links.a[pcie_all] == g) & (links.b[pcie_all] == nic)][0])
            acc = int(acc_all[links.a[acc_all] == nic][0])
            host_up.append(2 * acc)
            arcs += [2 * pcie, 2 * acc, 2 * acc + 1, 2 * pcie + 1]
        arcs += tr.up_arcs.tolist() + (tr.up_arcs ^ 1).tolist()
    return np.array(arcs, dtype=np.int64), np.array(host_up, dtype=np.int64)


def tree_switches(fab: Fabric, tr: SharpTree) -> np.ndarray:
    """The switches of a tree: its leaves (the NICs' switches) and every switch its
    links touch."""
    src, dst, _ = fab.arcs
    links = fab.links
    leaves = [int(links.b[lk]) for lk in np.flatnonzero(
        (links.kind == LinkKind.ACCESS) & np.isin(links.a, tr.nics))]
    ends = np.concatenate([src[tr.up_arcs], dst[tr.up_arcs], np.array(leaves, np.int64)])
    return np.unique(ends[fab.is_switch[ends]])


def sharp_limits(fab: Fabric, per_op: list[list[SharpTree]], where: list[str],
                 used: tuple[dict[int, int], dict[int, int]] | None = None
                 ) -> list[Problem]:
    """What the switches refuse: a tree on a switch whose model does not aggregate
    (``switch_models.<model>.sharp``), more trees on a switch than its model holds
    (``sharp_trees``), more operations using a switch than it runs at once
    (``sharp_active_ops``; every SHARP collective of a scenario counts, as they may
    overlap). ``where[i]`` names operation i's field. ``used``: trees and operations per
    switch already held (by the jobs' DP AllReduces, :func:`sharp_usage`)."""
    problems: list[Problem] = []
    trees_on: dict[int, int] = dict(used[0]) if used else {}
    ops_on: dict[int, int] = dict(used[1]) if used else {}
    for i, trees in enumerate(per_op):
        mine: set[int] = set()
        for tr in trees:
            sws = tree_switches(fab, tr)
            bad = [int(x) for x in sws if not fab.switch_model(int(x)).sharp]
            if bad:
                name = fab.models[int(fab.nodes.model[bad[0]])][0]
                problems.append(Problem(f"switch_models.{name}.sharp", f"false: switch "
                                        f"{fab.nodes.name[bad[0]]} on the SHARP tree of "
                                        f"{where[i]} does not aggregate; allowed: true "
                                        "(an aggregation-capable switch model, e.g. "
                                        "NVIDIA Quantum-2), or another algorithm"))
                return problems
            for x in sws.tolist():
                trees_on[x] = trees_on.get(x, 0) + 1
            mine.update(sws.tolist())
        for x in mine:
            ops_on[x] = ops_on.get(x, 0) + 1
    for x, k in sorted(trees_on.items()):
        m = fab.switch_model(x)
        if k > m.sharp_trees:
            name = fab.models[int(fab.nodes.model[x])][0]
            problems.append(Problem(f"switch_models.{name}.sharp_trees", f"switch "
                                    f"{fab.nodes.name[x]} is on {k} SHARP trees; allowed: "
                                    f"at most {m.sharp_trees}"))
            return problems
    for x, k in sorted(ops_on.items()):
        m = fab.switch_model(x)
        limit = m.sharp_active_ops if m.sharp_active_ops is not None else m.ports
        if k > limit:
            name = fab.models[int(fab.nodes.model[x])][0]
            problems.append(Problem(f"switch_models.{name}.sharp_active_ops", f"switch "
                                    f"{fab.nodes.name[x]} takes part in {k} SHARP "
                                    f"operations at once; allowed: at most {limit}"))
            return problems
    return problems


def sharp_usage(fab: Fabric, per_op: list[list[SharpTree]]
                ) -> tuple[dict[int, int], dict[int, int], int | None]:
    """Trees and operations per switch (fabric node id) that the operations ``per_op``
    (each a list of trees: e.g. one DP group's AllReduce) hold, counted as
    :func:`sharp_limits` counts them; and the first switch of a tree whose model does not
    aggregate (None when every one does)."""
    trees_on: dict[int, int] = {}
    ops_on: dict[int, int] = {}
    for trees in per_op:
        mine: set[int] = set()
        for tr in trees:
            sws = tree_switches(fab, tr)
            for x in sws.tolist():
                if not fab.switch_model(x).sharp:
                    return trees_on, ops_on, x
                trees_on[x] = trees_on.get(x, 0) + 1
            mine.update(sws.tolist())
        for x in mine:
            ops_on[x] = ops_on.get(x, 0) + 1
    return trees_on, ops_on, None


def sharp_over(fab: Fabric, used: tuple[dict[int, int], dict[int, int]],
               add: tuple[dict[int, int], dict[int, int]]) -> str:
    """Why the switches cannot hold ``add`` on top of ``used`` (trees, operations per
    switch), naming the first switch over its model's ``sharp_trees`` or
    ``sharp_active_ops``; '' when they can."""
    for k, (what, field_) in enumerate((("trees", "sharp_trees"),
                                        ("operations", "sharp_active_ops"))):
        for x, n in sorted(add[k].items()):
            m = fab.switch_model(x)
            limit = getattr(m, field_)
            if limit is None:
                limit = m.ports
            total = used[k].get(x, 0) + n
            if total > limit:
                name = fab.models[int(fab.nodes.model[x])][0]
                return (f"switch {fab.nodes.name[x]} would hold {total} SHARP {what}, "
                        f"{name}'s {field_} is {limit}")
    return ""


def sharp_rows(dag: Any, sharp: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The transfers of the SHARP stages ``sharp`` (stage -> the arc each of its first
    transfers streams over, :func:`aifabric.sim.run._sharp_transfers`) and their arcs,
    in stage order."""
    if not sharp:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    st = sorted(sharp)
    idx = np.concatenate([int(dag.xfer_ptr[s]) + np.arange(len(sharp[s]), dtype=np.int64)
                          for s in st])
    arcs = np.concatenate([np.asarray(sharp[s], dtype=np.int64) for s in st])
    return idx, arcs


def without_sharp(dag: Any, sharp: dict[int, np.ndarray]) -> tuple[Any, np.ndarray]:
    """The DAG without the transfers of its SHARP stages (each streams over one arc of
    its tree and is not routed between GPUs), and the transfers it keeps: what the
    router routes, so that no GPU pair stands in for a tree arc there (nor in the packet
    run's ACK routes)."""
    from dataclasses import replace

    idx, _ = sharp_rows(dag, sharp)
    keep = np.ones(dag.n_transfers, dtype=bool)
    keep[idx] = False
    kept = np.flatnonzero(keep)
    per = np.bincount(dag.xfer_stage[kept], minlength=dag.n_stages)
    ptr = np.zeros(dag.n_stages + 1, dtype=np.int64)
    np.cumsum(per, out=ptr[1:])
    return replace(dag, xfer_ptr=ptr, src=dag.src[kept], dst=dag.dst[kept],
                   size_bytes=dag.size_bytes[kept]), kept


def sharp_transfer_names(fab: Fabric, arcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What each SHARP transfer on arc ``arcs[i]`` is, as the transfers table names it
    (``src_gpu``, ``dst_gpu``): the arc's two ends, a switch end as its aggregation unit
    ``<switch>/sharp`` (where the stream is reduced or replicated, as the packet level
    names the units): ``gpu -> nic`` and back (PCIe), ``nic -> leaf/sharp`` and back
    (the host link), ``leaf/sharp -> spine/sharp`` and back (a tree link)."""
    src, dst, _ = fab.arcs
    names = fab.nodes.name.astype(object)
    unit = np.where(fab.is_switch, "/sharp", "").astype(object)
    u, v = src[arcs], dst[arcs]
    return names[u] + unit[u], names[v] + unit[v]
