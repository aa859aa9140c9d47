"""Shared fixtures: the example fabrics (built once per session), a CLI runner, the
YANG-validation guard, the hypothesis profiles of the fuzz tests, and the hooks of
``AIFABRIC_REQUIRE_ALL`` (see tests/_require.py): with it set, a skip whose reason is not
on the allowlist fails, and the run ends with its skips grouped by reason."""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from aifabric import build_fabric, load_spec
from aifabric.topology import Fabric
from tests._require import REQUIRE_ALL, allowed, need, required

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
    __tracebackhide__ = True
    from aifabric.configs.yang import models_problem

    problem = models_problem()
    need(YANG_SKIP[len("needs "):], problem is None, problem or "", flag=REQUIRE_YANG)


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


def _skip_reason(rep) -> str:
    """The reason of a skipped report, without pytest's ``Skipped: `` prefix."""
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    return reason.removeprefix("Skipped: ")


def _required_skip(reason: str) -> str | None:
    """The flag that forbids this skip (``AIFABRIC_REQUIRE_ALL`` unless the reason is on
    the allowlist; ``AIFABRIC_REQUIRE_YANG`` for a YANG skip), or None."""
    if required() and not allowed(reason):
        return REQUIRE_ALL
    if YANG_SKIP in reason and required(REQUIRE_YANG):
        return REQUIRE_YANG
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip that :func:`_required_skip` forbids is a failure naming its reason (a
    ``skipif`` mark, a bare ``pytest.skip`` or one inside a dependency included)."""
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or hasattr(rep, "wasxfail"):
        return
    reason = _skip_reason(rep)
    flag = _required_skip(reason)
    if flag is not None:
        rep.outcome = "failed"
        rep.longrepr = f"{reason}\n{flag}=1: {_what(flag)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a whole module skipped at collection (``importorskip`` at the top)."""
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped:
        return
    reason = _skip_reason(rep)
    flag = _required_skip(reason)
    if flag is not None:
        rep.outcome = "failed"
        rep.longrepr = f"{reason}\n{flag}=1: {_what(flag)}"


def _what(flag: str) -> str:
    if flag == REQUIRE_YANG:
        return "YANG validation is required here"
    return ("every real part is required here; the allowed skips are in "
            "tests/_require.py ALLOWED_SKIPS")


def pytest_terminal_summary(terminalreporter):
    """"skips by reason": every skip of the run, counted per reason (location dropped),
    each marked allowed or not, so a CI log says at a glance what did not run."""
    skipped = terminalreporter.stats.get("skipped", [])
    counts = Counter(_skip_reason(r).split("\n")[0] for r in skipped)
    terminalreporter.write_sep("=", f"skips by reason ({len(skipped)})")
    if not skipped:
        terminalreporter.write_line("none: every selected test ran")
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        tag = "allowed" if allowed(reason) else "NOT allowed under " + REQUIRE_ALL
        terminalreporter.write_line(f"{n:5d}  {reason}  [{tag}]")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist's default distribution (``-n 2`` in pyproject's addopts), the
    two phases of tests/_phases.py: the independent files on every worker, then the live
    labs, servers, browser, Ray and timed tests alone on one worker."""
    if config.getoption("dist") != "load":
        return None
    from tests._phases import make_scheduler

    return make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """The controller's ``COLUMNS`` (or its absence) for the worker: an xdist worker
    starts with ``COLUMNS=80``, which would narrow the CLI's tables (tests/cli read them
    at the width a plain run has)."""
    node.workerinput["aifabric_columns"] = os.environ.get("COLUMNS")


def pytest_configure(config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "aifabric_columns" in workerinput:
        if workerinput["aifabric_columns"] is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = workerinput["aifabric_columns"]


def one_line_exit_2(r) -> str:
    """The one line a refusal printed (a ``cli`` result): exit 2, one line on stderr,
    no traceback."""
    __tracebackhide__ = True
    assert r.code == 2, (r.code, r.out, r.err)
    assert "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    return lines[0]


def families(text: str) -> dict[str, list]:
    """Samples of a Prometheus text scrape by sample name (prometheus-client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def edited_yaml(base: Path, dest: Path, change=None, **fields) -> Path:
    """``base``'s YAML document with ``change(doc)`` applied and each of ``fields`` set
    (one that is None or empty keeps the document's own), written to ``dest``."""
    import yaml

    doc = yaml.safe_load(base.read_text(encoding="utf-8"))
    if change:
        change(doc)
    doc.update({k: v for k, v in fields.items() if v})
    dest.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return dest


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
