"""The HTTP API of ``aifabric serve`` against a real server (the CLI in a subprocess,
uvicorn, the twin), spoken to over loopback with httpx, or with ``http.client`` where a
request must reach the server byte for byte (httpx would normalise ``..`` away).

What must hold: every endpoint of the contract is in ``/openapi.json`` with a summary and
no page loads anything from a CDN; only files under the run folder are served (``..``,
encoded ``..``, absolute paths, symlinks leading out: 404); a report or table with
hostile HTML comes back escaped; a malformed run folder answers 200 with ``missing``
filled in, never 500; unknown names are a 4xx one-line JSON error.
"""

from __future__ import annotations

import csv
import http.client
import json
import os
import posixpath
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import ROOT

HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"
SECRET = "TOP-SECRET-outside-the-run-folder"

#: the endpoints of the contract (docs/issue 14), method and OpenAPI path
CONTRACT = [("get", "/api/info"), ("get", "/api/topology"), ("get", "/api/segment/{seg}"),
            ("get", "/api/search"), ("get", "/api/heatmap"), ("get", "/api/traces"),
            ("get", "/api/trace"), ("post", "/api/whatif"), ("get", "/api/whatif"),
            ("get", "/api/run"), ("get", "/api/run/table/{name}"),
            ("get", "/files/{path}"), ("get", "/api/lab"), ("get", "/api/plane"),
            ("get", "/api/tor/{name}")]


def _simulate(work: Path, name: str) -> Path:
    """A real ``simulate --out`` run of a tiny HPN fabric, scenario named ``name``."""
    scen = work / "scenario.yaml"
    spec = ROOT / "tests" / "golden" / "hpn" / "spec.yaml"
    scen.write_text(f"name: {json.dumps(name)}\nspec: {spec}\ncollectives:\n"
                    "  - {op: allreduce, size_bytes: 1MiB, gpus: 8}\n", encoding="utf-8")
    out = work / "run"
    p = subprocess.run([sys.executable, "-m", "aifabric", "simulate", str(scen), "--out",
                        str(out)], capture_output=True, text=True, timeout=300, check=False,
                       cwd=work)
    assert p.returncode == 0, p.stderr
    return out


#: report.md links and images that would leave files/ (or use another scheme): an <img>
#: of ../api/whatif would fail a switch just by showing the Run tab
ESCAPES = ("![esc-img](../api/whatif?fail=tor-s00-r0-a) [esc-up](../api/info) "
           "[esc-enc](%2e%2e/api/info) [esc-bs](..\\\\api/info) [esc-abs](/api/info) "
           "[esc-proto](//example.com/x) [esc-ftp](ftp://example.com/x) "
           "[esc-deep](plots/../../api/info) [in-sub](plots/../links.csv) "
           "[in-web](https://example.com/) [in-mail](mailto:a@example.com)\n")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A real run whose scenario is named with HTML, its report given a script, a table
    with an HTML cell, and symlinks: one inside the folder, two leading out of it."""
    work = tmp_path_factory.mktemp("hostile")
    run = _simulate(work, f"{HOSTILE} hostile")
    with (run / "report.md").open("a", encoding="utf-8") as fh:
        fh.write(f"\n{SCRIPT}\n\n| a | b |\n|---|---|\n| {HOSTILE} | 2 |\n\n"
                 "[bad](javascript:alert(1)) [links](links.csv)\n\n" + ESCAPES)
    (run / "hostile.csv").write_text(f"name,value\n\"{HOSTILE}\",1\n\"{SCRIPT}\",2\n",
                                     encoding="utf-8")
    outside = work / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET, encoding="utf-8")
    (work / "secret.txt").write_text(SECRET, encoding="utf-8")
    (run / "leak.txt").symlink_to(work / "secret.txt")
    (run / "leakdir").symlink_to(outside, target_is_directory=True)
    (run / "inner.md").symlink_to("report.md")  # inside: served
    (run / ".hidden.csv").write_text("a\n1\n", encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def served(hostile, start_serve):
    return start_serve(hostile)


def _raw_get(url: str, path: str) -> tuple[int, str]:
    """GET ``path`` exactly as written (no client-side normalisation)."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def _one_line_error(r: httpx.Response) -> str:
    assert r.headers["content-type"].startswith("application/json"), r.text
    body = r.json()
    assert set(body) == {"error"}, body
    assert body["error"] and "\n" not in body["error"]
    assert "Traceback" not in body["error"]
    return body["error"]


