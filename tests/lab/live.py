"""Whether this machine can run a live lab (root, ``ip netns``, FRR): one preflight for
every test module that starts one."""

from __future__ import annotations

from contextlib import contextmanager

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


def sessions_missing(lab, timeout_s: float = 90.0) -> list[tuple[str, str, str]]:
    """(switch, peer, state) of every BGP session the model expects that is not
    Established, polled until none is (or ``timeout_s``)."""
    import time

    import numpy as np

    from aifabric.lab.verify import bgp_sessions, expected_sessions

    f = lab.fabric
    want = expected_sessions(f, np.ones(len(f.links), dtype=bool))
    t0 = time.monotonic()
    while True:
        got = bgp_sessions(lab.dir, lab.layout.switches)
        bad = [(sw, peer, got.get(sw, {}).get(peer, "missing"))
               for sw in lab.layout.switches for peer in sorted(want[sw])
               if got.get(sw, {}).get(peer) != "Established"]
        if not bad or time.monotonic() - t0 > timeout_s:
            return bad
        time.sleep(0.5)


def routes_missing(lab, timeout_s: float = 60.0) -> list:
    """``(switch, nic ip, kernel, model)`` of every ECMP group in the switches' kernels
    that differs from the routing model's, polled until none does (or ``timeout_s``):
    a session is Established before its routes reach the kernel, and until they do a
    switch drops the packets it has no route for (``InNoRoutes``)."""
    import time

    import numpy as np

    from aifabric.lab.verify import compare_groups, kernel_groups, model_groups

    f = lab.fabric
    sw = lab.layout.switches
    want = model_groups(f, np.ones(len(f.links), dtype=bool), sw)
    t0 = time.monotonic()
    while True:
        diff = compare_groups(kernel_groups(f, lab.layout.ns, sw), want)
        if not diff or time.monotonic() - t0 > timeout_s:
            return diff
        time.sleep(0.5)


@contextmanager
def established_lab(lab_dir, spec, scale: str = "small", **up_kwargs):
    """``lab up`` of ``spec`` in ``lab_dir``, yielded once every BGP session is
    Established and every switch's kernel holds the model's ECMP groups (``lab up``
    returns once the daemons run: a session still connecting, or a route not yet
    installed, would read as a deviation or a loss), then taken down; no namespace of it
    may be left."""
    from aifabric.lab import core as lab_core
    from aifabric.lab import lab_namespaces

    up = lab_core.up(spec, scale, lab_dir, **up_kwargs)
    prefix = up.prefix
    try:
        missing = sessions_missing(up)
        assert not missing, f"BGP sessions not established after 90 s: {missing[:5]}"
        diff = routes_missing(up)
        assert not diff, f"kernel routes differ from the model's after 60 s: {diff[:5]}"
        yield up
    finally:
        if (lab_dir / "state.json").exists():
            lab_core.down(lab_dir)
        assert lab_namespaces(prefix) == []
