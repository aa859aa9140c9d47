"""The lab's management network as planned (no root needed): names, addresses, and
``lab deploy`` refusing a spec whose management network differs."""

from __future__ import annotations

import ipaddress
import re

import yaml

from aifabric.lab.core import _build
from aifabric.lab.deploy import layout_changes
from aifabric.lab.mgmt import bridge_name
from aifabric.lab.scale import parse_scale
from aifabric.spec import spec_from_dict
from tests.conftest import EXAMPLES

IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


def _lay(tmp_path, **mg):
    raw = yaml.safe_load((EXAMPLES / "hpn-pod.yaml").read_text())
    if mg:
        raw["management"] = mg
    return _build(spec_from_dict(raw), parse_scale("small"), tmp_path / "lab")


def test_without_the_section_the_lab_has_no_management_network(tmp_path):
    assert _lay(tmp_path)[2].mgmt is None


def test_names_are_valid_unique_and_the_addresses_are_the_plans(tmp_path):
    _, ctx, lay = _lay(tmp_path, pool="198.18.9.0/24")
    m = lay.mgmt
    assert m.bridge == bridge_name(lay.prefix) and IFNAME.match(m.bridge)
    roots = [p.root_if for p in m.ports]
    assert len(set(roots)) == len(roots) and all(IFNAME.match(r) for r in roots)
    assert all(r.startswith(lay.prefix.rstrip("-")) for r in [*roots, m.bridge])
    assert {p.device for p in m.ports} == set(lay.switches + lay.hosts)
    assert {p.ns for p in m.ports} == set(lay.namespaces)
    want = {str(ctx.fabric.nodes.name[n]): str(ipaddress.IPv4Address(int(
        ctx.mgmt.node_address[n]))) for n in range(ctx.fabric.n_nodes)
        if ctx.mgmt.node_address[n]}
    assert {p.device: p.address for p in m.ports} == want
    assert {p.ifname for p in m.ports if p.device in lay.switches} == {"eth0"}
    assert {p.ifname for p in m.ports if p.device in lay.hosts} == {"eno1"}
    assert {p.port for p in m.ports if p.device in lay.switches} == {9101}
    assert {p.port for p in m.ports if p.device in lay.hosts} == {9100}
    assert m.gateway == "198.18.9.1" and m.prefixlen == 24


def test_lab_deploy_refuses_a_changed_management_network(tmp_path):
    old = _lay(tmp_path, pool="198.18.9.0/24")[2]
    assert layout_changes(old, _lay(tmp_path, pool="198.18.9.0/24")[2]) == []
    for new in (_lay(tmp_path, pool="198.18.10.0/24")[2], _lay(tmp_path)[2],
                _lay(tmp_path, pool="198.18.9.0/24", host_interface="eno2")[2]):
        assert any("management network differs" in c for c in layout_changes(old, new))
