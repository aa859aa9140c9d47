"""What every benchmark shares: a case runs in a fresh child process pinned to one core,
and reports its figures with the child's peak resident memory (the whole process:
interpreter, numpy, scipy and the data)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import resource
import sys
from collections.abc import Callable
from typing import Any


def _child(target: Callable[..., dict[str, Any]], args: tuple, q: mp.Queue) -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    out = target(*args)
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    q.put(out)


def run_isolated(target: Callable[..., dict[str, Any]], *args: Any,
                 timeout_s: float | None = None) -> dict[str, Any] | None:
    """``target(*args)`` in a fresh process on one core; its dict plus ``peak_mb``, or
    None when it ran past ``timeout_s`` (it is then stopped)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(target, args, q))
    p.start()
    try:
        result = q.get(timeout=timeout_s)
    except queue.Empty:
        p.terminate()
        p.join()
        return None
    p.join()
    return result


def finish(results: list[dict[str, Any]] | dict[str, Any], failed: bool) -> int:
    """A benchmark's end: its measurements as JSON when ``--json`` is on the command
    line, and its exit status (1 when a figure missed its limit)."""
    if "--json" in sys.argv:
        print(json.dumps(results, indent=2))
    return 1 if failed else 0
