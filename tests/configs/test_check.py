"""aifabric check: every planted deviation is found, nothing in a clean inventory."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests.configs.conftest import SMALL


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A build of the small HPN fabric and its planned facts (check --template)."""
    from aifabric.api import build_fabric as build
    from aifabric.configs import write_build
    from aifabric.spec import spec_from_dict

    root = tmp_path_factory.mktemp("check")
    out = root / "build"
    write_build(build(spec_from_dict(SMALL["hpn"])), out)
    return root, out


@pytest.fixture
def clean(built, cli):
    root, out = built
    tpl = root / "planned.json"
    r = cli("check", out, "--template", tpl)
    assert r.code == 0, r.err
    inv = json.loads(tpl.read_text())
    for i, h in enumerate(sorted(inv["hosts"])):
        inv["hosts"][h].update(driver_version="24.04-0.6.6", firmware_version="28.39.1002")
        if i % 3 == 0:  # a partial collector: some fields left out are not compared
            del inv["hosts"][h]["driver"]
    for s in inv["switches"]:
        inv["switches"][s]["os_version"] = "SONiC.202405"
    return inv


def _run(cli, built, inv, *args):
    root, out = built
    path = root / "facts.yaml"
    path.write_text(yaml.dump(inv, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
    return cli("check", out, "--inventory", path, *args)


def test_clean_inventory_has_no_deviation(cli, built, clean):
    """The planned facts, with agreeing versions, deviate in nothing: exit 0."""
    r = _run(cli, built, clean)
    assert r.code == 0, r.out + r.err
    assert "no deviations: 20 hosts and 22 switches match the plan" in r.out


def test_every_planted_deviation_is_found_and_nothing_else(cli, built, clean):
    """A wrong MTU on one host, PFC on the wrong priority on one switch port, one host's
    firmware unlike the others', and two swapped cables: each is reported with device,
    field, expected and found value, grouped; exit 1."""
    inv = copy.deepcopy(clean)
    hosts = sorted(inv["hosts"])
    inv["hosts"][hosts[5]]["interfaces"]["ens2f1"]["mtu"] = 1500
    inv["switches"]["agg-p00-pl1-00"]["interfaces"]["Ethernet4"]["pfc_priorities"] = [4]
    inv["hosts"][hosts[7]]["firmware_version"] = "28.38.1000"
    # swap the cables of host 0 and host 1 at ToR tor-s00-r0-a
    h0, h1 = inv["hosts"]["host-s00-h000"], inv["hosts"]["host-s00-h001"]
    p0, p1 = h0["interfaces"]["ens0f0"]["lldp"], h1["interfaces"]["ens0f0"]["lldp"]
    h0["interfaces"]["ens0f0"]["lldp"], h1["interfaces"]["ens0f0"]["lldp"] = p1, p0
    tor = inv["switches"]["tor-s00-r0-a"]["interfaces"]
    tor[p0["port"]]["lldp"], tor[p1["port"]]["lldp"] = (tor[p1["port"]]["lldp"],
                                                        tor[p0["port"]]["lldp"])
    r = _run(cli, built, inv, "--json")
    assert r.code == 1, r.err
    found = {(d["group"], d["device"], d["field"], d["expected"], d["found"])
             for d in json.loads(r.out)}
    assert found == {
        ("MTU", hosts[5], "ens2f1.mtu", "9000", "1500"),
        ("QoS (trust, DSCP, PFC)", "agg-p00-pl1-00", "Ethernet4.pfc_priorities", "[3]",
         "[4]"),
        ("driver and firmware", hosts[7], "firmware_version", "28.39.1002", "28.38.1000"),
        ("cabling (LLDP neighbours)", "host-s00-h000", "ens0f0.lldp",
         f"device: tor-s00-r0-a, port: {p0['port']}", f"device: tor-s00-r0-a, port: {p1['port']}"),
        ("cabling (LLDP neighbours)", "host-s00-h001", "ens0f0.lldp",
         f"device: tor-s00-r0-a, port: {p1['port']}", f"device: tor-s00-r0-a, port: {p0['port']}"),
        ("cabling (LLDP neighbours)", "tor-s00-r0-a", f"{p0['port']}.lldp",
         "device: host-s00-h000, port: ens0f0", "device: host-s00-h001, port: ens0f0"),
        ("cabling (LLDP neighbours)", "tor-s00-r0-a", f"{p1['port']}.lldp",
         "device: host-s00-h001, port: ens0f0", "device: host-s00-h000, port: ens0f0"),
    }
    text = _run(cli, built, inv)
    assert text.code == 1
    assert "7 deviation(s) on 6 device(s)" in text.out
    assert "MTU: 1 deviation(s)" in text.out


def test_missing_devices_are_deviations_unless_partial(cli, built, clean):
    """A planned device absent from the inventory is reported; --partial ignores it."""
    inv = copy.deepcopy(clean)
    del inv["switches"]["core-g0-00-c00"]
    r = _run(cli, built, inv, "--json")
    assert r.code == 1
    assert [(d["device"], d["found"]) for d in json.loads(r.out)] == [("core-g0-00-c00",
                                                                      "missing")]
    assert _run(cli, built, inv, "--partial").code == 0


@pytest.mark.parametrize(("text", "message"), [
    ("hosts: [unclosed", "invalid YAML/JSON: line 2"),
    ("- a list", "an inventory must be a mapping"),
    ("hosts: {host-x: {driver: mlx5_core}}", "hosts.host-x: unknown host, not in the plan"),
    ("switches: {tor-s00-r0-a: {interfaces: {Ethernet999: {mtu: 9100}}}}",
     "switches.tor-s00-r0-a.interfaces.Ethernet999: unknown interface"),
    ("hosts: {host-s00-h000: {firmware: x}}", "hosts.host-s00-h000.firmware: unknown field"),
    ("hosts: {host-s00-h000: {interfaces: {ens0f0: {mtu: big}}}}",
     "hosts.host-s00-h000.interfaces.ens0f0.mtu: Input should be a valid integer"),
])
def test_bad_inventory_exits_2_with_one_line(cli, built, text, message):
    """An inventory that does not parse, or names unknown devices, interfaces or fields:
    exit 2, one line naming the file and the field."""
    root, out = built
    path = root / "bad.yaml"
    path.write_text(text)
    r = cli("check", out, "--inventory", path)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ")
    assert message in lines[0]
    assert "Traceback" not in r.err


def test_check_needs_a_build_folder(cli, tmp_path):
    """A folder without spec.yaml is not a build: exit 2."""
    r = cli("check", tmp_path, "--inventory", tmp_path / "x.yaml")
    assert r.code == 2 and "not an aifabric build folder" in r.err
