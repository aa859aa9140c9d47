"""Running sweeps locally: rows as points finish, failed points recorded and the sweep
going on, a dead worker's point retried (never twice), SIGINT then --resume, bad input
refused before any point, and the report's tables equal to a groupby of the rows."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from aifabric.sweep import load_sweep, run_sweep, write_report
from aifabric.sweep.worker import KILL_HOOK
from tests.sweep.conftest import (
    alive,
    pool_workers,
    raw_ids,
    row_files,
    rows,
    stop,
    wait_until,
    write_sweep,
)

#: 2 policies x 2 sizes x 3 seeds, and one size that is valid but fails to run (64 GPUs
#: on a 16-GPU fabric): 12 flow points, 6 failing
FLOW = """grid:
  routing.policy: [ecmp, source_port]
  collectives.0.gpus: [8, 64]
repeat: {seeds: 3, fields: [collectives.0.seed]}
figures: [makespan_ns, coll.0.busbw_gb_per_s, missing_figure]
"""
#: 10 packet points of about 1 s each: long enough to kill or interrupt in the middle
SLOW = """sim_note: packet
grid:
  collectives.0.size_bytes: [33554432]
  sim: [packet]
repeat: {seeds: 10, fields: [collectives.0.seed]}
""".replace("sim_note: packet\n", "")


def _cli(*args, **kw):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "aifabric", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.fixture(scope="module")
def flow_store(tmp_path_factory):
    """The FLOW sweep run once on 2 local workers."""
    tmp = tmp_path_factory.mktemp("flow")
    sw = load_sweep(write_sweep(tmp, "flow", FLOW))
    run = run_sweep(sw, tmp / "store", jobs=2)
    return sw, tmp / "store", run


def test_failed_points_are_rows_and_the_sweep_goes_on(flow_store):
    sw, store, run = flow_store
    assert (run.ok, run.failed, run.total, run.exit_code) == (6, 6, 12, 1)
    df = rows(store, "flow")
    assert sorted(df["run_id"]) == sorted(p.run_id for p in sw.points)  # each point once
    assert sorted(df["point"]) == list(range(12))
    failed = df[df["status"] == "failed"]
    assert set(failed["param.collectives.0.gpus"]) == {64}
    for err in failed["error"]:
        assert "64" in err and "\n" not in err  # what went wrong, on one line
    ok = df[df["status"] == "ok"]
    assert ok["error"].isna().all() and (ok["makespan_ns"] > 0).all()
    # the row holds what the point asked for
    for _, r in df.iterrows():
        ov = json.loads(r["overrides"])
        assert ov["routing.policy"] == r["param.routing.policy"]
        assert ov["collectives.0.seed"] == r["param.collectives.0.seed"]
    # wall times are apart from the rows
    timing = {"wall_s", "simulate_s", "prepare_s", "tables_s", "attempt", "worker", "executor"}
    assert not timing & set(df.columns)
    from aifabric.store import Store

    t = Store(store).query("SELECT point, attempt, executor, wall_s FROM timings")
    assert len(t) == 12 and (t["attempt"] == 1).all() and (t["wall_s"] > 0).all()


def test_same_sweep_in_process_gives_the_same_row_bytes(flow_store, tmp_path):
    """--jobs 1 (in this process) and 2 workers store byte-identical rows."""
    sw, store, _ = flow_store
    run = run_sweep(sw, tmp_path / "serial", jobs=1)
    assert (run.ok, run.failed) == (6, 6)
    a = {f.name: f.read_bytes() for f in row_files(store, "flow")}
    b = {f.name: f.read_bytes() for f in row_files(tmp_path / "serial", "flow")}
    assert len(a) == 1 and a == b  # the finished sweep compacted into one file, same bytes
    assert raw_ids(store, "flow") == sorted(p.run_id for p in sw.points)


def test_report_tables_equal_a_groupby_of_the_rows(flow_store, tmp_path):
    import duckdb
    import pandas as pd

    _, store, _ = flow_store
    md = write_report(store, tmp_path / "rep")
    out = md.parent
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["report.md", "rows.csv", "points.csv",
                            "by-routing.policy.csv", "by-collectives.0.gpus.csv",
                            *(f"{f}--{x}.png" for f in ("makespan_ns", "coll.0.busbw_gb_per_s")
                              for x in ("routing.policy", "collectives.0.gpus"))])
    text = md.read_text()
    assert "figure missing_figure: no such column" in text
    assert "## Failed points" in text and "[rows.csv](rows.csv)" in text
    for png in out.glob("*.png"):
        assert f"({png.name})" in text
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(pd.read_csv(out / "rows.csv")) == 12
    by = pd.read_csv(out / "by-routing.policy.csv")
    con = duckdb.connect()
    con.register("r", rows(store, "flow"))
    for fig in ("makespan_ns", "coll.0.busbw_gb_per_s"):
        want = con.sql(f"""SELECT "param.routing.policy" AS v, avg("{fig}") AS mean,
                           stddev_samp("{fig}") AS std, min("{fig}") AS min,
                           max("{fig}") AS max, count("{fig}") AS n FROM r
                           WHERE status = 'ok' GROUP BY 1 ORDER BY 1""").df()
        got = by[by["figure"] == fig].reset_index(drop=True)
        assert list(got["routing.policy"]) == list(want["v"]) == ["ecmp", "source_port"]
        for col in ("mean", "std", "min", "max"):
            assert got[col].to_numpy() == pytest.approx(want[col].to_numpy(), rel=1e-12)
        assert list(got["n"]) == list(want["n"]) == [3, 3]
    pts = pd.read_csv(out / "points.csv")
    assert set(pts["n"]) == {3}  # per grid point: the 3 seeds
    assert len(pts) == 2 * 2  # ok grid points (policy x 8 GPUs) x 2 figures
    # deterministic: the same rows give the same bytes, plots included
    again = write_report(store, tmp_path / "rep2").parent
    for f in out.iterdir():
        assert (again / f.name).read_bytes() == f.read_bytes(), f.name


def test_a_store_holding_the_sweep_is_refused_without_resume(flow_store, cli):
    sw, store, _ = flow_store
    before = sorted(p.name for p in row_files(store, "flow"))
    r = cli("sweep", sw.file, "--out", store, "--jobs", "2")
    assert r.code == 2 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1
    assert "already holds 12 run(s)" in r.err and "--resume" in r.err
    r = cli("sweep", sw.file, "--out", store, "--resume")
    assert r.code == 1  # the 6 failed points fail again, nothing else runs
    assert "0 ok, 6 failed, 6 already stored (skipped) of 12 points" in r.out
    assert raw_ids(store, "flow") == sorted(p.run_id for p in sw.points)  # each once
    assert len(rows(store, "flow")) == len(before) * 12  # one compacted file, 12 rows


def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, cli):
    out = tmp_path / "out"
    bad_path = write_sweep(tmp_path, "p", "grid:\n  routing.seed_mod: [same]\n")
    bad_type = write_sweep(tmp_path, "t", "grid:\n  routing.seed_mode: [same, 3]\n")
    good = write_sweep(tmp_path, "g", "grid:\n  routing.seed_mode: [same]\n")
    (tmp_path / "plain").write_text("a file\n")
    for args, says in [
        ((bad_path, "--out", out), "closest: seed_mode"),
        ((bad_type, "--out", out), "grid.routing.seed_mode: point 1"),
        ((good, "--out", out, "--engine", "ray", "--address", "127.0.0.1:9"),
         "--address: Ray at 127.0.0.1:9 is unreachable"),
        ((good, "--out", out, "--engine", "spark"), "--engine: unknown engine 'spark'"),
        ((good, "--out", out, "--jobs", "0"), "--jobs: got 0"),
        ((good,), "--store: missing"),  # the store is --store (--out: its old spelling)
        ((good, "--out", tmp_path / "plain" / "store"), "plain is a file, not a folder"),
    ]:
        t0 = time.monotonic()
        r = cli("sweep", *args)
        assert r.code == 2, (args, r.err)
        assert len(r.err.strip().splitlines()) == 1 and says in r.err, r.err
        assert "Traceback" not in r.err
        assert time.monotonic() - t0 < 30  # an unreachable address is bounded
        assert not out.exists()


def test_dry_run_lists_the_points_and_writes_nothing(tmp_path, cli):
    path = write_sweep(tmp_path, "d", FLOW)
    r = cli("sweep", path, "--dry-run", "--out", tmp_path / "none")
    assert r.code == 0, r.err
    assert "sweep d: 12 points" in r.out and "every point validated" in r.out
    sw = load_sweep(path)
    for p in sw.points:
        assert p.run_id[:12] in r.out
    assert not (tmp_path / "none").exists()


def test_a_worker_that_dies_every_time_is_recorded_failed(tmp_path, monkeypatch):
    """Point 1's worker kills itself (SIGKILL) each time it starts it: the pool is
    recreated, the point is retried twice, then stored failed; the rest all ok."""
    sw = load_sweep(write_sweep(tmp_path, "die", "repeat: {seeds: 4, fields: "
                                "[collectives.0.seed]}\n"))
    victim = sw.points[1].run_id
    monkeypatch.setenv(KILL_HOOK, f"{victim[:16]}:99:{tmp_path}")
    run = run_sweep(sw, tmp_path / "store", jobs=2)
    assert (run.ok, run.failed) == (3, 1)
    kills = (tmp_path / f"kills-{victim[:16]}").read_text().split()
    assert len(kills) == 3  # the first run and 2 retries, each in a new worker
    assert all(not alive(int(pid)) for pid in kills)
    df = rows(tmp_path / "store", "die")
    bad = df[df["status"] == "failed"]
    assert list(bad["run_id"]) == [victim]
    assert "worker died 3 times" in bad["error"].iloc[0]
    assert "SIGKILL" in bad["error"].iloc[0]
    assert sorted(df["run_id"]) == sorted(p.run_id for p in sw.points)


def test_a_worker_that_dies_once_has_its_point_retried(tmp_path, monkeypatch):
    sw = load_sweep(write_sweep(tmp_path, "once", "repeat: {seeds: 4, fields: "
                                "[collectives.0.seed]}\n"))
    victim = sw.points[2].run_id
    monkeypatch.setenv(KILL_HOOK, f"{victim[:16]}:1:{tmp_path}")
    run = run_sweep(sw, tmp_path / "store", jobs=2)
    assert (run.ok, run.failed) == (4, 0)
    from aifabric.store import Store

    t = Store(tmp_path / "store").query("SELECT run_id, attempt FROM timings")
    assert dict(zip(t["run_id"], t["attempt"], strict=True))[victim] == 2
    assert len(t) == 4


def test_sigkill_of_a_pool_worker_mid_sweep(tmp_path):
    """Kill one worker of a running ``aifabric sweep`` from outside: the point it ran is
    retried; every point is stored once; the sweep exits 0."""
    path = write_sweep(tmp_path, "kill", SLOW.replace("seeds: 10", "seeds: 6"))
    out = tmp_path / "store"
    proc = _cli("sweep", path, "--out", out, "--jobs", "2")
    try:
        wait_until(lambda: row_files(out, "kill"), 180, "a first stored point")
        workers = wait_until(lambda: pool_workers(proc.pid), 30, "the pool's workers")
        os.kill(workers[0], signal.SIGKILL)
        so, err = proc.communicate(timeout=240)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    sw = load_sweep(path)
    df = rows(out, "kill")
    assert sorted(df["run_id"]) == sorted(p.run_id for p in sw.points)
    assert (df["status"] == "ok").all()
    assert raw_ids(out, "kill") == sorted(p.run_id for p in sw.points)  # none twice
    assert "6 ok, 0 failed" in so  # 6 writes in all
    from aifabric.store import Store

    t = Store(out).query("SELECT attempt, worker FROM timings")
    # the point the dead worker ran, run again; the other worker's point is not charged
    assert sorted(t["attempt"]) == [1] * 5 + [2]
    assert f":{workers[0]}" not in " ".join(t[t["attempt"] == 2]["worker"])


def test_sigint_then_resume_completes_without_duplicates(tmp_path):
    path = write_sweep(tmp_path, "int", SLOW)
    out = tmp_path / "store"
    proc = _cli("sweep", path, "--out", out, "--jobs", "2")
    try:
        wait_until(lambda: len(row_files(out, "int")) >= 2, 180, "2 stored points")
        workers = pool_workers(proc.pid)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 130, err
    m = re.search(r"interrupted: (\d+) of 10 points stored; run again with --resume", err)
    assert m, err
    stored = int(m.group(1))
    assert 2 <= stored < 10 and len(row_files(out, "int")) == stored
    wait_until(lambda: not any(alive(w) for w in workers), 30, "the workers to end")
    proc = _cli("sweep", path, "--out", out, "--jobs", "2", "--resume")
    try:
        so, err = proc.communicate(timeout=240)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    assert f"{10 - stored} ok, 0 failed, {stored} already stored (skipped) of 10" in so
    sw = load_sweep(path)
    df = rows(out, "int")
    assert sorted(df["run_id"]) == sorted(p.run_id for p in sw.points)
    assert sorted(df["point"]) == list(range(10))
    assert raw_ids(out, "int") == sorted(p.run_id for p in sw.points)  # none twice
    # once more: nothing left to run
    proc = _cli("sweep", path, "--out", out, "--resume")
    so, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "0 ok, 0 failed, 10 already stored (skipped) of 10" in so


def test_without_ray_the_ray_engine_names_the_extra(tmp_path):
    """ray made unimportable in a fresh interpreter: one line naming the extra, exit 2."""
    path = write_sweep(tmp_path, "g", "grid:\n  routing.seed_mode: [same]\n")
    code = ("import sys; sys.modules['ray'] = None; "
            f"sys.argv = ['aifabric', 'sweep', {str(path)!r}, '--out', "
            f"{str(tmp_path / 'out')!r}, '--engine', 'ray']\n"
            "from aifabric.cli import main\nmain()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 2
    assert p.stderr.strip() == ("error: --engine: ray is not installed; allowed: local, or "
                                "install it: pip install 'aifabric[ray]'")
    assert not (tmp_path / "out").exists()


def test_rows_say_their_repetition(flow_store):
    """``rep``: the repetition's seed of each point (0..seeds-1), to group by; ``seed``
    stays the scenario's own seed (the repeat went into collectives.0.seed)."""
    _, store, _ = flow_store
    df = rows(store, "flow")
    assert list(df["rep"]) == list(df["param.collectives.0.seed"])
    assert sorted(df["rep"]) == sorted([0, 1, 2] * 4)
    assert (df["point"] % 3 == df["rep"]).all()
    assert (df["seed"] == 0).all()
    by = rows(store, "flow").groupby("rep").size()
    assert list(by) == [4, 4, 4]


