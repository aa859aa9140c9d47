"""``aifabric plan``: the design of a fabric from a spec, side by side for several specs,
or candidate designs for a cluster size when no spec is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from aifabric import api
from aifabric.cli._common import MAX_MEMORY, console, load_specs, styled, write_atomic
from aifabric.errors import Problem, SpecError
from aifabric.planning import PAIR_KINDS, plan_fabric
from aifabric.planning.propose import RANK_RULE
from aifabric.spec import dump_spec


def _gbps(x: float) -> str:
    for unit, div in (("Pb/s", 1e6), ("Tb/s", 1e3)):
        if x >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f} Gb/s"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:g}:1"


def _hops(h: dict[str, Any] | None) -> str:
    return "-" if h is None else f"{h['switch_hops']} ({h['latency_ns'] / 1000:.2f} us)"


def _render(p: dict[str, Any]) -> None:
    console.print(styled((p["name"], "bold"), f" — {p['family']}: {p['tiers']} switch tiers, "
                         f"{p['pods']} pod(s), {p['segments']} segments, {p['planes']} "
                         f"plane(s), {p['rails']} rails"))
    console.print(f"  GPUs {p['gpus']:,} (+{p['backup_gpus']:,} backup)   hosts {p['hosts']:,} "
                  f"(+{p['backup_hosts']:,} backup)   NIC ports {p['nic_ports']:,}   "
                  f"scale-out {p['scaleout_gbps_per_gpu']:g} Gb/s per GPU")
    sw = Table(title="switches", title_justify="left")
    sw.add_column("tier")
    sw.add_column("count", justify="right")
    sw.add_column("ports used (max)", justify="right")
    sw.add_column("oversubscription", justify="right")
    for tier in ("tor", "agg", "core"):
        if p["switches"][tier]:
            sw.add_row(tier, f"{p['switches'][tier]:,}", p["max_port_use"].get(tier, "-"),
                       _ratio(p["oversubscription"].get(tier)))
    sw.add_row("total", f"{p['switches']['total']:,}", "", "")
    lk = Table(title="links", title_justify="left")
    lk.add_column("tier")
    lk.add_column("speed", justify="right")
    lk.add_column("count", justify="right")
    for row in p["links"]:
        lk.add_row(row["tier"], f"{row['gbps']:g}G", f"{row['count']:,}")
    cab = Table(title="optics and cables", title_justify="left")
    cab.add_column("item")
    cab.add_column("count", justify="right")
    for key, val in p["cabling"].items():
        if key != "by_tier":
            cab.add_row(key, f"{val:,}")
    for tier, info in p["cabling"]["by_tier"].items():
        cab.add_row(f"{tier} medium", info["medium"])
    hp = Table(title="GPU to GPU: switch hops (base latency)", title_justify="left")
    hp.add_column("pair")
    hp.add_column("hops", justify="right")
    for kind in PAIR_KINDS:
        hp.add_row(kind.replace("_", " "), _hops(p["hops"][kind]))
    console.print(sw, lk, cab, hp)
    if p.get("scheduled"):
        _render_scheduled(p["scheduled"])
    if "scaleup" in p:
        console.print(_scaleup_table(p["scaleup"]))
    if "frontend" in p:
        console.print(_frontend_table(p["frontend"]))
    if "management" in p:
        console.print(_management_table(p["management"]))
    if "bisection_gbps" in p:
        console.print(f"bisection bandwidth: {_gbps(p['bisection_gbps'])} "
                      f"({p['bisection_gbps_per_gpu']:g} Gb/s per GPU)")


def _render_scheduled(s: dict[str, Any]) -> None:
    """The scheduled fabric's elements, cell overhead and usable bandwidth."""
    t = Table(title="scheduled fabric (VOQs, credits, cells)", title_justify="left")
    t.add_column("element")
    t.add_column("", justify="right")
    t.add_row("edge switches (VOQs, credits, reorder)", f"{s['edge_switches']:,}")
    t.add_row("VOQs per edge (one per destination port)",
              f"{s['voqs_per_edge']:,} x {s['voq_depth_bytes']:,} B")
    t.add_row("host ports / fabric uplinks per edge",
              f"{s['host_ports_per_edge']} / {s['fabric_uplinks_per_edge']}")
    t.add_row("fabric-only switches (cells only)", f"{s['fabric_switches']:,}")
    t.add_row("cell (header)", f"{s['cell_bytes']} B ({s['cell_header_bytes']} B)")
    t.add_row(f"cells per {s['frame_bytes']} B RoCE frame", str(s["cells_per_frame"]))
    t.add_row("cell overhead", f"{s['cell_overhead_percent']:.2f}%")
    t.add_row("fabric speedup", f"{s['speedup']:g}x")
    t.add_row("fabric / host bandwidth per edge",
              f"{_gbps(s['fabric_gbps_per_edge'])} / {_gbps(s['host_gbps_per_edge'])}")
    t.add_row("usable bandwidth (share of host ports)",
              f"{_gbps(s['usable_gbps'])} ({100 * s['usable_fraction']:.1f}%)")
    t.add_row("spray / toward hosts", f"{s['spray']} / {s['host_protocol']} (PFC, ECN)")
    t.add_row("request-grant / grant window",
              f"{s['request_grant_ns']:,} ns / {s['grant_window_bytes']:,} B")
    t.add_row("reorder buffer per egress port", f"{s['reorder_buffer_bytes']:,} B")
    console.print(t)


