"""Fixtures of the web tests: a real ``aifabric serve`` and a real headless Chromium.

- :func:`serve` starts ``aifabric serve ARGS --listen 127.0.0.1:0`` as a subprocess (the
  real CLI, uvicorn and all), reads the URL it prints and returns a :class:`Served`; the
  ``start_serve`` fixture is a module-scoped factory so a module's tests share a server,
  and stops every server it started by its pid at teardown.
- :func:`need_browser` skips (or, with ``AIFABRIC_REQUIRE_BROWSER=1`` as ``.ci/run``
  sets, fails) when Debian's ``chromium`` or the ``playwright`` package is missing. The
  ``browser`` fixture launches that system Chromium through Playwright's sync API
  (``executable_path``; Playwright's own browser downloads are never used).
- :func:`open_page` opens a page that records every request, console error and page
  error, so a test can check the page stays on its origin and logs no error.
- ``shots``: the folder of the screenshots (``AIFABRIC_SCREENSHOTS`` or a temporary one),
  printed so a run says where they are.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests._require import need

#: set to 1 (``.ci/run`` does) to turn a skip for lack of chromium/playwright into a failure
REQUIRE_BROWSER = "AIFABRIC_REQUIRE_BROWSER"
#: how long ``aifabric serve`` may take to print its URL (it builds and routes the fabric)
SERVE_TIMEOUT_S = 90.0
_URL = re.compile(r"http://127\.0\.0\.1:(\d+)/")


def need_browser() -> str:
    """The path of the system Chromium, after checking Playwright imports; skip (fail
    under CI) when either is missing."""
    __tracebackhide__ = True
    path = shutil.which("chromium")
    need("Debian's chromium", path is not None, "apt-get install chromium", flag=REQUIRE_BROWSER)
    try:
        import playwright.sync_api  # noqa: F401
        found = True
    except ImportError:
        found = False
    need("the playwright package", found, "pip install playwright; no browser download",
         flag=REQUIRE_BROWSER)
    return path  # type: ignore[return-value]


@dataclass
class Served:
    """A running ``aifabric serve`` started by :func:`serve`."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    pid: int = field(init=False)

    def __post_init__(self) -> None:
        self.pid = self.proc.pid

    def get(self, path: str) -> Any:
        """GET ``<url><path>`` and decode its JSON."""
        import json

        with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=30) as r:
            return json.load(r)

    def stop(self) -> None:
        """Stop the server by its pid (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def serve(args: list[str], work: Path) -> Served:
    """Start ``aifabric serve ARGS --listen 127.0.0.1:0`` and wait (bounded) for its URL."""
    log = work / "serve.log"
    cmd = [sys.executable, "-m", "aifabric", "serve", *args, "--listen", "127.0.0.1:0"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=work)
    served: Served | None = None
    try:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while served is None:
            m = _URL.search(log.read_text(errors="replace"))
            if m:
                served = Served(m.group(0), proc, log)
                break
            if proc.poll() is not None:
                raise AssertionError(f"aifabric serve exited ({proc.returncode}):\n"
                                     f"{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"aifabric serve printed no URL in {SERVE_TIMEOUT_S} s:\n"
                                     f"{log.read_text()[-3000:]}")
            time.sleep(0.1)
        # the URL is printed once uvicorn listens; one request proves it answers
        served.get("api/info")
        return served
    except BaseException:
        (served or Served("", proc, log)).stop()
        raise


@pytest.fixture(scope="module")
def start_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Served]]:
    """Factory: ``start_serve(*args)`` -> a running server for this module's tests."""
    started: list[Served] = []

    def start(*args: str | Path) -> Served:
        s = serve([str(a) for a in args], tmp_path_factory.mktemp("serve"))
        started.append(s)
        return s

    try:
        yield start
    finally:
        for s in started:
            s.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless system Chromium driven by Playwright (one per test module)."""
    path = need_browser()
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=path, headless=True)
        try:
            yield b
        finally:
            b.close()
    finally:
        pw.stop()


@dataclass
class Probe:
    """A page and what it did: every request URL, console errors, page errors."""

    page: Any
    origin: str
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    #: seconds from ``goto`` until the page said it is ready (wall clock)
    ready_wall_s: float = 0.0

    def foreign(self) -> list[str]:
        """Requests that left the server's origin."""
        return [u for u in self.requests if not u.startswith(self.origin)]

    def assert_clean(self) -> None:
        """No console error, no uncaught page error, no request off the origin."""
        assert self.page_errors == [], self.page_errors
        assert self.console_errors == [], self.console_errors
        assert self.foreign() == [], self.foreign()


def open_page(browser: Any, served: Served, *, hash: str = "") -> Probe:
    """A new page on ``served`` (1400x900) recording requests and errors; loads the page
    and waits (bounded, 60 s: a first load on a loaded machine once took over 20 s) until
    ``document.body.dataset.ready`` is set."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    probe = Probe(page, served.url.rstrip("/"))
    page.on("request", lambda r: probe.requests.append(r.url))
    page.on("console", lambda m: probe.console_errors.append(m.text) if m.type == "error"
            else None)
    page.on("pageerror", lambda e: probe.page_errors.append(str(e)))
    page.set_default_timeout(20_000)
    t0 = time.monotonic()
    page.goto(served.url + (f"#{hash}" if hash else ""))
    page.wait_for_function("() => document.body.dataset.ready !== undefined",
                           timeout=60_000)
    probe.ready_wall_s = time.monotonic() - t0
    assert page.evaluate("document.body.dataset.ready") == "1", (
        page.text_content("#error"), probe.console_errors)
    return probe


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go (``AIFABRIC_SCREENSHOTS`` or a temporary folder)."""
    env = os.environ.get("AIFABRIC_SCREENSHOTS")
    folder = Path(env) if env else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {folder}")
    return folder
