"""``/api/traces`` (what can be traced) and ``/api/trace`` (the paths of a collective, a
job or a GPU pair, hop by hop, and the bottleneck)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Query
from fastapi.responses import Response

from aifabric.web.models import TraceOut, TracesOut
from aifabric.web.routes.common import MAX_NAME, TwinCall, fail_q, fail_set

if TYPE_CHECKING:
    from aifabric.web.twin import Twin

__all__ = ["router"]


def router(twin: Twin, call: TwinCall) -> APIRouter:
    r = APIRouter()

    @r.get("/api/traces", response_model=TracesOut, summary="What can be traced",
           description="The jobs, collectives and traffic patterns whose flows "
           "/api/trace draws.")
    def traces() -> Response:
        return call(twin.traces)

    @r.get("/api/trace", response_model=TraceOut, summary="The paths of some flows",
           description="The flows of a collective, a job, or between two GPUs: every arc "
           "they use (by the routing model) with its load, hop by hop, and the "
           "bottleneck link with the flows sharing it. A collective's or a job's "
           "utilization (and so its bottleneck) is over its own time window in a "
           "simulated run (`utilization_window`), else the whole run's.")
    def trace(collective: str | None = Query(None, max_length=MAX_NAME,
                                             description="a collective id or name"),
              job: str | None = Query(None, max_length=MAX_NAME, description="a job name"),
              src: str | None = Query(None, max_length=MAX_NAME, description="source GPU"),
              dst: str | None = Query(None, max_length=MAX_NAME,
                                      description="destination GPU"),
              max_edges: int = Query(20_000, ge=1, le=200_000, description="send at "
                                     "most this many edges: past it, the bottleneck, the "
                                     "listed paths' arcs and the heaviest (`truncated` "
                                     "says how many of how many)"),
              view: str = Query("links", pattern="^(links|groups|auto)$",
                                description="links: every arc; groups: the overview's "
                                "groups (one edge per group pair, the selection's bytes "
                                "summed); auto: groups past max_edges arcs (a whole traffic "
                                "pattern), else links"),
              fail: list[str] = fail_q) -> Response:
        return call.heavy_call(twin.trace, collective=collective, job=job, src=src, dst=dst,
                               fail=fail_set(fail), max_edges=max_edges, view=view)

    return r
