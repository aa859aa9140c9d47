"""The scale-up side of a build: every NVLink link of every domain, and what NCCL needs
to know about the domain.

``nvlink-cabling.csv`` has one row per NVLink link: the domain, the GPU and its link
number, the switch chip and its port, the tray the chip sits in (``baseboard`` of the
host when the domain is one host), the speed per direction, the medium (``baseboard``
traces, or the ``spine`` cable of a rack-scale domain) and the spine cartridge. Link l of
a domain's GPU i goes to chip ``(i x links_per_gpu + l) mod chips`` (on an NVL72, link l
to chip l; on an HGX H100, 4-5 links to each of 4 chips), chip ports in order of use.
Built with numpy, no loop over links.

The NCCL environment of a host in a domain (:func:`domain_env`): ``NCCL_NVLS_ENABLE``
(the domain's NVLS), ``NCCL_MNNVL_ENABLE=1`` and ``NCCL_CUMEM_ENABLE=1`` when the domain
spans hosts (multi-node NVLink needs cuMem), and the spec's ``NCCL_ALGO`` /
``NCCL_PROTO`` pins.
"""

from __future__ import annotations

import numpy as np

from aifabric.configs.tables import _join
from aifabric.topology import Fabric, NodeKind
from aifabric.topology.domain import Domain, resolve_domain
from aifabric.topology.parts import fmt

__all__ = ["domain_env", "domain_of", "nvlink_cabling_csv"]


def domain_of(f: Fabric) -> Domain | None:
    """The fabric's checked domain (None without one)."""
    hosts = f.ids(NodeKind.HOST)
    return resolve_domain(f.spec, int((~f.nodes.backup[hosts]).sum()))


def domain_env(f: Fabric) -> list[str]:
    """The ``nccl.env`` lines the domain adds (none without a domain)."""
    dom = domain_of(f)
    if dom is None:
        return []
    d = f.spec.scaleup_domain
    assert d is not None
    out = [f"NCCL_NVLS_ENABLE={1 if dom.nvls else 0}"]
    if dom.hosts > 1:
        out += ["NCCL_MNNVL_ENABLE=1", "NCCL_CUMEM_ENABLE=1"]
    if d.nccl_algo:
        out.append("NCCL_ALGO=" + ",".join(d.nccl_algo))
    if d.nccl_proto:
        out.append("NCCL_PROTO=" + ",".join(d.nccl_proto))
    return out


def nvlink_cabling_csv(f: Fabric) -> str | None:
    """``nvlink-cabling.csv`` (None without a domain). Standby hosts belong to no domain."""
    dom = domain_of(f)
    if dom is None:
        return None
    nodes = f.nodes
    gpus = f.ids(NodeKind.GPU)
    gpus = gpus[~nodes.backup[gpus]]
    hosts = f.ids(NodeKind.HOST)
    active = np.sort(nodes.host[hosts[~nodes.backup[hosts]]])
    rank = np.searchsorted(active, nodes.host[gpus])  # active host rank
    G = f.spec.hosts.gpus_per_host
    order = np.lexsort((nodes.index[gpus], rank))
    gpus, rank = gpus[order], rank[order]
    L, C = dom.links_per_gpu, dom.chips
    dom_id = rank // dom.hosts
    local = (rank % dom.hosts) * G + nodes.index[gpus]  # GPU index in its domain
    g = np.repeat(np.arange(len(gpus)), L)
    link = np.tile(np.arange(L), len(gpus))
    k = local[g].astype(np.int64) * L + link  # link index within the domain
    chip = k % C
    port = k // C  # chips' ports in order of use
    d = dom_id[g]
    multi = dom.hosts > 1
    host_names = nodes.name[f.host_node[active[rank[g]]]] if not multi else None
    tray = (fmt("nvl-d", (d, 4), "-tray", (chip // f.spec.scaleup_domain.chips_per_tray, 2))
            if multi else fmt(host_names, "-baseboard"))
    chip_name = fmt("nvl-d", (d, 4), "-sw", (chip, 2))
    medium = np.full(len(g), "spine" if multi else "baseboard")
    cart = (fmt("nvl-d", (d, 4), "-cartridge", (k // f.spec.scaleup_domain.links_per_cartridge,
                                                 1)) if multi else np.full(len(g), "-"))
    cols = [d, nodes.name[gpus[g]], link, tray, chip_name, port,
            np.full(len(g), f"{dom.link_gbps:g}"), medium, cart]
    return _join(cols, ["domain", "gpu", "gpu_link", "switch_tray", "switch_chip",
                        "chip_port", "gbps_per_direction", "medium", "cartridge"])
