"""A fact missing from a facts file is a deviation of that device, with the reason.

The rule (issue: a dead bgpd passed pre-flight): a fact the plan gives a value for is a
deviation of its device when the device's facts file lacks it and either every
collector reads it (a switch's ``bgp_established``, a port's MTU) or the collector
listed it under ``unread`` with the reason. The switch collector itself, run against a
``vtysh`` that answers as FRR does with bgpd dead, leaves the fact out with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aifabric.configs.ansible import FACTS_SCHEMA, plan_id
from tests.configs.conftest import SMALL

COLLECTOR = (Path(__file__).resolve().parents[2] / "src/aifabric/configs/templates/ansible"
             / "files/collect_switch.py")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    from aifabric import build_fabric
    from aifabric.configs import write_build
    from aifabric.spec import spec_from_dict

    out = tmp_path_factory.mktemp("facts") / "build"
    write_build(build_fabric(spec_from_dict(SMALL["hpn"])), out)
    return out


@pytest.fixture
def facts(cli, build, tmp_path):
    """A facts folder that matches the plan exactly (every planned value present)."""
    tpl = tmp_path / "planned.json"
    assert cli("check", build, "--template", tpl).code == 0
    planned = json.loads(tpl.read_text())
    plan = plan_id((build / "spec.yaml").read_text(), SMALL["hpn"]["name"])
    folder = tmp_path / "facts"
    folder.mkdir()
    for section, kind in (("hosts", "host"), ("switches", "switch")):
        for dev, got in planned[section].items():
            doc = {"schema": FACTS_SCHEMA, "version": 1, "device": dev, "kind": kind,
                   "facts": {k: v for k, v in got.items() if v is not None}, "plan": plan,
                   "notes": []}
            (folder / f"{dev}.json").write_text(json.dumps(doc))
    r = cli("check", build, "--facts", folder)
    assert r.code == 0, r.out
    return folder


def _edit(folder: Path, dev: str, fn) -> None:
    p = folder / f"{dev}.json"
    doc = json.loads(p.read_text())
    fn(doc)
    p.write_text(json.dumps(doc))


def _switch(folder: Path) -> str:
    return sorted(p.stem for p in folder.glob("tor-*.json"))[0]


def test_removing_bgp_established_fails_the_check_on_that_switch(cli, build, facts):
    sw = _switch(facts)
    want = json.loads((facts / f"{sw}.json").read_text())["facts"]["bgp_established"]
    _edit(facts, sw, lambda d: d["facts"].pop("bgp_established"))
    r = cli("check", build, "--facts", facts, "--json")
    assert r.code == 1
    got = json.loads(r.out)
    assert [(d["device"], d["field"], d["expected"]) for d in got] == [
        (sw, "bgp_established", str(want))]
    assert got[0]["found"] == "missing: not in the facts file, and it gives no reason"


def test_the_collectors_reason_is_the_found_value(cli, build, facts):
    """The reason the collector gave (``unread``) is what check prints; a fact that is
    not required (a host's GPU count) is a deviation only when the collector says it
    failed to read it."""
    sw = _switch(facts)
    host = sorted(p.stem for p in facts.glob("host-*.json"))[0]

    def dead_bgpd(d):
        d["facts"].pop("bgp_established")
        d["unread"] = {"bgp_established": "bgpd is not running"}

    _edit(facts, sw, dead_bgpd)
    _edit(facts, host, lambda d: d["facts"].pop("gpu_count"))
    r = cli("check", build, "--facts", facts, "--json")
    assert {(d["device"], d["field"], d["found"]) for d in json.loads(r.out)} == {
        (sw, "bgp_established", "missing: bgpd is not running")}

    def no_gpus(d):
        d["unread"] = {"gpu_count": "nvidia-smi -L failed (GPU driver not answering)"}

    _edit(facts, host, no_gpus)
    r = cli("check", build, "--facts", facts, "--json")
    assert r.code == 1
    assert (host, "gpu_count", "missing: nvidia-smi -L failed (GPU driver not answering)") \
        in {(d["device"], d["field"], d["found"]) for d in json.loads(r.out)}


def test_a_missing_port_mtu_is_a_deviation(cli, build, facts):
    sw = _switch(facts)
    port = {}

    def drop(d):
        port["name"] = sorted(d["facts"]["interfaces"])[0]
        d["facts"]["interfaces"][port["name"]].pop("mtu")

    _edit(facts, sw, drop)
    r = cli("check", build, "--facts", facts, "--json")
    assert r.code == 1
    assert [(d["device"], d["field"]) for d in json.loads(r.out)] == [
        (sw, f"interfaces.{port['name']}.mtu")]


def test_switch_collector_with_a_dead_bgpd_notes_why(tmp_path):
    """The collector against a vtysh that answers as FRR 8.4 does with bgpd dead
    (``bgpd is not running`` on stdout, exit 1) while zebra still answers ``show
    version``: no ``bgp_established``, the reason in notes and in unread."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "vtysh").write_text(
        "#!/bin/sh\n"
        'case "$*" in *"show version"*) echo "FRRouting 8.4.4 (lab)."; exit 0;; esac\n'
        'echo "bgpd is not running"; exit 1\n')
    os.chmod(bin_ / "vtysh", 0o755)
    args = {"device": "tor-x", "ports": [], "config_db": str(tmp_path / "none.json"),
            "frr_socket": "", "sysfs": str(tmp_path)}
    r = subprocess.run([sys.executable, str(COLLECTOR), json.dumps(args)], capture_output=True,
                       text=True, check=True,
                       env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"})
    doc = json.loads(r.stdout)
    assert "bgp_established" not in doc["facts"] and doc["facts"]["frr_version"] == "8.4.4"
    assert doc["unread"] == {"bgp_established": "bgpd is not running"}
    assert any("bgpd is not running" in n for n in doc["notes"])
