"""Every alert of ``monitoring/alerts.yml`` under the real ``promtool test rules``.

For each alert a table row gives a bad series and a good one (same metric, another
device). The unit-test file asks promtool that the alert is silent before its ``for``
has passed (or before the condition), fires on the bad series only (so the good one is
silent) with the rule's labels and annotations, and has resolved once the bad series is
good again. A rule missing from the table is a failure: every alert has its test.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from aifabric.spec import spec_from_dict
from aifabric.telemetry.alerts import alert_rules, render_alerts
from tests.configs.conftest import SMALL

PORT = {"port": "Ethernet0", "peer": "agg-0", "tier": "leaf_spine", "plane": "0",
        "segment": "0"}
NIC = {"port": "ens0f0", "peer": "tor-0", "tier": "access", "rail": "0", "segment": "0"}
GROUP = {"destination": "10.0.0.1/32", "tier": "tor", "segment": "0"}


def _row(metric: str, labels: dict[str, str], bad: str, good: str,
         silent: str, fire: str, resolved: str, **extra: Any) -> dict[str, Any]:
    return {"series": [(metric, {"device": "bad", **labels}, bad),
                       (metric, {"device": "good", **labels}, good),
                       *extra.get("more", [])],
            "labels": {"device": "bad", **labels}, "times": (silent, fire, resolved)}


#: alert -> series (metric, labels, promtool values, at a 15 s interval), the labels of
#: the firing alert, and eval times: (silent: pending or not yet bad, firing, resolved)
CASES: dict[str, dict[str, Any]] = {
    "FabricLinkDown": _row(
        "aifabric_interface_oper_up", PORT, "1 1 0 0 0 1 1 1", "1x7", "15s", "45s", "90s"),
    "FabricBgpSessionDown": _row(
        "aifabric_bgp_session_up", PORT, "1 1 0 0 0 1 1 1", "1x7", "15s", "45s", "90s"),
    "FabricInterfaceErrors": _row(
        "aifabric_interface_errors_total", {**PORT, "direction": "rx"},
        "0+5x60 300x40", "0x100", "5m", "12m", "21m"),
    "FabricEcmpGroupDegraded": {
        "series": [("aifabric_ecmp_next_hops", {"device": "bad", **GROUP}, "4 4 2 2 2 2 4 4 4"),
                   ("aifabric_ecmp_planned_next_hops", {"device": "bad", **GROUP}, "4x8"),
                   ("aifabric_ecmp_next_hops", {"device": "good", **GROUP}, "4x8"),
                   ("aifabric_ecmp_planned_next_hops", {"device": "good", **GROUP}, "4x8")],
        "labels": {"device": "bad", **GROUP}, "times": ("45s", "60s", "105s")},
    "FabricExporterDown": _row(
        "up", {"job": "aifabric", "instance": "127.0.0.1:9464"}, "1 1 0 0 0 1 1 1", "1x7",
        "45s", "60s", "90s"),
    "FabricTargetUnreadable": _row(
        "aifabric_up", {"target": "frr"}, "1 1 0 0 0 1 1 1", "1x7", "45s", "60s", "90s"),
    "FabricTwinDrift": _row(
        "aifabric_twin_drift", GROUP, "0 0 1 1 1 1 0 0 0", "0x8", "45s", "60s", "105s"),
    # paused without a break from 30 s to 120 s (15 s of pause every 15 s); good: half
    "FabricPfcWatchdogStorm": _row(
        "aifabric_pfc_paused_seconds_total", {**PORT, "priority": "3"},
        "0 0 0 15 30 45 60 75 90 90 90 90 90", "0+7.5x12", "45s", "60s", "150s"),
    # 20 % paused for 10 min, then none; good: 5 % throughout. (A counter's rate over
    # 5 min reaches its value 5 min after the series starts: no extrapolation before it)
    "FabricPfcPauseSustained": _row(
        "aifabric_pfc_paused_seconds_total", {**PORT, "priority": "3"},
        "0+3x40 120x40", "0+0.75x80", "3m", "9m", "16m"),
    # 200 k marks/s for 20 min, then none; good: 50 k/s
    "FabricEcnMarkRateHigh": _row(
        "aifabric_ecn_marked_packets_total", PORT,
        "0+3000000x80 240000000x40", "0+750000x120", "5m", "15m", "26m"),
    # 30 k CNPs/s for 20 min; good: 10 k/s
    "FabricCnpRateHigh": _row(
        "aifabric_cnp_received_total", NIC,
        "0+450000x80 36000000x40", "0+150000x120", "5m", "15m", "26m"),
    # 0.2 % of the sent bytes again for 15 min; good: 0.05 %; both send 1 MB per 15 s
    "FabricRetransmissions": _row(
        "aifabric_retransmitted_bytes_total", NIC, "0+2000x60 120000x40", "0+500x100",
        "3m", "7m", "21m",
        more=[("aifabric_interface_bytes_total", {"device": d, **NIC, "direction": "tx"},
               "0+1000000x100") for d in ("bad", "good")]),
}


def _series(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"


def _expand(template: str, labels: dict[str, str]) -> str:
    """Prometheus' expansion of ``{{ $labels.x }}`` (the only template the rules use)."""
    assert "$value" not in template
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)


