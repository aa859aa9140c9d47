"""``/api/run`` (the run folder's files and its report), ``/api/run/table/{name}`` (a
page of one of its tables) and ``/files/{path}`` (one of its files, nothing outside
it: :func:`aifabric.web.runfolder.inside`)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, Response

from aifabric.errors import Problem
from aifabric.web.http import FILE_CSP, NotFound, error_response, json_response
from aifabric.web.models import RunOut, TableOut
from aifabric.web.routes.common import TwinCall
from aifabric.web.runfolder import (
    MAX_ROWS,
    MEDIA,
    inside,
    read_csv,
    read_parquet,
    report_html,
    run_files,
)

if TYPE_CHECKING:
    from aifabric.web.twin import Twin

__all__ = ["router"]


def router(twin: Twin, call: TwinCall) -> APIRouter:
    r = APIRouter()

    @r.get("/api/run", response_model=RunOut, summary="The files of the run folder",
           description="Every file with its kind, report.md rendered (escaped), and "
           "what the folder lacks.")
    def run() -> Response:
        missing = list(getattr(twin, "missing", []) or [])
        root = twin.run_dir
        if root is None:
            return json_response({"files": [], "report_html": "", "missing": missing})
        return json_response({"files": run_files(root), "report_html": report_html(root),
                              "missing": missing})

    @r.get("/api/run/table/{name:path}", response_model=TableOut,
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
            raise NotFound(Problem("table", "no run folder is served; allowed: "
                                   "aifabric serve RUN_DIR"))
        tables = [f["path"] for f in run_files(root) if f["kind"] == "table"]
        path = next((p for p in tables if name in (p, p.rsplit(".", 1)[0])), None)
        if path is None:
            allowed = ", ".join(p.rsplit(".", 1)[0] for p in tables) or "none"
            raise NotFound(Problem("table", f"{name!r} is not a table of the run; "
                                   f"allowed: {allowed}"))
        real = inside(root, path)
        if real is None:  # removed since it was listed
            raise NotFound(Problem("table", f"{path}: no longer in the run folder"))
        read = read_parquet if real.suffix.lower() == ".parquet" else read_csv
        return json_response({"name": path, "offset": offset, **read(real, offset, limit)})

    @r.get("/files/{path:path}", summary="A file of the run folder",
           description="Only files inside the run folder: anything else (a path with "
           "`..`, an absolute path, a symlink leading outside) is 404.",
           responses={200: {"description": "the file",
                            "content": {"application/octet-stream": {}}}})
    def files(path: str) -> Response:
        root = twin.run_dir
        real = inside(root, path) if root is not None else None
        if real is None:
            return error_response(f"/files/{quote(path)}: not found", 404)
        media = MEDIA.get(real.suffix.lower(), "text/plain; charset=utf-8")
        return FileResponse(real, media_type=media,
                            headers={"content-security-policy": FILE_CSP})

    return r
