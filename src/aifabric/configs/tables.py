"""Fabric-wide tables: the cabling plan, the address and ASN plan, the bill of materials.

All three are CSV, built column by column with numpy string operations (no Python
loop over links), sorted deterministically.

* ``cabling.csv``: one row per cabled link: tier, a-end device/port (the lower end),
  b-end device/port, speed, medium, length and length class, and the cable it rides on
  (a breakout cable serves every logical port of one physical switch port).
* ``addressing.csv``: one row per interface address: switch loopbacks, both ends of
  every point-to-point /31, every NIC /32, every ToR's anycast gateway; with the ASN of
  switches.
* ``bom.csv``: switches per tier and model, hosts, GPUs, NICs, cables per tier,
  medium, speed and length class, transceivers.
* ``mgmt-cabling.csv`` (a spec with ``management:``): one row per management cable:
  every managed port (switch ``eth0``, host OS NIC, BMC) to its access switch port, and
  every access switch uplink to its aggregation switch (``mgmt_uplink``) and, with a
  management core, every aggregation switch uplink to its core switch
  (``mgmt_core_uplink``) (:mod:`aifabric.topology.management`). The management network also adds its
  addresses to ``addressing.csv`` (kinds ``mgmt``, ``bmc``, ``mgmt_switch``; the peer
  is the access switch port) and its switches, patch cables and uplink optics to
  ``bom.csv`` (roles ``mgmt_access``, ``mgmt_agg``, ``mgmt_core``, ``mgmt_uplink``).
"""

from __future__ import annotations

import csv
import io

import numpy as np

from aifabric.configs._ports import LENGTH_CLASSES_M, Endpoints, device_names, port_names
from aifabric.configs.addressing import AddressPlan, ip_str
from aifabric.topology import LinkKind, Medium, NodeKind
from aifabric.topology.management import KINDS, ManagementPlan
from aifabric.topology.parts import fmt

__all__ = ["addressing_csv", "bom_csv", "cabling_csv", "mgmt_cabling_csv"]


def _join(cols: list[np.ndarray], header: list[str]) -> str:
    if len(cols[0]) == 0:
        return ",".join(header) + "\n"
    line = cols[0].astype(np.str_)
    for c in cols[1:]:
        line = np.strings.add(np.strings.add(line, ","), np.asarray(c).astype(np.str_))
    return ",".join(header) + "\n" + "\n".join(line.tolist()) + "\n"


def _labels(values: np.ndarray, table: dict[int, str]) -> np.ndarray:
    lut = np.array([table.get(i, "") for i in range(max(table) + 1)])
    return lut[values]


def cabling_csv(plan: AddressPlan, ends: Endpoints) -> str:
    f = plan.fabric
    li = f.links
    cab = np.flatnonzero(li.kind >= LinkKind.ACCESS)
    a, b = li.a[cab], li.b[cab]
    tier = _labels(li.kind[cab], {k.value: k.label for k in LinkKind})
    medium = _labels(li.medium[cab], {m.value: m.label for m in Medium})
    lengths = np.zeros(len(cab))
    lat = f.spec.latency
    for k, m in ((LinkKind.ACCESS, lat.access_m), (LinkKind.LEAF_SPINE, lat.leaf_spine_m),
                 (LinkKind.SPINE_CORE, lat.spine_core_m)):
        lengths[li.kind[cab] == k] = m
    classes = np.array(LENGTH_CLASSES_M)
    lclass = classes[np.minimum(np.searchsorted(classes, lengths - 1e-9), len(classes) - 1)]
    # the cable: the b-end's physical port for DAC/AOC (breakout tails share it), else
    # one fibre per link
    bphys = f.physical_port(b, li.b_port[cab])
    bdev = device_names(f, b)
    cable = np.where(np.isin(li.medium[cab], (Medium.DAC, Medium.AOC)),
                     fmt(bdev, "/p", bphys + 1), fmt("fibre-", cab))
    cols = [cab, tier, device_names(f, a), port_names(f, a, li.a_port[cab]), bdev,
            port_names(f, b, li.b_port[cab]), li.capacity_gbps[cab, 0].astype(np.int64),
            medium, np.char.mod("%g", lengths), fmt(lclass, "m"), cable]
    return _join(cols, ["link", "tier", "a_device", "a_port", "b_device", "b_port",
                        "speed_gbps", "medium", "length_m", "length_class", "cable"])


def _length_class(metres: float) -> int:
    classes = np.array(LENGTH_CLASSES_M)
    return int(classes[min(np.searchsorted(classes, metres - 1e-9), len(classes) - 1)])


