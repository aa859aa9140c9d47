"""``aifabric export SPEC --format json|graphml|dot``: the fabric for other graph tools."""

from __future__ import annotations

import io
from enum import StrEnum
from pathlib import Path

import typer

from aifabric.cli._common import build, console, load_specs, write_atomic
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
) -> None:
    """Write the fabric as node-link JSON (NetworkX), GraphML (Gephi) or DOT (Graphviz)."""
    (s,) = load_specs([spec])
    fabric = build(s, spec)
    suffix, writer = FORMATS[format.value]
    target = out or Path(f"{s.name}{suffix}")
    buf = io.StringIO()
    writer(fabric, buf)
    write_atomic(target, buf.getvalue())
    console.print(f"wrote {target}: {fabric.n_nodes:,} nodes, {fabric.n_links:,} links "
                  f"({format.value})")
