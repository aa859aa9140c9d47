"""``/api/lab``: the running lab, live (lab mode only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter
from fastapi.responses import Response

from aifabric.errors import Problem
from aifabric.web.http import NotFound
from aifabric.web.models import LabOut
from aifabric.web.routes.common import TwinCall

if TYPE_CHECKING:
    from aifabric.web.twin import Twin

__all__ = ["router"]


def router(twin: Twin, call: TwinCall) -> APIRouter:
    r = APIRouter()

    @r.get("/api/lab", response_model=LabOut, summary="The running lab, live",
           description="Lab mode only: every link's state and rates (from counter "
                       "deltas since the previous call), BGP sessions, which "
                       "namespaces and daemons answer, the failures injected.")
    def lab() -> Response:
        if twin.mode != "lab":
            raise NotFound(Problem("lab", f"this server shows a {twin.mode}, not a lab; "
                                   "allowed: aifabric serve --lab"))
        return call(twin.lab_state)

    return r
