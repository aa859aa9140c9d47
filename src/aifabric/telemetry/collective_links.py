"""``aifabric_collective_link_bytes`` from a run's ``collective_links`` table: the link
directions each collective's routed transfers cross, with the bytes it puts on each
(``aifabric simulate --out`` writes the table; :mod:`~aifabric.telemetry.openmetrics`
adds these series to ``aifabric metrics``).

One series per (collective, link direction) with the catalog's port labels (from the
run's fabric; without it, ``device``/``peer``/``tier`` from the table's own ``from``,
``to`` and ``tier``, the ``links`` table's names) — the values the port series of the
same run get, so ``on(device, port, peer, direction)`` joins them — plus
``collective`` and ``training_job`` (not ``job``: Prometheus renames that label of
imported samples to ``exported_job``). Without the fabric, parallel links between the
same two devices have the same labels and are one series (their bytes summed).

When: the value is a property of the whole run, but a Prometheus series is only seen
for 5 minutes (the default lookback) after its last sample. So each series gets the same
value from the run's simulated start to its end, one sample every
:data:`LINK_STEP_FACTOR` timeline steps (15 s x 16 = 4 minutes of the dashboards' time
axis at the default time scale) and one at the end: a query at any time of the run —
and up to 5 minutes after it — finds the collective's links, so a Grafana panel can
join them with the utilization series of the same instant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LINK_STEP_FACTOR", "collective_link_families"]
#: samples are this many timeline grid steps apart (16 x 15 s = 240 s < the 5 min lookback)
LINK_STEP_FACTOR = 16
_MAX_SAMPLES = 10_000  # per series


def _run_end_ns(tables: dict[str, Any]) -> float:
    ends = [0.0]
    tl = tables.get("timeline")
    if tl is not None and len(tl["end_ns"]):
        ends.append(float(np.nanmax(tl["end_ns"])))
    q = tables.get("packet_queues")
    if q is not None and len(q["time_ns"]):
        ends.append(float(np.nanmax(q["time_ns"])))
    return max(ends)


def collective_link_families(tables: dict[str, Any], fabric: Any, step_ns: float) -> list:
    """The ``aifabric_collective_link_bytes`` family of a run's tables (none when the run
    has no ``collective_links`` rows); ``step_ns``: the timeline grid step in simulated
    ns (samples are :data:`LINK_STEP_FACTOR` of them apart)."""
    from aifabric.telemetry.openmetrics import _family, arc_label_source

    cl = tables.get("collective_links")
    if cl is None or not len(cl["bytes"]):
        return []
    arc = cl["link"].astype(np.int64) * 2 + (cl["direction"] == "down")
    # one series per (collective, job, port): rows that share all three are summed
    cn, ci = np.unique(cl["collective"].astype(str), return_inverse=True)
    jn, ji = np.unique(cl["job"].astype(str), return_inverse=True)
    n_arc = int(arc.max()) + 1
    key = (ci.astype(np.int64) * len(jn) + ji) * n_arc + arc
    uk, first, inv = np.unique(key, return_index=True, return_inverse=True)
    value = np.bincount(inv, weights=cl["bytes"], minlength=len(uk))
    u_cj = uk // n_arc
    if fabric is not None:
        labels = dict(arc_label_source(tables, fabric)(uk % n_arc))
    else:  # the table's own names (those of the links table); port: the link's index, as
        # the run's other series have it without the fabric (parallel links stay apart)
        blank = np.full(len(uk), "", dtype=object)
        tier = cl["tier"][first].astype(str)
        port = np.char.add("link", cl["link"][first].astype(np.int64).astype(str))
        labels = {"device": cl["from"][first].astype(object), "port": port.astype(object),
                  "peer": cl["to"][first].astype(object),
                  "tier": np.char.partition(tier, " ")[:, 0].astype(object),
                  "plane": blank, "rail": blank, "segment": blank,
                  "direction": cl["direction"][first].astype(object)}
    labels["collective"] = cn[u_cj // len(jn)].astype(object)
    labels["training_job"] = jn[u_cj % len(jn)].astype(object)
    end = _run_end_ns(tables)
    step = max(step_ns * LINK_STEP_FACTOR, end / (_MAX_SAMPLES - 1), 1e-9)
    grid = np.unique(np.append(np.arange(0.0, end, step), end))
    ns, ng = len(uk), len(grid)
    return [_family("aifabric_collective_link_bytes", labels, np.repeat(np.arange(ns), ng),
                    np.tile(grid, ns), np.repeat(value, ng))]
