"""``/api/info``, ``/api/topology``, ``/api/segment/{seg}``, ``/api/search`` and
``/api/heatmap``: what is served, the graph and its loads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Query
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from aifabric.errors import Problem, SpecError
from aifabric.web.http import NotFound
from aifabric.web.models import (
    HeatmapOut,
    InfoOut,
    PlaneOut,
    SearchHit,
    SegmentOut,
    TopologyOut,
    TorOut,
)
from aifabric.web.routes.common import MAX_NAME, TwinCall, fail_q, fail_set, metric_q, stat_q, t_q

if TYPE_CHECKING:
    from aifabric.web.twin import Twin

__all__ = ["router"]


def router(twin: Twin, call: TwinCall) -> APIRouter:
    r = APIRouter()

    @r.get("/api/info", response_model=InfoOut, summary="What is served",
           description="Mode (design, run or lab), the fabric's size, the views and "
           "metrics available, the time steps and what a run folder lacks.")
    async def info() -> Response:
        # asked while what-ifs keep the threads busy: each hop costs a wait for the GIL,
        # so what is made already is answered here, on the event loop (well under 1 ms)
        if twin.info_is_quick():
            return call(twin.info)
        return await run_in_threadpool(call, twin.info)

    @r.get("/api/topology", response_model=TopologyOut,
           summary="The fabric as aggregated groups",
           description="Hosts per segment, ToRs per segment and plane, aggs per pod, "
           "plane and group, cores per plane and group, laid out like the LLD, with "
           "link counts and the load of each group's links in each direction; each "
           "group edge's `per_link` (what the page colours by) is the max, p99 or mean "
           "of its links (`stat`), and `scale` gives the colour scale's ends and unit.")
    def topology(metric: str | None = metric_q, t: int = t_q,
                 level: str = Query("auto", pattern="^(auto|segment|pod)$",
                                    description="auto | segment | pod"),
                 fail: list[str] = fail_q, stat: str = stat_q) -> Response:
        how = call.heavy_call if fail else call  # a failure set may need routing
        return how(twin.topology, metric=metric, t=t, level=level, fail=fail_set(fail),
                   stat=stat)

    @r.get("/api/segment/{seg}", response_model=SegmentOut,
           summary="One segment: its ToRs, hosts and ports",
           description="Every ToR and host of the segment, one edge per access link "
           "(with port names, NIC and IP) and the ToR uplinks per agg group.")
    def segment(seg: int, metric: str | None = metric_q, t: int = t_q,
                fail: list[str] = fail_q, stat: str = stat_q) -> Response:
        try:
            how = call.heavy_call if fail else call
            return how(twin.segment, seg, metric=metric, t=t, fail=fail_set(fail),
                       stat=stat)
        except SpecError as err:
            if any(p.path == "segment" for p in err.problems):
                raise NotFound(err.problems) from None
            raise

    @r.get("/api/plane", response_model=PlaneOut,
           summary="One plane of a pod: every agg and core",
           description="Every agg of the pod's plane and every core they are cabled to, "
           "one node per switch, the plane's ToRs one group per segment; edges ToR group "
           "-> agg and agg -> core, coloured by `stat` of their links.")
    def plane(pod: int | None = Query(None, ge=0, description="the pod (default: the "
                                      "first with aggs in the plane)"),
              plane: int = Query(..., ge=-1, description="the plane (-1: a pod without "
                                 "planes)"),
              metric: str | None = metric_q, t: int = t_q, fail: list[str] = fail_q,
              stat: str = stat_q) -> Response:
        try:
            how = call.heavy_call if fail else call
            return how(twin.plane, pod, plane, metric=metric, t=t, fail=fail_set(fail),
                       stat=stat)
        except SpecError as err:
            if any(p.path in ("pod", "plane") for p in err.problems):
                raise NotFound(err.problems) from None
            raise

    @r.get("/api/tor/{name}", response_model=TorOut,
           summary="One ToR: its ports, their load and flows",
           description="The ToR, its NIC ports and aggs, one edge per port; `ports` "
           "lists every port (interface, peer, tier, capacity, the metric each way, the "
           "flows crossing it each way and the heaviest of them with their collective "
           "and job).")
    def tor(name: str, metric: str | None = metric_q, t: int = t_q,
            fail: list[str] = fail_q) -> Response:
        if len(name) > MAX_NAME:
            raise NotFound(Problem("tor", f"a name of {len(name)} characters; allowed: "
                                   f"at most {MAX_NAME}"))
        try:
            how = call.heavy_call if fail else call
            return how(twin.tor, name, metric=metric, t=t, fail=fail_set(fail))
        except SpecError as err:
            if any(p.path == "tor" for p in err.problems):
                raise NotFound(err.problems) from None
            raise

    @r.get("/api/search", response_model=list[SearchHit], summary="Find a name",
           description="A switch, host, GPU, NIC port, port `device:iface` or IP address; "
           "exact matches first.")
    def search(q: str = Query(..., min_length=1, max_length=MAX_NAME,
                              description="what to look for")) -> Response:
        return call(twin.search, q)

    @r.get("/api/heatmap", response_model=HeatmapOut, summary="Load per tier and link",
           description="Per tier and direction: mean (over all arcs, and over the "
           "active arcs, with a value > 0, as report.md gives it), p99 and max of the "
           "metric; the "
           "hottest links, each with the collective (pattern) that drives it; the "
           "per-tier series over time.")
    def heatmap(metric: str | None = metric_q, t: int = t_q,
                k: int = Query(20, ge=1, le=1000, description="hottest links listed"),
                scope: str = Query("all", pattern="^(all|fabric)$", description="all: "
                                   "every link; fabric: the scale-out links only (access, "
                                   "leaf-spine, spine-core), not NVLink or PCIe"),
                fail: list[str] = fail_q) -> Response:
        how = call.heavy_call if fail else call
        return how(twin.heatmap, metric=metric, t=t, k=k, fail=fail_set(fail), scope=scope)

    return r