def test_a_sweep_without_repeat_has_no_rep_column(tmp_path):
    sw = load_sweep(write_sweep(tmp_path, "norep", "grid:\n  routing.policy: [ecmp]\n"))
    run_sweep(sw, tmp_path / "store", jobs=1)
    assert "rep" not in rows(tmp_path / "store", "norep").columns


def test_equal_points_run_once_and_the_command_says_so(tmp_path, cli):
    """A grid value repeated (or equal to what another point gives): one run, one row,
    and a note saying how many points collapsed."""
    path = write_sweep(tmp_path, "dup", "grid:\n  routing.policy: [ecmp, ecmp, source_port]\n")
    r = cli("sweep", path, "--out", tmp_path / "store", "--jobs", "1")
    assert r.code == 0, r.err
    assert "note: 1 point(s) of" in r.err and "repeat an earlier point" in r.err
    df = rows(tmp_path / "store", "dup")
    assert list(df.sort_values("point")["point"]) == [0, 2]
    assert raw_ids(tmp_path / "store", "dup") == sorted(df["run_id"])


def test_another_sweep_file_with_the_same_name_is_refused_on_resume(flow_store, tmp_path,
                                                                    cli):
    """Rows of sweep 'flow' in the store came from FLOW; a different file named 'flow'
    (fewer seeds: stored runs that are not its points; more seeds: its points differ)
    cannot --resume into it (the two would mix in one partition)."""
    _, store, _ = flow_store
    before = raw_ids(store, "flow")
    for seeds, says in (("2", "are no point of"), ("4", "its points differ")):
        other = tmp_path / seeds
        other.mkdir()
        path = write_sweep(other, "flow", FLOW.replace("seeds: 3", f"seeds: {seeds}"))
        r = cli("sweep", path, "--out", store, "--resume")
        assert r.code == 2, r.err
        assert len(r.err.strip().splitlines()) == 1
        assert "holds another sweep named 'flow'" in r.err and says in r.err, r.err
    assert raw_ids(store, "flow") == before
    assert len(rows(store, "flow")) == 12


