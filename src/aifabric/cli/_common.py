"""What every subcommand shares: the consoles, loading specs, writing files atomically.
(A fabric is built by :func:`aifabric.api.build_fabric`, the one guarded build.)"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

from aifabric.errors import Problem, SpecError

if TYPE_CHECKING:  # imported when used: a command's --help needs neither (pydantic, scipy)
    from aifabric.spec import Spec

# piped output (CI logs, files) gets a wide page instead of rich's 80-column default
_width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
# markup and emoji off: user text (names, titles, paths) is printed as it is, never read
# as rich markup ("[/old]" would crash, ":x:" become an emoji); styled output is built
# from rich.text.Text (see styled())
console = Console(highlight=False, markup=False, emoji=False, width=_width)
err_console = Console(stderr=True, highlight=False, markup=False, emoji=False, width=_width)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Console text from parts: a plain string, or ``(text, style)`` such as
    ``("alarm", "bold red")``; no part is read as markup."""
    return Text.assemble(*parts)


def load_specs(paths: Iterable[Path]) -> list[Spec]:
    """Load every spec, collecting the problems of all files before failing."""
    from aifabric.spec import load_spec

    specs, problems = [], []
    for p in paths:
        try:
            specs.append(load_spec(p))
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    return specs


def _set_max_memory(value: str | None) -> str | None:
    from aifabric.guard import set_limit

    set_limit(value)  # None: automatic (free memory less a margin)
    return value


#: ``--max-memory`` of every command that builds a fabric or runs a simulation
MAX_MEMORY = typer.Option(
    None, "--max-memory", metavar="SIZE", callback=_set_max_memory,
    help="refuse runs predicted to need more memory than this (8G, 512M; 0 = no limit); "
    "default: the memory free on this machine less a margin")


def write_atomic(path: Path, text: str, option: str = "--out") -> None:
    """Write ``text`` to ``path`` all at once (see :mod:`aifabric.outputs`): a failure never
    leaves a partial file, and a bad target is one line naming ``option``."""
    from aifabric.outputs import write_file

    write_file(path, text, option=option)


def _alias_key(target: str) -> str:
    return f"aifabric.alias.{target}"


def old_spelling(target: str, *names: str, argument: bool = False) -> Any:
    """A hidden old spelling (``--out`` of ``sweep run``, the positional DIR of ``sweep
    report``) of option ``--target``: still accepted, not on the help page. The value
    reaches the option through :func:`take_old_spelling` (its callback); giving both is
    one line."""

    def stash(ctx: typer.Context, value: Any) -> None:
        if value is None:
            return
        if ctx.meta.get(_alias_key(target) + ".given"):
            raise SpecError(Problem(f"--{target}", "given twice (also under its old "
                                    "spelling); allowed: one of them"))
        ctx.meta[_alias_key(target)] = value

    if argument:
        return typer.Argument(None, hidden=True, expose_value=False, callback=stash,
                              show_default=False)
    return typer.Option(None, *names, hidden=True, expose_value=False, callback=stash)


def take_old_spelling(target: str, default: Any = None) -> Any:
    """The callback of option ``--target``: its value, else the one given under an old
    spelling (:func:`old_spelling`), else ``default()`` when given."""

    def take(ctx: typer.Context, value: Any) -> Any:
        old = ctx.meta.get(_alias_key(target))
        if value is not None and old is not None:
            raise SpecError(Problem(f"--{target}", "given twice (also under its old "
                                    "spelling); allowed: one of them"))
        ctx.meta[_alias_key(target) + ".given"] = value is not None
        value = value if value is not None else old
        return default() if value is None and default is not None else value

    return take


def default_store() -> Path:
    """``$AIFABRIC_STORE``, else ``./results``."""
    return Path(os.environ.get("AIFABRIC_STORE") or "results")


#: ``--store`` of every command that reads or writes a results store
STORE_HELP = "the results store folder (default: $AIFABRIC_STORE, else ./results)"
