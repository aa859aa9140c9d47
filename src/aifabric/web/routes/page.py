"""The page: ``/`` (index.html), ``/static/...`` (its scripts, styles and the vendored
cytoscape.js, shipped in the package) and ``/api``, the endpoints listed as plain HTML
from the OpenAPI document (FastAPI's ``/docs`` and ``/redoc`` would load a CDN)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from aifabric.web.http import FILE_CSP, error_response

__all__ = ["STATIC_DIR", "mount_static", "router"]

#: the page and its scripts, shipped in the package (see pyproject's package-data)
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"


def router() -> APIRouter:
    """``/`` and ``/api`` (neither in the OpenAPI document)."""
    r = APIRouter()

    @r.get("/", include_in_schema=False)
    def index() -> Response:
        page = STATIC_DIR / "index.html"
        if not page.is_file():
            return error_response("index.html: the package's static files are missing; "
                                  "reinstall aifabric", 503)
        return FileResponse(page, media_type="text/html; charset=utf-8")

    @r.get("/api", include_in_schema=False)
    def api_page(request: Request) -> Response:
        return HTMLResponse(_api_page(request.app.openapi()),
                            headers={"content-security-policy": FILE_CSP})

    return r


def mount_static(app: FastAPI) -> None:
    """``/static/...``: the files of :data:`STATIC_DIR` as they are (no build step)."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")


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