def _unit_test(rules: dict[str, Any], name: str, case: dict[str, Any]) -> dict[str, Any]:
    rule = next(r for g in rules["groups"] for r in g["rules"] if r["alert"] == name)
    labels = {**case["labels"], **rule["labels"]}
    annotations = {k: _expand(v, case["labels"]) for k, v in rule["annotations"].items()}
    silent, fire, resolved = case["times"]
    return {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "15s",
        "tests": [{
            "interval": "15s",
            "input_series": [{"series": _series(m, lab), "values": v}
                             for m, lab, v in case["series"]],
            "alert_rule_test": [
                {"eval_time": silent, "alertname": name, "exp_alerts": []},
                {"eval_time": fire, "alertname": name,
                 "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}]},
                {"eval_time": resolved, "alertname": name, "exp_alerts": []},
            ],
        }],
    }


def _alerts_file(tmp_path: Path, spec_update: dict[str, Any] | None = None,
                 scrape_interval_s: float = 15.0) -> dict[str, Any]:
    raw = json.loads(json.dumps(SMALL["hpn"]))
    raw.update(spec_update or {})
    spec = spec_from_dict(raw)
    text = render_alerts(spec, scrape_interval_s)
    (tmp_path / "alerts.yml").write_text(text, encoding="utf-8")
    return yaml.safe_load(text)


def _promtool_test(promtool: str, tmp_path: Path, doc: dict[str, Any]
                   ) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test.yml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)


def test_every_alert_has_a_unit_test(tmp_path: Path) -> None:
    rules = _alerts_file(tmp_path)
    names = [r["alert"] for g in rules["groups"] for r in g["rules"]]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(CASES)


def test_every_alert_has_summary_severity_runbook(tmp_path: Path) -> None:
    rules = _alerts_file(tmp_path)
    for r in (r for g in rules["groups"] for r in g["rules"]):
        assert r["labels"]["severity"] in ("critical", "warning"), r
        assert r["annotations"]["summary"] and r["annotations"]["runbook"], r


def test_promtool_check_rules(promtool: str, tmp_path: Path) -> None:
    _alerts_file(tmp_path)
    proc = subprocess.run([promtool, "check", "rules", "alerts.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(CASES)} rules found" in proc.stdout


@pytest.mark.parametrize("name", sorted(CASES))
def test_alert_fires_on_bad_silent_on_good_and_resolves(promtool: str, tmp_path: Path,
                                                        name: str) -> None:
    rules = _alerts_file(tmp_path)
    proc = _promtool_test(promtool, tmp_path, _unit_test(rules, name, CASES[name]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@pytest.mark.parametrize(("paused_s", "fires"), [(4, False), (6, True)])
def test_pfc_storm_needs_the_detection_time_without_a_break(
        promtool: str, tmp_path: Path, paused_s: int, fires: bool) -> None:
    """SONiC's watchdog semantics at a 1 s scrape and detection_ms 5000: a queue paused
    for 4 s, then let go for a second, then paused again for 4 s never fires (9 s of
    pause in 10 s, but never 5 s in a row); 6 s without a break fires."""
    rules = _alerts_file(tmp_path, {"deploy": {"qos": {"pfc_watchdog": {
        "detection_ms": 5000}}}}, scrape_interval_s=1.0)
    storm = next(a for a in alert_rules(spec_from_dict({**SMALL["hpn"], "deploy": {"qos": {
        "pfc_watchdog": {"detection_ms": 5000}}}}), 1.0) if a.name == "FabricPfcWatchdogStorm")
    assert "[5s]" in storm.expr
    # per 1 s step: paused for paused_s steps, one free step, paused again, then free
    steps = [1] * paused_s + [0] + [1] * paused_s + [0] * 10
    values, total = ["0", "0"], 0
    for s in steps:
        total += s
        values.append(str(total))
    labels = {"device": "bad", **PORT, "priority": "3"}
    rule = next(r for g in rules["groups"] for r in g["rules"]
                if r["alert"] == "FabricPfcWatchdogStorm")
    exp = [{"exp_labels": {**labels, **rule["labels"]},
            "exp_annotations": {k: _expand(v, labels) for k, v in rule["annotations"].items()}}]
    doc = {"rule_files": ["alerts.yml"], "evaluation_interval": "1s", "tests": [{
        "interval": "1s",
        "input_series": [{"series": _series("aifabric_pfc_paused_seconds_total", labels),
                          "values": " ".join(values)}],
        # firing at the end of the second paused stretch; else silent at every second
        "alert_rule_test": [{"eval_time": f"{2 * paused_s + 2}s",
                             "alertname": "FabricPfcWatchdogStorm", "exp_alerts": exp}]
        if fires else [{"eval_time": f"{t}s", "alertname": "FabricPfcWatchdogStorm",
                        "exp_alerts": []} for t in range(len(values))]}]}
    proc = _promtool_test(promtool, tmp_path, doc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
