"""Start-up stays lazy: ``import aifabric``, ``import aifabric.cli`` and ``aifabric --help``
import none of the heavy libraries, a subcommand imports only its own module, and the
static help table of :data:`aifabric.cli.COMMANDS` says what each command's docstring
says (so ``aifabric --help`` lists the same text it would after importing them all)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

from aifabric.cli import COMMANDS, load_command

#: never imported by the command line's start-up (numpy is allowed where needed)
HEAVY = ("numba", "scipy", "matplotlib", "pandas", "pyarrow", "pydantic", "jinja2",
         "networkx", "llvmlite")

#: run in a fresh interpreter: the code, then (even when it exits) the modules it imported
_PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules))))
{code}
"""


def _modules_after(code: str) -> set[str]:
    env = {**os.environ, "COLUMNS": "200"}
    p = subprocess.run([sys.executable, "-c", _PROBE.format(code=code)], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    line = p.stderr.rsplit("MODULES ", 1)
    assert len(line) == 2, p.stderr
    return set(json.loads(line[1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY)


def _cli_run(*args: str) -> str:
    argv = ["aifabric", *args]
    return f"import sys; sys.argv = {argv!r}\nfrom aifabric.cli import main\nmain()"


@pytest.mark.parametrize("code", ["import aifabric", "import aifabric.cli",
                                  _cli_run("--help"), _cli_run("--version")],
                         ids=["import aifabric", "import aifabric.cli", "--help", "--version"])
def test_start_up_imports_no_heavy_library(code):
    mods = _modules_after(code)
    assert _heavy(mods) == []
    # nor any subcommand's module (only _usage: the help pages' look, typer alone)
    assert {m for m in mods if m.startswith("aifabric.cli.")} <= {"aifabric.cli._usage"}


def test_a_command_imports_only_its_own_module():
    mods = _modules_after(_cli_run("export", "--help"))
    cli_mods = sorted(m for m in mods if m.startswith("aifabric.cli."))
    assert cli_mods == ["aifabric.cli._common", "aifabric.cli._usage", "aifabric.cli.export"]
    assert "aifabric.planning.summary" not in mods  # another command's dependency


@pytest.mark.parametrize("name", ["lab", "demo"])
def test_help_of_a_light_command_needs_no_fabric(name):
    """``_common`` imports spec and topology (pydantic models, scipy) only when a command
    loads a spec: the help of a command that imports nothing else stays light (typer
    itself brings pydantic)."""
    mods = _modules_after(_cli_run(name, "--help"))
    assert [m for m in _heavy(mods) if not m.startswith("pydantic")] == []
    assert "aifabric.topology" not in mods
    assert "aifabric.spec" not in mods


def test_lazy_names_of_the_package_resolve():
    import aifabric
    from aifabric.spec import load_spec
    from aifabric.topology import build_fabric

    assert aifabric.load_spec is load_spec
    assert aifabric.build_fabric is build_fabric
    assert set(aifabric.__all__) <= set(dir(aifabric))
    with pytest.raises(AttributeError):
        aifabric.no_such_name  # noqa: B018


def _first_paragraph(cmd) -> str:
    return inspect.cleandoc(cmd.help or "").split("\n\n")[0].replace("\n", " ").strip()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_table_matches_the_docstrings(name):
    """The text ``aifabric --help`` shows without importing the command is the first
    paragraph of its real help."""
    cmd = load_command(name)
    assert cmd.name == name
    assert COMMANDS[name][2] == _first_paragraph(cmd)


def test_every_command_module_is_in_the_table():
    from pathlib import Path

    import aifabric.cli

    here = Path(aifabric.cli.__file__).parent
    modules = {p.stem for p in here.glob("*.py") if not p.stem.startswith("_")}
    assert modules == {module for module, _, _ in COMMANDS.values()}


def test_root_help_lists_every_command(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    r = cli("--help")
    assert r.code == 0
    listed = [line.split("│")[1].split()[0] for line in r.out.splitlines()
              if line.startswith("│ ") and not line.startswith("│ -")]
    assert listed == list(COMMANDS)
    for _, _, summary in COMMANDS.values():
        assert summary in " ".join(r.out.split())


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_shows_its_full_help(cli, monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "400")
    r = cli(name, "--help")
    assert r.code == 0, r.err
    assert f"aifabric {name} [OPTIONS]" in r.out  # "Usage: <prog> ..."
    cmd = load_command(name)
    text = " ".join(r.out.split())
    assert _first_paragraph(cmd) in text
    for param in cmd.params:  # every option of the command is on its help page
        for opt in param.opts:
            if opt.startswith("--"):
                assert opt in text, opt


def test_lab_subcommands_keep_their_help(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    lab = load_command("lab")
    assert lab.commands
    for sub in lab.commands:
        r = cli("lab", sub, "--help")
        assert r.code == 0, r.err
        assert f"aifabric lab {sub} [OPTIONS]" in r.out


def test_unknown_command_is_still_refused_with_a_suggestion(cli):
    r = cli("simulat")
    assert r.code == 2
    assert "Did you mean 'simulate'" in r.err
