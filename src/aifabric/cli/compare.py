"""``aifabric compare A.yaml B.yaml ...``: scenarios side by side, with the relative
difference of the last one against the first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import typer
from rich.table import Table

from aifabric.cli._common import MAX_MEMORY, console, styled
from aifabric.cli.simulate import (
    MAX_EVENTS,
    _jsonable,
    check_max_events,
    exit_on_attention,
    load_and_run,
)
from aifabric.errors import Problem, SpecError
from aifabric.report.markdown import comparison_notice, comparison_rows

__all__ = ["compare"]


def compare(
    scenarios: list[Path] = typer.Argument(..., metavar="SCENARIO",
                                           help="two or more scenarios (YAML)"),
    as_json: bool = typer.Option(False, "--json", help="print the summaries as JSON"),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="DIR",
                                    help="write a comparison report "
                                    "(tables, plots, Markdown) into this folder"),
    fmt: Literal["csv", "parquet"] = typer.Option("csv", "--format",
                                                 help="table format with --out"),
    sim: Literal["flow", "analytic", "packet"] | None = typer.Option(
        None, "--sim", help="run every scenario on this simulator"),
    max_memory: str | None = MAX_MEMORY,
    max_events: float = MAX_EVENTS,
) -> None:
    """Simulate several scenarios and put their results side by side."""
    if len(scenarios) < 2:
        raise SpecError(Problem("SCENARIOS", "give at least two scenarios to compare"))
    if sim is not None and sim not in ("flow", "analytic", "packet"):
        raise SpecError(Problem("--sim", f"unknown simulator {sim!r}; allowed: flow, "
                                "analytic, packet"))
    if out is not None:  # a bad --out fails before the runs, not after
        from aifabric.outputs import REPORT, check_target

        check_target(out, option="--out", folder=True, **REPORT)
    limit = check_max_events(max_events)
    results, problems = [], []
    for p in scenarios:
        try:
            results.append(load_and_run(p, sim, limit))
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    if out is not None:
        from aifabric.report import write_report

        report = write_report(results, out, fmt=fmt, title="Comparison: " + " vs ".join(
            r.scenario for r in results))
    if as_json:
        typer.echo(json.dumps(_jsonable([r.summary for r in results]), indent=2))
        exit_on_attention(results)
        return
    t = Table(title="side by side (difference: last vs first)", title_justify="left")
    t.add_column("metric")
    for r in results:
        t.add_column(f"{r.scenario}\n{r.fabric}, {r.summary['routing']['policy']}, {r.sim}",
                     justify="right")
    t.add_column("difference", justify="right")
    for label, vals, diff, lower_better in comparison_rows(results):
        color = ""
        if diff not in ("-", "+0.0%", "-0.0%"):
            better = diff.startswith("-") == lower_better
            color = "green" if better else "red"
        t.add_row(label, *vals, styled((diff, color)) if color else diff)
    console.print(t)
    note = comparison_notice(results)
    if note:
        console.print(note, markup=False)
    if out is not None:
        console.print(f"wrote {report}")
    exit_on_attention(results)
