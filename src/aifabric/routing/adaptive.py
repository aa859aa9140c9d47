"""Adaptive routing (flowlet switching / Dynamic Load Balancing): a switch sends a new
flow to the least-loaded member of its ECMP group, given the load already placed.

Flows are placed in start order (their order in the FlowSet). The placement runs hop by
hop for all flows together: at each hop, the flows facing the same set of next hops are
taken in start order, one per set per round, each onto the member with the fewest bytes
already placed on it (ties: the first in port order). Within a hop this is exactly the
sequential greedy; across hops, every flow's earlier hops are placed before any flow's
later hops (an arc is used at one hop index in a Clos, except down-links shared by
intra-pod and cross-pod paths). The cost is one vectorised round per flow of the most
crowded group, not one Python step per flow.
"""

from __future__ import annotations

import numpy as np

from aifabric.routing.hashing import _splitmix

__all__ = ["choose_adaptive"]


def _gather(start: np.ndarray, count: np.ndarray, arcs: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Members of every group laid out one group after another: (owner, position, arc)."""
    owner = np.repeat(np.arange(len(start)), count)
    pos = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return owner, pos, arcs[start[owner] + pos]


def _group_keys(start: np.ndarray, count: np.ndarray, arcs: np.ndarray) -> np.ndarray:
    """A key per ECMP group that is equal for groups with the same member list."""
    m = len(start)
    cnt = count
    owner, pos, member = _gather(start, count, arcs)
    with np.errstate(over="ignore"):
        mix = _splitmix(member.astype(np.uint64) * np.uint64(1_000_003)
                        + pos.astype(np.uint64))
        key = np.zeros(m, dtype=np.uint64)
        np.add.at(key, owner, mix)
        key ^= _splitmix(cnt.astype(np.uint64))
    return key


def choose_adaptive(load: np.ndarray, size: np.ndarray, flow: np.ndarray, start: np.ndarray,
                    count: np.ndarray, arcs: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """The member arc of each flow (least loaded at its turn); updates ``load`` (bytes per
    arc) in place. ``size`` is indexed by flow id."""
    m = len(pair)
    out = np.empty(m, dtype=np.int64)
    if m == 0:
        return out
    gkey = _group_keys(start, count, arcs)
    ukeys, first_pair, unit_of_pair = np.unique(gkey, return_index=True, return_inverse=True)
    unit = unit_of_pair[pair]
    U = len(ukeys)
    # units ordered by how many flows they hold (most first): active units stay a prefix
    nflows = np.bincount(unit, minlength=U)
    rank_unit = np.argsort(-nflows, kind="stable")
    new_id = np.empty(U, dtype=np.int64)
    new_id[rank_unit] = np.arange(U)
    unit = new_id[unit]
    nflows = nflows[rank_unit]
    rep_pair = first_pair[rank_unit]
    ucnt = count[rep_pair]
    uptr = np.zeros(U + 1, dtype=np.int64)
    np.cumsum(ucnt, out=uptr[1:])
    uarcs = _gather(start[rep_pair], ucnt, arcs)[2]
    # flows of a unit in start order; round r places the r-th flow of every unit
    order = np.lexsort((flow, unit))
    f_sorted = flow[order]
    first = np.zeros(U + 1, dtype=np.int64)
    np.cumsum(nflows, out=first[1:])
    localpos = np.arange(len(uarcs)) - np.repeat(uptr[:-1], ucnt)
    for r in range(int(nflows.max())):
        active = int(np.searchsorted(-nflows, -r, side="left"))  # units with > r flows
        hi = int(uptr[active])
        seg = uarcs[:hi]
        ld = load[seg]
        starts = uptr[:active]
        segmin = np.minimum.reduceat(ld, starts)
        owner = np.repeat(np.arange(active), ucnt[:active])
        cand = np.where(ld <= segmin[owner], localpos[:hi], np.iinfo(np.int64).max)
        pick = np.minimum.reduceat(cand, starts)
        chosen = uarcs[starts + pick]
        idx = first[:active] + r
        fl = f_sorted[idx]
        np.add.at(load, chosen, size[fl])
        out[order[idx]] = chosen
    return out
