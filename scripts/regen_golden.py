"""Regenerate the golden files of ``aifabric build`` (tests/golden/<family>/).

Each family folder holds a tiny ``spec.yaml``; this script builds it and writes the
fabric-wide files (LLD.md, cabling.csv, addressing.csv, bom.csv) and, for the first
switch of every tier and the first host, their config files. ``tests/configs/
test_golden.py`` rebuilds the same selection and compares it byte for byte, so any
change in output shows up as a reviewed diff of these files.

    python scripts/regen_golden.py          # rewrite all golden files
    python scripts/regen_golden.py --check  # exit 1 if any differs (what the test does)
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from aifabric import build_fabric, load_spec
from aifabric.configs import build_files
from aifabric.topology import NodeKind

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"
FABRIC_WIDE = ("LLD.md", "cabling.csv", "addressing.csv", "bom.csv")


def golden_files(spec_path: Path) -> dict[str, str]:
    """The golden selection of the build of ``spec_path``: relative path -> text."""
    fabric = build_fabric(load_spec(spec_path))
    files = build_files(fabric)
    names = fabric.nodes.name
    picks = [str(names[fabric.ids(k)[0]]) for k in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE)
             if len(fabric.ids(k))]
    picks.append(str(names[fabric.host_node[0]]))
    keep = {rel: text for rel, text in files.items()
            if rel in FABRIC_WIDE or (rel.count("/") == 2 and rel.split("/")[1] in picks)}
    return keep


def stored_files(folder: Path, input_name: str = "spec.yaml") -> dict[str, str]:
    """The golden files kept in ``folder`` (all but its input ``input_name``)."""
    return {str(p.relative_to(folder)): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != input_name}


def regenerate(root: Path, input_name: str, want_of: Callable[[Path], dict[str, str]],
               clear: Iterable[str], check: bool) -> int:
    """For every ``root/<case>/<input_name>``: compare ``want_of(input)`` with the stored
    files; unless ``check``, clear the ``clear`` subfolders and write what is wanted.
    Returns 1 when ``check`` and some case differs, else 0."""
    differ = []
    for inp in sorted(root.glob(f"*/{input_name}")):
        folder = inp.parent
        want = want_of(inp)
        if want != stored_files(folder, input_name):
            differ.append(folder.name)
        if check:
            continue
        for sub in clear:
            shutil.rmtree(folder / sub, ignore_errors=True)
        for rel, text in want.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
        print(f"{folder.name}: {len(want)} files")
    if check and differ:
        print(f"golden files differ: {', '.join(differ)}")
        return 1
    return 0


def main() -> int:
    return regenerate(GOLDEN, "spec.yaml", golden_files, ("switches", "hosts"),
                      "--check" in sys.argv)


if __name__ == "__main__":
    sys.exit(main())
