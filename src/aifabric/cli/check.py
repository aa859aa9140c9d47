"""``aifabric check BUILD --inventory FACTS|--facts DIR``: collected facts against the plan.

Prints every deviation, grouped (driver and firmware, MTU, link speed, QoS, ECN/DCQCN,
cabling by LLDP neighbours, missing facts), with the device, the field, the expected
and the found value; exit code 1 when anything deviates, 0 when nothing does, 2 on bad
input. ``--template FILE`` writes the planned facts in inventory shape instead.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from aifabric.cli._common import MAX_MEMORY, build, console, err_console, load_specs, write_atomic
from aifabric.configs import BuildContext
from aifabric.configs.build import SPEC_FILE
from aifabric.configs.check import compare, expected_inventory, parse_inventory
from aifabric.errors import Problem, SpecError
from aifabric.spec.load import (
    DuplicateKeyError,
    FastStrictLoader,
    json_no_duplicates,
    yaml_error,
)

_Loader = FastStrictLoader  # libyaml's parser; a key twice in a mapping is an error
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
PROGRESS_DEVICES = 500


def _read_inventory(path: Path) -> Any:
    name = str(path)
    if not path.is_file():
        raise SpecError(Problem("", "file not found", name))
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":  # large inventories: JSON parses ~50x faster than YAML
            try:
                return json.loads(text, object_pairs_hook=json_no_duplicates)
            except json.JSONDecodeError as exc:
                raise SpecError(Problem("", f"invalid JSON: line {exc.lineno}, column "
                                        f"{exc.colno}: {exc.msg}", name)) from None
            except DuplicateKeyError as exc:
                raise SpecError(Problem("", f"invalid JSON: {exc}", name)) from None
        return yaml.load(text, Loader=_Loader)
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(Problem("", f"cannot read: {exc}", name)) from None
    except yaml.YAMLError as exc:
        raise SpecError(Problem("", yaml_error(exc, "YAML/JSON"), name)) from None


def check_cmd(
    build_dir: Path = typer.Argument(..., metavar="BUILD", help="a folder written by "
                                     "aifabric build (or the spec it was built from)"),
    inventory: Path | None = typer.Option(None, "--inventory", "-i",
                                          help="collected facts (YAML or JSON)"),
    facts: Path | None = typer.Option(None, "--facts", help="a folder of facts files "
                                      "(<device>.json, schema aifabric-facts) as the build's "
                                      "ansible/preflight.yml writes them"),
    partial: bool = typer.Option(False, "--partial", help="ignore devices and interfaces "
                                 "missing from the inventory"),
    as_json: bool = typer.Option(False, "--json", help="print the deviations as JSON"),
    template: Path | None = typer.Option(None, "--template", help="write the planned facts "
                                         "(inventory shape; .json or .yaml) and exit"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Compare collected facts with the plan; exit 1 when anything deviates."""
    if template is not None:  # a bad --template fails before any work
        from aifabric.outputs import check_target

        check_target(template, option="--template", folder=False)
    # BUILD is a build folder (its spec.yaml), or the spec itself (the plan is rebuilt)
    spec_file = build_dir if build_dir.is_file() else build_dir / SPEC_FILE
    if not spec_file.is_file():
        raise SpecError(Problem("", f"not an aifabric build folder (no {SPEC_FILE}); allowed: "
                                "a folder written by aifabric build", str(build_dir)))
    (s,) = load_specs([spec_file])
    fabric = build(s, spec_file)
    try:
        ctx = BuildContext.of(fabric)
    except SpecError as err:
        raise err.with_file(str(spec_file)) from None
    expected = expected_inventory(ctx)
    if template is not None:
        text = (json.dumps(expected, indent=1) + "\n" if template.suffix == ".json"
                else yaml.dump(expected, Dumper=_Dumper, sort_keys=False))
        write_atomic(template, text, option="--template")
        console.print(f"wrote {template}: planned facts of {len(expected['hosts']):,} hosts "
                      f"and {len(expected['switches']):,} switches")
        return
    unusable: list = []
    if inventory is not None and facts is not None:
        raise SpecError(Problem("--facts", "given with --inventory; allowed: one of them"))
    if facts is not None:
        from aifabric.configs.ansible import plan_id
        from aifabric.configs.check import read_facts_folder

        if not facts.is_dir():
            raise SpecError(Problem("--facts", f"{facts} is not a folder; allowed: the facts "
                                    "folder preflight.yml wrote (<build>/facts)"))
        from aifabric.spec import dump_spec

        # the digest of the spec.yaml the build wrote (a spec given directly: as dumped)
        text = (spec_file.read_text(encoding="utf-8") if spec_file.name == SPEC_FILE
                and not build_dir.is_file() else dump_spec(fabric.spec))
        plan = plan_id(text, fabric.spec.name)
        doc, unusable = read_facts_folder(facts, ctx, plan)
        if not unusable and not doc["hosts"] and not doc["switches"]:
            raise SpecError(Problem("--facts", f"{facts} holds no facts file (<device>.json); "
                                    "allowed: the folder preflight.yml wrote"))
        inv = parse_inventory(doc, str(facts), ctx)
    elif inventory is None:
        raise SpecError(Problem("--inventory", "missing; allowed: a YAML/JSON file of "
                                "collected facts (see --template), or --facts FOLDER"))
    else:
        inv = parse_inventory(_read_inventory(inventory), str(inventory), ctx)
    total = len(expected["hosts"]) + len(expected["switches"])
    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  console=err_console, transient=True,
                  disable=total <= PROGRESS_DEVICES) as bar:
        task = bar.add_task("checking", total=total)
        devs = compare(expected, inv, partial=partial, progress=lambda n: bar.advance(task, n))
    if unusable:  # a device whose file could not be used is reported once, by its file
        skip = {d.device for d in unusable}
        devs = unusable + [d for d in devs if not (d.device in skip and d.field == "device")]
    if as_json:
        console.print_json(json.dumps([d.__dict__ for d in devs]))
    else:
        groups: dict[str, list] = defaultdict(list)
        for d in devs:
            groups[d.group].append(d)
        for g in sorted(groups):
            t = Table(title=f"{g}: {len(groups[g])} deviation(s)", title_justify="left")
            for col in ("device", "field", "expected", "found"):
                t.add_column(col, overflow="fold")
            for d in groups[g]:
                t.add_row(d.device, d.field, d.expected, d.found)
            console.print(t)
        n_dev = len({d.device for d in devs})
        console.print(f"{len(devs)} deviation(s) on {n_dev} device(s)" if devs else
                      f"no deviations: {len(inv.hosts):,} hosts and {len(inv.switches):,} "
                      "switches match the plan")
    if devs:
        raise typer.Exit(1)
