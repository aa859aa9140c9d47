"""Every test that cannot run without a real part (a program, a Python package, root, a
lab) asks for it here, so one switch decides whether its absence is a skip or a failure.

- :func:`need` ``(part, available, reason)``: skip naming ``part`` (and ``reason``) when it
  is missing; a failure instead under ``AIFABRIC_REQUIRE_ALL=1`` (``.ci/run`` sets it) or
  the part's own older flag (``AIFABRIC_REQUIRE_PROMETHEUS``, ``..._BROWSER``, ``..._YANG``).
- :func:`need_tool` ``(name, package)``: a program on PATH (or an absolute path), its path.
- :func:`require_importorskip` ``(module, package)``: ``pytest.importorskip`` that obeys
  the switch; the module.
- :func:`skip_allowed` ``(key, detail)``: the only skips the switch lets pass: a fact of
  this machine or of this run, never a missing part; ``key`` must be in
  :data:`ALLOWED_SKIPS`.

The conftest hook (tests/conftest.py) is the net under all of this: with the switch set,
ANY skip (a ``skipif`` mark, a bare ``pytest.skip``, a module's ``importorskip``, one
inside a dependency) whose reason does not start with an :data:`ALLOWED_SKIPS` key fails.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

#: set to 1 (``.ci/run`` does) to turn every skip for a missing real part into a failure
REQUIRE_ALL = "AIFABRIC_REQUIRE_ALL"
#: every skip reason written by :func:`need` starts with this
NEED = "needs "

#: The skips that stay skips under ``AIFABRIC_REQUIRE_ALL=1``: reason prefix -> why it
#: is allowed. Keep it short; a missing program, package, privilege or lab never belongs.
ALLOWED_SKIPS: dict[str, str] = {
    # the automatic memory limit can only refuse the 10M-GPU spec (~26 GB) on a machine
    # with less free memory than that; a bigger machine cannot show the refusal
    "more free memory than the case needs":
        "the machine is larger than the refusal it would show",
    # `aifabric serve`'s default port is fixed (8050); another program may hold it
    "port already taken": "another program on this machine listens on the fixed port",
    # the SIGKILL test needs the build still running when it looks; a machine fast
    # enough to finish first leaves nothing to kill (a race the test cannot force)
    "the process finished before it could be killed":
        "timing of this machine, the case cannot be forced",
    # AIFABRIC_REGEN_GOLDEN=1 writes the golden files instead of comparing them (a
    # maintainer's run, never CI's)
    "golden files regenerated": "a maintainer's regeneration run, nothing to compare",
    # the lab's ECN marks need the kernel's RED qdisc (CONFIG_NET_SCH_RED); a kernel built
    # without it (a minimal VM kernel) cannot load it, and nothing installable adds it
    "the kernel has no RED qdisc": "the kernel's build of this machine, not a package",
    # the management network's MGMT_* tables need sonic-mgmt_port/_interface/_vrf.yang; a
    # models folder (AIFABRIC_SONIC_YANG) taken without them cannot check those tables,
    # and this repository ships none of SONiC's files (every other table is still checked)
    "the SONiC models have no management modules":
        "the models folder given, not a package this machine can install",
}


def _on(flag: str) -> bool:
    return os.environ.get(flag, "") not in ("", "0")


def required(flag: str | None = None) -> bool:
    """Whether a missing part fails: ``AIFABRIC_REQUIRE_ALL`` or the part's own ``flag``."""
    return _on(REQUIRE_ALL) or (flag is not None and _on(flag))


def need(part: str, available: bool, reason: str = "", *, flag: str | None = None,
         prefix: str = NEED) -> None:
    """Nothing when ``available``; else skip with ``"needs <part>: <reason>"``, or fail
    with that and the flag that requires it (``AIFABRIC_REQUIRE_ALL`` or ``flag``)."""
    __tracebackhide__ = True
    if available:
        return
    msg = f"{prefix}{part}" + (f": {reason}" if reason else "")
    if required(flag):
        which = REQUIRE_ALL if _on(REQUIRE_ALL) else flag
        pytest.fail(f"{msg}\n{which}=1: {part} is required here", pytrace=False)
    pytest.skip(msg)


def need_tool(name: str, package: str = "", *, flag: str | None = None) -> str:
    """The path of program ``name`` (on PATH, or an absolute path that is executable);
    see :func:`need` when it is missing (``package``: what installs it)."""
    __tracebackhide__ = True
    path = shutil.which(name) or (name if os.path.isabs(name) and os.access(name, os.X_OK)
                                  else None)
    need(name, path is not None,
         "not installed" + (f" ({package})" if package else ""), flag=flag)
    return path  # type: ignore[return-value]


def require_importorskip(module: str, package: str = "", reason: str = "") -> ModuleType:
    """Import ``module``; when it cannot be imported, see :func:`need` (``package``: the
    distribution that provides it, default the module's top name). Works at module level
    (the skip or failure is the module's)."""
    __tracebackhide__ = True
    dist = package or module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        why = reason or f"pip install -e '.[test]' ({exc})"
        msg = f"{NEED}the Python package {dist}: {why}"
        if required():
            pytest.fail(f"{msg}\n{REQUIRE_ALL}=1: {dist} is required here", pytrace=False)
        raise pytest.skip.Exception(msg, allow_module_level=True) from None


def skip_allowed(key: str, detail: str = "") -> NoReturn:
    """Skip for one of the :data:`ALLOWED_SKIPS` (a fact of the machine or the run)."""
    __tracebackhide__ = True
    if key not in ALLOWED_SKIPS:
        raise KeyError(f"{key!r} is not in tests/_require.py ALLOWED_SKIPS")
    pytest.skip(key + (f": {detail}" if detail else ""))


def allowed(reason: str) -> bool:
    """Whether a skip reason is on the allowlist."""
    return reason.startswith(tuple(ALLOWED_SKIPS))
