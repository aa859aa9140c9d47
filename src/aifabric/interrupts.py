"""Ctrl-C (SIGINT) on the command line: exit 130 with one line, at any moment.

Python turns a SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread is.
Most of the time that unwinds cleanly (every output is written atomically, see
:mod:`aifabric.outputs`), but not always:

* raised while a compiled (numba) function returns, it surfaces as ``SystemError:
  CPUDispatcher(<function ...>) returned a result with an exception set`` (the
  ``KeyboardInterrupt`` is only its ``__cause__``);
* C or library code may swallow it, so the run goes on as if nothing happened;
* raised between two renames of a commit, it could leave a previous output moved aside.

So the command line runs inside :func:`recorded`, whose handler *records* every SIGINT
before raising ``KeyboardInterrupt``; :func:`aifabric.cli.main` then answers any ending
of an interrupted run (a ``KeyboardInterrupt``, a ``SystemError`` caused by one, a
swallowed one) with :data:`MESSAGE` on stderr and exit code :data:`EXIT_CODE`. Commits
(renames that must happen together) run inside :func:`deferred`, which holds a SIGINT
back until they are done.

Commands with their own SIGINT handling (``sweep`` stops after the running points,
``serve`` and ``monitor`` stop their servers) replace the handler while they run and are
left alone.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType

__all__ = ["EXIT_CODE", "MESSAGE", "answer", "caused_by_interrupt", "deferred",
           "exit_interrupted", "interrupted", "recorded"]

#: the exit code of a run stopped by Ctrl-C (128 + SIGINT, what shells report)
EXIT_CODE = 130
#: the one line an interrupted run prints on stderr
MESSAGE = ("interrupted (Ctrl-C): stopped; no output was left half-written (each is "
           "complete or absent)")

_state: dict[str, object] = {"interrupted": False, "unraisable": None}


def _handler(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    _state["interrupted"] = True
    raise KeyboardInterrupt


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def recorded() -> Iterator[bool]:
    """While the block runs, record every SIGINT (then raise ``KeyboardInterrupt`` as
    Python does); the previous handler is back afterwards. Installed only in the main
    thread and only over Python's own handler: an ignored SIGINT (a background job of a
    shell) stays ignored. Yields whether it was installed."""
    _state["interrupted"] = False
    if not _main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield False
        return
    old = signal.signal(signal.SIGINT, _handler)
    old_hook = sys.unraisablehook
    _state["unraisable"] = old_hook
    sys.unraisablehook = _quiet_unraisable
    try:
        yield True
    finally:
        if signal.getsignal(signal.SIGINT) is _handler:  # not one set meanwhile (exiting)
            signal.signal(signal.SIGINT, old)
        if sys.unraisablehook is _quiet_unraisable:
            sys.unraisablehook = old_hook


def _quiet_unraisable(arg: object) -> None:
    """``sys.unraisablehook`` while :func:`recorded` runs: a ``KeyboardInterrupt`` raised
    where Python cannot raise it (a ctypes callback, e.g. numba's object cache notifier
    at start-up) is one the handler has recorded, so it is answered like a swallowed one
    (exit 130, one line) instead of printing "Exception ignored ..." and a traceback;
    anything else goes to the hook that was there before."""
    if isinstance(getattr(arg, "exc_value", None), KeyboardInterrupt) and _state["interrupted"]:
        return
    hook = _state.get("unraisable") or sys.__unraisablehook__
    hook(arg)  # type: ignore[operator]


def interrupted() -> bool:
    """Whether a SIGINT reached :func:`recorded`'s handler in this process."""
    return _state["interrupted"]


def caused_by_interrupt(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a ``KeyboardInterrupt`` or was caused by one (its
    ``__cause__``/``__context__`` chain holds one)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        if exc.__cause__ is not None:
            exc = exc.__cause__
        elif exc.__suppress_context__:  # ``raise ... from None``: handled there
            return False
        else:
            exc = exc.__context__
    return False


def answer(exc: BaseException, hard: bool = False) -> None:
    """How a command that ended with ``exc`` ends when interrupted: exit
    :data:`EXIT_CODE` with :data:`MESSAGE` (via :func:`exit_interrupted`) when a SIGINT
    reached :func:`recorded`'s handler or ``exc`` comes from a ``KeyboardInterrupt``;
    otherwise return (the caller re-raises ``exc``). An exit 130 a command gave itself,
    after saying what it kept (``sweep``), is left as it is."""
    from_interrupt = caused_by_interrupt(exc)
    if isinstance(exc, SystemExit) and exc.code == EXIT_CODE and not from_interrupt:
        return
    if from_interrupt or interrupted():
        exit_interrupted(hard)


def exit_interrupted(hard: bool = False) -> None:
    """Print :data:`MESSAGE` on stderr and exit with :data:`EXIT_CODE`; a further Ctrl-C
    while exiting is ignored (the process is stopping anyway).

    ``hard`` (the console entry point): flush, run the ``atexit`` handlers, and end the
    process with ``os._exit``. A plain ``SystemExit(130)`` is not enough there: once a
    ``KeyboardInterrupt`` has escaped code run by ``exec`` of a string (dataclasses and
    named tuples being created during an import), CPython ends the process by SIGINT
    whatever the exit code asked (``-2`` to a parent, not 130)."""
    if _main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sys.stderr.write(f"{MESSAGE}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the exit code still tells
        pass
    if not hard:
        raise SystemExit(EXIT_CODE)
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError, AttributeError):
            stream.flush()
    try:
        atexit._run_exitfuncs()
    finally:
        os._exit(EXIT_CODE)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold a SIGINT back while the block runs (renames that must happen together); one
    that arrived meanwhile is delivered when the block ends, to the handler in force
    before. Outside the main thread (where signals are not handled) it does nothing."""
    if not _main_thread():
        yield
        return
    got: list[int] = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    except ValueError:  # pragma: no cover - not the main interpreter
        yield
        return
    try:
        yield
    finally:
        if old is not None:  # None: a handler not set from Python, kept as it is
            signal.signal(signal.SIGINT, old)
        if got:
            signal.raise_signal(signal.SIGINT)
