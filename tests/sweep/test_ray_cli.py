"""``aifabric sweep --engine ray`` as a command: a Ray address that answers but is no Ray
cluster, or ``auto`` with no cluster, refused in bounded time; Ctrl-C while the local Ray
cluster starts or while points run: exit 130, and every process the command started
(the cluster's and its workers, found in /proc below the command's pid) stops."""

from __future__ import annotations

import re
import signal
import socket
import time

import pytest

from aifabric.sweep import load_sweep
from tests._require import require_importorskip
from tests.sweep.conftest import (
    alive,
    cmdline,
    descendants,
    raw_ids,
    row_files,
    rows,
    stop,
    wait_until,
    write_sweep,
)
from tests.sweep.test_run import SLOW, _cli

pytest.importorskip("ray", reason="the ray extra: pip install 'aifabric[ray]'")

GOOD = "grid:\n  routing.seed_mode: [same]\n"


def _refused(args, says: str, bound: float) -> None:
    t0 = time.monotonic()
    proc = _cli("sweep", *args)
    try:
        so, err = proc.communicate(timeout=bound + 30)
    finally:
        stop(proc)
    assert time.monotonic() - t0 < bound, err
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert so == ""


def test_an_address_that_answers_but_is_no_ray_cluster(tmp_path):
    """A port that accepts connections but speaks no gRPC: refused after the handshake
    wait (5 s), not after Ray's minutes of retries."""
    require_importorskip("grpc", "grpcio",
                         reason="the handshake needs grpcio (the ray extra); "
                         "without it ray.init's own 60 s bound applies")
    path = write_sweep(tmp_path, "g", GOOD)
    with socket.socket() as lsn:
        lsn.bind(("127.0.0.1", 0))
        lsn.listen()
        port = lsn.getsockname()[1]
        _refused((path, "--out", tmp_path / "out", "--engine", "ray", "--address",
                  f"127.0.0.1:{port}"), "no gRPC handshake", 45)
    assert not (tmp_path / "out").exists()


def test_address_auto_without_a_cluster(tmp_path):
    path = write_sweep(tmp_path, "g", GOOD)
    _refused((path, "--out", tmp_path / "out", "--engine", "ray", "--address", "auto"),
             "Could not find any running Ray instance", 45)
    assert not (tmp_path / "out").exists()


def _all_stopped(pids: list[int]) -> None:
    wait_until(lambda: not [p for p in pids if alive(p)], 60,
               "every process of the sweep to stop: " + "; ".join(
                   cmdline(p)[:80] for p in pids if alive(p)))


def test_ctrl_c_while_the_local_ray_cluster_starts(tmp_path):
    path = write_sweep(tmp_path, "g", GOOD)
    proc = _cli("sweep", path, "--out", tmp_path / "out", "--engine", "ray", "--jobs", "1")
    try:
        wait_until(lambda: any("gcs_server" in cmdline(p) for p in descendants(proc.pid)),
                   120, "Ray's GCS to start")
        seen = descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        stop(proc)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err and "Aborted" not in err
    _all_stopped(seen)


def test_ctrl_c_on_ray_mid_sweep_stops_the_cluster_and_keeps_rows(tmp_path):
    path = write_sweep(tmp_path, "int", SLOW.replace("seeds: 10", "seeds: 8"))
    out = tmp_path / "store"
    proc = _cli("sweep", path, "--out", out, "--engine", "ray", "--jobs", "2")
    seen: set[int] = set()
    try:
        def stored_and_seen():
            seen.update(descendants(proc.pid))
            return row_files(out, "int")

        wait_until(stored_and_seen, 240, "a first stored point")
        seen.update(descendants(proc.pid))
        assert any(cmdline(p).startswith("ray::") for p in seen)  # Ray workers seen
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        stop(proc)
    assert proc.returncode == 130, err
    m = re.search(r"interrupted: (\d+) of 8 points stored; run again with --resume", err)
    assert m, err
    _all_stopped(sorted(seen))
    ids = {p.run_id for p in load_sweep(path).points}
    got = raw_ids(out, "int")
    assert len(got) == len(set(got)) == int(m.group(1)) and set(got) <= ids
    assert (rows(out, "int")["status"] == "ok").all()


def test_a_grpc_server_that_is_no_ray_cluster_is_given_up_on(tmp_path):
    """The handshake succeeds but ray.init never completes: the command gives up after
    INIT_TIMEOUT_S (shortened to 8 s here), one line, exit 2, nothing written."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    path = write_sweep(tmp_path, "g", GOOD)
    server = grpc.server(ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    code = ("import sys; import aifabric.sweep.executors as ex; ex.INIT_TIMEOUT_S = 8\n"
            f"sys.argv = ['aifabric', 'sweep', {str(path)!r}, '--out', "
            f"{str(tmp_path / 'out')!r}, '--engine', 'ray', '--address', "
            f"'127.0.0.1:{port}']\nfrom aifabric.cli import main\nmain()")
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=False)
    finally:
        server.stop(0)
    assert time.monotonic() - t0 < 60
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == (f"error: --address: Ray at 127.0.0.1:{port} did not connect "
                                "within 8 s; allowed: the address of a running Ray cluster "
                                "(ray start --head), auto, or none for a local cluster")
    assert not (tmp_path / "out").exists()
