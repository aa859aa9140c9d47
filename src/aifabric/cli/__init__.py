"""The ``aifabric`` command line: one thin module per subcommand.

Bad input never gives a traceback: a :class:`~aifabric.errors.SpecError` prints one
line per problem on stderr and exits with code 2.
"""

from __future__ import annotations

import sys

import typer

from aifabric.cli import build as _build
from aifabric.cli import check as _check
from aifabric.cli import compare as _compare
from aifabric.cli import demo as _demo
from aifabric.cli import export as _export
from aifabric.cli import lab as _lab
from aifabric.cli import plan as _plan
from aifabric.cli import route as _route
from aifabric.cli import simulate as _simulate
from aifabric.cli._common import err_console
from aifabric.errors import SpecError

__all__ = ["app", "main"]

app = typer.Typer(
    name="aifabric",
    help="A digital twin of AI-training networks: plan, predict, configure, prove.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help text is Markdown: docstrings wrapped in the source read as flowing paragraphs
    # (rich mode would keep every line break of the docstring)
    rich_markup_mode="markdown",
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


app.command("plan")(_plan.plan)
app.command("export")(_export.export)
app.add_typer(_lab.app, name="lab")
app.command("route")(_route.route_cmd)
app.command("simulate")(_simulate.simulate_cmd)
app.command("compare")(_compare.compare)
app.command("demo")(_demo.demo)
app.command("build")(_build.build_cmd)
app.command("check")(_check.check_cmd)


def main() -> None:
    """Console entry point."""
    try:
        app(standalone_mode=True)
    except SpecError as err:
        for problem in err.problems:
            err_console.print(f"error: {problem}", markup=False, soft_wrap=True)
        sys.exit(2)
    except MemoryError:  # last resort: the size guard's estimate was too low
        sys.stderr.write("error: out of memory; allowed: a smaller spec or scenario (the "
                         "size guard refuses runs over --max-memory, see docs/spec.md)\n")
        sys.exit(2)
