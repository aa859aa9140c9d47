"""Sizes, rates and durations written with units: one grammar, one parser.

Every field or option that takes a size (``size_bytes: 1GiB``, ``--max-memory 8G``), a
rate (``400Gbit/s``) or a duration (``horizon: 30d``) reads it here. The grammar is
documented in docs/spec.md (section "Units"); in short::

    value   = number [spaces] [unit]          (spaces around it are ignored)
    number  = [+-] digits ["." [digits]] | "." digits, then optionally e[+-]ddd
              (a sign only for the field's range check: every value is >= 0)
              digits may be grouped with "_" between them: 1_000_000
    size    = B | kB MB GB TB PB (10^3 ..) | KiB MiB GiB TiB PiB (2^10 ..)
              case-insensitive; a bare number is bytes; memory limits
              (--max-memory, AIFABRIC_MAX_MEMORY) also read K M G T P as KiB .. PiB
    rate    = prefix + bit/s, bps, b/s (bits) or B/s, Bps (bytes); prefix: k M G T P
              (10^3 ..) or Ki Mi Gi Ti Pi (2^10 ..), case-insensitive; b/B is not; a
              rate needs a unit
    duration= ns us (µs) ms s sec m min h d w y (365 d), lowercase; a bare number is
              seconds

Values are computed exactly (decimal arithmetic on the text, one rounding at the end):
sizes are whole bytes, rounded down; rates are bits per second (float); durations are
seconds (float).

:func:`parse_size`, :func:`parse_rate` and :func:`parse_duration` raise a
:class:`~aifabric.errors.SpecError` naming the field and the allowed forms. For pydantic
fields, :func:`size_value` and :func:`duration_value` (``BeforeValidator``) raise
:class:`UnitError`, a ValueError, so that the error lands at the field's path.

This is the lowest layer: it imports only :mod:`aifabric.errors` and the standard library.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from aifabric.errors import Problem, SpecError

__all__ = ["DURATION_UNITS", "MAX_SIZE", "MEMORY_UNITS", "RATE_PREFIXES", "SIZE_UNITS",
           "UnitError", "duration_value", "parse_duration", "parse_rate", "parse_size",
           "size_value"]

#: the largest size (bytes) any field can hold: int64
MAX_SIZE = (1 << 63) - 1
#: the longest text read as a value (a longer one is refused before it is parsed)
_MAX_TEXT = 100

_DIGITS = r"[0-9](?:_?[0-9])*"
_VALUE = re.compile(rf"\s*([+-]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})"
                    r"(?:[eE][+-]?[0-9]{1,3})?)\s*([^\s0-9.]*)\s*")

_SI = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
_IEC = {"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40, "pi": 1 << 50}

#: size units (lowercase; the unit is matched case-insensitively) -> bytes
SIZE_UNITS: dict[str, int] = {"": 1, "b": 1, **{f"{p}b": v for p, v in _SI.items()},
                              **{f"{p}b": v for p, v in _IEC.items()}}
#: memory sizes only: K, M, G, T, P without B are KiB .. PiB (docker --memory, -Xmx)
MEMORY_UNITS: dict[str, int] = {p[0]: v for p, v in _IEC.items()}
#: rate prefixes (lowercase; matched case-insensitively) -> factor
RATE_PREFIXES: dict[str, int] = {"": 1, **_SI, **_IEC}
#: rate bases (case-sensitive: b is a bit, B a byte) -> bits
_RATE_BASES = {"bit/s": 1, "bps": 1, "b/s": 1, "B/s": 8, "Bps": 8}
#: duration units (lowercase, matched exactly) -> seconds
DURATION_UNITS: dict[str, Fraction] = {
    "": Fraction(1), "ns": Fraction(1, 10**9), "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6), "μs": Fraction(1, 10**6), "ms": Fraction(1, 1000),
    "s": Fraction(1), "sec": Fraction(1), "m": Fraction(60), "min": Fraction(60),
    "h": Fraction(3600), "d": Fraction(86400), "w": Fraction(7 * 86400),
    "y": Fraction(365 * 86400)}

SIZE_ALLOWED = ("a number of bytes, or a number with B, kB, MB, GB, TB, PB (10^3) or KiB, "
                "MiB, GiB, TiB, PiB (2^10), e.g. 64MiB or 1.5e9 (docs/spec.md, Units)")
MEMORY_ALLOWED = ("a number of bytes, or a number with K, M, G, T, P (= KiB .. PiB), "
                  "KiB .. PiB (2^10) or kB .. PB (10^3), e.g. 8G, 512M, 1.5GiB; 0 = no "
                  "limit (docs/spec.md, Units)")
RATE_ALLOWED = ("a number with bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s (also bps, Gbps, "
                "Gb/s; Ki, Mi, Gi, Ti for 2^10 ..) or with B/s, kB/s, MB/s, GB/s, GiB/s "
                "(bytes), e.g. 400Gbit/s (docs/spec.md, Units)")
DURATION_ALLOWED = ("a number of seconds, or a number with ns, us, ms, s, min (or m), h, d, "
                    "w, y (365 days), e.g. 90s, 10min, 30d (docs/spec.md, Units)")


class UnitError(ValueError):
    """A value that is not a size, rate or duration. The message says what is allowed and
    names neither the field nor the value (pydantic adds both); :func:`parse_size` and
    the others turn it into a :class:`SpecError` that names both."""


def _split(text: Any, what: str, allowed: str) -> tuple[Fraction, str]:
    """The exact number and the unit text of ``text``; UnitError if it is none."""
    m = _VALUE.fullmatch(text) if isinstance(text, str) and len(text) <= _MAX_TEXT else None
    if m is None:
        raise UnitError(f"not a {what}; allowed: {allowed}")
    return Fraction(m.group(1).replace("_", "")), m.group(2)


def _number(v: Any, what: str, allowed: str) -> Fraction | None:
    """A Python number given instead of text, exactly; None if ``v`` is text."""
    if isinstance(v, str):
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or \
            (isinstance(v, float) and not math.isfinite(v)):
        raise UnitError(f"not a {what}; allowed: {allowed}")
    return Fraction(v)


def _size(text: Any, memory: bool) -> int:
    allowed = MEMORY_ALLOWED if memory else SIZE_ALLOWED
    x = _number(text, "size", allowed)
    if x is None:
        x, unit = _split(text, "size", allowed)
        u = unit.lower()
        factor = SIZE_UNITS.get(u) or (MEMORY_UNITS.get(u) if memory else None)
        if factor is None:
            if u in MEMORY_UNITS:
                k = "kmgtp".index(u) + 1
                raise UnitError(f"not a size ({unit} alone is ambiguous: "
                                f"{'kMGTP'[k - 1]}B is 10^{3 * k}, {'KMGTP'[k - 1]}iB "
                                f"2^{10 * k}); allowed: {allowed}")
            raise UnitError(f"not a size; allowed: {allowed}")
        x *= factor
    if abs(x) > MAX_SIZE:
        raise UnitError(f"too large a size; allowed: at most {MAX_SIZE:,} bytes (8 EiB)")
    return math.floor(x)


def _rate(text: Any) -> float:
    if not isinstance(text, str):
        raise UnitError(f"not a rate (a rate needs a unit); allowed: {RATE_ALLOWED}")
    x, unit = _split(text, "rate", RATE_ALLOWED)
    for base, bits in _RATE_BASES.items():
        prefix = unit.removesuffix(base)
        if unit.endswith(base) and prefix.lower() in RATE_PREFIXES:
            return _finite(x * RATE_PREFIXES[prefix.lower()] * bits, "rate")
    if unit == "":
        raise UnitError(f"not a rate (a rate needs a unit); allowed: {RATE_ALLOWED}")
    if unit.lower() in RATE_PREFIXES:
        raise UnitError(f"not a rate ({unit} alone is ambiguous: {unit}bit/s or "
                        f"{unit}B/s?); allowed: {RATE_ALLOWED}")
    raise UnitError(f"not a rate; allowed: {RATE_ALLOWED}")


def _duration(text: Any) -> float:
    x = _number(text, "duration", DURATION_ALLOWED)
    if x is None:
        x, unit = _split(text, "duration", DURATION_ALLOWED)
        if unit not in DURATION_UNITS:
            raise UnitError(f"not a duration; allowed: {DURATION_ALLOWED}")
        x *= DURATION_UNITS[unit]
    return _finite(x, "duration")


def _finite(x: Fraction, what: str) -> float:
    try:
        return float(x)
    except OverflowError:
        raise UnitError(f"too large a {what}") from None


def _spec_error(err: UnitError, text: Any, field: str) -> SpecError:
    shown = repr(text) if not isinstance(text, str) or len(text) <= 40 else \
        f"{text[:40]!r}... ({len(text):,} characters)"
    return SpecError(Problem(field, f"{shown} is {err}"))


# ------------------------------------------------------------------ the public parsers
def _parsed(read: Callable[[], Any], text: Any, field: str, what: str, allowed: str) -> Any:
    """``read()``, its UnitError or a negative value raised as a SpecError at ``field``."""
    try:
        value = read()
    except UnitError as err:
        raise _spec_error(err, text, field) from None
    if value < 0:
        raise _spec_error(UnitError(f"a negative {what}; allowed: {allowed}"), text, field)
    return value


def parse_size(text: str | int | float, field: str, *, memory: bool = False) -> int:
    """A size -> bytes (int, rounded down). ``memory``: a memory limit, where K, M, G, T,
    P without B also mean KiB .. PiB. SpecError at ``field`` if it is no size or
    negative."""
    return _parsed(lambda: _size(text, memory), text, field, "size",
                   MEMORY_ALLOWED if memory else SIZE_ALLOWED)


def parse_rate(text: str, field: str) -> float:
    """A rate -> bits per second (float). SpecError at ``field`` if it is no rate or
    negative."""
    return _parsed(lambda: _rate(text), text, field, "rate", RATE_ALLOWED)


def parse_duration(text: str | int | float, field: str) -> float:
    """A duration -> seconds (float). SpecError at ``field`` if it is no duration or
    negative."""
    return _parsed(lambda: _duration(text), text, field, "duration", DURATION_ALLOWED)


# ------------------------------------------------------------------ pydantic validators
def size_value(v: Any) -> Any:
    """``BeforeValidator`` of a size field: text -> bytes (UnitError if it is no size), a
    whole float -> int; anything else unchanged, for the field's own validation (which
    also bounds the value: ``-5MiB`` is told the field's range, as -5242880 is)."""
    if isinstance(v, str):
        return _size(v, False)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def duration_value(v: Any) -> Any:
    """``BeforeValidator`` of a duration field (seconds): text -> seconds (UnitError if it
    is no duration); anything else unchanged, for the field's own validation."""
    if isinstance(v, str):
        return _duration(v)
    return v
