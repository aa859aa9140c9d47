"""The physical range of every number an input holds: each numeric field of the spec and
scenario models with the lower and upper bound its declaration gives.

``python scripts/spec_ranges.py`` prints the table of ``docs/spec.md`` ("Physical
ranges") for the spec and the scenario models (they live in layers above this one, so the
walker takes the classes it is given); ``tests/spec/test_ranges.py`` checks that every
numeric field has finite bounds (or is one of :data:`CHECKED_IN_CODE`, bounded by a
validator) and that the document lists each with its bounds.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Any

__all__ = ["CHECKED_IN_CODE", "Range", "markdown", "numeric_ranges", "unit"]

#: numeric fields bounded by a validator rather than their declaration (a bound on one
#: member of a union would give one error per member), and the range it enforces
CHECKED_IN_CODE: dict[str, str] = {
    "JobSpec.gpus": "1..10,000,000 (a count); explicit GPUs: the fabric's active GPUs",
    "JobSpec.gpus.*": "the fabric's active GPUs (0..GPUs-1)",
    "CollectiveSpec.gpus": "1..10,000,000 (a count); explicit GPUs: the fabric's active GPUs",
    "CollectiveSpec.gpus.*": "the fabric's active GPUs (0..GPUs-1)",
    "PfcConfig.priorities.*": "0..7 (traffic classes)",
    "NicConfig.dscp_to_tc.*": "0..7 (traffic classes; DSCP keys 0..63)",
    "NicConfig.window": "one MTU payload (mtu_payload_bytes) .. 64 GiB",
}


@dataclass(frozen=True)
class Range:
    """One numeric field: ``Model.field`` (``.*`` for a list item or mapping value), its
    type, and its bounds (``None``: unbounded on that side)."""

    path: str
    kind: str
    lower: float | None
    upper: float | None
    lower_open: bool = False
    upper_open: bool = False

    @property
    def finite(self) -> bool:
        return (self.lower is not None and self.upper is not None
                and math.isfinite(self.lower) and math.isfinite(self.upper))

    def text(self) -> str:
        """``1 .. 100,000`` (``>`` / ``<`` for open ends)."""
        if self.path in CHECKED_IN_CODE:
            return CHECKED_IN_CODE[self.path]

        def num(x: float | None) -> str:
            if x is None:
                return "?"
            if float(x).is_integer() and abs(x) < 1e16:
                return f"{int(x):,}"
            return f"{x:g}"

        lo = ("> " if self.lower_open else "") + num(self.lower)
        hi = ("< " if self.upper_open else "") + num(self.upper)
        return f"{lo} .. {hi}"


def _bounds(meta: Any) -> tuple[Any, Any, bool, bool]:
    import annotated_types as at
    from pydantic.fields import FieldInfo

    lo = hi = None
    lo_open = hi_open = False
    for m in meta:
        if isinstance(m, FieldInfo):
            lo2, hi2, lo_o, hi_o = _bounds(m.metadata)
            if lo2 is not None:
                lo, lo_open = lo2, lo_o
            if hi2 is not None:
                hi, hi_open = hi2, hi_o
        if isinstance(m, at.Ge):
            lo, lo_open = m.ge, False
        elif isinstance(m, at.Gt):
            lo, lo_open = m.gt, True
        elif isinstance(m, at.Le):
            hi, hi_open = m.le, False
        elif isinstance(m, at.Lt):
            hi, hi_open = m.lt, True
        elif isinstance(m, at.Interval):
            if m.ge is not None or m.gt is not None:
                lo, lo_open = (m.ge, False) if m.ge is not None else (m.gt, True)
            if m.le is not None or m.lt is not None:
                hi, hi_open = (m.le, False) if m.le is not None else (m.lt, True)
    return lo, hi, lo_open, hi_open


def _leaves(tp: Any, path: str, b: tuple[Any, Any, bool, bool], out: list[Range],
            seen: set[type]) -> None:
    from pydantic import BaseModel

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        args = typing.get_args(tp)
        lo, hi, lo_o, hi_o = _bounds(args[1:])
        b = (lo if lo is not None else b[0], hi if hi is not None else b[1],
             lo_o if lo is not None else b[2], hi_o if hi is not None else b[3])
        _leaves(args[0], path, b, out, seen)
    elif origin in (typing.Union, types.UnionType):
        for a in typing.get_args(tp):
            _leaves(a, path, b, out, seen)
    elif origin in (list, tuple, set, frozenset):
        for a in typing.get_args(tp):
            if a is not Ellipsis:
                _leaves(a, f"{path}.*", (None, None, False, False), out, seen)
    elif origin is dict:
        _leaves(typing.get_args(tp)[1], f"{path}.*", (None, None, False, False), out, seen)
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        _walk(tp, out, seen)
    elif tp in (int, float) and not any(r.path == path for r in out):
        out.append(Range(path, tp.__name__, *b))


def _walk(model: type, out: list[Range], seen: set[type]) -> None:
    if model in seen:
        return
    seen.add(model)
    for name, f in model.model_fields.items():  # type: ignore[attr-defined]
        _leaves(f.annotation, f"{model.__name__}.{name}", _bounds(f.metadata), out, seen)


def numeric_ranges(of: list[type]) -> list[Range]:
    """Every numeric field of the pydantic models ``of`` and of the models they hold, each
    model once, in declaration order."""
    out: list[Range] = []
    seen: set[type] = set()
    for m in of:
        _walk(m, out, seen)
    return out


#: the unit a field's name ends with (units are part of the names)
_SUFFIX_UNITS = (("_gbytes_per_s", "GB/s"), ("_gbps", "Gbit/s"), ("_mbps", "Mbit/s"),
                 ("_ns_per_m", "ns/m"), ("_ns", "ns"), ("_us", "us"), ("_ms", "ms"),
                 ("_bytes", "bytes"), ("_mb", "MB"), ("_m", "m"), ("_percent", "%"),
                 ("_tflops", "TFLOP/s"), ("_ms_per_layer", "ms"), ("_per_month", "1/month"))
#: goodput's durations (given as 90s, 10min, 30d...), in seconds
_SECONDS = {"GoodputSpec.horizon", "GoodputSpec.step_time", "ClassRate.mtbf",
            "ClassRate.repair", "Recovery.detect", "Recovery.restart", "Recovery.swap",
            "CheckpointLevel.every", "CheckpointLevel.save", "CheckpointLevel.upload",
            "CheckpointLevel.restore", "Sweep.intervals.*", "BadHosts.repair",
            "Recovery.scheduler_wait"}


def unit(path: str) -> str:
    """The unit of the field ``path`` (empty: a count, a ratio or an index)."""
    if path in _SECONDS:
        return "s"
    name = path.removesuffix(".*").rsplit(".", 1)[-1]
    if name.startswith("rpg_") and name.endswith("_rate"):
        return "Mbit/s"
    for suffix, u in _SUFFIX_UNITS:
        if name.endswith(suffix):
            return u
    return ""


def markdown(of: list[type]) -> str:
    """The table of ``docs/spec.md`` ("Physical ranges") of the models ``of``."""
    rows = ["| field | type | unit | range |", "|---|---|---|---|"]
    rows += [f"| `{r.path}` | {r.kind} | {unit(r.path)} | {r.text()} |"
             for r in numeric_ranges(of)]
    return "\n".join(rows) + "\n"
