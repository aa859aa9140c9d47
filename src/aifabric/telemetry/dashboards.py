"""The Grafana dashboards of ``aifabric build`` (``monitoring/grafana/dashboards/``),
built with Grafana's typed Python SDK (grafana-foundation-sdk, the ``telemetry`` extra).

===================== ======================================================================
dashboard             panels
===================== ======================================================================
fabric overview       utilization per tier and per plane (simulated runs), live throughput
                      per tier, links down, exporter targets down, the hottest links
RoCE health           PFC paused ratio, pause frames and queue depth (per port and
                      priority), ECN marks per port; CNPs and retransmissions per NIC
                      port; drops, errors (PFC, CNP and retransmission panels say they
                      are simulation-only: the lab has no PFC; queue depth, ECN marks
                      and drops are live from the lab's tc queues)
BGP and ECMP          sessions up/down and their table, prefixes received, ECMP group
                      sizes beside the plan, groups smaller than planned, twin drift, probes
collective            variable ``job``: its collectives' progress, the fabric's busiest
                      links while they run; variable ``collective`` (one): the links it
                      crosses (``aifabric_collective_link_bytes``) with their utilization,
                      its bytes per link and per tier; its default time range is the
                      window ``aifabric metrics`` backfills into (2026-01-01 00:00-01:00
                      UTC), the others' the last hour (the live lab)
===================== ======================================================================

Every query uses only metric names of :mod:`aifabric.telemetry.catalog` (tests/telemetry/
test_monitoring.py checks each panel's expression with :func:`metric_names` and promtool).
The datasource is the provisioned one (uid :data:`~aifabric.telemetry.monitoring.
DATASOURCE_UID`); dashboards do not depend on the spec, so the same JSON serves any fabric.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    VariableRefresh,
    VariableSort,
)

__all__ = ["dashboards", "metric_names", "panel_exprs"]

_UID = "aifabric-prometheus"  # = monitoring.DATASOURCE_UID (no import cycle)
_DS = DataSourceRef(type_val="prometheus", uid=_UID)
_RATE = "[$__rate_interval]"


def _q(expr: str, legend: str = "", instant: bool = False) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).datasource(_DS)
    if legend:
        q = q.legend_format(legend)
    return q.instant() if instant else q.range()


def _ts(title: str, unit: str, *queries: prometheus.Dataquery, w: int = 12,
        desc: str = "") -> timeseries.Panel:
    p = timeseries.Panel().title(title).unit(unit).datasource(_DS).span(w).height(8)
    if desc:
        p = p.description(desc)
    for i, q in enumerate(queries):
        p = p.with_target(q.ref_id("ABCDEFGH"[i]))
    return p


def _stat(title: str, expr: str, w: int = 6) -> stat.Panel:
    return (stat.Panel().title(title).datasource(_DS).span(w).height(4)
            .with_target(_q(expr, instant=True).ref_id("A")))


def _table(title: str, expr: str, w: int = 12, desc: str = "") -> table.Panel:
    p = (table.Panel().title(title).datasource(_DS).span(w).height(8)
         .with_target(_q(expr, instant=True).ref_id("A")))
    return p.description(desc) if desc else p


def _var(name: str, query: str, label: str, multi: bool = True) -> gd.QueryVariable:
    v = (gd.QueryVariable(name).label(label).datasource(_DS).query(query)
         .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC))
    return v.multi(True).include_all(True).all_value(".*") if multi else v


#: said by every panel only a simulation feeds (``aifabric metrics`` of a packet run)
SIM_ONLY = ("Simulation only (aifabric metrics of a packet run, backfilled): the lab's "
            "Linux veths have no PFC, no RoCE NIC and no CNPs, so the live lab exports none.")
#: the collective dashboard's description: every series it shows is a simulated run's
SIM_DASHBOARD = ("Simulation only: a simulated run's collectives (aifabric metrics RUN_DIR, "
                 "backfilled); opens on the window aifabric metrics writes to by default.")
#: the window ``aifabric metrics`` backfills into by default (openmetrics.DEFAULT_START,
#: +1 h: a 1 ms run spans about 17 minutes of it)
BACKFILL = ("2026-01-01T00:00:00.000Z", "2026-01-01T01:00:00.000Z")


def _dash(uid: str, title: str, time: tuple[str, str] = ("now-1h", "now")) -> gd.Dashboard:
    return (gd.Dashboard(title).uid(uid).tags(["aifabric"]).refresh("30s")
            .time(*time).timezone("utc").editable())


def overview() -> gd.Dashboard:
    util = "aifabric_link_utilization_ratio"
    fabric = 'tier=~"access|leaf_spine|spine_core"'
    return (
        _dash("aifabric-overview", "aifabric: fabric overview")
        .with_panel(_stat("Links down", "count(aifabric_interface_oper_up == 0) or vector(0)"))
        .with_panel(_stat("BGP sessions down",
                          "count(aifabric_bgp_session_up == 0) or vector(0)"))
        .with_panel(_stat("Exporter targets down", "count(aifabric_up == 0) or vector(0)"))
        .with_panel(_stat("Twin drift (groups)", "count(aifabric_twin_drift != 0) or vector(0)"))
        .with_panel(_ts("Utilization per tier", "percentunit",
                        _q(f"avg by (tier, direction) ({util}{{{fabric}}})",
                           "{{tier}} {{direction}}"),
                        _q(f"max by (tier, direction) ({util}{{{fabric}}})",
                           "max {{tier}} {{direction}}"),
                        desc="Mean and maximum link utilization per tier and direction "
                             "(up = towards the core). Lab: tx bytes since the previous "
                             "scrape over the shaped port rate (lab up --queues)."))
        .with_panel(_ts("Utilization per plane", "percentunit",
                        _q(f"avg by (plane, direction) ({util}{{{fabric}}})",
                           "plane {{plane}} {{direction}}")))
        .with_panel(_ts("Utilization per tier (run timeline)", "percentunit",
                        _q("aifabric_tier_utilization_ratio", "{{tier}} {{direction}}"),
                        desc="Mean utilization of each tier's links: a simulated run's "
                             "timeline (aifabric metrics) or the live lab's since the "
                             "previous scrape."))
        .with_panel(_ts("Live throughput per tier", "bps",
                        _q("8 * sum by (tier, direction) (rate(aifabric_interface_bytes_total"
                           f"{_RATE}))", "{{tier}} {{direction}}"),
                        desc="Bits per second over the lab's interfaces, per tier."))
        .with_panel(_ts("Live packets per tier", "pps",
                        _q("sum by (tier, direction) (rate(aifabric_interface_packets_total"
                           f"{_RATE}))", "{{tier}} {{direction}}")))
        .with_panel(_table("Hottest links", f"topk(10, {util}{{{fabric}}})",
                           desc="The ten most loaded link directions now (lab: over the "
                                "last scrape interval)."))
    )


def roce() -> gd.Dashboard:
    sel = '{device=~"$device"}'
    return (
        _dash("aifabric-roce", "aifabric: RoCE health")
        .with_variable(_var("device", "label_values(aifabric_queue_depth_bytes, device)",
                            "device"))
        .with_panel(_ts("PFC paused ratio per port and priority", "percentunit",
                        _q(f"rate(aifabric_pfc_paused_seconds_total{sel}{_RATE})",
                           "{{device}} {{port}} p{{priority}}"),
                        desc="Fraction of time the egress queue was held by PFC pause. "
                             + SIM_ONLY))
        .with_panel(_ts("PFC pause frames", "pps",
                        _q(f"rate(aifabric_pfc_pause_frames_total{sel}{_RATE})",
                           "{{device}} {{port}} p{{priority}} {{direction}}"),
                        desc=SIM_ONLY))
        .with_panel(_ts("ECN marks per port", "pps",
                        _q(f"rate(aifabric_ecn_marked_packets_total{sel}{_RATE})",
                           "{{device}} {{port}}"),
                        desc="Packets marked CE per second. Lab: the kernel's RED queue "
                             "of each switch port (lab up --queues red|auto on a kernel "
                             "with sch_red; none with the drop-tail fallback)."))
        .with_panel(_ts("Queue depth", "bytes",
                        _q(f"aifabric_queue_depth_bytes{sel}",
                           "{{device}} {{port}} p{{priority}}"),
                        desc="Bytes in the egress queue. Lab: tc's backlog of the port's "
                             "one queue (priority 0) at the scrape."))
        .with_panel(_ts("CNPs received per NIC port", "pps",
                        _q(f"rate(aifabric_cnp_received_total{sel}{_RATE})",
                           "{{device}} {{port}}"), desc=SIM_ONLY))
        .with_panel(_ts("Retransmitted bytes per NIC port", "Bps",
                        _q(f"rate(aifabric_retransmitted_bytes_total{sel}{_RATE})",
                           "{{device}} {{port}}"), desc=SIM_ONLY))
        .with_panel(_ts("Drops and errors", "pps",
                        _q(f"rate(aifabric_interface_drops_total{sel}{_RATE}) > 0",
                           "drops {{device}} {{port}} {{direction}}"),
                        _q(f"rate(aifabric_interface_errors_total{sel}{_RATE}) > 0",
                           "errors {{device}} {{port}} {{direction}}"), w=24))
    )


def bgp() -> gd.Dashboard:
    sel = '{device=~"$device"}'
    return (
        _dash("aifabric-bgp", "aifabric: BGP and ECMP")
        .with_variable(_var("device", "label_values(aifabric_ecmp_next_hops, device)",
                            "device"))
        .with_panel(_stat("Sessions established", "sum(aifabric_bgp_session_up)", w=8))
        .with_panel(_stat("Sessions down", "count(aifabric_bgp_session_up == 0) or vector(0)",
                          w=8))
        .with_panel(_stat("Groups drifting from the twin",
                          "count(aifabric_twin_drift != 0) or vector(0)", w=8))
        .with_panel(_table("Sessions not Established", f"aifabric_bgp_session_up{sel} == 0"))
        .with_panel(_ts("Prefixes received per session", "short",
                        _q(f"aifabric_bgp_received_prefixes{sel}", "{{device}} {{peer}}")))
        .with_panel(_ts("ECMP next hops beside the plan", "short",
                        _q(f"sum by (device) (aifabric_ecmp_next_hops{sel})",
                           "{{device}} kernel"),
                        _q(f"sum by (device) (aifabric_ecmp_planned_next_hops{sel})",
                           "{{device}} planned"),
                        desc="Next hops summed over the device's destinations: the "
                             "kernel's and the fabric as planned (all links up)."))
        .with_panel(_table("ECMP groups smaller than planned",
                           f"aifabric_ecmp_next_hops{sel} < aifabric_ecmp_planned_next_hops"))
        .with_panel(_ts("Twin drift", "short",
                        _q(f"count by (device) (aifabric_twin_drift{sel} != 0)", "{{device}}"),
                        desc="Groups whose kernel next hops differ from the twin's "
                             "prediction (0: the twin agrees)."))
        .with_panel(_ts("Session uptime", "s",
                        _q(f"aifabric_bgp_session_uptime_seconds{sel}",
                           "{{device}} {{peer}}")))
        .with_panel(_ts("Probe RTT", "s",
                        _q("aifabric_probe_rtt_seconds", "{{source}} -> {{target}}")))
        .with_panel(_ts("Probe loss", "percentunit",
                        _q("aifabric_probe_loss_ratio > 0", "{{source}} -> {{target}}")))
    )


def collective() -> gd.Dashboard:
    job = '{training_job=~"$job"}'
    running = f"(count(aifabric_collective_progress_ratio{job} < 1) > 0)"
    util = "aifabric_link_utilization_ratio"
    # one collective, matched exactly (Grafana does not regex-escape a single-value
    # variable, and collective names hold regex characters: "traffic.0 incast")
    cl = 'aifabric_collective_link_bytes{collective="$collective"}'
    port = "device, port, peer, direction"  # one link direction (port labels of the run)
    return (
        _dash("aifabric-collective", "aifabric: collective", BACKFILL)
        .description(SIM_DASHBOARD)
        .with_variable(_var("job", "label_values(aifabric_collective_progress_ratio, training_job)",
                            "job"))
        .with_variable(_var("collective",
                            "label_values(aifabric_collective_link_bytes, collective)",
                            "collective", multi=False))
        .with_panel(_ts("Progress of the job's collectives", "percentunit",
                        _q(f"aifabric_collective_progress_ratio{job}", "{{collective}} {{op}}"),
                        w=24))
        .with_panel(_ts("Busiest fabric links while the job's collectives run",
                        "percentunit",
                        _q(f"topk(10, aifabric_link_utilization_ratio) and on() {running}",
                           "{{device}} {{port}} {{direction}}"), w=24,
                        desc="The ten most loaded link directions of the whole fabric "
                             "(any traffic, not only the job's) during the time a "
                             "collective of the job is unfinished."))
        .with_panel(_ts("Load per tier while the job's collectives run", "percentunit",
                        _q("max by (tier, direction) (aifabric_link_utilization_ratio) "
                           f"and on() {running}", "max {{tier}} {{direction}}"), w=24))
        .with_panel(_ts("Load on the links $collective crosses", "percentunit",
                        _q(f"{util} * on({port}) group_left(collective) "
                           f"({cl} > bool 0)", "{{device}} {{port}} -> {{peer}} "
                           "{{direction}}"), w=24,
                        desc="Utilization of every link direction the chosen collective's "
                             "routed transfers cross (aifabric_collective_link_bytes > 0), "
                             "whoever else loads it."))
        .with_panel(_table("Links $collective crosses, with its bytes",
                           f"sort_desc(sum by ({port}, tier) ({cl}))",
                           desc="Bytes the collective puts on each link direction over the "
                                "run (repeats included)."))
        .with_panel(_table("Bytes $collective puts on each tier",
                           f"sum by (tier, direction) ({cl})"))
    )


#: file name -> builder, in the order they are written
DASHBOARDS = {"fabric-overview.json": overview, "roce-health.json": roce,
              "bgp-ecmp.json": bgp, "collective.json": collective}


def dashboards() -> Iterator[tuple[str, str]]:
    """Every dashboard as ``(file name, JSON text)``: keys sorted, so the same bytes."""
    for name, make in DASHBOARDS.items():
        yield name, json.dumps(make().build(), cls=JSONEncoder, sort_keys=True,
                               indent=2) + "\n"


def panel_exprs(doc: dict) -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every query of a dashboard JSON document (and of its
    query variables' ``label_values(...)``)."""
    out = []
    for p in doc.get("panels", []):
        for t in p.get("targets", []):
            out.append((p.get("title", ""), t["expr"]))
    for v in doc.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            m = re.fullmatch(r"label_values\((\w+), *\w+\)", v["query"])
            assert m, v["query"]
            out.append((f"${v['name']}", m.group(1)))
    return out


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset",
             "bool", "and", "or", "unless", "inf", "nan"}
_IDENT = re.compile(r"(?<![\w.:$])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names an instant PromQL expression selects (a small tokenizer:
    strings, label matchers ``{...}``, ranges ``[...]`` and ``by/on(...)`` label lists
    removed; identifiers not followed by ``(`` that are not keywords). Grafana's
    ``$variables`` are left out, ``{__name__=...}`` selectors are not supported (an
    assertion)."""
    assert "__name__" not in expr, expr
    text = _STRING.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in _KEYWORDS}