def mgmt_cabling_csv(mg: ManagementPlan) -> str:
    """``mgmt-cabling.csv``: every management access cable, then every uplink (access to
    aggregation, tier ``mgmt_uplink``), then, with a management core, every aggregation
    switch's uplink to a core switch (tier ``mgmt_core_uplink``)."""
    m = mg.spec
    sel = mg.kind <= KINDS.index("bmc")  # managed ports, in row order
    acc_dev, acc_port = mg.access_ends()
    core = mg.core_uplinks()
    up_a, up_ap, up_b, up_bp = (np.concatenate(x)
                                for x in zip(mg.uplinks(), core, strict=True))
    n, u, c = mg.ports, len(up_a), len(core[0])
    cols = [np.arange(n + u),
            np.concatenate([np.full(n, "mgmt_access"), np.full(u - c, "mgmt_uplink"),
                            np.full(c, "mgmt_core_uplink")]),
            np.concatenate([mg.device[sel], up_a]),
            np.concatenate([mg.interface[sel], up_ap]),
            np.concatenate([acc_dev, up_b]), np.concatenate([acc_port, up_bp]),
            np.concatenate([np.full(n, m.port_gbps), np.full(u, m.uplink_gbps)]),
            np.concatenate([np.full(n, "copper"), np.full(u, m.uplink_medium)]),
            np.concatenate([np.full(n, f"{m.access_m:g}"), np.full(u, f"{m.uplink_m:g}")]),
            np.concatenate([np.full(n, f"{_length_class(m.access_m)}m"),
                            np.full(u, f"{_length_class(m.uplink_m)}m")])]
    return _join(cols, ["cable", "tier", "a_device", "a_port", "b_device", "b_port",
                        "speed_gbps", "medium", "length_m", "length_class"])


def _mgmt_address_part(mg: ManagementPlan) -> tuple[np.ndarray, ...]:
    """addressing.csv rows of the management network (the 8 columns)."""
    labels = np.array(["mgmt", "mgmt", "bmc", "mgmt_switch", "mgmt_switch", "mgmt_switch"])
    n = len(mg.address)
    peer, peer_if = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    acc_dev, acc_port = mg.access_ends()
    peer[:mg.ports], peer_if[:mg.ports] = acc_dev, acc_port
    return (mg.device, mg.interface, ip_str(mg.address), np.full(n, mg.prefixlen),
            labels[mg.kind], np.full(n, "", dtype="<U1"), peer.astype(np.str_),
            peer_if.astype(np.str_))


def addressing_csv(plan: AddressPlan, ends: Endpoints,
                   mgmt: ManagementPlan | None = None) -> str:
    f = plan.fabric
    nodes = f.nodes
    sw = plan.switches
    li = f.links
    p = plan.p2p
    nic = f.ids(NodeKind.NIC)
    first_port = nic[np.unique(nodes.ip[nic], return_index=True)[1]]  # one row per NIC
    first_port = np.sort(first_port)
    bonded = f.spec.hosts.ports_per_nic > 1
    nic_if = (fmt("bond", nodes.rail[first_port]) if bonded
              else port_names(f, first_port, np.zeros(len(first_port), dtype=np.int32)))
    tors = f.ids(NodeKind.TOR)
    empty = lambda n: np.full(n, "", dtype="<U1")  # noqa: E731
    parts = [
        # device, interface, address, prefixlen, kind, asn, peer device, peer interface
        (nodes.name[sw], np.full(len(sw), "Loopback0"), ip_str(plan.loopback[sw]),
         np.full(len(sw), 32), np.full(len(sw), "loopback"), plan.asn[sw].astype(np.str_),
         empty(len(sw)), empty(len(sw))),
        (nodes.name[li.a[p]], port_names(f, li.a[p], li.a_port[p]), ip_str(plan.p2p_a[p]),
         np.full(len(p), 31), np.full(len(p), "p2p"), plan.asn[li.a[p]].astype(np.str_),
         nodes.name[li.b[p]], port_names(f, li.b[p], li.b_port[p])),
        (nodes.name[li.b[p]], port_names(f, li.b[p], li.b_port[p]), ip_str(plan.p2p_b[p]),
         np.full(len(p), 31), np.full(len(p), "p2p"), plan.asn[li.b[p]].astype(np.str_),
         nodes.name[li.a[p]], port_names(f, li.a[p], li.a_port[p])),
        (device_names(f, first_port), nic_if, ip_str(nodes.ip[first_port]),
         np.full(len(first_port), 32), np.full(len(first_port), "nic"), empty(len(first_port)),
         empty(len(first_port)), empty(len(first_port))),
        (nodes.name[tors], np.full(len(tors), f"Vlan{f.spec.deploy.nic.host_vlan}"),
         np.full(len(tors), plan.gateway_str), np.full(len(tors), plan.gateway_prefixlen),
         np.full(len(tors), "anycast_gateway"), plan.asn[tors].astype(np.str_),
         empty(len(tors)), empty(len(tors))),
    ]
    if mgmt is not None:
        parts.append(_mgmt_address_part(mgmt))
    cols = [np.concatenate([np.asarray(part[i]).astype(np.str_) for part in parts])
            for i in range(8)]
    return _join(cols, ["device", "interface", "address", "prefixlen", "kind", "asn",
                        "peer_device", "peer_interface"])


