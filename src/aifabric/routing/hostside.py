"""Lookups the router needs from a Fabric, built once per fabric with array operations:
the NIC ports of every (host, NIC), the GPUs of every host, the arc of every scale-up,
PCIe and access link, and each switch's up/down ports in port order."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["HostSide", "host_side"]

_CACHE: weakref.WeakKeyDictionary[Fabric, HostSide] = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class HostSide:
    """Per-fabric lookup tables (see :func:`host_side`)."""

    G: int  # GPUs per host
    N: int  # NICs per host
    P: int  # ports per NIC
    gpu: np.ndarray  # (H, G) GPU node ids
    nic_port: np.ndarray  # (H, N, P) NIC port node ids
    gpu_index: np.ndarray  # per node: index of a GPU among fabric GPUs (-1 elsewhere)
    pxn: bool  # rail-wired ToRs: cross-rail traffic moves over NVLink first
    mesh: bool  # GPUs joined directly (no NVSwitch node)
    scaleup_up: np.ndarray  # per GPU node: arc GPU->HOST (nvswitch), -1 elsewhere
    access_link: np.ndarray  # per NIC port node: its access link (-1 if none)
    access_tor: np.ndarray  # per NIC port node: the ToR it is cabled to
    _pcie_keys: np.ndarray  # sorted gpu * n + nic_port
    _pcie_link: np.ndarray
    _mesh_keys: np.ndarray  # sorted min * n + max (mesh scale-up)
    _mesh_link: np.ndarray
    _mesh_a: np.ndarray
    _pcie_by_side: np.ndarray  # (GPUs, P): PCIe link of a GPU to port `side` of its NIC
    _pcie_b: np.ndarray  # per link: its b end
    side: np.ndarray  # per node: NIC port index

    def pcie_link(self, gpu: np.ndarray, port: np.ndarray, n_nodes: int) -> np.ndarray:
        """The PCIe link between GPU ``gpu[i]`` and NIC port ``port[i]`` (-1 if none)."""
        link = self._pcie_by_side[self.gpu_index[gpu], self.side[port]]
        ok = (link >= 0) & (self._pcie_b[np.maximum(link, 0)] == port)
        if ok.all():
            return link
        key = gpu.astype(np.int64) * n_nodes + port  # GPUs wired to another NIC's ports
        i = np.minimum(np.searchsorted(self._pcie_keys, key), len(self._pcie_keys) - 1)
        return np.where(ok, link, np.where(self._pcie_keys[i] == key, self._pcie_link[i], -1))

    def gpu_gpu_arcs(self, src: np.ndarray, dst: np.ndarray, n_nodes: int
                     ) -> list[np.ndarray]:
        """Scale-up arcs from GPU ``src`` to GPU ``dst`` (same host): two arcs through the
        NVSwitch (host node), or one direct arc in a mesh."""
        if not self.mesh:
            return [self.scaleup_up[src], self.scaleup_up[dst] + 1]
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        key = lo.astype(np.int64) * n_nodes + hi
        i = np.minimum(np.searchsorted(self._mesh_keys, key), len(self._mesh_keys) - 1)
        link = self._mesh_link[i]
        return [2 * link + (self._mesh_a[i] != src)]


def host_side(f: Fabric) -> HostSide:
    """The lookup tables of ``f`` (cached per fabric object)."""
    hit = _CACHE.get(f)
    if hit is not None:
        return hit
    nodes, links = f.nodes, f.links
    h = f.spec.hosts
    G, N, P = h.gpus_per_host, h.nics_per_host, h.ports_per_nic
    H = len(f.host_node)
    gpus = f.ids(NodeKind.GPU)
    gpu = np.full((H, G), -1, dtype=np.int64)
    gpu[nodes.host[gpus], nodes.index[gpus]] = gpus
    nics = f.ids(NodeKind.NIC)
    nic_port = np.full((H, N, P), -1, dtype=np.int64)
    nic_port[nodes.host[nics], nodes.rail[nics], nodes.side[nics]] = nics
    gpu_index = np.full(f.n_nodes, -1, dtype=np.int64)
    gpu_index[gpus] = np.arange(len(gpus))
    tors = f.ids(NodeKind.TOR)
    pxn = bool((nodes.rail[tors] >= 0).any())
    n = f.n_nodes
    lid = np.arange(len(links), dtype=np.int64)
    su = links.kind == LinkKind.SCALEUP
    mesh = bool(su.any()) and bool((nodes.kind[links.b[su]] == NodeKind.GPU).all())
    scaleup_up = np.full(n, -1, dtype=np.int64)
    if not mesh:
        scaleup_up[links.a[su]] = 2 * lid[su]
    pc = links.kind == LinkKind.PCIE
    pk = links.a[pc].astype(np.int64) * n + links.b[pc]
    order = np.argsort(pk)
    ac = links.kind == LinkKind.ACCESS
    access_link = np.full(n, -1, dtype=np.int64)
    access_link[links.a[ac]] = lid[ac]
    access_tor = np.full(n, -1, dtype=np.int64)
    access_tor[links.a[ac]] = links.b[ac]
    if mesh:
        lo = np.minimum(links.a[su], links.b[su]).astype(np.int64)
        hi = np.maximum(links.a[su], links.b[su]).astype(np.int64)
        mk = lo * n + hi
        mo = np.argsort(mk)
        mesh_keys, mesh_link, mesh_a = mk[mo], lid[su][mo], links.a[su][mo].astype(np.int64)
    else:
        mesh_keys = np.zeros(1, dtype=np.int64)
        mesh_link = np.zeros(1, dtype=np.int64)
        mesh_a = np.zeros(1, dtype=np.int64)
    by_side = np.full((len(gpus), P), -1, dtype=np.int64)
    pa, pb = links.a[pc], links.b[pc]
    by_side[gpu_index[pa], nodes.side[pb]] = lid[pc]
    out = HostSide(G, N, P, gpu, nic_port, gpu_index, pxn, mesh, scaleup_up, access_link,
                   access_tor, pk[order], lid[pc][order], mesh_keys, mesh_link, mesh_a,
                   by_side, links.b.astype(np.int64), nodes.side.astype(np.int64))
    _CACHE[f] = out
    return out
