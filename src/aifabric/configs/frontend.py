"""The frontend (storage) network's build: switch configs, host addressing, cabling, BOM.

The frontend is a fabric of its own (:func:`aifabric.topology.frontend_fabric.
build_frontend`) with its own pools, ASNs and QoS (``frontend.pools``, ``frontend.asn``,
``frontend.qos``), rendered by the backend's renderers, so its files pass the same checks
(SONiC YANG, FRR's vtysh and bgpd). Everything goes under ``frontend/`` of the build:

* ``frontend/switches/<name>/config_db.json`` and ``frr.conf`` for every leaf and spine
  (eBGP RFC 7938: one ASN per leaf, one for the spines; /31s on every leaf-spine link;
  the host and storage /32s behind each leaf as static routes to the host VLAN, the
  anycast gateway on every leaf);
* ``frontend/hosts/<name>/nic-setup.sh`` for every compute host and storage node: its
  frontend ports' /32s, per-port routing tables, MTU, ECN
  (``templates/frontend-nic-setup.sh.j2``);
* ``frontend/cabling.csv``, ``frontend/addressing.csv`` (the backend's columns) and
  ``frontend/bom.csv`` (switches, storage nodes, NICs, cables and transceivers by tier
  and speed).

Problems are named at the frontend's fields (``frontend.pools.loopback``, ...), never at
the backend's whose places the frontend's values take in the renderers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from aifabric.configs._ports import LENGTH_CLASSES_M, Endpoints
from aifabric.configs.addressing import AddressPlan, ip_str, plan_addresses
from aifabric.configs.frr import render_frr, template_env
from aifabric.configs.sonic import SwitchContext, render_config_db
from aifabric.configs.tables import addressing_csv, cabling_csv
from aifabric.errors import Problem, SpecError
from aifabric.topology import Fabric, LinkKind, Medium, NodeKind

__all__ = ["FrontendContext", "render_frontend"]

INSTALL_PATH = "/usr/local/sbin/aifabric-frontend-nic-setup"
UNIT = "aifabric-frontend-nic.service"
#: the frontend's per-port routing tables start here (the backend's NICs use 100 + NIC)
TABLE_BASE = 200

#: where the renderers read a value -> where the frontend's spec holds it
_FIELDS = {"addressing.nic_pool": "frontend.pools.hosts",
           "deploy.pools.loopback": "frontend.pools.loopback",
           "deploy.pools.p2p": "frontend.pools.p2p", "deploy.asn": "frontend.asn",
           "deploy.qos": "frontend.qos", "deploy.mtu": "frontend.mtu"}


def _renamed(err: SpecError) -> SpecError:
    """``err`` with every problem named at the frontend's field."""
    out = []
    for p in err.problems:
        path = p.path
        for old, new in _FIELDS.items():
            if path == old or path.startswith(old + "."):
                path = new + path[len(old):]
                break
        out.append(Problem(path, p.message, p.file))
    return SpecError(out)


@dataclass(eq=False)
class FrontendContext:
    """The frontend fabric with its address plan and per-port views."""

    plan: AddressPlan
    ends: Endpoints
    switches: SwitchContext

    @classmethod
    def of(cls, fabric: Fabric) -> FrontendContext | None:
        """The frontend of the backend ``fabric``'s spec; None when it has none.
        SpecError naming the ``frontend`` field that cannot be built."""
        from aifabric.topology.frontend_fabric import build_frontend

        f = build_frontend(fabric.spec, fabric)
        if f is None:
            return None
        try:
            plan = plan_addresses(f)
            ends = Endpoints.of(plan)
            return cls(plan, ends, SwitchContext(plan, ends))
        except SpecError as e:
            raise _renamed(e) from None

    @property
    def fabric(self) -> Fabric:
        return self.plan.fabric


def render_frontend(ctx: FrontendContext, config_db_json) -> Iterator[tuple[str, str]]:
    """Every file of the frontend as ``(relative path, text)``, in a fixed order;
    ``config_db_json`` lays a CONFIG_DB out as the backend's are."""
    f = ctx.fabric
    yield "frontend/cabling.csv", cabling_csv(ctx.plan, ctx.ends)
    yield "frontend/addressing.csv", addressing_csv(ctx.plan, ctx.ends)
    yield "frontend/bom.csv", frontend_bom_csv(ctx)
    sw = ctx.switches
    for n in ctx.plan.switches.tolist():
        name = str(f.nodes.name[n])
        yield f"frontend/switches/{name}/config_db.json", config_db_json(render_config_db(sw, n))
        yield f"frontend/switches/{name}/frr.conf", render_frr(sw, n)
    for h in range(len(f.host_node)):
        name = str(f.nodes.name[f.host_node[h]])
        yield f"frontend/hosts/{name}/nic-setup.sh", render_frontend_nic_script(ctx, h)