def _scaleup_table(u: dict[str, Any]) -> Table:
    """The scale-up domains and both dimensions' bandwidth per GPU, side by side."""
    t = Table(title=f"scale-up domains: {u['domains']:,} x {u['gpus_per_domain']} GPUs "
              f"({u['hosts_per_domain']} host(s) each), {u['switch']} "
              f"{u['switch_ports']} x {u['switch_port_gbps']:g}G, NVLS "
              f"{'on' if u['nvls'] else 'off'}", title_justify="left")
    t.add_column("item")
    t.add_column("per domain", justify="right")
    t.add_column("total", justify="right")
    t.add_row("switch chips", f"{u['switch_chips_per_domain']:,}", f"{u['switch_chips']:,}")
    t.add_row("switch trays", f"{u['switch_trays_per_domain']:,}", f"{u['switch_trays']:,}")
    t.add_row("NVLink links", f"{u['nvlink_links_per_domain']:,}", f"{u['nvlink_links']:,}")
    t.add_row("NVLink cables (spine)", f"{u['nvlink_cables'] // max(1, u['domains']):,}",
              f"{u['nvlink_cables']:,}")
    t.add_row("cartridges", f"{u['cartridges'] // max(1, u['domains']):,}",
              f"{u['cartridges']:,}")
    bw = Table(title="bandwidth per GPU (per direction)", title_justify="left")
    bw.add_column("scale-up (NVLink)", justify="right")
    bw.add_column("scale-out (NICs)", justify="right")
    bw.add_column("ratio", justify="right")
    ratio = u["scaleup_to_scaleout"]
    bw.add_row(f"{_gbps(u['scaleup_gbps_per_gpu'])} ({u['links_per_gpu']} x "
               f"{u['link_gbps']:g}G)", _gbps(u["scaleout_gbps_per_gpu"]),
               "-" if ratio is None else f"{ratio:g}:1")
    grid = Table.grid()
    grid.add_row(t)
    grid.add_row(bw)
    return grid


_COMPARE_ROWS: list[tuple[str, Any]] = [
    ("family", lambda p: p["family"]),
    ("GPUs", lambda p: f"{p['gpus']:,}"),
    ("hosts (+backup)", lambda p: f"{p['hosts']:,} (+{p['backup_hosts']:,})"),
    ("segments / pods / planes", lambda p: f"{p['segments']} / {p['pods']} / {p['planes']}"),
    ("switch tiers", lambda p: str(p["tiers"])),
    ("ToR / leaf", lambda p: f"{p['switches']['tor']:,}"),
    ("agg / spine", lambda p: f"{p['switches']['agg']:,}"),
    ("core", lambda p: f"{p['switches']['core']:,}"),
    ("switches", lambda p: f"{p['switches']['total']:,}"),
    ("transceivers", lambda p: f"{p['cabling'].get('transceivers', 0):,}"),
    ("oversub. ToR", lambda p: _ratio(p["oversubscription"].get("tor"))),
    ("oversub. agg", lambda p: _ratio(p["oversubscription"].get("agg"))),
    ("bisection per GPU", lambda p: f"{p['bisection_gbps_per_gpu']:g} Gb/s"
     if "bisection_gbps_per_gpu" in p else "-"),
    *[(f"hops {k.replace('_', ' ')}", lambda p, k=k: _hops(p["hops"][k])) for k in PAIR_KINDS],
]


