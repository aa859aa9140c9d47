"""Where a sweep's points run: in this process, in a local process pool, or on Ray.

Every executor yields ``(index, row, tables, timing)`` as points finish, in whatever order
they finish; the caller (:func:`aifabric.sweep.runner.run_sweep`) alone writes the store.
A point that raises comes back as a failed row (see :func:`aifabric.sweep.worker.execute`).
A worker process that dies (SIGKILL, out of memory, a crash in native code) costs the
point it was running one attempt; after :data:`MAX_RETRIES` retries the point comes back
failed. Each executor stops submitting when ``stop`` is set and returns promptly,
abandoning the points still running (they were not stored: ``--resume`` runs them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from multiprocessing.context import SpawnContext
from pathlib import Path
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.sim.limits import DEFAULT_MAX_EVENTS
from aifabric.sweep.model import Point, Sweep
from aifabric.sweep.worker import execute, failed_row

__all__ = ["MAX_RETRIES", "RayConnection", "connect_ray", "run_local", "run_ray",
           "run_serial"]

#: how many times a point whose worker died is run again before it is recorded failed
MAX_RETRIES = 2
#: seconds between checks of ``stop`` while waiting for results
POLL_S = 0.2
#: seconds a TCP connect, then a gRPC handshake, with a Ray address may take before it is
#: called unreachable (a port that answers but is no Ray cluster fails the handshake)
CONNECT_TIMEOUT_S = 5.0
#: seconds ``ray.init(address=...)`` may take once the address answered; past them the
#: command (``exit_on_hang``) says so in one line and exits 2 (Ray's client otherwise
#: retries for minutes when the cluster it is sent to is not the one it reaches)
INIT_TIMEOUT_S = 60.0

#: set while :func:`run_serial` runs a point in this process (a SIGINT then interrupts it)
BUSY = threading.Event()

Outcome = tuple[int, dict[str, Any], dict[str, Any], dict[str, Any]]


def _crash_outcome(p: Point, why: str, attempts: int, executor: str) -> Outcome:
    row = failed_row(p.overrides, p.run_id, f"worker died {attempts} times running this "
                     f"point ({why}); not retried again")
    return p.index, row, {}, {"attempt": attempts, "executor": executor}


def run_serial(sweep: Sweep, points: list[Point], stop: threading.Event,
               max_events: float | None = DEFAULT_MAX_EVENTS) -> Iterator[Outcome]:
    """One point after another in this process (``--jobs 1``)."""
    for p in points:
        if stop.is_set():
            return
        BUSY.set()
        try:
            out = execute(p.index, sweep.document, sweep.base_dir, p.overrides, p.run_id,
                          max_events=max_events, executor="serial", tables=sweep.spec.tables)
        finally:
            BUSY.clear()
        yield out


# ---------------------------------------------------------------------- process pool
_DOC: dict[str, Any] = {}


def _init_worker(doc: dict[str, Any], base_dir: str, tables: str | list[str],
                 max_memory: str | None) -> None:
    """A pool worker: keep the base scenario's document; ignore SIGINT (a Ctrl-C in the
    terminal reaches the whole process group; the parent decides what stops)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # started with SIGINT blocked (see _sigint_blocked): ignored now, so unblock it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _DOC.update(doc=doc, base_dir=base_dir, tables=tables)
    if max_memory is not None:
        from aifabric.guard import set_limit

        set_limit(max_memory)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while the pool starts workers (they start inside
    ``submit``): a worker inherits the block until its initializer ignores SIGINT, so a
    Ctrl-C in the terminal (sent to the whole process group) during its start-up cannot
    kill it with a KeyboardInterrupt traceback. A SIGINT meanwhile stays pending for
    this process and is handled when the block ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _pool_task(index: int, overrides: dict[str, Any], run_id: str, attempt: int,
               mark_dir: str, max_events: float | None) -> Outcome:
    return execute(index, _DOC["doc"], _DOC["base_dir"], overrides, run_id, attempt,
                   mark_dir, max_events, executor="local", tables=_DOC["tables"])