# ---------------------------------------------------------------- the API is documented
def test_openapi_documents_every_endpoint_of_the_contract(served):
    spec = httpx.get(served.url + "openapi.json", timeout=30).json()
    for method, path in CONTRACT:
        op = spec["paths"].get(path, {}).get(method)
        assert op is not None, f"{method.upper()} {path} is not in openapi.json"
        assert op.get("summary"), f"{method.upper()} {path} has no summary"
        ok = op["responses"]["200"]
        if path.startswith("/api/"):  # JSON with a documented model
            schema = ok["content"]["application/json"]["schema"]
            assert "$ref" in schema or schema.get("type") == "array", (path, schema)
    # the JSON answers are documented down to their fields
    info = spec["components"]["schemas"]["InfoOut"]["properties"]
    assert {"mode", "name", "fabric", "metrics", "times_ns", "missing"} <= set(info)


def test_no_cdn_swagger_off_and_a_plain_api_page(served):
    for path in ("docs", "redoc"):  # Swagger UI / ReDoc would load from a CDN
        assert httpx.get(served.url + path, timeout=30).status_code == 404
    r = httpx.get(served.url + "api", timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "<script" not in page
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)  # nothing off the origin
    for _, path in CONTRACT:
        assert html_escape(path) in page


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def test_the_page_and_everything_it_loads_come_from_the_server(served):
    r = httpx.get(served.url, timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    refs = re.findall(r"(?:src|href)=\"([^\"]+)\"", r.text)
    assert any(ref.endswith("cytoscape.min.js") for ref in refs)
    for ref in refs:
        assert not re.match(r"^(https?:)?//", ref), ref
        got = httpx.get(served.url + ref, timeout=30)
        assert got.status_code == 200, ref


def test_the_modules_are_served_as_they_are_as_javascript(served):
    """Each ES module of static/js comes back byte for byte (no build step) with a
    JavaScript content type (a browser refuses to run a module script without one)."""
    from aifabric.web.app import STATIC_DIR

    modules = sorted((STATIC_DIR / "js").glob("*.js"))
    assert modules
    for path in modules:
        r = httpx.get(f"{served.url}static/js/{path.name}", timeout=30)
        assert r.status_code == 200, path.name
        assert r.headers["content-type"].split(";")[0] in ("text/javascript",
                                                           "application/javascript"), r.headers
        assert r.content == path.read_bytes()


# ---------------------------------------------------------------- only the run folder
@pytest.mark.parametrize("path", [
    "/files/../../etc/passwd",
    "/files/%2e%2e/%2e%2e/etc/passwd",
    "/files/..%2F..%2Fetc%2Fpasswd",
    "/files//etc/passwd",
    "/files/%2Fetc%2Fpasswd",
    "/files/leak.txt",              # symlink to a file outside
    "/files/leakdir/secret.txt",    # symlink to a folder outside
    "/files/../secret.txt",
    "/files/%2e%2e/secret.txt",
    "/files/run.json/../../secret.txt",
    "/files/no-such.csv",
    "/files/.hidden.csv",           # an unfinished run's temporaries are not served
    "/files/",
    "/static/../../etc/passwd",
    "/static/%2e%2e/app.py",        # the package's own source beside static/
    "/static/..%2Fapp.py",
])
def test_nothing_outside_the_run_folder_is_served(served, path):
    status, body = _raw_get(served.url, path)
    assert status == 404, (path, body[:200])
    assert SECRET not in body and "root:" not in body and "create_app" not in body


def test_an_absolute_path_is_refused_even_inside_the_run_folder(served, hostile):
    status, _ = _raw_get(served.url, "/files/" + str((hostile / "report.md").resolve()))
    assert status == 404


def test_files_inside_are_served_as_inert_content(served, hostile):
    r = httpx.get(served.url + "files/report.md", timeout=30)
    assert r.status_code == 200
    assert r.content == (hostile / "report.md").read_bytes()
    assert r.headers["content-type"].startswith("text/plain")  # its HTML never runs
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in r.headers["content-security-policy"]
    assert httpx.get(served.url + "files/inner.md", timeout=30).content == r.content
    png = httpx.get(served.url + "files/link_util_cdf.png", timeout=30)
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert png.content[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_listing_holds_what_files_serves(served):
    run = httpx.get(served.url + "api/run", timeout=30).json()
    paths = {f["path"]: f for f in run["files"]}
    assert "leak.txt" not in paths and not any(p.startswith("leakdir") for p in paths)
    assert paths["report.md"]["kind"] == "report"
    assert paths["links.csv"]["kind"] == "table"
    assert paths["link_util_cdf.png"]["kind"] == "plot"
    for f in run["files"]:
        r = httpx.get(served.url + "files/" + f["path"], timeout=30)
        assert r.status_code == 200 and len(r.content) == f["size"], f


# ---------------------------------------------------------------- escaping
def test_report_html_escapes_raw_html(served):
    run = httpx.get(served.url + "api/run", timeout=30).json()
    page = run["report_html"]
    assert "<script" not in page
    assert not re.search(r"<[^>]*onerror", page)  # no tag carries the handler
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt; hostile" in page  # the scenario's name
    assert "javascript:" not in page.split("&lt;")[0] and 'href="javascript' not in page
    # the report's own plots and links point at /files/ and load
    srcs = re.findall(r"<img src=\"([^\"]+)\"", page)
    assert srcs and all(s.startswith("files/") for s in srcs)
    for s in [*srcs, "files/links.csv"]:
        assert f'"{s}"' in page
        assert httpx.get(served.url + s, timeout=30).status_code == 200


def test_report_links_never_leave_the_run_folder(served):
    """A hostile report.md's links and images that leave files/ (``..``, encoded or
    backslashed, absolute, protocol-relative) or use another scheme than http(s)/mailto
    are rendered as their text only; the others stay, normalised under files/."""
    page = httpx.get(served.url + "api/run", timeout=30).json()["report_html"]
    hrefs = re.findall(r"(?:href|src)=\"([^\"]*)\"", page)
    assert hrefs
    for h in hrefs:
        if h.startswith(("https:", "mailto:", "#")):
            continue
        assert h.startswith("files/") and ".." not in h and "%2e" not in h.lower(), h
        assert posixpath.normpath(h).startswith("files/"), h
    for text in ("esc-img", "esc-up", "esc-enc", "esc-bs", "esc-abs", "esc-proto",
                 "esc-ftp", "esc-deep"):
        assert text in page  # the text stays
        assert not re.search(rf"<a [^>]*>{text}</a>|alt=\"{text}\"", page), text
    assert "api/whatif" not in page and "example.com/x" not in page
    assert '<a href="files/links.csv">in-sub</a>' in page
    assert '<a href="https://example.com/">in-web</a>' in page
    assert '<a href="mailto:a@example.com">in-mail</a>' in page


def test_tables_come_back_as_json_text(served):
    r = httpx.get(served.url + "api/run/table/hostile", timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["x-content-type-options"] == "nosniff"
    t = r.json()
    assert t["columns"] == ["name", "value"]
    assert t["rows"] == [[HOSTILE, "1"], [SCRIPT, "2"]]
    assert t["total"] == 2


def test_table_pages_add_up_to_the_file(served, hostile):
    lines = (hostile / "links.csv").read_text().splitlines()
    n = len(lines) - 1
    first = httpx.get(served.url + "api/run/table/links?limit=3", timeout=30).json()
    assert first["total"] == n and first["columns"] == lines[0].split(",")
    rest = httpx.get(served.url + f"api/run/table/links.csv?offset=3&limit={n}",
                     timeout=30).json()
    rows = first["rows"] + rest["rows"]
    assert [",".join(r) for r in rows] == lines[1:]
    past = httpx.get(served.url + f"api/run/table/links?offset={n + 5}", timeout=30).json()
    assert past["rows"] == [] and past["total"] == n


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """A real ``aifabric compare --out`` folder (two cheap scenarios, analytic): one
    sub-folder of tables per scenario; one of them given a symlink to a CSV outside."""
    work = tmp_path_factory.mktemp("compare")
    spec = ROOT / "tests" / "golden" / "hpn" / "spec.yaml"
    for n in "ab":
        (work / f"{n}.yaml").write_text(f"name: sc-{n}\nspec: {spec}\ncollectives:\n"
                                        "  - {op: allreduce, size_bytes: 1MiB, gpus: 8}\n",
                                        encoding="utf-8")
    out = work / "cmp"
    p = subprocess.run([sys.executable, "-m", "aifabric", "compare", str(work / "a.yaml"),
                        str(work / "b.yaml"), "--sim", "analytic", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, check=False, cwd=work)
    assert p.returncode == 0, p.stderr
    (work / "outside.csv").write_text(f"secret\n{SECRET}\n", encoding="utf-8")
    (out / "sc-a" / "leak.csv").symlink_to(work / "outside.csv")
    return out


def test_tables_in_sub_folders_are_served_and_nothing_outside(compared, start_serve):
    """compare (and demo) write a sub-folder per scenario: /api/run lists their tables
    and /api/run/table/{path} serves them (with or without the extension), by the same
    rule as /files: only what is inside the run folder."""
    served = start_serve(compared)
    run = httpx.get(served.url + "api/run", timeout=30).json()
    tables = {f["path"] for f in run["files"] if f["kind"] == "table"}
    assert {"sc-a/links.csv", "sc-b/links.csv", "sc-b/jobs.csv"} <= tables
    assert "sc-a/leak.csv" not in tables
    for path in ("sc-a/links.csv", "sc-b/jobs.csv"):
        with (compared / path).open(newline="", encoding="utf-8") as fh:
            lines = list(csv.reader(fh))
        for name in (path, path.removesuffix(".csv")):
            r = httpx.get(served.url + "api/run/table/" + name, params={"limit": 5000},
                          timeout=30)
            assert r.status_code == 200, r.text
            t = r.json()
            assert t["name"] == path and t["columns"] == lines[0]
            assert t["rows"] == lines[1:] and t["total"] == len(lines) - 1
    for bad in ("/api/run/table/sc-a/leak.csv", "/api/run/table/sc-a/leak",
                "/api/run/table/sc-a/../sc-b/links.csv", "/api/run/table/../outside.csv",
                "/api/run/table/sc-a%2F..%2F..%2Foutside.csv",
                "/api/run/table/" + str((compared / "sc-a" / "links.csv").resolve()),
                "/api/run/table/sc-c/links.csv"):
        status, body = _raw_get(served.url, bad)
        assert status == 404, (bad, body[:200])
        assert SECRET not in body


def test_the_twin_name_is_data_not_markup(served):
    info = httpx.get(served.url + "api/info", timeout=30).json()
    assert HOSTILE in info["name"]  # as text, in JSON; the page sets it with textContent


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(("method", "path", "status", "field"), [
    ("get", "api/segment/9999", 404, "segment"),
    ("get", "api/segment/-1", 404, "segment"),
    ("get", "api/segment/abc", 400, "seg"),
    ("get", "api/topology?metric=no-such-metric", 400, "metric"),
    ("get", "api/heatmap?metric=no-such-metric", 400, "metric"),
    ("get", "api/topology?fail=no-such-switch", 400, "fail"),
    ("get", "api/topology?t=abc", 400, "t"),
    ("get", "api/topology?t=99999", 400, "t"),
    ("get", "api/topology?level=galaxy", 400, "level"),
    ("get", "api/heatmap?k=0", 400, "k"),
    ("get", "api/trace?collective=no-such-collective", 400, "collective"),
    ("get", "api/trace?src=no-such-gpu&dst=nope", 400, "src"),
    ("get", "api/whatif?fail=no-such-switch", 400, "fail"),
    ("get", "api/search?q=", 400, "q"),
    ("get", "api/search?q=%00", 400, "q"),  # numpy drops a NUL: it matched every name
    ("get", "api/search?q=tor%00", 400, "q"),
    ("get", "api/search?q=tor%1b", 400, "q"),
    ("get", "api/search?q=%7f", 400, "q"),
    ("get", "api/run/table/no-such-table", 404, "table"),
    ("get", "api/run/table/..%2F..%2Fetc%2Fpasswd", 404, ""),
    ("get", "api/lab", 404, "lab"),
    ("get", "api/no-such-endpoint", 404, ""),
    ("post", "api/info", 405, ""),
])
def test_bad_requests_are_one_line_json(served, method, path, status, field):
    r = httpx.request(method.upper(), served.url + path, timeout=30)
    assert r.status_code == status, r.text
    msg = _one_line_error(r)
    if field:
        assert msg.startswith(f"{field}") or f" {field}" in msg, msg


def test_whatif_post_refuses_unknown_names_and_bad_bodies(served):
    r = httpx.post(served.url + "api/whatif", json={"fail": ["no-such-switch"]}, timeout=30)
    assert r.status_code == 400 and "no-such-switch" in _one_line_error(r)
    r = httpx.post(served.url + "api/whatif", json={"fail": "tor"}, timeout=30)
    assert r.status_code == 400 and _one_line_error(r).startswith("fail")
    r = httpx.post(served.url + "api/whatif", content=b"{not json", timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 400
    _one_line_error(r)


def test_whatif_answers_for_a_real_switch(served):
    """The control beside the refusals: a ToR of the run's fabric fails and flows move."""
    hits = httpx.get(served.url + "api/search?q=tor-s00", timeout=30).json()
    tor = next(h["name"] for h in hits if h["kind"] == "tor")
    r = httpx.post(served.url + "api/whatif", json={"fail": [tor]}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["fail"] == [tor] and body["links_down"] > 0
    get = httpx.get(served.url + "api/whatif", params={"fail": tor}, timeout=60).json()
    assert get["flows"] == body["flows"]


def test_a_foreign_host_header_is_refused(served):
    """DNS rebinding: a page elsewhere that resolves its name to 127.0.0.1 is refused."""
    r = httpx.get(served.url + "api/info", headers={"host": "evil.example"}, timeout=30)
    assert r.status_code == 400
    assert _one_line_error(r).startswith("host")
    port = urlsplit(served.url).port
    ok = httpx.get(served.url + "api/info", headers={"host": f"localhost:{port}"},
                   timeout=30)
    assert ok.status_code == 200


# ---------------------------------------------------------------- a malformed run folder
@pytest.fixture(scope="module")
def malformed(tmp_path_factory, start_serve):
    """Empty tables, a header-only table, garbage bytes as CSV, no report, no run.json."""
    run = tmp_path_factory.mktemp("malformed") / "run"
    run.mkdir()
    (run / "links.csv").write_bytes(b"")
    (run / "timeline.csv").write_text("start_ns,end_ns,access_up_util\n", encoding="utf-8")
    (run / "transfers.csv").write_bytes(bytes(range(256)) * 40 + b'\n"unclosed,\x00\n')
    (run / "collectives.csv").write_text("what,ever\n1,2,3,4\n\"x", encoding="utf-8")
    (run / "notes.txt").write_text(SCRIPT, encoding="utf-8")
    return start_serve(run)


def test_a_malformed_run_folder_says_what_is_missing(malformed):
    info = httpx.get(malformed.url + "api/info", timeout=30)
    assert info.status_code == 200
    missing = info.json()["missing"]
    assert missing and any("report" in m for m in missing), missing
    run = httpx.get(malformed.url + "api/run", timeout=30)
    assert run.status_code == 200
    body = run.json()
    assert body["missing"] == missing and body["report_html"] == ""
    assert {f["path"] for f in body["files"]} == {"links.csv", "timeline.csv",
                                                  "transfers.csv", "collectives.csv",
                                                  "notes.txt"}


@pytest.mark.parametrize("path", [
    "api/info", "api/run", "api/topology", "api/segment/0", "api/heatmap", "api/traces",
    "api/trace?collective=0", "api/search?q=tor", "api/whatif?fail=tor-s00-r0-a",
    "api/lab", "api/run/table/links", "api/run/table/timeline", "api/run/table/transfers",
    "api/run/table/collectives", "files/notes.txt", "files/transfers.csv", "", "api",
    "openapi.json"])
def test_a_malformed_run_folder_never_gives_500(malformed, path):
    r = httpx.get(malformed.url + path, timeout=30)
    assert r.status_code < 500, (path, r.status_code, r.text[:300])
    if r.status_code >= 400:
        _one_line_error(r)


def test_garbled_tables_give_their_readable_part(malformed):
    t = httpx.get(malformed.url + "api/run/table/timeline", timeout=30).json()
    assert t["columns"] == ["start_ns", "end_ns", "access_up_util"] and t["total"] == 0
    e = httpx.get(malformed.url + "api/run/table/links", timeout=30).json()
    assert e["columns"] == [] and e["rows"] == [] and e["total"] == 0
    g = httpx.get(malformed.url + "api/run/table/transfers", timeout=30)
    assert g.status_code == 200
    body = g.json()
    assert body["problem"] is None or "transfers.csv" in body["problem"]
    c = httpx.get(malformed.url + "api/run/table/collectives", timeout=30).json()
    assert c["columns"] == ["what", "ever"] and c["rows"][0] == ["1", "2", "3", "4"]


def test_the_run_folder_is_never_written(hostile, served):
    """Serving reads: nothing appears in (or vanishes from) the run folder."""
    before = sorted(os.listdir(hostile))
    httpx.get(served.url + "api/run", timeout=30)
    httpx.get(served.url + "api/heatmap", timeout=30)
    assert sorted(os.listdir(hostile)) == before


# ---------------------------------------------------------------- caches
def test_the_run_listing_is_cached_until_a_folder_changes(tmp_path):
    """The run folder is walked once; the listing is reused while no directory's mtime
    changed (a file slipped in with the mtime put back is not seen: proof of the
    cache), and walked again once one changed."""
    from aifabric.web.runfolder import run_files

    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "a.csv").write_text("x\n1\n")
    (run / "sub" / "b.png").write_bytes(b"png")
    first = run_files(run)
    assert [f["path"] for f in first] == ["a.csv", "sub/b.png"]
    st = os.stat(run / "sub")
    (run / "sub" / "c.csv").write_text("y\n2\n")
    os.utime(run / "sub", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run_files(run) == first  # cached: not walked again
    os.utime(run / "sub", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert [f["path"] for f in run_files(run)] == ["a.csv", "sub/b.png", "sub/c.csv"]
    (run / "a.csv").unlink()
    assert [f["path"] for f in run_files(run)] == ["sub/b.png", "sub/c.csv"]


def test_a_csv_tables_row_count_is_read_once_per_version(tmp_path):
    """The row count is counted once per (path, mtime, size); later pages stop at their
    last row (a tail changed with mtime and size kept is not re-read); a new version of
    the file is read again."""
    from aifabric.web.runfolder import read_csv

    p = tmp_path / "t.csv"
    p.write_text("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(1000)))
    st = os.stat(p)
    page = read_csv(p, 10, 5)
    assert page["total"] == 1000 and page["rows"][0] == ["10", "20"] and not page["problem"]
    raw = bytearray(p.read_bytes())
    raw[-40:] = b'"' + b"x" * 38 + b"\n"  # the tail: an unclosed quote, same size
    p.write_bytes(bytes(raw))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = read_csv(p, 20, 5)
    assert again["total"] == 1000 and again["rows"][0] == ["20", "40"]
    assert again["problem"] is None  # the tail was not read: the count came from the cache
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    fresh = read_csv(p, 20, 5)
    assert fresh["rows"][0] == ["20", "40"] and fresh["total"] < 1000
