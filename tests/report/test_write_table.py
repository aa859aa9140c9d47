"""One table writer (``aifabric.report.write.write_table``) for the simulation tables
(floats as ``%.10g``) and the route tables (floats as Python's shortest repr)."""

from __future__ import annotations

import csv

import numpy as np

from aifabric.report.write import FLOAT_FORMAT, write_table


def _rows(path):
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_float_format_per_call(tmp_path):
    x = np.array([0.1 + 0.2, 1 / 3, 2.5e-12, 1e20])
    table = {"x": x, "n": np.arange(4), "name": np.array(["a", "b,c", "", "d"], dtype=object)}
    write_table(tmp_path / "sim.csv", table)
    write_table(tmp_path / "route.csv", table, float_format=None)
    sim, route = _rows(tmp_path / "sim.csv"), _rows(tmp_path / "route.csv")
    assert sim[0] == route[0] == ["x", "n", "name"]
    assert [r[0] for r in sim[1:]] == [FLOAT_FORMAT % v for v in x]
    assert [float(r[0]) for r in route[1:]] == x.tolist()  # repr: exact round trip
    assert [r[0] for r in route[1:]] == [repr(v) for v in x.tolist()]
    assert [r[1:] for r in sim] == [r[1:] for r in route]  # other columns alike
    assert sim[2][2] == "b,c"


def test_an_empty_table_has_its_header(tmp_path):
    write_table(tmp_path / "e.csv", {"x": np.zeros(0), "y": np.zeros(0, np.int64)})
    assert _rows(tmp_path / "e.csv") == [["x", "y"]]


def test_chunked_writing_gives_the_bytes_of_one_pass(tmp_path, monkeypatch):
    """The CSV is written a chunk of rows at a time; the file is the one ``csv`` writes
    from all rows at once, whatever the chunk size (a chunk of 7 over 50 rows: a last,
    shorter chunk; one of 50; one larger than the table)."""
    import aifabric.report.write as w

    rng = np.random.default_rng(3)
    n = 50
    table = {"t": rng.uniform(0, 1e6, n), "n": rng.integers(-5, 10**12, n),
             "name": np.array([f"sw{i % 7} -> h,{i}" for i in range(n)], dtype=object),
             "f": np.where(rng.uniform(size=n) < 0.2, np.nan, rng.normal(size=n))}
    want = tmp_path / "want.csv"
    with want.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(list(table))
        for i in range(n):
            out.writerow([FLOAT_FORMAT % table["t"][i], int(table["n"][i]), table["name"][i],
                          FLOAT_FORMAT % table["f"][i]])
    for chunk in (7, 50, 10_000):
        monkeypatch.setattr(w, "CSV_CHUNK_ROWS", chunk)
        got = tmp_path / f"got{chunk}.csv"
        write_table(got, table)
        assert got.read_bytes() == want.read_bytes()


def test_columns_of_unequal_length_are_refused(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="unequal length"):
        write_table(tmp_path / "bad.csv", {"x": np.zeros(3), "y": np.zeros(2)})
