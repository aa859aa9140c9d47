"""Fixtures shared by the telemetry tests: the real Prometheus parts.

- :func:`need_prometheus` skips (or, with ``AIFABRIC_REQUIRE_PROMETHEUS=1`` as ``.ci/run``
  sets, fails) when Debian's ``prometheus`` package (``prometheus`` + ``promtool``) is
  missing; the ``promtool`` fixture calls it and gives promtool's path.
- ``start_prometheus`` is a factory: ``start_prometheus(config=None, storage=None,
  args=())`` starts a real ``prometheus`` on 127.0.0.1 with a free port, a temporary (or
  the given) ``--storage.tsdb.path``, a long retention (so backfilled blocks of any date
  stay) and ``config`` (YAML text of prometheus.yml; default: no scrape jobs); waits
  (bounded, 30 s) until ``/-/ready``; returns a :class:`PromServer` (``url``, ``pid``,
  ``query(expr, time=None)`` -> the API's ``data.result`` list, ``get(path, **params)``
  -> the API's ``data``). Every server it started is stopped by its pid at teardown.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests._require import need

#: set to 1 (``.ci/run`` does) to turn a skip for lack of prometheus/promtool into a failure
REQUIRE_PROMETHEUS = "AIFABRIC_REQUIRE_PROMETHEUS"
#: how long a started server may take to become ready, seconds
READY_TIMEOUT_S = 30.0


def need_prometheus() -> tuple[str, str]:
    """Paths of ``promtool`` and ``prometheus``; skip (fail under CI) if either is missing."""
    __tracebackhide__ = True
    found = shutil.which("promtool"), shutil.which("prometheus")
    need("Debian's prometheus package (promtool, prometheus)", None not in found,
         "apt-get install prometheus", flag=REQUIRE_PROMETHEUS)
    return found  # type: ignore[return-value]


@pytest.fixture
def promtool() -> str:
    """The path of the real ``promtool`` (skips if missing, see :func:`need_prometheus`)."""
    return need_prometheus()[0]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PromServer:
    """A running ``prometheus`` started by ``start_prometheus``."""

    url: str
    proc: subprocess.Popen[bytes]
    storage: Path
    log: Path
    pid: int = field(init=False)

    def __post_init__(self) -> None:
        self.pid = self.proc.pid

    def get(self, path: str, **params: Any) -> Any:
        """GET ``/api/v1/<path>`` with ``params``; the answer's ``data`` (asserts success)."""
        q = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{q}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, time: float | None = None) -> list[dict[str, Any]]:
        """An instant query: the ``result`` list (each ``{"metric": {...}, "value": [t, "v"]}``)."""
        return self.get("query", query=expr, time=time)["result"]

    def stop(self) -> None:
        """Stop the server by its pid (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def start_prometheus(
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., PromServer]]:
    """Factory starting real ``prometheus`` servers on 127.0.0.1 (see the module docstring)."""
    _, binary = need_prometheus()
    started: list[PromServer] = []

    def start(config: str | None = None, storage: Path | None = None,
              args: tuple[str, ...] = ()) -> PromServer:
        work = tmp_path_factory.mktemp("prometheus")
        cfg = work / "prometheus.yml"
        cfg.write_text(config if config is not None else "global:\n  scrape_interval: 15s\n")
        storage = storage or work / "data"
        port = free_port()
        log = work / "prometheus.log"
        cmd = [binary, f"--config.file={cfg}", f"--storage.tsdb.path={storage}",
               f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y",
               "--web.enable-lifecycle", *args]
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=work)
        server = PromServer(f"http://127.0.0.1:{port}", proc, storage, log)
        started.append(server)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited ({proc.returncode}):\n"
                                     f"{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return server
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready in {READY_TIMEOUT_S} s:\n"
                                     f"{log.read_text()[-3000:]}")
            time.sleep(0.1)

    yield start
    for s in started:
        s.stop()
