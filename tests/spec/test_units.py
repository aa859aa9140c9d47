"""One grammar for sizes, rates and durations (aifabric.spec.units, docs/spec.md "Units"):
format -> parse round trips for every unit, exact decimal arithmetic, the case rules,
the memory-only bare prefixes, and garbage refused with one problem naming the field."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.errors import SpecError
from aifabric.spec.units import (
    DURATION_UNITS,
    MAX_SIZE,
    duration_value,
    parse_duration,
    parse_rate,
    parse_size,
    size_value,
)
from tests.conftest import ROOT

# the tables as docs/spec.md writes them, independently of the module's own
SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
SIZES = {"": 1, "B": 1, **{f"{p}B": v for p, v in SI.items()},
         **{f"{p}B": v for p, v in IEC.items()}}
MEMORY_ONLY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
BITS = ("bit/s", "bps", "b/s")
BYTES = ("B/s", "Bps")
SECONDS = {"": 1, "ns": Fraction(1, 10**9), "us": Fraction(1, 10**6),
           "µs": Fraction(1, 10**6), "ms": Fraction(1, 1000), "s": 1, "sec": 1, "m": 60,
           "min": 60, "h": 3600, "d": 86400, "w": 604800, "y": 365 * 86400}

SPACE = st.sampled_from(["", " ", "  "])


def _group(n: int, draw_sep: list[bool]) -> str:
    """``n`` with ``_`` between some of its digits."""
    digits = str(n)
    return "".join(d + ("_" if i < len(digits) - 1 and draw_sep[i % len(draw_sep)] else "")
                   for i, d in enumerate(digits))


def _one_problem(err: SpecError, field: str, kind: str) -> str:
    assert len(err.problems) == 1
    p = err.problems[0]
    assert p.path == field
    assert any(f"{x} {kind}" in p.message for x in ("is not a", "too large a", "is a negative")), \
        p.message
    assert "\n" not in str(err)
    return p.message


# ------------------------------------------------------------------ sizes
@given(n=st.integers(0, 10**6), unit=st.sampled_from(sorted(SIZES)), space=SPACE,
       seps=st.lists(st.booleans(), min_size=1, max_size=4))
def test_whole_sizes_round_trip_with_every_unit(n, unit, space, seps):
    text = f"{_group(n, seps)}{space if unit else ''}{unit}"
    _check_size(text, n * SIZES[unit])


def _check_size(text: str, exact: int) -> None:
    """``text`` parses to ``exact`` bytes, or is refused as too large when over int64."""
    if exact <= MAX_SIZE:
        assert parse_size(text, "f") == exact
    else:
        with pytest.raises(SpecError) as exc:
            parse_size(text, "f")
        assert "too large" in _one_problem(exc.value, "f", "size")


@given(whole=st.integers(0, 10**4), frac=st.integers(0, 10**6), unit=st.sampled_from(sorted(SIZES)))
def test_decimal_sizes_are_exact_and_rounded_down(whole, frac, unit):
    digits = str(frac)
    exact = (whole * 10 ** len(digits) + frac) * SIZES[unit] // 10 ** len(digits)
    _check_size(f"{whole}.{digits}{unit}", exact)


@given(mant=st.integers(1, 999), exp=st.integers(0, 15), plus=st.booleans(),
       e=st.sampled_from("eE"))
def test_exponents(mant, exp, plus, e):
    assert parse_size(f"{mant}{e}{'+' if plus else ''}{exp}", "f") == mant * 10**exp


def test_exact_where_floats_are_not():
    # float(4.35) * 1e6 = 4349999.999999999 (the old parsers gave 4,349,999)
    assert parse_size("4.35MB", "f") == 4_350_000
    assert parse_size("1.1GB", "f") == 1_100_000_000
    assert parse_size(".5KiB", "f") == 512 and parse_size("5.", "f") == 5
    assert parse_duration("0.1h", "f") == 360.0
    assert parse_duration("4.35ms", "f") == float(Fraction(435, 100_000))


@given(unit=st.sampled_from([u for u in SIZES if u]), data=st.data())
def test_size_units_are_case_insensitive(unit, data):
    flips = data.draw(st.lists(st.booleans(), min_size=len(unit), max_size=len(unit)))
    text = "".join(c.swapcase() if f else c for c, f in zip(unit, flips, strict=True))
    assert parse_size(f"3{text}", "f") == 3 * SIZES[unit]


@pytest.mark.parametrize("unit", sorted(MEMORY_ONLY))
def test_bare_prefixes_are_binary_in_memory_limits_only(unit):
    assert parse_size(f"4{unit}", "--max-memory", memory=True) == 4 * MEMORY_ONLY[unit]
    assert parse_size(f"4{unit.lower()}", "--max-memory", memory=True) == 4 * MEMORY_ONLY[unit]
    # memory limits read every other size unit as sizes do
    assert parse_size("2GB", "m", memory=True) == 2 * 10**9
    with pytest.raises(SpecError) as exc:
        parse_size(f"4{unit}", "collectives.0.size_bytes")
    msg = _one_problem(exc.value, "collectives.0.size_bytes", "size")
    assert "ambiguous" in msg and f"{unit}iB" in msg


def test_sizes_over_int64_are_refused_not_wrapped():
    assert parse_size(str(MAX_SIZE), "f") == MAX_SIZE
    for text in (str(MAX_SIZE + 1), "1e400", "9.3e18", "8EiB", "1e999PiB"):
        with pytest.raises(SpecError) as exc:
            parse_size(text, "f")
        _one_problem(exc.value, "f", "size")


# ------------------------------------------------------------------ rates
@given(n=st.integers(1, 10**5), prefix=st.sampled_from(["", *SI, *IEC]),
       base=st.sampled_from(BITS + BYTES), space=SPACE, lower=st.booleans())
def test_rates_round_trip_in_bits_per_second(n, prefix, base, space, lower):
    factor = {"": 1, **SI, **IEC}[prefix]
    bits = 8 if base in BYTES else 1
    p = prefix.lower() if lower else prefix  # the prefix's case does not matter
    assert parse_rate(f"{n}{space}{p}{base}", "r") == float(n * factor * bits)


def test_bits_and_bytes_differ_by_case_only():
    assert parse_rate("400Gbps", "r") == 400e9
    assert parse_rate("400GBps", "r") == 3200e9
    assert parse_rate("400Gb/s", "r") == parse_rate("400Gbit/s", "r") == 400e9
    assert parse_rate("50GB/s", "r") == 400e9


@pytest.mark.parametrize("text,hint", [("400", "needs a unit"), ("400G", "ambiguous"),
                                       ("400Gi", "ambiguous"), ("400 gigabit", "allowed")])
def test_a_rate_needs_an_unambiguous_unit(text, hint):
    with pytest.raises(SpecError) as exc:
        parse_rate(text, "links.rate")
    assert hint in _one_problem(exc.value, "links.rate", "rate")
    with pytest.raises(SpecError):
        parse_rate(400e9, "links.rate")  # type: ignore[arg-type]


# ------------------------------------------------------------------ durations
@given(n=st.integers(0, 10**6), unit=st.sampled_from(sorted(SECONDS)), space=SPACE)
def test_durations_round_trip_in_seconds(n, unit, space):
    text = f"{n}{space if unit else ''}{unit}"
    assert parse_duration(text, "d") == float(n * Fraction(SECONDS[unit]))


@given(whole=st.integers(0, 1000), frac=st.integers(0, 999),
       unit=st.sampled_from(sorted(SECONDS)))
def test_decimal_durations_are_one_rounding(whole, frac, unit):
    exact = (Fraction(whole) + Fraction(frac, 1000)) * Fraction(SECONDS[unit])
    assert parse_duration(f"{whole}.{frac:03d}{unit}", "d") == float(exact)


@pytest.mark.parametrize("unit", [u for u in SECONDS if u and u != "µs"])
def test_duration_units_are_lowercase(unit):
    with pytest.raises(SpecError) as exc:
        parse_duration(f"5{unit.upper()}", "goodput.horizon")
    _one_problem(exc.value, "goodput.horizon", "duration")


def test_the_module_tables_are_the_documented_ones():
    """The unit words docs/spec.md lists are the ones the parser takes (and back)."""
    assert set(DURATION_UNITS) == set(SECONDS) | {"μs"}  # Greek mu as well as micro sign
    doc = (ROOT / "docs" / "spec.md").read_text()
    section = doc[doc.index("## Units"):doc.index("## Size limits")]
    for unit in [*SIZES, *MEMORY_ONLY, *BITS, *BYTES, *SECONDS]:
        if unit:
            assert f"`{unit}`" in section, unit


# ------------------------------------------------------------------ garbage
#: no unit word contains these letters, so any text with one is no value
_NEVER = "qxzjvQXZJV,;!%$#-"


@settings(max_examples=300)
@given(text=st.text(max_size=30).filter(lambda t: any(c in _NEVER for c in t)))
def test_garbage_is_one_problem_naming_the_field(text):
    for parse, kind in ((parse_size, "size"), (parse_rate, "rate"),
                        (parse_duration, "duration")):
        with pytest.raises(SpecError) as exc:
            parse(text, "some.field")
        msg = _one_problem(exc.value, "some.field", kind)
        assert "allowed:" in msg and "docs/spec.md, Units" in msg


@pytest.mark.parametrize("text", ["", " ", "G", "GiB", "- 1G", "+-1G", "1 2", "1,000",
                                  "1__000", "_1", "1_", "1.2.3", "1e", "1e1000", "1 G iB",
                                  "0x10", "inf", "nan", "1GiBs", "4 gigs"])
def test_malformed_values(text):
    with pytest.raises(SpecError) as exc:
        parse_size(text, "--max-memory", memory=True)
    _one_problem(exc.value, "--max-memory", "size")


def test_long_text_is_refused_before_it_is_parsed():
    with pytest.raises(SpecError) as exc:
        parse_size("1" * 100_000, "f")
    msg = _one_problem(exc.value, "f", "size")
    assert "100,000 characters" in msg and len(msg) < 600


@pytest.mark.parametrize("value", [True, None, [1], -1, -0.5, float("nan"), float("inf")])
def test_non_text_values(value):
    with pytest.raises(SpecError):
        parse_size(value, "f")  # type: ignore[arg-type]
    with pytest.raises(SpecError):
        parse_duration(value, "f")  # type: ignore[arg-type]


def test_a_sign_is_read_for_the_range_check_only():
    """``-5MiB`` in a scenario is told the field's range, as -5242880 is; the parsers of
    options refuse it as negative."""
    assert parse_size("+1G", "m", memory=True) == 1 << 30
    for parse, kind in ((parse_size, "size"), (parse_duration, "duration")):
        with pytest.raises(SpecError) as exc:
            parse("-5", "opt")
        assert "allowed:" in _one_problem(exc.value, "opt", kind)
    with pytest.raises(SpecError) as exc:
        parse_rate("-1Gbps", "opt")
    _one_problem(exc.value, "opt", "rate")
    assert size_value("-5MiB") == -5 << 20 and duration_value("-2d") == -2 * 86400.0


def test_numbers_are_the_base_unit():
    assert parse_size(4096, "f") == 4096 and parse_size(2.0**40, "f") == 2**40
    assert parse_duration(90, "f") == 90.0 and parse_duration(0.5, "f") == 0.5


# ------------------------------------------------------------------ where it is used
def test_scenario_fields_report_at_their_path(tmp_path: Path):
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.scenario import SimScenario

    doc = {"name": "x", "spec": str(ROOT / "examples" / "hpn-pod.yaml"),
           "collectives": [{"op": "allreduce", "gpus": 8, "size_bytes": "4 gigs"}],
           "traffic": [{"pattern": "permutation", "shift": 1, "size_bytes": "1G"}]}
    with pytest.raises(SpecError) as exc:
        scenario_from_dict(doc, base_dir=tmp_path, model=SimScenario)
    by_path = {p.path: p.message for p in exc.value.problems}
    assert set(by_path) == {"collectives.0.size_bytes", "traffic.0.size_bytes"}
    assert by_path["collectives.0.size_bytes"].startswith("not a size; allowed:")
    assert "'4 gigs'" in by_path["collectives.0.size_bytes"]
    assert "ambiguous" in by_path["traffic.0.size_bytes"]
    doc["collectives"][0]["size_bytes"] = "64 MiB"
    doc["traffic"][0]["size_bytes"] = "1_000kB"
    s = scenario_from_dict(doc, base_dir=tmp_path, model=SimScenario)
    assert s.collectives[0].size_bytes == 64 << 20
    assert s.traffic[0].size_bytes == 10**6


def test_the_suggested_limit_parses_to_more_than_the_need(monkeypatch):
    """The refusal's "e.g. --max-memory 32.7G" is read back as at least what is needed."""
    from aifabric import guard

    monkeypatch.setattr(guard, "_LIMIT", 1 << 20)
    for need in (3 << 20, 26_200 << 20, 5 << 40, 1500 << 40):
        with pytest.raises(SpecError) as exc:
            guard.refuse("x", "this", need, None)
        suggest = re.search(r"e\.g\. --max-memory (\S+)\)", str(exc.value))
        assert suggest, str(exc.value)
        assert parse_size(suggest.group(1), "--max-memory", memory=True) >= need
