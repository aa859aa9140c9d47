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

The twin is not assumed thread-safe: FastAPI runs these (synchronous) handlers in a
thread pool, so every call into the twin holds one lock.
"""

from __future__ import annotations

import csv
import html
import json
import math
import os
import posixpath
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import numpy as np
from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from aifabric.errors import Problem, SpecError
from aifabric.web.twin import MAX_FAIL  # failure names per request: one limit for both

if TYPE_CHECKING:
    from aifabric.web.twin import Twin

__all__ = ["STATIC_DIR", "create_app"]

#: the page and its scripts, shipped in the package (see pyproject's package-data)
STATIC_DIR = Path(__file__).resolve().parent / "static"

#: the page's Content-Security-Policy (also in index.html's <meta>): this origin only
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: a file of the run folder or the API page: no script at all
FILE_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"

MAX_NAME = 200          # characters per failure name / search query
MAX_REPORT = 4 << 20    # bytes of report.md rendered
MAX_FILES = 5000        # files listed from a run folder
MAX_ROWS = 5000         # rows per table page

_TABLE_EXT = {".csv", ".parquet"}
_PLOT_EXT = {".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"}
_MEDIA = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg",
          ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
          ".csv": "text/csv; charset=utf-8", ".json": "application/json",
          ".parquet": "application/octet-stream"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: a URL's scheme (http:, mailto:)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
#: the schemes a report's links may keep (everything else: the text only)
_LINK_SCHEMES = {"http", "https", "mailto"}


# ---------------------------------------------------------------- response models
class _Open(BaseModel):
    """A JSON object that may carry more fields than listed."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(BaseModel):
    """Every 4xx/5xx answer: one line saying what was wrong and what is allowed."""

    error: str = Field(description="`field: message`, one line",
                       examples=["segment: 99 is not a segment; allowed: 0..119"])


class FabricInfo(_Open):
    name: str
    family: str
    gpus: int
    hosts: int
    switches: int
    links: int
    segments: int
    pods: int
    planes: int


class InfoOut(_Open):
    mode: str = Field(description="design | run | lab")
    name: str
    fabric: FabricInfo | None = Field(None, description="null when the run folder has no "
                                      "scenario to rebuild its fabric from")
    views: list[str] = Field(default_factory=list, description="the page's tabs that apply")
    metrics: list[str] = Field(default_factory=list, description="metric names; the first "
                               "is the default")
    times_ns: list[float] = Field(default_factory=list, description="start of each time "
                                  "step; `t` indexes this list")
    missing: list[str] = Field(default_factory=list, description="what a malformed or "
                               "partial run folder lacks, as sentences")
    collectives: bool = False
    whatif: bool = False


class GraphNode(_Open):
    id: str
    kind: str | None = None
    x: float | None = None
    y: float | None = None


class GraphEdge(_Open):
    id: str
    source: str
    target: str
    tier: str | None = None
    value: float | None = None


class TopologyOut(_Open):
    level: str = Field(description="segment | pod: how far the groups are aggregated")
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    tiers: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list, description="the failure set applied")


class SegmentOut(_Open):
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class SearchHit(_Open):
    name: str
    kind: str
    node: int | None = None
    segment: int | None = None
    pod: int | None = None
    plane: int | None = None
    rail: int | None = None
    match: str = Field(description="name | port | ip")
    link: int | None = None
    label: str


class TierStat(_Open):
    tier: str
    direction: str | None = None
    arcs: int | None = None
    mean: float | None = Field(None, description="mean over all the tier's arcs")
    active: int | None = Field(None, description="arcs with a value > 0 (that carried "
                               "traffic)")
    mean_active: float | None = Field(None, description="mean over the active arcs: "
                                      "report.md's per-tier mean")
    p99: float | None = None
    max: float | None = None


class HotLink(_Open):
    arc: int | None = None
    link: int | None = None
    direction: str | None = None
    value: float | None = None


class HeatmapOut(_Open):
    metric: str
    t: int | None = None
    times_ns: list[float] = Field(default_factory=list)
    tiers: list[TierStat] = Field(default_factory=list)
    hottest: list[HotLink] = Field(default_factory=list)
    series: dict[str, Any] = Field(default_factory=dict, description="per-tier values over "
                                   "time: {times_ns, tiers: {name: [value per step]}}")


