"""A switch's packet buffer carved into pools, as SONiC and the switch ASICs carve it:
one function for the SONiC build (BUFFER_POOL, BUFFER_PROFILE, BUFFER_PG) and the packet
simulator, so both see the same switch.

- **Headroom** of one lossless priority group (ingress port x lossless priority): the bytes
  that still arrive after the switch decided to send PAUSE (XOFF), :func:`pg_headroom`.
  SONiC's dynamic buffer calculation (sonic-swss ``cfgmgr/buffer_headroom_*.lua``) has
  the same terms: the frame the switch is sending when it decides, the cable's round
  trip at line rate, the frames in the switch's own pipeline (its port-to-port latency;
  SONiC's ``mac_phy_delay``), the peer's response time, and the frame the peer is
  sending when PAUSE reaches it.
- **Headroom pool**: the headroom of every lossless priority group of the switch, summed
  (every cabled port: SONiC gives every port with a neighbour its lossless PG); reserved.
- **Shared pool**: the buffer less the headroom pool; the lossless PGs fill it up to their
  XOFF threshold (the dynamic threshold: ``alpha`` x the free shared pool, capped by a
  static XOFF), the lossy queues up to their own dynamic threshold.

:func:`buffer_plan` computes all of it for every switch of a Fabric in numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aifabric.topology.fabric import SWITCH_KINDS, Fabric, LinkKind

__all__ = ["CELL_BYTES", "LENGTH_CLASSES_M", "BufferPlan", "buffer_plan", "buffer_problem",
           "length_class_m", "link_length_m", "pg_headroom", "pg_headroom_array"]

#: cable length classes (metres): a cable is ordered as the smallest class >= its length
#: (SONiC's CABLE_LENGTH values)
LENGTH_CLASSES_M = (1, 2, 3, 5, 7, 10, 15, 20, 30, 40, 50, 100, 150, 200, 300, 500, 1000,
                    2000, 10000)
#: buffer cell: headroom is rounded up to whole cells
CELL_BYTES = 256


def length_class_m(metres: float) -> int:
    """The smallest length class that holds ``metres``."""
    for c in LENGTH_CLASSES_M:
        if metres <= c + 1e-9:
            return c
    return LENGTH_CLASSES_M[-1]


def link_length_m(f: Fabric) -> dict[int, float]:
    """Cable length in metres per cabled link kind (from ``spec.latency``)."""
    lat = f.spec.latency
    return {LinkKind.ACCESS: lat.access_m, LinkKind.LEAF_SPINE: lat.leaf_spine_m,
            LinkKind.SPINE_CORE: lat.spine_core_m}


def pg_headroom(speed_gbps: float, cable_ns: float, mtu_bytes: int, response_ns: float,
                pipeline_ns: float = 0.0) -> tuple[int, int]:
    """PFC headroom of one lossless priority group: ``(xoff, xon)`` in bytes.

    ``xoff`` (the headroom) = line rate x (2 x ``cable_ns`` + ``pipeline_ns`` +
    ``response_ns``) + 2 x ``mtu_bytes``, rounded up to 256-byte cells: the cable's round
    trip (data still on its way, the PAUSE frame going back), the frames inside the
    switch's own pipeline (its port-to-port latency) when it decides, the peer's reaction
    time, one MTU the switch is sending when it decides and one the peer is sending when
    PAUSE arrives. ``xon`` = 2 MTUs, in cells."""
    x, n = pg_headroom_array(np.array([speed_gbps], dtype=np.float64),
                             np.array([cable_ns], dtype=np.float64), mtu_bytes, response_ns,
                             np.array([pipeline_ns], dtype=np.float64))
    return int(x[0]), int(n[0])


def pg_headroom_array(speed_gbps: np.ndarray, cable_ns: np.ndarray, mtu_bytes: int,
                      response_ns: float, pipeline_ns: np.ndarray | float = 0.0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pg_headroom` of many priority groups at once (int64 arrays)."""
    inflight = np.asarray(speed_gbps, dtype=np.float64) / 8.0 * (
        2.0 * np.asarray(cable_ns, dtype=np.float64) + np.asarray(pipeline_ns, dtype=np.float64)
        + float(response_ns))
    xoff = np.ceil((inflight + 2 * mtu_bytes) / CELL_BYTES).astype(np.int64) * CELL_BYTES
    xon = np.full(len(xoff), math.ceil(2 * mtu_bytes / CELL_BYTES) * CELL_BYTES,
                  dtype=np.int64)
    return xoff, xon


