"""Host-side choices: which NIC port a QP leaves on after a failure, and which UDP source
port it uses when the host steers it (``source_port`` policy).

``source_port`` is host-network co-design as in HPN's disjoint-path selection and Tencent
TCCL's hash-orthogonal ports: the host knows the switches' hash function and seed and
reads its ToR's ECMP group (at most 60 uplinks in HPN), so it can search the UDP source
port of each QP until the ToR's hash picks the uplink it wants. The flows leaving a ToR
through the same ECMP group are numbered in the order of their ToR port (the host's slot
under the ToR, which each host knows) and of their QP, and flow ``r`` aims at member
``r mod n``: every uplink gets ``floor`` or ``ceil`` of its share, the least possible.
Beyond the ToR the ordinary hash decides (in HPN's dual-plane pod, the uplink fixes the
whole path).
"""

from __future__ import annotations

import numpy as np

from aifabric.routing.adaptive import _group_keys
from aifabric.routing.fib import Fib
from aifabric.routing.hashing import SwitchHasher, key_bytes, select_member
from aifabric.spec.models import Routing

__all__ = ["SPORT_BASE", "failover_ports", "steer_source_ports"]

#: RoCE NICs draw UDP source ports from 0xC000-0xFFFF
SPORT_BASE = 0xC000
_SPORT_SPAN = 0x4000


def failover_ports(fib: Fib, host: np.ndarray, rail: np.ndarray, port: np.ndarray,
                   via_gpu: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The NIC port each flow leaves on: its own if usable, else the next usable port of the
    same NIC (the QP moves; its context is shared by the NIC's ports).

    A port is usable when its access link and the PCIe link from ``via_gpu`` are live and
    its ToR reaches the destination class ``cls``. Returns ``(port_node, ok)``; ``ok`` is
    False where no port of the NIC is usable.
    """
    f = fib.fabric
    hs = fib.hs
    P = hs.P
    best = np.full(len(host), -1, dtype=np.int64)
    for k in range(P):  # P is the NIC's port count (1-2, at most 8): not a loop over flows
        cand_side = (port + k) % P
        node = hs.nic_port[host, rail, cand_side]
        acc = hs.access_link[node]
        pcie = hs.pcie_link(via_gpu, node, f.n_nodes)
        ok = (acc >= 0) & (pcie >= 0)
        ok &= fib.alive[np.maximum(acc, 0)] & fib.alive[np.maximum(pcie, 0)]
        tor = hs.access_tor[node]
        ok &= fib.reachable(np.where(ok, tor, -1), cls)
        take = ok & (best < 0)
        best[take] = node[take]
    return best, best >= 0


def steer_source_ports(fib: Fib, hasher: SwitchHasher, policy: Routing, flow_cols: dict,
                       sport: np.ndarray, idx: np.ndarray, tor: np.ndarray, cls: np.ndarray,
                       slot: np.ndarray, *, max_tries: int = _SPORT_SPAN
                       ) -> tuple[np.ndarray, int]:
    """New UDP source ports for flows ``idx`` (standing at ToR ``tor`` toward class
    ``cls``, entering it on port ``slot``) so that their ToR's hash spreads them evenly
    over its ECMP group. Returns ``(sport, unmatched)``: the new ports of all flows and the
    number of flows for which no port in the search range hits the wanted member."""
    sport = sport.copy()
    if not len(idx):
        return sport, 0
    uniq, pair = np.unique(tor * (fib.n_classes + 1) + cls, return_inverse=True)
    u_tor = uniq // (fib.n_classes + 1)
    u_cls = uniq % (fib.n_classes + 1)
    start, size, arcs = fib.members(u_tor, u_cls)
    go = size[pair] > 1
    idx, pair, slot_i = idx[go], pair[go], slot[go]
    if not len(idx):
        return sport, 0
    unit = np.unique(_group_keys(start, size, arcs) ^ (u_tor.astype(np.uint64) << np.uint64(40)),
                     return_inverse=True)[1][pair]
    order = np.lexsort((idx, slot_i, unit))
    su = unit[order]
    start = np.r_[0, np.flatnonzero(su[1:] != su[:-1]) + 1]
    rank_sorted = np.arange(len(su)) - np.repeat(start, np.diff(np.r_[start, len(su)]))
    rank = np.empty(len(idx), dtype=np.int64)
    rank[order] = rank_sorted
    n = size[pair]
    target = rank % n
    node = u_tor[pair]
    cols = {k: v[idx] for k, v in flow_cols.items()}
    base = sport[idx].astype(np.int64) - SPORT_BASE
    todo = np.arange(len(idx))
    found = np.full(len(idx), -1, dtype=np.int64)
    batch = 64
    for j0 in range(0, max_tries, batch):  # ~n tries expected: a few batches at most
        if not len(todo):
            break
        J = min(batch, max_tries - j0)
        rows = np.repeat(todo, J)
        jj = np.tile(np.arange(j0, j0 + J), len(todo))
        cand = SPORT_BASE + (base[rows] + jj) % _SPORT_SPAN
        c = {k: v[rows] for k, v in cols.items()}
        c["src_port"] = cand
        h = hasher.of_keys(key_bytes(c, policy.hash_fields), node[rows])
        hit = select_member(h, n[rows], policy.selection, policy.table_size) == target[rows]
        hit2 = hit.reshape(len(todo), J)
        anyhit = hit2.any(axis=1)
        first = hit2.argmax(axis=1)
        found[todo[anyhit]] = cand.reshape(len(todo), J)[anyhit, first[anyhit]]
        todo = todo[~anyhit]
    ok = found >= 0
    sport[idx[ok]] = found[ok]
    return sport, int((~ok).sum())
