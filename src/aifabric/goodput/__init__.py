"""Goodput: how much training time a cluster loses to failures, and what dual-ToR, backup
hosts and multi-level checkpoints buy back (``aifabric goodput``).

* :mod:`~aifabric.goodput.rates` — failure classes, default rates and their sources;
* :mod:`~aifabric.goodput.spec` — the scenario's ``goodput:`` section;
* :mod:`~aifabric.goodput.impact` — the routing model's answer, once per group of
  components: does this failure cut the job off, or only slow it;
* :mod:`~aifabric.goodput.checkpoint` — checkpoint levels in seconds (given or derived);
* :mod:`~aifabric.goodput.montecarlo` — the vectorised Monte Carlo engine;
* :mod:`~aifabric.goodput.model` — all of it for one scenario (:func:`run_goodput`);
* :mod:`~aifabric.goodput.report` — tables, JSON and plots.

The package is also the API function: ``aifabric.goodput(scn)`` is
:func:`aifabric.api.goodput` (the package's module is callable, so ``import
aifabric.goodput`` — which makes the package an attribute of ``aifabric`` — never hides
the function).
"""

from __future__ import annotations

from aifabric._callable import make_callable

__all__ = ["run_goodput"]

make_callable(__name__, "goodput")


def __getattr__(name: str):  # lazy: the CLI's --help imports none of it
    if name == "run_goodput":
        from aifabric.goodput.model import run_goodput

        return run_goodput
    raise AttributeError(name)
