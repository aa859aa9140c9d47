"""The event list of the packet simulator: integer picoseconds, deterministic ties.

An event is ``(time_ps, seq, fn, arg)``; ``seq`` is a counter that breaks ties in
scheduling order (SimPy's ``_eid``), so the same input runs the same way every time.
The list is an object passed to whatever schedules events — never a global.

A network may install a *kernel*: its own loop over the same heap that handles its
frequent events inline (integer codes in place of ``fn``) and calls ``fn(arg)`` for the
rest; :meth:`EventList.run` then hands the loop to it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["PS_PER_NS", "PS_PER_US", "EventList"]

PS_PER_NS = 1_000
PS_PER_US = 1_000_000


class EventList:
    """A heap of pending events; :meth:`run` pops them in (time, seq) order.

    >>> ev = EventList()
    >>> seen = []
    >>> ev.at(5, seen.append, "b"); ev.at(5, seen.append, "c"); ev.at(1, seen.append, "a")
    >>> ev.run(); seen, ev.now
    (['a', 'b', 'c'], 5)
    """

    __slots__ = ("count", "heap", "kernel", "next_seq", "now", "stopped")

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, Any, Any]] = []
        self.next_seq: Callable[[], int] = itertools.count().__next__  # tie-break counter
        self.now = 0
        self.count = 0
        self.stopped = False
        # kernel(limit_ps) -> events processed; runs the loop instead of run()'s own
        self.kernel: Callable[[int], int] | None = None

    def at(self, time_ps: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Call ``fn(arg)`` at ``time_ps`` (never before now)."""
        if time_ps < self.now:
            raise ValueError(f"event at {time_ps} ps is in the past (now {self.now} ps)")
        heapq.heappush(self.heap, (time_ps, self.next_seq(), fn, arg))

    def stop(self) -> None:
        """End :meth:`run` after the current event."""
        self.stopped = True

    def run(self, until_ps: int | None = None) -> None:
        """Process events until none is left, :meth:`stop` is called or the next one is
        after ``until_ps``."""
        self.stopped = False
        limit = until_ps if until_ps is not None else 1 << 126
        if self.kernel is not None:
            self.count += self.kernel(limit)
            return
        heap = self.heap
        pop = heapq.heappop
        n = 0
        while heap and not self.stopped:
            if heap[0][0] > limit:
                self.now = limit
                break
            t, _, fn, arg = pop(heap)
            self.now = t
            fn(arg)
            n += 1
        self.count += n
