"""``aifabric route``: where the flows of a scenario go, and which links collide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import typer
from rich.table import Table

from aifabric import api
from aifabric.cli._common import MAX_MEMORY, console, styled
from aifabric.errors import Problem, SpecError
from aifabric.report.write import check_table_format

__all__ = ["route_cmd"]


def _mib(x: float) -> str:
    return f"{x / 2**20:,.2f}"


def _render(rep: dict[str, Any]) -> None:
    s, pol = rep["stats"], rep["policy"]
    ib = s.get("infiniband")
    how = ("InfiniBand: adaptive routing over the least-hop ports" if ib and
           ib.get("adaptive_routing") else
           f"InfiniBand: OpenSM's {ib['engine']} forwarding tables (LMC {ib['lmc']})"
           if ib else f"policy {pol['policy']} ({pol['hash']}, seed {pol['seed']} "
           f"{pol['seed_mode']}, {pol['selection']})")
    console.print(styled((rep["scenario"], "bold"),
                         f" — fabric {rep['fabric']} ({rep['family']}), {how}, "
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


def route_cmd(
    scenario: Path = typer.Argument(..., metavar="SCENARIO",
                                    help="scenario (YAML)", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="DIR",
                                    help="write links, flows, a histogram into this folder"),
    fmt: Literal["csv", "parquet"] = typer.Option("csv", "--format",
                                                 help="table format under --out"),
    policy: Literal["ecmp", "spray", "adaptive", "source_port", "pinned"] | None = typer.Option(
        None, "--policy", help="override the scenario's routing policy"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Where the flows of a scenario go: per-tier link loads, idle uplinks, the most
    loaded link, dual-ToR port balance, failover."""
    check_table_format(fmt)
    if out is not None:  # a bad --out fails before routing, not after
        from aifabric.outputs import ROUTE, check_target

        check_target(out, option="--out", folder=True, **ROUTE)
    sc = api.load_scenario(scenario, kind="route")
    try:
        res = api.route(sc, policy=policy)
    except SpecError as err:  # the option's name as the command line spells it
        raise SpecError(Problem("--policy" if p.path == "policy" else p.path, p.message,
                                p.file) for p in err.problems) from None
    if out is not None:
        res.save(out, fmt, option="--out", scenario_file=scenario)
    if as_json:
        typer.echo(json.dumps(res.summary, indent=2))
        return
    _render(res.summary)
    if out is not None:
        console.print(f"wrote {out}/: links, flows, link_load_hist.png, report.json, "
                      "run.json")