class TracesOut(_Open):
    jobs: list[dict[str, Any]] = Field(default_factory=list)
    collectives: list[dict[str, Any]] = Field(default_factory=list)
    patterns: list[dict[str, Any]] = Field(default_factory=list)


class TraceOut(_Open):
    what: str
    flows: int
    bytes: float
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list, description="exactly the arcs the "
                                   "selected flows use, by the routing model")
    truncated: dict[str, int] | None = Field(None, description="`{edges_total, "
                                             "edges_sent}` when only part of the edges "
                                             "were sent (max_edges); null when all were")
    paths: list[dict[str, Any]] = Field(default_factory=list, description="the flows "
                                        "listed hop by hop: `{flow, src, dst, bytes, hops, "
                                        "bottleneck}` (the first 50, and one through the "
                                        "bottleneck)")
    hops: list[list[dict[str, Any]]] = Field(default_factory=list, description="per "
                                             "listed flow, its hops in order: `{from, to, "
                                             "arc, link, tier, bytes, utilization, flows, "
                                             "flow_bytes, bottleneck}`")
    bottleneck: dict[str, Any] | None = None


class WhatifIn(BaseModel):
    """The links or switches to fail."""

    fail: list[str] = Field(default_factory=list, max_length=MAX_FAIL,
                            description="switch names, ports `device:iface` or `link:<id>`",
                            examples=[["tor-s00-r0-a"]])


class WhatifOut(_Open):
    fail: list[str]
    links_down: int
    impact: dict[str, Any] | None = None
    flows: dict[str, Any] | None = Field(None, description="what moved, as `aifabric route` "
                                         "prints it")
    moved: list[dict[str, Any]] = Field(default_factory=list)
    unreachable: list[dict[str, Any]] = Field(default_factory=list)
    tiers_before: list[dict[str, Any]] = Field(default_factory=list)
    tiers_after: list[dict[str, Any]] = Field(default_factory=list)
    hottest_before: list[dict[str, Any]] = Field(default_factory=list)
    hottest_after: list[dict[str, Any]] = Field(default_factory=list)
    seconds: float | None = None


class RunFile(BaseModel):
    path: str = Field(description="relative to the run folder; fetch it at /files/{path}")
    size: int
    kind: str = Field(description="table | plot | report | other")


class RunOut(BaseModel):
    files: list[RunFile]
    report_html: str = Field(description="report.md rendered to HTML; raw HTML in the "
                             "report is escaped, relative links point at /files/")
    missing: list[str]


class TableOut(BaseModel):
    name: str
    columns: list[str]
    rows: list[list[Any]]
    total: int = Field(description="rows in the whole table")
    offset: int
    problem: str | None = Field(None, description="why the table could not be read to the "
                                "end (a garbled file); the rows before it are still given")


class LabOut(_Open):
    links: list[dict[str, Any]] = Field(default_factory=list)
    bgp: list[dict[str, Any]] = Field(default_factory=list)
    up: dict[str, bool] = Field(default_factory=dict)
    failures: list[Any] = Field(default_factory=list)
    seconds: float | None = None


