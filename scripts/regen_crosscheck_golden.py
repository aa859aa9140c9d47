"""Regenerate the golden files of ``aifabric export --format ns3-rdma|htsim``
(tests/golden/crosscheck/<case>/<format>/).

Each case folder holds a small ``scenario.yaml``; this script exports it in both formats
(every flow at time 0) and writes the files. ``tests/cli/test_export_sims.py`` exports the
same and compares byte for byte, so any change in output shows up as a reviewed diff.

    python scripts/regen_crosscheck_golden.py          # rewrite all golden files
    python scripts/regen_crosscheck_golden.py --check  # exit 1 if any differs
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from aifabric.crosscheck import FORMATS, export_scenario
from aifabric.scenario import load_scenario
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
    return {str(p.relative_to(folder)): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "scenario.yaml"}


def main() -> int:
    check = "--check" in sys.argv
    differ = []
    for scenario in sorted(GOLDEN.glob("*/scenario.yaml")):
        folder = scenario.parent
        want = golden_files(scenario)
        if want != stored_files(folder):
            differ.append(folder.name)
        if check:
            continue
        for fmt in FORMATS:
            shutil.rmtree(folder / fmt, ignore_errors=True)
        for rel, text in want.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
        print(f"{folder.name}: {len(want)} files")
    if check and differ:
        print(f"golden files differ: {', '.join(differ)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
