"""benchmarks/bench_scaling.py: its exponent fit against closed forms, and a whole run of
the script on tiny sizes (every point in a fresh child process, a refusal by the size
guard recorded with the guard's message, the results and the plot written). The
timings themselves are the benchmark's, not checked here."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_scaling.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_scaling", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("a,b", [(3.0, 1.5), (0.02, 1.0), (1e-6, 2.0), (40.0, 0.33)])
def test_fit_recovers_known_exponent(a: float, b: float) -> None:
    fit = _bench().fit_exponent
    n = np.array([1024 << i for i in range(8)], dtype=float)
    a_fit, b_fit = fit(n, a * n ** b)
    assert b_fit == pytest.approx(b, abs=1e-9)
    assert a_fit == pytest.approx(a, rel=1e-6)
    # multiplicative noise of +-5 %: the slope stays within a few hundredths
    rng = np.random.default_rng(7)
    _, b_noisy = fit(n, a * n ** b * rng.uniform(0.95, 1.05, n.size))
    assert abs(b_noisy - b) < 0.03


def test_fit_needs_two_distinct_positive_points() -> None:
    fit = _bench().fit_exponent
    assert all(math.isnan(x) for x in fit([1024], [1.0]))
    assert all(math.isnan(x) for x in fit([1024, 1024], [1.0, 2.0]))
    # a zero, a negative or a NaN point is left out, not taken as log(0)
    _, b = fit([1, 2, 4, 8, 16], [0.0, 4.0, -1.0, 64.0, float("nan")])
    assert b == pytest.approx(2.0)


def _need(n: int) -> int:
    """The size guard's figure for the script's All-to-All on n GPUs (the workload's peak
    plus the fabric it holds, as ``simulate`` checks it)."""
    import aifabric as af
    from aifabric.guard import fabric_bytes
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.scenario import SimScenario
    from aifabric.workload.estimate import estimate_workload

    bench = _bench()
    scn = scenario_from_dict({"name": "a2a", "spec": bench._flow_spec(n),
                              "routing": {"policy": "ecmp"}, "collectives": [
                                  {"op": "alltoall", "size_bytes": "64MiB", "gpus": n}]},
                             base_dir=ROOT, model=SimScenario)
    fab = af.build_fabric(scn.spec)
    return estimate_workload(scn, n).peak_bytes + fabric_bytes(fab)


def test_quick_run_records_every_point(tmp_path: Path) -> None:
    """Tiny sizes, the guard's limit between the two All-to-Alls' needs: the smaller
    one runs, the larger one is refused with the guard's message; nothing is dropped."""
    lo, hi = _need(64), _need(128)
    assert lo < hi
    limit = (lo + hi) // 2
    r = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--gpus", "64,128",
                        "--stages", "plan,alltoall", "--max-memory", str(limit),
                        "--limit-s", "120", "--no-warmup", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "scaling.json").read_text())
    pts = {(p["stage"], p["n"]): p for p in doc["points"]}
    assert set(pts) == {("plan", 64), ("plan", 128), ("alltoall", 64), ("alltoall", 128)}
    for key in (("plan", 64), ("plan", 128), ("alltoall", 64)):
        p = pts[key]
        assert p["status"] == "ok", p
        assert 0 < p["cpu_s"] <= p["total_cpu_s"]
        assert p["base_mb"] <= p["peak_mb"]
    # a plan of n GPUs reports n GPUs; an All-to-All of n GPUs is n (n - 1) transfers
    assert pts[("plan", 128)]["gpus"] == 128
    assert pts[("alltoall", 64)]["transfers"] == 64 * 63
    refused = pts[("alltoall", 128)]
    assert refused["status"] == "refused"
    assert "collectives[0]" in refused["message"] and "transfers" in refused["message"]
    assert "AIFABRIC_MAX_MEMORY" in refused["message"]
    assert "alltoall at 128: refused: collectives[0]" in r.stdout
    # the fit: over the ok points only (the All-to-All has one: no exponent)
    assert doc["fits"]["plan"]["points"] == 2
    assert doc["fits"]["alltoall"]["points"] == 1
    assert doc["fits"]["alltoall"]["time_exponent"] is None
    rows = (tmp_path / "scaling.csv").read_text().splitlines()
    assert len(rows) == 1 + 4
    png = tmp_path / "scaling.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_is_deterministic(tmp_path: Path) -> None:
    bench = _bench()
    recs = [{"stage": "plan", "n": n, "status": "ok", "cpu_s": 0.01 * n ** 0.9,
             "peak_mb": 100 + n / 100, "base_mb": 100.0} for n in (1024, 2048, 4096)]
    recs.append({"stage": "alltoall", "n": 1024, "status": "refused", "message": "x"})
    fit = bench.fits(recs)
    assert fit["plan"]["time_exponent"] == pytest.approx(0.9)
    assert fit["plan"]["memory_exponent"] == pytest.approx(1.0)
    bench.plot(recs, fit, tmp_path / "a.png")
    bench.plot(recs, fit, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
