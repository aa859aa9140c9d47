"""Writing outputs: every file and folder aifabric writes goes through here.

* **Atomic**: a file or folder is written under a temporary name beside its target and
  renamed into place at the end, so a failure (bad input, a full disk, Ctrl-C) never leaves
  a partial output, and a previous output stays as it was until the new one is complete
  (a Ctrl-C during the renames waits for them: :func:`aifabric.interrupts.deferred`).
* **One-line errors**: a target of the wrong kind (a folder where a file goes, or the
  reverse), a missing parent folder, or an operating-system refusal (permissions, a
  read-only file system, a full disk) raise :class:`~aifabric.errors.SpecError` naming the
  option (``--out``, ``--write``, ...) and what is allowed.
* **Permissions follow the umask**, like ``open()`` and ``mkdir``: files
  ``0o666 & ~umask`` (scripts ``0o777 & ~umask``), folders ``0o777 & ~umask``.
* **No stale temporaries**: temporaries are named ``.<target>.aifabric-tmp-<pid>@<host>-*``;
  a run removes those, in its target's folder, whose process is dead on this host (a run
  killed with SIGKILL cannot clean up after itself). Those of live processes are left.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aifabric.errors import Problem, SpecError
from aifabric.interrupts import deferred

__all__ = ["BUILD", "REPORT", "ROUTE", "atomic_folder", "check_target", "clean_stale",
           "temp_prefix", "umask", "write_file"]

TAG = ".aifabric-tmp-"

#: the output folders aifabric replaces: the file that marks a previous one, and its name
REPORT = {"marker": "report.md", "what": "a previous report"}
ROUTE = {"marker": "report.json", "what": "a previous route output"}
BUILD = {"marker": "spec.yaml", "what": "an aifabric build folder"}
_STALE = re.compile(r"\.aifabric-tmp-(\d+)@(.*)-[^-]*\Z")


def umask() -> int:
    """The process umask, read without changing it where the system allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - systems without /proc
    os.umask(mask)  # pragma: no cover
    return mask  # pragma: no cover


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def temp_prefix(target: str | os.PathLike[str], pid: int | None = None) -> str:
    """The name prefix of the temporaries of ``target`` made by process ``pid`` (this
    one by default) on this host: ``.<name>.aifabric-tmp-<pid>@<host>-``."""
    return f".{Path(target).name}{TAG}{os.getpid() if pid is None else pid}@{_host()}-"


_prefix = temp_prefix


def _alive(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # it exists, run by another user
        return True
    return True


def clean_stale(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries in ``folder`` left by aifabric runs that died on this host;
    returns what was removed. Temporaries of live processes (or other hosts) are left."""
    removed: list[Path] = []
    host = _host()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        m = _STALE.search(e.name) if e.name.startswith(".") else None
        if m is None or m.group(2) != host or _alive(int(m.group(1))):
            continue
        try:
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path)
            else:
                os.unlink(e.path)
        except OSError:
            continue
        removed.append(Path(e.path))
    return removed


def _os_problem(option: str, shown: str, exc: OSError) -> SpecError:
    reason = exc.strerror or type(exc).__name__
    return SpecError(Problem(option, f"cannot write {shown}: {reason}; allowed: a path in "
                             "a folder you can write to"))


def check_target(path: str | os.PathLike[str], *, option: str = "--out", folder: bool,
                 marker: str | None = None, what: str = "a previous output"
                 ) -> tuple[Path, str]:
    """Check, before any work, that ``path`` can take a file (``folder=False``) or a folder
    (see :func:`atomic_folder` for ``marker`` and ``what``); returns the absolute target and
    how to show it. Raises a one-line :class:`SpecError` naming ``option`` otherwise."""
    shown = os.fspath(path)
    target = Path(os.path.abspath(shown))
    if not target.name:
        raise SpecError(Problem(option, f"{shown!r} is not a file or folder name; allowed: "
                                "a path like out/result"))
    parent = target.parent
    allowed = f"allowed: a new or empty folder, or {what}"
    try:
        if not parent.exists():
            raise SpecError(Problem(option, f"folder {parent} does not exist; allowed: a "
                                    "path in an existing folder"))
        if not parent.is_dir():
            raise SpecError(Problem(option, f"{parent} is a file, not a folder; allowed: a "
                                    "path in an existing folder"))
        if not folder:
            if target.is_dir():
                raise SpecError(Problem(option, f"{shown} is a folder; allowed: a file path"))
        elif target.exists() or target.is_symlink():
            if not target.is_dir():
                raise SpecError(Problem(option, f"{shown} is a file; {allowed}"))
            if marker is not None and not (target / marker).is_file() \
                    and any(target.iterdir()):
                raise SpecError(Problem(option, f"{shown} exists and is not {what} (it has "
                                        f"no {marker}); {allowed}"))
        # can we create here? (permissions, a read-only or full file system): ask the
        # system itself, which also answers for root, before any long work
        os.rmdir(tempfile.mkdtemp(prefix=_prefix(target), dir=parent))
    except OSError as exc:
        raise _os_problem(option, shown, exc) from None
    return target, shown


def write_file(path: str | os.PathLike[str], data: str | bytes, *, option: str = "--out",
               executable: bool = False) -> Path:
    """Write ``data`` (text as UTF-8) to the file ``path`` atomically; returns the path.

    ``option`` names the command-line option that gave ``path`` in error messages.
    """
    target, shown = check_target(path, option=option, folder=False)
    clean_stale(target.parent)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=_prefix(target), dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.chmod(tmp, (0o777 if executable else 0o666) & ~umask())
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise _os_problem(option, shown, exc) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return target


@contextmanager
def atomic_folder(path: str | os.PathLike[str], *, option: str = "--out",
                  marker: str | None = None, what: str = "a previous output"
                  ) -> Iterator[Path]:
    """Build a folder atomically: write into the yielded temporary folder; when the block
    ends without error it replaces ``path`` at once (a previous folder there is removed),
    otherwise it is removed and ``path`` is untouched.

    ``path`` may be absent, an empty folder, or, with ``marker``, a folder that holds the
    file ``marker`` (``what``: how a user calls such a folder, for the error message);
    another folder is never replaced.
    """
    target, shown = check_target(path, option=option, folder=True, marker=marker, what=what)
    clean_stale(target.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(target), dir=target.parent))
    except OSError as exc:
        raise _os_problem(option, shown, exc) from None
    try:
        os.chmod(tmp, 0o777 & ~umask())
        yield tmp
        with deferred():  # Ctrl-C: never between the two renames
            aside = None
            if target.exists():
                aside = target.parent / (_prefix(target) + "old")
                os.replace(target, aside)
            try:
                os.replace(tmp, target)
            except OSError:
                if aside is not None:  # put the previous output back
                    os.replace(aside, target)
                raise
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    except OSError as exc:
        with deferred():
            shutil.rmtree(tmp, ignore_errors=True)
        raise _os_problem(option, shown, exc) from None
    except BaseException:
        with deferred():  # a second Ctrl-C still removes the temporary
            shutil.rmtree(tmp, ignore_errors=True)
        raise
