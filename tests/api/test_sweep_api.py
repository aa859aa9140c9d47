"""Sweeps from Python: af.load_sweep / af.run_sweep / af.results / af.sweep_report give
what `aifabric sweep` gives, and bad input stops before any point runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aifabric as af

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

SMALL = Path(__file__).resolve().parents[1] / "sweep" / "small.yaml"


def _sweep_file(tmp_path: Path, grid: dict, seeds: int = 2) -> Path:
    p = tmp_path / "sw.yaml"
    p.write_text(json.dumps({"name": "api", "scenario": str(SMALL), "grid": grid,
                             "repeat": {"seeds": seeds, "fields": ["collectives.0.seed"]}}))
    return p


def test_run_sweep_stores_every_point_once_and_reports(tmp_path):
    sw = af.load_sweep(_sweep_file(tmp_path, {"collectives.0.size_bytes": [1 << 20, 4 << 20]}))
    assert len(sw.points) == 4
    run = af.run_sweep(sw, tmp_path / "store", jobs=1)
    assert (run.total, run.ok, run.failed, run.interrupted) == (4, 4, 0, False)
    rows = af.results(store=tmp_path / "store")
    assert sorted(rows["run_id"]) == sorted(p.run_id for p in sw.points)
    # each row's figures are the point's own run: simulate the scenario again here
    for p in sw.points:
        row = rows[rows["run_id"] == p.run_id].iloc[0]
        scn = sw.scenario.with_overrides(p.overrides)
        assert af.content_hash(scn) == p.run_id
        assert row["makespan_ns"] == pytest.approx(af.simulate(scn).makespan_ns)
    # a second run without resume is refused; with resume nothing runs again
    with pytest.raises(af.SpecError):
        af.run_sweep(sw, tmp_path / "store", jobs=1)
    again = af.run_sweep(sw, tmp_path / "store", jobs=1, resume=True)
    assert (again.skipped, again.ok) == (4, 0)
    assert len(af.results(store=tmp_path / "store")) == 4
    report = af.sweep_report(tmp_path / "store")
    assert report.name == "report.md" and report.is_file()


def test_bad_input_stops_before_any_point(tmp_path):
    with pytest.raises(af.SpecError, match="closest: size_bytes"):
        af.load_sweep(_sweep_file(tmp_path, {"collectives.0.size_byte": [1 << 20]}))
    with pytest.raises(af.SpecError, match="--jobs"):
        af.run_sweep(_sweep_file(tmp_path, {"collectives.0.size_bytes": [1 << 20]}),
                     tmp_path / "store", jobs=0)
    assert not (tmp_path / "store").exists()
