"""What the fuzz properties share: the library pipelines the CLI runs, the error contract,
the plan invariants, and an in-process CLI runner."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aifabric import SpecError, build_fabric, plan_fabric, spec_from_dict
from aifabric.topology import LinkKind
from tests.invariants import check_all


def plan_pipeline(doc: Any) -> tuple[Any, Any, dict]:
    """``aifabric plan`` in-process: validate, size guard, build, plan."""
    from aifabric.guard import check_fabric

    spec = spec_from_dict(doc)
    check_fabric(spec)
    fabric = build_fabric(spec)
    return spec, fabric, plan_fabric(fabric)


def assert_one_line_problems(err: SpecError) -> None:
    """A SpecError has problems, each a non-empty single line (what the CLI prints)."""
    assert err.problems, "a SpecError without problems"
    for p in err.problems:
        text = str(p)
        assert text.strip(), f"an empty problem: {p!r}"
        assert "\n" not in text and "\r" not in text, f"a problem of several lines: {text!r}"
        assert "Traceback" not in text


def built_or_refused(pipeline: Callable[[Any], tuple], check: Callable[..., None],
                     doc: Any) -> bool:
    """Run ``pipeline`` on ``doc``: either it refuses with one-line problems (False), or
    the input held no NaN/infinity and ``check`` passes on what it built (True)."""
    from tests.fuzz.strategies import nonfinite

    try:
        built = pipeline(doc)
    except SpecError as err:
        assert_one_line_problems(err)
        return False
    assert not nonfinite(doc), "a NaN or infinity was accepted"
    check(*built)
    return True


def check_plan(spec: Any, fabric: Any, plan: dict) -> None:
    """The plan invariants of a fabric that built: every rule of tests/invariants.py
    (ports used once and within the model's count, GPUs connected, capacities as the
    spec says, ...) plus the counts of the plan summary."""
    check_all(fabric)
    h = spec.hosts
    assert plan["gpus"] == plan["hosts"] * h.gpus_per_host
    assert plan["backup_gpus"] == plan["backup_hosts"] * h.gpus_per_host
    assert plan["nic_ports"] == ((plan["hosts"] + plan["backup_hosts"])
                                 * h.nics_per_host * h.ports_per_nic)
    if h.count is not None:
        assert plan["hosts"] == h.count, (plan["hosts"], h.count)
    if h.gpus is not None:
        assert plan["gpus"] == h.gpus, (plan["gpus"], h.gpus)
    assert plan["gpus"] >= 1
    sw = plan["switches"]
    assert sw["total"] == sum(v for k, v in sw.items() if k != "total")
    assert sw["total"] == int(fabric.is_switch.sum()) >= 1
    cap = fabric.links.capacity_gbps
    assert np.isfinite(cap).all() and (cap > 0).all(), "a link without capacity"
    assert (fabric.links.kind >= LinkKind.ACCESS).any(), "no cabled link"
    for row in plan["links"]:
        assert row["count"] > 0 and row["gbps"] > 0, row
    for tier, use in plan["max_port_use"].items():
        used, ports = map(int, use.split("/"))
        assert 0 < used <= ports, (tier, use)
    for tier, ratio in plan["oversubscription"].items():
        assert ratio is None or (math.isfinite(ratio) and ratio > 0), (tier, ratio)
    topo = spec.topology
    wanted = getattr(topo, "oversubscription", None)
    if wanted is not None and "tor" in plan["oversubscription"]:
        # a ratio given takes effect: no ToR/leaf is more oversubscribed than asked
        assert plan["oversubscription"]["tor"] <= wanted * (1 + 1e-6) + 1e-4, \
            (wanted, plan["oversubscription"])
    assert plan["tiers"] >= 1
    if "bisection_gbps" in plan:
        assert math.isfinite(plan["bisection_gbps"]) and plan["bisection_gbps"] >= 0
        if plan["hosts"] >= 2:
            assert plan["bisection_gbps"] > 0, "two halves of the hosts not connected"
    json.dumps(plan, allow_nan=False)  # what --json prints: no NaN or infinity


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_cli(*args: str) -> CliResult:
    """The real ``aifabric`` entry point (``aifabric.cli.main``), in-process."""
    from aifabric.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["aifabric", *map(str, args)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None
                                                                   else 1)
    finally:
        sys.argv = argv
    return CliResult(code, out.getvalue(), err.getvalue())


def assert_cli_error(r: CliResult) -> None:
    """Exit 2: one ``error: ...`` line per problem on stderr, no traceback."""
    assert r.code == 2, (r.code, r.err[-2000:])
    lines = r.err.strip().splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), r.err[-2000:]
    assert "Traceback" not in r.err
