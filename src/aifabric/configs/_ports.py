"""Cabled link endpoints, one row per (device, port), sorted by node then port.

The renderers of every device read their rows from here: the local port and speed,
the peer device and port, and the addresses and ASN of a point-to-point link, all
computed once with numpy for the whole fabric, never re-derived per device.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from aifabric.configs.addressing import AddressPlan, ip_str
from aifabric.topology import Fabric, LinkKind, NodeKind
from aifabric.topology.buffers import LENGTH_CLASSES_M, length_class_m, link_length_m
from aifabric.topology.parts import fmt

__all__ = ["LENGTH_CLASSES_M", "Endpoints", "length_class_m", "link_length_m"]

def port_names(f: Fabric, node: np.ndarray, port: np.ndarray) -> np.ndarray:
    """Interface names of (node, port) pairs: ``Ethernet<lane>`` on switches,
    ``ens<nic>f<port>`` on NIC ports (vectorised :meth:`Fabric.port_name`)."""
    nodes = f.nodes
    sw = f.is_switch[node]
    out = np.where(sw, fmt("Ethernet", port), fmt("ens", nodes.rail[node], "f", nodes.side[node]))
    return out


def device_names(f: Fabric, node: np.ndarray) -> np.ndarray:
    """The device owning each node's port: the host for NIC ports (vectorised)."""
    nodes = f.nodes
    host_name = nodes.name[f.host_node[np.maximum(nodes.host[node], 0)]]
    return np.where(nodes.kind[node] == NodeKind.NIC, host_name, nodes.name[node])


@dataclass(eq=False)
class Endpoints:
    """Both ends of every cabled link as rows; ``start[n]:stop[n]`` are node n's rows."""

    node: np.ndarray
    port: np.ndarray
    peer: np.ndarray
    peer_port: np.ndarray
    link: np.ndarray
    up: np.ndarray  # bool: the row's node is the lower end (the link goes up from it)
    kind: np.ndarray
    speed_gbps: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    plan: AddressPlan

    @classmethod
    def of(cls, plan: AddressPlan) -> Endpoints:
        f = plan.fabric
        li = f.links
        cab = np.flatnonzero(li.kind >= LinkKind.ACCESS)
        node = np.concatenate([li.a[cab], li.b[cab]])
        port = np.concatenate([li.a_port[cab], li.b_port[cab]])
        peer = np.concatenate([li.b[cab], li.a[cab]])
        peer_port = np.concatenate([li.b_port[cab], li.a_port[cab]])
        link = np.concatenate([cab, cab])
        up = np.concatenate([np.ones(len(cab), bool), np.zeros(len(cab), bool)])
        order = np.lexsort((port, node))
        node, port, peer, peer_port, link, up = (x[order] for x in
                                                 (node, port, peer, peer_port, link, up))
        bounds = np.arange(f.n_nodes + 1)
        edges = np.searchsorted(node, bounds)
        return cls(node=node, port=port, peer=peer, peer_port=peer_port, link=link, up=up,
                   kind=li.kind[link], speed_gbps=li.capacity_gbps[link, 0],
                   start=edges[:-1], stop=edges[1:], plan=plan)

    # ------------------------------------------------------------- string views
    @cached_property
    def port_name(self) -> np.ndarray:
        return port_names(self.plan.fabric, self.node, self.port)

    @cached_property
    def device(self) -> np.ndarray:
        """The device of each row's own port (the host for NIC ports)."""
        return device_names(self.plan.fabric, self.node)

    @cached_property
    def peer_device(self) -> np.ndarray:
        return device_names(self.plan.fabric, self.peer)

    @cached_property
    def peer_port_name(self) -> np.ndarray:
        return port_names(self.plan.fabric, self.peer, self.peer_port)

    @cached_property
    def local_ip(self) -> np.ndarray:
        """uint32 address of the local end of a point-to-point link (0 otherwise)."""
        p = self.plan
        return np.where(self.up, p.p2p_a[self.link], p.p2p_b[self.link])

    @cached_property
    def peer_ip(self) -> np.ndarray:
        p = self.plan
        return np.where(self.up, p.p2p_b[self.link], p.p2p_a[self.link])

    @cached_property
    def local_ip_str(self) -> np.ndarray:
        return ip_str(self.local_ip)

    @cached_property
    def peer_ip_str(self) -> np.ndarray:
        return ip_str(self.peer_ip)

    @cached_property
    def lanes(self) -> np.ndarray:
        """SerDes lanes of each switch port (0 for NIC rows)."""
        f = self.plan.fabric
        out = np.zeros(len(self.node), dtype=np.int32)
        sw = f.is_switch[self.node]
        lpp = np.array([m.lanes_per_port for _, m in f.models], dtype=np.int32)
        pg = np.array([m.port_gbps for _, m in f.models], dtype=np.float64)
        mi = f.nodes.model[self.node[sw]]
        breakout = np.maximum(1, np.round(pg[mi] / self.speed_gbps[sw])).astype(np.int32)
        out[sw] = np.maximum(1, lpp[mi] // breakout)
        return out

    @cached_property
    def length_m(self) -> np.ndarray:
        lengths = link_length_m(self.plan.fabric)
        out = np.zeros(len(self.node))
        for k, m in lengths.items():
            out[self.kind == k] = m
        return out

    @cached_property
    def length_class(self) -> np.ndarray:
        classes = np.array(LENGTH_CLASSES_M)
        idx = np.searchsorted(classes, self.length_m - 1e-9)
        return classes[np.minimum(idx, len(classes) - 1)]

    def rows(self, node: int) -> slice:
        return slice(int(self.start[node]), int(self.stop[node]))

