"""The elements of a scheduled fabric (``spec.scheduled``) on a built fabric.

The *edge* is every switch with a host-facing (access) port: it holds one VOQ per
destination port of the fabric, grants credits for its own host ports and reorders the
cells it receives. The *fabric elements* are the switches without a host: they switch
cells only. :func:`scheduled_elements` counts them and works out the cell overhead and
the bandwidth left for the hosts; :func:`check_scheduled` refuses a spec whose built
fabric cannot be scheduled (an edge switch without an uplink, a reorder buffer smaller
than one cell per fabric uplink of its edge).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.spec.scheduled import ScheduledFabric, cell_efficiency, cells_per_packet
from aifabric.topology.fabric import Fabric, LinkKind

__all__ = ["ROCE_FRAME_BYTES", "check_scheduled", "edge_uplinks", "scheduled_elements"]

#: the RoCE frame of a 4 KiB RDMA payload: payload + Ethernet 14 + IPv4 20 + UDP 8 +
#: BTH 12 + ICRC 4 + FCS 4 (what the edge cuts into cells; preamble and gap stay on the
#: host link)
ROCE_FRAME_BYTES = 4096 + 62


def edge_uplinks(f: Fabric) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(edge switches, their fabric uplinks, their host ports)``: node ids of the
    switches with an access link, and per edge the count of links to switches without
    one and of access links."""
    links = f.links
    acc = links.kind == LinkKind.ACCESS
    n = f.n_nodes
    host_ports = np.bincount(links.a[acc], minlength=n) + np.bincount(links.b[acc], minlength=n)
    sw = f.is_switch
    edge = sw & (host_ports > 0)
    fab = (links.kind >= LinkKind.LEAF_SPINE)
    a, b = links.a[fab], links.b[fab]
    up = (np.bincount(a[edge[a] & ~edge[b]], minlength=n)
          + np.bincount(b[edge[b] & ~edge[a]], minlength=n))
    ids = np.flatnonzero(edge)
    return ids, up[ids], host_ports[ids]


def check_scheduled(f: Fabric) -> None:
    """Refuse (SpecError naming the ``scheduled`` field) a fabric the spec's scheduled
    section cannot run on."""
    sch = f.spec.scheduled
    if sch is None:
        return
    edges, up, _ = edge_uplinks(f)
    if not len(edges) or (up == 0).any():
        bad = f.nodes.name[edges[up == 0][0]] if len(edges) else "-"
        raise SpecError(Problem("scheduled", f"edge switch {bad} has no link to a fabric "
                                "switch (one without hosts); allowed: a 2- or 3-tier fabric "
                                "whose edge reaches fabric-only switches"))
    need = int(up.max()) * sch.cell_bytes
    if sch.reorder_buffer_bytes < need:
        raise SpecError(Problem("scheduled.reorder_buffer_bytes", f"{sch.reorder_buffer_bytes:,} "
                                f"bytes is smaller than one cell per fabric uplink "
                                f"({int(up.max())} uplinks x {sch.cell_bytes} bytes = "
                                f"{need:,}); allowed: at least {need:,}"))


def scheduled_elements(f: Fabric, sch: ScheduledFabric | None = None,
                       frame_bytes: int = ROCE_FRAME_BYTES) -> dict[str, Any] | None:
    """What ``plan`` shows of a scheduled fabric: the edge (count, VOQs, host ports,
    fabric uplinks), the fabric elements, the cell overhead of a ``frame_bytes`` frame and
    the bandwidth it leaves; None without a scheduled section.

    ``usable_fraction`` = min(1, speedup x uplink / host capacity of the edge x cell
    efficiency): the share of its host ports' rate an edge can push through the fabric.
    """
    sch = sch or f.spec.scheduled
    if sch is None:
        return None
    edges, up, hp = edge_uplinks(f)
    links = f.links
    cap = links.capacity_gbps[:, 0]
    n = f.n_nodes
    acc = links.kind == LinkKind.ACCESS
    host_gbps = np.bincount(links.a[acc], cap[acc], n) + np.bincount(links.b[acc], cap[acc], n)
    edge_mask = np.zeros(n, bool)
    edge_mask[edges] = True
    fab = links.kind >= LinkKind.LEAF_SPINE
    a, b, c = links.a[fab], links.b[fab], cap[fab]
    upm = edge_mask[a] != edge_mask[b]
    ends = np.where(edge_mask[a[upm]], a[upm], b[upm])
    up_gbps = np.bincount(ends, c[upm], n)
    eff = cell_efficiency(frame_bytes, sch.cell_bytes, sch.cell_header_bytes)
    ratio = sch.speedup * up_gbps[edges] / np.maximum(host_gbps[edges], 1e-9) * eff
    frac = float(np.minimum(1.0, ratio).min()) if len(edges) else 0.0
    fabric_only = f.is_switch & ~edge_mask
    dest_ports = int(hp.sum())
    return {
        "edge_switches": len(edges),
        "voqs_per_edge": dest_ports,
        "voq_depth_bytes": sch.voq_depth_bytes,
        "host_ports_per_edge": int(hp.max()) if len(hp) else 0,
        "fabric_uplinks_per_edge": int(up.max()) if len(up) else 0,
        "fabric_switches": int(fabric_only.sum()),
        "cell_bytes": sch.cell_bytes,
        "cell_header_bytes": sch.cell_header_bytes,
        "frame_bytes": frame_bytes,
        "cells_per_frame": cells_per_packet(frame_bytes, sch.cell_bytes,
                                            sch.cell_header_bytes),
        "cell_efficiency": round(eff, 6),
        "cell_overhead_percent": round(100 * (1 / eff - 1), 3),
        "speedup": sch.speedup,
        "fabric_gbps_per_edge": float(sch.speedup * up_gbps[edges].max()) if len(edges) else 0.0,
        "host_gbps_per_edge": float(host_gbps[edges].max()) if len(edges) else 0.0,
        "usable_fraction": round(frac, 6),
        "usable_gbps": round(float(host_gbps[edges].sum()) * frac, 3),
        "spray": sch.spray,
        "host_protocol": sch.host_protocol,
        "reorder_buffer_bytes": sch.reorder_buffer_bytes,
        "request_grant_ns": sch.request_grant_ns,
        "grant_window_bytes": sch.grant_window_credits * sch.credit_bytes,
    }
