"""The ``aifabric`` command line: one thin module per subcommand.

Bad input never gives a traceback: a :class:`~aifabric.errors.SpecError` prints one
line per problem on stderr and exits with code 2.

Start-up is lazy: a subcommand's module (and what it imports: numpy, scipy, numba,
pydantic...) is imported only when that command runs or shows its own ``--help``;
``aifabric --help`` lists the commands from :data:`COMMANDS` without importing any of
them (``tests/cli/test_lazy_imports.py`` checks the table against the docstrings).
"""

from __future__ import annotations

import atexit
import gc
import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer.core import TyperCommand

from aifabric.cli._usage import HelpCommand, HelpGroup, UsageError, adopt, refuse_usage
from aifabric.errors import SpecError

__all__ = ["COMMANDS", "app", "main"]

#: every subcommand in ``--help`` order: name -> (module under ``aifabric.cli``, the
#: command function or ``typer.Typer`` in it, the first paragraph of its help as
#: ``aifabric --help`` lists it)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "plan": ("plan", "plan",
             "The design of a fabric: counts per tier, links, optics, oversubscription, "
             "bisection bandwidth and hops between GPUs."),
    "export": ("export", "export",
               "Write the fabric as node-link JSON (NetworkX), GraphML (Gephi) or DOT "
               "(Graphviz)."),
    "route": ("route", "route_cmd",
              "Where the flows of a scenario go: per-tier link loads, idle uplinks, the "
              "most loaded link, dual-ToR port balance, failover."),
    "simulate": ("simulate", "simulate_cmd",
                 "Simulate a scenario: completion time, algbw and busbw of every "
                 "collective, iteration and exposed communication time of every job, link "
                 "utilization, the slowest flows and the links that slowed them."),
    "nccl": ("nccl", "nccl_cmd",
             "NCCL's collectives over the scale-up domain and the scale-out fabric: the "
             "algorithm and protocol NCCL's cost model picks per message size, the "
             "simulated time, algbw and busbw, the bytes on each dimension; or a job's "
             "step on the domains."),
    "goodput": ("goodput", "goodput_cmd",
                "How much training time a job loses to failures: effective training time "
                "ratio, interruptions per day by cause, time lost by cause, backup hosts, "
                "and a sweep of checkpoint intervals with its optimum."),
    "compare": ("compare", "compare",
                "Simulate several scenarios and put their results side by side."),
    "demo": ("demo", "demo",
             "Single-plane vs dual-plane, ECMP vs chosen source ports, 4 concurrent "
             "AllReduce jobs on 512 GPUs, packing a job into few segments: the HPN "
             "paper's experiments reproduced on the example fabrics, written to a report."),
    "build": ("build", "build_cmd",
              "Generate switch, NIC and NCCL configs, cabling/address plans, BOM and LLD."),
    "check": ("check", "check_cmd",
              "Compare collected facts with the plan; exit 1 when anything deviates."),
    "lab": ("lab", "app",
            "Prove a design on real FRR daemons in network namespaces (needs root and FRR)."),
    "monitor": ("monitor", "app",
                "Watch the fabric live: serve the running lab's counters, BGP sessions, ECMP "
                "groups against the twin and ping probes to Prometheus."),
    "metrics": ("metrics", "metrics_cmd",
                "A finished simulation as OpenMetrics with timestamps, for Prometheus "
                "backfill."),
    "sweep": ("sweep", "app",
              "Run a sweep (a grid or random sample of a scenario's fields, repeated over "
              "seeds) locally or on Ray into a results store, and report it as tables and "
              "plots."),
    "results": ("results", "app",
                "Query the results store of sweeps and runs with SQL (DuckDB), list its "
                "sweeps, compact and verify its files."),
    "serve": ("serve", "serve_cmd",
              "Serve the twin as a web page: topology, heatmap, collective paths, what-if "
              "failures and the files of a run."),
}

_MARKUP = "markdown"


def load_command(name: str) -> Any:
    """The click command of subcommand ``name``, importing its module now."""
    module, attr, _ = COMMANDS[name]
    obj = getattr(importlib.import_module(f"aifabric.cli.{module}"), attr)
    if isinstance(obj, typer.Typer):  # a command group (``lab``)
        cmd = typer.main.get_group(obj)
        cmd.name = name
        return adopt(cmd)
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                         rich_markup_mode=_MARKUP)
    single.command(name, cls=HelpCommand)(obj)
    return adopt(typer.main.get_command(single))


class _LazyCommands(MutableMapping[str, Any]):
    """The root group's commands: a name resolves (imports its module) on first use;
    listing the names imports nothing."""

    def __init__(self, loaded: MutableMapping[str, Any]) -> None:
        self._loaded = dict(loaded)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self._loaded[name] = load_command(name)
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (n for n in self._loaded if n not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(n not in COMMANDS for n in self._loaded)

    def listed(self, name: str) -> Any:
        """The command as ``--help`` lists it: the real one once loaded, else a stand-in
        carrying only its name and first paragraph (nothing imported)."""
        if name in self._loaded or name not in COMMANDS:
            return self._loaded.get(name)
        return TyperCommand(name=name, help=COMMANDS[name][2])


class _LazyGroup(HelpGroup):
    """The root group: subcommand modules import on demand (see :data:`COMMANDS`); bad
    usage anywhere below it is one line (:func:`aifabric.cli._usage.one_line`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _LazyCommands(self.commands)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: nothing imported

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing:
            return self.commands.listed(cmd_name)  # type: ignore[attr-defined]
        return self.commands.get(cmd_name)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as e:
            raise refuse_usage(e, self) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as e:
            raise refuse_usage(e, self) from None

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="aifabric",
    cls=_LazyGroup,
    help="A digital twin of AI-training networks: plan, predict, configure, prove.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help text is Markdown: docstrings wrapped in the source read as flowing paragraphs
    # (rich mode would keep every line break of the docstring)
    rich_markup_mode=_MARKUP,
)


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("aifabric")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from aifabric import __version__ as v
    typer.echo(f"aifabric {v}")
    raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version,
                                 is_eager=True, help="print the version and exit"),
) -> None:
    del version


def _skip_final_collections() -> None:
    """At exit, before the interpreter tears down: freeze every object in place, so the
    garbage collector's passes during shutdown (numba's compiled core, the fabric, every
    module: ~0.3 s of a small packet run) skip them. atexit handlers, flushing and freeing
    by reference count still happen; only cycles left at exit stay for the OS to reclaim
    (Python never promised their ``__del__`` at exit; every file is closed by ``with``)."""
    gc.freeze()


def main() -> None:
    """Console entry point."""
    atexit.unregister(_skip_final_collections)  # once per process, however often main runs
    atexit.register(_skip_final_collections)
    from aifabric import interrupts  # Ctrl-C: one line, exit 130, at any moment

    with interrupts.recorded():
        try:
            _run()
        except BaseException as exc:
            interrupts.answer(exc, hard=True)  # exits 130 when interrupted
            raise


def _run() -> None:
    try:
        app(standalone_mode=True)
    except SpecError as err:
        from aifabric.cli._common import err_console

        for problem in err.problems:
            err_console.print(f"error: {problem}", markup=False, soft_wrap=True)
        sys.exit(2)
    except MemoryError:  # last resort: the size guard's estimate was too low
        sys.stderr.write("error: out of memory; allowed: a smaller spec or scenario (the "
                         "size guard refuses runs over --max-memory, see docs/spec.md)\n")
        sys.exit(2)
