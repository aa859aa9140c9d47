"""Checkpoint writes and data loading on the frontend network, simulated.

Every one of ``hosts`` compute hosts moves its share of ``total_bytes`` to (write) or
from (read) ``stripe`` storage nodes (host h uses nodes ``(h x stripe + j) mod nodes``),
all at once, in the flow engine (max-min fair). Arcs: each host's frontend NICs out and
in, each leaf's uplink and downlink (the spines are non-blocking, ECMP spreads the
uplinks evenly), each storage node's NIC in and out and its media write and read rate.
The result is the time, the rate reached, and the class of arcs that bound it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from aifabric.errors import Problem, SpecError
from aifabric.sim.flow.engine import Paths, run_flow
from aifabric.spec.models import Spec
from aifabric.topology.frontend import FrontendPlan, plan_frontend
from aifabric.workload.dag import DAGBuilder

__all__ = ["StorageRun", "simulate_storage"]

_CLASSES = ("host NIC", "leaf uplink", "storage NIC", "storage media")


@dataclass(frozen=True)
class StorageRun:
    direction: str  # write (checkpoint) or read (restore, data loading)
    hosts: int
    bytes: float
    time_s: float
    gbytes_per_s: float
    bottleneck: str  # the arc class that ran full
    plan: FrontendPlan

    def as_dict(self) -> dict[str, Any]:
        return {"direction": self.direction, "hosts": self.hosts, "bytes": self.bytes,
                "time_s": self.time_s, "gbytes_per_s": self.gbytes_per_s,
                "bottleneck": self.bottleneck}


def simulate_storage(spec: Spec, hosts: int, total_bytes: float, direction: str = "write",
                     *, where: str = "frontend") -> StorageRun:
    """Simulate ``hosts`` hosts writing (or reading) ``total_bytes`` in all; SpecError
    naming the field when the spec has no frontend or no storage nodes."""
    fp = plan_frontend(spec, hosts)
    if fp is None:
        raise SpecError(Problem(where, "the spec has no frontend network; allowed: a "
                                "frontend section with storage nodes"))
    if fp.storage_nodes == 0:
        raise SpecError(Problem(f"{where}.storage.nodes", "the frontend has no storage "
                                "nodes; allowed: at least 1"))
    fe = spec.frontend
    assert fe is not None
    H, S = hosts, fp.storage_nodes
    k = min(fe.storage.stripe, S)
    h = np.repeat(np.arange(H), k)
    s = (h * k + np.tile(np.arange(k), H)) % S
    hl = h // fp.hosts_per_leaf  # host leaf
    sl = fp.host_leaves + s // fp.nodes_per_leaf  # storage leaf
    L = fp.host_leaves + fp.storage_leaves
    # arcs: host out/in, leaf up/down, storage NIC in/out, media write/read
    base = np.cumsum([0, H, H, L, L, S, S, S, S])
    cap = np.concatenate([np.full(2 * H, fp.host_gbps), np.full(2 * L, fp.leaf_up_gbps),
                          np.full(2 * S, fp.storage_gbps),
                          np.full(S, fe.storage.write_gbytes_per_s * 8),
                          np.full(S, fe.storage.read_gbytes_per_s * 8)])
    if direction == "write":
        cols = [base[0] + h, base[2] + hl, base[3] + sl, base[4] + s, base[6] + s]
    elif direction == "read":
        cols = [base[7] + s, base[5] + s, base[2] + sl, base[3] + hl, base[1] + h]
    else:
        raise ValueError(f"direction {direction!r}; allowed: write, read")
    n = len(h)
    rows = np.tile(np.arange(n), len(cols))
    inc = sp.csr_matrix((np.ones(len(rows)), (rows, np.concatenate(cols))),
                        shape=(n, len(cap)))
    paths = Paths(incidence=inc, conn_ptr=np.arange(n + 1, dtype=np.int64),
                  latency_ns=np.zeros(n), capacity_gbps=cap)
    b = DAGBuilder()
    b.transfers(np.arange(n), np.arange(n) + n, total_bytes / n, label=f"storage {direction}")
    run = run_flow(b.build(), paths, np.arange(n, dtype=np.int64))
    t_ns = float(run.stage_end_ns.max())
    # the arc class whose busiest arc ran closest to full over the run
    util = run.arc_bytes * 8 / t_ns / cap
    cls = np.repeat(np.arange(4), [2 * H, 2 * L, 2 * S, 2 * S])
    worst = int(cls[int(np.argmax(util))])
    return StorageRun(direction, H, float(total_bytes), t_ns / 1e9,
                      total_bytes / t_ns, _CLASSES[worst], fp)
