"""Whether this machine can run a live lab (root, ``ip netns``, FRR): one preflight for
every test module that starts one."""

from __future__ import annotations

import pytest

from aifabric.lab import LabError, preflight
from tests._require import NEED

try:
    preflight()
    NO_LAB = ""
except LabError as err:
    NO_LAB = str(err)

#: what a live lab needs, as a skip reason names it
LAB = "a live lab (root, ip netns, FRR)"
#: skip a test (or, as ``pytestmark``, a module) where no lab can run, with the reason; a
#: failure under AIFABRIC_REQUIRE_ALL=1 (the hook in tests/conftest.py: not allowlisted)
live = pytest.mark.skipif(bool(NO_LAB), reason=f"{NEED}{LAB}: {NO_LAB}")
