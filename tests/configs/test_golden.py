"""Golden files: a tiny fabric of each family builds to exactly the reviewed files.

Regenerate with ``python scripts/regen_golden.py`` after an intended change and review
the diff.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
_spec = importlib.util.spec_from_file_location("regen_golden", ROOT / "scripts" /
                                               "regen_golden.py")
assert _spec and _spec.loader
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)

FAMILIES = sorted(p.parent.name for p in GOLDEN.glob("*/spec.yaml"))


def test_every_family_has_a_golden_fabric():
    """One golden fabric per topology family."""
    from aifabric.topology.builders import BUILDERS

    assert set(FAMILIES) == set(BUILDERS)


@pytest.mark.parametrize("family", FAMILIES)
def test_build_output_equals_the_golden_files(family):
    """Same files, same bytes (run scripts/regen_golden.py to accept a change)."""
    folder = GOLDEN / family
    want = regen.golden_files(folder / "spec.yaml")
    have = regen.stored_files(folder)
    assert sorted(want) == sorted(have)
    for rel in sorted(want):
        assert want[rel] == have[rel], f"{family}/{rel} differs; run scripts/regen_golden.py"
