"""Compaction under crashes and at scale: the automatic compactions leave older merged
files alone (a sweep's writes do not grow with its size), the newest failed row of a run
wins whichever files a crash left behind, temporaries of a killed compaction are ignored
and cleaned, and its lock does not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from aifabric.errors import SpecError
from aifabric.outputs import temp_prefix
from aifabric.store import Store
from tests.store.rows import row


def _parts(d: Path) -> dict[str, int]:
    """The part files of a folder: name -> inode."""
    return {p.name: p.stat().st_ino for p in d.glob("part-*.parquet")}


def test_automatic_compaction_does_not_rewrite_older_merged_files(tmp_path):
    """Each automatic compaction used to rewrite the sweep's whole merged file (rows and
    tables), so a 10,000-run sweep's writes slowed down as it grew; the binary counter
    leaves the bigger, older parts alone most of the time."""
    root = tmp_path / "st"
    st = Store(root, compact_every=4)
    runs, links = root / "runs/sweep=s1", root / "tables/links/sweep=s1"

    def write(i: int) -> None:
        st.write_run(row(f"r{i:03d}", makespan_ns=float(i)), {"links": {"v": np.arange(3)}},
                     timing={"wall_s": 0.5})

    for i in range(8):
        write(i)
    first, first_links = _parts(runs), _parts(links)
    assert len(first) == 1 and len(first_links) == 1
    for i in range(8, 12):
        write(i)
    # the 8-run part is the same file; the 4 new runs are in a part of their own
    assert set(first.items()) < set(_parts(runs).items()) and len(_parts(runs)) == 2
    assert set(first_links.items()) < set(_parts(links).items())
    for i in range(12, 16):
        write(i)
    assert len(_parts(runs)) == 1  # the counter carries: 8 + 4 + 4 merged
    for i in range(16, 64):
        write(i)
    assert len(_parts(runs)) <= 3  # log2 of the batches, at most
    assert st.query("SELECT count(*) AS n FROM runs")["n"][0] == 64
    assert st.query("SELECT count(*) AS n FROM links")["n"][0] == 64 * 3
    assert st.query("SELECT count(*) AS n FROM timings")["n"][0] == 64
    assert st.run_ids() == {f"r{i:03d}" for i in range(64)}
    # a full compaction: one file per folder, the same bytes as a store compacted once
    st.compact()
    other = Store(tmp_path / "other", compact_every=0)
    for i in range(64):
        other.write_run(row(f"r{i:03d}", makespan_ns=float(i)), {"links": {"v": np.arange(3)}},
                        timing={"wall_s": 0.5})
    other.compact()
    for sub in ("runs/sweep=s1", "tables/links/sweep=s1", "timings/sweep=s1"):
        (a,), (b,) = (root / sub).glob("*.parquet"), (tmp_path / "other" / sub).glob("*.parquet")
        assert a.read_bytes() == b.read_bytes(), sub


@pytest.mark.parametrize("k", range(6))
def test_the_newest_failed_row_wins_after_a_crash_mid_compaction(tmp_path, k):
    """A run failed, was compacted, failed again (another error) and was compacted again;
    the crash left the first merged file beside the second. Every reader and every later
    compaction must pick the newer failure, whatever the files' names (the run ids vary
    with ``k`` to vary the names' digests)."""
    root = tmp_path / "st"
    st = Store(root, compact_every=0)
    runs = root / "runs/sweep=s1"
    st.write_run({**row("x", status="failed"), "error": "first"})
    st.write_run(row(f"a{k}"))
    st.compact()
    (old,) = runs.glob("part-*.parquet")
    saved = old.read_bytes()
    st.write_run({**row("x", status="failed"), "error": "second"})
    st.write_run(row(f"b{k}"))
    st.compact()
    old.write_bytes(saved)  # the crash: the merged-in file was not removed
    assert len(list(runs.glob("part-*.parquet"))) == 2

    def error() -> str:
        df = st.query("SELECT error FROM runs WHERE run_id = 'x'")
        assert len(df) == 1
        return df["error"][0]

    assert error() == "second"
    assert st.query("SELECT count(*) AS n FROM runs")["n"][0] == 3
    st.compact()
    assert len(list(runs.glob("*.parquet"))) == 1
    assert error() == "second"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_compaction_killed_mid_write_leaves_a_temporary_that_is_ignored_and_cleaned(
        tmp_path):
    root = tmp_path / "st"
    st = Store(root, compact_every=0)
    for i in range(3):
        st.write_run(row(f"r{i}", makespan_ns=float(i)), {"links": {"v": np.arange(2)}})
    dead = _dead_pid()
    left = []
    for sub in ("runs/sweep=s1", "tables/links/sweep=s1"):
        d = root / sub
        tmp = d / f"{temp_prefix(d / 'part-000001-0123456789abcdef.parquet', dead)}x1y2"
        tmp.write_bytes(next(d.glob("*.parquet")).read_bytes()[:100])  # half a file
        left.append(tmp)
    st2 = Store(root, compact_every=0)  # a fresh process's store
    assert st2.query("SELECT count(*) AS n FROM runs")["n"][0] == 3
    assert st2.query("SELECT count(*) AS n FROM links")["n"][0] == 6
    st2.write_run(row("r9"), {"links": {"v": np.arange(2)}})
    assert not any(p.exists() for p in left)  # cleaned by the next write in the folders
    st2.compact()
    assert st2.query("SELECT count(*) AS n FROM runs")["n"][0] == 4


def test_the_lock_of_a_killed_compaction_does_not_block_the_next(tmp_path):
    root = tmp_path / "st"
    st = Store(root, compact_every=0)
    for i in range(3):
        st.write_run(row(f"r{i}"))
    child = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from aifabric.store.store import _Lock
        lock = _Lock(Path({str(root)!r}) / ".compact.lock", wait=True)
        lock.acquire()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", child], timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert (root / ".compact.lock").exists()
    code = ("import sys; from aifabric.store import Store; "
            f"print(Store({str(root)!r}).compact()['rows'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


def test_a_run_id_cannot_pass_for_a_merged_file(tmp_path):
    """``part-...`` names the merged files; a run's own file by that name would be taken
    for one (never merged automatically, its tables merged before its row committed)."""
    st = Store(tmp_path / "st", compact_every=0)
    with pytest.raises(SpecError) as err:
        st.write_run(row("part-000001-00ff"))
    assert err.value.problems[0].path == "row.run_id" and "part-" in str(err.value)
    assert not (tmp_path / "st").exists()
    st.write_run(row("partial-1"))  # only the prefix is refused
    assert st.run_ids() == {"partial-1"}


def test_a_store_opened_for_each_run_compacts_too(tmp_path):
    """The count of per-run files is the folder's, not one Store object's: a script that
    opens the store for every run must not end with 10,000 single-row files."""
    root = tmp_path / "st"
    for i in range(10):
        Store(root, compact_every=4).write_run(row(f"r{i}"), {"links": {"v": np.arange(2)}})
    names = [p.name for p in (root / "runs/sweep=s1").iterdir()]
    assert sum(n.startswith("part-") for n in names) >= 1 and len(names) < 10
    assert Store(root).query("SELECT count(*) AS n FROM links")["n"][0] == 20
