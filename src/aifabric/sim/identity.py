"""What names a simulation scenario: :func:`content_hash`, the sha256 of its document
(:func:`aifabric.routing.overrides.scenario_document`), its simulator and the files it
names besides its spec (:func:`named_files`: a ``flows`` traffic CSV, a Chakra trace's
rank files) — the same in every process and on every machine."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from aifabric.errors import SpecError
from aifabric.routing.overrides import canonical_json, scenario_document

__all__ = ["content_hash", "named_files"]


def _digest(paths: list[Path]) -> str:
    """sha256 of files' names and bytes, in order ("missing" when one cannot be read)."""
    h = hashlib.sha256()
    try:
        for p in paths:
            h.update(p.name.encode("utf-8") + b"\0")
            with open(p, "rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    h.update(block)
    except OSError:
        return "missing"
    return h.hexdigest() if paths else "missing"


def named_files(scn: Any) -> dict[str, str]:
    """A digest of each file the scenario names besides its spec (a ``flows`` traffic
    CSV, a Chakra trace's rank files), by the dotted path that names it: the run reads
    them, so their content is part of what the scenario is."""
    base = scn.base_dir

    def where(text: str) -> Path:
        p = Path(text)
        return p if p.is_absolute() or base is None else Path(base) / p

    out: dict[str, str] = {}
    for i, pat in enumerate(getattr(scn, "traffic", None) or []):
        f = getattr(pat, "file", None)
        if isinstance(f, str):
            out[f"traffic.{i}.file"] = _digest([where(f)])
    wl = getattr(scn, "workload", None)
    chakra = getattr(wl, "chakra", None)
    if isinstance(chakra, str):
        from aifabric.workload.chakra import find_rank_files

        try:
            files = find_rank_files(where(chakra), getattr(wl, "ranks", None))[1]
        except SpecError:
            files = []
        out["workload.chakra"] = _digest(files)
    return out


def content_hash(scn: Any) -> str:
    """sha256 (hex) of :func:`canonical_json` of ``{"scenario": scenario_document(scn),
    "sim": scn.sim}``, plus ``"files"``: :func:`named_files` when the scenario names a
    traffic CSV or a Chakra trace. The same scenario has the same hash in any process, on
    any machine; any change of its document (an override, the spec file's content) or of
    a file it names changes it. (The document is hashed as written: a field given with
    its default value hashes differently from the field left out.)"""
    doc: dict[str, Any] = {"scenario": scenario_document(scn),
                           "sim": getattr(scn, "sim", None)}
    files = named_files(scn)
    if files:
        doc["files"] = files
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()
