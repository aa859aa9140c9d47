"""One point of a sweep, run where a worker is (a pool process, a Ray task, in-process).

:func:`run_point` rebuilds the base scenario from its document, applies the point's
overrides, simulates and returns the summary row, the run's tables and its timing to the
parent, which alone writes the store. Nothing here writes a file.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from aifabric.sim.limits import DEFAULT_MAX_EVENTS

__all__ = ["error_text", "execute", "failed_row", "param_columns", "pick_tables", "run_point"]

#: the longest error text kept in a failed row
ERROR_MAX = 2000
#: test hook: ``<run_id prefix>:<times>:<folder>`` makes the worker running that point
#: kill its own process (SIGKILL) the first ``times`` times it starts it (counted in a
#: file in ``folder``), to prove that a dead worker's point is retried, then recorded
#: failed (by run_id, so one Ray cluster can serve several sweeps of a test)
KILL_HOOK = "AIFABRIC_SWEEP_TEST_KILL"


def _param_value(v: Any) -> Any:
    """A swept value as a row column: scalars as they are, the rest as JSON text."""
    import json

    if v is None or isinstance(v, bool | int | float | str):
        return v
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def param_columns(overrides: dict[str, Any]) -> dict[str, Any]:
    """``param.<dotted field>`` columns of a point's overrides (queryable, plotted by
    ``sweep report``)."""
    return {f"param.{k}": _param_value(v) for k, v in sorted(overrides.items())}


def _rows(cols: Any) -> int:
    """Rows of a table given as columns (a mapping of arrays) or a DataFrame."""
    if hasattr(cols, "shape"):
        return int(cols.shape[0])
    return len(next(iter(cols.values()))) if cols else 0


def pick_tables(tables: dict[str, Any], which: str | list[str]) -> list[str]:
    """The names of the tables a sweep stores: ``auto`` (those of at most
    :data:`~aifabric.sweep.model.AUTO_TABLE_ROWS` rows), ``all``, ``none`` or by name."""
    from aifabric.sweep.model import AUTO_TABLE_ROWS

    if which == "all":
        return list(tables)
    if which == "none":
        return []
    if which == "auto":
        return [k for k, v in tables.items() if _rows(v) <= AUTO_TABLE_ROWS]
    return [k for k in tables if k in which]


def run_point(doc: dict[str, Any], base_dir: str | None, overrides: dict[str, Any],
              *, tables: str | list[str] = "all",
              max_events: float | None = DEFAULT_MAX_EVENTS
              ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Simulate the base scenario ``doc`` (a scenario document, relative paths against
    ``base_dir``) with ``overrides``: ``(row, tables, timing)``. The row holds the
    run's id (content hash), overrides, sim, seed, status ``ok`` and its figures; no
    wall time (that is ``timing``). ``tables``: which of the run's tables to return
    (see :func:`pick_tables`). Raises what the run raises."""
    from aifabric.api import simulate
    from aifabric.routing.overrides import apply_overrides
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.identity import content_hash
    from aifabric.sim.scenario import SimScenario
    from aifabric.sweep.model import overrides_json

    t0 = time.perf_counter()
    base = scenario_from_dict(doc, base_dir=Path(base_dir) if base_dir else None,
                              model=SimScenario)
    scn = apply_overrides(base, overrides)
    run_id = content_hash(scn)
    t1 = time.perf_counter()
    res = simulate(scn, max_events=max_events)
    t2 = time.perf_counter()
    # the figures first: a figure can never overwrite what identifies the run
    row = {**res.figures(), **param_columns(overrides), "run_id": run_id,
           "overrides": overrides_json(overrides), "sim": scn.sim, "seed": int(scn.seed),
           "status": "ok", "error": None}
    out = {name: res.table(name) for name in pick_tables(res.raw.tables, tables)}
    t3 = time.perf_counter()
    timing = {"prepare_s": t1 - t0, "simulate_s": t2 - t1, "tables_s": t3 - t2}
    return row, out, timing


def error_text(err: BaseException) -> str:
    """One line saying what went wrong (SpecError: its problems; else the exception's
    type and message), without the traceback's addresses and times."""
    from aifabric.errors import SpecError

    if isinstance(err, SpecError):
        text = "; ".join(str(p) for p in err.problems)
    else:
        text = f"{type(err).__name__}: {err}"
    text = " ".join(text.split())
    return text if len(text) <= ERROR_MAX else text[:ERROR_MAX - 3] + "..."


def failed_row(overrides: dict[str, Any], run_id: str, error: str, sim: str | None = None,
               seed: int | None = None) -> dict[str, Any]:
    """The row of a point that did not complete."""
    from aifabric.sweep.model import overrides_json

    return {"run_id": run_id, "overrides": overrides_json(overrides), "sim": sim,
            "seed": seed, "status": "failed", "error": error, **param_columns(overrides)}


def _mark(mark_dir: str | None, index: int) -> None:
    """Say which process runs point ``index`` (a file per point, written atomically): the
    local executor reads these after a worker died to know which point it was running."""
    if mark_dir is None:
        return
    tmp = Path(mark_dir) / f".{index}.{os.getpid()}.tmp"
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, Path(mark_dir) / f"{index}.{os.getpid()}")


def _kill_hook(run_id: str) -> None:
    hook = os.environ.get(KILL_HOOK)
    if not hook:
        return
    prefix, times, folder = hook.split(":", 2)
    if len(prefix) < 8 or not run_id.startswith(prefix):
        return
    count = Path(folder) / f"kills-{prefix}"
    with open(count, "a+") as fh:
        fh.seek(0)
        done = len(fh.read().splitlines())
        if done >= int(times):
            return
        fh.write(f"{os.getpid()}\n")
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def execute(index: int, doc: dict[str, Any], base_dir: str | None,
            overrides: dict[str, Any], run_id: str, attempt: int = 1,
            mark_dir: str | None = None, max_events: float | None = DEFAULT_MAX_EVENTS,
            executor: str = "local", tables: str | list[str] = "auto",
            max_memory: str | None = None
            ) -> tuple[int, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A point as a task: ``(index, row, tables, timing)``; an exception of the run
    becomes a failed row (the sweep goes on). ``run_id`` is the parent's hash of the
    point (the row keeps it, so a row always belongs to the point that was sent).
    ``max_memory``: the size guard's limit in this worker (``--max-memory``; None:
    automatic)."""
    if max_memory is not None:
        from aifabric.guard import set_limit

        set_limit(max_memory)
    _mark(mark_dir, index)
    _kill_hook(run_id)
    t0 = time.perf_counter()
    timing: dict[str, Any]
    try:
        row, out, timing = run_point(doc, base_dir, overrides, tables=tables,
                                     max_events=max_events)
        if row["run_id"] != run_id:  # the hash is not reproducible here: never mix runs
            raise RuntimeError(f"content hash {row['run_id']} differs from the parent's "
                               f"{run_id} (a different aifabric version on this worker?)")
    except Exception as err:  # recorded as a failed point
        row = failed_row(overrides, run_id, error_text(err),
                         overrides.get("sim", doc.get("sim", "flow")),
                         overrides.get("seed", doc.get("seed", 0)))
        out, timing = {}, {}
    timing = {**timing, "wall_s": time.perf_counter() - t0, "attempt": attempt,
              "executor": executor, "worker": f"{socket.gethostname()}:{os.getpid()}"}
    return index, row, out, timing
