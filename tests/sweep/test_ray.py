"""Sweeps on a real local Ray cluster (``ray.init(num_cpus=2)``, started here and shut
down after): the same rows as the local pool, byte for byte; a Ray worker killed while
it runs a point (found by its process title) has the point retried; a point whose worker
dies every time is recorded failed after Ray's retries."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from aifabric.sweep import load_sweep, run_sweep
from aifabric.sweep.worker import KILL_HOOK
from tests.sweep.conftest import (
    alive,
    cmdline,
    raw_ids,
    row_files,
    rows,
    wait_until,
    write_sweep,
)
from tests.sweep.test_run import FLOW, SLOW

ray = pytest.importorskip("ray", reason="the ray extra: pip install 'aifabric[ray]'")

DIE = "repeat: {seeds: 3, fields: [collectives.0.seed]}\ngrid:\n  routing.policy: [spray]\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster of 2 CPUs; its workers inherit the kill hook aimed at one
    point of the DIE sweep (no other sweep has that point)."""
    tmp = tmp_path_factory.mktemp("ray")
    victim = load_sweep(write_sweep(tmp, "die", DIE)).points[1].run_id[:16]
    old = os.environ.get(KILL_HOOK)
    os.environ[KILL_HOOK] = f"{victim}:99:{tmp}"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield tmp, victim
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop(KILL_HOOK, None)
        else:
            os.environ[KILL_HOOK] = old


def test_local_and_ray_store_identical_rows(cluster, tmp_path):
    sw = load_sweep(write_sweep(tmp_path, "flow", FLOW))
    local = run_sweep(sw, tmp_path / "local", engine="local", jobs=2)
    on_ray = run_sweep(sw, tmp_path / "ray", engine="ray")
    assert (local.ok, local.failed) == (on_ray.ok, on_ray.failed) == (6, 6)
    a = {f.name: f.read_bytes() for f in row_files(tmp_path / "local", "flow")}
    b = {f.name: f.read_bytes() for f in row_files(tmp_path / "ray", "flow")}
    assert len(a) == 1 and a == b  # the compacted Parquet rows, byte for byte
    assert raw_ids(tmp_path / "ray", "flow") == sorted(p.run_id for p in sw.points)
    assert rows(tmp_path / "local", "flow").to_csv() == rows(tmp_path / "ray", "flow").to_csv()
    from aifabric.store import Store

    ex = Store(tmp_path / "ray").query("SELECT DISTINCT executor FROM timings")
    assert list(ex["executor"]) == ["ray"]


def _ray_running(name: str) -> list[int]:
    """Pids of Ray workers running a task ``name`` now (Ray titles them ``ray::name``)."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
            and cmdline(int(p.name)).startswith(f"ray::{name} ")]


def test_a_ray_worker_killed_mid_point_has_its_point_retried(cluster, tmp_path):
    sw = load_sweep(write_sweep(tmp_path, "kill", SLOW.replace("seeds: 10", "seeds: 6")))
    result: dict = {}
    th = threading.Thread(target=lambda: result.update(run=run_sweep(
        sw, tmp_path / "store", engine="ray")))
    th.start()
    try:
        pids = wait_until(lambda: _ray_running("execute"), 120, "a Ray worker running a "
                          "point")
        os.kill(pids[0], signal.SIGKILL)
        wait_until(lambda: not alive(pids[0]), 30, "the killed worker to die")
    finally:
        th.join(timeout=300)
    assert not th.is_alive()
    run = result["run"]
    assert (run.ok, run.failed) == (6, 0)
    df = rows(tmp_path / "store", "kill")
    assert sorted(df["run_id"]) == sorted(p.run_id for p in sw.points)
    assert raw_ids(tmp_path / "store", "kill") == sorted(p.run_id for p in sw.points)


def test_a_point_whose_ray_worker_always_dies_is_recorded_failed(cluster):
    tmp, victim = cluster
    sw = load_sweep(tmp / "die.yaml")
    run = run_sweep(sw, tmp / "store", engine="ray")
    assert (run.ok, run.failed) == (2, 1)
    kills = (tmp / f"kills-{victim}").read_text().split()
    assert len(kills) == 3  # the first run and Ray's 2 retries
    df = rows(tmp / "store", "die")
    bad = df[df["status"] == "failed"]
    assert [r[:16] for r in bad["run_id"]] == [victim]
    assert "Ray task failed after 2 retries" in bad["error"].iloc[0]
    assert len(df) == 3
