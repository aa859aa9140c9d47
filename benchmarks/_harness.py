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


def best_rounds(target: Callable[..., dict[str, Any]], cases: list[tuple], rounds: int,
                key: str, timeout_s: float = 900) -> list[dict[str, Any]]:
    """Each case (its name first) run ``rounds`` times in turn, isolated: per case the
    round with the highest ``key`` (the machine's load moves between rounds), in the
    cases' order; a round past ``timeout_s`` is said and left out."""
    best: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for case in cases:
            r = run_isolated(target, case, timeout_s=timeout_s)
            if r is None:
                print(f"{case[0]}: ran past {timeout_s:.0f} s")
                continue
            if case[0] not in best or r[key] > best[case[0]][key]:
                best[case[0]] = r
    return [best[c[0]] for c in cases if c[0] in best]


def time_packet_loop() -> dict[str, float]:
    """In this (a case's child) process, time every ``PacketSim.run``: the returned
    dict's ``"s"`` sums their wall seconds (the packet core's loop alone)."""
    import time

    from aifabric.sim.packet.sim import PacketSim

    timed = {"s": 0.0}
    run = PacketSim.run

    def timed_run(self: PacketSim, *a: object, **kw: object) -> None:
        t0 = time.perf_counter()
        run(self, *a, **kw)
        timed["s"] += time.perf_counter() - t0

    PacketSim.run = timed_run  # type: ignore[method-assign]
    return timed
