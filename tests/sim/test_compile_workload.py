"""compile_workload's failure path: an exception raised while placing the workload is
the one the caller sees (the traffic patterns are not compiled after it)."""

from __future__ import annotations

import pytest

from aifabric import build_fabric
from aifabric.errors import SpecError
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim import run as sim_run
from aifabric.sim.run import compile_workload
from aifabric.sim.scenario import SimScenario

SPEC = {"name": "rail-4x8",
        "hosts": {"count": 4, "gpus_per_host": 8, "nics_per_host": 8, "port_gbps": 400},
        "topology": {"family": "rail"}}
TRAFFIC = [{"pattern": "permutation", "gpus": "0:32", "shift": 8, "size_bytes": 1 << 20}]


def _scenario(tmp_path, **body):
    return scenario_from_dict({"name": "t", "spec": SPEC, "routing": {"policy": "ecmp"},
                               **body}, base_dir=tmp_path, model=SimScenario)


def test_traffic_alone_compiles(tmp_path):
    """The control: the same traffic with a workload that places compiles to one stage of
    32 transfers (so the failure below comes from the trace, not the traffic)."""
    scn = _scenario(tmp_path, traffic=TRAFFIC)
    wl = compile_workload(scn, build_fabric(scn.spec))
    assert wl.dag.n_transfers == 32


def test_an_exception_while_placing_reaches_the_caller_unmasked(tmp_path, monkeypatch):
    """The trace folder does not exist: compile_workload raises the SpecError naming
    ``workload.chakra``. The traffic patterns, which would be compiled next, fail here
    with an error of their own (fault injected into the traffic step): the caller must
    still see the first error, and the traffic step must not run at all. (A ``finally:``
    that compiled the traffic replaced the first error with the second.)"""
    calls = []

    def failing_traffic(*args, **kwargs):
        calls.append(args)
        raise RuntimeError("traffic step ran after the workload failed")

    monkeypatch.setattr(sim_run, "_add_traffic", failing_traffic)
    scn = _scenario(tmp_path, traffic=TRAFFIC,
                    workload={"chakra": str(tmp_path / "missing" / "trace"), "ranks": 2})
    with pytest.raises(SpecError) as err:
        compile_workload(scn, build_fabric(scn.spec))
    assert [p.path for p in err.value.problems] == ["workload.chakra"]
    assert "no such folder" in err.value.problems[0].message
    assert err.value.__context__ is None  # raised first, nothing raised while handling it
    assert calls == []
