"""Sweeps: many runs of one scenario over a grid or random sample of its dotted fields,
with repetitions over seeds, run locally (a process pool) or on Ray, into a results store.

.. code-block:: python

    from aifabric.sweep import load_sweep, run_sweep, sweep_report

    sw = load_sweep("examples/sweeps/hpn-seed-modes.yaml")   # validates every point
    run = run_sweep(sw, "sweeps/hpn", engine="local", jobs=2)  # rows as points finish
    sweep_report("sweeps/hpn")                                 # tables and plots

See docs/sweeps.md for the sweep file and ``aifabric sweep --help`` for the command.
``af.run_sweep``, ``af.load_sweep`` and ``af.sweep_report`` are these functions (the
package sits above :mod:`aifabric.api`, whose ``simulate`` runs each point).
"""

from __future__ import annotations

from aifabric.sweep.model import Point, Sweep, SweepFile, expand, load_sweep
from aifabric.sweep.report import write_report
from aifabric.sweep.runner import SweepRun, run_sweep
from aifabric.sweep.worker import run_point

__all__ = ["Point", "Sweep", "SweepFile", "SweepRun", "expand", "load_sweep", "run_point",
           "run_sweep", "sweep_report", "write_report"]

#: ``af.sweep_report(store, out=None, sweep=None)``: a sweep's report (``aifabric sweep
#: report``): every row, each figure against each swept field with its spread over seeds
#: (CSV tables, PNG plots), report.md; returns the path of report.md
sweep_report = write_report
