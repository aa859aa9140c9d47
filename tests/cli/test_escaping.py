"""User text reaches the console as it is: never read as rich markup or emoji codes.

Spec and model names are validated tokens (tests/spec/test_names.py), so the user text
left for the console is free text: file and folder paths, a scenario's title. Before,
``[/old]`` in one crashed the command (rich MarkupError) and ``:x:`` became an emoji;
a ``$...$`` title crashed the plots (matplotlib mathtext).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLES

HOSTILE = "fab [/old] :x: [bold]"
TITLE = HOSTILE + r" $\frac$ [red]x"
SPEC = {"name": "ft4", "hosts": {"count": 16, "gpus_per_host": 1, "nics_per_host": 1,
                                 "port_gbps": 100},
        "switch_models": {"k4": {"ports": 4, "port_gbps": 100}},
        "topology": {"family": "fat_tree", "k": 4, "switch": {"model": "k4"},
                     "rail_optimized": False}}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / HOSTILE
    d.mkdir(parents=True)  # "[/old]" makes two folders: the path holds it all
    shutil.copy(EXAMPLES / "roce-5000.yaml", d / "spec.yaml")
    (d / "small.yaml").write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    scn = {"name": TITLE, "spec": SPEC,
           "traffic": [{"pattern": "permutation", "shift": 1, "size_bytes": 1_000_000}]}
    (d / "route.yaml").write_text(yaml.safe_dump(scn), encoding="utf-8")
    (d / "sim.yaml").write_text(yaml.safe_dump(
        {**scn, "jobs": [{"name": "j0", "gpus": 8, "parallel": {"dp": 8}}]}),
        encoding="utf-8")
    return d


def _ok(r, *texts: str) -> None:
    assert r.code == 0, r.err[-3000:]
    assert "Traceback" not in r.err and "MarkupError" not in r.err
    for t in texts:
        assert t in r.out, (t, r.out[-3000:])
    assert "\u274c" not in r.out  # ":x:" stays text


def test_plan_and_export_print_paths_as_they_are(cli, folder: Path) -> None:
    r = cli("plan", folder / "spec.yaml")
    _ok(r, "roce-5000")
    r = cli("plan", "--gpus", "512", "--write", folder / "p.yaml")
    _ok(r, f"wrote {folder / 'p.yaml'}")
    r = cli("export", folder / "small.yaml", "--out", folder / "x.json")
    _ok(r, f"wrote {folder / 'x.json'}")


def test_build_prints_paths_as_they_are(cli, folder: Path) -> None:
    r = cli("build", folder / "small.yaml", "--out", folder / "b")
    _ok(r, f"wrote {folder / 'b'}/")


def test_route_prints_the_title_as_it_is(cli, folder: Path) -> None:
    r = cli("route", folder / "route.yaml", "--out", folder / "r")
    _ok(r, TITLE, f"wrote {folder / 'r'}/")


def test_simulate_prints_and_plots_the_title(cli, folder: Path) -> None:
    r = cli("simulate", folder / "sim.yaml", "--out", folder / "s")
    _ok(r, TITLE, str(folder / "s"))
    assert list((folder / "s").glob("*.png"))
    assert TITLE in (folder / "s" / "report.md").read_text(encoding="utf-8")


def test_errors_print_paths_as_they_are(cli, folder: Path) -> None:
    r = cli("plan", folder / "missing [/x] :x:.yaml")
    assert r.code == 2
    assert f"{folder / 'missing [/x] :x:.yaml'}: file not found" in r.err


def test_styled_output_is_not_markup() -> None:
    """The one helper that styles console text reads no markup from its parts."""
    from aifabric.cli._common import console, styled

    t = styled((HOSTILE, "bold"), " :x: [/]")
    assert t.plain == HOSTILE + " :x: [/]"
    with console.capture() as cap:
        console.print(HOSTILE)
        console.print(t)
    assert cap.get() == f"{HOSTILE}\n{HOSTILE} :x: [/]\n"
