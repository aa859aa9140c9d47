"""Ctrl-C at any moment: exit 130, one line on stderr, no traceback, and every output
either complete or absent (never half-written, no temporaries left behind).

The CLI test sends a real SIGINT to ``aifabric simulate --out`` at moments spread over
its whole run (start-up, loading, the compiled simulation, writing the report); the
second test interrupts compiled (numba) code many times, where a ``KeyboardInterrupt``
surfaces as ``SystemError: CPUDispatcher(...) returned a result with an exception set``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import suppress
from pathlib import Path

from aifabric.interrupts import EXIT_CODE, MESSAGE, caused_by_interrupt
from tests.conftest import EXAMPLES, ROOT

#: a flow scenario of a few seconds (4 jobs on the dual-plane HPN fabric)
SCENARIO = EXAMPLES / "scenarios" / "hpn-4jobs-dual-plane.yaml"
#: when to send SIGINT, as fractions of an uninterrupted run's wall time: from start-up
#: (imports) through loading, the compiled simulation and writing the report, to past
#: its end
FRACTIONS = (0.06, 0.12, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.96, 1.1)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _interrupt_at(delay: float, out: Path) -> tuple[int, str, float]:
    proc = subprocess.Popen([sys.executable, "-m", "aifabric", "simulate", str(SCENARIO),
                             "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=_env())
    started = time.perf_counter()
    try:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, time.perf_counter() - started


def test_ctrl_c_at_any_moment_of_simulate_exits_130_leaving_nothing_partial(tmp_path):
    # the uninterrupted run's wall time, the shorter of two: the first may fill numba's
    # cache, and on a loaded machine one run can take twice another (the moments must
    # fall inside the interrupted runs, which find the cache warm)
    walls = []
    for name in ("full", "full2"):
        started = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "aifabric", "simulate", str(SCENARIO),
                            "--out", str(tmp_path / name)], capture_output=True, text=True,
                           env=_env(), timeout=120, check=False)
        walls.append(time.perf_counter() - started)
        assert p.returncode == 0, p.stderr
    wall = min(walls)
    complete = _files(tmp_path / "full")
    assert _files(tmp_path / "full2") == complete
    assert "report.md" in complete
    delays = [round(f * wall, 3) for f in FRACTIONS]
    outcomes = []
    for i, delay in enumerate(delays):
        run = tmp_path / f"run{i}"
        run.mkdir()
        out = run / "D"
        code, err, took = _interrupt_at(delay, out)
        outcomes.append((delay, code, round(took, 2)))
        assert "Traceback" not in err and "SystemError" not in err, (delay, err)
        # a run that finished before the signal came exits 0; otherwise 130 and one line
        if code == 0:
            assert _files(out) == complete, delay
            continue
        if code == -signal.SIGINT:  # it came while the interpreter was shutting down after
            # the run had finished (CPython restores SIGINT's default action there): the
            # shell reports 130, and the output must be whole
            assert _files(out) == complete, (delay, _files(out))
            continue
        assert code == EXIT_CODE, (delay, code, err)
        assert err.splitlines() == [MESSAGE], (delay, err)
        assert not out.exists() or _files(out) == complete, (delay, _files(out))
        assert [q.name for q in run.iterdir() if q.name != "D"] == [], \
            (delay, "temporaries left")
    interrupted = [d for d, code, _ in outcomes if code == EXIT_CODE]
    assert len(interrupted) >= len(delays) // 2, outcomes  # most moments fell in the run


#: interrupts the project's compiled ``advance`` (numba, nogil) many times in a row, each
#: answered as the CLI's ``main`` answers it; prints what each interrupt raised and how the
#: CLI would have exited
_COMPILED = textwrap.dedent("""
    import io, json, os, random, signal, sys, threading
    import numpy as np
    from aifabric import interrupts
    from aifabric.sim.flow._step import advance

    f, r = np.ones(50_000), np.ones(50_000)
    advance(f, r, 0.0, False)  # compiled (or loaded from the cache) before any signal
    go, done = threading.Event(), threading.Event()
    rng = random.Random(7)

    def sender():
        while True:
            go.wait(); go.clear()
            if done.is_set():
                return
            threading.Event().wait(rng.uniform(0.0005, 0.01))
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=sender, daemon=True).start()
    results = []
    for trial in range(int(sys.argv[1])):
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with interrupts.recorded() as installed:
            assert installed
            go.set()
            try:
                while True:
                    advance(f, r, 0.0, False)
            except BaseException as exc:
                raised = type(exc).__name__
                saved, sys.stderr = sys.stderr, io.StringIO()
                try:
                    interrupts.answer(exc)
                    code = None
                except SystemExit as stop:
                    code = stop.code
                finally:
                    said, sys.stderr = sys.stderr.getvalue(), saved
                results.append([raised, code, said])
    done.set(); go.set()
    print(json.dumps(results))
""")


def test_ctrl_c_inside_compiled_code_is_an_interrupt_not_a_system_error():
    p = subprocess.run([sys.executable, "-c", _COMPILED, "40"], capture_output=True,
                       text=True, env=_env(), timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    results = json.loads(p.stdout)
    assert len(results) == 40
    raised = {r[0] for r in results}
    assert raised <= {"KeyboardInterrupt", "SystemError"}, raised
    # numba's dispatcher turns most of them into a SystemError: the case the CLI answers
    assert "SystemError" in raised, results
    assert all(code == EXIT_CODE and said == MESSAGE + "\n" for _, code, said in results), \
        results


def test_what_counts_as_an_interrupt():
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ki:
            raise SystemError("CPUDispatcher(<function fill>) returned a result with an "
                              "exception set") from ki
    except SystemError as err:
        assert caused_by_interrupt(err)
    assert not caused_by_interrupt(SystemError("other"))
    assert not caused_by_interrupt(None)
    try:  # handled where it happened (``raise ... from None``): not an interrupt any more
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemExit(EXIT_CODE) from None
    except SystemExit as stop:
        assert not caused_by_interrupt(stop)


def test_an_unraisable_interrupt_is_quiet_and_anything_else_is_not():
    """A Ctrl-C raised inside a ctypes callback (numba's cache notifier at start-up) is
    'unraisable': Python would print "Exception ignored ..." and a traceback. Under
    ``recorded`` a recorded one is quiet (the run is answered as interrupted); another
    exception, or an interrupt the handler never saw, still reaches the previous hook;
    afterwards the previous hook is back."""
    import ctypes

    from aifabric.interrupts import _handler, interrupted, recorded

    seen = []
    saved = sys.unraisablehook
    sys.unraisablehook = lambda arg: seen.append(type(arg.exc_value).__name__)
    # Python's own SIGINT handler, as a command line starts with (a test runner's
    # worker may have another)
    old_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        def boom(exc):
            def cb():
                raise exc
            ctypes.CFUNCTYPE(None)(cb)()  # raised in a callback: unraisable

        with recorded() as on:
            assert on
            boom(KeyboardInterrupt())  # one the handler has not recorded: reported
            with suppress(KeyboardInterrupt):
                _handler(signal.SIGINT, None)  # what a real SIGINT runs
            assert interrupted()
            boom(KeyboardInterrupt())  # recorded: quiet
            boom(ValueError("x"))  # never quiet
        assert seen == ["KeyboardInterrupt", "ValueError"], seen
        boom(KeyboardInterrupt())  # outside: reported again
        assert seen[-1] == "KeyboardInterrupt" and len(seen) == 3
    finally:
        sys.unraisablehook = saved
        signal.signal(signal.SIGINT, old_sigint)
