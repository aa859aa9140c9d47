"""The scale-up domain of a spec, checked and counted.

A domain is ``gpus`` GPUs over ``gpus / gpus_per_host`` hosts (compute trays) joined by
NVLink switch chips: every GPU has ``links_per_gpu`` links spread over the chips, so a
domain needs ``ceil(gpus x links_per_gpu / ports)`` chips. A domain of one host is
today's HGX server (its switches sit on the baseboard, no cables); a domain of several
hosts puts its chips in switch trays and its links on a cable spine (NVL72: 18 chips in
9 trays, 1,296 links in 4 cartridges).

:func:`resolve_domain` refuses what cannot be built (a domain that is not a whole number
of hosts or does not divide them, NVLS on a switch that cannot reduce, too few switch
ports) with one problem naming the field.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import BUILTIN_SCALEUP_SWITCHES, Spec

if TYPE_CHECKING:
    from aifabric.topology.fabric import Fabric

__all__ = ["Domain", "host_domains", "resolve_domain"]


@dataclass(frozen=True)
class Domain:
    """A checked scale-up domain and what building the fabric's domains takes."""

    gpus: int  # GPUs per domain
    hosts: int  # hosts (compute trays) per domain
    count: int  # domains in the fabric
    switch: str
    switch_ports: int
    switch_gbps: float  # one port per direction
    chips: int  # switch chips per domain
    trays: int  # switch trays per domain (0: chips on the host baseboard)
    links_per_gpu: int
    link_gbps: float
    gbps_per_gpu: float  # scale-up bandwidth of one GPU per direction
    nvls: bool
    nvls_efficiency: float
    p2p_efficiency: float
    switch_latency_ns: int
    links: int  # NVLink links (GPU to switch port) per domain
    cables: int  # links on a cable spine per domain (0 on a baseboard)
    cartridges: int  # spine cartridges per domain
    scaleout_efficiency: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_domain(spec: Spec, hosts: int) -> Domain | None:
    """The domain of ``spec`` over its ``hosts`` active hosts; None when the spec has none."""
    d = spec.scaleup_domain
    if d is None:
        return None
    G = spec.hosts.gpus_per_host
    sw = d.switch_model()
    if sw is None:
        known = sorted(set(d.switch_models) | set(BUILTIN_SCALEUP_SWITCHES))
        raise SpecError.at("scaleup_domain.switch", f"unknown scale-up switch {d.switch!r}; "
                           f"allowed: {', '.join(known)}")
    if d.gpus % G:
        raise SpecError.at("scaleup_domain.gpus", f"{d.gpus} GPUs is not a whole number of "
                           f"hosts of {G} GPUs; allowed: a multiple of hosts.gpus_per_host "
                           f"({G})")
    per = d.gpus // G
    if per > 1 and spec.hosts.scaleup == "mesh":
        raise SpecError.at("scaleup_domain.gpus", f"a domain over {per} hosts needs NVLink "
                           "switches, but hosts.scaleup is mesh; allowed: hosts.scaleup "
                           f"nvswitch, or a domain of {G} GPUs")
    if hosts % per:
        raise SpecError.at("scaleup_domain.gpus", f"domains of {d.gpus} GPUs ({per} hosts) "
                           f"do not divide the fabric's {hosts} active hosts; allowed: a "
                           f"domain of k x {G} GPUs where k divides {hosts}")
    if d.nvls and not sw.reduction:
        raise SpecError.at("scaleup_domain.nvls", f"switch {d.switch!r} cannot reduce in the "
                           "switch (reduction: false); allowed: nvls false, or a switch "
                           "with reduction")
    link = d.link_gbps if d.link_gbps is not None else sw.port_gbps
    if link > sw.port_gbps:
        raise SpecError.at("scaleup_domain.link_gbps", f"{link:g} Gb/s is faster than the "
                           f"{d.switch} port ({sw.port_gbps:g} Gb/s); allowed: at most "
                           f"{sw.port_gbps:g}")
    links = d.gpus * d.links_per_gpu
    need = math.ceil(links / sw.ports)
    chips = d.switch_chips if d.switch_chips is not None else need
    if chips < need:
        raise SpecError.at("scaleup_domain.switch_chips", f"{chips} chips of {sw.ports} "
                           f"ports cannot take {links} GPU links; allowed: at least {need}")
    multi = per > 1
    trays = math.ceil(chips / d.chips_per_tray) if multi else 0
    cables = links if multi else 0
    return Domain(
        gpus=d.gpus, hosts=per, count=hosts // per, switch=d.switch, switch_ports=sw.ports,
        switch_gbps=sw.port_gbps, chips=chips, trays=trays, links_per_gpu=d.links_per_gpu,
        link_gbps=link, gbps_per_gpu=d.links_per_gpu * link,
        nvls=bool(sw.reduction if d.nvls is None else d.nvls),
        nvls_efficiency=sw.nvls_efficiency, p2p_efficiency=sw.p2p_efficiency,
        switch_latency_ns=sw.latency_ns, links=links,
        cables=cables, cartridges=math.ceil(cables / d.links_per_cartridge) if cables else 0,
        scaleout_efficiency=d.scaleout_efficiency)


def domain_gbps(spec: Spec) -> float:
    """Scale-up bandwidth per GPU per direction: the domain's, or ``hosts.scaleup_gbps``."""
    d = spec.scaleup_domain
    if d is None:
        return float(spec.hosts.scaleup_gbps)
    sw = d.switch_model()
    link = d.link_gbps if d.link_gbps is not None else (sw.port_gbps if sw else 0.0)
    return float(d.links_per_gpu * link) if link else float(spec.hosts.scaleup_gbps)


def host_domains(f: Fabric) -> np.ndarray | None:
    """The scale-up domain of every host index of the Fabric ``f`` when its domains span
    several hosts (an NVL72 rack: 18 trays), else None (a domain of one host is the
    host itself: nothing to add).

    Domains are consecutive active hosts in host order (domain ``k`` is the ``k``-th
    block of ``scaleup_domain.gpus / hosts.gpus_per_host`` active hosts, as ``aifabric
    nccl`` counts them domain-major); a backup host belongs to none (-1). GPUs of one
    domain reach each other over its NVLink switches, which are full crossbars: only the
    GPUs' own NVLink (``Fabric`` scale-up links, the domain's bandwidth per GPU) binds.
    """
    from aifabric.topology.fabric import NodeKind

    d = f.spec.scaleup_domain
    G = f.spec.hosts.gpus_per_host
    if d is None or d.gpus <= G:
        return None
    per = d.gpus // G
    hosts = f.ids(NodeKind.HOST)
    host_idx = f.nodes.host[hosts].astype(np.int64)
    out = np.full(len(f.host_node), -1, dtype=np.int64)
    active = np.sort(host_idx[~f.nodes.backup[hosts]])
    out[active] = np.arange(len(active), dtype=np.int64) // per
    return out

