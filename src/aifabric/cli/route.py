"""``aifabric route``: where the flows of a scenario go, and which links collide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import numpy as np
import typer
from rich.table import Table

from aifabric.cli._common import MAX_MEMORY, build, console, styled
from aifabric.errors import Problem, SpecError
from aifabric.routing.route import Routed
from aifabric.routing.scenario import path_names, run_scenario
from aifabric.routing.stats import TIERS, tier_of_arcs
from aifabric.scenario import Scenario, load_scenario
from aifabric.spec.models import Routing
from aifabric.topology.fabric import Fabric, NodeKind

__all__ = ["route_cmd", "run_scenario"]


def _mib(x: float) -> str:
    return f"{x / 2**20:,.2f}"


def _render(rep: dict[str, Any]) -> None:
    s, pol = rep["stats"], rep["policy"]
    console.print(styled((rep["scenario"], "bold"),
                         f" — fabric {rep['fabric']} ({rep['family']}), "
                         f"policy {pol['policy']} ({pol['hash']}, seed {pol['seed']} "
                         f"{pol['seed_mode']}, {pol['selection']}), "
                         f"{pol['qps_per_connection']} QP(s) per connection by default"))
    console.print(f"  flows {s['flows']:,} ({s['connections']:,} connections, "
                  f"{s['bytes'] / 2**30:,.2f} GiB)   network {s['network_flows']:,}   "
                  f"NVLink only {s['nvlink_only_flows']:,}   unreachable "
                  f"{s['unreachable_flows']:,}   moved {s['moved_flows']:,}")
    t = Table(title="link load per tier (candidate links: those leaving nodes that send in "
              "the tier)", title_justify="left")
    for col in ("tier", "links", "used", "idle", "mean MiB", "max MiB", "max/mean",
                "max flows"):
        t.add_column(col, justify="left" if col == "tier" else "right")
    for label, row in s["tiers"].items():
        if not row["arcs"]:
            continue
        t.add_row(label, f"{row['arcs']:,}", f"{row['used']:,}",
                  f"{row['idle_fraction']:.1%}", _mib(row["mean_bytes"]),
                  _mib(row["max_bytes"]), f"{row['max_over_mean']:.2f}",
                  f"{row['max_flows']:,}")
    console.print(t)
    console.print(f"idle uplinks (ToR and agg): {s['idle_uplink_fraction']:.1%}")
    b = s["busiest_link"]
    if b:
        console.print(f"most flows on one link: {b['flows']:,} on {b['from']} -> {b['to']} "
                      f"({b['tier']}, {_mib(b['bytes'])} MiB)")
    two = s["two_port_ratio"]
    if two:
        console.print(f"two-port load ratio of dual-port NICs ({two['nics']:,} NICs with "
                      f"traffic): p50 {two['p50']}  p99 {two['p99']}  max {two['max']}  "
                      f"(one port idle: {two['one_port_idle']:,})")
    if "source_ports_unmatched" in s:
        console.print(f"source ports: {s['source_ports_unmatched']:,} flows found no port "
                      "hitting their wanted uplink")
    fail = rep.get("failures")
    if fail:
        im, fl = fail["impact"], fail["flows"]
        lost = ", ".join(f"{x['hosts']:,} hosts lose {x['fraction']:.2%}"
                         for x in im["host_bandwidth_lost"]) or "none"
        console.print(f"failures: {im['links_down']:,} links down, {im['nic_ports_down']:,} "
                      f"NIC ports down; NICs degraded {im['nics_degraded']:,}, isolated "
                      f"{im['nics_isolated']:,}; hosts degraded {im['hosts_degraded']:,}, "
                      f"unreachable {im['hosts_unreachable']:,}")
        console.print(f"  host scale-out bandwidth lost: {lost}")
        if im["unreachable_hosts"]:
            n_un = len(im["unreachable_hosts"])
            console.print(f"  unreachable hosts: {', '.join(im['unreachable_hosts'])}"
                          + (f" ({n_un} of {im['hosts_unreachable']:,} shown)"
                             if im["hosts_unreachable"] > n_un else ""))
        console.print(f"  flows: moved to the other NIC port {fl['moved_port']:,}, rerouted "
                      f"in the network {fl['rerouted']:,}, unreachable "
                      f"{fl['unreachable']:,} (newly {fl['newly_unreachable']:,})")


# ------------------------------------------------------------------ tables
def _iface(f: Fabric, node: np.ndarray, port: np.ndarray) -> np.ndarray:
    kind = f.nodes.kind[node]
    sw = np.isin(kind, (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE))
    nic = kind == NodeKind.NIC
    out = np.full(len(node), "", dtype=object)
    out[sw] = np.strings.add("Ethernet", port[sw].astype(np.str_)).astype(object)
    r = f.nodes.rail[node[nic]].astype(np.str_)
    s = f.nodes.side[node[nic]].astype(np.str_)
    out[nic] = np.strings.add(np.strings.add(np.strings.add("ens", r), "f"), s).astype(object)
    return out


def _device(f: Fabric, node: np.ndarray) -> np.ndarray:
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
        "from": _device(f, src), "from_port": _iface(f, src, sport),
        "to": _device(f, dst), "to_port": _iface(f, dst, dport),
        "capacity_gbps": cap, "alive": np.repeat(routed.alive, 2),
        "flows": routed.arc_flows(), "bytes": routed.arc_bytes(),
    }


def _ip(x: np.ndarray) -> np.ndarray:
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
        "src_ip": _ip(fl.src_ip), "dst_ip": _ip(fl.dst_ip), "sport": fl.sport,
        "dport": fl.dport, "proto": fl.proto, "size_bytes": fl.size_bytes,
        "unreachable": routed.unreachable, "moved": routed.moved, "hops": hops,
        "path": path,
    }


def _write_table(cols: dict[str, np.ndarray], path: Path, fmt: str) -> None:
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({k: list(v) if v.dtype == object else v
                                 for k, v in cols.items()}), path)
        return
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(list(cols))
        w.writerows(zip(*(c.tolist() for c in cols.values()), strict=True))


def _histogram(routed: Routed, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # user text: no $math$
    import matplotlib.pyplot as plt

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
        ax.set_ylabel("links", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("load per link direction (MiB)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _write_out(out: Path, routed: Routed, report: dict[str, Any], fmt: str,
               record: str | None = None) -> list[str]:
    """Build every output in a temporary folder, then move it into ``out`` at once
    (:func:`aifabric.outputs.atomic_folder`); ``record``: the text of ``run.json``
    (:mod:`aifabric.runinfo`), what the run was made from."""
    from aifabric.outputs import ROUTE, atomic_folder

    ext = "parquet" if fmt == "parquet" else "csv"
    names = [f"links.{ext}", f"flows.{ext}", "link_load_hist.png", "report.json"]
    with atomic_folder(out, option="--out", **ROUTE) as tmp:
        _write_table(link_table(routed), tmp / names[0], fmt)
        _write_table(flow_table(routed), tmp / names[1], fmt)
        _histogram(routed, tmp / names[2])
        (tmp / names[3]).write_text(json.dumps(report, indent=2), encoding="utf-8")
        if record is not None:
            (tmp / "run.json").write_text(record, encoding="utf-8")
            names.append("run.json")
    return names


def _with_spec(sc: Scenario, spec: Any) -> Scenario:
    out = sc.model_copy(update={"spec": spec})
    out._file, out._base_dir, out._spec_file = sc._file, sc._base_dir, sc._spec_file
    return out


def route_cmd(
    scenario: Path = typer.Argument(..., help="scenario (YAML)", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    out: Path | None = typer.Option(None, "--out", help="write links, flows, a histogram"),
    fmt: str = typer.Option("csv", "--format", help="table format under --out: csv or parquet"),
    policy: str | None = typer.Option(None, "--policy",
                                      help="override the scenario's routing policy"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Where the flows of a scenario go: per-tier link loads, idle uplinks, the most
    loaded link, dual-ToR port balance, failover."""
    if fmt not in ("csv", "parquet"):
        raise SpecError(Problem("--format", f"unknown format {fmt!r}; allowed: csv, parquet"))
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise SpecError(Problem("--format", "parquet needs pyarrow, which is an extra: "
                                    "pip install -e '.[parquet]' (or pip install "
                                    "'aifabric[parquet]'); allowed without it: csv")) from None
    if out is not None:  # a bad --out fails before routing, not after
        from aifabric.outputs import ROUTE, check_target

        check_target(out, option="--out", folder=True, **ROUTE)
    sc = load_scenario(scenario)
    if policy is not None:
        allowed = get_args(Routing.model_fields["policy"].annotation)
        if policy not in allowed:
            raise SpecError(Problem("--policy", f"unknown policy {policy!r}; allowed: "
                                    f"{', '.join(allowed)}"))
        spec = sc.spec.model_copy(update={"routing": sc.policy.model_copy(
            update={"policy": policy})})
        sc = _with_spec(sc, spec)
    fabric = build(sc.spec, sc.spec_file or scenario)
    routed, report = run_scenario(sc, fabric)
    if out is not None:
        from aifabric.runinfo import run_record_text

        _write_out(out, routed, report, fmt, record=run_record_text(sc, "route", scenario))
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    _render(report)
    if out is not None:
        console.print(f"wrote {out}/: links, flows, link_load_hist.png, report.json, "
                      "run.json")
