"""``aifabric metrics RUN_DIR --out run.om``: a finished simulation as OpenMetrics text
with timestamps, for ``promtool tsdb create-blocks-from openmetrics`` (see
:mod:`aifabric.telemetry.openmetrics` and docs/telemetry.md)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from aifabric.cli._common import console


class Format(StrEnum):
    openmetrics = "openmetrics"
    prometheus = "prometheus"


def metrics_cmd(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="a folder written by "
                                   "aifabric simulate --out (flow or packet run; csv or "
                                   "parquet tables)"),
    out: Path = typer.Option(..., "--out", "-o", metavar="FILE",
                             help="the file to write (run.om)"),
    scenario: Path | None = typer.Option(
        None, "--scenario", metavar="FILE",
        help="the scenario the run came from: its fabric gives every port its interface "
        "name, plane, rail and segment labels (without it: device, peer and tier from the "
        "run's links table)"),
    start: str = typer.Option("2026-01-01T00:00:00Z", "--start", metavar="TIME",
                              help="wall-clock time of "
                              "simulated t = 0: ISO 8601 or Unix seconds (fixed default: "
                              "the same run gives the same bytes)"),
    time_scale: float = typer.Option(
        1e6, "--time-scale", metavar="NUMBER",
        help="wall-clock seconds per simulated second (default 1e6: 1 simulated ns = 1 "
        "ms, Prometheus' resolution; 1e3 to 1e12)"),
    fmt: Format = typer.Option(Format.openmetrics, "--format", help="openmetrics (for "
                               "promtool tsdb create-blocks-from openmetrics) or prometheus "
                               "(text format 0.0.4, ms timestamps: promtool check metrics)"),
) -> None:
    """A finished simulation as OpenMetrics with timestamps, for Prometheus backfill.

    Queue depth, PFC pause frames and paused time per port and priority; ECN marks,
    bytes, drops and utilization per port; CNPs and retransmitted bytes per NIC port;
    utilization per tier and the progress of every collective. Import with `promtool
    tsdb create-blocks-from openmetrics run.om DATA_DIR`."""
    from aifabric.errors import Problem, SpecError
    from aifabric.outputs import check_target, write_file
    from aifabric.telemetry.openmetrics import (
        GRID_STEP_S,
        parse_start,
        read_run,
        render_bytes,
        run_families,
    )

    if not 1e3 <= time_scale <= 1e12:
        raise SpecError(Problem("--time-scale", f"{time_scale:g} is out of range; allowed: "
                                "1e3 to 1e12 wall-clock seconds per simulated second"))
    start_s = parse_start(start)
    check_target(out, option="--out", folder=False)  # before any work
    tables = read_run(run_dir)
    fabric = None
    if scenario is not None:
        from aifabric.api import build_fabric
        from aifabric.routing.scenario import load_scenario
        from aifabric.sim.scenario import SimScenario

        scn = load_scenario(scenario, SimScenario)
        fabric = build_fabric(scn.spec, file=scn.spec_file or scenario)
    fams = run_families(tables, fabric, GRID_STEP_S * 1e9 / time_scale)
    data = render_bytes(fams, start_s=start_s, time_scale=time_scale, fmt=fmt.value)
    write_file(out, data, option="--out")
    n = data.count(b"\n")
    console.print(f"wrote {out}: {len(fams)} metrics, {n:,} lines ({fmt.value}); import "
                  f"with: promtool tsdb create-blocks-from openmetrics {out} DATA_DIR"
                  if fmt is Format.openmetrics else f"wrote {out}: {len(fams)} metrics, "
                  f"{n:,} lines ({fmt.value})")
