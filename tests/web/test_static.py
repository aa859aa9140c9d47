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


#: every way a script can turn a string into markup (or code): assignments to
#: innerHTML/outerHTML (=, +=, ||= ...; dotted or bracketed), insertAdjacentHTML,
#: setHTML(Unsafe), Range.createContextualFragment, an iframe's srcdoc,
#: document.write(ln), DOMParser.parseFromString, eval and new Function
_HTML_SINK = re.compile(
    r"""(?:\.|\[\s*["'`])(?:inner|outer)HTML(?:["'`]\s*\])?\s*(?:\+|-|\|\||&&|\?\?)?=(?!=)"""
    r"""|\binsertAdjacentHTML\b|\bsetHTML(?:Unsafe)?\b|\bcreateContextualFragment\b"""
    r"""|\bsrcdoc\b|\bdocument\s*\.\s*write(?:ln)?\b|\bparseFromString\b"""
    r"""|\beval\s*\(|\bnew\s+Function\b""")


def test_the_sink_pattern_catches_every_way_to_insert_html() -> None:
    """The check below can fail: each of these lines is caught, the safe ones are not."""
    caught = ["el.innerHTML = x;", "el.innerHTML += x;", "el.outerHTML = x;",
              "el.innerHTML ||= x;", "el['innerHTML'] = x;", 'el["outerHTML"] += x;',
              "el.insertAdjacentHTML('beforeend', x);", "el.setHTML(x);",
              "el.setHTMLUnsafe(x);", "range.createContextualFragment(x);",
              "frame.srcdoc = x;", "frame.setAttribute('srcdoc', x);",
              "document.write(x);", "document.writeln(x);",
              "new DOMParser().parseFromString(x, 'text/html');", "eval(x);",
              "new Function(x);"]
    for line in caught:
        assert _HTML_SINK.search(line), line
    for line in ("el.textContent = x;", "if (el.innerHTML === '') {}", "const html = 1;"):
        assert not _HTML_SINK.search(line), line


def test_app_js_puts_data_in_as_text() -> None:
    """app.js inserts HTML in exactly one place, the server-rendered report, and says so
    in a comment just above; every other piece of data goes in through textContent."""
    js = (STATIC_DIR / "app.js").read_text()
    lines = js.splitlines()
    hits = [i for i, line in enumerate(lines) if _HTML_SINK.search(line)]
    assert len(hits) == 1, [lines[i] for i in hits]
    i = hits[0]
    assert "rep.innerHTML = run.report_html" in lines[i]
    above = "\n".join(lines[max(0, i - 4):i])
    assert "//" in above and "report" in above and "escaped" in above
    html = (STATIC_DIR / "index.html").read_text()
    assert not _HTML_SINK.search(html) and "srcdoc" not in html


def test_vendored_cytoscape_version_and_license() -> None:
    readme = (STATIC_DIR / "vendor" / "README.md").read_text()
    version = re.search(r"\| 3\.(\d+)\.(\d+) \|", readme)
    assert version, "vendor/README.md names the cytoscape version"
    v = "3." + version.group(1) + "." + version.group(2)
    assert v in (STATIC_DIR / "vendor" / "cytoscape.min.js").read_text()
    lic = (STATIC_DIR / "vendor" / "cytoscape.LICENSE").read_text()
    assert "Permission is hereby granted, free of charge" in lic  # MIT
    assert "Cytoscape Consortium" in lic
