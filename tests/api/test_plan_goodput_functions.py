"""``af.plan`` / ``af.goodput`` are plain functions of :mod:`aifabric.api`, whatever was
imported before them: their packages are ``aifabric.planning`` and
``aifabric.reliability``, so no package shares a name with a function (each case runs in
a fresh interpreter), and ``import aifabric`` stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import EXAMPLES, ROOT

SPEC = str(EXAMPLES / "single-tor-dcn.yaml")

PACKAGES_FIRST = f"""
import types
import aifabric.planning.summary as s
from aifabric.planning import plan_fabric
from aifabric.reliability.model import run_goodput
import aifabric.reliability
import aifabric as af
import aifabric.api as api
assert af.plan is api.plan and af.goodput is api.goodput
assert isinstance(af.plan, types.FunctionType) and isinstance(af.goodput, types.FunctionType)
assert type(aifabric.planning) is types.ModuleType and not callable(aifabric.planning)
assert type(aifabric.reliability) is types.ModuleType and not callable(aifabric.reliability)
assert s.plan_fabric is plan_fabric and aifabric.reliability.run_goodput is run_goodput
p = af.plan({SPEC!r}, bisection=False)
assert p.to_dict() == s.plan_fabric(af.build_fabric(af.load_spec({SPEC!r})), bisection=False)
print("ok", p.gpus)
"""

FUNCTIONS_FIRST = f"""
import inspect, types
import aifabric as af
p = af.plan({SPEC!r}, bisection=False)
import aifabric.planning, aifabric.reliability
assert isinstance(af.plan, types.FunctionType) and isinstance(af.goodput, types.FunctionType)
assert "trials" in inspect.signature(af.goodput).parameters
assert "bisection" in inspect.signature(af.plan).parameters
assert af.plan({SPEC!r}, bisection=False) == p
r = af.goodput({str(EXAMPLES / "scenarios" / "goodput-single-tor.yaml")!r}, trials=5)
assert 0 < r.summary["ettr"]["mean"] <= 1
print("ok", p.gpus)
"""

LIGHT = """
import sys
import aifabric as af
heavy = [m for m in ("numpy", "pydantic", "pandas", "scipy", "numba", "aifabric.planning",
                     "aifabric.reliability", "aifabric.api") if m in sys.modules]
print("heavy", heavy)
"""


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


@pytest.mark.parametrize("code", [PACKAGES_FIRST, FUNCTIONS_FIRST],
                         ids=["packages-then-functions", "functions-then-packages"])
def test_plan_and_goodput_are_functions(code):
    assert _run(code).startswith("ok")


def test_import_aifabric_imports_neither_package():
    assert _run(LIGHT).strip() == "heavy []"