def _culprits(mark_dir: Path, running: set[int], procs: dict[int, Any]) -> set[int]:
    """The points (of ``running``) whose worker died on its own, from the start marks and
    the dead workers' exit codes; the pool SIGTERMs the other workers once it breaks."""
    pid_of: dict[int, int] = {}
    for f in mark_dir.iterdir():
        if f.name.startswith("."):
            continue
        idx, pid = (int(x) for x in f.name.split("."))
        pid_of[idx] = pid  # one mark per point: the marks are cleared with each pool
    killed = {pid for pid, proc in procs.items()
              if proc.exitcode is not None and proc.exitcode not in (0, -signal.SIGTERM)}
    return {i for i in running if pid_of.get(i) in killed}


class _TrackedSpawn(SpawnContext):
    """The spawn context, remembering every worker process a pool starts through it (the
    pool's own table of them is private): their exit codes tell a crash's culprit, and
    stopping the pool terminates them."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[Any] = []

    def Process(self, *args: Any, **kwargs: Any) -> Any:
        proc = super().Process(*args, **kwargs)
        self.started.append(proc)
        return proc

    def procs(self) -> dict[int, Any]:
        """pid -> process of the workers started so far."""
        return {p.pid: p for p in self.started if p.pid is not None}


def run_local(sweep: Sweep, points: list[Point], jobs: int, stop: threading.Event,
              max_events: float | None = DEFAULT_MAX_EVENTS, max_memory: str | None = None
              ) -> Iterator[Outcome]:
    """The points on a pool of ``jobs`` worker processes (spawned: nothing of this
    process's threads or state is inherited). A dead worker breaks the pool: it is
    recreated and the unfinished points are submitted again."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    by_index = {p.index: p for p in points}
    queue: deque[int] = deque(p.index for p in points)
    attempts = dict.fromkeys(by_index, 0)
    mark_dir = Path(tempfile.mkdtemp(prefix="aifabric-sweep-"))
    window = 2 * jobs  # submitted ahead: results stream, a stop abandons little

    def new_pool() -> tuple[Any, _TrackedSpawn]:
        ctx = _TrackedSpawn()
        return ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker,
                                   initargs=(sweep.document, sweep.base_dir, sweep.spec.tables,
                                             max_memory)), ctx

    pool, ctx = new_pool()
    inflight: dict[Any, int] = {}
    barren = 0  # pools in a row that broke before any point started
    try:
        while queue or inflight:
            if stop.is_set():  # what completed is still written; the rest is abandoned
                for fut in [f for f in inflight
                            if f.done() and not f.cancelled() and f.exception() is None]:
                    yield fut.result()
                return
            dead = False  # the pool broke (a submit can tell before any future)
            with _sigint_blocked():
                while queue and len(inflight) < window:
                    i = queue.popleft()
                    p = by_index[i]
                    try:
                        fut = pool.submit(_pool_task, i, p.overrides, p.run_id,
                                          attempts[i] + 1, str(mark_dir), max_events)
                    except BrokenProcessPool:
                        queue.appendleft(i)
                        dead = True
                        break
                    attempts[i] += 1
                    inflight[fut] = i
            broken: list[int] = []
            done = wait(list(inflight), timeout=POLL_S, return_when=FIRST_COMPLETED)[0] \
                if inflight else set()
            for fut in done:
                i = inflight.pop(fut)
                try:
                    yield fut.result()
                except BrokenProcessPool:
                    broken.append(i)
                except Exception as err:  # e.g. a result that cannot be pickled
                    from aifabric.sweep.worker import error_text

                    p = by_index[i]
                    yield i, failed_row(p.overrides, p.run_id, error_text(err)), {}, {
                        "attempt": attempts[i], "executor": "local"}
            if not broken and not dead:
                continue
            # the pool is broken: every other future fails too; collect them all
            for fut in list(inflight):
                i = inflight.pop(fut)
                try:
                    yield fut.result(timeout=60)
                except Exception:  # broken like the rest
                    broken.append(i)
            pool.shutdown(wait=True, cancel_futures=True)
            procs = ctx.procs()
            started = {int(f.name.split(".")[0]) for f in mark_dir.iterdir()
                       if not f.name.startswith(".")}
            running = {i for i in broken if i in started}
            guilty = _culprits(mark_dir, running, procs) or running
            codes = sorted({pr.exitcode for pr in procs.values()
                            if pr.exitcode not in (None, 0, -signal.SIGTERM)})
            why = ", ".join(_exit_text(c) for c in codes) or "exit code unknown"
            barren = 0 if running else barren + 1
            if barren > MAX_RETRIES:  # workers die before running anything: give up
                for i in sorted({*broken, *queue}):
                    p = by_index[i]
                    yield i, failed_row(p.overrides, p.run_id, "worker processes die before "
                                        f"running a point ({why})"), {}, {
                        "attempt": attempts[i], "executor": "local"}
                return
            retry: list[int] = []
            for i in sorted(broken):
                if i in guilty and attempts[i] > MAX_RETRIES:
                    yield _crash_outcome(by_index[i], why, attempts[i], "local")
                    continue
                if i not in guilty:
                    attempts[i] -= 1  # not its fault: this submission does not count
                retry.append(i)
            queue.extendleft(reversed(retry))
            for f in mark_dir.iterdir():
                f.unlink()
            pool, ctx = new_pool()
    finally:
        _stop_pool(pool, ctx.procs())
        shutil.rmtree(mark_dir, ignore_errors=True)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _stop_pool(pool: Any, procs: dict[int, Any]) -> None:
    """Shut the pool down now: queued points are cancelled, running workers stopped."""
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs.values():
        if proc.is_alive():
            proc.terminate()
    for proc in procs.values():
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)


