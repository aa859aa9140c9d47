"""The results store: rows and tables come back equal and typed, a run is written whole or
not at all (a failed conversion, a SIGKILL between files), a run is stored once, a failed
run is superseded by a later ok one, compaction keeps every row once, runs with different
figures share one ``runs`` view, and bad input is one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

import pandas as pd
import pyarrow as pa

from aifabric.errors import SpecError
from aifabric.store import Store
from aifabric.store.store import CRASH_HOOK
from tests.store.rows import row


def _files(root: Path) -> list[str]:
    """Every file under ``root`` (temporaries included), relative, sorted."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  and p.name != ".compact.lock")


def _one_line(err: pytest.ExceptionInfo[SpecError], field: str) -> str:
    assert len(err.value.problems) == 1
    p = err.value.problems[0]
    assert p.path == field
    assert "\n" not in str(p)
    return str(p)


# ------------------------------------------------------------------ round trip
def test_rows_and_tables_come_back_equal_and_typed(tmp_path):
    st = Store(tmp_path / "st")
    figs = {"makespan_ns": 8289246.24, "finished": True, "transfers_undelivered": 3,
            "routing.policy": "ecmp", "packet.fct.slowdown_p99": None,
            "tier.access_up.max_peak_util": np.float64(0.75), "engine.events": np.int64(10)}
    coll = {"collective": np.array(["ar", "ag"], dtype=object),
            "time_ns": np.array([1.5, 2.5]), "gpus": np.array([8, 16]),
            "ok": np.array([True, False])}
    links = pd.DataFrame({"link": [3, 4, 5], "peak_util": [0.1, 0.2, 0.3]})
    st.write_run(row("r1", **figs), {"collectives": coll, "links": links,
                                     "jobs": pa.table({"job": ["j"], "iteration_ns": [7.0]})})
    df = st.query('SELECT * FROM runs')
    assert len(df) == 1
    r = df.iloc[0]
    assert r["run_id"] == "r1" and r["sweep"] == "s1" and r["status"] == "ok"
    assert r["point"] == 1 and r["seed"] == 1 and r["overrides"] == '{"seed": 1}'
    assert r["makespan_ns"] == 8289246.24 and r["tier.access_up.max_peak_util"] == 0.75
    assert r["finished"] is np.True_ or r["finished"] is True
    assert r["transfers_undelivered"] == 3 and r["engine.events"] == 10
    assert r["routing.policy"] == "ecmp" and pd.isna(r["packet.fct.slowdown_p99"])
    assert pd.isna(r["error"])
    assert df["point"].dtype == np.int64 and df["makespan_ns"].dtype == np.float64
    assert df["finished"].dtype == bool and df["engine.events"].dtype == np.int64
    # the core columns first, in their order, then the figures sorted
    assert list(df.columns[:8]) == ["run_id", "sweep", "point", "overrides", "sim", "seed",
                                    "status", "error"]
    assert list(df.columns[8:]) == sorted(df.columns[8:])

    c = st.query("SELECT * FROM collectives")
    assert list(c.columns) == ["run_id", "sweep", "collective", "time_ns", "gpus", "ok"]
    assert c["collective"].tolist() == ["ar", "ag"]  # the run's own row order
    assert c["time_ns"].tolist() == [1.5, 2.5] and c["gpus"].tolist() == [8, 16]
    assert c["ok"].tolist() == [True, False] and set(c["run_id"]) == {"r1"}
    li = st.query("SELECT link, peak_util FROM links")
    assert li["link"].tolist() == [3, 4, 5] and li["peak_util"].tolist() == [0.1, 0.2, 0.3]
    assert st.query("SELECT iteration_ns FROM jobs")["iteration_ns"].tolist() == [7.0]


