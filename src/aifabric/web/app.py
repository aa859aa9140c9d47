"""The HTTP face of the twin: :func:`create_app` wraps a :class:`~aifabric.web.twin.Twin`
in a FastAPI application (the page, its static files, a JSON API described by OpenAPI,
and the files of a run folder).

Why it is shaped this way:

- **Documented, not validated twice.** Every endpoint declares a pydantic response model
  and a summary, so ``/openapi.json`` (and the self-contained page at ``/api``) describes
  the whole API; the handlers return the twin's dicts as an already-encoded
  :class:`~starlette.responses.Response`, so a field the model does not list can never
  turn a good answer into a 500.
- **No CDN.** FastAPI's ``/docs`` and ``/redoc`` load Swagger UI / ReDoc from a CDN: both
  are off, and ``/api`` lists the endpoints from the OpenAPI document as plain HTML.
- **Bad input is one line of JSON.** A :class:`~aifabric.errors.SpecError` (unknown
  segment, metric, failure name...), a malformed query parameter or an unknown path
  answers ``{"error": "field: message"}`` with a 4xx status; an unexpected exception
  answers 500 with one line, never a traceback page.
- **Only the run folder is served.** ``/files/{path}`` resolves the path (symlinks
  included) and answers 404 unless the result is a regular file inside the run folder;
  files are sent with a content type that cannot run script on this origin (HTML and
  Markdown as text, SVG sandboxed).
- **User text never becomes markup.** ``report.md`` is rendered with markdown-it-py with
  HTML disabled (raw HTML in a report comes back escaped) and its relative links and
  images are pointed at ``/files/``; everything else is JSON, which the page puts in as
  text.

- **Bounded input, reads never queued.** A request body over ``max_body_bytes``
  (default 1 MiB, ``aifabric serve --max-body``) answers 413 as it streams in, before
  anything parses it (:class:`~aifabric.web.http.BodyLimit`). FastAPI runs the
  (synchronous) handlers in a thread pool, several at once; the twin holds its lock only
  to look up and store a cache entry, never while it routes a failure set, so
  ``/api/info`` or a view of the base routing answers while what-ifs compute. What may
  route or trace a lot (what-if, a trace, a view with ``fail=``) computes at most
  (cores / 2) at a time: more threads computing would only queue for the GIL, and each
  read would wait longer for it (``benchmarks/bench_web.py``).

Where it lives: :mod:`aifabric.web.routes` (one router per area: the page, the views,
trace, what-if, the run folder, the lab), :mod:`aifabric.web.models` (the response
models), :mod:`aifabric.web.http` (JSON encoding, errors, the security headers) and
:mod:`aifabric.web.runfolder` (the run folder's files); :func:`create_app` wires them.
"""


from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from aifabric.errors import SpecError
from aifabric.web.http import MAX_BODY_BYTES, BodyLimit, Guard, NotFound, error_response
from aifabric.web.models import ErrorOut
from aifabric.web.routes import lab, page, run, trace, views, whatif
from aifabric.web.routes.common import TwinCall
from aifabric.web.routes.page import STATIC_DIR
from aifabric.web.twin.core import MAX_FAIL  # failure names per request: one limit for both

if TYPE_CHECKING:
    from aifabric.web.twin import Twin

__all__ = ["MAX_FAIL", "STATIC_DIR", "create_app"]


def create_app(twin: Twin, *, allowed_hosts: list[str] | None = None,
               max_body_bytes: int = MAX_BODY_BYTES,
               heavy_at_once: int | None = None) -> FastAPI:
    """The FastAPI application serving ``twin``.

    ``heavy_at_once``: what-ifs, traces and views with a failure set computing at a time
    (default: half the cores, at least 1).

    ``max_body_bytes``: the largest request body accepted (a larger one answers 413
    before anything parses it; :class:`~aifabric.web.http.BodyLimit`).

    ``allowed_hosts``: the ``Host`` headers to accept (``aifabric serve`` passes the
    loopback names when it listens on loopback, so a web page elsewhere cannot reach the
    twin through DNS rebinding); None accepts any.
    """
    app = FastAPI(
        title="aifabric",
        version=_version(),
        description="The digital twin served by `aifabric serve`: topology, loads, "
        "collective paths, what-if failures and the files of a run, as JSON.",
        docs_url=None, redoc_url=None, swagger_ui_oauth2_redirect_url=None,
        responses={400: {"model": ErrorOut, "description": "bad input"},
                   404: {"model": ErrorOut, "description": "no such thing"}},
    )
    _errors(app)
    app.include_router(page.router())
    page.mount_static(app)
    call = TwinCall(heavy_at_once)
    for area in (views, trace, whatif, run, lab):
        app.include_router(area.router(twin, call))
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes)
    app.add_middleware(Guard, allowed_hosts=allowed_hosts)  # outermost: runs first
    return app


def _errors(app: FastAPI) -> None:
    """Every error answers one line of JSON (:func:`aifabric.web.http.error_response`):
    bad input 400, something not there 404, the lab unreachable 503, a crash 500."""

    @app.exception_handler(SpecError)
    async def _spec_error(request: Request, err: SpecError) -> Response:
        text = "; ".join(str(p) for p in err.problems)
        return error_response(text, 404 if isinstance(err, NotFound) else 400)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, err: RequestValidationError) -> Response:
        parts = []
        for e in err.errors()[:5]:
            loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("query", "path",
                                                                         "body"))
            parts.append(f"{loc or 'request'}: {e.get('msg', 'invalid')}")
        return error_response("; ".join(parts) or "invalid request", 400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> Response:
        detail = err.detail if isinstance(err.detail, str) else "error"
        if err.status_code == 404:
            detail = f"{request.url.path}: not found"
        return error_response(detail, err.status_code)

    @app.exception_handler(Exception)
    async def _crash(request: Request, err: Exception) -> Response:
        return error_response(f"internal error: {type(err).__name__}: {err}", 500)

    from aifabric.lab import LabError

    @app.exception_handler(LabError)
    async def _lab_error(request: Request, err: Exception) -> Response:
        return error_response(f"lab: {err}", 503)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aifabric")
    except PackageNotFoundError:  # a source tree on the path, never installed
        return "unknown"