# ---------------------------------------------------------------- JSON out
def _plain(value: Any) -> Any:
    """``value`` with numpy scalars/arrays as Python ones and NaN/inf as null (JSON has
    neither); only called when the fast encoding failed."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def _default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _encode(data: Any) -> bytes:
    try:
        text = json.dumps(data, default=_default, allow_nan=False, ensure_ascii=False,
                          separators=(",", ":"))
    except ValueError:  # a NaN or inf somewhere: walk once and replace them by null
        text = json.dumps(_plain(data), default=_default, allow_nan=False,
                          ensure_ascii=False, separators=(",", ":"))
    return text.encode()


def _json(data: Any, status: int = 200) -> Response:
    return Response(_encode(data), status_code=status, media_type="application/json")


def _error(message: str, status: int) -> Response:
    line = _CONTROL.sub(" ", message).strip() or "error"
    return _json({"error": line}, status)


class _NotFound(SpecError):
    """Bad input naming something that is not there (answered 404)."""


# ---------------------------------------------------------------- run folder
def _inside(root: Path, rel: str) -> Path | None:
    """The regular file ``rel`` names under ``root``, or None: absolute paths, ``..``,
    hidden names (an unfinished run's temporaries), control characters, and anything
    whose real path (symlinks resolved) leaves the folder are refused."""
    if not rel or len(rel) > 1024 or _CONTROL.search(rel) or "\\" in rel:
        return None
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return None
    try:
        base = root.resolve(strict=True)
        real = (base / rel).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    if not real.is_relative_to(base) or not real.is_file():
        return None
    return real


def _kind(rel: str) -> str:
    suffix = Path(rel).suffix.lower()
    if rel == "report.md":
        return "report"
    if suffix in _TABLE_EXT:
        return "table"
    if suffix in _PLOT_EXT:
        return "plot"
    return "other"


#: what a request learned of the run folder, reused while nothing changed: the file
#: listing per folder (checked by the mtimes of its directories) and, per CSV table
#: (path, mtime, size), its header, row count and damage; a few entries each
_LISTINGS: OrderedDict[str, tuple[tuple[tuple[str, int], ...], list[dict[str, Any]]]] = \
    OrderedDict()
_CSV_META: OrderedDict[tuple[str, int, int], tuple[list[str], int, str | None]] = OrderedDict()
_CACHED = 32
_CACHE_LOCK = threading.Lock()


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    with _CACHE_LOCK:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _CACHED:
            cache.popitem(last=False)


def _dir_stamps(dirs: list[str]) -> tuple[tuple[str, int], ...] | None:
    """Each directory with its mtime (ns), None when one is gone."""
    try:
        return tuple((d, os.stat(d).st_mtime_ns) for d in dirs)
    except OSError:
        return None


def _run_files(root: Path) -> list[dict[str, Any]]:
    """Every regular file under ``root`` that ``/files/`` would serve (no hidden files:
    they are an unfinished run's temporaries), in path order. Listed once, then again
    only when a directory of the folder changed (its mtime: a file added, removed or
    renamed — a writer's temp file renamed into place included)."""
    base = root.resolve()
    with _CACHE_LOCK:
        hit = _LISTINGS.get(str(base))
    if hit is not None and _dir_stamps([d for d, _ in hit[0]]) == hit[0]:
        return [dict(f) for f in hit[1]]
    out: list[dict[str, Any]] = []
    dirs: list[str] = []
    for here, subdirs, files in os.walk(base, followlinks=False):
        dirs.append(here)
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            rel = Path(here, name).relative_to(base).as_posix()
            real = _inside(base, rel)
            if real is None:
                continue
            out.append({"path": rel, "size": real.stat().st_size, "kind": _kind(rel)})
            if len(out) >= MAX_FILES:
                break
        if len(out) >= MAX_FILES:
            break
    out.sort(key=lambda f: (f["path"].count("/"), f["path"]))
    stamps = _dir_stamps(dirs)
    if stamps is not None:
        _remember(_LISTINGS, str(base), (stamps, [dict(f) for f in out]))
    return out


def _report_url(url: str) -> str | None:
    """Where a link or image of ``report.md`` may point: an anchor as is; http(s) and
    mailto as is; a relative path under ``files/`` (normalised: ``%2e%2e``, ``\\`` and
    ``..`` resolved as a browser would); None (drop it) for anything else — another
    scheme, an absolute or protocol-relative path, or a path that leaves ``files/``
    (``../api/whatif?fail=x`` in an ``<img>`` would fire a what-if just by showing the
    Run tab)."""
    if url.startswith("#"):
        return url
    m = _SCHEME.match(url)
    if m is not None:
        return url if m.group(1).lower() in _LINK_SCHEMES else None
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    path, rest = unquote(url[:cut]).replace("\\", "/"), url[cut:]
    if path.startswith("/") or _CONTROL.search(path):
        return None
    norm = posixpath.normpath("files/" + path)
    if not norm.startswith("files/"):
        return None
    return quote(norm, safe="/") + rest


def _render_report(text: str) -> str:
    """``report.md`` as HTML: raw HTML escaped (markdown-it's ``html`` off, its link
    validation refuses ``javascript:`` and the like), relative links and images pointed
    at ``/files/``; a link or image that would leave the run folder (or use another
    scheme than http, https, mailto) is rendered as its text only (:func:`_report_url`)."""
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)

    def rewrite(children: list[Any]) -> list[Any]:
        out: list[Any] = []
        dropping = 0  # inside a dropped link (links do not nest; images inside them do)
        for tok in children:
            if tok.type == "link_open":
                url = _report_url(str(tok.attrGet("href") or ""))
                if url is None:
                    dropping += 1
                    continue
                tok.attrSet("href", url)
            elif tok.type == "link_close" and dropping:
                dropping -= 1
                continue
            elif tok.type == "image":
                url = _report_url(str(tok.attrGet("src") or ""))
                if url is None:  # its alt text only
                    out.append(Token("text", "", 0, content=tok.content))
                    continue
                tok.attrSet("src", url)
            out.append(tok)
        return out

    for token in tokens:
        if token.children:
            token.children = rewrite(token.children)
    return md.renderer.render(tokens, md.options, {})


def _read_csv(path: Path, offset: int, limit: int) -> dict[str, Any]:
    """Rows ``offset`` to ``offset + limit`` of a CSV table and its row count; a garbled
    file gives the rows read before the damage and a ``problem`` saying where. The whole
    file is read once per (path, mtime, size) for its row count; later pages stop reading
    at their last row."""
    csv.field_size_limit(1 << 24)
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    with _CACHE_LOCK:
        meta = _CSV_META.get(key)
    problem = None
    rows: list[list[str]] = []
    columns: list[str] = []
    total = 0
    end = offset + limit
    with path.open(encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.reader(fh)
        try:
            columns = next(reader, [])
            for total, row in enumerate(reader, 1):
                if offset < total <= end:
                    rows.append(row)
                elif total > end and meta is not None:
                    break  # the row count is known: stop at the page's end
        except csv.Error as err:
            problem = (f"{path.name}: not a well-formed CSV table near line "
                       f"{reader.line_num}: {err}")
    if meta is None:
        _remember(_CSV_META, key, (columns, total, problem))
    else:
        columns, total, problem = meta[0], meta[1], problem or meta[2]
    return {"columns": columns, "rows": rows, "total": total, "problem": problem}


def _read_parquet(path: Path, offset: int, limit: int) -> dict[str, Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SpecError(Problem("table", f"{path.name} is Parquet, which needs pyarrow; "
                                "install it: pip install 'aifabric[parquet]'")) from None
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises its own types for a garbled file
        return {"columns": [], "rows": [], "total": 0,
                "problem": f"{path.name}: not a readable Parquet file ({err})"}
    part = table.slice(offset, limit)
    cols = part.column_names
    data = [part.column(c).to_pylist() for c in cols]
    return {"columns": cols, "rows": [list(r) for r in zip(*data, strict=True)],
            "total": table.num_rows, "problem": None}


# ---------------------------------------------------------------- the API page
def _api_page(spec: dict[str, Any]) -> str:
    """A plain HTML page listing the OpenAPI document's endpoints (no script, no CDN)."""
    esc = html.escape
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
           f"<title>{esc(spec['info']['title'])} API</title><style>",
           "body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:60em}",
           "code{background:#f3f3f3;padding:0 .2em}h2{font-size:1.05em;margin:1.6em 0 .2em}",
           ".m{font-weight:bold;color:#06c;margin-right:.5em}td{padding:0 .8em 0 0;"
           "vertical-align:top}</style></head><body>",
           f"<h1>{esc(spec['info']['title'])} API</h1>",
           f"<p>{esc(spec['info'].get('description', ''))}</p>",
           "<p>The machine-readable description: <a href='openapi.json'>openapi.json</a> "
           "(OpenAPI " + esc(str(spec.get("openapi", ""))) + "). Errors answer "
           "<code>{\"error\": \"field: message\"}</code>.</p>"]
    for path, ops in spec.get("paths", {}).items():
        for method, op in ops.items():
            out.append(f"<h2><span class='m'>{esc(method.upper())}</span>"
                       f"<code>{esc(path)}</code> {esc(op.get('summary', ''))}</h2>")
            if op.get("description"):
                out.append(f"<p>{esc(op['description'])}</p>")
            params = op.get("parameters", [])
            body = op.get("requestBody")
            if params or body:
                out.append("<table>")
                for p in params:
                    schema = p.get("schema", {})
                    typ = schema.get("type") or "/".join(
                        s.get("type", "") for s in schema.get("anyOf", []))
                    req = " (required)" if p.get("required") else ""
                    out.append(f"<tr><td><code>{esc(p['name'])}</code></td>"
                               f"<td>{esc(p.get('in', ''))}{req}</td><td>{esc(typ)}</td>"
                               f"<td>{esc(p.get('description', ''))}</td></tr>")
                if body:
                    out.append("<tr><td><code>body</code></td><td>JSON</td>"
                               "<td colspan=2>see openapi.json</td></tr>")
                out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


# ---------------------------------------------------------------- headers
class _Guard:
    """Pure ASGI middleware: refuses a request whose ``Host`` header is not allowed (when
    a list is given), and puts security headers on every answer (nosniff, no referrer, no
    framing, no caching; the page's CSP unless the answer has its own)."""

    def __init__(self, app: Any, allowed_hosts: list[str] | None = None) -> None:
        self.app = app
        self.allowed = {h.lower() for h in allowed_hosts} if allowed_hosts else None

    def host_ok(self, scope: Any) -> bool:
        if self.allowed is None:
            return True
        raw = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1").lower()
        host = raw[: raw.index("]") + 1] if raw.startswith("[") and "]" in raw else \
            raw.rsplit(":", 1)[0] if raw.count(":") == 1 else raw
        return host in self.allowed

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def add(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                extra = [(b"x-content-type-options", b"nosniff"),
                         (b"referrer-policy", b"no-referrer"),
                         (b"x-frame-options", b"DENY"),
                         (b"cache-control", b"no-store"),
                         (b"content-security-policy", PAGE_CSP.encode())]
                headers += [(k, v) for k, v in extra if k not in names]
                message = {**message, "headers": headers}
            await send(message)

        if not self.host_ok(scope):
            await _error("host: this server answers only to its loopback address "
                         "(127.0.0.1, localhost, [::1])", 400)(scope, receive, add)
            return
        await self.app(scope, receive, add)


# ---------------------------------------------------------------- the app
def create_app(twin: Twin, *, allowed_hosts: list[str] | None = None) -> FastAPI:
    """The FastAPI application serving ``twin``.

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
    lock = threading.RLock()

    def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Response:
        with lock:
            return _json(fn(*args, **kwargs))

    # ------------------------------------------------------------ errors
    @app.exception_handler(SpecError)
    async def _spec_error(request: Request, err: SpecError) -> Response:
        text = "; ".join(str(p) for p in err.problems)
        return _error(text, 404 if isinstance(err, _NotFound) else 400)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, err: RequestValidationError) -> Response:
        parts = []
        for e in err.errors()[:5]:
            loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("query", "path",
                                                                         "body"))
            parts.append(f"{loc or 'request'}: {e.get('msg', 'invalid')}")
        return _error("; ".join(parts) or "invalid request", 400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> Response:
        detail = err.detail if isinstance(err.detail, str) else "error"
        if err.status_code == 404:
            detail = f"{request.url.path}: not found"
        return _error(detail, err.status_code)

    @app.exception_handler(Exception)
    async def _crash(request: Request, err: Exception) -> Response:
        return _error(f"internal error: {type(err).__name__}: {err}", 500)

    from aifabric.lab import LabError

    @app.exception_handler(LabError)
    async def _lab_error(request: Request, err: Exception) -> Response:
        return _error(f"lab: {err}", 503)

    # ------------------------------------------------------------ the page
    @app.get("/", include_in_schema=False)
    def index() -> Response:
        page = STATIC_DIR / "index.html"
        if not page.is_file():
            return _error("index.html: the package's static files are missing; "
                          "reinstall aifabric", 503)
        return FileResponse(page, media_type="text/html; charset=utf-8")

    app.mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")

    @app.get("/api", include_in_schema=False)
    def api_page() -> Response:
        return HTMLResponse(_api_page(app.openapi()),
                            headers={"content-security-policy": FILE_CSP})

    # ------------------------------------------------------------ the twin
    metric_q = Query(None, max_length=64, description="metric to colour by: bytes, flows, "
                     "utilization, queue_bytes, ecn_marks, pfc_pauses, drops (what "
                     "/api/info lists); default: the first")
    t_q = Query(-1, ge=-1, description="time step (index into info.times_ns); -1 = "
                "the whole run")
    fail_q = Query([], max_length=MAX_FAIL, description="fail this switch, port "
                   "`device:iface` or `link:<id>` (repeat for several)")

    @app.get("/api/info", response_model=InfoOut, summary="What is served",
             description="Mode (design, run or lab), the fabric's size, the views and "
             "metrics available, the time steps and what a run folder lacks.")
    def info() -> Response:
        return call(twin.info)

    @app.get("/api/topology", response_model=TopologyOut,
             summary="The fabric as aggregated groups",
             description="Hosts per segment, ToRs per segment and plane, aggs per pod, "
             "plane and group, cores per plane and group, laid out like the LLD, with "
             "link counts and the load of each group's links in each direction.")
    def topology(metric: str | None = metric_q, t: int = t_q,
                 level: str = Query("auto", pattern="^(auto|segment|pod)$",
                                    description="auto | segment | pod"),
                 fail: list[str] = fail_q) -> Response:
        return call(twin.topology, metric=metric, t=t, level=level, fail=_fail(fail))

    @app.get("/api/segment/{seg}", response_model=SegmentOut,
             summary="One segment: its ToRs, hosts and ports",
             description="Every ToR and host of the segment, one edge per access link "
             "(with port names, NIC and IP) and the ToR uplinks per agg group.")
    def segment(seg: int, metric: str | None = metric_q, t: int = t_q,
                fail: list[str] = fail_q) -> Response:
        try:
            return call(twin.segment, seg, metric=metric, t=t, fail=_fail(fail))
        except SpecError as err:
            if any(p.path == "segment" for p in err.problems):
                raise _NotFound(err.problems) from None
            raise

    @app.get("/api/search", response_model=list[SearchHit], summary="Find a name",
             description="A switch, host, GPU, NIC port, port `device:iface` or IP address; "
             "exact matches first.")
    def search(q: str = Query(..., min_length=1, max_length=MAX_NAME,
                              description="what to look for")) -> Response:
        return call(twin.search, q)

    @app.get("/api/heatmap", response_model=HeatmapOut, summary="Load per tier and link",
             description="Per tier and direction: mean (over all arcs, and over the "
             "active arcs, with a value > 0, as report.md gives it), p99 and max of the "
             "metric; the "
             "hottest links; the per-tier series over time.")
    def heatmap(metric: str | None = metric_q, t: int = t_q,
                k: int = Query(20, ge=1, le=1000, description="hottest links listed"),
                fail: list[str] = fail_q) -> Response:
        return call(twin.heatmap, metric=metric, t=t, k=k, fail=_fail(fail))

    @app.get("/api/traces", response_model=TracesOut, summary="What can be traced",
             description="The jobs, collectives and traffic patterns whose flows "
             "/api/trace draws.")
    def traces() -> Response:
        return call(twin.traces)

    @app.get("/api/trace", response_model=TraceOut, summary="The paths of some flows",
             description="The flows of a collective, a job, or between two GPUs: every arc "
             "they use (by the routing model) with its load, hop by hop, and the "
             "bottleneck link with the flows sharing it.")
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
              fail: list[str] = fail_q) -> Response:
        return call(twin.trace, collective=collective, job=job, src=src, dst=dst,
                    fail=_fail(fail), max_edges=max_edges)

    whatif_doc = ("Fail links or switches: the routing model re-routes every flow; the "
                  "answer says what moved, what became unreachable, and the load per tier "
                  "and hottest links before and after.")

    @app.post("/api/whatif", response_model=WhatifOut, summary="Fail something, re-route",
              description=whatif_doc)
    def whatif(body: WhatifIn = Body(...)) -> Response:
        return call(twin.whatif, _fail(body.fail))

    @app.get("/api/whatif", response_model=WhatifOut,
             summary="Fail something, re-route (for scripts)", description=whatif_doc)
    def whatif_get(fail: list[str] = fail_q) -> Response:
        return call(twin.whatif, _fail(fail))

    # ------------------------------------------------------------ the run folder
    @app.get("/api/run", response_model=RunOut, summary="The files of the run folder",
             description="Every file with its kind, report.md rendered (escaped), and "
             "what the folder lacks.")
    def run() -> Response:
        missing = list(getattr(twin, "missing", []) or [])
        root = twin.run_dir
        if root is None:
            return _json({"files": [], "report_html": "", "missing": missing})
        files = _run_files(root)
        report = _inside(root, "report.md")
        report_html = ""
        if report is not None:  # a route run has report.json instead (a table view)
            with report.open("rb") as fh:
                raw = fh.read(MAX_REPORT + 1)
            text = raw[:MAX_REPORT].decode("utf-8", errors="replace")
            if len(raw) > MAX_REPORT:
                text += f"\n\n*(report.md cut at {MAX_REPORT:,} bytes)*\n"
            report_html = _render_report(text)
        return _json({"files": files, "report_html": report_html, "missing": missing})

    @app.get("/api/run/table/{name:path}", response_model=TableOut,
             summary="A page of a table",
             description="Rows `offset` to `offset+limit` of a CSV or Parquet table of "
             "the run folder, named by its path in the folder (`links.csv`, "
             "`scenario-a/links`: sub-folders too, with or without the extension; only "
             "tables `/api/run` lists, so nothing outside the folder), as strings (CSV) "
             "or values (Parquet).")
    def run_table(name: str, offset: int = Query(0, ge=0),
                  limit: int = Query(100, ge=1, le=MAX_ROWS)) -> Response:
        root = twin.run_dir
        if root is None:
            raise _NotFound(Problem("table", "no run folder is served; allowed: "
                                    "aifabric serve RUN_DIR"))
        tables = [f["path"] for f in _run_files(root) if f["kind"] == "table"]
        path = next((p for p in tables if name in (p, p.rsplit(".", 1)[0])), None)
        if path is None:
            allowed = ", ".join(p.rsplit(".", 1)[0] for p in tables) or "none"
            raise _NotFound(Problem("table", f"{name!r} is not a table of the run; "
                                    f"allowed: {allowed}"))
        real = _inside(root, path)
        if real is None:  # removed since it was listed
            raise _NotFound(Problem("table", f"{path}: no longer in the run folder"))
        read = _read_parquet if real.suffix.lower() == ".parquet" else _read_csv
        return _json({"name": path, "offset": offset, **read(real, offset, limit)})

    @app.get("/files/{path:path}", summary="A file of the run folder",
             description="Only files inside the run folder: anything else (a path with "
             "`..`, an absolute path, a symlink leading outside) is 404.",
             responses={200: {"description": "the file",
                              "content": {"application/octet-stream": {}}}})
    def files(path: str) -> Response:
        root = twin.run_dir
        real = _inside(root, path) if root is not None else None
        if real is None:
            return _error(f"/files/{quote(path)}: not found", 404)
        media = _MEDIA.get(real.suffix.lower(), "text/plain; charset=utf-8")
        return FileResponse(real, media_type=media,
                            headers={"content-security-policy": FILE_CSP})

    # ------------------------------------------------------------ the lab
    @app.get("/api/lab", response_model=LabOut, summary="The running lab, live",
             description="Lab mode only: every link's state and rates (from counter "
                         "deltas since the previous call), BGP sessions, which "
                         "namespaces and daemons answer, the failures injected.")
    def lab() -> Response:
        if twin.mode != "lab":
            raise _NotFound(Problem("lab", f"this server shows a {twin.mode}, not a lab; "
                                    "allowed: aifabric serve --lab"))
        return call(twin.lab_state)

    app.add_middleware(_Guard, allowed_hosts=allowed_hosts)
    return app


def _fail(fail: list[str]) -> tuple[str, ...]:
    """The failure set of a request: each name once, in the order given."""
    if len(fail) > MAX_FAIL:
        raise SpecError(Problem("fail", f"{len(fail)} names; allowed: at most {MAX_FAIL}"))
    out: dict[str, None] = {}
    for name in fail:
        name = name.strip()
        if not name or len(name) > MAX_NAME or _CONTROL.search(name):
            raise SpecError(Problem("fail", f"{name[:40]!r} is not a name; allowed: a switch,"
                                    " a port device:iface or link:<id>, up to "
                                    f"{MAX_NAME} characters"))
        out[name] = None
    return tuple(out)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aifabric")
    except PackageNotFoundError:
        from aifabric import __version__

        return __version__
