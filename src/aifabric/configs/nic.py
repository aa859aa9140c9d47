"""Per-host NIC setup scripts: RoCE QoS, DCQCN, addresses and (dual-port NICs) bonds.

The script of a host (``templates/nic-setup.sh.j2``) is idempotent, has a ``--check``
mode that changes nothing and lists every deviation, and installs itself with a
systemd unit so the settings survive a reboot. The NIC's priority, DSCP and PFC
settings are the switches' (``deploy.qos``): RoCE DSCP -> the lossless priority, CNP
DSCP -> the CNP priority, PFC only on the RoCE priority and only in ``lossless`` mode.

Dual-port NICs (HPN dual-ToR) bond both ports (802.3ad: both ToRs answer LACP as one
system) with one IP and MAC, and copy every ARP message to both ports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aifabric.configs._ports import Endpoints
from aifabric.configs.addressing import AddressPlan, ip_str
from aifabric.configs.frr import template_env
from aifabric.topology import NodeKind

__all__ = ["HostContext", "host_nics", "rdma_device", "render_nic_script"]

INSTALL_PATH = "/usr/local/sbin/aifabric-nic-setup"
UNIT = "aifabric-nic.service"


def rdma_device(prefix: str, nic: int, bonded: bool) -> str:
    """The RDMA device of NIC ``nic``: ``mlx5_3``, or ``mlx5_bond_3`` for a bonded NIC."""
    return f"{prefix}bond_{nic}" if bonded else f"{prefix}{nic}"


@dataclass(eq=False)
class HostContext:
    """NIC ports of every host, grouped: rows ``start[h]:stop[h]`` of ``nic`` (sorted by
    host, NIC, port)."""

    plan: AddressPlan
    ends: Endpoints
    nic: np.ndarray
    start: np.ndarray
    stop: np.ndarray

    @classmethod
    def of(cls, plan: AddressPlan, ends: Endpoints) -> HostContext:
        f = plan.fabric
        n = f.ids(NodeKind.NIC)
        nodes = f.nodes
        n = n[np.lexsort((nodes.side[n], nodes.rail[n], nodes.host[n]))]
        edges = np.searchsorted(nodes.host[n], np.arange(len(f.host_node) + 1))
        return cls(plan, ends, n, edges[:-1], edges[1:])

    @property
    def bonded(self) -> bool:
        return self.plan.fabric.spec.hosts.ports_per_nic > 1


def host_nics(ctx: HostContext, host: int) -> list[dict[str, Any]]:
    """The NICs of host index ``host``: index, IP, netdev, RDMA device, routing table,
    ports with their ToR peers."""
    f = ctx.plan.fabric
    dep = f.spec.deploy
    ids = ctx.nic[ctx.start[host]:ctx.stop[host]]
    ends = ctx.ends
    rows = ends.start[ids]  # each NIC port has exactly one cabled row
    cabled = ends.stop[ids] > rows
    rail = f.nodes.rail[ids].tolist()
    ip = ip_str(f.nodes.ip[ids]).tolist()
    ifname = ends.port_name[rows].tolist() if len(ids) else []
    peer = ends.peer_device[rows].tolist() if len(ids) else []
    pport = ends.peer_port_name[rows].tolist() if len(ids) else []
    out: dict[int, dict[str, Any]] = {}
    for i, r in enumerate(rail):
        nic = out.setdefault(r, {
            "index": r, "ip": ip[i], "rdma": rdma_device(dep.nic.rdma_device_prefix, r,
                                                          ctx.bonded),
            "netdev": f"bond{r}" if ctx.bonded else ifname[i], "table": 100 + r, "ports": []})
        nic["ports"].append({"ifname": ifname[i], "peer": peer[i] if cabled[i] else "-",
                             "peer_port": pport[i] if cabled[i] else "-"})
    return [out[k] for k in sorted(out)]


def render_nic_script(ctx: HostContext, host: int) -> str:
    """The ``nic-setup.sh`` of host index ``host``."""
    f = ctx.plan.fabric
    spec = f.spec
    dep = spec.deploy
    q = dep.qos
    lossless = q.mode == "lossless"
    name = str(f.nodes.name[f.host_node[host]])
    pfc_state = " ".join(f"{p}:{'on' if lossless and p == q.roce_tc else 'off'}"
                         for p in range(8))
    dscp_prio = " ".join(sorted([f"{q.roce_dscp}:{q.roce_tc}", f"{q.cnp_dscp}:{q.cnp_tc}"]))
    np_params = {"cnp_dscp": q.cnp_dscp, "cnp_802p_prio": q.cnp_tc, **dep.dcqcn.np()}
    return template_env().get_template("nic-setup.sh.j2").render(
        host=name, spec_name=spec.name, lossless=lossless, roce_dscp=q.roce_dscp,
        roce_prio=q.roce_tc, cnp_dscp=q.cnp_dscp, cnp_prio=q.cnp_tc, mtu=dep.mtu.host,
        roce_tos=q.roce_tos, gateway=ctx.plan.gateway_str, bonded=ctx.bonded,
        bond_mode="802.3ad" if f.family == "hpn" else "balance-xor",
        install_path=INSTALL_PATH, unit=UNIT, script_name="nic-setup.sh",
        pfc_state=pfc_state, dscp_prio=dscp_prio, rp=dep.dcqcn.rp(), np=np_params,
        nic_pool=str(spec.addressing.nic_pool), nics=host_nics(ctx, host))
