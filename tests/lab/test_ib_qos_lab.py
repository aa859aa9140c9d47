"""The InfiniBand lab's QoS and pre-flight check on the real parts: the real OpenSM
(Debian's, on ibsim) loads the build's VL arbitration (both tables of IBTA's
VLArbitration and the limit of high priority) and programs the tables into every switch
port, read back with ``smpquery vlarb``; ``lab test`` checks every planned cable on the
live ``ibnetdiscover`` (after failures too) and reports the speed check as not
applicable on ibsim (every link 4xSDR), which a real file is still checked for."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from tests._require import need, need_tool

PACKAGES = "apt-get install -y opensm ibsim-utils infiniband-diags"

ARB = {"high": [{"vl": 1, "weight": 255}, {"vl": 3, "weight": 16}],
       "low": [{"vl": 0, "weight": 192}, {"vl": 2, "weight": 64}, {"vl": 0, "weight": 32}],
       "high_limit": 4}
SPEC = {"name": "ibqos", "transport": "infiniband",
        "hosts": {"count": 32, "nics_per_host": 2, "gpus_per_host": 2},
        "topology": {"family": "fat_tree", "k": 8},
        "infiniband": {"data_vls": 4, "vl_arbitration": ARB}}
HPN = {"name": "ibhpn", "transport": "infiniband",
       "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2, "ports_per_nic": 2},
       "topology": {"family": "hpn", "hosts_per_segment": 4}}


@pytest.fixture(autouse=True)
def _parts():
    for prog, pkg in (("ibsim", "ibsim-utils"), ("opensm", "opensm"),
                      ("ibroute", "infiniband-diags"), ("ibnetdiscover", "infiniband-diags"),
                      ("ibtracert", "infiniband-diags"), ("smpquery", "infiniband-diags")):
        need_tool(prog, f"{pkg}: {PACKAGES}")
    from aifabric.lab.infiniband import UMAD2SIM
    need("libumad2sim.so", os.path.isfile(UMAD2SIM), f"ibsim-utils: {PACKAGES}")


def _up(tmp_path: Path, monkeypatch, doc: dict, scale: str):
    from aifabric.lab import infiniband as ib

    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # umad2sim writes a sysfs copy into its cwd: never here
    spec = tmp_path / "ib.yaml"
    spec.write_text(yaml.safe_dump(doc))
    return ib.up(spec, scale, tmp_path / "lab"), tmp_path / "lab"


def _vlarb(text: str) -> dict[str, list[tuple[int, int]]]:
    """``smpquery vlarb``'s two tables as (VL, weight) entries, empty ones left out."""
    out: dict[str, list[tuple[int, int]]] = {}
    part = None
    vls: list[int] = []
    for line in text.splitlines():
        if "Low priority" in line:
            part = "low"
        elif "High priority" in line:
            part = "high"
        elif line.startswith("VL") and part:
            vls = [int(x, 16) for x in re.findall(r"0x[0-9A-Fa-f]+", line)]
        elif line.startswith("WEIGHT") and part:
            ws = [int(x, 16) for x in re.findall(r"0x[0-9A-Fa-f]+", line)]
            out[part] = [(v, w) for v, w in zip(vls, ws, strict=True) if w]
    return out


def test_opensm_programs_both_vl_arbitration_tables_from_the_build(tmp_path, monkeypatch):
    """The build's opensm.conf carries the spec's tables (qos_vlarb_high 1:255,3:16,
    qos_vlarb_low 0:192,2:64,0:32, qos_high_limit 4); the real OpenSM loads it and every
    switch port sampled (every switch, its first and last port) holds exactly those
    entries in its VLArbitration tables."""
    from aifabric.lab import infiniband as ib

    lab, d = _up(tmp_path, monkeypatch, SPEC, "hosts=4,rails=2,segments=2,pods=2,uplinks=2")
    try:
        conf = (d / "ib" / "opensm-0.conf").read_text()
        assert "qos_vlarb_high 1:255,3:16\n" in conf and "qos_high_limit 4\n" in conf
        assert "qos_vlarb_low 0:192,2:64,0:32\n" in conf
        sw_lid, _, _ = ib.read_lids(lab)
        sn = lab.subnet
        want = {"high": [(1, 255), (3, 16)], "low": [(0, 192), (2, 64), (0, 32)]}
        checked = 0
        for s in range(sn.n_switches):
            for port in (1, int(sn.nports[s])):
                got = _vlarb(ib._diag(lab, ["smpquery", "vlarb", str(int(sw_lid[s])),
                                            str(port)]))
                assert got == want, (sn.sw_name(s), port, got)
                checked += 1
        assert checked == 2 * sn.n_switches > 0
    finally:
        ib.down(d)


def test_lab_test_checks_the_cabling_and_says_why_not_the_speeds(tmp_path, monkeypatch):
    """``lab test`` on ibsim: every planned cable is found on the live ibnetdiscover, the
    speed check is reported not applicable (ibsim reports 4xSDR everywhere) -- while the
    same live text given to the real-fabric check (speeds on) flags every port's speed;
    after a ToR link and then a core switch go down (cutting switches off from their
    SM), the cables still up and reachable are all found again."""
    from aifabric.configs.infiniband import check_discovered
    from aifabric.lab import infiniband as ib

    lab, d = _up(tmp_path, monkeypatch, HPN, "medium")
    try:
        r = ib.test(lab)
        assert r["cables_planned"] > 0 and r["cabling_deviations"] == 0, \
            r["first_cabling_deviations"]
        assert r["speed_check"].startswith("not applicable") and "4xSDR" in r["speed_check"]
        _, _, text = ib.read_lids(lab)
        speed = [x for x in check_discovered(lab.subnet, text) if x["group"] == "link speed"]
        assert speed and all(x["found"] == "4xSDR" for x in speed)
        planned = r["cables_planned"]
        sn = lab.subnet
        S = sn.n_switches
        tor = 0
        port = next(p for p in range(1, sn.nports[tor] + 1) if 0 <= sn.peer[tor, p] < S)
        ib.fail(lab, f"{sn.sw_name(tor)}:{port}")
        r = ib.test(ib.load(d))
        assert r["cables_planned"] == planned - 1 and r["cabling_deviations"] == 0
        ib.fail(ib.load(d), sn.sw_name(S - 1))
        r = ib.test(ib.load(d))
        assert 0 < r["cables_planned"] < planned - 1
        assert r["cabling_deviations"] == 0, r["first_cabling_deviations"]
        assert r["differences"] == 0
    finally:
        ib.down(d)


def test_lab_test_cli_prints_the_cabling_and_the_speed_reason(tmp_path, monkeypatch, cli):
    """The CLI's ``lab test``: the cabling line and the reason the speeds are not checked,
    PASS, exit 0."""
    from aifabric.lab import infiniband as ib

    _, d = _up(tmp_path, monkeypatch, SPEC, "hosts=4,rails=2,segments=2,pods=2,uplinks=2")
    try:
        r = cli("lab", "test", "--dir", d)
        assert r.code == 0, r.out + r.err
        out = " ".join(r.out.split())
        assert re.search(r"cables as planned \(ibnetdiscover\): (\d+)/\1;", out), out
        assert "link speed: not applicable on a simulated fabric" in out
        assert out.rstrip().endswith("PASS")
    finally:
        ib.down(d)
