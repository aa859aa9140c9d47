"""``aifabric check BUILD --inventory FACTS|--facts DIR``: collected facts against the plan.

Prints every deviation, grouped (driver and firmware, MTU, link speed, QoS, ECN/DCQCN,
cabling by LLDP neighbours, missing facts), with the device, the field, the expected
and the found value; exit code 1 when anything deviates, 0 when nothing does, 2 on bad
input. ``--template FILE`` writes the planned facts in inventory shape instead.
"""

from __future__ import annotations

import json
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import typer
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from aifabric import api
from aifabric.cli._common import MAX_MEMORY, console, err_console, write_atomic

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
PROGRESS_DEVICES = 500


def check_cmd(
    build_dir: Path = typer.Argument(..., metavar="BUILD", help="a folder written by "
                                     "aifabric build (or the spec it was built from)"),
    inventory: Path | None = typer.Option(None, "--inventory", "-i", metavar="FILE",
                                          help="collected facts (YAML or JSON)"),
    facts: Path | None = typer.Option(None, "--facts", metavar="DIR",
                                      help="a folder of facts files "
                                      "(<device>.json, schema aifabric-facts) as the build's "
                                      "ansible/preflight.yml writes them"),
    partial: bool = typer.Option(False, "--partial", help="ignore devices and interfaces "
                                 "missing from the inventory"),
    as_json: bool = typer.Option(False, "--json", help="print the deviations as JSON"),
    template: Path | None = typer.Option(None, "--template", metavar="FILE",
                                         help="write the planned facts "
                                         "(inventory shape; .json or .yaml) and exit"),
    ibnetdiscover: Path | None = typer.Option(None, "--ibnetdiscover", metavar="FILE",
                                              help="InfiniBand: the output of "
                                              "`ibnetdiscover` to check against the plan's "
                                              "cabling and link speed"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Compare collected facts with the plan; exit 1 when anything deviates."""
    if ibnetdiscover is not None:
        found = api.check_ibnetdiscover(build_dir, ibnetdiscover)
        if as_json:
            console.print_json(json.dumps(found))
        else:
            groups_ib: dict[str, list] = defaultdict(list)
            for d in found:
                groups_ib[d["group"]].append(d)
            for g in sorted(groups_ib):
                t = Table(title=f"{g}: {len(groups_ib[g])} deviation(s)",
                          title_justify="left")
                for col in ("device", "field", "expected", "found"):
                    t.add_column(col, overflow="fold")
                for d in groups_ib[g][:200]:
                    t.add_row(d["device"], d["field"], d["expected"], d["found"])
                console.print(t)
            console.print(f"{len(found)} deviation(s) from the planned InfiniBand "
                          "topology" if found else "no deviations: every planned cable "
                          "found, at the planned speed", markup=False)
        if found:
            raise typer.Exit(1)
        return
    if template is not None:  # a bad --template fails before any work
        from aifabric.outputs import check_target

        check_target(template, option="--template", folder=False)
        expected = api.check_template(build_dir)
        text = (json.dumps(expected, indent=1) + "\n" if template.suffix == ".json"
                else yaml.dump(expected, Dumper=_Dumper, sort_keys=False))
        write_atomic(template, text, option="--template")
        console.print(f"wrote {template}: planned facts of {len(expected['hosts']):,} hosts "
                      f"and {len(expected['switches']):,} switches")
        return

    @contextmanager
    def bar(total: int):
        with Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                      MofNCompleteColumn(), console=err_console, transient=True,
                      disable=total <= PROGRESS_DEVICES) as prog:
            task = prog.add_task("checking", total=total)
            yield lambda n: prog.advance(task, n)

    res = api.check(build_dir, inventory=inventory, facts=facts, partial=partial, progress=bar)
    devs = res.deviations
    if as_json:
        console.print_json(json.dumps(res.to_list()))
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
                      f"no deviations: {res.hosts:,} hosts and {res.switches:,} "
                      "switches match the plan")
    if devs:
        raise typer.Exit(1)
