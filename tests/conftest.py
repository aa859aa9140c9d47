"""Shared fixtures: the example fabrics (built once per session) and a CLI runner."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from aifabric import build_fabric, load_spec
from aifabric.topology import Fabric

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@cache
def example(name: str) -> Fabric:
    """The fabric of ``examples/<name>.yaml`` (built once per test session)."""
    return build_fabric(load_spec(EXAMPLES / f"{name}.yaml"))


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the real ``aifabric`` entry point in-process: ``cli("plan", "x.yaml")``."""
    from aifabric.cli import main

    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["aifabric", *map(str, args)])
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        cap = capsys.readouterr()
        return Result(code, cap.out, cap.err)

    return run
