"""The Fabric: one data model of a GPU cluster network that every later stage reads.

Nodes are GPUs, hosts (a host node is the server's scale-up switch, e.g. NVSwitch),
NIC ports, ToRs, aggregation and core switches. Links join them: scale-up (NVLink),
PCIe (GPU<->NIC port), access (NIC port<->ToR), leaf-spine (ToR<->agg) and spine-core
(agg<->core). Everything is held in numpy arrays, one entry per node or link, so that a
65,536-GPU fabric is a handful of arrays, not a million Python objects.

Conventions
-----------
* A link's end ``a`` is the end closer to the GPUs, ``b`` the farther one: ``a -> b``
  is *up*, ``b -> a`` is *down* (for scale-up links both ends are host-side).
* Links are bidirectional with an independent capacity per direction:
  ``links.capacity_gbps[:, 0]`` is ``a -> b``, ``[:, 1]`` is ``b -> a``.
* Directed *arcs*: arc ``2*l`` is link ``l`` up (a -> b), arc ``2*l + 1`` is down.
* ``-1`` in an integer attribute means "not applicable".
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from aifabric.spec.models import Spec, SwitchModel

__all__ = ["Fabric", "LinkKind", "LinkTable", "Medium", "NodeKind", "NodeTable"]


class NodeKind(IntEnum):
    """What a node is."""

    GPU = 0
    HOST = 1  # the server; stands for its scale-up switch (NVSwitch)
    NIC = 2  # one port of a backend NIC
    TOR = 3
    AGG = 4
    CORE = 5

    @property
    def label(self) -> str:
        return self.name.lower()


SWITCH_KINDS = (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE)


class LinkKind(IntEnum):
    """What a link is; its value is also the link's tier (0 = inside a host)."""

    SCALEUP = 0  # GPU<->NVSwitch (or GPU<->GPU in a mesh)
    PCIE = 1  # GPU<->NIC port
    ACCESS = 2  # NIC port<->ToR
    LEAF_SPINE = 3  # ToR<->agg
    SPINE_CORE = 4  # agg<->core

    @property
    def label(self) -> str:
        return {0: "scaleup", 1: "pcie", 2: "access", 3: "leaf_spine", 4: "spine_core"}[self.value]


class Medium(IntEnum):
    """The physical medium of a link."""

    INTERNAL = 0  # traces inside the server
    DAC = 1
    AOC = 2
    OPTIC = 3  # transceiver at each end + fibre

    @property
    def label(self) -> str:
        return self.name.lower()


def _i32(n: int) -> np.ndarray:
    return np.full(n, -1, dtype=np.int32)


@dataclass(eq=False)
class NodeTable:
    """Per-node attributes, all arrays of the same length."""

    kind: np.ndarray  # int8, NodeKind
    name: np.ndarray  # str
    tier: np.ndarray  # int8: 0 host side, 1 ToR, 2 agg, 3 core
    pod: np.ndarray  # int32
    segment: np.ndarray  # int32, global segment index
    plane: np.ndarray  # int32
    rail: np.ndarray  # int32: NIC index for GPUs/NIC ports/rail ToRs
    group: np.ndarray  # int32: switch group (agg group, core group)
    host: np.ndarray  # int32: host index for GPU/HOST/NIC nodes
    index: np.ndarray  # int32: GPU index in host, NIC index, switch index in its group
    side: np.ndarray  # int8: NIC port index; ToR side in a dual-ToR pair (0 = a, 1 = b)
    backup: np.ndarray  # bool: belongs to a standby host
    ip: np.ndarray  # uint32: the NIC's /32 (dual-ToR ports share it); 0 elsewhere
    model: np.ndarray  # int16: index into Fabric.models for switches
    latency_ns: np.ndarray  # int32: forwarding latency of a switch

    def __len__(self) -> int:
        return len(self.kind)


@dataclass(eq=False)
class LinkTable:
    """Per-link attributes, all arrays of the same length (``a`` is the lower end)."""

    a: np.ndarray  # int32 node id
    b: np.ndarray  # int32 node id
    kind: np.ndarray  # int8, LinkKind (= tier)
    capacity_gbps: np.ndarray  # float64 (L, 2): [a->b, b->a]
    latency_ns: np.ndarray  # int32, one way
    a_port: np.ndarray  # int32: logical port on a (switch: SONiC lane index; NIC: port)
    b_port: np.ndarray  # int32
    medium: np.ndarray  # int8, Medium
    pod: np.ndarray  # int32 (of the lower end)
    segment: np.ndarray  # int32
    plane: np.ndarray  # int32
    rail: np.ndarray  # int32

    def __len__(self) -> int:
        return len(self.a)


