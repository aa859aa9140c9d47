"""The help page of every command and subcommand at 80 columns: nothing wider, no word
cut at the end of a line, no internal type name, every choice spelled out whole, ``-o``
beside every ``--out``, one name (``--store``) for the results store.

"No word cut" is checked as an invariant, not a snapshot: every word of the 80-column
page is also a word of the same page rendered 400 columns wide (where nothing wraps);
a word folded in two (``ns3-rdm`` / ``a|htsim``) is a word of neither.
"""

from __future__ import annotations

import re

import pytest

from aifabric.cli import COMMANDS, load_command

#: what typer or pydantic would show and a user should never read
INTERNAL = ("<bool>", "<str>", "<int", "<float>", "<path>", "<list", "list[", "Path]",
            "literal[", "constrained-", "{")
BOX = "│╭╮╰╯─"


def _pages(name: str) -> list[tuple[str, ...]]:
    cmd = load_command(name)
    subs = sorted(getattr(cmd, "commands", {}))
    return [(name,), *[(name, s) for s in subs]]


def _command(path: tuple[str, ...]):
    cmd = load_command(path[0])
    for sub in path[1:]:
        cmd = cmd.commands[sub]
    return cmd


def _words(text: str) -> set[str]:
    return set(text.translate({ord(c): " " for c in BOX}).split())


def _help(cli, monkeypatch, path: tuple[str, ...], columns: int) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    r = cli(*path, "--help")
    assert r.code == 0, (path, r.err)
    return r.out


def _visible_params(cmd):
    """The parameters as the help page shows them (help option included)."""
    import typer

    return [p for p in cmd.get_params(typer.Context(cmd)) if not getattr(p, "hidden", False)]


def _choices(param) -> list[str]:
    desc = getattr(param, "type_descriptor", None)
    if desc is None or not desc.is_choice:
        return []
    return [str(getattr(c, "value", c)) for c in desc.choices or ()]


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_help_pages_at_80_columns(cli, monkeypatch, name):
    for path in _pages(name) if name else [()]:
        page = _help(cli, monkeypatch, path, 80)
        wide = _help(cli, monkeypatch, path, 400)
        lines = page.splitlines()
        assert max(map(len, lines)) <= 80, (path, [ln for ln in lines if len(ln) > 80])
        assert "…" not in page, path  # nothing cut short
        cut = _words(page) - _words(wide)
        assert not cut, (path, sorted(cut))  # a word split across two lines
        for bad in INTERNAL:
            assert bad not in page, (path, bad)
        if not path:
            continue
        cmd = _command(path)
        for p in _visible_params(cmd):
            for choice in _choices(p):  # every choice shown, whole
                assert re.search(rf"(?<![\w-]){re.escape(choice)}(?![\w-])", page), \
                    (path, p.name, choice)
            if "--out" in p.opts:
                assert "-o" in p.opts, path
                row = next(ln for ln in lines if re.match(r"│ [ *]*--out ", ln))
                assert " -o " in row, (path, row)


def test_usage_lines_use_one_placeholder_style(cli, monkeypatch):
    """Arguments in capitals, optional ones in brackets: ``SCENARIO``, ``[TARGET]``,
    ``SPEC...`` (no ``{spec}``, ``[specs]...``)."""
    for name in COMMANDS:
        for path in _pages(name):
            page = _help(cli, monkeypatch, path, 400)
            usage = next(ln for ln in page.splitlines() if "Usage:" in ln)
            words = usage.split("[OPTIONS]", 1)[1].split()
            for w in words:
                assert re.fullmatch(r"\[?[A-Z_]+\]?(\.\.\.)?|COMMAND|\[ARGS\]\.\.\.", w), \
                    (path, usage)


def test_every_option_taking_a_value_shows_a_placeholder_and_no_flag_does():
    for name in COMMANDS:
        for path in _pages(name):
            cmd = _command(path)
            for p in _visible_params(cmd):
                if getattr(p, "is_flag", False):
                    assert p.metavar == "", (path, p.name)
                else:
                    choices = _choices(p)
                    assert p.metavar == f"[{'|'.join(choices)}]" or (
                        p.metavar and p.metavar == p.metavar.upper()), (path, p.name)


def test_the_results_store_is_store_everywhere(cli, monkeypatch):
    """``--store DIR`` in sweep run, sweep report, simulate and every results command;
    no visible argument or other option names the store."""
    for path in [("sweep", "run"), ("sweep", "report"), ("simulate",),
                 ("results", "query"), ("results", "list"), ("results", "compact"),
                 ("results", "verify")]:
        cmd = _command(path)
        opts = {o for p in _visible_params(cmd) for o in p.opts}
        assert "--store" in opts, path
        assert not [p for p in _visible_params(cmd)
                    if p.param_type_name == "argument" and "store" in (p.name or "")], path
