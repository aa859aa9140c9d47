"""The example sweeps: each validates and expands (``--dry-run``) and says in its header
what it asks; the smallest one runs and reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from aifabric.sweep import load_sweep, run_sweep, write_report
from tests.conftest import EXAMPLES

SWEEPS = sorted((EXAMPLES / "sweeps").glob("*.yaml"))
#: points of each example: the docs' table says the same
POINTS = {"hpn-seed-modes": 20, "hpn-planes": 40, "dcqcn-ecn": 15}


def test_the_three_examples_are_there():
    assert {p.stem for p in SWEEPS} == set(POINTS)


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_example_validates_and_expands(cli, path: Path):
    text = path.read_text()
    assert text.startswith("# ") and "How to read it" in text  # the header comment
    r = cli("sweep", path, "--dry-run")
    assert r.code == 0, r.err
    assert f"sweep {path.stem}: {POINTS[path.stem]} points" in r.out
    sw = load_sweep(path)
    assert sw.name == path.stem and len(sw.points) == POINTS[path.stem]
    assert len({p.run_id for p in sw.points}) == len(sw.points)
    assert sw.spec.figures  # each example says what to plot


def test_the_smallest_example_runs_and_reports(tmp_path):
    """dcqcn-ecn: 15 packet runs of a few hundred ms (the HPN ones take a minute)."""
    sw = load_sweep(EXAMPLES / "sweeps" / "dcqcn-ecn.yaml")
    run = run_sweep(sw, tmp_path / "store", jobs=2)
    assert (run.ok, run.failed) == (len(sw.points), 0)
    md = write_report(tmp_path / "store", tmp_path / "report")
    text = md.read_text()
    for field in sw.fields:
        assert f"## {field}" in text
    for fig in sw.spec.figures:
        assert fig in text  # every figure it names is reported (none missing)
    assert "no such column" not in text
    import pandas as pd

    pts = pd.read_csv(md.parent / "points.csv")
    p99 = pts[pts["figure"] == "packet.fct.slowdown_p99"]
    assert len(p99) == len(sw.points) and (p99["n"] == 1).all()
    assert (p99["mean"] >= 1).all()  # a slowdown is never below 1