def test_same_row_gives_the_same_bytes_in_another_process(tmp_path):
    """No timestamps, fixed writer options: the row file of a run is byte-identical
    whichever process writes it (as the local and Ray executors must be)."""
    r = row("r7", makespan_ns=1.25, finished=True, policy="ecmp", n=3)
    Store(tmp_path / "a").write_run(r, timing={"wall_s": 0.1})
    code = textwrap.dedent(f"""
        from aifabric.store import Store
        Store({str(tmp_path / 'b')!r}).write_run({r!r}, timing={{"wall_s": 99.0}})
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    name = "runs/sweep=s1/r7.ok.parquet"
    a, b = (tmp_path / d / name for d in ("a", "b"))
    assert a.read_bytes() == b.read_bytes()
    # the wall times differ, and they are only in timings
    ta, tb = (tmp_path / d / "timings/sweep=s1/r7.ok.parquet" for d in ("a", "b"))
    assert ta.read_bytes() != tb.read_bytes()


# ------------------------------------------------------------------ atomicity
def test_a_table_that_cannot_be_stored_leaves_nothing(tmp_path):
    root = tmp_path / "st"
    st = Store(root)
    st.write_run(row("r0"))  # another run, so that the store has views
    before = _files(root)
    good = {"x": np.arange(3)}
    bad = {"x": np.arange(3), "y": np.arange(4)}  # columns of different lengths
    with pytest.raises(SpecError) as err:
        # "a" is converted and written to a temporary before "b" fails
        st.write_run(row("r1"), {"a": good, "b": bad}, timing={"wall_s": 1.0})
    assert "cannot be stored" in _one_line(err, "tables.b")
    assert _files(root) == before  # no row, no table, no temporary
    assert st.run_ids() == {"r0"}
    # a later write of the same run succeeds, whole
    st.write_run(row("r1"), {"a": good, "b": {"y": np.arange(4)}})
    assert st.run_ids() == {"r0", "r1"}
    assert st.query("SELECT count(*) AS n FROM a")["n"][0] == 3
    assert st.query("SELECT count(*) AS n FROM b")["n"][0] == 4


def _write_killed(root: Path, after: int) -> int:
    """Write run r1 (two tables and a timing) in a child killed with SIGKILL after
    ``after`` renames; the child's return code."""
    code = textwrap.dedent(f"""
        import numpy as np
        from aifabric.store import Store
        from tests.store.rows import row
        Store({str(root)!r}).write_run(row("r1", makespan_ns=2.0),
            {{"links": {{"v": np.arange(5)}}, "collectives": {{"v": np.arange(2)}}}},
            timing={{"wall_s": 1.0}})
    """)
    env = {**os.environ, CRASH_HOOK: str(after)}
    p = subprocess.run([sys.executable, "-c", code], env=env, timeout=120,
                       cwd=Path(__file__).resolve().parents[2], capture_output=True)
    return p.returncode


@pytest.mark.parametrize("after", [1, 2, 3], ids=["after 1 table", "after 2 tables",
                                                  "after tables and timing"])
def test_a_run_killed_between_files_leaves_no_row(tmp_path, after):
    """SIGKILL after some of a run's files are renamed into place (3: everything but the
    summary row): no row, its tables invisible; a later write of the run succeeds and
    shows each table row once."""
    root = tmp_path / "st"
    st = Store(root)
    st.write_run(row("r0"), {"links": {"v": np.arange(1)},
                             "collectives": {"v": np.arange(1)}})
    assert _write_killed(root, after) == -9  # the hook fired: killed, no cleanup ran
    assert st.run_ids(status=None) == {"r0"}
    assert not (root / "runs/sweep=s1/r1.ok.parquet").exists()
    assert st.query("SELECT run_id FROM runs")["run_id"].tolist() == ["r0"]
    assert st.query("SELECT DISTINCT run_id FROM links")["run_id"].tolist() == ["r0"]
    assert st.query("SELECT DISTINCT run_id FROM collectives")["run_id"].tolist() == ["r0"]
    assert st.query("SELECT DISTINCT run_id FROM timings")["run_id"].tolist() == []
    leftovers = [f for f in _files(root) if ".aifabric-tmp-" in f]
    assert leftovers  # the killed writer's temporaries (the row's at least)
    # the run again, in this process: whole, once; the dead writer's temporaries go
    Store(root).write_run(row("r1", makespan_ns=2.0),
                          {"links": {"v": np.arange(5)}, "collectives": {"v": np.arange(2)}},
                          timing={"wall_s": 1.0})
    assert st.run_ids() == {"r0", "r1"}
    n = st.query("SELECT run_id, count(*) AS n FROM links GROUP BY run_id ORDER BY run_id")
    assert n["n"].tolist() == [1, 5]
    assert not [f for f in _files(root) if ".aifabric-tmp-" in f]


def test_without_the_hook_the_child_writes_the_run(tmp_path):
    """The control of the test above: the same child, hook off, stores the run."""
    root = tmp_path / "st"
    assert _write_killed(root, 0) == 0
    assert Store(root).run_ids() == {"r1"}


# ------------------------------------------------------------------ no duplicates
def test_a_run_stored_ok_is_never_written_again(tmp_path):
    root = tmp_path / "st"
    st = Store(root)
    st.write_run(row("r1", makespan_ns=1.0), {"links": {"v": np.arange(2)}})
    f = root / "runs/sweep=s1/r1.ok.parquet"
    stat = f.stat()
    st.write_run(row("r1", makespan_ns=5.0), {"links": {"v": np.arange(7)}})  # no-op
    st.write_run(row("r1", status="failed"))  # no-op too: ok is final
    assert f.stat().st_mtime_ns == stat.st_mtime_ns and f.stat().st_ino == stat.st_ino
    df = st.query("SELECT status, makespan_ns FROM runs")
    assert df.values.tolist() == [["ok", 1.0]]
    assert st.query("SELECT count(*) AS n FROM links")["n"][0] == 2
    assert st.run_ids(status="failed") == set()
    # the same run_id in another sweep is another run
    st.write_run(row("r1", sweep="s2", makespan_ns=5.0))
    assert st.query("SELECT sweep, makespan_ns FROM runs ORDER BY sweep").values.tolist() \
        == [["s1", 1.0], ["s2", 5.0]]


def test_a_failed_run_is_superseded_by_a_later_ok_one(tmp_path):
    root = tmp_path / "st"
    st = Store(root)
    st.write_run(row("r1", status="failed"), timing={"wall_s": 1.0, "attempt": 1})
    st.write_run(row("r2"))
    assert st.run_ids(status="failed") == {"r1"} and st.run_ids() == {"r2"}
    assert st.run_ids(status=None) == {"r1", "r2"}
    st.write_run(row("r1", status="failed"), timing={"wall_s": 2.0, "attempt": 2})
    assert st.query("SELECT count(*) AS n FROM runs WHERE run_id = 'r1'")["n"][0] == 1
    st.write_run(row("r1", makespan_ns=3.0), timing={"wall_s": 3.0, "attempt": 3})
    df = st.query("SELECT run_id, status, error, makespan_ns FROM runs ORDER BY run_id")
    assert df["status"].tolist() == ["ok", "ok"] and df["makespan_ns"][0] == 3.0
    assert df["error"].isna().all()
    assert st.run_ids() == {"r1", "r2"} and st.run_ids(status="failed") == set()
    # both attempts' wall times are kept, apart from the rows
    t = st.query("SELECT status, attempt FROM timings WHERE run_id = 'r1' ORDER BY attempt")
    assert t.values.tolist() == [["failed", 2], ["ok", 3]]


def test_failed_rows_carry_no_tables(tmp_path):
    st = Store(tmp_path / "st")
    with pytest.raises(SpecError) as err:
        st.write_run(row("r1", status="failed"), {"links": {"v": np.arange(2)}})
    _one_line(err, "tables")
    assert not (tmp_path / "st").exists()


# ------------------------------------------------------------------ compaction
def _mixed_store(root: Path) -> Store:
    st = Store(root, compact_every=0)
    for i in range(12):
        st.write_run(row(f"r{i:02d}", makespan_ns=float(i), **({"extra": i} if i % 3 else {})),
                     {"links": {"v": np.arange(i % 4 + 1)}}, timing={"wall_s": i / 10})
    for i in (20, 21):
        st.write_run(row(f"r{i}", status="failed"))
    st.write_run(row("r20"))  # superseded
    st.write_run(row("r30", sweep="other", makespan_ns=30.0))
    return st


def _snapshot(st: Store) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    runs = st.query("SELECT * FROM runs ORDER BY sweep, run_id")
    links = st.query("SELECT * FROM links ORDER BY sweep, run_id, v")
    tim = st.query("SELECT run_id, status, wall_s FROM timings ORDER BY run_id, status")
    return runs, links, tim


def test_compact_keeps_every_row_once(tmp_path):
    root = tmp_path / "st"
    st = _mixed_store(root)
    before = _snapshot(st)
    assert len(before[0]) == 15  # 12 ok + 2 failed (one superseded by ok) in s1, 1 in other
    out = st.compact()
    assert out["rows"] == 15
    after = _snapshot(st)
    for a, b in zip(before, after, strict=True):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    # one file per partition, none of the per-run files left
    files = _files(root)
    assert all(Path(f).name.startswith("part-") for f in files), files
    assert len(files) == 2 + 1 + 1  # runs x 2 sweeps, links s1, timings s1
    # compacting again changes nothing; the superseded failed row is gone from disk
    assert st.compact()["files_merged"] == 0 and _files(root) == files
    assert st.run_ids(status="failed") == {"r21"}
    # new runs after compaction, then compaction again
    st.write_run(row("r40", makespan_ns=40.0), {"links": {"v": np.arange(3)}})
    st.write_run(row("r21"))  # a failed run in the compacted file, now ok
    assert st.run_ids(status="failed") == set()
    st.compact("s1")
    runs = st.query("SELECT run_id, status FROM runs WHERE sweep = 's1' ORDER BY run_id")
    assert len(runs) == 15 and set(runs["status"]) == {"ok"} and runs["run_id"].is_unique


def test_a_reader_between_the_two_steps_of_compact_sees_no_duplicates(tmp_path):
    """compact() writes the merged file, then removes the merged-in files: a reader in
    between sees both. Rebuilt here by putting the per-run files back after compact."""
    root = tmp_path / "st"
    st = _mixed_store(root)
    before = _snapshot(st)
    saved = {f: (root / f).read_bytes() for f in _files(root)}
    st.compact()
    for f, data in saved.items():
        (root / f).write_bytes(data)
    assert sum(Path(f).name.startswith("part-") for f in _files(root)) == 4
    after = _snapshot(st)
    for a, b in zip(before, after, strict=True):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    assert st.run_ids(status=None) == set(before[0]["run_id"])


def test_writes_compact_the_sweep_as_they_go(tmp_path):
    root = tmp_path / "st"
    st = Store(root, compact_every=4)
    for i in range(10):
        st.write_run(row(f"r{i}", makespan_ns=float(i)), {"links": {"v": np.arange(2)}})
    names = [p.name for p in (root / "runs/sweep=s1").iterdir()]
    assert sum(n.startswith("part-") for n in names) == 1
    assert len(names) < 10  # merged as it went
    assert st.query("SELECT count(*) AS n FROM runs")["n"][0] == 10
    assert st.query("SELECT count(*) AS n FROM links")["n"][0] == 20
    assert st.run_ids() == {f"r{i}" for i in range(10)}


# ------------------------------------------------------------------ differing figures
def test_runs_with_different_figures_share_one_view(tmp_path):
    """A packet run has figures a flow run lacks; an int figure in one run and a float in
    another read as one numeric column (per-run files and compacted alike)."""
    st = Store(tmp_path / "st", compact_every=0)
    st.write_run(row("r1", makespan_ns=1.0, count=2))
    st.write_run(row("r2", makespan_ns=2.0, count=2.5, **{"packet.drops": 4}))
    st.write_run(row("r3", label="x"))
    for _ in range(2):
        df = st.query("SELECT run_id, makespan_ns, count, \"packet.drops\", label FROM runs "
                      "ORDER BY run_id")
        assert df["count"].tolist()[:2] == [2.0, 2.5] and pd.isna(df["count"][2])
        assert df["packet.drops"].isna().tolist() == [True, False, True]
        assert df["packet.drops"][1] == 4
        assert df["label"].tolist()[2] == "x" and df["label"][:2].isna().all()
        st.compact()


# ------------------------------------------------------------------ bad input
def test_bad_sql_is_one_line_naming_duckdbs_reason(tmp_path):
    st = Store(tmp_path / "st")
    st.write_run(row("r1"))
    with pytest.raises(SpecError) as err:
        st.query("SELECT nope FROM runs")
    assert '"nope"' in _one_line(err, "sql")
    with pytest.raises(SpecError) as err:
        st.query("SELEC 1")
    assert "syntax error" in _one_line(err, "sql").lower()
    with pytest.raises(SpecError):
        st.query("   ")


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: p],
                         ids=["missing", "empty folder"])
