"""Where flows go: :func:`route` forwards every flow hop by hop, as the fabric's switches
would, and returns the path of each flow as rows of a sparse flow x arc matrix.

A path includes the hops inside the hosts: GPU -> PCIe -> NIC port -> ToR -> ... -> ToR
-> NIC port -> PCIe -> GPU. A cross-rail transfer first crosses NVLink in the source host
to the GPU of the destination's rail (PXN) when the fabric is rail-wired; a same-host
transfer stays on NVLink (GPU -> NVSwitch -> GPU). Each hop is computed for all flows at
once: the flows at a hop are grouped by (switch, destination class), each group's members
come from the :class:`~aifabric.routing.fib.Fib`, and the policy picks one (``ecmp``,
``source_port``, ``pinned``: per-flow hash; ``adaptive``: least loaded) or all
(``spray``: fluid split).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from aifabric.errors import Problem, SpecError
from aifabric.routing._paths import PathBuilder
from aifabric.routing.adaptive import choose_adaptive
from aifabric.routing.ecmp import choose_ecmp
from aifabric.routing.fib import Fib
from aifabric.routing.flows import FlowSet
from aifabric.routing.hashing import SwitchHasher, key_bytes
from aifabric.routing.ports import failover_ports, steer_source_ports
from aifabric.routing.spraying import spray_walk
from aifabric.spec.models import Routing
from aifabric.topology.fabric import Fabric

__all__ = ["Routed", "route"]


@dataclass(eq=False)
class Routed:
    """Flows with their paths.

    ``flows`` has the NIC port each flow really left on (after failover) and arrived on,
    and its UDP source port (steered by ``source_port``). Path ``i`` is
    ``arcs[ptr[i]:ptr[i+1]]`` in hop order with the fraction of the flow's bytes on each
    (1 along a single path; spraying splits). Arcs follow ``fabric.arcs``: ``2l`` is link
    ``l`` up, ``2l+1`` down.
    """

    fabric: Fabric
    policy: Routing
    flows: FlowSet
    ptr: np.ndarray
    arcs: np.ndarray
    frac: np.ndarray | None
    unreachable: np.ndarray  # bool per flow: no live path (its path is empty)
    moved: np.ndarray  # bool per flow: left on another NIC port than chosen (failover)
    alive: np.ndarray  # bool per link
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.flows)

    @property
    def n_arcs(self) -> int:
        return 2 * self.fabric.n_links

    @cached_property
    def entry_flow(self) -> np.ndarray:
        """The flow of every path entry."""
        return np.repeat(np.arange(len(self.flows)), np.diff(self.ptr))

    @property
    def fractions(self) -> np.ndarray:
        return np.ones(len(self.arcs)) if self.frac is None else self.frac

    @cached_property
    def incidence(self) -> sp.csr_matrix:
        """flows x arcs: the fraction of each flow's bytes on each arc."""
        return sp.csr_matrix((self.fractions, self.arcs.copy(), self.ptr.copy()),
                             shape=(len(self.flows), self.n_arcs))

    def path_arcs(self, i: int) -> np.ndarray:
        """Arc ids of flow ``i``'s path, in hop order."""
        return self.arcs[self.ptr[i]:self.ptr[i + 1]]

    def path_nodes(self, i: int) -> np.ndarray:
        """Node ids along flow ``i``'s path (single-path policies)."""
        a = self.path_arcs(i)
        if not len(a):
            return np.zeros(0, dtype=np.int64)
        src, dst, _ = self.fabric.arcs
        return np.r_[src[a[0]], dst[a]].astype(np.int64)

    def arc_bytes(self) -> np.ndarray:
        """Bytes on every arc."""
        w = self.fractions * self.flows.size_bytes[self.entry_flow]
        return np.bincount(self.arcs, weights=w, minlength=self.n_arcs)

    def arc_flows(self) -> np.ndarray:
        """Number of flows crossing every arc (a sprayed flow counts once per arc it uses)."""
        return np.bincount(self.arcs, minlength=self.n_arcs)

    def link_load(self, unit: str = "bytes") -> np.ndarray:
        """(links, 2) load per link direction [up, down], in ``bytes`` or ``flows``."""
        v = self.arc_bytes() if unit == "bytes" else self.arc_flows().astype(np.float64)
        return v.reshape(-1, 2)


