"""Regenerate the golden files of ``aifabric export --format ns3-rdma|htsim|uet-htsim``
(tests/golden/crosscheck/<case>/<format>/).

Each case folder holds a small ``scenario.yaml``; this script exports it in every format
(every flow at time 0) and writes the files. ``tests/cli/test_export_sims.py`` exports the
same and compares byte for byte, so any change in output shows up as a reviewed diff.

    python scripts/regen_crosscheck_golden.py          # rewrite all golden files
    python scripts/regen_crosscheck_golden.py --check  # exit 1 if any differs
"""

from __future__ import annotations

import sys
from pathlib import Path

from aifabric.crosscheck import FORMATS, export_scenario
from aifabric.routing.scenario import load_scenario
from aifabric.sim.scenario import SimScenario
from aifabric.topology import build_fabric

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden" / "crosscheck"


def golden_files(scenario: Path) -> dict[str, str]:
    """``<format>/<file>`` -> text of every format's export of ``scenario``."""
    scn = load_scenario(scenario, SimScenario)
    fabric = build_fabric(scn.spec)
    out: dict[str, str] = {}
    for fmt in FORMATS:
        for rel, text in export_scenario(scn, fabric, fmt).files.items():
            out[f"{fmt}/{rel}"] = text
    return out


def stored_files(folder: Path) -> dict[str, str]:
    return _regen().stored_files(folder, "scenario.yaml")


def _regen():
    """scripts/regen_golden.py, which holds the regeneration loop (loaded by path: the
    tests load this file the same way, without scripts/ on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("regen_golden",
                                                  Path(__file__).with_name("regen_golden.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    return _regen().regenerate(GOLDEN, "scenario.yaml", golden_files, FORMATS,
                               "--check" in sys.argv)


if __name__ == "__main__":
    sys.exit(main())
