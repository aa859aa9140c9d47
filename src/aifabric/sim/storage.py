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


def converged(spec: Spec, op: str, size_bytes: float, checkpoint_bytes: float, *,
              gpus: int | None = None, algorithm: str | None = None,
              protocol: str | None = None) -> dict[str, Any]:
    """The converged option: the frontend's storage nodes on the backend (scale-out)
    fabric instead of their own network. A collective and a checkpoint write (every GPU
    of the collective writes ``checkpoint_bytes / gpus`` through its own backend NIC,
    striped over the storage nodes) are simulated alone and at once, on the
    two-dimension network (:mod:`aifabric.sim.twodim`); the difference is the
    interference. SpecError naming the field when there are no storage nodes."""
    from dataclasses import replace

    from aifabric.sim.twodim import net_from_spec, run_collective, simulate_dag
    from aifabric.workload.collectives.twodim import add_2d_collective

    fe = spec.frontend
    if fe is None or fe.storage.nodes == 0:
        raise SpecError(Problem("frontend.storage.nodes" if fe is not None else "frontend",
                                "the converged option needs storage nodes; allowed: a "
                                "frontend section with storage.nodes >= 1"))
    st = fe.storage
    base = net_from_spec(spec)
    try:
        net = base.sized(gpus if gpus is not None else base.total_domains * base.per_domain)
    except ValueError as e:
        raise SpecError(Problem("gpus", str(e))) from None
    net = replace(net, storage=(st.nodes, st.nic_gbps, st.write_gbytes_per_s * 8,
                                st.read_gbytes_per_s * 8))
    alone = run_collective(net, op, size_bytes, algorithm=algorithm, protocol=protocol)
    c = alone.choice
    n, S = net.n, st.nodes
    k = min(st.stripe, S)
    g = np.repeat(np.arange(n), k)
    node = net.n + net.domains + (g * k + np.tile(np.arange(k), n)) % S
    grid = np.arange(n, dtype=np.int64).reshape(net.domains, net.per_domain)
    switch = n + np.arange(net.domains, dtype=np.int64)

    def dag(with_coll: bool, with_ckpt: bool):
        b = DAGBuilder()
        if with_coll:
            add_2d_collective(b, op, c.algorithm, grid, size_bytes, switch=switch,
                              channels=net.channels)
        if with_ckpt:  # no dependency: it starts with the collective
            b.transfers(g, node, checkpoint_bytes / len(g), label="checkpoint write")
        return b.build()

    d_ck = dag(False, True)
    ck_alone = float(simulate_dag(net, d_ck)[0].stage_end_ns.max())
    d_both = dag(True, True)
    run, by_arc, _ = simulate_dag(net, d_both)
    ck_stage = d_both.n_stages - 1
    coll_ns = float(run.stage_end_ns[:ck_stage].max())
    ck_ns = float(run.stage_end_ns[ck_stage])
    return {
        "op": op, "size_bytes": float(size_bytes), "gpus": n,
        "algorithm": c.algorithm, "protocol": c.protocol,
        "checkpoint_bytes": float(checkpoint_bytes), "storage_nodes": S,
        "collective_alone_ms": alone.simulated_ns / 1e6,
        "collective_with_checkpoint_ms": coll_ns / 1e6,
        "collective_slowdown": coll_ns / alone.simulated_ns if alone.simulated_ns else 1.0,
        "checkpoint_alone_s": ck_alone / 1e9,
        "checkpoint_with_collective_s": ck_ns / 1e9,
        "scaleout_bytes": by_arc["scaleout"],
    }
