"""``af.plan`` / ``af.goodput`` are both the API functions and the subpackages
``aifabric.plan`` / ``aifabric.goodput`` (callable modules): every import order works, in a
fresh interpreter each, and ``import aifabric`` stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import EXAMPLES, ROOT

SPEC = str(EXAMPLES / "single-tor-dcn.yaml")

PLAN_FIRST = f"""
import aifabric as af
p = af.plan({SPEC!r}, bisection=False)
import aifabric.plan.summary as s
from aifabric.plan import plan_fabric
assert s.plan_fabric is plan_fabric
assert af.plan({SPEC!r}, bisection=False) == p
assert af.plan(af.build_fabric(af.load_spec({SPEC!r})), bisection=False).gpus == p.gpus > 0
print("ok", p.gpus)
"""

SUBMODULE_FIRST = f"""
import aifabric.plan.summary as s
from aifabric.plan import plan_fabric
import aifabric as af
import aifabric.plan
assert af.plan is aifabric.plan and s.plan_fabric is plan_fabric
p = af.plan({SPEC!r}, bisection=False)
assert p.to_dict() == s.plan_fabric(af.build_fabric(af.load_spec({SPEC!r})), bisection=False)
print("ok", p.gpus)
"""

GOODPUT_ORDERS = f"""
import inspect
import aifabric as af
from aifabric.goodput.model import run_goodput
import aifabric.goodput.spec as gs
from aifabric.goodput import run_goodput as lazy
assert lazy is run_goodput and gs.GoodputScenario is af.GoodputScenario
assert callable(af.goodput) and "trials" in inspect.signature(af.goodput).parameters
assert "bisection" in inspect.signature(af.plan).parameters
r = af.goodput({str(EXAMPLES / "scenarios" / "goodput-single-tor.yaml")!r}, trials=5)
assert 0 < r.summary["ettr"]["mean"] <= 1
print("ok")
"""

LIGHT = """
import sys
import aifabric as af
heavy = [m for m in ("numpy", "pydantic", "pandas", "scipy", "numba", "aifabric.plan",
                     "aifabric.goodput", "aifabric.api") if m in sys.modules]
print("heavy", heavy)
"""


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


@pytest.mark.parametrize("code", [PLAN_FIRST, SUBMODULE_FIRST, GOODPUT_ORDERS],
                         ids=["function-then-submodule", "submodule-then-function",
                              "goodput"])
def test_import_orders(code):
    assert _run(code).startswith("ok")


def test_import_aifabric_imports_neither_package():
    assert _run(LIGHT).strip() == "heavy []"
