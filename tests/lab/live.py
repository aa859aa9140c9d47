"""Whether this machine can run a live lab (root, ``ip netns``, FRR): one preflight for
every test module that starts one."""

from __future__ import annotations

import pytest

from aifabric.lab import LabError, preflight

try:
    preflight()
    NO_LAB = ""
except LabError as err:
    NO_LAB = str(err)

#: skip a test (or, as ``pytestmark``, a module) where no lab can run, with the reason
live = pytest.mark.skipif(bool(NO_LAB), reason=f"lab unavailable: {NO_LAB}")
