"""``aifabric export SPEC --format json|graphml|dot``: the fabric for other graph tools."""

from __future__ import annotations

import io
from enum import StrEnum
from pathlib import Path

import typer

from aifabric.cli._common import MAX_MEMORY, build, console, load_specs, write_atomic
from aifabric.export import FORMATS


class Format(StrEnum):
    json = "json"
    graphml = "graphml"
    dot = "dot"


def export(
    spec: Path = typer.Argument(..., help="cluster spec (YAML)"),
    format: Format = typer.Option(Format.json, "--format", "-f", help="output format"),
    out: Path | None = typer.Option(None, "--out", "-o",
                                    help="output file (default: <spec name>.<format>)"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Write the fabric as node-link JSON (NetworkX), GraphML (Gephi) or DOT (Graphviz)."""
    from aifabric.outputs import check_target

    (s,) = load_specs([spec])
    suffix, writer = FORMATS[format.value]
    target = out or Path(f"{s.name}{suffix}")
    check_target(target, option="--out", folder=False)  # before any work
    fabric = build(s, spec)
    buf = io.StringIO()
    writer(fabric, buf)
    write_atomic(target, buf.getvalue(), option="--out")
    console.print(f"wrote {target}: {fabric.n_nodes:,} nodes, {fabric.n_links:,} links "
                  f"({format.value})")
