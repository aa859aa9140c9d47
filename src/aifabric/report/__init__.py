"""Reports of simulation results: tidy tables (CSV or Parquet), Markdown, PNG plots.

This is an edge: it writes files. It reads only :class:`~aifabric.sim.results.SimResult`,
so every simulator gets the same report.
"""

from aifabric.report.markdown import comparison_rows, render_markdown
from aifabric.report.write import write_report, write_tables

__all__ = ["comparison_rows", "render_markdown", "write_report", "write_tables"]
