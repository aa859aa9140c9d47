"""The page's static files, checked without a browser: offline (no URL off the server),
text-only data handling in app.js, and the vendored library with its license.

The browser tests (test_browser.py) check the same properties on the running page; these
run everywhere, also where Chromium is missing.
"""

from __future__ import annotations

import re

from aifabric.web.app import STATIC_DIR

OWN = ["index.html", "app.js", "app.css"]
#: an attribute or CSS/JS string that would make the browser fetch something
_FETCHING = re.compile(r"""(?:src|href|action)\s*=\s*["']([^"']*)["']|url\(\s*["']?([^"')]*)""",
                       re.IGNORECASE)


def test_static_files_are_shipped() -> None:
    for name in [*OWN, "favicon.svg", "vendor/cytoscape.min.js", "vendor/cytoscape.LICENSE",
                 "vendor/README.md"]:
        assert (STATIC_DIR / name).is_file(), name


def test_page_refers_only_to_its_own_server() -> None:
    """Every src/href/url() in our files is relative (no scheme, no //host, no data: script):
    the page works offline and never asks a CDN."""
    for name in OWN:
        text = (STATIC_DIR / name).read_text()
        for m in _FETCHING.finditer(text):
            url = m.group(1) or m.group(2) or ""
            assert not re.match(r"^([a-z][a-z0-9+.-]*:|//)", url, re.IGNORECASE) or \
                url.startswith("data:,"), (name, url)
        code = re.sub(r"<!--.*?-->|/\*.*?\*/", "", text, flags=re.DOTALL)
        assert "://" not in code, name
    html = re.sub(r"<!--.*?-->", "", (STATIC_DIR / "index.html").read_text(), flags=re.DOTALL)
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', html)
    assert scripts == ["static/vendor/cytoscape.min.js", "static/app.js"]
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "no inline script"
    assert not re.search(r"<[a-z][^>]*\son[a-z]+\s*=", html, re.IGNORECASE), "no inline handler"


def test_app_js_puts_data_in_as_text() -> None:
    """app.js inserts HTML in exactly one place, the server-rendered report, and says so
    in a comment just above; every other piece of data goes in through textContent."""
    js = (STATIC_DIR / "app.js").read_text()
    lines = js.splitlines()
    hits = [i for i, line in enumerate(lines) if re.search(r"\.(innerHTML|outerHTML)\s*=", line)]
    assert len(hits) == 1, hits
    i = hits[0]
    assert "rep.innerHTML = run.report_html" in lines[i]
    above = "\n".join(lines[max(0, i - 4):i])
    assert "//" in above and "report" in above and "escaped" in above
    for risky in ("insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert risky not in js, risky


def test_vendored_cytoscape_version_and_license() -> None:
    readme = (STATIC_DIR / "vendor" / "README.md").read_text()
    version = re.search(r"\| 3\.(\d+)\.(\d+) \|", readme)
    assert version, "vendor/README.md names the cytoscape version"
    v = "3." + version.group(1) + "." + version.group(2)
    assert v in (STATIC_DIR / "vendor" / "cytoscape.min.js").read_text()
    lic = (STATIC_DIR / "vendor" / "cytoscape.LICENSE").read_text()
    assert "Permission is hereby granted, free of charge" in lic  # MIT
    assert "Cytoscape Consortium" in lic
