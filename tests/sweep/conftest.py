"""What the sweep tests share: the small base scenario, sweep files written on the fly,
the store's rows, and the processes a test starts or kills (found by pid in /proc)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SMALL = HERE / "small.yaml"


def write_sweep(folder: Path, name: str, body: str, scenario: Path = SMALL) -> Path:
    """A sweep file ``<folder>/<name>.yaml`` over ``scenario``; ``body`` is the rest."""
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\nscenario: {scenario}\n{body}")
    return path


def rows(store: Path, sweep: str):
    """The sweep's rows as the store's ``runs`` view shows them, sorted by run_id."""
    from aifabric.store import Store

    return Store(store).query(f"SELECT * FROM runs WHERE sweep = '{sweep}' ORDER BY run_id")


def row_files(store: Path, sweep: str) -> list[Path]:
    """The committed row files of a sweep: one per run while it runs, one part file once a
    finished sweep is compacted."""
    return sorted((store / "runs" / f"sweep={sweep}").glob("*.parquet"))


def raw_ids(store: Path, sweep: str) -> list[str]:
    """Every run_id in the sweep's committed row files, as often as it is there (not the
    de-duplicating ``runs`` view): a run written twice shows twice."""
    import pyarrow.parquet as pq

    out: list[str] = []
    for f in row_files(store, sweep):
        out += pq.read_table(f, columns=["run_id"])["run_id"].to_pylist()
    return sorted(out)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """The direct children of process ``pid`` (from /proc)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, theirs...), from /proc."""
    out: list[int] = []
    todo = [pid]
    while todo and len(out) < 10_000:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def pool_workers(pid: int) -> list[int]:
    """The process-pool workers of an ``aifabric sweep`` process (spawned children)."""
    return [c for c in children(pid) if "spawn_main" in cmdline(c)
            and "resource_tracker" not in cmdline(c)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:  # a zombie is dead
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(cond, timeout: float, what: str, step: float = 0.1):
    """Poll ``cond()`` until it is true (returns its value) or fail after ``timeout`` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def stop(proc) -> None:
    """Stop a test's subprocess by its pid (bounded), if still running."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
