"""Loading specs: every bad input becomes one problem per field, naming the file, the
field path and what is allowed."""

from __future__ import annotations

import pytest

from aifabric.errors import SpecError
from aifabric.spec import load_spec, spec_from_dict
from aifabric.spec.models import HpnTopology


def problems(tmp_path, text: str, name: str = "spec.yaml") -> list[str]:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(p)
    for prob in info.value.problems:
        assert prob.file == str(p)
    return [f"{q.path}: {q.message}" for q in info.value.problems]


def test_minimal_spec_gets_documented_defaults():
    s = spec_from_dict({"hosts": {"count": 4}, "topology": {"family": "hpn"}})
    assert isinstance(s.topology, HpnTopology)
    assert s.topology.tor.up_ports == 60
    assert (s.topology.agg.down_ports, s.topology.agg.up_ports) == (120, 8)
    assert s.hosts.gpus_per_host == 8 and s.hosts.nics_per_host == 8


def test_unknown_family_lists_the_families(tmp_path):
    (msg,) = problems(tmp_path, "hosts: {count: 1}\ntopology: {family: torus}\n")
    assert msg.startswith("topology.family: unknown family 'torus'; allowed: ")
    for fam in ("clos", "fat_tree", "rail", "multiplane", "hpn", "single_tor"):
        assert fam in msg


def test_missing_family(tmp_path):
    (msg,) = problems(tmp_path, "hosts: {count: 1}\ntopology: {k: 4}\n")
    assert msg.startswith("topology.family: missing")


def test_zero_and_negative_numbers_each_named(tmp_path):
    """Don't allow zero or negative counts and speeds: one problem per field."""
    msgs = problems(tmp_path, "hosts: {count: -3, port_gbps: 0}\n"
                    "topology: {family: clos, leaf: {up_ports: -1}}\n")
    assert [m.split(":")[0] for m in msgs] == ["hosts.count", "hosts.port_gbps",
                                               "topology.leaf.up_ports"]
    assert all("greater than" in m for m in msgs)


def test_unknown_field_lists_allowed_fields(tmp_path):
    msgs = problems(tmp_path, "hosts: {count: 1, colour: red}\n"
                    "topology: {family: hpn, tor: {uplinks: 3}}\n")
    assert msgs[0].startswith("hosts.colour: unknown field; allowed: backup_per_segment")
    assert msgs[1].startswith("topology.tor.uplinks: unknown field; allowed: count, down_gbps")


def test_invalid_yaml_names_line(tmp_path):
    (msg,) = problems(tmp_path, "hosts: {count: 10\ntopology: [\n")
    assert msg.startswith(": invalid YAML: line 2")


def test_missing_file(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: file not found"


def test_not_a_mapping(tmp_path):
    (msg,) = problems(tmp_path, "- a\n- b\n")
    assert "must be a mapping" in msg


def test_wrong_type(tmp_path):
    (msg,) = problems(tmp_path, "hosts: {count: ten}\ntopology: {family: clos}\n")
    assert msg.startswith("hosts.count: ") and "'ten'" in msg


def test_bad_address_pool(tmp_path):
    (msg,) = problems(tmp_path, "hosts: {count: 1}\naddressing: {nic_pool: 10.0.0.1/8}\n"
                      "topology: {family: clos}\n")
    assert msg.startswith("addressing.nic_pool: ")