def host_ports(ctx: FrontendContext, host: int) -> list[dict[str, object]]:
    """The frontend ports of host index ``host`` (compute hosts first, then storage
    nodes): interface, /32, leaf and leaf port, speed, routing table."""
    f, e = ctx.fabric, ctx.ends
    nic = f.ids(NodeKind.NIC)
    mine = nic[f.nodes.host[nic] == host]
    mine = mine[np.lexsort((f.nodes.side[mine], f.nodes.rail[mine]))]
    rows = e.start[mine]
    ips = ip_str(f.nodes.ip[mine]).tolist()
    return [{"ifname": str(e.port_name[r]), "ip": ips[i], "peer": str(e.peer_device[r]),
             "peer_port": str(e.peer_port_name[r]), "gbps": f"{float(e.speed_gbps[r]):g}",
             "table": TABLE_BASE + i} for i, r in enumerate(rows.tolist())]


def render_frontend_nic_script(ctx: FrontendContext, host: int) -> str:
    """The frontend ``nic-setup.sh`` of host index ``host``."""
    f = ctx.fabric
    fe = f.spec.frontend
    assert fe is not None
    return template_env().get_template("frontend-nic-setup.sh.j2").render(
        host=str(f.nodes.name[f.host_node[host]]), spec_name=f.spec.name,
        pool=str(fe.pools.hosts), gateway=ctx.plan.gateway_str, mtu=fe.mtu.host,
        install_path=INSTALL_PATH, unit=UNIT, script_name="nic-setup.sh",
        ports=host_ports(ctx, host))


def frontend_bom_csv(ctx: FrontendContext) -> str:
    """The frontend's bill of materials: switches by role and model, compute-host and
    storage NICs, storage nodes, and per tier and speed the cables (a DAC/AOC breakout
    cable per switch port it starts from) or fibres with two transceivers each."""
    f = ctx.fabric
    fe = f.spec.frontend
    assert fe is not None
    nodes, li = f.nodes, f.links
    rows: list[list[str | int]] = []
    tors = f.ids(NodeKind.TOR)
    storage_leaf = np.char.startswith(nodes.name[tors].astype(str), "fe-sleaf-")
    for role, ids in (("leaf", tors[~storage_leaf]), ("storage_leaf", tors[storage_leaf]),
                      ("spine", f.ids(NodeKind.AGG))):
        if len(ids):
            name, model = f.models[int(nodes.model[ids[0]])]
            rows.append(["switch", role, name, f"{model.ports}x{model.port_gbps}G", "",
                         len(ids)])
    n_storage = fe.storage.nodes
    rows.append(["nic", "host", f"{fe.ports_per_nic}x{fe.port_gbps}G", "", "",
                 (len(f.host_node) - n_storage) * fe.nics_per_host])
    if n_storage:
        rows.append(["storage_node", "", f"{fe.storage.nic_gbps:g}G", "", "", n_storage])
        rows.append(["nic", "storage", f"1x{fe.storage.nic_gbps:g}G", "", "", n_storage])
    classes = np.array(LENGTH_CLASSES_M)
    lat = f.spec.latency
    for kind, metres in ((LinkKind.ACCESS, lat.access_m),
                         (LinkKind.LEAF_SPINE, lat.leaf_spine_m)):
        sel = np.flatnonzero(li.kind == kind)
        if not len(sel):
            continue
        lclass = int(classes[min(np.searchsorted(classes, metres - 1e-9), len(classes) - 1)])
        speed = li.capacity_gbps[sel, 0].astype(np.int64)
        for s in np.unique(speed).tolist():
            ls = sel[speed == s]
            medium = Medium(int(li.medium[ls[0]]))
            b = li.b[ls]
            phys = np.unique(b.astype(np.int64) * 65536 + f.physical_port(b, li.b_port[ls]))
            b_gbps = f.models[int(nodes.model[b[0]])][1].port_gbps
            if medium == Medium.OPTIC:
                a_sw = f.is_switch[li.a[ls]]
                a_phys = np.unique(li.a[ls][a_sw].astype(np.int64) * 65536 +
                                   f.physical_port(li.a[ls][a_sw], li.a_port[ls][a_sw]))
                trx = len(phys) + len(a_phys) + int((~a_sw).sum())
                rows.append(["transceiver", kind.label, f"{b_gbps}G", "", "", trx])
                rows.append(["fibre", kind.label, f"{s}G", "", f"{lclass}m", len(ls)])
            else:
                tails = b_gbps // s  # the breakout's tails (some may stay unused)
                spec_ = f"{b_gbps}G" + (f" to {tails}x{s}G breakout" if tails > 1 else "")
                rows.append([f"{medium.label}_cable", kind.label, spec_, "", f"{lclass}m",
                             len(phys)])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["item", "role", "model", "ports", "length_class", "count"])
    w.writerows(rows)
    return buf.getvalue()