def _mgmt_bom_rows(mg: ManagementPlan) -> list[list[str | int]]:
    """bom.csv rows of the management network: its switches, copper patch cables and
    uplink cables (or fibres and transceivers)."""
    m = mg.spec
    rows: list[list[str | int]] = [
        ["switch", "mgmt_access", "management access", f"{m.ports_per_switch}x1G+"
         f"{m.uplinks}x{m.uplink_gbps}G", "", mg.access_switches]]
    if mg.agg_switches:  # with a core, each has one more port: its core uplink
        core_port = f"+1x{m.uplink_gbps}G" if mg.core_switches else ""
        rows.append(["switch", "mgmt_agg", "management aggregation",
                     f"{m.agg_ports}x{m.uplink_gbps}G{core_port}", "", mg.agg_switches])
    if mg.core_switches:
        rows.append(["switch", "mgmt_core", "management core",
                     f"{m.agg_ports}x{m.uplink_gbps}G", "", mg.core_switches])
    rows.append(["copper_cable", "mgmt_access", "1G RJ45 Cat6", "",
                 f"{_length_class(m.access_m)}m", mg.ports])
    n_up = mg.as_dict()["uplink_cables"]  # access and (with a core) aggregation uplinks
    if n_up:
        lclass = f"{_length_class(m.uplink_m)}m"
        if m.uplink_medium == "optic":
            rows.append(["transceiver", "mgmt_uplink", f"{m.uplink_gbps}G", "", "", 2 * n_up])
            rows.append(["fibre", "mgmt_uplink", f"{m.uplink_gbps}G", "", lclass, n_up])
        else:
            rows.append([f"{m.uplink_medium}_cable", "mgmt_uplink", f"{m.uplink_gbps}G", "",
                         lclass, n_up])
    return rows


def bom_csv(plan: AddressPlan, ends: Endpoints, mgmt: ManagementPlan | None = None) -> str:
    f = plan.fabric
    nodes, li = f.nodes, f.links
    h = f.spec.hosts
    rows: list[list[str | int]] = []
    for k in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE):
        ids = f.ids(k)
        for mi in np.unique(nodes.model[ids]):
            name, model = f.models[int(mi)]
            n = int((nodes.model[ids] == mi).sum())
            rows.append(["switch", k.label, name, f"{model.ports}x{model.port_gbps}G", "", n])
    hosts = f.ids(NodeKind.HOST)
    backup = int(nodes.backup[hosts].sum())
    rows.append(["server", "active", f"{h.gpus_per_host} GPU", "", "", len(hosts) - backup])
    if backup:
        rows.append(["server", "backup", f"{h.gpus_per_host} GPU", "", "", backup])
    gpus = f.ids(NodeKind.GPU)
    gpu_backup = int(nodes.backup[gpus].sum())
    rows.append(["gpu", "active", "", "", "", len(gpus) - gpu_backup])
    if gpu_backup:
        rows.append(["gpu", "backup", "", "", "", gpu_backup])
    rows.append(["nic", "", f"{h.ports_per_nic}x{h.port_gbps}G", "", "",
                 len(hosts) * h.nics_per_host])
    classes = np.array(LENGTH_CLASSES_M)
    lat = f.spec.latency
    for kind, metres in ((LinkKind.ACCESS, lat.access_m), (LinkKind.LEAF_SPINE,
                                                             lat.leaf_spine_m),
                         (LinkKind.SPINE_CORE, lat.spine_core_m)):
        sel = li.kind == kind
        if not sel.any():
            continue
        lclass = int(classes[min(np.searchsorted(classes, metres - 1e-9), len(classes) - 1)])
        medium = Medium(int(li.medium[sel][0]))
        sw_ends = []
        for end, port in ((li.a[sel], li.a_port[sel]), (li.b[sel], li.b_port[sel])):
            s = f.is_switch[end]
            phys = np.unique(end[s].astype(np.int64) * 65536 + f.physical_port(end[s], port[s]))
            sw_ends.append((phys, s))
        speed = int(li.capacity_gbps[sel, 0][0])
        b_phys = sw_ends[1][0]
        b_gbps = f.models[int(nodes.model[li.b[sel][0]])][1].port_gbps
        if medium == Medium.OPTIC:
            trx = sum(len(p) + int((~s).sum()) for p, s in sw_ends)
            rows.append(["transceiver", kind.label, f"{b_gbps}G", "", "", trx])
            rows.append(["fibre", kind.label, f"{speed}G", "", f"{lclass}m", int(sel.sum())])
        else:
            tails = int(sel.sum()) // max(1, len(b_phys))
            spec_ = f"{b_gbps}G" + (f" to {tails}x{speed}G breakout" if tails > 1 else "")
            rows.append([f"{medium.label}_cable", kind.label, spec_, "", f"{lclass}m",
                         len(b_phys)])
    if mgmt is not None:
        rows += _mgmt_bom_rows(mgmt)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["item", "role", "model", "ports", "length_class", "count"])
    w.writerows(rows)
    return buf.getvalue()
