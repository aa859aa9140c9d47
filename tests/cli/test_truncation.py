"""Nothing is hidden silently: a cut table says "N of M shown; all in FILE", the
collective timeline draws every collective, and --help reads as prose."""

from __future__ import annotations

import inspect
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from tests.conftest import EXAMPLES

GPT = EXAMPLES / "scenarios" / "gpt-hpn.yaml"


@pytest.fixture(scope="module")
def gpt():
    from aifabric.cli.simulate import load_and_run

    return load_and_run(GPT, "analytic")


def test_console_table_says_how_many_it_shows(cli):
    r = cli("simulate", GPT, "--sim", "analytic")
    assert r.code == 0, r.err
    assert "20 of 128 collectives shown; all in collectives.csv" in r.out


def test_markdown_report_says_how_many_it_shows(gpt):
    from aifabric.report.markdown import render_markdown

    md = render_markdown([gpt], files={gpt.scenario: ["collectives.csv"]})
    assert "of 128 collectives shown; all in `collectives.csv`" in md


def test_timeline_draws_every_collective(gpt):
    from aifabric.report.plots import collective_timeline

    fig, ax = plt.subplots()
    info = collective_timeline(gpt, ax)
    plt.close(fig)
    n = len(gpt.tables["collectives"]["collective"])
    bars = sum(len(col.get_paths()) for col in ax.collections)
    assert info["collectives"] == n == 128
    assert bars == n  # one bar per collective, none left out
    assert info["aggregated_by"]  # 128 > 40 rows: aggregated, and the title says by what
    assert "aggregated" in ax.get_title()
    _, hi = ax.get_xlim()
    assert hi * 1e6 >= gpt.makespan_ns * 0.999  # the whole iteration is on the axis


def _commands():
    import typer.main

    from aifabric.cli import app

    group = typer.main.get_command(app)
    out = [((), group)]
    for name, cmd in group.commands.items():
        out.append(((name,), cmd))
        for sub, c in getattr(cmd, "commands", {}).items():
            out.append(((name, sub), c))
    return out


@pytest.mark.parametrize("path,cmd", _commands(), ids=lambda x: " ".join(x)
                         if isinstance(x, tuple) else "")
def test_help_reads_as_prose(cli, monkeypatch, path, cmd):
    """The first paragraph of every docstring appears on --help as flowing text: no
    line of it ends where the source line ended (unless the terminal width did)."""
    monkeypatch.setenv("COLUMNS", "200")
    r = cli(*path, "--help")
    assert r.code == 0
    text = " ".join(inspect.cleandoc(cmd.help or "").split("\n\n")[0].split())
    if len(text) < 60:
        return
    flat = re.sub(r"[│\s]+", " ", r.out)
    assert text[:150] in flat
    # a sentence broken where the docstring's source line ended shows as two lines
    first_src_line = inspect.cleandoc(cmd.help or "").splitlines()[0].strip()
    for line in r.out.splitlines():
        assert line.strip(" │").rstrip() != first_src_line or len(text) == len(first_src_line)


def test_command_list_is_one_line_per_command_when_wide(cli, monkeypatch):
    """At 200 columns each command's summary in ``aifabric --help`` fits one line: a
    hard line break from the docstring would split it."""
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("--help")
    for path, cmd in _commands():
        if len(path) != 1:
            continue
        summary = " ".join(inspect.cleandoc(cmd.help or "").split("\n\n")[0].split())
        # the row that starts with the command's name (another summary may contain it:
        # monitor's says "serve")
        line = next(x for x in r.out.splitlines()
                    if x.strip("│ ").split(" ", 1)[0] == path[0])
        assert summary[:120] in line, (path, line)
