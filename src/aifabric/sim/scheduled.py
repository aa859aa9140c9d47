"""The scheduled fabric (``spec.scheduled``: GSE / DSF) at flow level: a closed form.

A scheduled fabric has no hash collision and no queue inside: the ingress edge sends a
VOQ's bytes only against credits the egress edge grants at its port rate, and cuts them
into cells sprayed evenly over every fabric link. What limits a flow is therefore only

* its host ports: the source NIC's link and the destination NIC's link, which carry
  RoCE frames (``mtu`` payload + headers + preamble/gap per frame), and
* the fabric bandwidth of its edges, which carry cells: an edge pushes at most
  ``speedup x uplink capacity`` of cells, ``frame / (cells x cell_bytes)`` of which is
  frame, so its payload share is ``speedup x uplink x mtu / (cells x cell_bytes)``.

The rates are the max-min fair allocation over exactly these constraints. It is solved
by the flow engine's own max-min solver on an incidence where every flow is split evenly
over all shortest paths (cells sprayed over every link: ``routing.policy: spray``, which
loads each of an edge's ``u`` uplinks with ``1/u`` of the flow, the same as one pooled
constraint of ``u`` x the link) and the capacities are in payload bytes:

``access arc: c x mtu / (mtu + header + wire)``; ``fabric arc: c x speedup x mtu /
(cells x cell_bytes)`` with ``cells = ceil((mtu + header) / (cell_bytes - cell_header))``.

In a non-blocking fabric (every tier carries what the hosts below it send) the fabric
arcs above the edge never bind under even spraying, so the allocation is the closed
form: each edge port shared max-min among the flows through it, every rate at most
``min(R x mtu / (mtu + header + wire), edge fabric share)``. Each transfer through the
network arrives ``request_grant_ns`` after the path's latency: its first bytes wait for a
credit (one inside a host never asks).

For a lone flow of ``S`` bytes between idle hosts with line rate ``R`` (and a fabric that
does not bind): ``fct = S x (mtu + header + wire) / (mtu x R) + latency + request_grant``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.sim.flow.engine import Paths
from aifabric.sim.paths import PinnedPath, route_dag
from aifabric.topology.fabric import Fabric, LinkKind
from aifabric.workload.dag import TransferDAG

__all__ = ["ScheduledRates", "route_scheduled", "scheduled_rates", "scheduled_summary"]


class ScheduledRates:
    """The efficiencies of a scheduled fabric for one NIC setting: ``host`` (payload per
    byte on a host link), ``cell`` (payload per byte of cells), ``fabric`` (payload
    capacity per nominal fabric byte: speedup x cell) and the cells of one frame."""

    def __init__(self, sch: Any, mtu: int, header: int, wire: int) -> None:
        self.frame = mtu + header  # bytes cut into cells (the preamble/gap stay outside)
        self.cells = max(1, math.ceil(self.frame / (sch.cell_bytes - sch.cell_header_bytes)))
        self.cell_bytes = sch.cell_bytes
        self.host = mtu / (mtu + header + wire)
        self.cell = mtu / (self.cells * sch.cell_bytes)
        self.fabric = sch.speedup * self.cell
        self.speedup = sch.speedup
        self.mtu = mtu
        self.request_grant_ns = sch.request_grant_ns


def scheduled_rates(sch: Any, nic: Any) -> ScheduledRates:
    """The efficiencies for the NIC settings ``nic`` (a scenario's ``packet.nic``)."""
    return ScheduledRates(sch, int(nic.mtu_payload_bytes), int(nic.header_bytes),
                          int(nic.wire_overhead_bytes))


def route_scheduled(f: Fabric, dag: TransferDAG, routing: Any, nic: Any, *,
                    failures: Any = None, seed: int = 0,
                    pinned: Mapping[tuple[int, int], PinnedPath] | None = None
                    ) -> tuple[Paths, np.ndarray]:
    """The paths of ``dag`` on the scheduled fabric of ``f`` (module doc): every flow
    sprayed over all shortest paths, capacities in payload bytes per second, latency plus
    the request-grant time."""
    sch = f.spec.scheduled
    assert sch is not None
    if pinned:
        raise SpecError(Problem("routing.policy", "a scheduled fabric sprays cells over "
                                "every fabric link, it cannot follow pinned paths; allowed: "
                                "a traffic CSV without a path column"))
    spray = routing.model_copy(update={"policy": "spray"})
    paths, xconn = route_dag(f, dag, spray, failures=failures, seed=seed)
    eff = scheduled_rates(sch, nic)
    kind = np.repeat(f.links.kind, 2)
    cap = paths.capacity_gbps.copy()
    cap[kind == LinkKind.ACCESS] *= eff.host
    cap[kind >= LinkKind.LEAF_SPINE] *= eff.fabric
    # a connection through the network waits for its first credit; one inside a host
    # (NVLink, PCIe) never asks
    rows = np.asarray(paths.incidence[:, kind == LinkKind.ACCESS].sum(axis=1)).ravel() > 0
    ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
    cs = np.concatenate([[0], np.cumsum(rows)])
    net = (cs[ptr[1:]] - cs[ptr[:-1]]) > 0
    lat = paths.latency_ns + np.where(net, sch.request_grant_ns, 0)
    return Paths(paths.incidence, paths.conn_ptr, lat, cap, arc_site=paths.arc_site), xconn


def scheduled_summary(f: Fabric, nic: Any, arc_bytes: np.ndarray | None) -> dict[str, Any]:
    """What a run's summary says of the scheduled fabric: the model, its efficiencies and
    the bytes of overhead (cell headers and padding on the fabric links; RoCE headers
    and preamble/gap on the host links) for the payload ``arc_bytes`` carried per arc."""
    sch = f.spec.scheduled
    assert sch is not None
    eff = scheduled_rates(sch, nic)
    out: dict[str, Any] = {
        "cell_bytes": sch.cell_bytes, "cell_header_bytes": sch.cell_header_bytes,
        "cells_per_frame": eff.cells, "cell_efficiency": round(eff.cell, 6),
        "host_link_efficiency": round(eff.host, 6), "speedup": sch.speedup,
        "request_grant_ns": sch.request_grant_ns, "spray": sch.spray,
    }
    if arc_bytes is not None and len(arc_bytes):
        kind = np.repeat(f.links.kind, 2)
        fab = float(arc_bytes[kind >= LinkKind.LEAF_SPINE].sum())
        acc = float(arc_bytes[kind == LinkKind.ACCESS].sum())
        out["fabric_payload_bytes"] = round(fab)
        out["cell_overhead_bytes"] = round(fab * (1 / eff.cell - 1))
        out["host_overhead_bytes"] = round(acc * (1 / eff.host - 1))
    return out