def via_gpu(f: Fabric, hs, src: np.ndarray, rail: np.ndarray) -> np.ndarray:
    """The GPU of the source host on NIC ``rail`` that hands the data to that NIC."""
    nodes = f.nodes
    per = max(1, hs.G // hs.N)
    own = nodes.rail[src] == rail
    idx = rail * per + nodes.index[src] % per
    return np.where(own, src, hs.gpu[nodes.host[src], np.minimum(idx, hs.G - 1)])


def route(fabric: Fabric, flows: FlowSet, policy: Routing | None = None, *,
          failures: Any = None, seed: int = 0,
          pinned: tuple[np.ndarray, np.ndarray] | None = None) -> Routed:
    """Route ``flows`` through ``fabric`` with ``policy`` (default ``fabric.spec.routing``).

    Parameters
    ----------
    failures : None, a bool mask of live links, or a list of
        :class:`~aifabric.routing.failover.Failure`: ECMP groups are recomputed from the
        live links; a QP whose NIC port is down (or cannot reach the destination) moves to
        the NIC's other port (``Routed.moved``); flows with no live path are
        ``Routed.unreachable``.
    seed : reserved for randomised tie-breaking (all current policies are deterministic
        given the spec's hash seed).
    pinned : for ``policy: pinned``, explicit switch paths as ``(ptr, nodes)``: flow ``i``
        follows ``nodes[ptr[i]:ptr[i+1]]`` (source ToR ... destination ToR); flows with an
        empty entry are hashed like ``ecmp``.
    """
    from aifabric.routing.failover import live_links

    f = fabric
    pol = policy or f.spec.routing
    del seed
    ib_ar = pinned is None and getattr(f.spec, "transport", "roce") == "infiniband" and \
        f.spec.infiniband.adaptive_routing
    if ib_ar:  # InfiniBand AR (routing/infiniband.py): a fluid split over least-hop paths
        pol = pol.model_copy(update={"policy": "spray"})
    alive = live_links(f, failures)
    fib = Fib(f, alive)
    hs = fib.hs
    n = len(flows)
    src, dst = flows.src_gpu, flows.dst_gpu
    sh = f.nodes.host[src].astype(np.int64)
    dh = f.nodes.host[dst].astype(np.int64)
    net = (sh != dh) & (flows.src_nic >= 0)
    unreachable = np.zeros(n, dtype=bool)
    src_nic, moved, lv = _sending_ports(f, fib, flows, sh, dh, np.flatnonzero(net),
                                        unreachable)
    out_flows = flows.replace(src_nic=src_nic)
    ib = pinned is None and getattr(f.spec, "transport", "roce") == "infiniband" and \
        not ib_ar
    if ib:  # InfiniBand: each flow follows the subnet manager's LFTs (routing/infiniband)
        from aifabric.routing.infiniband import lft_paths

        pinned = lft_paths(f, src_nic, flows.dst_nic, flows.qp, alive)
    keys = key_bytes(out_flows.hash_columns(), pol.hash_fields)
    hasher = SwitchHasher.build(keys, pol.hash, pol.seed, pol.seed_mode, f.n_nodes)
    info: dict[str, Any] = {}
    # only flows that can go anywhere from here on
    ni, cls, dnn, via, _ = lv
    tor0 = hs.access_tor[src_nic[ni]]
    if pol.policy == "source_port":
        out_flows, info["source_ports_unmatched"] = _steer(f, fib, hasher, pol, out_flows,
                                                           ni, tor0, cls)
    pb = PathBuilder(n)
    _add_host_arcs(f, pb, src, dst, net, ni, via, hs)
    dst_nic = flows.dst_nic.copy()
    max_hops = 2 * int(fib.tier.max() if len(fib.tier) else 1) + 2
    if pol.policy == "spray" and not ib:
        delivered = _spray(fib, pb, n, lv, sh[ni], dst[ni], dst_nic, max_hops)
    else:
        pcie = hs.pcie_link(via, src_nic[ni], f.n_nodes)
        pb.add(ni, 2 * pcie)
        pb.add(ni, 2 * hs.access_link[src_nic[ni]])
        delivered = _walk(fib, pb, pol, hasher, out_flows, ni, tor0, cls, dnn, dst_nic,
                          max_hops, pinned if pol.policy == "pinned" or ib else None)
    unreachable[ni[~delivered[ni]]] = True
    ptr, arcs, frac = _drop_unreachable(*pb.build(), unreachable, alive)
    out_flows = out_flows.replace(dst_nic=dst_nic)
    if ib or ib_ar:
        ibs = f.spec.infiniband
        info["infiniband"] = {"engine": ibs.routing_engine, "lmc": ibs.lmc,
                              "adaptive_routing": ibs.adaptive_routing}
    return Routed(f, pol, out_flows, ptr, arcs, frac, unreachable, moved, alive, info)


def _sending_ports(f: Fabric, fib: Fib, flows: FlowSet, sh: np.ndarray, dh: np.ndarray,
                   ni: np.ndarray, unreachable: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """The NIC port each flow leaving its host (``ni``) sends on: its own, or, when that
    port is down or cannot reach the destination, the NIC's other port. Returns every
    flow's sending port (``src_nic``), which flows moved, and for the flows that can
    leave (the others are marked in ``unreachable``): their indices, destination NIC class,
    destination (host, rail) key, the GPU whose NIC sends (PXN) and its rail."""
    hs = fib.hs
    nodes = f.nodes
    n = len(flows)
    s_rail = nodes.rail[flows.src_nic[ni]].astype(np.int64)
    s_side = nodes.side[flows.src_nic[ni]].astype(np.int64)
    d_rail = nodes.rail[flows.dst_nic[ni]].astype(np.int64)
    dnn = dh[ni] * hs.N + d_rail
    cls = fib.nic_class[dnn]
    via = via_gpu(f, hs, flows.src_gpu[ni], s_rail)
    port_node, ok = failover_ports(fib, sh[ni], s_rail, s_side, via, cls)
    src_nic = flows.src_nic.copy()
    src_nic[ni[ok]] = port_node[ok]
    moved = np.zeros(n, dtype=bool)
    moved[ni] = ok & (port_node != flows.src_nic[ni])
    unreachable[ni[~ok]] = True
    return src_nic, moved, (ni[ok], cls[ok], dnn[ok], via[ok], s_rail[ok])


def _steer(f: Fabric, fib: Fib, hasher: SwitchHasher, pol: Routing, flows: FlowSet,
           ni: np.ndarray, tor0: np.ndarray, cls: np.ndarray) -> tuple[FlowSet, Any]:
    """``policy: source_port``: the UDP source port of each flow that leaves its ToR
    (``ni``, first ToR ``tor0``) chosen so that the switches' hashes take the path its
    port slot names; ``hasher`` rehashed with them. Returns the flows with those ports and
    what could not be matched."""
    hs = fib.hs
    up = ~fib.delivers(tor0, cls)
    slot = f.links.b_port[hs.access_link[flows.src_nic[ni[up]]]]
    sport, unmatched = steer_source_ports(
        fib, hasher, pol, flows.hash_columns(), flows.sport, ni[up], tor0[up],
        cls[up], slot)
    flows = flows.replace(sport=sport)
    hasher.base = SwitchHasher.build(key_bytes(flows.hash_columns(), pol.hash_fields),
                                     pol.hash, pol.seed, pol.seed_mode, 1).base
    return flows, unmatched


def _add_host_arcs(f: Fabric, pb: PathBuilder, src: np.ndarray, dst: np.ndarray,
                   net: np.ndarray, ni: np.ndarray, via: np.ndarray, hs: Any) -> None:
    """The hops inside hosts before the NIC: NVLink only for flows that stay on their host
    (not ``net``); NVLink to the rail's GPU (PXN) for the flows ``ni`` that send from
    another GPU's NIC (``via``)."""
    li = np.flatnonzero(~net)
    for arcs in hs.gpu_gpu_arcs(src[li], dst[li], f.n_nodes):
        pb.add(li, arcs)
    hop = via != src[ni]
    if hop.any():
        for arcs in hs.gpu_gpu_arcs(src[ni[hop]], via[hop], f.n_nodes):
            pb.add(ni[hop], arcs)


def _spray(fib: Fib, pb: PathBuilder, n: int, lv: tuple[np.ndarray, ...], sh: np.ndarray,
           dst: np.ndarray, dst_nic: np.ndarray, max_hops: int) -> np.ndarray:
    """``policy: spray``: every flow of ``lv`` (see :func:`_sending_ports`; ``sh``,
    ``dst``: their source hosts and destination GPUs) sprayed over all its shortest
    paths; a flow arrives on the destination port of its last share (set in
    ``dst_nic``). Which of the ``n`` flows were delivered."""
    ni, cls, dnn, via, s_rail = lv
    dfl, dport, dw = spray_walk(fib, pb, ni, via, sh, s_rail, cls, dnn, dst, max_hops)
    o = np.lexsort((dw, dfl))
    last = np.r_[np.flatnonzero(dfl[o][1:] != dfl[o][:-1]), len(o) - 1] if len(o) else o
    dst_nic[dfl[o][last]] = dport[o][last]
    delivered = np.zeros(n, dtype=bool)
    delivered[dfl] = True
    return delivered


def _drop_unreachable(ptr: np.ndarray, arcs: np.ndarray, frac: np.ndarray | None,
                      unreachable: np.ndarray, alive: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The paths (CSR ``ptr``, ``arcs``, ``frac``) without those of unreachable flows; a
    path through a dead link (e.g. a failed NVLink or host) is no path, and its flow is
    marked in ``unreachable`` too."""
    n = len(ptr) - 1
    bad = np.zeros(n, dtype=bool)
    if not alive.all():
        ent = np.repeat(np.arange(n), np.diff(ptr))
        bad[ent[~alive[arcs // 2]]] = True
    unreachable |= bad
    if unreachable.any():
        keep = ~unreachable[np.repeat(np.arange(n), np.diff(ptr))]
        arcs = arcs[keep]
        frac = frac[keep] if frac is not None else None
        counts = np.where(unreachable, 0, np.diff(ptr))
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
    return ptr, arcs, frac


def _walk(fib: Fib, pb: PathBuilder, pol: Routing, hasher: SwitchHasher, flows: FlowSet,
          fl: np.ndarray, cur: np.ndarray, cls: np.ndarray, dnn: np.ndarray,
          dst_nic: np.ndarray, max_hops: int,
          pinned: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Forward single-path flows hop by hop from their ToR; returns delivered (per flow)."""
    f = fib.fabric
    hs = fib.hs
    delivered = np.zeros(len(flows), dtype=bool)
    arc_dst = fib.arc_dst
    C1 = fib.n_classes + 1
    desc = np.zeros(len(fl), dtype=bool)
    load = np.zeros(2 * f.n_links) if pol.policy == "adaptive" else None
    size = flows.size_bytes.astype(np.float64)
    pin_next = None
    if pinned is not None:
        pin_next = _pinned_plan(fib, flows, pinned, fl, cur, cls)
    for hop in range(max_hops):
        if not len(fl):
            break
        dl = fib.delivers(cur, cls)
        if pin_next is not None:
            dl &= pin_next(fl, hop) < 0
        if dl.any():
            arc = fib.deliver_arc(dnn[dl], cur[dl])
            port = arc_dst[arc]
            pcie = hs.pcie_link(flows.dst_gpu[fl[dl]], port, f.n_nodes)
            pb.add(fl[dl], arc)
            pb.add(fl[dl], 2 * pcie + 1)
            dst_nic[fl[dl]] = port
            delivered[fl[dl]] = True
            keep = ~dl
            fl, cur, cls, dnn, desc = fl[keep], cur[keep], cls[keep], dnn[keep], desc[keep]
        if not len(fl):
            break
        key = (cur * C1 + cls) * 2 + desc
        uniq, pair = np.unique(key, return_inverse=True)
        start, count, arcs = fib.members(uniq // 2 // C1, (uniq // 2) % C1,
                                         (uniq % 2).astype(bool))
        go = count[pair] > 0
        if pin_next is not None:
            go |= pin_next(fl, hop) >= 0
        fl, cur, cls, dnn, desc, pair = fl[go], cur[go], cls[go], dnn[go], desc[go], pair[go]
        if not len(fl):
            break
        if pol.policy == "adaptive":
            assert load is not None
            arc = choose_adaptive(load, size, fl, start, count, arcs, pair)
        else:
            arc = np.full(len(fl), -1, dtype=np.int64)
            free = np.ones(len(fl), dtype=bool)
            if pin_next is not None:
                nxt = pin_next(fl, hop)
                pin = nxt >= 0
                arc[pin] = _arc_to(fib, hasher, fl[pin], cur[pin], nxt[pin])
                free = ~pin
            if free.any():
                arc[free] = choose_ecmp(hasher, pol, fl[free], cur[free], start, count, arcs,
                                        pair[free])
        pb.add(fl, arc)
        cur = arc_dst[arc]
        desc = desc | (arc % 2 == 1)
    return delivered


def _arc_to(fib: Fib, hasher: SwitchHasher, fl: np.ndarray, u: np.ndarray, v: np.ndarray
            ) -> np.ndarray:
    """A live arc from ``u`` to ``v`` (parallel links: by the switch's hash)."""
    up_cnt = fib.up_ptr[u + 1] - fib.up_ptr[u]
    dn_cnt = fib.dn_ptr[u + 1] - fib.dn_ptr[u]
    cnt = up_cnt + dn_cnt
    rep = np.repeat(np.arange(len(u)), cnt)
    k = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    isup = k < up_cnt[rep]
    cand = np.where(isup, fib.up_arc[np.minimum(fib.up_ptr[u][rep] + k, len(fib.up_arc) - 1)],
                    fib.dn_arc[np.minimum(fib.dn_ptr[u][rep] + k - up_cnt[rep],
                                          max(len(fib.dn_arc) - 1, 0))])
    m = fib.arc_dst[cand] == v[rep]
    owner, cand = rep[m], cand[m]
    ptr = np.zeros(len(u) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=len(u)), out=ptr[1:])
    n = ptr[1:] - ptr[:-1]
    out = np.full(len(u), -1, dtype=np.int64)
    has = n > 0
    h = hasher.at(fl[has], u[has]).astype(np.int64)
    out[has] = cand[ptr[:-1][has] + h % n[has]]
    return out


def _pinned_plan(fib: Fib, flows: FlowSet, pinned: tuple[np.ndarray, np.ndarray],
                 fl: np.ndarray, tor0: np.ndarray, cls: np.ndarray):
    """Check explicit paths and return ``next_node(flows, hop)`` (-1: no pin / last hop)."""
    f = fib.fabric
    pptr, pnodes = pinned
    pptr = np.asarray(pptr, dtype=np.int64)
    pnodes = np.asarray(pnodes, dtype=np.int64)
    if len(pptr) != len(flows) + 1:
        raise SpecError(Problem("pinned", f"needs {len(flows) + 1} offsets, got {len(pptr)}"))
    length = pptr[1:] - pptr[:-1]
    has = length[fl] > 0
    problems = []
    first = pnodes[np.minimum(pptr[fl], len(pnodes) - 1)] if len(pnodes) else fl * 0
    last = pnodes[np.maximum(pptr[fl + 1] - 1, 0)] if len(pnodes) else fl * 0
    bad_first = has & (first != tor0)
    if bad_first.any():
        i = int(fl[np.flatnonzero(bad_first)[0]])
        problems.append(Problem(f"flows.{i}.path", f"starts at {f.nodes.name[first[bad_first][0]]}"
                                f"; allowed: the source NIC's ToR "
                                f"{f.nodes.name[tor0[bad_first][0]]}"))
    row_last = fib.sw_row[last]
    bad_last = has & ~((row_last >= 0) & fib.delivers(np.where(row_last >= 0, last, tor0), cls))
    if bad_last.any():
        i = int(fl[np.flatnonzero(bad_last)[0]])
        problems.append(Problem(f"flows.{i}.path", "must end at a live ToR of the destination "
                                "NIC"))
    # consecutive nodes joined by a live link, up then down (valley-free)
    if has.any():
        rows = np.repeat(fl[has], length[fl[has]] - 1)
        k = np.arange(len(rows)) - np.repeat(np.cumsum(length[fl[has]] - 1)
                                             - (length[fl[has]] - 1), length[fl[has]] - 1)
        u = pnodes[pptr[rows] + k]
        v = pnodes[pptr[rows] + k + 1]
        tu, tv = f.nodes.tier[u], f.nodes.tier[v]
        step_ok = (np.abs(tu.astype(int) - tv) == 1) & f.is_switch[u] & f.is_switch[v]
        ok = np.zeros(len(u), dtype=bool)
        if step_ok.any():
            arcs = _arc_to(fib, SwitchHasher("crc32", np.zeros(len(flows), np.uint32),
                                             np.zeros(f.n_nodes, np.uint32),
                                             np.zeros(f.n_nodes, np.uint32)),
                           rows[step_ok], u[step_ok], v[step_ok])
            ok[step_ok] = arcs >= 0
        if (~ok).any():
            j = int(np.flatnonzero(~ok)[0])
            problems.append(Problem(f"flows.{int(rows[j])}.path",
                                    f"no live link from {f.nodes.name[u[j]]} to "
                                    f"{f.nodes.name[v[j]]}"))
        up = tv > tu
        # a valley: an up step after a down step of the same path
        seen_down = np.zeros(len(up), dtype=bool)
        if len(up):
            grp_start = np.r_[True, rows[1:] != rows[:-1]]
            cum = np.cumsum(~up)
            base = np.maximum.accumulate(np.where(grp_start, cum - (~up), 0))
            seen_down = (cum - (~up) - base) > 0
        valley = up & seen_down
        if valley.any():
            j = int(np.flatnonzero(valley)[0])
            problems.append(Problem(f"flows.{int(rows[j])}.path", "goes down then up "
                                    "(a valley); allowed: up hops, then down hops"))
    if problems:
        raise SpecError(problems)

    def next_node(flow_ids: np.ndarray, hop: int) -> np.ndarray:
        L = length[flow_ids]
        ok = hop + 1 < L
        out = np.full(len(flow_ids), -1, dtype=np.int64)
        out[ok] = pnodes[pptr[flow_ids[ok]] + hop + 1]
        return out

    return next_node
