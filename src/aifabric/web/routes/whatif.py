"""``/api/whatif``: fail links or switches and re-route (POST from the page, GET for
scripts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Body
from fastapi.responses import Response

from aifabric.web.models import WhatifIn, WhatifOut
from aifabric.web.routes.common import TwinCall, fail_q, fail_set

if TYPE_CHECKING:
    from aifabric.web.twin import Twin

__all__ = ["router"]

_DOC = ("Fail links or switches: the routing model re-routes every flow; the answer says "
        "what moved, what became unreachable, and the load per tier and hottest links "
        "before and after.")


def router(twin: Twin, call: TwinCall) -> APIRouter:
    r = APIRouter()

    @r.post("/api/whatif", response_model=WhatifOut, summary="Fail something, re-route",
            description=_DOC)
    def whatif(body: WhatifIn = Body(...)) -> Response:
        return call.heavy_call(twin.whatif, fail_set(body.fail))

    @r.get("/api/whatif", response_model=WhatifOut,
           summary="Fail something, re-route (for scripts)", description=_DOC)
    def whatif_get(fail: list[str] = fail_q) -> Response:
        return call.heavy_call(twin.whatif, fail_set(fail))

    return r
