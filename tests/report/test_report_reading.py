"""What a reader of a multi-run report (the demo's) sees: differences only between runs
of one experiment, each named (which run against which), the analytic model's link peak
explained as offered load in multiples of capacity, and folder names a shell is happy
with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aifabric.report.markdown import ANALYTIC_PEAK, render_markdown
from aifabric.report.write import _unique_names

SMALL = Path(__file__).resolve().parents[1] / "sweep" / "small.yaml"


@pytest.fixture(scope="module")
def runs():
    """Two experiments: flow with 4 MiB vs 16 MiB (experiment A), analytic with 4 MiB vs
    16 MiB (experiment B)."""
    import yaml

    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario
    from aifabric.topology import build_fabric

    base = yaml.safe_load(SMALL.read_text())
    out = []
    for sim in ("flow", "analytic"):
        for size in ("4MiB", "16MiB"):
            doc = {**base, "name": f"{sim} {size}", "sim": sim,
                   "collectives": [{**base["collectives"][0], "size_bytes": size}]}
            scn = scenario_from_dict(doc, base_dir=SMALL.parent, model=SimScenario)
            out.append(simulate(scn, build_fabric(scn.spec)))
    return out


def _tables(md: str) -> list[list[list[str]]]:
    tables, cur = [], []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            cur.append([c.strip() for c in line.strip("|").split("|")])
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def test_groups_compare_runs_of_one_experiment_only(runs):
    md = render_markdown(runs, groups=[("A", [0, 1]), ("B", [2, 3])])
    assert "last vs first" not in md
    sides = [t for t in _tables(md) if t[0][0] == "metric"]
    assert len(sides) == 2
    for table, (a, b) in zip(sides, ((runs[0], runs[1]), (runs[2], runs[3])), strict=True):
        head = table[0]
        assert head == ["metric", a.scenario, b.scenario, f"{b.scenario} vs {a.scenario}"]
        row = next(r for r in table if r[0] == "makespan")
        want = (b.makespan_ns - a.makespan_ns) / a.makespan_ns * 100
        assert row[-1] == f"{want:+.1f}%"
    for sec in md.split("## Side by side: ")[1:]:
        assert "Difference: each run against **" in sec.split("\n\n")[1]


def test_analytic_peak_is_offered_load_and_explained(runs):
    md = render_markdown([runs[2]])
    assert "max peak offered (x capacity)" in md and ANALYTIC_PEAK in md
    flow = render_markdown([runs[0]])
    assert ANALYTIC_PEAK not in flow and "| max peak |" in flow
    side = render_markdown(runs[2:], groups=[("B", [0, 1])])
    assert "max link peak offered load (x capacity)" in side and ANALYTIC_PEAK in side


@pytest.mark.parametrize("names", [
    ["DCN+ spread over 19 segments", "HPN packed into 3 segments"],
    ["a  b", "a b", "a-b", "a-b-2", "--x--", "..", "é☃", "", "x/../y", "3.5 x", "a--b"],
])
def test_folder_names_are_plain_and_unique(names):
    out = _unique_names(names)
    assert len(set(out)) == len(out)
    for n in out:
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", n), n
        assert "--" not in n and not n.endswith(("-", "."))
    assert out[0] == "DCN-spread-over-19-segments" or names[0] != \
        "DCN+ spread over 19 segments"


def test_a_comparison_names_what_it_compares(runs):
    """compare's report (no groups): the difference column says which run against which."""
    md = render_markdown(runs[:2])
    head = next(t for t in _tables(md) if t[0][0] == "metric")[0]
    assert head[-1] == f"difference: {runs[1].scenario} vs {runs[0].scenario}"
    assert f"**{runs[1].scenario}** against **{runs[0].scenario}**" in md
