"""The collective view: ``aifabric_collective_link_bytes`` from a run's
``collective_links`` table (``aifabric metrics``), and the collective dashboard's join of
it with the link utilization, answered by a real Prometheus after backfill."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from aifabric.telemetry.openmetrics import DEFAULT_START, parse_start

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"
SCN = {"packet": SCENARIOS / "incast-dcqcn.yaml", "flow": SCENARIOS / "allreduce-hpn.yaml"}
NAME = "aifabric_collective_link_bytes"
_SAMPLE = re.compile(r'^([a-z_]+)(\{[^}]*\})? (\S+) (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _aifabric(*args: object) -> None:
    subprocess.run([sys.executable, "-m", "aifabric", *map(str, args)], text=True,
                   capture_output=True, check=True, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    for kind, scn in SCN.items():
        _aifabric("simulate", scn, "--out", base / kind)
    return {k: base / k for k in SCN}


def _series(text: str) -> dict[str, dict[tuple, list[tuple[float, float]]]]:
    """name -> {sorted label items -> [(timestamp s, value)]}."""
    out: dict[str, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        key = tuple(sorted(_LABEL.findall(m[2] or "")))
        out[m[1]][key].append((float(m[4]), float(m[3])))
    return out


def _table(path: Path) -> dict[str, np.ndarray]:
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def _run_end_ns(run: Path) -> float:
    end = float(_table(run / "timeline.csv")["end_ns"].astype(float).max())
    if (run / "packet_queues.csv").is_file():
        end = max(end, float(_table(run / "packet_queues.csv")["time_ns"].astype(float).max()))
    return end


@pytest.mark.parametrize("kind", ["packet", "flow"])
def test_one_series_per_row_with_its_bytes_over_the_whole_run(runs, kind, tmp_path):
    """Without the scenario the ports are named from the run (device = the link's from,
    peer = its to): every row of collective_links is one series with the row's bytes,
    the same value from the run's start to its end, samples at most 240 s apart (under
    Prometheus' 5-minute lookback) — and the rows are the links the run's transfers
    cross (the table sums to the collectives' moved bytes times their hops)."""
    run = runs[kind]
    _aifabric("metrics", run, "--out", tmp_path / "run.om")
    ser = _series((tmp_path / "run.om").read_text())[NAME]
    t = _table(run / "collective_links.csv")
    assert len(t["bytes"]) > 0
    want = {(("collective", c), ("device", a), ("direction", d), ("peer", b)): float(v)
            for c, a, b, d, v in zip(t["collective"], t["from"], t["to"], t["direction"],
                                     t["bytes"], strict=True)}
    got = {}
    start = parse_start(DEFAULT_START)
    end = start + _run_end_ns(run) / 1000  # 1 simulated ns = 1 ms
    for key, pts in ser.items():
        lab = dict(key)
        got[tuple((k, lab[k]) for k in ("collective", "device", "direction", "peer"))] = \
            pts[0][1]
        ts = np.array([p[0] for p in pts])
        assert {p[1] for p in pts} == {pts[0][1]}
        assert ts[0] == start and ts[-1] == pytest.approx(end, abs=1e-3)
        assert np.diff(ts).max(initial=0) <= 240
        assert "job" not in lab  # training_job, never job (Prometheus renames it)
    assert got == want


def test_the_dashboard_joins_the_collective_with_its_links_in_prometheus(
        runs, tmp_path, promtool, start_prometheus):
    """The packet run (with its scenario: full port labels) imported by promtool into a
    real Prometheus: the collective dashboard's 'Load on the links $collective crosses'
    query, mid-run, returns the utilization of exactly the link directions of the
    collective's rows that have a utilization series, with that series' value; the
    table panel returns the rows' bytes."""
    from aifabric.telemetry.dashboards import dashboards, panel_exprs

    run = runs["packet"]
    om = tmp_path / "run.om"
    _aifabric("metrics", run, "--scenario", SCN["packet"], "--out", om)
    ser = _series(om.read_text())
    blocks = tmp_path / "data"
    p = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om),
                        str(blocks)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    server = start_prometheus(storage=blocks)
    doc = json.loads(dict(dashboards())["collective.json"])
    exprs = dict(panel_exprs(doc))
    t = _table(run / "collective_links.csv")
    name = str(t["collective"][0])
    assert set(t["collective"]) == {name}  # the incast: one traffic pattern

    at = parse_start(DEFAULT_START) + _run_end_ns(run) / 2000  # mid-run
    port = ("device", "port", "peer", "direction")
    mine = {tuple(dict(k)[x] for x in port) for k in ser[NAME]}
    want = {}
    for key, pts in ser["aifabric_link_utilization_ratio"].items():
        k = tuple(dict(key).get(x, "") for x in port)
        before = [v for ts, v in pts if ts <= at]
        if k in mine and before and at - max(ts for ts, _ in pts if ts <= at) < 300:
            want[k] = before[-1]
    assert len(want) >= 8  # the incast's senders' NIC ports and the switch ports
    q = exprs["Load on the links $collective crosses"].replace("$collective", name)
    got = {tuple(r["metric"].get(x, "") for x in port): float(r["value"][1])
           for r in server.query(q, at)}
    assert got == pytest.approx(want)
    assert all(r["metric"]["collective"] == name for r in server.query(q, at))

    q = exprs["Links $collective crosses, with its bytes"].replace("$collective", name)
    rows = server.query(q, at)
    assert sorted(float(r["value"][1]) for r in rows) == sorted(t["bytes"].astype(float))
