"""ECMP: each switch hashes a packet's header fields and forwards it to one member of its
ECMP group, the same member for every packet of a flow (per-flow hashing).

The choice at every hop is made for all flows at once: the flows standing at a hop are
grouped by (switch, destination class), each group's members are looked up in the
:class:`~aifabric.routing.fib.Fib`, and each flow takes member
``select(hash_switch(flow), n)``.
"""

from __future__ import annotations

import numpy as np

from aifabric.routing.hashing import SwitchHasher, select_member
from aifabric.spec.models import Routing

__all__ = ["choose_ecmp"]


def choose_ecmp(hasher: SwitchHasher, policy: Routing, flow: np.ndarray, node: np.ndarray,
                start: np.ndarray, count: np.ndarray, arcs: np.ndarray, pair: np.ndarray
                ) -> np.ndarray:
    """The member arc each flow takes: flow ``flow[i]`` at switch ``node[i]`` in ECMP group
    ``pair[i]`` (members ``arcs[start[p]:start[p] + count[p]]``). Groups must not be
    empty."""
    h = hasher.at(flow, node)
    idx = select_member(h, count[pair], policy.selection, policy.table_size)
    return arcs[start[pair] + idx]
