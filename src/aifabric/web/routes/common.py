"""What the routers share: the call into the twin, the query parameters every view
takes (metric, time step, failure set) and the failure set's check."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from fastapi import Query
from fastapi.responses import Response

from aifabric.errors import Problem, SpecError
from aifabric.web.http import CONTROL, json_response
from aifabric.web.twin.core import MAX_FAIL

__all__ = ["MAX_NAME", "TwinCall", "fail_q", "fail_set", "metric_q", "stat_q", "t_q"]

MAX_NAME = 200          # characters per failure name / search query


class TwinCall:
    """Calls into the twin and answers JSON. FastAPI runs the (synchronous) handlers in a
    thread pool, several at once: the twin guards its own caches with a short lock and
    never holds it while routing (:meth:`aifabric.web.twin.core.TwinCore._cached`), so
    a read is never queued behind a what-if."""

    def __init__(self, heavy_at_once: int | None = None) -> None:
        # what-ifs and traces at once: more threads than cores computing only queue for
        # the GIL, and every read then waits longer for it
        n = heavy_at_once or max(1, (os.cpu_count() or 2) // 2)
        self.heavy = threading.BoundedSemaphore(n)

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Response:
        return json_response(fn(*args, **kwargs))

    def heavy_call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Response:
        """A call that may route a failure set or trace a whole pattern: at most
        ``heavy_at_once`` of them compute at a time (the others wait, without the GIL);
        reads never wait on this."""
        with self.heavy:
            return json_response(fn(*args, **kwargs))


metric_q = Query(None, max_length=64, description="metric to colour by: bytes, flows, "
                 "utilization, queue_bytes, ecn_marks, pfc_pauses, drops (what "
                 "/api/info lists); default: the first")
t_q = Query(-1, ge=-1, description="time step (index into info.times_ns); -1 = "
            "the whole run")
stat_q = Query("max", pattern="^(max|p99|mean)$", description="how a group of links is "
               "coloured: max (the hottest link shows), p99 or mean of its links' figures")
fail_q = Query([], max_length=MAX_FAIL, description="fail this switch, port "
               "`device:iface`, `link:<id>`, or every switch of `plane:<n>`, `pod:<n>` or "
               "`segment:<n>` (repeat for several)")


def fail_set(fail: list[str]) -> tuple[str, ...]:
    """The failure set of a request: each name once, in the order given."""
    if len(fail) > MAX_FAIL:
        raise SpecError(Problem("fail", f"{len(fail)} names; allowed: at most {MAX_FAIL}"))
    out: dict[str, None] = {}
    for name in fail:
        name = name.strip()
        if not name or len(name) > MAX_NAME or CONTROL.search(name):
            raise SpecError(Problem("fail", f"{name[:40]!r} is not a name; allowed: a switch,"
                                    " a port device:iface, link:<id>, plane:<n>, pod:<n> or "
                                    "segment:<n>, up to "
                                    f"{MAX_NAME} characters"))
        out[name] = None
    return tuple(out)
