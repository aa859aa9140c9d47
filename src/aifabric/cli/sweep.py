"""``aifabric sweep FILE --store DIR``: run a sweep into a results store;
``aifabric sweep report --store DIR``: its tables and plots.

``aifabric sweep FILE ...`` is short for ``aifabric sweep run FILE ...``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Literal

import typer

from aifabric.cli._common import (
    MAX_MEMORY,
    STORE_HELP,
    console,
    default_store,
    err_console,
    old_spelling,
    take_old_spelling,
)
from aifabric.cli._usage import HelpGroup
from aifabric.errors import Problem, SpecError
from aifabric.sim.limits import DEFAULT_MAX_EVENTS, events_text


class _RunByDefault(HelpGroup):
    """``sweep FILE ...`` runs FILE: a first argument that is no subcommand (nor an
    option) is taken as the sweep file of ``run``."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="sweep", cls=_RunByDefault, no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, rich_markup_mode="markdown",
    help="Run a sweep (a grid or random sample of a scenario's fields, repeated over "
    "seeds) locally or on Ray into a results store, and report it as tables and plots."
    "\n\n`aifabric sweep FILE --store DIR` is short for `aifabric sweep run FILE --store "
    "DIR`; `aifabric sweep report --store DIR` writes the report. The sweep file: "
    "docs/sweeps.md.")


def _dry_run(sw: Any, out: Path | None) -> None:
    from rich.table import Table

    spec = sw.spec
    parts = [f"grid {' x '.join(str(len(v)) for v in spec.grid.values())}"] if spec.grid else []
    if spec.random is not None:
        parts.append(f"random {spec.random.samples}")
    if spec.repeat is not None:
        parts.append(f"repeat {spec.repeat.seeds} seeds into {', '.join(spec.repeat.fields)}")
    dup = f" ({sw.duplicates} repeating an earlier point, run once)" if sw.duplicates else ""
    console.print(f"sweep {sw.name}: {len(sw.points):,} points{dup} "
                  f"({'; '.join(parts) or 'the base scenario once'}) of {spec.scenario}; "
                  "every point validated", markup=False, soft_wrap=True)
    if out is not None and (Path(out) / "runs").is_dir():
        from aifabric.sweep.runner import open_store

        ok = open_store(out).run_ids(sw.name, status="ok")
        left = sum(p.run_id not in ok for p in sw.points)
        console.print(f"{out}: {len(sw.points) - left:,} stored ok, {left:,} to run",
                      markup=False)
    t = Table(title=None)
    for col in ("point", "run_id", "overrides"):
        t.add_column(col, justify="right" if col == "point" else "left")
    shown = sw.points[:20]
    for p in shown:
        t.add_row(str(p.index), p.run_id[:12], p.overrides_json)
    console.print(t)
    if len(shown) < len(sw.points):
        console.print(f"{len(shown)} of {len(sw.points):,} points shown", markup=False)