@dataclass(eq=False)
class BufferPlan:
    """The buffer pools of every switch of a fabric (arrays over nodes: 0 for nodes that
    are not switches) and the headroom of every lossless ingress port (arrays over arcs:
    0 for arcs that do not enter a switch)."""

    #: the switch's packet buffer, bytes (its model's ``buffer_mb`` x 10^6, or an override)
    total_bytes: np.ndarray
    #: headroom pool: the headroom of every lossless (port, priority) of the switch
    headroom_pool_bytes: np.ndarray
    #: lossless priority groups: cabled ports x lossless priorities
    lossless_pgs: np.ndarray
    #: per arc into a switch: XOFF headroom (bytes) of one priority of its ingress port
    arc_xoff: np.ndarray
    #: per arc into a switch: XON (bytes)
    arc_xon: np.ndarray
    #: per arc into a switch: the cable's length class (m) and the switch's latency (ns)
    arc_cable_m: np.ndarray
    arc_pipeline_ns: np.ndarray
    #: ``"model"`` (each switch model's ``buffer_mb``) or ``"override"``
    source: str

    @property
    def shared_pool_bytes(self) -> np.ndarray:
        """The buffer less the headroom pool (negative where the headroom does not fit)."""
        return self.total_bytes - self.headroom_pool_bytes

    def shortfall(self, xoff_bytes: int = 0) -> np.ndarray:
        """Per node: the bytes the buffer lacks to hold its headroom pool plus
        ``xoff_bytes`` of shared buffer (one priority group filled to its XOFF threshold
        before it pauses); 0 where it fits."""
        need = self.headroom_pool_bytes + np.where(self.lossless_pgs > 0, xoff_bytes, 0)
        return np.maximum(need - self.total_bytes, 0)


def buffer_plan(f: Fabric, lossless_priorities: int, *, mtu_bytes: int, response_ns: float,
                buffer_bytes: int | None = None) -> BufferPlan:
    """The buffer pools of every switch of ``f`` with ``lossless_priorities`` lossless
    priorities on every cabled port (0: lossy, no headroom): headroom per port from its
    speed, its cable's length class (``spec.latency``), the switch's latency, the MTU
    and the peer's response time (:func:`pg_headroom`). ``buffer_bytes`` overrides every
    switch's buffer (the packet simulator's ``packet.buffer.size_bytes``); None: each
    switch model's ``buffer_mb``."""
    src, dst, cap = f.arcs
    nodes, links = f.nodes, f.links
    n_arcs = len(src)
    lengths = link_length_m(f)
    link_m = np.zeros(len(links.kind), dtype=np.float64)
    for k, m in lengths.items():
        link_m[links.kind == k] = m
    classes = np.asarray(LENGTH_CLASSES_M, dtype=np.float64)
    link_class = classes[np.minimum(np.searchsorted(classes, link_m - 1e-9), len(classes) - 1)]
    arc_link = np.arange(n_arcs) // 2
    cabled = np.repeat(links.kind >= LinkKind.ACCESS, 2)
    is_sw = np.isin(nodes.kind, SWITCH_KINDS)
    into = cabled & is_sw[dst]
    cable_m = np.where(into, link_class[arc_link], 0.0)
    pipe = np.where(into, nodes.latency_ns[dst].astype(np.float64), 0.0)
    xoff, xon = pg_headroom_array(cap, cable_m * f.spec.latency.cable_ns_per_m, mtu_bytes,
                                  response_ns, pipe)
    xoff = np.where(into, xoff, 0)
    xon = np.where(into, xon, 0)
    n = len(nodes.kind)
    pgs = np.bincount(dst[into], minlength=n).astype(np.int64) * int(lossless_priorities)
    pool = np.bincount(dst[into], weights=xoff[into], minlength=n).astype(np.int64) * \
        int(lossless_priorities)
    if buffer_bytes is not None:
        total = np.where(is_sw, int(buffer_bytes), 0).astype(np.int64)
    else:
        per_model = np.array([int(m.buffer_mb * 1_000_000) for _, m in f.models] or [0],
                             dtype=np.int64)  # as the SONiC build writes BUFFER_POOL
        total = np.where(is_sw, per_model[np.maximum(nodes.model, 0)], 0).astype(np.int64)
    return BufferPlan(total_bytes=total, headroom_pool_bytes=pool, lossless_pgs=pgs,
                      arc_xoff=xoff.astype(np.int64), arc_xon=xon.astype(np.int64),
                      arc_cable_m=cable_m, arc_pipeline_ns=pipe,
                      source="model" if buffer_bytes is None else "override")


def buffer_problem(f: Fabric, plan: BufferPlan, xoff_bytes: int = 0) -> str:
    """Why the buffer of a switch cannot hold its headroom pool plus ``xoff_bytes`` of
    shared buffer (one lossless priority group up to its XOFF threshold), naming the first
    such switch, its model, the numbers and what would fit; empty when every switch's
    does."""
    short = plan.shortfall(xoff_bytes)
    if not short.any():
        return ""
    n = int(np.argmax(short > 0))
    model_name, model = f.models[int(f.nodes.model[n])]
    total, pool = int(plan.total_bytes[n]), int(plan.headroom_pool_bytes[n])
    pgs = int(plan.lossless_pgs[n])
    need = pool + xoff_bytes
    fit = (total - xoff_bytes) // max(pool // max(pgs, 1), 1)
    src = (f"switch model {model_name!r} (buffer_mb {model.buffer_mb:g})" if
           plan.source == "model" else "packet.buffer.size_bytes")
    xo = f" + one XOFF threshold ({xoff_bytes:,} B)" if xoff_bytes else ""
    return (f"switch {f.nodes.name[n]}: the buffer of {src}, {total:,} B, cannot hold the PFC "
            f"headroom pool of {pgs} lossless priority groups ({pool:,} B, "
            f"{pool // max(pgs, 1):,} B each: cable, speed, MTU, response time){xo}, "
            f"{need - total:,} B short; what would fit: a buffer of at least {need:,} B "
            f"(buffer_mb {need / 1e6:.2f}), or at most {max(fit, 0)} lossless priority groups")
