"""The flat figures of one simulate summary: one summary row's columns (see docs/results.md).

A simulate summary (``aifabric simulate --json``, :attr:`aifabric.sim.results.SimResult.
summary`) is nested: tiers, jobs, collectives, packet counters. A results store wants one
flat row per run, with the same column names in every run of a kind, so that a sweep can
be queried with plain SQL (``SELECT "tier.access_up.max_peak_util" ...``). Names are
lower-case dotted identifiers (``[a-z0-9_.]``; DuckDB folds case, so ``busbw_GBps`` and
``busbw_gbps`` would collide); values are ``int``, ``float``, ``str``, ``bool`` or ``None``
(NaN and infinities become ``None``). No wall times: the summary holds none, and none are added.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_COLLECTIVES", "MAX_JOBS", "summary_row"]

Scalar = int | float | str | bool | None

#: the standalone collectives (``collectives`` with no job) given columns of their own
MAX_COLLECTIVES = 8
#: the jobs given columns of their own
MAX_JOBS = 16

#: keys of a summary's collective -> column suffix (GB/s written out: see the module doc)
_COLL = {"collective": "name", "op": "op", "algorithm": "algorithm", "gpus": "gpus",
         "size_bytes": "size_bytes", "channels": "channels", "time_ns": "time_ns",
         "algbw_GBps": "algbw_gb_per_s", "busbw_GBps": "busbw_gb_per_s"}
#: keys of a summary's job -> column suffix
_JOB = {"job": "name", "gpus": "gpus", "segments": "segments", "iterations": "iterations",
        "iteration_ns": "iteration_ns", "compute_ns": "compute_ns",
        "exposed_comm_ns": "exposed_comm_ns", "comm_bytes": "comm_bytes",
        "cross_segment_bytes": "cross_segment_bytes"}
#: top-level keys taken as they are
_TOP = ("scenario", "fabric", "makespan_ns", "finished", "transfers_undelivered",
        "collectives_total")
#: nested mappings flattened generically (``engine.events``, ``packet.fct.slowdown_p99``)
_NESTED = ("tiers", "two_port", "engine", "routing", "packet", "chakra")
#: lists inside those that become a count (the list itself is in the run's tables)
_COUNTED = ("alarms", "deadlocks", "notes")
#: lists left out: capped excerpts whose length is no figure (``packet.paused_queues``
#: counts what ``packet.pauses`` shows the first 10 of)
_SKIPPED = ("pauses",)
_SLUG = re.compile(r"[^a-z0-9_]+")


def _slug(key: Any) -> str:
    """A name part: lower case, runs of other characters as one ``_``."""
    return _SLUG.sub("_", str(key).lower()).strip("_") or "_"


def _scalar(v: Any) -> Scalar:
    """A JSON-able scalar: numpy scalars as Python, NaN and infinities as None (JSON has
    neither, and a figure that is infinite is one that could not be measured)."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str)) or (
        hasattr(v, "item") and getattr(v, "ndim", 1) == 0)


def _flatten(prefix: str, value: Any, out: dict[str, Scalar]) -> None:
    """``value`` under ``prefix``: mappings recurse, lists of scalars are indexed
    (``.0``, ``.1``), other lists become their length; the first of colliding names wins."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{_slug(k)}", v, out)
        return
    if isinstance(value, (list, tuple)):
        if prefix.rsplit(".", 1)[-1] in _SKIPPED:
            return
        if prefix.rsplit(".", 1)[-1] in _COUNTED or not all(map(_is_scalar, value)):
            out.setdefault(prefix, len(value))
        else:
            for i, v in enumerate(value):
                out.setdefault(f"{prefix}.{i}", _scalar(v))
        return
    if _is_scalar(value):
        out.setdefault(prefix, _scalar(value))


def summary_row(summary: Mapping[str, Any]) -> dict[str, Scalar]:
    """The flat, deterministic figures of one simulate summary (any engine).

    Columns (docs/results.md has the full list): ``scenario``, ``fabric``,
    ``makespan_ns``, ``finished``, ``transfers_undelivered``, ``collectives_total``;
    ``coll.<i>.<figure>`` for the first :data:`MAX_COLLECTIVES` standalone collectives
    (name, op, gpus, size_bytes, time_ns, algbw_gb_per_s, busbw_gb_per_s: GB/s is 10^9
    bytes/s); ``job.<i>.<figure>`` for the first :data:`MAX_JOBS` jobs (iteration_ns,
    compute_ns, exposed_comm_ns, ...); ``tier.<tier>.<figure>`` per link tier and direction
    (``tier.access_up.max_peak_util``); ``two_port.*``, ``engine.*``, ``routing.*``;
    ``slowest.min_rate_gbps`` / ``slowest.tier`` of the slowest transfer; for packet runs
    ``packet.*`` (counters, ``packet.fct.slowdown_p99``, ``packet.settings.*``, alarms and
    deadlocks as counts). The simulator's name is not a figure: it is the row's core
    ``sim`` column.
    """
    out: dict[str, Scalar] = {}
    for k in _TOP:
        if k in summary and _is_scalar(summary[k]):
            out[k] = _scalar(summary[k])
    standalone = [c for c in summary.get("collectives") or () if not c.get("job")]
    for i, c in enumerate(standalone[:MAX_COLLECTIVES]):
        for k, name in _COLL.items():
            if k in c:
                out[f"coll.{i}.{name}"] = _scalar(c[k])
    for i, j in enumerate((summary.get("jobs") or ())[:MAX_JOBS]):
        for k, name in _JOB.items():
            if k in j:
                out[f"job.{i}.{name}"] = _scalar(j[k])
    for key in _NESTED:
        if isinstance(summary.get(key), Mapping):
            _flatten("tier" if key == "tiers" else key, summary[key], out)
    slow = summary.get("slowest_transfers") or ()
    if slow:
        out["slowest.min_rate_gbps"] = _scalar(slow[0].get("min_rate_gbps"))
        out["slowest.tier"] = _scalar(slow[0].get("tier"))
    out["hot_links"] = len(summary.get("hot_links") or ())
    return out
