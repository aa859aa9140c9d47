"""The pydantic models of the JSON API: every endpoint's response (and the what-if
request), so ``/openapi.json`` describes the whole API. Handlers return the twin's dicts
already encoded (:func:`aifabric.web.http.json_response`): a field a model does not list
never turns a good answer into a 500."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aifabric.web.twin.core import MAX_FAIL  # failure names per request: one limit for both

__all__ = ["ColourScale", "ErrorOut", "FabricInfo", "GraphEdge", "GraphNode", "HeatmapOut",
           "HotLink", "InfoOut", "LabOut", "PlaneOut", "RunFile", "RunOut", "SearchHit",
           "SegmentOut", "TableOut", "TierStat", "TopologyOut", "TorOut", "TorPort", "TraceOut",
           "TracesOut", "WhatifIn", "WhatifOut"]


class _Open(BaseModel):
    """A JSON object that may carry more fields than listed."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(BaseModel):
    """Every 4xx/5xx answer: one line saying what was wrong and what is allowed."""

    error: str = Field(description="`field: message`, one line",
                       examples=["segment: 99 is not a segment; allowed: 0..119"])


class FabricInfo(_Open):
    name: str
    family: str
    gpus: int
    hosts: int
    switches: int
    links: int
    segments: int
    pods: int
    planes: int


class InfoOut(_Open):
    mode: str = Field(description="design | run | lab")
    name: str
    fabric: FabricInfo | None = Field(None, description="null when the run folder has no "
                                      "scenario to rebuild its fabric from")
    views: list[str] = Field(default_factory=list, description="the page's tabs that apply")
    metrics: list[str] = Field(default_factory=list, description="metric names; the first "
                               "is the default")
    times_ns: list[float] = Field(default_factory=list, description="start of each time "
                                  "step; `t` indexes this list")
    missing: list[str] = Field(default_factory=list, description="what a malformed or "
                               "partial run folder lacks, as sentences")
    collectives: bool = False
    whatif: bool = False


class GraphNode(_Open):
    id: str
    kind: str | None = None
    x: float | None = None
    y: float | None = None


class GraphEdge(_Open):
    id: str
    source: str
    target: str
    tier: str | None = None
    value: float | None = None


class ColourScale(_Open):
    lo: float = Field(description="the value of the scale's bottom colour (0)")
    hi: float = Field(description="the value of its top colour: the largest per_link "
                      "drawn")
    min: float = Field(description="smallest per_link drawn")
    max: float = Field(description="largest per_link drawn")
    unit: str = Field(description="unit of the values (utilization: a fraction of "
                      "capacity)")


class TopologyOut(_Open):
    level: str = Field(description="segment | pod: how far the groups are aggregated")
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    tiers: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list, description="the failure set applied")
    stat: str | None = Field(None, description="max | p99 | mean: how an edge's per_link "
                             "sums up its links")
    scale: ColourScale | None = Field(None, description="the colour scale; null without "
                                      "a metric")


class SegmentOut(_Open):
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    stat: str | None = None
    scale: ColourScale | None = None


class PlaneOut(_Open):
    pod: int
    plane: int
    planes: list[int] = Field(default_factory=list, description="the pod's planes")
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    stat: str | None = None
    scale: ColourScale | None = None


class TorPort(_Open):
    link: int
    port: int
    iface: str = Field(description="the ToR's interface (Ethernet<n>)")
    peer: str
    peer_iface: str
    tier: str
    capacity_gbps: float
    alive: bool
    out: float | None = Field(None, description="the metric on the arc leaving the ToR")
    flows_out: int | None = Field(None, description="flows (routing model) leaving here")
    top_out: list[dict[str, Any]] = Field(default_factory=list, description="the "
                                          "heaviest flows leaving: src, dst, bytes, "
                                          "collective, job")


class TorOut(_Open):
    tor: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    ports: list[TorPort] = Field(description="every port of the ToR, by port number, with "
                                 "its load and flows each way (out: leaving the ToR; "
                                 "in: arriving)")
    scale: ColourScale | None = None


class SearchHit(_Open):
    name: str
    kind: str
    node: int | None = None
    segment: int | None = None
    pod: int | None = None
    plane: int | None = None
    rail: int | None = None
    match: str = Field(description="name | port | ip")
    link: int | None = None
    label: str


