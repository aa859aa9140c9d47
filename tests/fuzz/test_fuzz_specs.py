"""Fuzzed cluster specs of every family: a SpecError with one-line problems, or a fabric
that satisfies the plan invariants; through the CLI, exit 2 exactly when the library
raises SpecError."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric import SpecError
from tests.fuzz import examples
from tests.fuzz.helpers import (
    assert_cli_error,
    built_or_refused,
    check_plan,
    plan_pipeline,
    run_cli,
)
from tests.fuzz.strategies import FAMILIES, broken, plausible_spec, specs


@pytest.fixture(autouse=True, scope="module")
def _memory_limit():
    """The size guard refuses fabrics over 16 MB (huge fuzzed counts; the generated
    fabrics need well under 1 MB), which also keeps every example fast."""
    mp = pytest.MonkeyPatch()
    mp.setenv("AIFABRIC_MAX_MEMORY", "16M")
    yield
    mp.undo()


def _check(doc) -> bool:
    return built_or_refused(plan_pipeline, check_plan, doc)


#: failures the fuzzer found, kept as fixed examples (minimal reproducers)
FOUND = {
    # YAML .inf as a bandwidth: a ValueError traceback from plan (NaN to integer)
    "infinite-scaleup": {"hosts": {"count": 4, "nics_per_host": 2, "gpus_per_host": 2,
                                   "scaleup_gbps": float("inf")},
                         "topology": {"family": "clos", "leaf": {"model": "tomahawk3"},
                                      "spine": {"model": "tomahawk3"}}},
    # YAML .inf as a cable length: an OverflowError traceback
    "infinite-cable": {"hosts": {"count": 4, "nics_per_host": 2, "gpus_per_host": 2},
                       "latency": {"access_m": float("inf")},
                       "topology": {"family": "clos", "leaf": {"model": "tomahawk3"},
                                    "spine": {"model": "tomahawk3"}}},
    # NVLink at 10^12 Gbit/s: plan's link-table key overflowed (a ValueError traceback)
    "huge-scaleup": {"hosts": {"count": 4, "nics_per_host": 2, "gpus_per_host": 2,
                               "scaleup_gbps": 10**12},
                     "topology": {"family": "clos", "leaf": {"model": "tomahawk3"},
                                  "spine": {"model": "tomahawk3"}}},
    # a latency beyond int32 nanoseconds: an OverflowError traceback
    "huge-latency": {"hosts": {"count": 4, "nics_per_host": 2, "gpus_per_host": 2},
                     "latency": {"scaleup_ns": 2**63},
                     "topology": {"family": "clos", "leaf": {"model": "tomahawk3"},
                                  "spine": {"model": "tomahawk3"}}},
    # HPN agg with 10^12 down ports: an int32 OverflowError in the builder
    "huge-agg-ports": {"hosts": {"count": 8, "nics_per_host": 2, "gpus_per_host": 2,
                                 "ports_per_nic": 2, "port_gbps": 200},
                       "topology": {"family": "hpn", "hosts_per_segment": 4,
                                    "tor": {"up_ports": 4},
                                    "agg": {"down_ports": 10**12, "up_ports": 2}}},
    # a switch model of 2^63 ports or lanes: OverflowError tracebacks (plan, builder)
    "huge-model-ports": {"hosts": {"count": 1, "nics_per_host": 1, "gpus_per_host": 1},
                         "switch_models": {"tiny": {"ports": 2**63, "port_gbps": 400}},
                         "topology": {"family": "single_tor", "tor": {"model": "tomahawk3"},
                                      "agg": {"model": "tiny"},
                                      "core": {"model": "tomahawk3"}}},
    "huge-model-lanes": {"hosts": {"count": 1, "nics_per_host": 1, "gpus_per_host": 1,
                                   "ports_per_nic": 2, "port_gbps": 100},
                         "switch_models": {"tiny": {"ports": 8, "port_gbps": 400,
                                                    "breakouts": [1, 2],
                                                    "lanes_per_port": 2**63}},
                         "topology": {"family": "single_tor", "tor": {"model": "tomahawk3"},
                                      "agg": {"model": "tiny"},
                                      "core": {"model": "tomahawk3"}}},
    # an infinite oversubscription was accepted and built 8:1
    "infinite-oversubscription": {"hosts": {"count": 4, "nics_per_host": 2,
                                            "gpus_per_host": 2},
                                  "topology": {"family": "clos",
                                               "oversubscription": float("inf"),
                                               "leaf": {"model": "tomahawk3"},
                                               "spine": {"model": "tomahawk3"}}},
    # ToRs with every port on hosts and several pods: an IndexError in the agg plan
    "pods-without-uplinks": {"hosts": {"gpus_per_host": 2, "nics_per_host": 2,
                                       "port_gbps": 200, "ports_per_nic": 2, "count": 5},
                             "switch_models": {"tiny": {"ports": 8, "port_gbps": 400}},
                             "topology": {"family": "single_tor", "tor": {"model": "tiny"},
                                          "agg": {"model": "tomahawk3"},
                                          "core": {"model": "tomahawk3"},
                                          "hosts_per_tor": 4, "tors_per_pod": 1}},
    # a pod size beyond int64: an OverflowError in the single-ToR builder
    "huge-tors-per-pod": {"hosts": {"count": 4, "nics_per_host": 2, "gpus_per_host": 2},
                          "topology": {"family": "single_tor", "tor": {"model": "tomahawk3"},
                                       "agg": {"model": "tomahawk3"},
                                       "core": {"model": "tomahawk3"},
                                       "tors_per_pod": 2**63}},
}


@pytest.mark.parametrize("name", FOUND)
def test_found_by_fuzzing(name):
    """Each fails with one-line problems (they were tracebacks or silently accepted)."""
    assert not _check(FOUND[name])


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=examples(150))
@given(data=st.data())
def test_plausible_specs_build_a_fabric_that_keeps_the_invariants_or_say_why(family, data):
    """Tiny specs of each family, mostly valid: every success keeps the invariants."""
    _check(data.draw(plausible_spec(family), label="spec"))


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=examples(100))
@given(data=st.data())
def test_broken_specs_fail_with_one_line_problems(family, data):
    """1-3 fields deleted, retyped, out of range or misspelt: no exception but SpecError
    escapes, and what builds keeps the invariants."""
    _check(data.draw(broken(plausible_spec(family)), label="spec"))


@settings(max_examples=examples(60))
@given(doc=specs())
def test_plan_command_exit_code_agrees_with_the_library(doc):
    """``aifabric plan FILE --json``: exit 2 with ``error:`` lines exactly when the library
    raises SpecError; otherwise exit 0 and the plan as JSON."""
    try:
        plan_pipeline(doc)
        ok = True
    except SpecError:
        ok = False
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
        r = run_cli("plan", path, "--json")
    if ok:
        assert r.code == 0, (r.code, r.err[-2000:])
        import json

        plan = json.loads(r.out)
        assert plan["gpus"] >= 1
    else:
        assert_cli_error(r)