def _management_table(m: dict[str, Any]) -> Table:
    """The out-of-band management network: addresses, switches, cables."""
    t = Table(title=f"management network (out of band): {m['pool']}, gateway "
              f"{m['gateway']}, {m['addresses']:,} addresses", title_justify="left")
    t.add_column("item")
    t.add_column("count", justify="right")
    t.add_column("each", justify="right")
    t.add_row("switch eth0 ports", f"{m['switch_ports']:,}", "1G")
    t.add_row("host OS management ports", f"{m['host_ports']:,}", "1G")
    t.add_row("host BMC ports", f"{m['bmc_ports']:,}", "1G")
    t.add_row("access switches", f"{m['access_switches']:,}",
              f"{m['ports_per_switch']} x 1G + {m['uplinks_per_switch']} up")
    t.add_row("aggregation switches", f"{m['agg_switches']:,}", f"{m['agg_ports']} ports"
              + (" + 1 up" if "core_switches" in m else ""))
    if "core_switches" in m:  # (only with more than one aggregation block)
        t.add_row(f"core switches ({m['agg_blocks']} aggregation blocks)",
                  f"{m['core_switches']:,}", f"{m['agg_ports']} ports")
    t.add_row("copper patch cables (1000BASE-T)", f"{m['copper_cables']:,}", "")
    t.add_row(f"uplink cables ({m['uplink_medium']})", f"{m['uplink_cables']:,}", "")
    if "uplink_transceivers" in m:
        t.add_row("uplink transceivers", f"{m['uplink_transceivers']:,}", "")
    return t


def _frontend_table(fe: dict[str, Any]) -> Table:
    """The frontend/storage network: leaves, spines, storage and its rates."""
    t = Table(title=f"frontend (storage) network: 2-tier, oversubscription "
              f"{fe['oversubscription']:g}:1", title_justify="left")
    t.add_column("item")
    t.add_column("count", justify="right")
    t.add_column("each", justify="right")
    t.add_row("compute hosts", f"{fe['hosts']:,}", _gbps(fe["host_gbps"]))
    t.add_row("host leaves", f"{fe['host_leaves']:,}", f"{fe['hosts_per_leaf']} hosts")
    t.add_row("storage nodes", f"{fe['storage_nodes']:,}", _gbps(fe["storage_gbps"]))
    t.add_row("storage leaves", f"{fe['storage_leaves']:,}",
              f"{fe['nodes_per_leaf']} nodes" if fe["storage_nodes"] else "-")
    t.add_row("spines", f"{fe['spines']:,}", _gbps(fe["leaf_up_gbps"]) + " up per leaf")
    t.add_row("storage media write / read", "",
              f"{fe['storage_write_gbytes_per_s']:,.0f} / "
              f"{fe['storage_read_gbytes_per_s']:,.0f} GB/s")
    return t


_SCALEUP_ROWS: list[tuple[str, Any]] = [
    ("scale-up domains", lambda u: f"{u['domains']:,} x {u['gpus_per_domain']} GPUs"),
    ("NVLink switch chips", lambda u: f"{u['switch_chips']:,}"),
    ("scale-up / scale-out per GPU", lambda u: f"{_gbps(u['scaleup_gbps_per_gpu'])} / "
     f"{_gbps(u['scaleout_gbps_per_gpu'])}"),
]


def _compare(plans: list[dict[str, Any]], title: str = "") -> Table:
    t = Table(title=title or None, title_justify="left")
    t.add_column("")
    for p in plans:
        t.add_column(p["name"], justify="right")
    for label, get in _COMPARE_ROWS:
        t.add_row(label, *[get(p) for p in plans])
    if any(p.get("scheduled") for p in plans):  # a scheduled fabric among them
        for label, key, fmt in _SCHEDULED_ROWS:
            t.add_row(label, *[fmt(p["scheduled"][key]) if p.get("scheduled") else "-"
                               for p in plans])
    if any("scaleup" in p for p in plans):  # only then: comparisons without stay as they were
        for label, get in _SCALEUP_ROWS:
            t.add_row(label, *[get(p["scaleup"]) if "scaleup" in p else "-" for p in plans])
    return t


#: rows ``plan --compare`` adds when a spec has a scheduled section
_SCHEDULED_ROWS: list[tuple[str, str, Any]] = [
    ("scheduled: edge switches", "edge_switches", lambda v: f"{v:,}"),
    ("scheduled: fabric-only switches", "fabric_switches", lambda v: f"{v:,}"),
    ("scheduled: cell overhead", "cell_overhead_percent", lambda v: f"{v:.2f}%"),
    ("scheduled: usable bandwidth", "usable_gbps", _gbps),
]


#: columns of the candidates table; oversub lists each tier's ratio (tor / agg / core)
_CANDIDATE_COLUMNS = ("rank", "design", "tiers", "tor", "agg", "core", "switches", "optics",
                      "oversub", "backup servers")


