"""Failure models as clusters see them, against closed forms.

* A per-job rate (class ``job``) adds to the per-part rates exactly: a job of N hosts
  fails at ``r_job + N r_host``, so its MTBF is not N-fold the per-node one.
* Weibull shape 1 is the exponential: the general arrival draw (inverting the
  cumulative intensity) gives the constant-rate model's runs; any shape keeps the
  expected count ``rate x H`` and puts a share ``(t/H)^shape`` of the failures before t.
* Bad hosts: with a rate far above 1/H, each of c bad hosts fails exactly k times
  (``removed_after: k``) and is removed: c k failures, c removals per run; never
  removed, they fail as a Poisson process of c x rate.
* The scheduler's wait is paid once per interruption.
* Several jobs: the cluster's ETTR is the GPU-weighted mean of the jobs'.
* ``rates: none`` leaves out what the scenario does not give; the report says which.
* Bad input: one line, exit 2, nothing written.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from aifabric.reliability.model import NONE_SOURCE, run_goodput
from aifabric.reliability.montecarlo import (
    BadHosts,
    Kind,
    Levels,
    _Arrivals,
    _Kinds,
    run_engine,
)
from aifabric.reliability.rates import CLASSES, MONTH_S
from aifabric.reliability.spec import GoodputScenario
from aifabric.routing.scenario import scenario_from_dict
from aifabric.topology import build_fabric

from .test_cli import JOB, ROUTING, _goodput
from .test_routing import HPN

DAY = 86400.0
H = 30 * DAY


def _levels(tau: float = 600.0) -> Levels:
    return Levels(["l"], np.array([tau]), np.ones((1, 1)), [5.0], [0.0], [0.0], [False])


def _engine(kinds, trials=2000, seed=1, horizon=H, **kw):
    args = dict(detect=60.0, restart=120.0, swap=0.0, spares=0, pool_weights=np.ones(1),
                horizon=horizon, trials=trials, seed=seed)
    args.update(kw)
    return run_engine(kinds, [], _levels(), **args)


def _scenario(jobs=None, **gp):
    doc = {"name": "fm", "spec": HPN, "jobs": jobs or [JOB], "routing": ROUTING,
           "goodput": _goodput(slowdown="none", sweep=None, **gp)}
    return scenario_from_dict(doc, model=GoodputScenario)


@pytest.fixture(scope="module")
def fabric():
    return build_fabric(_scenario().spec)


# --- per job + per node ---------------------------------------------------------------

def test_a_per_job_rate_adds_to_the_per_node_rate_exactly(fabric):
    r_host, r_job = 0.03, 2.0  # per host and per job, per month
    sc = _scenario(rates="none", failures={"host": {"rate_per_month": r_host},
                                           "job": {"rate_per_month": r_job}})
    s = run_goodput(sc, fabric, trials=2000).summary
    n = s["job"]["hosts"]
    want = (r_job + n * r_host) / MONTH_S * DAY
    assert s["interruptions"]["expected_per_day"] == pytest.approx(want, rel=1e-12)
    assert s["interruptions"]["mtbf_hours"] == pytest.approx(1 / want * 24, rel=1e-12)
    by = {c["class"]: c for c in s["classes"]}
    assert by["job"]["instances"] == 1 and by["job"]["interrupting"] == 1
    assert by["job"]["interruptions_per_day"] == pytest.approx(r_job / 30, rel=1e-12)
    # the Monte Carlo counts them: Poisson with that mean
    mu = want * 30
    got = s["interruptions"]["per_trial_mean"]
    assert abs(got - mu) < 4 * np.sqrt(mu / 2000)
    # and each class its share
    per = s["interruptions"]["by_cause_per_day"]
    assert abs(per["job"] * 30 - r_job) < 4 * np.sqrt(r_job / 2000)


def test_without_a_job_rate_nothing_changes(fabric):
    a = run_goodput(_scenario(), fabric, trials=200).summary
    b = run_goodput(_scenario(rates="defaults"), fabric, trials=200).summary
    c = run_goodput(_scenario(failures={"host": {"rate_per_month": 0.0219, "shape": 1}}),
                    fabric, trials=200).summary
    assert "job" not in {x["class"] for x in a["classes"]}
    for s in (b, c):
        for k in ("ettr", "interruptions", "time_lost_hours", "restores"):
            assert s[k] == a[k], k
    assert a["rates"] == {"choice": "defaults", "set_in_scenario": False,
                          "classes_not_given": list(CLASSES)}
    assert b["rates"]["set_in_scenario"] is True


def test_rates_none_counts_only_what_the_scenario_gives(fabric):
    s = run_goodput(_scenario(rates="none", failures={"gpu": {"rate_per_month": 0.01}}),
                    fabric, trials=200).summary
    for c in s["classes"]:
        if c["class"] == "gpu":
            assert c["rate_per_month"] == 0.01 and c["source"] == "scenario"
        else:
            assert c["rate_per_month"] == 0 and c["source"] == NONE_SOURCE
    assert s["rates"]["choice"] == "none"
    assert "gpu" not in s["rates"]["classes_not_given"]
    want = 0.01 / MONTH_S * s["job"]["gpus"] * DAY
    assert s["interruptions"]["expected_per_day"] == pytest.approx(want, rel=1e-12)


# --- Weibull --------------------------------------------------------------------------

def test_weibull_shape_one_is_the_exponential():
    kinds = [Kind("gpu", 3.0 / (10 * 3600)), Kind("software", 1.0 / (10 * 3600))]
    a = _engine(kinds, seed=5)
    b = _engine(kinds, seed=5, draw="general")  # the inversion, not the exponential
    assert np.array_equal(a.counts, b.counts)
    assert np.allclose(a.ettr, b.ettr, rtol=0, atol=1e-9)
    assert np.allclose(a.recompute, b.recompute, rtol=1e-9, atol=1e-6)


def _arrivals(kinds, T=4000, seed=2, horizon=H):
    rng = np.random.default_rng(seed)
    kt = _Kinds.of(kinds)
    arr = _Arrivals(kinds, kt, None, horizon, T, rng)
    arr.simple = False
    times, which = [], []
    a = arr.first()
    while True:
        act = a < horizon
        if not act.any():
            break
        ki = arr.kind(a, act)
        times.append(a[act])
        which.append(ki[act])
        a = arr.next(a, act)
    return np.concatenate(times), np.concatenate(which)


@pytest.mark.parametrize("shape", [0.5, 0.7, 1.0, 2.0])
def test_weibull_keeps_the_mean_and_moves_the_failures(shape):
    rate, T = 20.0 / H, 4000
    t, _ = _arrivals([Kind("host", rate, shape=shape)], T=T)
    mu = rate * H
    assert abs(len(t) / T - mu) < 4 * np.sqrt(mu / T)  # E[N(H)] = rate H, any shape
    for x in (0.1, 0.5):  # the share before x H: cum(xH) / cum(H) = x^shape
        p = x ** shape
        assert abs((t < x * H).mean() - p) < 4 * np.sqrt(p * (1 - p) / len(t))


def test_mixed_shapes_split_by_intensity():
    r1, r2, T = 10.0 / H, 30.0 / H, 3000
    t, k = _arrivals([Kind("a", r1, shape=0.5), Kind("b", r2, shape=2.0)], T=T)
    assert abs(len(t) / T - (r1 + r2) * H) < 4 * np.sqrt((r1 + r2) * H / T)
    for i, (r, b) in enumerate(((r1, 0.5), (r2, 2.0))):
        n = (k == i).sum() / T
        assert abs(n - r * H) < 4 * np.sqrt(r * H / T)
        early = ((k == i) & (t < H / 2)).sum() / T  # cum_i(H/2) = r H / 2^b
        assert abs(early - r * H * 0.5 ** b) < 4 * np.sqrt(r * H * 0.5 ** b / T)


# --- bad hosts ------------------------------------------------------------------------

def _bad_kinds():
    return [Kind("bad_host", 0.0, wait_s=600.0, loses_memory=True, bad=1),
            Kind("bad_host_removed", 0.0, needs_host=True, repair_s=3 * DAY, bad=2)]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_bad_hosts_fail_k_times_then_are_removed(k):
    c, T = 3, 500
    bad = BadHosts(np.full(T, c), rate=100.0 / DAY, removed_after=k)
    r = _engine(_bad_kinds(), trials=T, bad=bad, spares=4)
    assert (r.counts[1] == c).all()  # every bad host removed: c removals
    assert (r.counts[0] + r.counts[1] == c * k).all()  # each after exactly k failures


def test_bad_hosts_never_removed_are_a_poisson_process():
    c, rate, T = 2, 3.0 / DAY, 2000
    bad = BadHosts(np.full(T, c), rate=rate, removed_after=0)
    r = _engine(_bad_kinds(), trials=T, bad=bad)
    mu = c * rate * H
    assert r.counts[1].sum() == 0
    assert abs(r.counts[0].mean() - mu) < 4 * np.sqrt(mu / T)


def test_bad_hosts_in_the_report(fabric):
    sc = _scenario(bad_hosts={"count": 2, "rate_per_month": 300, "removed_after": 2})
    s = run_goodput(sc, fabric, trials=300).summary
    bh = s["bad_hosts"]
    assert bh["in_job_mean"] == 2 and bh["removed_per_run"] == pytest.approx(2.0)
    assert bh["failures_per_run"] == pytest.approx(4.0)
    assert s["interruptions"]["by_cause_per_day"]["bad_host_removed"] * 30 == \
        pytest.approx(2.0)


# --- scheduler, several jobs ----------------------------------------------------------

def test_the_scheduler_wait_is_paid_once_per_interruption():
    q, T = 1200.0, 2000
    kinds = [Kind("software", 2.0 / H)]  # rare: recoveries never overlap
    r = _engine(kinds, trials=T, queue=q)
    n = r.counts.sum(axis=0)
    assert (r.queue[0] <= q * n + 1e-6).all()
    whole = r.queue[0][n > 0] / n[n > 0]
    assert np.median(whole) == pytest.approx(q)
    total = r.useful + r.recompute + r.stalls + r.detect + r.wait + r.queue + r.restart
    assert np.abs(total - r.horizon).max() < 1e-6 * r.horizon
    base = _engine(kinds, trials=T)
    assert (r.ettr <= base.ettr + 1e-12).all()


def test_cluster_ettr_is_weighted_by_gpus(fabric):
    small = {**JOB, "name": "small", "gpus": 32, "parallel": {"dp": 4, "tp": 8}}
    doc = {"name": "fm", "spec": HPN, "jobs": [JOB, small], "routing": ROUTING,
           "goodput": _goodput(slowdown="none", sweep=None, jobs="all",
                               failures={"job": {"rate_per_month": 3}})}
    sc = scenario_from_dict(doc, model=GoodputScenario)
    s = run_goodput(sc, fabric, trials=300).summary
    cl = s["cluster"]
    rows = cl["jobs"]
    assert [r["job"] for r in rows] == ["j", "small"]
    assert rows[0]["ettr_mean"] == s["ettr"]["mean"]  # the main job is the first row
    g = np.array([r["gpus"] for r in rows])
    e = np.array([r["ettr_mean"] for r in rows])
    assert cl["ettr_weighted_by_gpus"] == pytest.approx((g * e).sum() / g.sum(), rel=1e-12)
    assert cl["gpus"] == 128 + 32
    # per job + per node: the small job's MTBF is far below 4x the big one's
    assert rows[1]["mtbf_hours"] < 4 * rows[0]["mtbf_hours"]
    per_part = [r["expected_per_day"] - 3 / 30 for r in rows]  # the job rate apart
    assert 0 < per_part[1] < per_part[0]


# --- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize("change,field", [
    ({"rates": "maybe"}, "rates"),
    ({"failures": {"job": {"rate_per_month": 1, "shape": 0}}}, "shape"),
    ({"failures": {"host": {"shape": 99}}}, "shape"),
    ({"bad_hosts": {"rate_per_month": 5}}, "bad_hosts"),
    ({"bad_hosts": {"fraction": 2, "rate_per_month": 5}}, "fraction"),
    ({"bad_hosts": {"count": 1, "rate_per_month": 5, "removed_after": 0}}, "removed_after"),
    ({"recovery": {"scheduler_wait": "-5min"}}, "scheduler_wait"),
    ({"jobs": ["nope"]}, "goodput.jobs"),
    ({"jobs": ["j", "j"]}, "jobs"),
    ({"failures": {"jobs": {"rate_per_month": 1}}}, "jobs"),
])
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path, change, field):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "small", "spec": HPN, "jobs": [JOB],
                                 "routing": ROUTING, "goodput": _goodput(**change)}),
                 encoding="utf-8")
    out = tmp_path / "out"
    r = cli("goodput", p, "--out", out)
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], r.err
    assert "Traceback" not in r.err and not out.exists()


def test_the_report_shows_the_choice(cli, tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "small", "spec": HPN, "jobs": [JOB],
                                 "routing": ROUTING,
                                 "goodput": _goodput(slowdown="none", sweep=None)}),
                 encoding="utf-8")
    r = cli("goodput", p, "--trials", "50", "--out", tmp_path / "o")
    assert r.code == 0, r.err
    assert "rates: defaults (goodput.rates not set" in r.out
    s = json.loads((tmp_path / "o" / "goodput.json").read_text())
    assert s["rates"]["choice"] == "defaults" and not s["rates"]["set_in_scenario"]