def test_ctrl_c_in_the_terminal_while_the_pool_starts(tmp_path):
    """Ctrl-C at a terminal reaches the whole process group, workers included, maybe
    while they are still starting (importing, before their initializer ignores SIGINT):
    exit 130, no worker's KeyboardInterrupt traceback, every worker stopped. A few delays
    after the workers appear, to land in their start-up."""
    path = write_sweep(tmp_path, "grp", SLOW.replace("seeds: 10", "seeds: 4"))
    for k, delay in enumerate((0.1, 0.2, 0.3, 0.5)):
        out = tmp_path / f"store{k}"
        proc = _cli("sweep", path, "--out", out, "--jobs", "2", start_new_session=True)
        try:
            workers = wait_until(lambda p=proc: pool_workers(p.pid), 120,
                                 "the pool's workers", step=0.01)
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole group
            _, err = proc.communicate(timeout=90)
        finally:
            stop(proc)
        assert proc.returncode == 130, (delay, err)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
        assert "run again with --resume" in err
        wait_until(lambda w=workers: not any(alive(x) for x in w), 30, "the workers to end")
        assert len(set(raw_ids(out, "grp"))) == len(raw_ids(out, "grp"))


def test_dry_run_prints_user_text_as_it_is(tmp_path, cli):
    """Values that look like rich markup are printed literally, never interpreted."""
    path = write_sweep(tmp_path, "m", 'grid:\n  name: ["[bold red]x", "a [/] b"]\n')
    r = cli("sweep", path, "--dry-run")
    assert r.code == 0, r.err
    assert "[bold red]x" in r.out and "a [/] b" in r.out