class TierStat(_Open):
    tier: str
    direction: str | None = None
    arcs: int | None = None
    mean: float | None = Field(None, description="mean over all the tier's arcs")
    active: int | None = Field(None, description="arcs with a value > 0 (that carried "
                               "traffic)")
    mean_active: float | None = Field(None, description="mean over the active arcs: "
                                      "report.md's per-tier mean")
    p99: float | None = None
    max: float | None = None


class HotLink(_Open):
    arc: int | None = None
    link: int | None = None
    direction: str | None = None
    value: float | None = None


class HeatmapOut(_Open):
    metric: str
    t: int | None = None
    times_ns: list[float] = Field(default_factory=list)
    tiers: list[TierStat] = Field(default_factory=list)
    hottest: list[HotLink] = Field(default_factory=list)
    series: dict[str, Any] = Field(default_factory=dict, description="per-tier values over "
                                   "time: {times_ns, tiers: {name: [value per step]}}")


class TracesOut(_Open):
    jobs: list[dict[str, Any]] = Field(default_factory=list)
    collectives: list[dict[str, Any]] = Field(default_factory=list)
    patterns: list[dict[str, Any]] = Field(default_factory=list)


class TraceOut(_Open):
    what: str
    flows: int
    bytes: float
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list, description="exactly the arcs the "
                                   "selected flows use, by the routing model")
    truncated: dict[str, int] | None = Field(None, description="`{edges_total, "
                                             "edges_sent}` when only part of the edges "
                                             "were sent (max_edges); null when all were")
    paths: list[dict[str, Any]] = Field(default_factory=list, description="the flows "
                                        "listed hop by hop: `{flow, src, dst, bytes, hops, "
                                        "bottleneck}` (the first 50, and one through the "
                                        "bottleneck)")
    hops: list[list[dict[str, Any]]] = Field(default_factory=list, description="per "
                                             "listed flow, its hops in order: `{from, to, "
                                             "arc, link, tier, bytes, utilization, flows, "
                                             "flow_bytes, bottleneck}`")
    bottleneck: dict[str, Any] | None = None
    grouped: dict[str, Any] | None = Field(None, description="`{arcs, level, "
                                           "bytes_inside}` when drawn on the overview's "
                                           "groups (view=groups, or auto past max_edges)")
    utilization_window: dict[str, float] | None = Field(
        None, description="`{start_ns, end_ns}`: the selection's own time window that every "
        "utilization (and the bottleneck) is computed over; null: the whole run's")


class WhatifIn(BaseModel):
    """The links or switches to fail."""

    fail: list[str] = Field(default_factory=list, max_length=MAX_FAIL,
                            description="switch names, ports `device:iface`, `link:<id>`, "
                            "or a whole `plane:<n>`, `pod:<n>`, `segment:<n>` (at most "
                            f"{MAX_FAIL} entries)",
                            examples=[["tor-s00-r0-a"]])


class WhatifOut(_Open):
    fail: list[str]
    links_down: int
    impact: dict[str, Any] | None = None
    flows: dict[str, Any] | None = Field(None, description="what moved, as `aifabric route` "
                                         "prints it")
    moved: list[dict[str, Any]] = Field(default_factory=list)
    unreachable: list[dict[str, Any]] = Field(default_factory=list)
    tiers_before: list[dict[str, Any]] = Field(default_factory=list)
    tiers_after: list[dict[str, Any]] = Field(default_factory=list)
    hottest_before: list[dict[str, Any]] = Field(default_factory=list)
    hottest_after: list[dict[str, Any]] = Field(default_factory=list)
    seconds: float | None = None


class RunFile(BaseModel):
    path: str = Field(description="relative to the run folder; fetch it at /files/{path}")
    size: int
    kind: str = Field(description="table | plot | report | other")


class RunOut(BaseModel):
    files: list[RunFile]
    report_html: str = Field(description="report.md rendered to HTML; raw HTML in the "
                             "report is escaped, relative links point at /files/")
    missing: list[str]


class TableOut(BaseModel):
    name: str
    columns: list[str]
    rows: list[list[Any]]
    total: int = Field(description="rows in the whole table")
    offset: int
    problem: str | None = Field(None, description="why the table could not be read to the "
                                "end (a garbled file); the rows before it are still given")


class LabOut(_Open):
    links: list[dict[str, Any]] = Field(default_factory=list)
    bgp: list[dict[str, Any]] = Field(default_factory=list)
    up: dict[str, bool] = Field(default_factory=dict)
    failures: list[Any] = Field(default_factory=list)
    seconds: float | None = None
