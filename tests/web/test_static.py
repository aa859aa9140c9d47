"""The page's static files, checked without a browser: offline (no URL off the server),
ES modules that import only each other (no build step, no bare or remote specifier),
text-only data handling in every module, and the vendored library with its license.

The browser tests (test_browser.py) check the same properties on the running page; these
run everywhere, also where Chromium is missing.
"""

from __future__ import annotations

import re

from aifabric.web.app import STATIC_DIR

#: ``import {a, b} from "./x.js";`` (the only import form the modules use)
_IMPORT = re.compile(r'^import \{([^}]*)\} from "([^"]*)";$', re.MULTILINE)

#: the page's own modules (static/js), served as they are
MODULES = sorted(p.relative_to(STATIC_DIR).as_posix() for p in (STATIC_DIR / "js").glob("*.js"))
OWN = ["index.html", "app.css", *MODULES]
#: an attribute or CSS/JS string that would make the browser fetch something
_FETCHING = re.compile(r"""(?:src|href|action)\s*=\s*["']([^"']*)["']|url\(\s*["']?([^"')]*)""",
                       re.IGNORECASE)


def test_static_files_are_shipped() -> None:
    assert "js/main.js" in MODULES and len(MODULES) > 5
    for name in [*OWN, "favicon.svg", "vendor/cytoscape.min.js", "vendor/cytoscape.LICENSE",
                 "vendor/README.md"]:
        assert (STATIC_DIR / name).is_file(), name
    assert not (STATIC_DIR / "app.js").exists()  # replaced by the modules


def test_modules_import_only_each_other_and_all_are_used() -> None:
    """Every import is ``./name.js`` of a module beside it that exports each name (no
    bare specifier a build step would resolve, no URL, no dynamic import); every module
    is reached from main.js, and none imports itself."""
    exports: dict[str, set[str]] = {}
    imports: dict[str, dict[str, set[str]]] = {}
    for name in MODULES:
        js = (STATIC_DIR / name).read_text()
        exports[name] = set(re.findall(r"^export (?:async function|function|const|let|class) "
                                       r"([A-Za-z_$][\w$]*)", js, re.MULTILINE))
        assert not re.search(r"\bimport\s*\(", js), (name, "dynamic import")
        assert len(re.findall(r"^import\b", js, re.MULTILINE)) == len(_IMPORT.findall(js)), name
        imports[name] = {}
        for names, spec in _IMPORT.findall(js):
            assert re.fullmatch(r"\./[a-z]+\.js", spec), (name, spec)
            target = "js/" + spec[2:]
            assert target in MODULES and target != name, (name, spec)
            imports[name][target] = {n.strip() for n in names.split(",") if n.strip()}
    for name, targets in imports.items():
        for target, names in targets.items():
            assert names <= exports[target], (name, target, names - exports[target])
    seen, todo = set(), ["js/main.js"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += list(imports[m])
    assert seen == set(MODULES), set(MODULES) - seen


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
    assert scripts == ["static/vendor/cytoscape.min.js", "static/js/main.js"]
    # cytoscape is a classic deferred script: it runs before the (deferred) module
    assert re.search(r'<script src="static/vendor/cytoscape.min.js" defer>', html)
    assert re.search(r'<script type="module" src="static/js/main.js">', html)
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


def test_modules_put_data_in_as_text() -> None:
    """The modules insert HTML in exactly one place, the server-rendered report (run.js),
    and say so in a comment just above; every other piece of data goes in through
    textContent."""
    hits = [(name, i, line) for name in MODULES
            for i, line in enumerate((STATIC_DIR / name).read_text().splitlines())
            if _HTML_SINK.search(line)]
    assert len(hits) == 1, hits
    name, i, _ = hits[0]
    assert name == "js/run.js"
    lines = (STATIC_DIR / name).read_text().splitlines()
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
