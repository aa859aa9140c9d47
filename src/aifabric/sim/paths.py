"""From the DAG's transfers to paths on the fabric, through :mod:`aifabric.routing`.

Every distinct (source GPU, destination GPU) pair of the DAG is one *connection*; the
router turns it into flows (one per QP) and each flow into the fraction of its bytes on
each arc. Identical pairs across stages, steps and jobs are routed once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from aifabric.errors import Problem, SpecError
from aifabric.sim.flow.engine import Paths
from aifabric.topology.fabric import Fabric, LinkKind
from aifabric.workload.dag import TransferDAG

__all__ = ["arc_latency_ns", "connections", "host_side_arcs", "route_dag"]


def connections(dag: TransferDAG) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (src, dst) pairs: (src, dst, connection of each transfer)."""
    if not dag.n_transfers:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    key = dag.src.astype(np.int64) * (int(max(dag.dst.max(), dag.src.max())) + 1) + dag.dst
    _uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return dag.src[first], dag.dst[first], inv.astype(np.int64)


def arc_latency_ns(f: Fabric) -> np.ndarray:
    """Latency of each arc: the link's propagation plus the forwarding latency of the
    switch it enters."""
    _src, dst, _ = f.arcs
    lat = np.repeat(f.links.latency_ns.astype(np.float64), 2)
    return lat + f.nodes.latency_ns[dst].astype(np.float64)


def host_side_arcs(f: Fabric) -> np.ndarray:
    """Arcs inside or at the edge of a host (NVLink, PCIe, NIC-ToR links)."""
    return np.repeat(f.links.kind <= LinkKind.ACCESS, 2)


def route_dag(f: Fabric, dag: TransferDAG, routing: Any, *, failures: Any = None,
              seed: int = 0) -> tuple[Paths, np.ndarray]:
    """Route every connection of ``dag`` on ``f`` with the policy ``routing`` (the
    spec's :class:`~aifabric.spec.models.Routing`, scenario overrides applied).

    Returns the paths and the connection of each transfer. Unreachable connections are
    bad input: one problem naming the first few.
    """
    try:
        from aifabric.routing import make_flows, route
    except ImportError:  # the package's public names are not exported yet
        from aifabric.routing.flows import make_flows
        from aifabric.routing.route import route

    src, dst, xconn = connections(dag)
    # bytes per connection over the whole DAG (what load-aware policies balance)
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    conn_bytes = np.maximum(np.bincount(xconn, weights=moved, minlength=len(src)), 1)
    flows = make_flows(f, src, dst, conn_bytes.astype(np.int64),
                       qps_per_connection=routing.qps_per_connection,
                       nic_port_choice=routing.nic_port_choice, seed=seed)
    kw: dict[str, Any] = {"seed": seed}
    if failures is not None:
        kw["failures"] = failures
    routed = route(f, flows, routing, **kw)
    inc = sp.csr_matrix(routed.incidence)
    bad = np.asarray(routed.unreachable, dtype=bool)
    if bad.any():
        conns = np.unique(np.asarray(flows.conn)[bad])
        names = [f"{f.nodes.name[src[c]]} -> {f.nodes.name[dst[c]]}" for c in conns[:3]]
        raise SpecError(Problem("routing", f"{len(conns)} GPU pairs have no path "
                                f"(e.g. {', '.join(names)})"))
    conn = np.asarray(flows.conn, dtype=np.int64)
    if len(conn) and (np.diff(conn) < 0).any():  # keep the QPs of a connection together
        order = np.argsort(conn, kind="stable")
        inc, conn = inc[order], conn[order]
    ptr = np.searchsorted(conn, np.arange(len(src) + 1))
    lat_flow = inc @ arc_latency_ns(f)
    nz = np.diff(ptr) > 0
    lat = np.zeros(len(src))
    lat[nz] = np.maximum.reduceat(lat_flow, ptr[:-1][nz])
    return Paths(inc.tocsr(), ptr, lat, f.arcs[2].astype(np.float64)), xconn