class _Bar:
    """A progress bar with ETA on stderr (a terminal only), fed after each point."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.prog: Any = None
        self.task: Any = None

    def __call__(self, done: int, failed: int, total: int) -> None:
        if self.prog is None:
            if not err_console.is_terminal:
                return
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.prog = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[failed]}"),
                                 TimeElapsedColumn(), "ETA", TimeRemainingColumn(),
                                 console=err_console, transient=True)
            self.prog.start()
            self.task = self.prog.add_task(f"sweep {self.name}", total=total, failed="")
        self.prog.update(self.task, completed=done,
                         failed=f"{failed} failed" if failed else "")

    def stop(self) -> None:
        if self.prog is not None:
            self.prog.stop()


@app.command("run")
def run_cmd(
    sweep_file: Path = typer.Argument(..., metavar="FILE", help="the sweep file (YAML)"),
    out: Path | None = typer.Option(None, "--store", metavar="DIR",
                                    callback=take_old_spelling("store"),
                                    help="the results store folder the rows go to "
                                    "(required unless --dry-run)"),
    _out: Path | None = old_spelling("store", "--out", "-o"),
    engine: Literal["local", "ray"] = typer.Option("local", "--engine",
                                                   help="local (a process pool) or ray"),
    address: str | None = typer.Option(None, "--address", metavar="ADDRESS",
                                       help="ray: auto (an existing "
                                       "cluster) or host:port; none: a local Ray cluster"),
    jobs: int | None = typer.Option(None, "--jobs", "-j", metavar="N",
                                    help="points at once: worker "
                                    "processes (local; 1 = in this process) or the CPUs of "
                                    "a local Ray cluster; default: every CPU"),
    resume: bool = typer.Option(False, "--resume", help="skip the points stored ok in "
                                "--store, run the rest (a store holding this sweep is "
                                "refused without it)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="validate and list the points; "
                                 "run and write nothing"),
    max_memory: str | None = MAX_MEMORY,
    max_events: float = typer.Option(DEFAULT_MAX_EVENTS, "--max-events", metavar="N",
                                     show_default=False,
                                     help="packet points estimated at more events fail "
                                     f"(default {events_text(DEFAULT_MAX_EVENTS)}; 0 = no "
                                     "limit)"),
) -> None:
    """Run every point of a sweep file into a results store (--store), locally or on Ray,
    with a progress bar; exit 1 when a point failed, 130 when interrupted."""
    from aifabric.api import check_max_events
    from aifabric.sweep.model import load_sweep
    from aifabric.sweep.runner import check_options, run_sweep

    check_options(engine, jobs, address)
    limit = check_max_events(max_events, "--max-events")
    if out is not None and out.exists() and not out.is_dir():
        raise SpecError(Problem("--store", f"{out} is a file; allowed: a folder (a results "
                                "store, new or holding earlier sweeps)"))
    vbar = _Bar(f"{Path(sweep_file).name}: validating points")  # a big sweep's validation
    try:
        sw = load_sweep(sweep_file, progress=lambda done, total: vbar(done, 0, total))
    except KeyboardInterrupt:
        err_console.print("interrupted while validating the sweep: nothing run",
                          markup=False)
        raise typer.Exit(130) from None
    finally:
        vbar.stop()
    if dry_run:
        _dry_run(sw, out)
        return
    if out is None:
        raise SpecError(Problem("--store", "missing; allowed: --store DIR, the results store "
                                "the rows go to (or --dry-run)"))
    bar = _Bar(sw.name)
    stop = threading.Event()
    try:
        run = run_sweep(sw, out, engine=engine, address=address, jobs=jobs, resume=resume,
                        max_events=limit, max_memory=max_memory, stop=stop,
                        handle_sigint=True,
                        progress=bar)
    except KeyboardInterrupt:  # before the points ran (Ray starting) or a second Ctrl-C
        bar.stop()
        err_console.print(f"interrupted: the points of sweep {sw.name} stored so far stay "
                          f"in {out}; run again with --resume", markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    finally:
        bar.stop()
    if sw.duplicates:
        err_console.print(f"note: {sw.duplicates:,} point(s) of {sweep_file} repeat an earlier "
                          "point (same scenario, same content hash): each ran and is stored "
                          "once", markup=False, soft_wrap=True)
    if run.interrupted:
        err_console.print(f"interrupted: {run.stored:,} of {run.total:,} points stored; run "
                          "again with --resume", markup=False, soft_wrap=True)
        raise typer.Exit(130)
    skipped = f", {run.skipped:,} already stored (skipped)" if run.skipped else ""
    console.print(f"sweep {sw.name}: {run.ok:,} ok, {run.failed:,} failed{skipped} of "
                  f"{run.total:,} points in {run.wall_s:.1f} s ({engine}); stored in {out}",
                  markup=False, soft_wrap=True)
    if run.failed:
        err_console.print(f"exit 1: {run.failed:,} point(s) failed; their errors are in the "
                          f"rows (aifabric results query \"SELECT point, error FROM runs "
                          f"WHERE status = 'failed'\" --store {out})", markup=False,
                          soft_wrap=True)
        raise typer.Exit(1)


@app.command("report")
def report_cmd(
    store: Path = typer.Option(None, "--store", metavar="DIR",
                               callback=take_old_spelling("store", default_store),
                               help=STORE_HELP),
    _dir: Path | None = old_spelling("store", argument=True),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="DIR",
                                    help="the report folder (default "
                                    "STORE/reports/NAME)"),
    sweep: str | None = typer.Option(None, "--sweep", metavar="NAME",
                                     help="the sweep to report when the store "
                                     "holds several"),
) -> None:
    """Write a sweep's report: every row (CSV), each figure against each swept field
    with its spread over seeds (tables and PNG plots), linked from report.md."""
    from aifabric.sweep.report import write_report

    path = write_report(store, out, sweep)
    console.print(f"wrote {path} (+ tables and plots in {path.parent})", markup=False,
                  soft_wrap=True)
