"""``files/rollout.py``, the controller's record of a switch rollout (no lab needed: the
lab tests run it through ansible-playbook). Each switch lands in exactly one class of
the summary: changed, unchanged, rolled back, or never touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = (Path(__file__).resolve().parents[2] / "src/aifabric/configs/templates/ansible"
          / "files/rollout.py")


def _call(path: Path, cmd: str, doc: dict | None = None) -> str:
    r = subprocess.run([sys.executable, str(SCRIPT), str(path), cmd],
                       input=json.dumps(doc) if doc is not None else "", capture_output=True,
                       text=True, check=True)
    return r.stdout


def test_summary_classes_partition_the_targets(tmp_path):
    path = tmp_path / "rollout.json"
    targets = [f"sw{i}" for i in range(7)]
    out = _call(path, "start", {"plan": {"name": "p", "digest": "d"}, "targets": targets})
    assert "0 batch(es), ok" in out
    _call(path, "batch", {"play": "plane 0", "switches": {
        "sw0": {"installed": ["frr"], "failed": None}}})
    _call(path, "mark")
    out = _call(path, "batch", {"play": "plane 0", "switches": {
        "sw1": {"installed": ["frr"], "failed": "GATE FAILED: x", "restored": ["frr"],
                "removed": [], "regate": {"ok": True}},
        "sw2": {"installed": ["config_db", "frr"], "failed": None, "restored": ["frr"],
                "removed": ["config_db"], "regate": {"ok": False}},
        "sw3": {"installed": [], "failed": None}}})
    s = json.loads(path.read_text())["summary"]
    assert s["changed"] == ["sw0"] and s["rolled_back"] == ["sw1", "sw2"]
    assert s["rolled_back_gate_failed"] == ["sw2"] and s["failed"] == {"sw1": "GATE FAILED: x"}
    assert s["never_touched"] == ["sw3", "sw4", "sw5", "sw6"] and s["unchanged"] == []
    classes = s["changed"] + s["unchanged"] + s["rolled_back"] + s["never_touched"]
    assert sorted(classes) == targets  # a partition: each switch exactly once
    assert not s["ok"] and len(s["rollback_s"]) == 1 and s["rollback_s"][0] >= 0
    assert "STOPPED" in out and "passed on 1/2 (FAILED: sw2)" in out
    assert "failed: sw1: GATE FAILED: x" in out
