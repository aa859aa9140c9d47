"""Monitoring intervals as settings (``deploy.monitoring``), under the real promtool.

The scrape and evaluation interval of the build's ``prometheus.yml`` come from the spec,
and the alerts that confirm a state (an ECMP group short of members, twin drift, the
exporter or a target down) hold for two of the longer interval. Closed form checked by
``promtool test rules``: a state that turns bad at ``t`` fires at the first evaluation
at or after (the first evaluation that sees it) + ``for``, not one evaluation earlier;
a single bad sample (a blip during reconvergence) never fires.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.spec import spec_from_dict
from aifabric.telemetry.alerts import alert_rules, duration, render_alerts
from tests.configs.conftest import SMALL

HOLDING = ("FabricEcmpGroupDegraded", "FabricTwinDrift", "FabricExporterDown",
           "FabricTargetUnreadable")
GROUP = {"destination": "10.0.0.1/32", "tier": "tor", "segment": "0"}


def _spec(scrape: float | None = None, evaluation: float | None = None):
    raw = json.loads(json.dumps(SMALL["hpn"]))
    mon: dict[str, Any] = {}
    if scrape is not None:
        mon["scrape_interval_s"] = scrape
    if evaluation is not None:
        mon["evaluation_interval_s"] = evaluation
    if mon:
        raw.setdefault("deploy", {})["monitoring"] = mon
    return spec_from_dict(raw)


def test_default_intervals_are_todays_15_s():
    rules = {a.name: a for a in alert_rules(_spec())}
    assert {n: rules[n].for_s for n in HOLDING} == dict.fromkeys(HOLDING, 30.0)
    assert _spec().deploy.monitoring.evaluation_s == 15.0


@pytest.mark.parametrize(("scrape", "evaluation"), [(2, None), (5, 5), (2, 6), (10, 4)])
def test_for_is_two_of_the_longer_interval(scrape, evaluation):
    rules = {a.name: a for a in alert_rules(_spec(scrape, evaluation))}
    ev = scrape if evaluation is None else evaluation
    assert {n: rules[n].for_s for n in HOLDING} == dict.fromkeys(HOLDING,
                                                                 2.0 * max(scrape, ev))


def test_prometheus_yml_takes_the_spec_intervals_and_promtool_accepts_it(promtool, tmp_path):
    from aifabric.configs import BuildContext
    from aifabric.telemetry.monitoring import render_monitoring
    from aifabric.topology import build_fabric

    spec = _spec(2, 4)
    files = dict(render_monitoring(BuildContext.of(build_fabric(spec))))
    cfg = yaml.safe_load(files["monitoring/prometheus.yml"])
    assert cfg["global"]["scrape_interval"] == "2s"
    assert cfg["global"]["evaluation_interval"] == "4s"
    assert "timeInterval: 2s" in files["monitoring/grafana/provisioning/datasources/aifabric.yml"]
    for name in ("prometheus.yml", "alerts.yml"):
        (tmp_path / name).write_text(files[f"monitoring/{name}"])
    p = subprocess.run([promtool, "check", "config", "prometheus.yml"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stdout + p.stderr


def test_an_interval_outside_the_range_is_refused():
    with pytest.raises(SpecError) as err:
        _spec(1)
    assert "deploy.monitoring.scrape_interval_s" in str(err.value)


def _series(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _degraded_test(iv: float, ev: float, values: str, checks: list[tuple[float, bool]]
                   ) -> dict[str, Any]:
    labels = {"device": "bad", **GROUP}
    exp = [{"exp_labels": {**labels, "severity": "warning"}}]
    return {"rule_files": ["alerts.yml"], "evaluation_interval": duration(ev), "tests": [{
        "interval": duration(iv),
        "input_series": [
            {"series": _series("aifabric_ecmp_next_hops", labels), "values": values},
            {"series": _series("aifabric_ecmp_planned_next_hops", labels),
             "values": f"4x{len(values.split()) + 40}"}],
        "alert_rule_test": [{"eval_time": duration(t), "alertname": "FabricEcmpGroupDegraded",
                             "exp_alerts": exp if firing else []} for t, firing in checks]}]}


def _run(promtool: str, tmp_path: Path, spec, doc: dict[str, Any]) -> None:
    # the annotations are checked by test_alert_rules; here only when it fires
    rules = yaml.safe_load(render_alerts(spec))
    for g in rules["groups"]:
        for r in g["rules"]:
            r.pop("annotations", None)
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "test.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    p = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize(("scrape", "evaluation"), [(2, 2), (2, 1), (5, 5), (2, 6), (15, 15)])
def test_ecmp_alert_fires_exactly_for_after_the_first_evaluation_that_sees_it(
        promtool, tmp_path, scrape, evaluation):
    spec = _spec(scrape, evaluation)
    rule = next(a for a in alert_rules(spec) if a.name == "FabricEcmpGroupDegraded")
    bad_from = 3  # the fourth sample is the first bad one
    values = " ".join(["4"] * bad_from + ["2"] * 60)
    t_bad = bad_from * scrape
    first = math.ceil(t_bad / evaluation) * evaluation  # first evaluation seeing it
    fire = math.ceil((first + rule.for_s) / evaluation) * evaluation
    checks = [(fire - evaluation, False), (fire, True)]
    _run(promtool, tmp_path, spec, _degraded_test(scrape, evaluation, values, checks))
    print(f"scrape {scrape} s, evaluation {evaluation} s: for {rule.for_s:g} s, fires "
          f"{fire - t_bad:g} s after the first bad sample")


@pytest.mark.parametrize("scrape", [2, 3, 15])
def test_one_bad_sample_never_fires(promtool, tmp_path, scrape):
    """An ECMP group short for one sample (a route replaced during reconvergence) is
    not an alert at any interval."""
    spec = _spec(scrape)
    values = " ".join(["4"] * 3 + ["2"] + ["4"] * 20)
    checks = [(k * scrape, False) for k in range(24)]
    _run(promtool, tmp_path, spec, _degraded_test(scrape, scrape, values, checks))
