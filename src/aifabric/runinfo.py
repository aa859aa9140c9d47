"""``run.json``: what a ``simulate --out`` or ``route --out`` folder was made from, so a
later tool (``aifabric serve RUN_DIR``) can rebuild the run's fabric and routing.

.. code-block:: json

    {"format": 1, "command": "simulate", "scenario_file": "examples/scenarios/x.yaml",
     "scenario": {"name": "...", "spec": {...the spec inline...}, "traffic": [...], ...}}

``scenario`` is the scenario as validated (command-line overrides such as ``--sim`` or
``--policy`` applied, the routing overrides already merged into ``spec.routing``), in
plain JSON: :func:`scenario_from_record` rebuilds an equal scenario with
:func:`aifabric.routing.scenario.scenario_from_dict`. A traffic CSV or a Chakra trace is named
by its absolute path (it is not copied). The text is deterministic: same scenario, same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.routing.scenario import Scenario

__all__ = ["FORMAT", "RUN_JSON", "read_record", "run_record", "run_record_text",
           "scenario_from_record"]

RUN_JSON = "run.json"
FORMAT = 1


def run_record(sc: Scenario, command: str, scenario_file: str | Path | None) -> dict[str, Any]:
    """The ``run.json`` document of a run of ``command`` on ``sc``."""
    data = sc.model_dump(mode="json", exclude={"routing"})
    base = sc.base_dir

    def absolute(text: str) -> str:
        p = Path(text)
        if not p.is_absolute() and base is not None:
            p = base / p
        return str(p.resolve())

    # files the scenario names (a traffic CSV, a Chakra trace): absolute, the run is
    # elsewhere
    for pat in data.get("traffic", []):
        if isinstance(pat, dict) and pat.get("file"):
            pat["file"] = absolute(pat["file"])
    wl = data.get("workload")
    if isinstance(wl, dict) and isinstance(wl.get("chakra"), str):
        wl["chakra"] = absolute(wl["chakra"])
    return {"format": FORMAT, "command": command,
            "scenario_file": None if scenario_file is None else str(scenario_file),
            "scenario": data}


def run_record_text(sc: Scenario, command: str, scenario_file: str | Path | None) -> str:
    """:func:`run_record` as deterministic JSON text (sorted keys, a final newline)."""
    return json.dumps(run_record(sc, command, scenario_file), indent=1, sort_keys=True) + "\n"


def read_record(path: str | Path) -> dict[str, Any]:
    """Read a ``run.json`` (SpecError naming the file when it is not one)."""
    p = Path(path)
    from aifabric.spec.load import load_json

    try:
        doc = load_json(p)
    except SpecError as exc:
        raise SpecError(Problem(str(p), f"cannot be read ({exc.problems[0].message}); "
                                "allowed: the run.json simulate --out or route --out "
                                "wrote")) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT \
            or doc.get("command") not in ("simulate", "route") \
            or not isinstance(doc.get("scenario"), dict):
        raise SpecError(Problem(str(p), f"is not a run record; allowed: format {FORMAT} "
                                "with command simulate or route and a scenario"))
    return doc


def scenario_from_record(doc: dict[str, Any], *, file: str | None = None) -> Scenario:
    """The scenario a :func:`run_record` describes (a SimScenario for ``simulate``)."""
    from aifabric.routing.scenario import scenario_from_dict

    model: type[Scenario] = Scenario
    if doc.get("command") == "simulate":
        from aifabric.sim.scenario import SimScenario

        model = SimScenario
    # the files a scenario names are stored absolute (run_record); a scenario_file given
    # as a relative path says nothing about where it was relative to (the reader's working
    # folder is not the writer's), so only an absolute one lends its folder
    given = doc.get("scenario_file")
    base = Path(given).parent if isinstance(given, str) and Path(given).is_absolute() \
        and Path(given).parent.is_dir() else None
    return scenario_from_dict(doc["scenario"], file=file, base_dir=base, model=model)
