"""Fuzzed simulation scenarios on tiny fabrics of every family, under every simulator
(flow, analytic, packet): a SpecError with one-line problems, or a result whose figures
are finite and consistent; through the CLI, exit 2 exactly when the library raises
SpecError, else 0 (finished) or 1 (alarms or unfinished)."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aifabric import SpecError, build_fabric
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario
from tests.fuzz import examples
from tests.fuzz.helpers import (
    assert_cli_error,
    built_or_refused,
    run_cli,
)
from tests.fuzz.strategies import SIMS, SMALL_SPECS, scenarios

#: the size guard's limit for the fabric of a fuzzed scenario (the generated fabrics need
#: well under 1 MB; huge fuzzed counts are refused, and every example stays fast) and for
#: its workload (the guard's estimate of a run starts at 256 MB)
FABRIC_LIMIT, RUN_LIMIT = "16M", "512M"


@pytest.fixture(autouse=True, scope="module")
def _memory_limit():
    mp = pytest.MonkeyPatch()
    mp.setenv("AIFABRIC_MAX_MEMORY", RUN_LIMIT)
    yield
    mp.undo()


def _fabric_fits(spec) -> bool:
    from aifabric import guard

    try:
        return guard.estimate_fabric(spec).peak_bytes <= guard.parse_size(FABRIC_LIMIT)
    except SpecError:
        return True  # the build refuses it


#: packet runs estimated above this many events are refused (a fuzzed 1 GB transfer
#: must not run for minutes): the CLI's ``--max-events``, scaled to tiny runs
MAX_EVENTS = 1e6


def run_pipeline(doc):
    """``aifabric simulate`` in-process: validate, size guard, build, compile (its memory
    guard), simulate (packet: the event guard)."""
    from aifabric import guard

    scn = scenario_from_dict(doc, model=SimScenario)
    guard.set_limit(FABRIC_LIMIT)
    try:
        guard.check_fabric(scn.spec)
    finally:
        guard.set_limit(None)
    fabric = build_fabric(scn.spec)
    wl = compile_workload(scn, fabric)
    return scn, fabric, simulate(scn, fabric, workload=wl, max_events=MAX_EVENTS)


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def check_result(scn, fabric, res) -> None:
    """A run's figures: finite, non-negative times; every collective of the scenario
    reported, with positive bandwidths when the run finished; table
    columns of one length; a summary that is valid JSON."""
    s = res.summary
    finished = s.get("finished", True)
    assert _finite(res.makespan_ns) and res.makespan_ns >= 0, res.makespan_ns
    assert len(s["collectives"]) >= len(scn.collectives)
    for c in s["collectives"]:
        assert c["gpus"] >= 1 and c["size_bytes"] >= 0, c
        if finished and c["gpus"] >= 2 and c["size_bytes"] > 0:
            assert _finite(c["time_ns"]) and c["time_ns"] > 0, c
            assert _finite(c["algbw_GBps"]) and c["algbw_GBps"] > 0, c
            assert _finite(c["busbw_GBps"]) and c["busbw_GBps"] >= 0, c
    for name, table in res.tables.items():
        lengths = {len(np.asarray(v)) for v in table.values()}
        assert len(lengths) <= 1, (name, lengths)
    json.dumps(s, allow_nan=True, default=str)


def _check(doc) -> bool:
    return built_or_refused(run_pipeline, check_result, doc)


#: failures the fuzzer found, kept as fixed examples (minimal reproducers)
FOUND = {
    # a spec path with a newline made a problem of two lines (a forged "error:" line)
    "newline-in-path": {"spec": "x\ntouch /tmp/pwned",
                        "collectives": [{"op": "allreduce", "size_bytes": 4096, "gpus": 2}]},
    # an infinite start time was accepted (the collective never starts)
    "infinite-start": {"spec": SMALL_SPECS["clos"],
                       "collectives": [{"op": "allreduce", "size_bytes": 4096, "gpus": 2,
                                        "start_ms": float("inf")}]},
}


@pytest.mark.parametrize("name", FOUND)
def test_found_by_fuzzing(name):
    """Each fails with one-line problems."""
    assert not _check(FOUND[name])


def test_the_small_fabrics_build():
    """The fabrics the scenarios run on are valid (so most examples reach a simulator)."""
    for doc in SMALL_SPECS.values():
        build_fabric(scenario_from_dict({"spec": doc}, model=SimScenario).spec)


@pytest.mark.parametrize("sim", ["flow", "analytic"])
@settings(max_examples=examples(250))
@given(data=st.data())
def test_scenarios_run_or_fail_with_one_line_problems(sim, data):
    """Collectives, jobs and traffic (valid and broken) on every family."""
    _check(data.draw(scenarios(sim), label="scenario"))


@settings(max_examples=examples(120))
@given(doc=scenarios("packet"))
def test_packet_scenarios_run_or_fail_with_one_line_problems(doc):
    """The packet simulator on a few KB per transfer: every family, every CC."""
    _check(doc)


@settings(max_examples=examples(40))
@given(doc=scenarios())
def test_simulate_command_exit_code_agrees_with_the_library(doc):
    """``aifabric simulate FILE --json``: exit 2 with ``error:`` lines exactly when the
    library raises SpecError; else 0 or 1 (alarms, unfinished) and the summary as JSON."""
    try:
        scn = scenario_from_dict(doc, model=SimScenario)
    except SpecError:
        pass
    else:
        assume(_fabric_fits(scn.spec))  # the CLI's limit is the run's, not the fabric's
    try:
        run_pipeline(doc)
        ok = True
    except SpecError:
        ok = False
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
        r = run_cli("simulate", path, "--json", "--max-events", f"{MAX_EVENTS:g}",
                    "--max-memory", RUN_LIMIT)
    if ok:
        assert r.code in (0, 1), (r.code, r.err[-2000:])
        summary = json.loads(r.out)
        assert summary["sim"] in SIMS
    else:
        assert_cli_error(r)
