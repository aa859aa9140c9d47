"""What every subcommand shares: the consoles, loading specs, writing files atomically."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from aifabric.errors import Problem, SpecError
from aifabric.spec import Spec, load_spec
from aifabric.topology import Fabric, build_fabric

# piped output (CI logs, files) gets a wide page instead of rich's 80-column default
_width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
console = Console(highlight=False, width=_width)
err_console = Console(stderr=True, highlight=False, width=_width)


def load_specs(paths: Iterable[Path]) -> list[Spec]:
    """Load every spec, collecting the problems of all files before failing."""
    specs, problems = [], []
    for p in paths:
        try:
            specs.append(load_spec(p))
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    return specs


def build(spec: Spec, file: str | os.PathLike[str] | None = None) -> Fabric:
    """Build a fabric, attributing feasibility problems to the spec's file."""
    try:
        return build_fabric(spec)
    except SpecError as err:
        raise err.with_file(str(file)) if file else err from None


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` all at once: a temporary file renamed into place, so a
    failure never leaves a partial file."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise SpecError(Problem("", f"folder {parent} does not exist", str(path)))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
