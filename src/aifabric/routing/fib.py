"""Forwarding tables: every switch's ECMP groups toward every destination, computed from
the Fabric and the set of live links, as BGP in a Clos (RFC 7938) would install them.

A destination is a NIC (one /32, shared by its ports). The NICs reached through the same
set of live ToRs form one *destination class*: a single-ToR NIC's class is its ToR, a
dual-ToR NIC's class is its ToR pair (or the surviving ToR after a failure).

Routes are valley-free (up, then down, never down then up): a switch that has a path
*down* to the class forwards down, over every down-link whose switch also has one;
otherwise it forwards up, over every up-link whose switch is one hop closer along a
valley-free path. As in eBGP, a path never crosses two switches of one ASN: an agg that
lost its down path to a class its ASN group (the aggs of its pod and plane) still reaches
has no route to it, so the switches below stop using it. Members of a group are kept in
the switch's port order (the order an ASIC's next-hop group is programmed in), so
``hash mod n = i`` means "the i-th port".
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from aifabric.routing.hostside import host_side
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["INF", "Fib"]

#: distance of an unreachable destination
INF = np.int16(10_000)


def _csr(owner: np.ndarray, order_key: np.ndarray, values: np.ndarray, n: int
         ) -> tuple[np.ndarray, np.ndarray]:
    o = np.lexsort((order_key, owner))
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=ptr[1:])
    return ptr, values[o]


class Fib:
    """The ECMP groups of every switch of ``fabric`` with ``alive`` links (bool per link).

    Attributes
    ----------
    nic_class : class of every NIC (``host * N + rail``), -1 when none of its ports is live.
    reach : bool (switches, classes): the switch has a down path to the class.
    dist : int16 (switches, classes): valley-free hops to a ToR of the class
        (:data:`INF` if none).
    """

    def __init__(self, fabric: Fabric, alive: np.ndarray | None = None):
        f = self.fabric = fabric
        links, nodes = f.links, f.nodes
        n = f.n_nodes
        self.alive = np.ones(len(links), dtype=bool) if alive is None else alive
        hs = self.hs = host_side(f)
        sw = np.flatnonzero(f.is_switch)
        self.sw = sw
        self.sw_row = np.full(n, -1, dtype=np.int64)
        self.sw_row[sw] = np.arange(len(sw))
        self.tier = nodes.tier[sw].astype(np.int64)
        lid = np.arange(len(links), dtype=np.int64)
        net = ((links.kind == LinkKind.LEAF_SPINE) | (links.kind == LinkKind.SPINE_CORE)) \
            & self.alive
        a, b = links.a[net].astype(np.int64), links.b[net].astype(np.int64)
        self.up_ptr, self.up_arc = _csr(a, links.a_port[net], 2 * lid[net], n)
        self.dn_ptr, self.dn_arc = _csr(b, links.b_port[net], 2 * lid[net] + 1, n)
        self.arc_dst = f.arcs[1].astype(np.int64)
        # destination classes: the sorted live ToRs of every NIC
        H = hs.nic_port.shape[0]
        ports = hs.nic_port.reshape(H * hs.N, hs.P)
        acc = hs.access_link[ports]
        ok = (acc >= 0) & self.alive[np.maximum(acc, 0)]
        tor = np.where(ok, hs.access_tor[ports], -1)
        tor.sort(axis=1)
        rows, inv = np.unique(tor, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        empty = (rows < 0).all(axis=1)
        cls_of_row = np.cumsum(~empty) - 1
        self.nic_class = np.where(empty[inv], -1, cls_of_row[inv])
        rows = rows[~empty]
        C = self.n_classes = len(rows)
        S = len(sw)
        reach = np.zeros((S, C), dtype=bool)
        cls_i, col = np.nonzero(rows >= 0)
        reach[self.sw_row[rows[cls_i, col]], cls_i] = True
        # down adjacency between switches (rows: upper switch, cols: lower), parallel links count
        self.down_adj = sp.csr_matrix(
            (np.ones(len(a)), (self.sw_row[b], self.sw_row[a])), shape=(S, S))
        self.down_adj.sum_duplicates()
        top = int(self.tier.max()) if S else 1
        for _ in range(top - 1):
            reach |= (self.down_adj @ reach.astype(np.float32)) > 0
        self.reach = reach
        # BGP loop prevention: the aggs of one pod and plane/group share an ASN (RFC 7938,
        # see configs.addressing). An agg with no down path to a class that another agg of
        # its ASN reaches down would only hear the route through its own ASN: it has none.
        agg = nodes.kind[sw] == NodeKind.AGG
        blocked = np.zeros((S, C), dtype=bool)
        if agg.any():
            key = np.stack([nodes.pod[sw[agg]], nodes.plane[sw[agg]], nodes.group[sw[agg]]])
            _, gid = np.unique(key, axis=1, return_inverse=True)
            gid = gid.reshape(-1)
            group_reach = np.zeros((int(gid.max()) + 1, C), dtype=bool)
            np.logical_or.at(group_reach, gid, reach[agg])
            blocked[agg] = group_reach[gid] & ~reach[agg]
        self.blocked = blocked
        dist = np.where(reach, (self.tier - 1)[:, None], INF).astype(np.int16)
        up_adj = self.down_adj.T.tocsr()
        self.up_adj = up_adj
        for t in range(top - 1, 0, -1):  # tiers below the top, from the top down
            rows_t = self.tier == t
            if not rows_t.any():
                continue
            best = np.full((int(rows_t.sum()), C), INF, dtype=np.int16)
            sub = up_adj[rows_t]
            for v in np.unique(dist[self.tier == t + 1]):
                if v >= INF:
                    continue
                has = (sub @ (dist == v).astype(np.float32)) > 0
                best = np.where(has & (best >= INF), v + 1, best)
            best = np.where(blocked[rows_t], INF, best)
            dist[rows_t] = np.where(reach[rows_t], dist[rows_t], best)
        self.dist = dist
        # up_full[s, c]: every uplink of s leads one hop closer to c (the usual up group)
        deg = np.asarray(up_adj.sum(axis=1)).ravel()
        good = np.zeros(dist.shape, dtype=np.float32)
        for v in np.unique(dist[dist < INF]):
            lvl = (up_adj @ (dist == v).astype(np.float32))
            good += np.where(dist == v + 1, lvl, 0.0)
        self.up_full = (good >= deg[:, None]) & (deg[:, None] > 0)
        self.rows = rows  # (C, P) ToRs of each class (-1 padded)
        self._paths: np.ndarray | None = None

    # ----------------------------------------------------------------- lookups
    def nic_no(self, port: np.ndarray) -> np.ndarray:
        """NIC number (``host * N + rail``) of NIC port nodes."""
        nodes = self.fabric.nodes
        return nodes.host[port].astype(np.int64) * self.hs.N + nodes.rail[port]

    def deliver_arc(self, nic_no: np.ndarray, tor: np.ndarray) -> np.ndarray:
        """The live down access arc from ``tor`` to its port of NIC ``nic_no`` (-1 if none)."""
        hs = self.hs
        ports = hs.nic_port.reshape(-1, hs.P)[nic_no]
        out = np.full(len(nic_no), -1, dtype=np.int64)
        for k in range(hs.P):  # the NIC's ports (1-2): not a loop over flows
            port = ports[:, k]
            acc = hs.access_link[port]
            hit = (acc >= 0) & (hs.access_tor[port] == tor) & self.alive[np.maximum(acc, 0)]
            out[hit] = 2 * acc[hit] + 1
        return out

    def delivers(self, node: np.ndarray, cls: np.ndarray) -> np.ndarray:
        """True where switch ``node`` is a ToR of class ``cls`` (it delivers directly)."""
        row = self.sw_row[node]
        return (self.fabric.nodes.kind[node] == NodeKind.TOR) & self.reach[row, cls]

    def reachable(self, node: np.ndarray, cls: np.ndarray) -> np.ndarray:
        """True where class ``cls`` can be reached from switch ``node``."""
        ok = (node >= 0) & (cls >= 0)
        out = np.zeros(len(node), dtype=bool)
        row = self.sw_row[node[ok]]
        out[ok] = self.dist[row, cls[ok]] < INF
        return out

    def members(self, node: np.ndarray, cls: np.ndarray, descended: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ECMP groups of switches ``node[i]`` toward classes ``cls[i]``.

        Returns ``(start, count, arcs)``: the members of pair ``i`` are
        ``arcs[start[i]:start[i] + count[i]]``, in port order. A group made of all of a
        switch's uplinks (the common case) points into the shared uplink list instead of
        being copied. A pair that must go up after having gone down (``descended``) gets
        no member: valley routes are never installed.
        """
        m = len(node)
        row = self.sw_row[node]
        down = self.reach[row, cls]
        up_ok = ~down & (self.dist[row, cls] < INF)
        if descended is not None:
            up_ok &= ~descended
        full = up_ok & self.up_full[row, cls]
        start = np.zeros(m, dtype=np.int64)
        count = np.zeros(m, dtype=np.int64)
        start[full] = self.up_ptr[node[full]]
        count[full] = self.up_ptr[node[full] + 1] - self.up_ptr[node[full]]
        part = np.flatnonzero((down | up_ok) & ~full)
        if not len(part):
            return start, count, self.up_arc
        pn, pc, pdown = node[part], cls[part], down[part]
        lo = np.where(pdown, self.dn_ptr[pn], self.up_ptr[pn])
        hi = np.where(pdown, self.dn_ptr[pn + 1], self.up_ptr[pn + 1])
        cnt = hi - lo
        rep = np.repeat(np.arange(len(part)), cnt)
        pos = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt) + lo[rep]
        d = pdown[rep]
        arcs = np.empty(len(rep), dtype=np.int64)
        arcs[d] = self.dn_arc[pos[d]]
        arcs[~d] = self.up_arc[pos[~d]]
        nxt = self.sw_row[self.arc_dst[arcs]]
        c = pc[rep]
        keep = np.where(d, self.reach[nxt, c],
                        self.dist[nxt, c] == self.dist[row[part][rep], c] - 1)
        arcs, owner = arcs[keep], rep[keep]
        kept = np.bincount(owner, minlength=len(part))
        count[part] = kept
        start[part] = len(self.up_arc) + np.cumsum(kept) - kept
        return start, count, np.concatenate([self.up_arc, arcs])

    # ------------------------------------------------------------------ spray
    @property
    def paths(self) -> np.ndarray:
        """float64 (switches, classes): equal-cost valley-free paths from a switch to the
        class (each parallel link is a path of its own; a ToR of the class has 1)."""
        if self._paths is not None:
            return self._paths
        reach, dist, tier = self.reach, self.dist, self.tier
        top = int(tier.max()) if len(tier) else 1
        paths = np.zeros(reach.shape)
        paths[(tier == 1)[:, None] & reach] = 1.0
        for t in range(2, top + 1):
            rows_t = tier == t
            val = self.down_adj[rows_t] @ (paths * reach)
            paths[rows_t] = np.where(reach[rows_t], val, 0.0)
        for t in range(top - 1, 0, -1):
            rows_t = tier == t
            if not rows_t.any():
                continue
            sub = self.up_adj[rows_t]
            dt = dist[rows_t]
            acc = np.zeros(dt.shape)
            for v in np.unique(dt[~reach[rows_t] & (dt < INF)]):
                val = sub @ (paths * (dist == v - 1))
                acc = np.where(dt == v, val, acc)
            paths[rows_t] = np.where(reach[rows_t], paths[rows_t], acc)
        self._paths = paths
        return paths
