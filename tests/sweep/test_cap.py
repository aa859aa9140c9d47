"""The cap on a sweep's points: counted before anything is expanded, refused at once above
the cap (the sweep file's ``max_points``, else ``AIFABRIC_MAX_SWEEP_POINTS``, else
100,000), naming the axes, the count and the cap; validation reports its progress."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from aifabric.errors import SpecError
from aifabric.sweep import load_sweep
from aifabric.sweep.model import DEFAULT_MAX_POINTS, MAX_POINTS, MAX_POINTS_ENV
from tests.conftest import ROOT
from tests.sweep.conftest import write_sweep

#: 100 x 100 x 100 = 1,000,000 points
MILLION = """grid:
  collectives.0.seed: [{a}]
  seed: [{a}]
  collectives.0.channels: [{b}]
""".format(a=", ".join(map(str, range(100))), b=", ".join(["1"] * 100))


def test_a_million_point_grid_is_refused_in_under_a_second_naming_count_and_cap(tmp_path):
    path = write_sweep(tmp_path, "huge", MILLION)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop(MAX_POINTS_ENV, None)
    started = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "aifabric", "sweep", "run", str(path),
                        "--dry-run"], capture_output=True, text=True, env=env, timeout=60,
                       check=False)
    # the interpreter and the command's imports are most of it: time the refusal itself too
    wall = time.perf_counter() - started
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "1,000,000 points" in lines[0] and f"at most {DEFAULT_MAX_POINTS:,}" in lines[0]
    assert "collectives.0.seed 100 x seed 100 x collectives.0.channels 100" in lines[0]
    assert "max_points" in lines[0] and MAX_POINTS_ENV in lines[0]
    assert wall < 30, wall
    started = time.perf_counter()
    with pytest.raises(SpecError):
        load_sweep(path)
    assert time.perf_counter() - started < 1.0


def test_the_cap_is_a_setting(tmp_path, monkeypatch):
    """12 points: refused under a cap of 11 (environment or file), run under 12; the
    file's max_points wins over the environment."""
    body = "grid:\n  seed: [0, 1, 2, 3]\n  collectives.0.seed: [0, 1, 2]\n"
    path = write_sweep(tmp_path, "twelve", body)
    monkeypatch.setenv(MAX_POINTS_ENV, "11")
    with pytest.raises(SpecError) as err:
        load_sweep(path)
    msg = str(err.value)
    assert "12 points (grid seed 4 x collectives.0.seed 3)" in msg and "at most 11" in msg
    monkeypatch.setenv(MAX_POINTS_ENV, "12")
    assert len(load_sweep(path).points) == 12
    capped = write_sweep(tmp_path, "capped", body + "max_points: 11\n")
    with pytest.raises(SpecError) as err:
        load_sweep(capped)
    assert "at most 11 (raise it with max_points," in str(err.value)
    monkeypatch.setenv(MAX_POINTS_ENV, "1")
    raised = write_sweep(tmp_path, "raised", body + "max_points: 12\n")
    assert len(load_sweep(raised).points) == 12


@pytest.mark.parametrize("value", ["0", "-5", "lots", str(MAX_POINTS + 1)])
def test_a_bad_cap_in_the_environment_is_one_problem_naming_it(tmp_path, monkeypatch, value):
    path = write_sweep(tmp_path, "env", "grid:\n  seed: [0, 1]\n")
    monkeypatch.setenv(MAX_POINTS_ENV, value)
    with pytest.raises(SpecError) as err:
        load_sweep(path)
    (problem,) = err.value.problems
    assert problem.path == MAX_POINTS_ENV and "allowed: an integer 1.." in problem.message


@pytest.mark.parametrize("value", [0, MAX_POINTS + 1, "many"])
def test_a_bad_max_points_is_refused(tmp_path, value):
    path = write_sweep(tmp_path, "bad", f"grid:\n  seed: [0, 1]\nmax_points: {value}\n")
    with pytest.raises(SpecError) as err:
        load_sweep(path)
    assert any(q.path == "max_points" for q in err.value.problems), err.value.problems


def test_validation_reports_progress_up_to_the_total(tmp_path):
    body = "grid:\n  seed: [{}]\n".format(", ".join(map(str, range(2000))))
    path = write_sweep(tmp_path, "progress", body)
    seen: list[tuple[int, int]] = []
    sw = load_sweep(path, progress=lambda done, total: seen.append((done, total)))
    assert len(sw.points) == 2000
    assert seen[0] == (0, 2000) and seen[-1] == (2000, 2000)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) >= 4
    small = write_sweep(tmp_path, "small", "grid:\n  seed: [0, 1]\n")
    quiet: list[tuple[int, int]] = []
    load_sweep(small, progress=lambda done, total: quiet.append((done, total)))
    assert quiet == []  # a small sweep validates at once: no bar
