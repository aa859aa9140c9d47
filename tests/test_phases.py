"""The run's phases (tests/_phases.py): every test file that starts a live lab, a real
server (Prometheus, `aifabric serve`, uvicorn), a browser or a Ray cluster, signals a
process it times or bounds a wall-clock time is in SERIAL: it runs alone after the
independent tests, never beside another test on the second xdist worker."""

from __future__ import annotations

import re

from tests._phases import SERIAL, is_serial
from tests.conftest import ROOT

#: what marks a test file as one that must run alone
ALONE = re.compile(r"established_lab|lab_core\.up\(|^pytestmark = live|start_prometheus\b|"
                   r"\bstart_serve\b|\bopen_page\(|\bbrowser\b.*\)|ray\.init\(|\bray_cluster\b|"
                   r"uvicorn|\.send_signal\(|"
                   # a wall-clock bound: assert perf_counter() - t0 < ..., assert took < ...
                   r"assert (time\.)?(perf_counter|monotonic)\(\) - \w+ <|"
                   r"assert (took|wall|elapsed|w\[\"seconds\"\]) <", re.M)


def _test_files():
    for f in sorted((ROOT / "tests").rglob("test_*.py")):
        yield f.relative_to(ROOT).as_posix(), f.read_text(encoding="utf-8")


def test_every_file_with_a_lab_server_browser_ray_or_signal_runs_alone():
    missing = [name for name, text in _test_files()
               if name != "tests/test_phases.py" and ALONE.search(text)
               and not is_serial(name)]
    assert missing == [], f"add to tests/_phases.py SERIAL (they must run alone): {missing}"


def test_serial_entries_exist_and_select_by_file_or_folder():
    for entry in SERIAL:
        path = ROOT / entry
        assert path.is_dir() if entry.endswith("/") else path.is_file(), entry
    assert is_serial("tests/lab/test_deploy.py::test_x")
    assert is_serial("tests/cli/test_interrupt.py::test_y[a]")
    assert not is_serial("tests/cli/test_interrupts.py::test_y")
    assert not is_serial("tests/labx/test_a.py::t")
    assert not is_serial("tests/sim/test_engine.py::test_z")
