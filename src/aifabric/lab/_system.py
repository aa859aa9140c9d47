"""What the lab needs from the machine, and the one way it runs commands.

:func:`preflight` refuses early, with one line, when the lab cannot work here: not
root, no ``ip netns``, no FRR (with the command that installs it), no ``ping``.
:func:`run` runs one command and raises :class:`LabError` with its stderr on failure;
:func:`run_many` runs independent commands in parallel threads (each is a process, so
the GIL is no bottleneck).
"""

from __future__ import annotations

import contextlib
import grp
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["FRR_DIR", "INSTALL_HINT", "VTY_GROUP", "LabError", "preflight", "run", "run_many",
           "running", "terminate"]

FRR_DIR = "/usr/lib/frr"
INSTALL_HINT = "apt-get install -y frr iputils-ping iproute2"
#: FRR daemons run as root in this group, the group of their vty sockets
VTY_GROUP = "frrvty"


class LabError(Exception):
    """The lab cannot do what was asked; the message is one line for the user."""


def preflight() -> None:
    """Raise :class:`LabError` unless this machine can run a lab."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root (network namespaces, veth pairs, routing daemons);"
                       " run it with sudo")
    if shutil.which("ip") is None:
        raise LabError(f"`ip` (iproute2) not found; install it: {INSTALL_HINT}")
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise LabError(f"`ip netns` is not available here ({probe.stderr.strip() or 'exit '}"
                       f"{probe.returncode}); the lab needs network namespaces")
    missing = [d for d in ("zebra", "bgpd", "staticd")
               if not os.access(os.path.join(FRR_DIR, d), os.X_OK)]
    if missing or shutil.which("vtysh") is None:
        what = ", ".join(missing + ([] if shutil.which("vtysh") else ["vtysh"]))
        raise LabError(f"FRR is not installed ({what} missing); install it: {INSTALL_HINT}")
    try:
        grp.getgrnam(VTY_GROUP)
    except KeyError:
        raise LabError(f"FRR's group {VTY_GROUP!r} is missing (a broken FRR install); "
                       f"reinstall it: {INSTALL_HINT}") from None
    if shutil.which("ping") is None:
        raise LabError(f"`ping` not found; install it: {INSTALL_HINT}")


def run(cmd: Sequence[str], *, input: str | None = None, check: bool = True,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; on failure raise LabError naming the command and its stderr."""
    try:
        proc = subprocess.run(list(cmd), input=input, capture_output=True, text=True,
                              check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LabError(f"`{' '.join(cmd[:6])}` did not finish in {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise LabError(f"`{' '.join(cmd[:8])}` failed: {err[-1] if err else proc.returncode}")
    return proc


def run_many(cmds: Sequence[Sequence[str]], *, check: bool = True, workers: int = 16,
             timeout: float = 60) -> list[subprocess.CompletedProcess[str]]:
    """Run independent commands in parallel; results in the order given."""
    if not cmds:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(cmds))) as pool:
        futures = [pool.submit(run, c, check=check, timeout=timeout) for c in cmds]
        return [f.result() for f in futures]


def running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def terminate(pids: Iterable[int], timeout_s: float = 5.0, *,
              alive: Callable[[int], bool] = running,
              first: Sequence[signal.Signals] = (signal.SIGTERM,)) -> list[int]:
    """Stop ``pids`` by pid: the ``first`` signals (SIGTERM), a wait of up to
    ``timeout_s`` while any is ``alive``, then SIGKILL for what is left. Returns the pids
    still alive a moment after that (none, normally)."""
    mine = sorted(set(pids))
    for sig in first:
        for p in mine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
    deadline = time.monotonic() + timeout_s
    while mine and time.monotonic() < deadline:
        mine = [p for p in mine if alive(p)]
        if mine:
            time.sleep(0.05)
    if not mine:
        return []
    for p in mine:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    time.sleep(0.1)
    return [p for p in mine if alive(p)]
