"""The flows CSV of a ``pattern: flows`` traffic entry (route and simulate read it): a row
with a missing or extra field, a bad header, a blank line inside, bytes that are not UTF-8
or a number out of range is one line per problem naming the scenario, the CSV, the line
and the expected columns; exit 2 (issue 11, item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

RAIL = "name: rail-mini\nhosts: {count: 5, port_gbps: 400}\ntopology: {family: rail}\n"
HEADER = "src,dst,size_bytes,qps,path"
COLS = "(src,dst,size_bytes,qps,path)"
A = "host-s00-h000-gpu0,host-s00-h001-gpu0,1048576,1,"
B = "host-s00-h002-gpu1,host-s00-h003-gpu1,,,"


def _scenario(tmp_path: Path, csv: str | bytes, policy: str = "ecmp") -> Path:
    (tmp_path / "rail.yaml").write_text(RAIL)
    f = tmp_path / "flows.csv"
    if isinstance(csv, bytes):
        f.write_bytes(csv)
    else:
        f.write_text(csv)
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\nspec: rail.yaml\nrouting: {{policy: {policy}}}\n"
                 "traffic: [{pattern: flows, file: flows.csv}]\n")
    return p


#: case -> (CSV text, the expected lines: (field path, words in the message))
BAD = {
    "extra field": (f"{HEADER}\n{A},x\n{B}\n",
                    [("traffic.0.file line 2", f"6 field(s), expected 5 {COLS}")]),
    "missing field": (f"{HEADER}\n{A}\nhost-s00-h002-gpu1,host-s00-h003-gpu1\n",
                      [("traffic.0.file line 3", f"2 field(s), expected 5 {COLS}")]),
    "both, one line each": (f"{HEADER}\n{A},x\n{B}\nhost-s00-h002-gpu1\n",
                            [("traffic.0.file line 2", "6 field(s), expected 5"),
                             ("traffic.0.file line 4", "1 field(s), expected 5")]),
    "short header": ("src,dst\n" + "host-s00-h000-gpu0,host-s00-h001-gpu0,5\n",
                     [("traffic.0.file line 2", "3 field(s), expected 2 (src,dst)")]),
    "unknown column": ("src,dst,bytes\nhost-s00-h000-gpu0,host-s00-h001-gpu0,5\n",
                       [("traffic.0.file", "line 1: unknown column(s) 'bytes' in header "
                         "src,dst,bytes; allowed columns: src, dst, size_bytes, qps, path")]),
    "repeated column": ("src,dst,src\nhost-s00-h000-gpu0,host-s00-h001-gpu0,x\n",
                        [("traffic.0.file", "line 1: repeated column(s) src")]),
    "no dst": ("src,size_bytes\nhost-s00-h000-gpu0,5\n",
               [("traffic.0.file", "src and dst are required")]),
    "blank line inside": (f"{HEADER}\n{A}\n\n{B}\n",
                          [("traffic.0.file line 3", "a blank line; allowed: one flow per "
                            "line")]),
    "empty file": ("", [("traffic.0.file", "'flows.csv' is empty")]),
    "size out of range": (f"{HEADER}\nhost-s00-h000-gpu0,host-s00-h001-gpu0,"
                          f"{10**30},1,\n",
                          [("traffic.0.file line 2: size_bytes", "is out of range; allowed: "
                            "0..1125899906842624")]),
    "qps not an integer": (f"{HEADER}\nhost-s00-h000-gpu0,host-s00-h001-gpu0,5,two,\n",
                           [("traffic.0.file line 2: qps", "not an integer: 'two'")]),
}


@pytest.mark.parametrize("command", ["route", "simulate"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_flows_csv_is_one_line_per_problem(cli, tmp_path, case, command):
    text, expected = BAD[case]
    s = _scenario(tmp_path, text)
    r = cli(command, s)
    assert r.code == 2, (r.out, r.err)
    assert "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == len(expected), r.err
    for line, (path, words) in zip(lines, expected, strict=True):
        assert line.startswith(f"error: {s}: {path}: "), line
        assert words in line, line
        assert "flows.csv" in line, line


@pytest.mark.parametrize("command", ["route", "simulate"])
def test_not_utf8_is_one_line(cli, tmp_path, command):
    s = _scenario(tmp_path, f"{HEADER}\n{A}\n".encode() + b"\xff\xfe,\n")
    r = cli(command, s)
    assert r.code == 2 and "Traceback" not in r.err
    (line,) = r.err.strip().splitlines()
    assert line.startswith(f"error: {s}: traffic.0.file: 'flows.csv': cannot read: "), line


def test_trailing_blank_lines_are_fine_and_lines_stay_exact(cli, tmp_path):
    """Blank lines at the end are ignored; a problem found after reading (a pinned path
    under another policy... here: an unknown GPU) names the row's real line."""
    s = _scenario(tmp_path, f"{HEADER}\n{A}\n{B}\n\n\n")
    assert cli("route", s).code == 0
    s = _scenario(tmp_path, f"{HEADER}\n{A}\nhost-s00-h009-gpu0,{B.split(',', 1)[1]}\n")
    r = cli("route", s)
    (line,) = r.err.strip().splitlines()
    assert line.startswith(f"error: {s}: traffic.0.file line 3: src: "), line
