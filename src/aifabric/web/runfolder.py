"""The files of a served run folder: which may be served (:func:`inside`: nothing
outside the folder, no hidden file), the listing, ``report.md`` rendered safely, and a
page of a CSV or Parquet table."""

from __future__ import annotations

import csv
import os
import posixpath
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from aifabric.errors import Problem, SpecError
from aifabric.web.http import CONTROL

__all__ = ["MAX_FILES", "MAX_REPORT", "MAX_ROWS", "MEDIA", "inside", "read_csv",
           "read_parquet", "render_report", "report_html", "report_url", "run_files"]

MAX_REPORT = 4 << 20    # bytes of report.md rendered
MAX_FILES = 5000        # files listed from a run folder
MAX_ROWS = 5000         # rows per table page

_TABLE_EXT = {".csv", ".parquet"}
_PLOT_EXT = {".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"}
#: the content type of a file sent from the run folder (others: plain text)
MEDIA = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg",
         ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
         ".csv": "text/csv; charset=utf-8", ".json": "application/json",
         ".parquet": "application/octet-stream"}
#: a URL's scheme (http:, mailto:)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
#: the schemes a report's links may keep (everything else: the text only)
_LINK_SCHEMES = {"http", "https", "mailto"}


def inside(root: Path, rel: str) -> Path | None:
    """The regular file ``rel`` names under ``root``, or None: absolute paths, ``..``,
    hidden names (an unfinished run's temporaries), control characters, and anything
    whose real path (symlinks resolved) leaves the folder are refused."""
    if not rel or len(rel) > 1024 or CONTROL.search(rel) or "\\" in rel:
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


def run_files(root: Path) -> list[dict[str, Any]]:
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
            real = inside(base, rel)
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


def report_url(url: str) -> str | None:
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
    if path.startswith("/") or CONTROL.search(path):
        return None
    norm = posixpath.normpath("files/" + path)
    if not norm.startswith("files/"):
        return None
    return quote(norm, safe="/") + rest


def render_report(text: str) -> str:
    """``report.md`` as HTML: raw HTML escaped (markdown-it's ``html`` off, its link
    validation refuses ``javascript:`` and the like), relative links and images pointed
    at ``/files/``; a link or image that would leave the run folder (or use another
    scheme than http, https, mailto) is rendered as its text only (:func:`report_url`)."""
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)

    def rewrite(children: list[Any]) -> list[Any]:
        out: list[Any] = []
        dropping = 0  # inside a dropped link (links do not nest; images inside them do)
        for tok in children:
            if tok.type == "link_open":
                url = report_url(str(tok.attrGet("href") or ""))
                if url is None:
                    dropping += 1
                    continue
                tok.attrSet("href", url)
            elif tok.type == "link_close" and dropping:
                dropping -= 1
                continue
            elif tok.type == "image":
                url = report_url(str(tok.attrGet("src") or ""))
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


def read_csv(path: Path, offset: int, limit: int) -> dict[str, Any]:
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


def read_parquet(path: Path, offset: int, limit: int) -> dict[str, Any]:
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


def report_html(root: Path) -> str:
    """``report.md`` of the run folder ``root`` rendered (at most :data:`MAX_REPORT`
    bytes); "" without one (a route run has report.json instead: a table view)."""
    report = inside(root, "report.md")
    if report is None:
        return ""
    with report.open("rb") as fh:
        raw = fh.read(MAX_REPORT + 1)
    text = raw[:MAX_REPORT].decode("utf-8", errors="replace")
    if len(raw) > MAX_REPORT:
        text += f"\n\n*(report.md cut at {MAX_REPORT:,} bytes)*\n"
    return render_report(text)
