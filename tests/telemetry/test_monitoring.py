"""``monitoring/`` of ``aifabric build``: prometheus.yml, alerts.yml, Grafana provisioning
and dashboards, checked with the real promtool and against the metric catalog.

Dashboard queries are checked two ways: :func:`~aifabric.telemetry.dashboards.
metric_names` (a small PromQL tokenizer) lists the metric names each panel selects, and
every one must be in the catalog (the names the exporter and ``aifabric metrics`` emit);
promtool parses every panel expression (as a recording rule) so that the tokenizer never
sees something that is not PromQL.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from aifabric import build_fabric
from aifabric.configs import BuildContext, build_files
from aifabric.configs.addressing import ip_str
from aifabric.spec import spec_from_dict
from aifabric.telemetry.catalog import CATALOG
from aifabric.telemetry.monitoring import render_monitoring
from aifabric.topology import NodeKind
from tests.configs.conftest import FAMILIES, SMALL, small_ctx

pytest.importorskip("grafana_foundation_sdk",
                    reason="needs the Python package grafana-foundation-sdk (the test extra)")

from aifabric.telemetry.dashboards import metric_names, panel_exprs

HOSTILE = ("x\ntouch pwned1\r\n;touch pwned2; $(touch pwned3) `touch pwned4` "
           "\"'\\ <b>&amp; ]]> -- a,b\u2028touch pwned5: {x: [1]} #")
DASHBOARDS = ("fabric-overview.json", "roce-health.json", "bgp-ecmp.json", "collective.json")


def _monitoring(ctx: BuildContext) -> dict[str, str]:
    return {k.removeprefix("monitoring/"): v for k, v in render_monitoring(ctx)}


def _write(files: dict[str, str], root: Path) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _promtool(promtool: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)


def test_build_writes_the_monitoring_folder() -> None:
    files = build_files(small_ctx("hpn").fabric, extra=(render_monitoring,))
    mon = sorted(k for k in files if k.startswith("monitoring/"))
    assert mon == sorted(["monitoring/prometheus.yml", "monitoring/alerts.yml",
                          "monitoring/grafana/provisioning/datasources/aifabric.yml",
                          "monitoring/grafana/provisioning/dashboards/aifabric.yml",
                          *(f"monitoring/grafana/dashboards/{d}" for d in DASHBOARDS)])


@pytest.mark.parametrize("family", FAMILIES)
def test_promtool_check_config(promtool: str, tmp_path: Path, family: str) -> None:
    root = _write(_monitoring(small_ctx(family)), tmp_path)
    proc = _promtool(promtool, root, "check", "config", "prometheus.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: prometheus.yml is valid" in proc.stdout
    assert "SUCCESS: 1 rule files found" in proc.stdout


def test_every_switch_and_host_is_scraped_with_its_plan_labels() -> None:
    """One SONiC target per switch (its loopback:9101), one node target per host (its
    first NIC port's /32:9100), each labelled with the plan's device, tier, plane, rail,
    segment and pod; the aifabric exporter job on 127.0.0.1:9464."""
    ctx = small_ctx("hpn")
    f = ctx.fabric
    doc = yaml.safe_load(_monitoring(ctx)["prometheus.yml"])
    jobs = {j["job_name"]: j["static_configs"] for j in doc["scrape_configs"]}
    assert jobs["aifabric"] == [{"targets": ["127.0.0.1:9464"]}]
    assert doc["rule_files"] == ["alerts.yml"]

    def expect(n: int, addr: int, port: int) -> dict:
        nodes = f.nodes
        lab = {"device": str(nodes.name[n]),
               "tier": NodeKind(int(nodes.kind[n])).name.lower()}
        for k in ("plane", "rail", "segment", "pod"):
            v = int(getattr(nodes, k)[n])
            if v >= 0:
                lab[k] = str(v)
        return {"targets": [f"{ip_str(np.array([addr]))[0]}:{port}"], "labels": lab}

    sw = np.flatnonzero(f.is_switch)
    assert jobs["sonic"] == [expect(n, int(ctx.plan.loopback[n]), 9101) for n in sw]
    want = []
    for h, hn in enumerate(f.host_node):
        nics = [n for n in f.ids(NodeKind.NIC) if f.nodes.host[n] == h]
        first = min(nics, key=lambda n: (f.nodes.rail[n], f.nodes.side[n]))
        want.append(expect(int(hn), int(f.nodes.ip[first]), 9100))
    assert jobs["node"] == want
    assert len(want) == len(f.host_node) and len(jobs["sonic"]) == int(f.is_switch.sum())
    # the planes of an HPN dual-plane fabric both appear
    assert {c["labels"].get("plane") for c in jobs["sonic"]} >= {"0", "1"}


def test_same_fabric_same_bytes() -> None:
    spec = spec_from_dict(SMALL["hpn"])
    a = _monitoring(BuildContext.of(build_fabric(spec)))
    b = _monitoring(BuildContext.of(build_fabric(spec)))
    assert a == b


def test_hostile_name_stays_a_value(promtool: str, tmp_path: Path) -> None:
    """A spec name with newlines, quotes, YAML syntax and a line separator (unvalidated,
    as in tests/configs/test_hostile_names.py) is one value in every YAML file: the
    documents load to the same keys, the name comes back exactly, promtool accepts them."""
    spec = spec_from_dict(SMALL["clos"])
    good = _monitoring(BuildContext.of(build_fabric(spec)))
    bad = _monitoring(BuildContext.of(build_fabric(spec.model_copy(update={"name": HOSTILE}))))
    assert sorted(good) == sorted(bad)
    for rel in (k for k in bad if k.endswith(".yml")):
        g, b = yaml.safe_load(good[rel]), yaml.safe_load(bad[rel])
        assert len(good[rel].splitlines()) == len(bad[rel].splitlines()), rel
        assert "\ntouch" not in bad[rel] and "\u2028" not in bad[rel], rel
        if rel == "prometheus.yml":
            assert b["global"]["external_labels"]["fabric"] == HOSTILE
            b["global"]["external_labels"]["fabric"] = spec.name
        if rel.endswith("dashboards/aifabric.yml"):
            assert b["providers"][0]["folder"] == f"aifabric {HOSTILE}"
            b["providers"][0]["folder"] = f"aifabric {spec.name}"
        assert b == g, rel
    for rel in (k for k in bad if k.endswith(".json")):
        assert bad[rel] == good[rel]  # dashboards do not depend on the spec
    root = _write(bad, tmp_path)
    proc = _promtool(promtool, root, "check", "config", "prometheus.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_metric_names_tokenizer() -> None:
    """The tokenizer finds selected metrics and nothing else (functions, keywords,
    label names, label values, durations, numbers, Grafana variables)."""
    assert metric_names('sum by (device, a_total) (rate(x_total{port=~"y_total|$v"}'
                        '[$__rate_interval] offset 5m)) / ignoring(direction) '
                        'group_left(peer) z:rec 1e3 > bool 2') == {"x_total", "z:rec"}
    assert metric_names("count(a == 0) or vector(0)") == {"a"}
    assert metric_names("topk(10, u) and on() (count(p{job=~\"$job\"} < 1) > 0)") == {"u", "p"}


def _docs() -> dict[str, dict]:
    files = _monitoring(small_ctx("hpn"))
    return {d: json.loads(files[f"grafana/dashboards/{d}"]) for d in DASHBOARDS}


def test_every_panel_queries_catalog_metrics_only() -> None:
    catalog = {m.name for m in CATALOG}
    seen = set()
    for name, doc in _docs().items():
        exprs = panel_exprs(doc)
        assert exprs, name
        for title, expr in exprs:
            names = metric_names(expr)
            assert names, (name, title, expr)
            assert names <= catalog, (name, title, names - catalog)
            seen |= names
    # the list: utilization, queue depth, ECN, PFC frames and paused time, CNPs,
    # retransmissions, BGP, ECMP beside the plan, drift, collective progress, probes
    asked = {"aifabric_link_utilization_ratio", "aifabric_tier_utilization_ratio",
             "aifabric_queue_depth_bytes", "aifabric_ecn_marked_packets_total",
             "aifabric_pfc_pause_frames_total", "aifabric_pfc_paused_seconds_total",
             "aifabric_cnp_received_total", "aifabric_retransmitted_bytes_total",
             "aifabric_bgp_session_up", "aifabric_bgp_received_prefixes",
             "aifabric_ecmp_next_hops", "aifabric_ecmp_planned_next_hops",
             "aifabric_twin_drift", "aifabric_collective_progress_ratio",
             "aifabric_probe_rtt_seconds", "aifabric_probe_loss_ratio",
             "aifabric_interface_bytes_total", "aifabric_interface_oper_up"}
    assert asked <= catalog
    assert asked <= seen, asked - seen


def test_dashboards_have_the_asked_panels() -> None:
    docs = _docs()
    titles = {d: [p["title"] for p in doc["panels"]] for d, doc in docs.items()}
    assert {"Utilization per tier", "Utilization per plane", "Hottest links"} <= \
        set(titles["fabric-overview.json"])
    roce = " ".join(titles["roce-health.json"])
    for word in ("PFC", "ECN", "CNP", "Retransmitted", "Queue depth"):
        assert word in roce
    assert {"ECMP next hops beside the plan", "Twin drift", "Sessions not Established"} <= \
        set(titles["bgp-ecmp.json"])
    assert [v["name"] for v in docs["collective.json"]["templating"]["list"]] == \
        ["job", "collective"]
    for doc in docs.values():
        for p in doc["panels"]:
            assert p["datasource"] == {"type": "prometheus", "uid": "aifabric-prometheus"}
    # every panel has an id-free, unique place on the grid
    for d, doc in docs.items():
        places = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in doc["panels"]]
        assert len(places) == len(set(places)), d


def test_every_panel_query_parses_with_promtool(promtool: str, tmp_path: Path) -> None:
    rules = []
    for name, doc in _docs().items():
        for i, (_, expr) in enumerate(panel_exprs(doc)):
            e = (expr.replace("$__rate_interval", "1m").replace('"$device"', '".*"')
                 .replace('"$job"', '".*"').replace('="$collective"', '=~".*"'))
            assert "$" not in e, e
            rules.append({"record": f"panel:{name.split('.')[0].replace('-', '_')}:{i}",
                          "expr": e})
    (tmp_path / "panels.yml").write_text(yaml.safe_dump({"groups": [
        {"name": "panels", "rules": rules}]}), encoding="utf-8")
    proc = _promtool(promtool, tmp_path, "check", "rules", "panels.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


def test_prometheus_loads_the_config_and_every_rule(start_prometheus, tmp_path: Path) -> None:
    """A real Prometheus started with the generated prometheus.yml (rule file beside it)
    loads every alert and every scrape job."""
    files = _monitoring(small_ctx("hpn"))
    (tmp_path / "alerts.yml").write_text(files["alerts.yml"], encoding="utf-8")
    config = files["prometheus.yml"].replace("  - alerts.yml", f"  - {tmp_path / 'alerts.yml'}")
    server = start_prometheus(config=config)
    rules = server.get("rules")["groups"]
    names = sorted(r["name"] for g in rules for r in g["rules"])
    want = sorted(r["alert"] for g in yaml.safe_load(files["alerts.yml"])["groups"]
                  for r in g["rules"])
    assert names == want and len(names) >= 10
    deadline = time.monotonic() + 15  # target discovery runs after /-/ready
    while not (pools := server.get("targets", state="any")["activeTargets"]):
        assert time.monotonic() < deadline, "no scrape targets after 15 s"
        time.sleep(0.2)
    jobs = {t["labels"]["job"] for t in pools}
    assert jobs == {"aifabric", "sonic", "node"}
    f = small_ctx("hpn").fabric
    assert len(pools) == 1 + int(f.is_switch.sum()) + len(f.host_node)


def _openmetrics_of_the_catalog(t0: float) -> str:
    """Every catalog metric with three series (values 0, 0.5 and one distinct per metric:
    its catalog position / 100), two samples each, 60 s apart (counters grow by 60 x
    the value + 1, so every rate is positive)."""
    lines = []
    for i, m in enumerate(CATALOG):
        lines += [f"# TYPE {m.family} {m.type}", f"# HELP {m.family} {m.help}"]
        for j, v in enumerate((0.0, 0.5, i / 100)):
            key = "device" if "device" in m.labels else m.labels[0]  # tells them apart
            lab = {k: f"d{j}" if k == key else
                   {"tier": "access", "direction": "tx"}.get(k, "x") for k in m.labels}
            sel = ",".join(f'{k}="{val}"' for k, val in lab.items())
            for dt in (0, 60):
                value = (v * 60 + 1) * dt / 60 if m.type == "counter" else v
                lines.append(f"{m.name}{{{sel}}} {value} {t0 + dt:.3f}")
    return "\n".join(lines) + "\n# EOF\n"


def test_every_panel_returns_data_from_a_real_prometheus(promtool: str, start_prometheus,
                                                         tmp_path: Path) -> None:
    """Prometheus holding samples of every catalog metric (and nothing else) answers
    every panel's query with data: the names, label matchers and joins fit the
    catalog (a misspelt name or label returns nothing)."""
    t0 = 1_700_000_000.0
    om = tmp_path / "catalog.om"
    om.write_text(_openmetrics_of_the_catalog(t0), encoding="utf-8")
    data = tmp_path / "data"
    proc = _promtool(promtool, tmp_path, "tsdb", "create-blocks-from", "openmetrics",
                     str(om), str(data))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    server = start_prometheus(storage=data)
    empty = []
    for name, doc in _docs().items():
        for title, expr in panel_exprs(doc):
            e = (expr.replace("$__rate_interval", "2m").replace('"$device"', '".*"')
                 .replace('"$job"', '".*"').replace('="$collective"', '=~".*"'))
            if not server.query(e, time=t0 + 60):
                empty.append((name, title, e))
    assert empty == []
