"""``aifabric serve`` as a user runs it (a subprocess, the real CLI): bad input is one
line and exit 2 with nothing served; by default it listens on 127.0.0.1 only (checked on
the socket itself, in /proc/net/tcp); another address warns; Ctrl-C or SIGTERM stops it
cleanly with exit 0."""

from __future__ import annotations

import re
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests._require import skip_allowed
from tests.conftest import EXAMPLES, ROOT
from tests.lab.live import live

TINY = ROOT / "tests" / "golden" / "hpn" / "spec.yaml"  # 4 hosts: serves in seconds
_URL = re.compile(r"http://(\S+?):(\d+)/")


def _serve(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "aifabric", "serve", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, cwd=cwd)


def _wait_url(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[str, str, int]:
    """The first stdout line (``serving ... at URL``), its host and port; fails if the
    process exits first."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)  # bounded wait
    line = proc.stdout.readline() if ready else ""  # type: ignore[union-attr]
    m = _URL.search(line)
    if m:
        return line, m.group(1), int(m.group(2))
    if ready:  # stdout closed: the process ended
        proc.wait(timeout=30)
    raise AssertionError(f"no URL (exit {proc.poll()}): {line}"
                         f"{proc.stderr.read() if proc.poll() is not None else ''}")  # type: ignore[union-attr]


def _stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[int, str, str]:
    """Stop ``proc`` by its pid (bounded waits, SIGKILL as the last resort); its exit
    code and the rest of its stdout and stderr (the pipes closed)."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=10)
        raise AssertionError(f"serve did not stop on signal {sig}") from None
    return proc.returncode, out, err


def _bad(tmp_path: Path, *args: str | Path) -> str:
    """Run serve with bad input: exit 2, one line on stderr, nothing on stdout."""
    p = subprocess.run([sys.executable, "-m", "aifabric", "serve", *map(str, args)],
                       capture_output=True, text=True, timeout=120, check=False,
                       cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr
    assert "serving" not in p.stdout
    return lines[0]


# ---------------------------------------------------------------- bad input
def test_missing_target(tmp_path):
    assert "TARGET" in _bad(tmp_path)


def test_target_that_does_not_exist(tmp_path):
    assert "no-such.yaml" in _bad(tmp_path, tmp_path / "no-such.yaml")


NEITHER = "is neither a spec (no topology:) nor a scenario (no spec:)"


@pytest.mark.parametrize(("content", "says"), [("just some notes\n", NEITHER),
                                               ("[1, 2, 3]\n", NEITHER),
                                               ("name: x\n", NEITHER),
                                               ("\x00\x01binary: [\n", "invalid YAML")])
def test_a_file_that_is_neither_spec_nor_scenario(tmp_path, content, says):
    f = tmp_path / "notes.yaml"
    f.write_text(content, encoding="utf-8")
    msg = _bad(tmp_path, f)
    assert str(f) in msg and says in msg, msg
    if says == NEITHER:  # what would be allowed instead
        assert "TARGET: " in msg and "allowed: a fabric spec (YAML), a scenario" in msg, msg


def test_a_folder_that_is_not_a_run(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "empty" in _bad(tmp_path, empty)


@pytest.mark.parametrize("listen", ["nonsense", "127.0.0.1", "127.0.0.1:99999",
                                    "127.0.0.1:http", ":8050", "127.0.0.1:-1"])
def test_listen_garbage(tmp_path, listen):
    assert "--listen" in _bad(tmp_path, TINY, "--listen", listen)


def test_listen_on_an_address_this_machine_lacks(tmp_path):
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine
    assert "--listen" in _bad(tmp_path, TINY, "--listen", "192.0.2.1:8050")


def test_busy_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        msg = _bad(tmp_path, TINY, "--listen", f"127.0.0.1:{port}")
    assert "in use" in msg and str(port) in msg


def test_lab_with_no_lab_up(tmp_path):
    msg = _bad(tmp_path, "--lab", "--dir", tmp_path / "nolab")
    assert "no lab is up" in msg


@pytest.mark.parametrize(("args", "says"), [
    # both a target and the lab
    (("TARGET", "--lab"), "TARGET: {TINY} given with --lab; allowed: one of TARGET or --lab"),
    # --dir without --lab (and without a target: the target is missing first)
    (("TARGET", "--dir", "x"), "--dir: only with --lab"),
    (("--dir", "x"), "TARGET: missing; allowed: a fabric spec, a scenario, a run folder"),
    # --scenario is for run folders
    (("TARGET", "--scenario", "TARGET"), "--scenario: only with a run folder; allowed: "
                                         "serve RUN_DIR --scenario FILE"),
])
def test_conflicting_options(tmp_path, args, says):
    msg = _bad(tmp_path, *[TINY if a == "TARGET" else a for a in args])
    assert msg.startswith("error: " + says.format(TINY=TINY)), msg


# ---------------------------------------------------------------- serving
def test_default_listen_is_loopback_only(tmp_path):
    """No --listen: the listening socket is 127.0.0.1:8050 (read from /proc/net/tcp by
    the socket's inode, so it is this process's socket)."""
    proc = _serve(TINY, cwd=tmp_path)
    try:
        try:
            line, host, port = _wait_url(proc)
        except AssertionError as err:
            if proc.poll() == 2 and "in use" in str(err):
                skip_allowed("port already taken", "8050 on this machine")
            raise
        assert (host, port) == ("127.0.0.1", 8050), line
        assert _listening(proc.pid) == [("127.0.0.1", 8050)]
        assert httpx.get("http://127.0.0.1:8050/api/info", timeout=30).status_code == 200
    finally:
        _stop(proc)


def _listening(pid: int) -> list[tuple[str, int]]:
    """The (address, port) of every listening TCP socket of process ``pid``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            addr, port = local.split(":")
            raw = bytes.fromhex(addr)
            if v6:
                host = socket.inet_ntop(socket.AF_INET6, b"".join(
                    raw[i:i + 4][::-1] for i in range(0, 16, 4)))
            else:
                host = socket.inet_ntop(socket.AF_INET, raw[::-1])
            out.append((host, int(port, 16)))
    return sorted(out)


def test_another_address_warns_and_accepts_any_host(tmp_path):
    proc = _serve(TINY, "--listen", "0.0.0.0:0", cwd=tmp_path)
    try:
        _, host, port = _wait_url(proc)
        assert host == "0.0.0.0"
        assert _listening(proc.pid) == [("0.0.0.0", port)]
        r = httpx.get(f"http://127.0.0.1:{port}/api/info",
                      headers={"host": f"fabric.example:{port}"}, timeout=30)
        assert r.status_code == 200  # reached by its name on the network
    finally:
        _, _, err = _stop(proc)
    assert re.search(r"^warning: --listen 0\.0\.0\.0:0 is not a loopback address", err,
                     re.MULTILINE), err


@pytest.mark.parametrize("listen", ["127.0.0.2:0", "127.1:0"])
def test_any_loopback_address_answers_its_own_url_and_only_loopback_names(tmp_path, listen):
    """Loopback is decided from the bound address (127.0.0.0/8): the printed URL works,
    no warning is printed, and a foreign Host header is still refused (DNS rebinding)."""
    proc = _serve(TINY, "--listen", listen, cwd=tmp_path)
    try:
        _, host, port = _wait_url(proc)
        r = httpx.get(f"http://{host}:{port}/api/info", timeout=30)
        assert r.status_code == 200, r.text
        r = httpx.get(f"http://{host}:{port}/api/info",
                      headers={"host": f"evil.example:{port}"}, timeout=30)
        assert r.status_code == 400
    finally:
        _, _, err = _stop(proc)
    assert "warning" not in err, err


def test_listen_any_port_garbage_names_the_text_given(tmp_path):
    err = _bad(tmp_path, TINY, "--listen", ":0")
    assert "':0'" in err and "':1'" not in err, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_it_cleanly(tmp_path, sig):
    proc = _serve(TINY, "--listen", "127.0.0.1:0", cwd=tmp_path)
    try:
        _, _, port = _wait_url(proc)
        assert httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=30).status_code == 200
    finally:
        code, out, err = _stop(proc, sig)
    assert code == 0, err
    assert "serve: stopped" in out
    assert "Traceback" not in err and "Aborted" not in err
    with socket.socket() as s:  # the port is free again
        s.bind(("127.0.0.1", port))


def test_serving_a_scenario_says_what_it_serves(tmp_path):
    proc = _serve(EXAMPLES / "scenarios" / "single-tor-failure.yaml", "--listen",
                  "127.0.0.1:0", cwd=tmp_path)
    try:
        line, _, port = _wait_url(proc)
        assert line.startswith("serving design single-tor-failure at http://127.0.0.1:")
        info = httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=30).json()
        assert info["mode"] == "design" and info["name"] == "single-tor-failure"
    finally:
        _stop(proc)


# ---------------------------------------------------------------- the live lab
@live
def test_serve_lab_reads_the_running_lab_live(tmp_path):
    """``serve --lab`` on the small HPN lab (real FRR in namespaces): every cable end up
    and every BGP session Established; after ``lab fail`` of a ToR, the next read lists
    the failure with links down and sessions lost."""
    from aifabric.lab import check_lab
    from aifabric.lab import core as lab_core

    lab_dir = tmp_path / "lab"
    lab_core.up(EXAMPLES / "hpn-pod.yaml", "small", lab_dir)
    proc = None
    try:
        lab = lab_core.load_lab(lab_dir)
        assert check_lab(lab, timeout_s=60).ok
        proc = _serve("--lab", "--dir", lab_dir, "--listen", "127.0.0.1:0", cwd=tmp_path)
        line, _, port = _wait_url(proc)
        assert line.startswith(f"serving lab {lab.fabric.name} at ")
        url = f"http://127.0.0.1:{port}/"
        info = httpx.get(url + "api/info", timeout=30).json()
        assert info["mode"] == "lab" and "lab" in info["views"]
        state = httpx.get(url + "api/lab", timeout=30).json()
        cables = 2 * len(lab.layout.links)
        assert len(state["links"]) == cables and all(x["up"] for x in state["links"])
        switch_links = sum(1 for lk in lab.layout.links
                           if lk.ns_a in _switch_ns(lab) and lk.ns_b in _switch_ns(lab))
        assert len(state["bgp"]) == 2 * switch_links
        assert all(b["state"] == "Established" for b in state["bgp"])
        assert state["up"] and all(state["up"].values()) and state["failures"] == []

        tor = "tor-s00-r0-a"
        p = subprocess.run([sys.executable, "-m", "aifabric", "lab", "fail", tor, "--dir",
                            str(lab_dir)], capture_output=True, text=True, timeout=120,
                           check=False)
        assert p.returncode in (0, 1), p.stderr
        after = httpx.get(url + "api/lab", timeout=30).json()
        assert any(f.get("switch") == tor for f in after["failures"]), after["failures"]
        assert sum(x["up"] for x in after["links"]) < cables
        assert sum(b["state"] == "Established" for b in after["bgp"]) < 2 * switch_links
    finally:
        if proc is not None:
            _stop(proc)
        if (lab_dir / "state.json").exists():
            lab_core.teardown(lab_dir)


def _switch_ns(lab) -> set[str]:
    return {lab.layout.ns[s] for s in lab.layout.switches}
