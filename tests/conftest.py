"""Shared fixtures: the example fabrics (built once per session), a CLI runner, the
YANG-validation guard and the hypothesis profiles of the fuzz tests."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from aifabric import build_fabric, load_spec
from aifabric.topology import Fabric

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: set to 1 (``.ci/run`` does) to make a test that skips for lack of the SONiC YANG
#: models or yanglint fail instead, so CI always validates the generated configs
REQUIRE_YANG = "AIFABRIC_REQUIRE_YANG"
#: every such skip reason starts with this
YANG_SKIP = "needs SONiC YANG validation (AIFABRIC_SONIC_YANG)"


def need_sonic_yang() -> None:
    """Skip, naming ``AIFABRIC_SONIC_YANG`` and what is missing, unless yanglint and the
    SONiC YANG models are both there (a fresh clone has no models; see README)."""
    from aifabric.configs.yang import models_problem

    problem = models_problem()
    if problem is not None:
        pytest.skip(f"{YANG_SKIP}: {problem}")


# Hypothesis (the fuzz tests in tests/fuzz): the same examples on every run (derandomize:
# a fixed seed per test, so CI is deterministic) and no example database written (no
# .hypothesis folder). ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples instead;
# ``AIFABRIC_FUZZ_SCALE=10`` multiplies the example counts (see tests/fuzz/__init__.py).
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass
else:
    _quiet = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
              HealthCheck.function_scoped_fixture]
    settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                              print_blob=True, suppress_health_check=_quiet)
    settings.register_profile("explore", derandomize=False, database=None, deadline=None,
                              print_blob=True, suppress_health_check=_quiet)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``AIFABRIC_REQUIRE_YANG=1`` a YANG skip is a failure."""
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or os.environ.get(REQUIRE_YANG, "") in ("", "0"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if YANG_SKIP in reason:
        rep.outcome = "failed"
        rep.longrepr = f"{reason}\n{REQUIRE_YANG}=1: YANG validation is required here"


@cache
def example(name: str) -> Fabric:
    """The fabric of ``examples/<name>.yaml`` (built once per test session)."""
    return build_fabric(load_spec(EXAMPLES / f"{name}.yaml"))


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the real ``aifabric`` entry point in-process: ``cli("plan", "x.yaml")``."""
    from aifabric.cli import main

    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["aifabric", *map(str, args)])
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        cap = capsys.readouterr()
        return Result(code, cap.out, cap.err)

    return run
