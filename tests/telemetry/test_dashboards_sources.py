"""Which dashboard panels the live lab can fill: a panel whose every metric only a
simulation emits says so; every other panel has a metric the lab exports (with its
queues, ``lab up --queues``); the dashboard only a simulation feeds opens on the window
``aifabric metrics`` backfills into."""

from __future__ import annotations

import json

from aifabric.telemetry.catalog import CATALOG
from aifabric.telemetry.openmetrics import DEFAULT_START
from tests._require import require_importorskip

require_importorskip("grafana_foundation_sdk", "grafana-foundation-sdk")

from aifabric.telemetry.dashboards import (  # noqa: E402
    SIM_DASHBOARD,
    SIM_ONLY,
    dashboards,
    metric_names,
)

SOURCES = {m.name: set(m.sources) for m in CATALOG}


def _panels():
    for name, text in dashboards():
        doc = json.loads(text)
        for p in doc.get("panels", []):
            names = set().union(*(metric_names(t["expr"]) for t in p.get("targets", [])))
            yield name, doc, p, names


def test_a_panel_only_a_simulation_feeds_says_so_and_no_other_does():
    sim_only = lab_fed = 0
    for name, doc, p, names in _panels():
        if not names:
            continue
        if name == "collective.json":  # the whole dashboard is the simulation's
            assert any(SOURCES[n] == {"sim"} for n in names), p["title"]
            assert doc["description"] == SIM_DASHBOARD
            continue
        if all(SOURCES[n] == {"sim"} for n in names):
            assert SIM_ONLY in p.get("description", ""), (name, p["title"])
            sim_only += 1
        else:
            assert SIM_ONLY not in p.get("description", ""), (name, p["title"])
            lab_fed += 1
    # PFC paused, PFC frames, CNPs, retransmissions and the overview's run timeline are
    # the simulation's; the RoCE dashboard's queue depth and ECN marks are live
    assert sim_only >= 4 and lab_fed >= 10


def test_roce_panels_for_queues_and_marks_are_live():
    live = {p["title"] for name, _d, p, names in _panels()
            if name == "roce-health.json" and any("lab" in SOURCES[n] for n in names)}
    assert {"ECN marks per port", "Queue depth", "Drops and errors"} <= live
    roce = json.loads(dict(dashboards())["roce-health.json"])
    var = roce["templating"]["list"][0]
    metric = var["query"].split("(")[1].split(",")[0]
    assert "lab" in SOURCES[metric]  # the device list is filled by the live lab too


def test_the_simulation_only_dashboard_opens_on_the_backfill_window():
    docs = {name: json.loads(text) for name, text in dashboards()}
    start = DEFAULT_START.replace("Z", ".000Z")
    assert docs["collective.json"]["time"]["from"] == start
    assert docs["collective.json"]["time"]["to"] > start
    assert docs["fabric-overview.json"]["time"]["from"] == "now-1h"
