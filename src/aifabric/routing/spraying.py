"""Packet spraying: every packet of a flow may take any equal-cost path, so (as a fluid)
the flow is split evenly over *every* equal-cost path from its NIC to its destination.

A switch sends each next hop the share of the flow that the number of equal-cost paths
behind it commands (``Fib.paths``), so every end-to-end path carries ``1/k`` of the
flow's bytes; a dual-port NIC sprays over its usable ports the same way (host-side
spraying varies the entropy per packet). The walk keeps one state per (flow, switch) and
merges the states that meet, hop by hop, for all flows at once.
"""

from __future__ import annotations

import numpy as np

from aifabric.routing._paths import PathBuilder
from aifabric.routing.fib import Fib

__all__ = ["spray_walk"]


def spray_walk(fib: Fib, builder: PathBuilder, fl: np.ndarray, via_gpu: np.ndarray,
               host: np.ndarray, rail: np.ndarray, cls: np.ndarray, dst_nic_no: np.ndarray,
               dst_gpu: np.ndarray, max_hops: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spray flows ``fl`` (leaving NIC ``(host, rail)`` from GPU ``via_gpu``) toward class
    ``cls``. Appends every arc with its fraction to ``builder``.

    Returns ``(delivered_flow, delivered_port, fraction)`` of every delivery and the
    flows that found no path (bool per entry of ``fl``).
    """
    f = fib.fabric
    hs = fib.hs
    n = f.n_nodes
    # source: every usable NIC port, weighted by the equal-cost paths behind its ToR
    weights, nodes_p = [], []
    for k in range(hs.P):  # the NIC's ports (1-2), not a loop over flows
        node = hs.nic_port[host, rail, k]
        acc = hs.access_link[node]
        pcie = hs.pcie_link(via_gpu, node, n)
        ok = (acc >= 0) & (pcie >= 0)
        ok &= fib.alive[np.maximum(acc, 0)] & fib.alive[np.maximum(pcie, 0)]
        tor = np.where(ok, hs.access_tor[node], 0)
        row = fib.sw_row[tor]
        w = np.where(ok & (row >= 0), fib.paths[np.maximum(row, 0), cls], 0.0)
        weights.append(w)
        nodes_p.append(node)
    W = np.stack(weights, axis=1)
    total = W.sum(axis=1)
    stuck = total <= 0
    W = W / np.where(stuck, 1.0, total)[:, None]
    s_fl, s_node, s_w, s_cls, s_dnn, s_gpu = [], [], [], [], [], []
    for k in range(hs.P):
        use = W[:, k] > 0
        port = nodes_p[k][use]
        pcie = hs.pcie_link(via_gpu[use], port, n)
        builder.add(fl[use], 2 * pcie, W[use, k], unique=False)
        builder.add(fl[use], 2 * hs.access_link[port], W[use, k], unique=False)
        s_fl.append(fl[use])
        s_node.append(hs.access_tor[port])
        s_w.append(W[use, k])
        s_cls.append(cls[use])
        s_dnn.append(dst_nic_no[use])
        s_gpu.append(dst_gpu[use])
    sf, sn, sw = np.concatenate(s_fl), np.concatenate(s_node), np.concatenate(s_w)
    sc, sd, sg = np.concatenate(s_cls), np.concatenate(s_dnn), np.concatenate(s_gpu)
    sf, sn, sw, sc, sd, sg = _merge(sf, sn, sw, sc, sd, sg, n=n)
    dfl, dport, dw = [], [], []
    arc_dst = fib.arc_dst
    C1 = fib.n_classes + 1
    for _ in range(max_hops):
        if not len(sf):
            break
        dl = fib.delivers(sn, sc)
        if dl.any():
            arc = fib.deliver_arc(sd[dl], sn[dl])
            port = arc_dst[arc]
            pcie = hs.pcie_link(sg[dl], port, n)
            builder.add(sf[dl], arc, sw[dl], unique=False)
            builder.add(sf[dl], 2 * pcie + 1, sw[dl], unique=False)
            dfl.append(sf[dl])
            dport.append(port)
            dw.append(sw[dl])
            keep = ~dl
            sf, sn, sw, sc, sd, sg = sf[keep], sn[keep], sw[keep], sc[keep], sd[keep], sg[keep]
        if not len(sf):
            break
        uniq, pair = np.unique(sn * C1 + sc, return_inverse=True)
        start, count, arcs = fib.members(uniq // C1, uniq % C1)
        cnt = count[pair]
        rep = np.repeat(np.arange(len(sf)), cnt)
        pos = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt) + start[pair][rep]
        arc = arcs[pos]
        nxt = arc_dst[arc]
        pw = fib.paths[fib.sw_row[nxt], sc[rep]] / fib.paths[fib.sw_row[sn[rep]], sc[rep]]
        w = sw[rep] * pw
        builder.add(sf[rep], arc, w, unique=False)
        sf, sn, sw, sc, sd, sg = _merge(sf[rep], nxt, w, sc[rep], sd[rep], sg[rep], n=n)
    return (np.concatenate(dfl) if dfl else np.zeros(0, np.int64),
            np.concatenate(dport) if dport else np.zeros(0, np.int64),
            np.concatenate(dw) if dw else np.zeros(0))


def _merge(fl, node, w, *rest, n):
    """One state per (flow, node): weights of states that meet are summed."""
    key = fl.astype(np.int64) * n + node
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    wsum = np.bincount(inv, weights=w, minlength=len(uniq))
    return (fl[first], node[first], wsum, *(r[first] for r in rest))