# ---------------------------------------------------------------------------- Ray
class RayConnection:
    """A connection to a Ray cluster made for a sweep; :meth:`close` shuts down only a
    connection this sweep made (a session the caller started stays up)."""

    def __init__(self, ray: Any, started: bool) -> None:
        self.ray = ray
        self.started = started

    def close(self) -> None:
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SpecError(Problem("--engine", "ray is not installed; allowed: local, or "
                                "install it: pip install 'aifabric[ray]'")) from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """``host:port`` of an address (``ray://host:port`` too), None for ``auto``."""
    if address == "auto" or address == "local":
        return None
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise SpecError(Problem("--address", f"{address!r} is not a Ray address; allowed: "
                                "auto (an existing cluster), host:port, ray://host:port"))
    return host.strip("[]"), int(port)


def _grpc_answers(host: str, port: int) -> bool:
    """Whether a gRPC server (a Ray GCS or Ray Client server) completes a handshake at
    ``host:port`` within :data:`CONNECT_TIMEOUT_S` (True when grpc is not importable)."""
    try:
        import grpc
    except ImportError:
        return True
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    ch = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(ch).result(timeout=CONNECT_TIMEOUT_S)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        ch.close()


def connect_ray(address: str | None, jobs: int | None,
                exit_on_hang: bool = False) -> RayConnection:
    """Connect to Ray before any point runs: ``None`` starts a local cluster (``jobs``
    CPUs, default all), ``auto`` joins an existing one (refused at once when there is
    none), ``host:port`` that one (refused within 2 x :data:`CONNECT_TIMEOUT_S` when
    nothing answers, or something that is no gRPC server). ``exit_on_hang`` (the
    command): a ``ray.init`` to an address that takes over :data:`INIT_TIMEOUT_S` ends
    the process (one line, exit 2; no point ran). A session already initialized in this
    process (a notebook, a test) is used as it is."""
    ray = _import_ray()
    if ray.is_initialized():
        return RayConnection(ray, started=False)
    hp = _host_port(address) if address else None
    if hp is not None:
        try:
            with socket.create_connection(hp, timeout=CONNECT_TIMEOUT_S):
                pass
        except OSError as err:
            raise SpecError(Problem("--address", f"Ray at {address} is unreachable "
                                    f"({err.strerror or err}); allowed: the address of a "
                                    "running Ray cluster (ray start --head), auto, or none "
                                    "for a local cluster")) from None
        if not _grpc_answers(*hp):
            raise SpecError(Problem("--address", f"Ray at {address} is unreachable (the "
                                    "port answers but no gRPC handshake within "
                                    f"{CONNECT_TIMEOUT_S:g} s: not a Ray cluster); allowed: "
                                    "the address of a running Ray cluster (ray start "
                                    "--head), auto, or none for a local cluster")) from None
    import logging

    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR,
                              "configure_logging": True}
    if address:
        kwargs["address"] = address
    else:
        kwargs.update(num_cpus=jobs or os.cpu_count(), include_dashboard=False)
    with _stderr_held() as held:
        watchdog = None
        if exit_on_hang and address:
            line = (f"error: --address: Ray at {address} did not connect within "
                    f"{INIT_TIMEOUT_S:g} s; allowed: the address of a running Ray cluster "
                    "(ray start --head), auto, or none for a local cluster\n").encode()

            def hang() -> None:  # no point ran, nothing was written: leave now
                os.write(held.get("fd", 2), line)
                os._exit(2)

            watchdog = threading.Timer(INIT_TIMEOUT_S, hang)
            watchdog.daemon = True
            watchdog.start()
        try:
            ray.init(**kwargs)
        except KeyboardInterrupt:  # Ctrl-C while Ray starts: stop what it started
            with contextlib.suppress(Exception):
                ray.shutdown()
            raise
        except Exception as err:  # ConnectionError, RuntimeError, ValueError...
            held["drop"] = True  # Ray's core logs its retries there: one line instead
            text = " ".join(str(err).split())[:300]
            raise SpecError(Problem("--address", f"cannot connect to Ray at "
                                    f"{address or 'a new local cluster'}: {text}")) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
    return RayConnection(ray, started=True)