@dataclass(eq=False)
class Fabric:
    """A built fabric: nodes, links and the spec they came from.

    Build one with :func:`aifabric.topology.build_fabric`; builders never simulate,
    print or write files.
    """

    name: str
    family: str
    spec: Spec
    models: list[tuple[str, SwitchModel]]
    nodes: NodeTable
    links: LinkTable
    meta: dict[str, object] = field(default_factory=dict)

    # ----------------------------------------------------------------- basics
    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_links(self) -> int:
        return len(self.links)

    def mask(self, kind: NodeKind) -> np.ndarray:
        """Boolean mask of the nodes of ``kind``."""
        return self.nodes.kind == kind

    def ids(self, kind: NodeKind, *, active_only: bool = False) -> np.ndarray:
        """Node ids of ``kind`` (``active_only`` drops backup hosts' nodes)."""
        m = self.mask(kind)
        if active_only:
            m &= ~self.nodes.backup
        return np.flatnonzero(m)

    @cached_property
    def is_switch(self) -> np.ndarray:
        return np.isin(self.nodes.kind, SWITCH_KINDS)

    @cached_property
    def _name_index(self) -> dict[str, int]:
        return {str(n): i for i, n in enumerate(self.nodes.name)}

    def node_id(self, name: str) -> int:
        """The id of the node called ``name`` (KeyError if none)."""
        return self._name_index[name]

    def has_node(self, name: str) -> bool:
        return name in self._name_index

    # ------------------------------------------------------------- directions
    @cached_property
    def arcs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Directed arcs ``(src, dst, capacity_gbps)``; arc ``2l`` = link l up, ``2l+1`` down."""
        links = self.links
        src = np.empty(2 * len(links), dtype=np.int32)
        dst = np.empty_like(src)
        src[0::2], src[1::2] = links.a, links.b
        dst[0::2], dst[1::2] = links.b, links.a
        return src, dst, links.capacity_gbps.reshape(-1)

    def adjacency(self, weights: np.ndarray | None = None) -> sp.csr_matrix:
        """Sparse directed adjacency over arcs (parallel links summed), optional arc weights."""
        src, dst, cap = self.arcs
        data = cap if weights is None else weights
        return sp.csr_matrix((data, (src, dst)), shape=(self.n_nodes, self.n_nodes))

    # ------------------------------------------------------------------ ports
    def switch_model(self, node: int) -> SwitchModel:
        return self.models[int(self.nodes.model[node])][1]

    def port_name(self, node: int, port: int) -> str:
        """The interface name of ``port`` on ``node``: ``Ethernet12`` on a switch,
        ``ens5f1`` (NIC 5, port 1) on a host's NIC port."""
        kind = NodeKind(int(self.nodes.kind[node]))
        if kind in SWITCH_KINDS:
            return f"Ethernet{port}"
        if kind == NodeKind.NIC:
            return f"ens{int(self.nodes.rail[node])}f{int(self.nodes.side[node])}"
        return f"port{port}"

    def device_name(self, node: int) -> str:
        """The device that owns ``node``'s port: the host for NIC ports, else itself."""
        if self.nodes.kind[node] == NodeKind.NIC:
            return str(self.nodes.name[self.host_node[self.nodes.host[node]]])
        return str(self.nodes.name[node])

    @cached_property
    def host_node(self) -> np.ndarray:
        """Node id of host ``h`` (indexed by host index)."""
        hosts = self.ids(NodeKind.HOST)
        out = np.empty(len(hosts), dtype=np.int32)
        out[self.nodes.host[hosts]] = hosts
        return out

    def physical_port(self, node: np.ndarray, lane: np.ndarray) -> np.ndarray:
        """Physical front-panel port index of the given switch lanes."""
        lanes = np.array([m.lanes_per_port for _, m in self.models], dtype=np.int32)
        return lane // lanes[self.nodes.model[node]]

    def summary_line(self) -> str:
        return (f"{self.name} ({self.family}): {self.n_nodes:,} nodes, {self.n_links:,} links")

    def check_consistent(self) -> None:
        """Raise AssertionError if the tables have inconsistent lengths (a builder bug)."""
        for table in (self.nodes, self.links):
            lengths = {f.name: len(getattr(table, f.name)) for f in fields(table)}
            assert len(set(lengths.values())) == 1, lengths
