"""The metric catalog: Prometheus naming rules (checked by the real promtool) and the
vectorised port labels against the Fabric's own scalar names."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from aifabric.telemetry.catalog import (
    CATALOG,
    PORT_LABELS,
    arc_labels,
    by_name,
    device_labels,
    port_labels,
)
from aifabric.topology.fabric import LinkKind, NodeKind
from tests.conftest import example


def test_names_are_unique_and_follow_the_conventions():
    """aifabric_ prefix, snake case, counters (only) end in _total, a unit is the name's
    suffix, label names are unique identifiers, every entry has help text."""
    names = [m.name for m in CATALOG]
    assert len(set(names)) == len(names)
    for m in CATALOG:
        assert re.fullmatch(r"aifabric_[a-z0-9_]+", m.name), m.name
        assert (m.type == "counter") == m.name.endswith("_total")
        assert m.unit in ("", "bytes", "seconds", "ratio")
        assert not m.unit or m.family.endswith("_" + m.unit)
        assert len(set(m.labels)) == len(m.labels)
        assert all(re.fullmatch(r"[a-z_]+", x) for x in m.labels)
        assert m.help.endswith(".") and set(m.sources) <= {"lab", "sim"}
        assert by_name(m.name) is m


def test_promtool_accepts_every_catalog_metric(promtool):
    """One sample of every metric with every label, in the text format: promtool check
    metrics reports nothing (it flags bad names, counters without _total, ...)."""
    lines = []
    for m in CATALOG:
        labels = ",".join(f'{k}="x"' for k in m.labels)
        lines += [f"# HELP {m.name} {m.help}", f"# TYPE {m.name} {m.type}",
                  f"{m.name}{{{labels}}} 1"]
    p = subprocess.run([promtool, "check", "metrics"], input="\n".join(lines) + "\n",
                       text=True, capture_output=True, timeout=60)
    assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p


@pytest.mark.parametrize("name", ["hpn-pod", "multiplane-8x128"])
def test_port_labels_match_the_fabrics_scalar_names(name):
    """For every end of every link (a sample of 3,000 on the large fabric): device and
    port as Fabric.device_name/port_name say (inside a host, where there are no interface
    names: port = the node at the other end), peer = the other end's device, tier = the
    link kind's label, plane/rail/segment = the link's ("" for -1)."""
    f = example(name)
    rng = np.random.default_rng(0)
    links = np.arange(f.n_links) if f.n_links <= 3000 else rng.choice(f.n_links, 3000,
                                                                      replace=False)
    for end in (0, 1):
        lab = port_labels(f, links, end)
        assert set(lab) == set(PORT_LABELS)
        here = (f.links.a, f.links.b)[end]
        there = (f.links.b, f.links.a)[end]
        port = (f.links.a_port, f.links.b_port)[end]
        for i, link in enumerate(links.tolist()):
            assert lab["device"][i] == f.device_name(int(here[link]))
            kind = int(f.nodes.kind[here[link]])
            if f.is_switch[here[link]] or kind == NodeKind.NIC:
                assert lab["port"][i] == f.port_name(int(here[link]), int(port[link]))
            else:  # GPU, host: no interface names; the node at the other end
                assert lab["port"][i] == f.nodes.name[there[link]]
            assert lab["peer"][i] == f.device_name(int(there[link]))
            assert lab["tier"][i] == LinkKind(int(f.links.kind[link])).label
            for k in ("plane", "rail", "segment"):
                v = int(getattr(f.links, k)[link])
                assert lab[k][i] == ("" if v < 0 else str(v))


@pytest.mark.parametrize("name", ["hpn-pod", "multiplane-8x128"])
def test_no_two_ports_share_their_labels(name):
    """Every end of every link has its own label set (so one series per port)."""
    f = example(name)
    links = np.arange(f.n_links)
    sets = set()
    for end in (0, 1):
        lab = port_labels(f, links, end)
        sets |= set(zip(*(lab[k].tolist() for k in PORT_LABELS), strict=True))
    assert len(sets) == 2 * f.n_links


def test_arc_labels_are_the_sending_port_and_its_direction():
    f = example("hpn-pod")
    arcs = np.arange(min(2 * f.n_links, 4000))
    lab = arc_labels(f, arcs)
    up, down = port_labels(f, arcs // 2, 0), port_labels(f, arcs // 2, 1)
    is_up = arcs % 2 == 0
    assert (lab["device"] == np.where(is_up, up["device"], down["device"])).all()
    assert (lab["port"] == np.where(is_up, up["port"], down["port"])).all()
    assert (lab["direction"] == np.where(is_up, "up", "down")).all()


def test_device_labels_name_the_owner_of_a_nic_port():
    f = example("hpn-pod")
    nodes = np.arange(f.n_nodes)
    lab = device_labels(f, nodes)
    assert [lab["device"][i] for i in range(0, f.n_nodes, 97)] == \
        [f.device_name(i) for i in range(0, f.n_nodes, 97)]