@contextlib.contextmanager
def _stderr_held() -> Iterator[dict[str, Any]]:
    """Hold what is written to file descriptor 2 (Ray's C++ core logs each retry of a
    connection there) until the block ends; then write it out, unless ``drop`` was set."""
    import sys

    state: dict[str, Any] = {"drop": False}
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (a notebook): nothing to hold
        yield state
        return
    state["fd"] = saved  # the real stderr while it is held
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield state
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not state["drop"]:
                tmp.seek(0)
                data = tmp.read()
                if data:
                    os.write(2, data)


def run_ray(sweep: Sweep, points: list[Point], conn: RayConnection, stop: threading.Event,
            max_events: float | None = DEFAULT_MAX_EVENTS, max_memory: str | None = None
            ) -> Iterator[Outcome]:
    """The points as Ray tasks (one CPU each; a worker that dies is retried by Ray up to
    :data:`MAX_RETRIES` times, then the point is recorded failed)."""
    ray = conn.ray
    task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(execute)
    doc_ref = ray.put(sweep.document)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    window = max(2 * cpus, 4)
    queue = deque(points)
    inflight: dict[Any, Point] = {}
    try:
        while queue or inflight:
            if stop.is_set():  # what completed is still written; the rest is abandoned
                ready, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=0) \
                    if inflight else ([], [])
                for ref in ready:
                    inflight.pop(ref)
                    with contextlib.suppress(ray.exceptions.RayError):
                        yield ray.get(ref)
                return
            while queue and len(inflight) < window:
                p = queue.popleft()
                ref = task.remote(p.index, doc_ref, sweep.base_dir, p.overrides, p.run_id,
                                  1, None, max_events, "ray", sweep.spec.tables,
                                  max_memory)
                inflight[ref] = p
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=POLL_S)
            for ref in ready:
                p = inflight.pop(ref)
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayError as err:
                    why = type(err).__name__
                    text = " ".join(str(err).split())[:300]
                    yield (p.index, failed_row(p.overrides, p.run_id,
                                               f"Ray task failed after {MAX_RETRIES} retries "
                                               f"({why}): {text}"), {},
                           {"attempt": MAX_RETRIES + 1, "executor": "ray"})
    finally:
        for ref in inflight:
            with contextlib.suppress(Exception):  # already finished or gone
                ray.cancel(ref, force=True)
