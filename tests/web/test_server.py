"""The server under load and abuse (issue 30, item 7): a request body over the limit is
refused while it streams in (413, the server's memory does not grow by the body), and a
read is answered while a what-if is still routing."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

SPEC = ROOT / "tests" / "golden" / "hpn" / "spec.yaml"
MIB = 1 << 20


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _post_raw(url: str, path: str, headers: list[str], chunks: Any) -> tuple[int, str]:
    """POST by hand on a socket: the headers, then ``chunks`` sent from a thread (the
    server may answer before the body ends); the status and body of the answer."""
    host, port = url.split("//", 1)[1].rstrip("/").split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    head = "\r\n".join([f"POST {path} HTTP/1.1", f"Host: {host}", *headers, "", ""])
    s.sendall(head.encode())

    def send() -> None:
        try:
            for c in chunks:
                s.sendall(c)
        except OSError:
            pass  # the server closed after answering: fine

    t = threading.Thread(target=send, daemon=True)
    t.start()
    data = b""
    try:
        while b"\r\n\r\n" not in data or not _complete(data):
            got = s.recv(65536)
            if not got:
                break
            data += got
    finally:
        t.join(timeout=60)
        s.close()
    head_b, _, body = data.partition(b"\r\n\r\n")
    status = int(head_b.split(b" ", 2)[1])
    return status, body.decode()


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False



@pytest.fixture(scope="module")
def served(start_serve):
    return start_serve(SPEC)


@pytest.fixture(scope="module")
def small(start_serve):
    return start_serve(SPEC, "--max-body", "100B")


def _error(body: str) -> str:
    assert "\n" not in body.strip()
    return json.loads(body)["error"]


def test_a_body_over_content_length_limit_is_413_unread(served):
    status, body = _post_raw(served.url, "/api/whatif",
                             ["Content-Type: application/json",
                              f"Content-Length: {64 * MIB}"], iter([b"x" * MIB] * 4))
    assert status == 413
    err = _error(body)
    assert err.startswith("body: ") and str(MIB) in err


def test_a_chunked_body_over_the_limit_is_413_and_memory_does_not_grow(served):
    """64 MiB chunked (no Content-Length): refused once past 1 MiB; the server's resident
    memory grows by far less than the body (the issue's 191 MB body cost +276 MB)."""
    served.get("api/info")
    before = _rss_bytes(served.pid)
    chunk = b"[" * (256 * 1024)
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    t0 = time.monotonic()
    status, body = _post_raw(served.url, "/api/whatif",
                             ["Content-Type: application/json",
                              "Transfer-Encoding: chunked"],
                             iter([frame] * 256 + [b"0\r\n\r\n"]))
    took = time.monotonic() - t0
    assert status == 413, body
    assert "more than" in _error(body)
    grew = _rss_bytes(served.pid) - before
    assert grew < 16 * MIB, f"server grew by {grew / MIB:.1f} MiB for a 64 MiB body"
    assert took < 30
    # the server still answers
    assert served.get("api/info")["mode"]


def test_a_body_within_the_limit_is_served(served):
    r = httpx.post(served.url + "api/whatif", json={"fail": ["no-such-switch"]}, timeout=30)
    assert r.status_code == 400 and "fail" in r.json()["error"]  # parsed: a name problem


def test_the_serve_setting_sets_the_limit(small):
    ok = json.dumps({"fail": ["x"]})
    assert len(ok) <= 100
    r = httpx.post(small.url + "api/whatif", content=ok,
                   headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400  # parsed: x is no switch
    big = json.dumps({"fail": ["x" * 120]})
    r = httpx.post(small.url + "api/whatif", content=big,
                   headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 413 and "at most 100 bytes" in r.json()["error"]
    # chunked, no length
    r = httpx.post(small.url + "api/whatif", content=iter([big[:60].encode(),
                                                            big[60:].encode()]),
                   headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 413
    assert r.headers["x-content-type-options"] == "nosniff"  # the Guard's headers too


def test_a_bad_max_body_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "aifabric", "serve", str(SPEC), "--max-body",
                        "lots", "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 2
    assert "--max-body" in p.stderr and "Traceback" not in p.stderr


# ------------------------------------------------------------- reads vs what-if
def _held_server(heavy_at_once: int):
    """An in-process server (real uvicorn on a loopback socket) whose twin stops every
    what-if's routing at a gate until the test opens it; yields (url, entered, gate,
    routed: the failure sets that reached routing)."""
    import uvicorn

    from aifabric.web.app import create_app
    from aifabric.web.twin import Twin

    twin = Twin.open(SPEC)
    entered, gate = threading.Event(), threading.Event()
    routed: list[tuple[str, ...]] = []

    def hold(key: tuple[str, ...]) -> None:
        routed.append(key)
        entered.set()
        gate.wait(60)

    twin.before_route = hold
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(twin, heavy_at_once=heavy_at_once),
                            log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    th = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/", entered, gate, routed
    finally:
        gate.set()
        server.should_exit = True
        th.join(timeout=10)
        sock.close()


@pytest.fixture
def held():
    """4 heavy calls at once (the default is half the cores): the what-ifs of a test
    reach the twin together."""
    yield from _held_server(4)


@pytest.fixture
def held_one():
    yield from _held_server(1)


def test_reads_are_answered_while_a_whatif_routes(held):
    url, entered, gate, _ = held
    base = httpx.get(url + "api/topology", timeout=30).json()
    tor = next(n for n in httpx.get(url + "api/search", params={"q": "tor"},
                                    timeout=30).json())["name"]
    answer: dict[str, Any] = {}

    def whatif() -> None:
        r = httpx.post(url + "api/whatif", json={"fail": [tor]}, timeout=60)
        answer["status"], answer["json"] = r.status_code, r.json()

    w = threading.Thread(target=whatif)
    w.start()
    assert entered.wait(30), "the what-if never started routing"
    # the what-if is held inside its routing: reads of what is already made answer now
    t0 = time.monotonic()
    info = httpx.get(url + "api/info", timeout=10)
    topo = httpx.get(url + "api/topology", timeout=10)
    heat = httpx.get(url + "api/heatmap", timeout=10)
    took = time.monotonic() - t0
    assert info.status_code == topo.status_code == heat.status_code == 200
    assert topo.json() == base
    assert w.is_alive() and "status" not in answer  # still held
    assert took < 5
    gate.set()
    w.join(60)
    assert answer["status"] == 200, answer
    assert answer["json"]["fail"] == [tor] and answer["json"]["links_down"] > 0


def test_the_same_whatif_twice_at_once_routes_once(held):
    url, entered, gate, _ = held
    tor = next(n for n in httpx.get(url + "api/search", params={"q": "tor"},
                                    timeout=30).json())["name"]
    out: list[Any] = []

    def whatif() -> None:
        r = httpx.get(url + "api/whatif", params={"fail": tor}, timeout=60)
        out.append((r.status_code, r.json()["links_down"]))

    ws = [threading.Thread(target=whatif) for _ in range(3)]
    for w in ws:
        w.start()
    assert entered.wait(30)
    time.sleep(0.3)  # the others arrive and wait for the first one's routing
    entered.clear()
    gate.set()
    for w in ws:
        w.join(60)
    assert len(out) == 3 and len(set(out)) == 1 and out[0][0] == 200
    assert not entered.is_set(), "a second routing of the same failure set"


def test_heavy_calls_compute_one_at_a_time_and_reads_still_answer(held_one):
    """heavy_at_once=1: a second what-if (another failure set) does not start routing
    while the first is held, yet /api/info and the base topology answer."""
    url, entered, gate, routed = held_one
    tors = [h["name"] for h in httpx.get(url + "api/search", params={"q": "tor"},
                                         timeout=30).json()][:2]
    assert len(tors) == 2
    status: list[int] = []
    ws = [threading.Thread(target=lambda n=n: status.append(
        httpx.post(url + "api/whatif", json={"fail": [n]}, timeout=60).status_code))
        for n in tors]
    ws[0].start()
    assert entered.wait(30)
    ws[1].start()
    time.sleep(0.5)  # time enough for the second to reach routing, were it let through
    assert httpx.get(url + "api/info", timeout=10).status_code == 200
    assert httpx.get(url + "api/topology", timeout=10).status_code == 200
    assert len(routed) == 1 and ws[1].is_alive()
    gate.set()
    for w in ws:
        w.join(60)
    assert status == [200, 200] and len(routed) == 2


# ------------------------------------------------------------- colour statistic
def test_the_group_statistic_is_a_query_parameter_with_a_scale(served):
    """/api/topology and /api/segment take stat=max|p99|mean (default max) and answer the
    colour scale: hi is the largest per_link drawn, with the metric's unit."""
    by = {s: served.get(f"api/topology?metric=bytes&stat={s}") for s in ("max", "p99",
                                                                          "mean")}
    assert served.get("api/topology?metric=bytes")["stat"] == "max"
    for s, o in by.items():
        assert o["stat"] == s
        per = [e["per_link"] for e in o["edges"]]
        assert o["scale"]["hi"] == max(per) and o["scale"]["min"] == min(per)
        assert o["scale"]["lo"] == 0 and o["scale"]["unit"] == "bytes"
    for a, b, c in zip(*(by[s]["edges"] for s in ("max", "p99", "mean")), strict=True):
        assert a["id"] == b["id"] == c["id"]
        assert c["per_link"] <= a["per_link"] + 1e-9 and b["per_link"] <= a["per_link"] + 1e-9
    seg = served.get("api/segment/0?metric=bytes&stat=p99")
    assert seg["stat"] == "p99" and seg["scale"]["hi"] == max(e["per_link"]
                                                              for e in seg["edges"])
    r = httpx.get(served.url + "api/topology", params={"stat": "median"}, timeout=30)
    assert r.status_code == 400 and _error(r.text).startswith("stat")
