"""``aifabric demo``: the HPN story on the model, with the paper's figures beside ours."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from aifabric.cli._common import MAX_MEMORY, console, err_console, styled

__all__ = ["demo"]


def demo(
    out: Path = typer.Option(Path("demo-report"), "--out", "-o", metavar="DIR",
                             help="folder for the report (tables, plots, Markdown)"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Single-plane vs dual-plane, ECMP vs chosen source ports, 4 concurrent AllReduce jobs
    on 512 GPUs, packing a job into few segments: the HPN paper's experiments reproduced
    on the example fabrics, written to a report."""
    from aifabric.outputs import REPORT, check_target
    from aifabric.report import write_report
    from aifabric.sim.hpn_demo import run_demo

    check_target(out, option="--out", folder=True, **REPORT)  # before the runs, not after

    t0 = time.perf_counter()
    with err_console.status("simulating") as status:
        findings = run_demo(step=lambda name: status.update(f"simulating {name}"))
    t = Table(title="HPN on the model: ours vs the paper", title_justify="left")
    for col in ("experiment", "metric", "ours", "paper", "direction"):
        t.add_column(col, justify="left" if col in ("experiment", "metric") else "right")
    for f in findings:
        same = (f.ours > 0) == (f.paper > 0)
        t.add_row(f.title, f.metric, f"{f.ours:+.1f}%", f"{f.paper:+.1f}%",
                  styled(("same", "green")) if same else styled(("opposite", "red")))
    console.print(t)
    for f in findings:
        console.print(f"- {f.note}")
    pre = "\n".join(
        [_table_md(findings), "", *[f"- **{f.title}**: {f.note}." for f in findings]])
    results = [r for f in findings for r in f.results]
    groups, at = [], 0
    for f in findings:  # each experiment's runs compared among themselves, never across
        groups.append((f.title, list(range(at, at + len(f.results)))))
        at += len(f.results)
    report = write_report(results, out, title="aifabric demo: HPN on the model",
                          preamble=pre, groups=groups)
    console.print(f"wrote {report} in {time.perf_counter() - t0:.1f} s")
    from aifabric.cli.simulate import exit_on_attention

    exit_on_attention(results)


def _table_md(findings) -> str:
    rows = ["| experiment | metric | ours | paper |", "|---|---|---|---|"]
    rows += [f"| {f.title} | {f.metric} | {f.ours:+.1f}% | {f.paper:+.1f}% |"
             for f in findings]
    return "\n".join(rows)
