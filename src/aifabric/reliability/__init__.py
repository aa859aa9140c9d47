"""Goodput: how much training time a cluster loses to failures, and what dual-ToR, backup
hosts and multi-level checkpoints buy back (``aifabric goodput``).

* :mod:`~aifabric.reliability.rates` — failure classes, default rates and their sources;
* :mod:`~aifabric.reliability.spec` — the scenario's ``goodput:`` section;
* :mod:`~aifabric.reliability.impact` — the routing model's answer, once per group of
  components: does this failure cut the job off, or only slow it;
* :mod:`~aifabric.reliability.checkpoint` — checkpoint levels in seconds (given or derived);
* :mod:`~aifabric.reliability.montecarlo` — the vectorised Monte Carlo engine;
* :mod:`~aifabric.reliability.model` — all of it for one scenario (:func:`run_goodput`);
* :mod:`~aifabric.reliability.report` — tables, JSON and plots.

The API function is :func:`aifabric.api.goodput` (``af.goodput(scn)``).
"""

from __future__ import annotations

__all__ = ["run_goodput"]


def __getattr__(name: str):  # lazy: the CLI's --help imports none of it
    if name == "run_goodput":
        from aifabric.reliability.model import run_goodput

        return run_goodput
    raise AttributeError(name)
