"""The model behind ``aifabric serve``: one fabric, its traffic routed, and the questions
the page asks of it — loads, a collective's paths, what a failure moves.

A :class:`Twin` opens one of four things (:meth:`Twin.open`): a spec, a scenario, a
run folder or the lab; :mod:`.opening` says what each gives.

What-if: a *failure set* is a tuple of strings — a switch (or any node) name, a port
``device:iface`` (``tor-s00-r0-a:Ethernet3``, ``host-s00-h000:ens0f1``) or
``link:<id>``, or a whole ``plane:<n>``, ``pod:<n>`` or ``segment:<n>`` (every switch
of it) — on top of the scenario's own failures; each set is routed once
(LRU of 8) and compared with the base routing exactly as ``route`` compares a
scenario's failures (:func:`aifabric.routing.failover.compare_routes`).

*Utilization* of an arc, where no simulator measured it: its bytes' drain time at its
capacity over the longest drain time of any arc (the time the busiest link needs to
carry its bytes bounds the whole transfer from below; 1 = that link). A simulated run
without extra failures uses the run's measured mean utilization (``links`` table).

The package: :mod:`.core` (the routed state of each failure set, its loads, caches),
:mod:`.opening` (spec, scenario, run folder, lab), :mod:`.views` (topology, segment,
heatmap, search), :mod:`.tracing` (a collective's, a job's or a GPU pair's paths),
:mod:`.whatif` (what a failure moves) and :mod:`.lab` (the live lab); :class:`Twin`
composes them.
"""

from __future__ import annotations

from aifabric.web.twin.core import (
    CACHE,
    MAX_FAIL,
    NO_SCENARIO,
    RoutedState,
    TwinCore,
    arc_tiers,
    parse_failures,
)
from aifabric.web.twin.lab import LabView
from aifabric.web.twin.opening import TARGETS, Opening
from aifabric.web.twin.tracing import MAX_TRACE_EDGES, PATH_ROWS, SHARING_ROWS, Tracing
from aifabric.web.twin.views import Views
from aifabric.web.twin.whatif import MOVED_ROWS, WhatIf

__all__ = ["CACHE", "MAX_FAIL", "MAX_TRACE_EDGES", "MOVED_ROWS", "NO_SCENARIO", "PATH_ROWS",
           "SHARING_ROWS", "TARGETS", "RoutedState", "Twin", "TwinCore", "arc_tiers",
           "parse_failures"]


class Twin(Opening, Views, Tracing, WhatIf, LabView):
    """A fabric with its traffic routed: what ``aifabric serve`` shows (module docs).

    :meth:`open` (:class:`.opening.Opening`) makes one; the state and the routing of
    each failure set are :class:`.core.TwinCore`'s; the answers to the page come from
    :class:`.views.Views` (info, topology, segment, heatmap, search),
    :class:`.tracing.Tracing` (traces, trace, trace_arcs), :class:`.whatif.WhatIf`
    (whatif) and :class:`.lab.LabView` (lab_state, close)."""
