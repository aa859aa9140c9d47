"""Run a validated sweep into a results store: one writer (this process), rows written
as points finish, ``--resume`` skipping points stored ok, SIGINT stopping cleanly."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.sim.limits import DEFAULT_MAX_EVENTS
from aifabric.sweep.model import Point, Sweep, load_sweep

__all__ = ["ENGINES", "SweepRun", "check_options", "definition_path", "open_store", "run_sweep"]

ENGINES = ("local", "ray")
#: the columns every row starts with (then ``param.*``, then the figures)
CORE = ("run_id", "sweep", "point", "overrides", "sim", "seed", "status", "error")


@dataclass
class SweepRun:
    """What a sweep run did."""

    name: str
    total: int  # points of the sweep
    skipped: int  # already stored ok (--resume)
    ok: int  # stored ok by this run
    failed: int  # stored failed by this run
    interrupted: bool
    wall_s: float
    stored: int = 0  # points of the sweep stored (ok or failed) when the run ended
    duplicates: int = 0  # points of the file equal to an earlier one (same run_id): run once

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else 1 if self.failed else 0


def open_store(root: str | os.PathLike[str]) -> Any:
    """The results store at ``root`` (a one-line error naming the extra when pandas,
    pyarrow or duckdb are missing)."""
    try:
        from aifabric.store import Store
    except ImportError as err:
        raise SpecError(Problem("--out", f"the results store needs {err.name}; install "
                                "it: pip install 'aifabric[data]'")) from None
    return Store(root)


def definition_path(root: str | os.PathLike[str], name: str) -> Path:
    """Where a sweep's definition (swept fields, figures) is kept beside the store."""
    return Path(root) / "sweeps" / f"{name}.json"