def test_an_empty_or_missing_store_is_one_clear_message(tmp_path, make):
    with pytest.raises(SpecError) as err:
        Store(make(tmp_path)).query("SELECT 1")
    assert "allowed: a results store" in _one_line(err, "store")


@pytest.mark.parametrize("name", ["", "..", "../x", "a/b", ".hidden", "a..b", "x y", 7,
                                  "a\nb"])
def test_bad_names_are_refused_before_anything_is_written(tmp_path, name):
    root = tmp_path / "st"
    with pytest.raises(SpecError) as err:
        Store(root).write_run(row("r1", sweep=name))
    _one_line(err, "row.sweep")
    with pytest.raises(SpecError) as err:
        Store(root).write_run(row("r1"), {name: {"v": np.arange(1)}})
    _one_line(err, "tables")
    with pytest.raises(SpecError) as err:
        Store(root).write_run({**row("r1"), "run_id": name})
    _one_line(err, "row.run_id")
    assert not root.exists()


def test_run_ids_have_no_dots(tmp_path):
    """A run's files are <run_id>.<status>.parquet: "a.ok" would read as run "a"."""
    with pytest.raises(SpecError) as err:
        Store(tmp_path / "st").write_run(row("a.ok"))
    _one_line(err, "row.run_id")


@pytest.mark.parametrize(("bad", "field"), [
    ({"status": "done"}, "row.status"),
    ({"point": "3"}, "row.point"),
    ({"figure": [1, 2]}, "row.figure"),
    ({"a b": 1}, "row.a b"),
    ({"Makespan_NS": 1.0, "makespan_ns": 2.0}, "row.makespan_ns"),
])
def test_bad_rows_are_one_line(tmp_path, bad, field):
    with pytest.raises(SpecError) as err:
        Store(tmp_path / "st").write_run({**row("r1"), **bad})
    _one_line(err, field)
    assert not (tmp_path / "st").exists()


@pytest.mark.parametrize("name", ["runs", "timings"])
def test_a_table_cannot_take_a_views_name(tmp_path, name):
    with pytest.raises(SpecError) as err:
        Store(tmp_path / "st").write_run(row("r1"), {name: {"v": np.arange(1)}})
    _one_line(err, "tables")
    assert not (tmp_path / "st").exists()


def test_a_store_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "plain").write_text("x\n")
    with pytest.raises(SpecError) as err:
        Store(tmp_path / "plain" / "st").write_run(row("r1"))
    assert "cannot" in _one_line(err, "store")
    assert (tmp_path / "plain").read_text() == "x\n"
