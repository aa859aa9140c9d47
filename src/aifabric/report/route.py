"""What ``aifabric route --out`` writes: one row per link direction (ends, interfaces,
tier, capacity, state, flows, bytes), one row per flow (endpoints, 5-tuple, path), a
histogram of the link loads per tier and report.json, all at once into one folder. The
tables' floats are written as Python's shortest repr (``write_table(...,
float_format=None)``), not the simulation tables' ``%.10g``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.report.write import write_table
from aifabric.routing.route import Routed
from aifabric.routing.scenario import path_names
from aifabric.routing.stats import TIERS, tier_of_arcs
from aifabric.topology.fabric import Fabric, NodeKind

__all__ = ["device", "flow_table", "iface", "ip_text", "link_table", "write_histogram",
           "write_route"]


def iface(f: Fabric, node: np.ndarray, port: np.ndarray) -> np.ndarray:
    kind = f.nodes.kind[node]
    sw = np.isin(kind, (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE))
    nic = kind == NodeKind.NIC
    out = np.full(len(node), "", dtype=object)
    out[sw] = np.strings.add("Ethernet", port[sw].astype(np.str_)).astype(object)
    r = f.nodes.rail[node[nic]].astype(np.str_)
    s = f.nodes.side[node[nic]].astype(np.str_)
    out[nic] = np.strings.add(np.strings.add(np.strings.add("ens", r), "f"), s).astype(object)
    return out


def device(f: Fabric, node: np.ndarray) -> np.ndarray:
    nic = f.nodes.kind[node] == NodeKind.NIC
    dev = f.nodes.name[node].astype(object)
    dev[nic] = f.nodes.name[f.host_node[f.nodes.host[node[nic]]]].astype(object)
    return dev


def link_table(routed: Routed) -> dict[str, np.ndarray]:
    """One row per link direction: ends, interfaces, tier, capacity, state, flows, bytes."""
    f = routed.fabric
    src, dst, cap = f.arcs
    arc = np.arange(2 * f.n_links)
    link = arc // 2
    up = arc % 2 == 0
    links = f.links
    sport = np.where(up, links.a_port[link], links.b_port[link])
    dport = np.where(up, links.b_port[link], links.a_port[link])
    tier_idx = tier_of_arcs(routed)
    labels = np.array([t[0] for t in TIERS], dtype=object)
    return {
        "arc": arc, "link": link, "direction": np.where(up, "up", "down").astype(object),
        "tier": labels[tier_idx],
        "from": device(f, src), "from_port": iface(f, src, sport),
        "to": device(f, dst), "to_port": iface(f, dst, dport),
        "capacity_gbps": cap, "alive": np.repeat(routed.alive, 2),
        "flows": routed.arc_flows(), "bytes": routed.arc_bytes(),
    }


def ip_text(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint32)
    parts = [((x >> np.uint32(s)) & np.uint32(255)).astype(np.str_) for s in (24, 16, 8, 0)]
    out = parts[0]
    for p in parts[1:]:
        out = np.strings.add(np.strings.add(out, "."), p)
    return np.where(x == 0, "", out).astype(object)


def flow_table(routed: Routed) -> dict[str, np.ndarray]:
    """One row per flow: endpoints, NIC ports, 5-tuple, bytes, state, path (node names)."""
    f = routed.fabric
    fl = routed.flows
    names = f.nodes.name.astype(object)
    nic_name = np.where(fl.src_nic >= 0, names[np.maximum(fl.src_nic, 0)], "")
    dnic_name = np.where(fl.dst_nic >= 0, names[np.maximum(fl.dst_nic, 0)], "")
    n = len(fl)
    hops = np.diff(routed.ptr)
    path = path_names(routed)  # node names along the path; sprayed: see the links table
    return {
        "flow": np.arange(n), "conn": fl.conn, "qp": fl.qp,
        "src_gpu": names[fl.src_gpu], "dst_gpu": names[fl.dst_gpu],
        "src_nic": nic_name, "dst_nic": dnic_name,
        "src_ip": ip_text(fl.src_ip), "dst_ip": ip_text(fl.dst_ip), "sport": fl.sport,
        "dport": fl.dport, "proto": fl.proto, "size_bytes": fl.size_bytes,
        "unreachable": routed.unreachable, "moved": routed.moved, "hops": hops,
        "path": path,
    }


def write_histogram(routed: Routed, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # user text: no $math$
    import matplotlib.pyplot as plt

    from aifabric.sim.plotting import MIN_FONT_PT

    by = routed.arc_bytes()
    tier = tier_of_arcs(routed)
    src, dst, _ = routed.fabric.arcs
    shown = []
    for i, (label, _, _) in enumerate(TIERS):
        sel = tier == i
        senders = np.zeros(routed.fabric.n_nodes, dtype=bool)
        senders[src[sel & (by > 0)]] = True
        backup = routed.fabric.nodes.backup
        cand = sel & senders[src] & np.repeat(routed.alive, 2) & ~backup[src] & ~backup[dst]
        if cand.any():
            shown.append((label, by[cand] / 2**20))
    fig, axes = plt.subplots(len(shown) or 1, 1, figsize=(7, 1.9 * max(1, len(shown))),
                             squeeze=False)
    for ax, (label, v) in zip(axes[:, 0], shown, strict=False):
        ax.hist(v, bins=40, color="#4477aa")
        ax.set_title(f"{label}: {len(v):,} links, {int((v == 0).sum()):,} idle", fontsize=9)
        ax.set_ylabel("links", fontsize=MIN_FONT_PT)
        ax.tick_params(labelsize=MIN_FONT_PT)
    axes[-1, 0].set_xlabel("load per link direction (MiB)", fontsize=MIN_FONT_PT)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_route(out: Path, routed: Routed, report: dict[str, Any], fmt: str,
                record: str | None = None, option: str = "--out") -> list[str]:
    """Write what ``route --out`` writes: links and flows tables, a histogram,
    report.json and (``record``) run.json, all at once into ``out``
    (:func:`aifabric.outputs.atomic_folder`); returns the file names."""
    from aifabric.outputs import ROUTE, atomic_folder

    ext = "parquet" if fmt == "parquet" else "csv"
    names = [f"links.{ext}", f"flows.{ext}", "link_load_hist.png", "report.json"]
    with atomic_folder(out, option=option, **ROUTE) as tmp:
        write_table(tmp / names[0], link_table(routed), fmt, float_format=None)
        write_table(tmp / names[1], flow_table(routed), fmt, float_format=None)
        write_histogram(routed, tmp / names[2])
        (tmp / names[3]).write_text(json.dumps(report, indent=2), encoding="utf-8")
        if record is not None:
            (tmp / "run.json").write_text(record, encoding="utf-8")
            names.append("run.json")
    return names