def _write_definition(root: str | os.PathLike[str], sweep: Sweep) -> None:
    from aifabric.outputs import write_file

    path = definition_path(root, sweep.name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SpecError(Problem("--out", f"cannot create {path.parent}: {err.strerror}; "
                                "allowed: a folder you can write to")) from None
    write_file(path, json.dumps(sweep.definition(), indent=2, sort_keys=True) + "\n")


def _check_same_sweep(root: str | os.PathLike[str], sweep: Sweep,
                      stored: set[str]) -> None:
    """Refuse to resume into a store whose rows of this sweep's name came from another
    sweep file (other points): the two would mix in one partition."""
    ids = {p.run_id for p in sweep.points}
    foreign = stored - ids
    why = ""
    if foreign:
        why = f"{len(foreign):,} of its {len(stored):,} stored run(s) are no point of {sweep.file}"
    else:
        try:
            old = json.loads(definition_path(root, sweep.name).read_text())
        except (OSError, ValueError):
            old = {}
        digest = old.get("points_digest") if isinstance(old, dict) else None
        if digest is not None and digest != sweep.points_digest():
            why = (f"its points differ from those of {sweep.file} (stored from "
                   f"{old.get('file', 'another file')})")
    if why:
        raise SpecError(Problem("--out", f"{root} holds another sweep named '{sweep.name}': "
                                f"{why}; allowed: another --out, or another name in the "
                                "sweep file"))


def _ordered(row: dict[str, Any], name: str, point: Point) -> dict[str, Any]:
    out = {"run_id": row["run_id"], "sweep": name, "point": point.index}
    out.update((k, row.get(k)) for k in CORE[3:])
    if point.rep is not None:  # the repetition (its seed), to group by
        out["rep"] = point.rep
    out.update(sorted((k, v) for k, v in row.items() if k.startswith("param.")))
    out.update((k, v) for k, v in row.items() if k not in out)
    return out


@contextmanager
def _sigint_stops(stop: threading.Event, serial: bool) -> Iterator[None]:
    """While a sweep runs, SIGINT sets ``stop`` (the executor stops submitting, the
    completed points are written); in-process (``--jobs 1``) it also interrupts the
    point being run, and a second SIGINT interrupts whatever runs. Only in the main
    thread (elsewhere signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    from aifabric.sweep.executors import BUSY

    def handler(signum: int, frame: Any) -> None:
        # a second Ctrl-C does not wait for the completed points: it stops now (the
        # executors' cleanup still stops their workers; a row half written is not stored)
        again = stop.is_set()
        stop.set()
        if again or (serial and BUSY.is_set()):
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def check_options(engine: str, jobs: int | None, address: str | None) -> None:
    """The run options, checked before the sweep file is read (one line, exit 2)."""
    if engine not in ENGINES:
        raise SpecError(Problem("--engine", f"unknown engine {engine!r}; allowed: "
                                f"{', '.join(ENGINES)}"))
    if jobs is not None and jobs < 1:
        raise SpecError(Problem("--jobs", f"got {jobs}; allowed: 1 or more"))
    if address is not None and engine != "ray":
        raise SpecError(Problem("--address", "is for --engine ray; allowed: --engine ray "
                                "--address ADDR"))


def run_sweep(sweep: Sweep | str | os.PathLike[str], out: str | os.PathLike[str], *,
              engine: str = "local",
              address: str | None = None, jobs: int | None = None, resume: bool = False,
              max_events: float | None = DEFAULT_MAX_EVENTS, max_memory: str | None = None,
              stop: threading.Event | None = None,
              handle_sigint: bool = False,
              progress: Callable[[int, int, int], None] | None = None) -> SweepRun:
    """Run ``sweep``'s points not yet stored ok into the store at ``out`` (``af.run_sweep``;
    what ``aifabric sweep FILE --out DIR`` does). ``sweep``: a :class:`Sweep` or a sweep
    file (every point is validated before any runs).

    Refuses (SpecError, before any point runs) a store that already holds rows of this
    sweep unless ``resume``, an unknown engine, an unreachable Ray ``address``.
    ``jobs``: local worker processes (default: every CPU; 1 = in this process) or the
    CPUs of a local Ray cluster. ``max_memory``: every worker's size guard (as
    ``--max-memory``; None: automatic, in-process: as set here). ``stop`` (an event)
    ends the run after the points completed so far are written; ``progress(done,
    failed, total)`` is called after each point. ``handle_sigint`` (the command): a
    SIGINT sets ``stop``, a second one interrupts at once, and a ``ray.init`` to an
    ``address`` that hangs ends the process (one line, exit 2). A finished run (not
    interrupted) compacts the sweep's files in the store (``Store.compact``).
    """
    check_options(engine, jobs, address)
    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep)
    from aifabric.outputs import check_target

    check_target(out, option="--out", folder=True)  # a folder can be made or is there
    store = open_store(out)
    stored_any = store.run_ids(sweep.name, status=None)
    if stored_any and not resume:
        raise SpecError(Problem("--out", f"{out} already holds {len(stored_any):,} run(s) of "
                                f"sweep '{sweep.name}'; allowed: --resume (skip the points "
                                "stored ok, run the rest) or another --out"))
    if stored_any:
        _check_same_sweep(out, sweep, stored_any)
    done_ok = store.run_ids(sweep.name, status="ok") if stored_any else set()
    todo = [p for p in sweep.points if p.run_id not in done_ok]
    conn = None
    if engine == "ray" and todo:
        from aifabric.sweep.executors import connect_ray

        conn = connect_ray(address, jobs, exit_on_hang=handle_sigint)
    stop = stop or threading.Event()
    n_jobs = jobs or os.cpu_count() or 1
    serial = engine == "local" and (n_jobs == 1 or len(todo) == 1)
    run = SweepRun(sweep.name, len(sweep.points), len(sweep.points) - len(todo), 0, 0,
                   False, 0.0, duplicates=sweep.duplicates)
    by_index = {p.index: p for p in todo}
    t0 = time.perf_counter()
    try:
        _write_definition(out, sweep)
        from aifabric.sweep import executors as ex

        if not todo:
            outcomes = ex.run_serial(sweep, [], stop)
        elif conn is not None:
            outcomes = ex.run_ray(sweep, todo, conn, stop, max_events, max_memory)
        elif serial:
            outcomes = ex.run_serial(sweep, todo, stop, max_events)
        else:
            outcomes = ex.run_local(sweep, todo, min(n_jobs, len(todo)), stop, max_events,
                                    max_memory)
        written: set[int] = set()
        if progress is not None and todo:
            progress(0, 0, len(todo))
        with _sigint_stops(stop, serial) if handle_sigint else _nothing():
            try:
                for index, row, tables, timing in outcomes:
                    if index in written:  # never twice (an executor's bug, not the user's)
                        continue
                    written.add(index)
                    row = _ordered(row, sweep.name, by_index[index])
                    timing = {"run_id": row["run_id"], "sweep": sweep.name, "point": index,
                              **timing}
                    store.write_run(row, tables or None, timing=timing)
                    if row["status"] == "ok":
                        run.ok += 1
                    else:
                        run.failed += 1
                    if progress is not None:
                        progress(run.ok + run.failed, run.failed, len(todo))
            except KeyboardInterrupt:
                stop.set()
            finally:
                outcomes.close()
    finally:
        if conn is not None:
            conn.close()
    run.interrupted = stop.is_set() and run.ok + run.failed < len(todo)
    if not run.interrupted and run.ok + run.failed:
        store.compact(sweep.name)  # one file per partition: fast queries of the finished sweep
    run.wall_s = time.perf_counter() - t0
    ids = {p.run_id for p in sweep.points}
    run.stored = len(ids & store.run_ids(sweep.name, status=None))
    return run


@contextmanager
def _nothing() -> Iterator[None]:
    yield
