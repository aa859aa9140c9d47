"""Run every example through the command line and compare the outputs of two source trees,
byte for byte: the check that a restructuring changed no behaviour.

    python scripts/compare_examples.py run OUT [--src SRC]     # outputs of one tree
    python scripts/compare_examples.py diff OUT_A OUT_B         # differences, exit 1 if any
    python scripts/compare_examples.py both REV [--keep DIR]    # REV (a git revision) vs the
                                                                # working tree, in one go

What runs: for every spec in examples/ ``plan --json``, ``build --out``, ``export`` in each
format; for every scenario in examples/scenarios ``route``, ``simulate`` or ``goodput``
(by its keys) with ``--json`` and ``--out``; ``demo --out``. Each command's stdout, stderr
and exit code are kept beside the files it wrote. Two fields are normalised before the
comparison, and only these: the folder a run was written to (it differs between the two
trees) and wall-clock seconds that a run prints about itself (lines and JSON keys named
``wall``/``elapsed``); everything else must be identical.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: printed wall-clock times ("in 1.23 s", "wall_s": 0.5) vary from run to run
WALL = re.compile(r'("?(?:wall|elapsed)[a-z_]*"?\s*[:=]\s*)[0-9.eE+-]+|'
                  r'(\b(?:in|took)\s+)[0-9.]+\s*(?:s|ms)\b')


def _kind(doc: dict) -> str:
    if "goodput" in doc:
        return "goodput"
    if "sim" in doc or "collectives" in doc or "jobs" in doc or "workload" in doc:
        return "simulate"
    return "route"


def _commands(tree: Path) -> list[tuple[str, list[str]]]:
    import yaml

    cmds: list[tuple[str, list[str]]] = []
    for spec in sorted((tree / "examples").glob("*.yaml")):
        n = spec.stem
        cmds.append((f"plan-{n}", ["plan", str(spec), "--json"]))
        cmds.append((f"build-{n}", ["build", str(spec), "--out", "{out}"]))
        for fmt in ("json", "graphml", "dot"):
            cmds.append((f"export-{n}-{fmt}",
                         ["export", str(spec), "--format", fmt, "--out", f"{{out}}/fabric.{fmt}"]))
    for scn in sorted((tree / "examples" / "scenarios").glob("*.yaml")):
        kind = _kind(yaml.safe_load(scn.read_text()))
        n = scn.stem
        cmds.append((f"{kind}-{n}-json", [kind, str(scn), "--json"]))
        cmds.append((f"{kind}-{n}", [kind, str(scn), "--out", "{out}"]))
    cmds.append(("demo", ["demo", "--out", "{out}"]))
    return cmds


def run(out: Path, src: Path, tree: Path) -> None:
    """Run every command with ``src`` first on the import path, writing under ``out``."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0", "COLUMNS": "120",
           "NO_COLOR": "1", "TERM": "dumb"}
    out.mkdir(parents=True, exist_ok=True)
    for name, args in _commands(tree):
        d = out / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        files = d / "files"
        argv = [a.replace("{out}", str(files)) for a in args]
        if any("{out}" in a for a in args) and "export" in name:
            files.mkdir()
        r = subprocess.run([sys.executable, "-m", "aifabric", *argv], cwd=tree, env=env,
                           capture_output=True, text=True, timeout=1800)
        (d / "stdout").write_text(r.stdout)
        (d / "stderr").write_text(r.stderr)
        (d / "rc").write_text(f"{r.returncode}\n")
        print(f"{name}: exit {r.returncode}", flush=True)


def _norm(text: str, roots: list[str]) -> str:
    for r in roots:
        text = text.replace(r, "<ROOT>")
    return WALL.sub(lambda m: (m.group(1) or m.group(2)) + "<T>", text)


def diff(a: Path, b: Path) -> list[str]:
    """Every file that differs between the two output folders (after normalising)."""
    bad: list[str] = []
    ra, rb = [str(a.resolve()), str(a)], [str(b.resolve()), str(b)]

    def walk(cmp: filecmp.dircmp, rel: str) -> None:
        for x in cmp.left_only + cmp.right_only:
            bad.append(f"{rel}{x}: only on one side")
        for x in cmp.common_files:
            pa, pb = Path(cmp.left, x), Path(cmp.right, x)
            ba, bb = pa.read_bytes(), pb.read_bytes()
            if ba == bb:
                continue
            try:
                ta, tb = ba.decode(), bb.decode()
            except UnicodeDecodeError:
                bad.append(f"{rel}{x}: binary files differ")
                continue
            if _norm(ta, ra + _trees(ta)) != _norm(tb, rb + _trees(tb)):
                bad.append(f"{rel}{x}: differs")
        for x, sub in cmp.subdirs.items():
            walk(sub, f"{rel}{x}/")

    walk(filecmp.dircmp(a, b), "")
    return bad


def _trees(text: str) -> list[str]:
    """Checkout roots named in a file (the two trees live at different paths)."""
    return sorted({m.group(0) for m in re.finditer(r"/[^\s\"']*?/compare-[a-z0-9]+/tree", text)},
                  key=len, reverse=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--src", type=Path, default=ROOT / "src")
    d = sub.add_parser("diff")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    bo = sub.add_parser("both")
    bo.add_argument("rev")
    bo.add_argument("--keep", type=Path)
    ns = p.parse_args()
    if ns.cmd == "run":
        run(ns.out, ns.src.resolve(), ns.src.resolve().parent)
        return 0
    if ns.cmd == "both":
        base = ns.keep or Path(tempfile.mkdtemp())
        trees = {}
        for side, rev in (("base", ns.rev), ("head", None)):
            tree = base / f"compare-{side}" / "tree"
            shutil.rmtree(tree.parent, ignore_errors=True)
            tree.parent.mkdir(parents=True)
            if rev is None:   # the working tree as it is, committed or not
                shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
                    ".git", "__pycache__", "*.egg-info", ".hypothesis", ".pytest_cache"))
            else:
                subprocess.run(f"git -C {ROOT} archive {rev} | tar -x -C {tree}",
                               shell=True, check=True)
            run(tree.parent / "out", tree / "src", tree)
            trees[side] = tree.parent / "out"
        ns.a, ns.b = trees["base"], trees["head"]
    bad = diff(ns.a, ns.b)
    for line in bad:
        print(line)
    n = sum(1 for _ in ns.a.rglob("*") if _.is_file())
    print(f"{n} files compared: {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