def _propose(gpus: int, nic_gbps: int, switch_ports: int, switch_gbps: int,
             gpus_per_host: int, nics_per_host: int, as_json: bool, write: Path | None) -> None:
    if write is not None:  # a bad --write fails before the search, not after
        from aifabric.outputs import check_target

        check_target(write, option="--write", folder=False)
    prop = api.propose(gpus=gpus, nic_gbps=nic_gbps, switch_ports=switch_ports,
                       switch_gbps=switch_gbps, gpus_per_host=gpus_per_host,
                       nics_per_host=nics_per_host, option="--gpus")
    best, order = prop.chosen, prop.candidates
    if write is not None:
        write_atomic(write, dump_spec(prop.spec), option="--write")
    if as_json:
        typer.echo(json.dumps(prop.to_dict(), indent=2))
        return
    t = Table(title=f"candidate designs for {gpus:,} GPUs, {nic_gbps}G NICs, "
              f"{switch_ports} x {switch_gbps}G switches", title_justify="left")
    for col in _CANDIDATE_COLUMNS:
        t.add_column(col, justify="left" if col == "design" else "right")
    for i, c in enumerate(order):
        if not c.fits:
            continue
        p = c.plan
        assert p is not None
        over = " / ".join(_ratio(p["oversubscription"][k]) for k in ("tor", "agg", "core")
                          if k in p["oversubscription"]) or "-"
        t.add_row(Text(str(i + 1)), Text(c.design), Text(str(p["tiers"])),
                  Text(f"{p['switches']['tor']:,}"), Text(f"{p['switches']['agg']:,}"),
                  Text(f"{p['switches']['core']:,}"), Text(f"{p['switches']['total']:,}"),
                  Text(f"{p['cabling'].get('transceivers', 0):,}"), Text(over),
                  Text(f"{p['backup_hosts']:,}"), style="bold green" if c is best else None)
    console.print(t)
    for c in order:
        if not c.fits:
            console.print(styled(f"{c.design}: ", ("does not fit", "red"), f": {c.reason}"))
    console.print(styled("chosen (rank 1): ", (best.label, "bold")))
    console.print(styled(f"ranked by: {RANK_RULE}"))
    if write is not None:
        console.print(f"wrote {write}")


def plan(
    specs: list[Path] = typer.Argument(None, metavar="SPEC",
                                       help="cluster spec(s) (YAML)", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    compare: bool = typer.Option(False, "--compare", help="several specs side by side"),
    gpus: int | None = typer.Option(None, "--gpus", min=1,
                                    help="no spec: propose designs for this many GPUs"),
    nic_gbps: int = typer.Option(400, "--nic-gbps", min=1, help="NIC speed per GPU, Gbit/s"),
    switch_ports: int = typer.Option(128, "--switch-ports", min=2, help="switch radix"),
    switch_gbps: int = typer.Option(400, "--switch-gbps", min=1, help="switch port speed"),
    gpus_per_host: int = typer.Option(8, "--gpus-per-host", min=1),
    nics_per_host: int = typer.Option(8, "--nics-per-host", min=1),
    write: Path | None = typer.Option(None, "--write", metavar="FILE",
                                      help="write the chosen design's spec"),
    bisection: bool = typer.Option(True, "--bisection/--no-bisection",
                                   help="compute bisection bandwidth (a max-flow)"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """The design of a fabric: counts per tier, links, optics, oversubscription,
    bisection bandwidth and hops between GPUs."""
    if not specs:
        if gpus is None:
            raise SpecError(Problem("SPEC", "give a spec file, or --gpus N to propose designs"))
        _propose(gpus, nic_gbps, switch_ports, switch_gbps, gpus_per_host, nics_per_host,
                 as_json, write)
        return
    if gpus is not None or write is not None:
        raise SpecError(Problem("--gpus", "--gpus/--write propose designs and take no spec "
                                "file; allowed: a spec file or --gpus, not both"))
    from aifabric.api import build_fabric

    loaded = load_specs(specs)
    plans = []
    problems: list[Problem] = []
    for path, spec in zip(specs, loaded, strict=True):
        try:
            plans.append(plan_fabric(build_fabric(spec, file=path), bisection=bisection))
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    if as_json:
        typer.echo(json.dumps(plans[0] if len(plans) == 1 and not compare else plans, indent=2))
    elif compare or len(plans) > 1:
        console.print(_compare(plans))
    else:
        _render(plans[0])
