"""The scale-down rule: a small copy keeps the structure of the design, with fewer of each."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric import load_spec
from aifabric.errors import SpecError
from aifabric.lab.scale import MAX_SWITCHES, SCALES, Scale, parse_scale, scale_fabric, scale_spec
from aifabric.topology import LinkKind, NodeKind
from tests.conftest import EXAMPLES, example

EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def _tiers(f):
    return sorted(set(f.nodes.tier[f.is_switch].tolist()))


def test_small_hpn_copy_keeps_planes_rails_segments_pairs_and_aggs_in_both_planes():
    """The small HPN copy has 2 planes, >= 2 rails, 2 segments, dual-ToR pairs (every
    NIC on two ToRs of different sides) and aggs in both planes."""
    f = scale_fabric(load_spec(EXAMPLES / "hpn-pod.yaml"), SCALES["small"])
    nodes, links = f.nodes, f.links
    tors = f.ids(NodeKind.TOR)
    aggs = f.ids(NodeKind.AGG)
    assert set(nodes.plane[tors].tolist()) == {0, 1}
    assert set(nodes.plane[aggs].tolist()) == {0, 1}
    assert len(set(nodes.rail[tors].tolist())) >= 2
    assert len(set(nodes.segment[tors].tolist())) == 2
    acc = links.kind == LinkKind.ACCESS
    nic_no = nodes.host[links.a[acc]] * f.spec.hosts.nics_per_host + nodes.rail[links.a[acc]]
    sides = {}
    for no, tor in zip(nic_no.tolist(), links.b[acc].tolist(), strict=True):
        sides.setdefault(no, set()).add(int(nodes.side[tor]))
    assert sides and all(s == {0, 1} for s in sides.values())
    assert _tiers(f) == _tiers(example("hpn-pod"))  # the core layer is kept
    assert int(f.is_switch.sum()) <= MAX_SWITCHES


def test_fat_tree_copy_has_at_least_two_pods_and_three_tiers():
    """A fat-tree's copy keeps >= 2 pods (so its core tier survives)."""
    f = scale_fabric(load_spec(EXAMPLES / "fat-tree-k64.yaml"), SCALES["small"])
    pods = set(f.nodes.pod[f.ids(NodeKind.TOR)].tolist())
    assert len(pods) >= 2
    assert _tiers(f) == [1, 2, 3]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
@pytest.mark.parametrize("preset", list(SCALES))
def test_every_example_copy_fits_and_keeps_structure(name, preset):
    """Every example scales to <= 64 switches with the same family, switch tiers, ports
    per NIC and routing policy, several planes iff the original has several, and never
    more hosts, backups, rails, planes or switches than the original."""
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    small = scale_fabric(spec, SCALES[preset])
    big = example(name)
    assert small.family == big.family
    assert int(small.is_switch.sum()) <= MAX_SWITCHES
    assert _tiers(small) == _tiers(big)
    sp = small.spec
    assert sp.hosts.ports_per_nic == spec.hosts.ports_per_nic
    assert sp.hosts.nics_per_host <= spec.hosts.nics_per_host
    assert sp.routing == spec.routing and sp.deploy == spec.deploy
    assert len(small.host_node) <= len(big.host_node)
    assert int(small.is_switch.sum()) <= int(big.is_switch.sum())
    planes = lambda f: len(set(f.nodes.plane[f.is_switch & (f.nodes.plane >= 0)].tolist()))  # noqa: E731
    assert (planes(small) > 1) == (planes(big) > 1) and planes(small) <= planes(big)
    assert np.all(small.nodes.backup[small.ids(NodeKind.HOST)].sum()
                  <= big.nodes.backup[big.ids(NodeKind.HOST)].sum())


def test_scale_is_deterministic():
    """The same spec and scale give the same copy."""
    spec = load_spec(EXAMPLES / "hpn-pod.yaml")
    assert scale_spec(spec, SCALES["small"]) == scale_spec(spec, SCALES["small"])


def test_parse_scale_presets_and_counts():
    """Presets by name; counts override the preset they follow (default small)."""
    assert parse_scale("medium") == SCALES["medium"]
    s = parse_scale("medium,hosts=1")
    assert (s.hosts, s.rails) == (1, SCALES["medium"].rails)
    assert parse_scale("rails=1").rails == 1


@pytest.mark.parametrize("text", ["huge", "hosts=0", "hosts=two", "colour=2"])
def test_parse_scale_rejects_bad_text(text):
    """Unknown presets, unknown counts and counts below 1 are refused, naming --scale."""
    with pytest.raises(SpecError) as err:
        parse_scale(text)
    assert err.value.problems[0].path == "--scale"


def test_too_big_copy_is_refused_with_count_and_scale_to_use():
    """A copy over 64 switches is refused with its switch count and the --scale to use."""
    spec = load_spec(EXAMPLES / "hpn-pod.yaml")
    big = Scale("custom", hosts=2, rails=8, segments=4, pods=1, uplinks=4)
    with pytest.raises(SpecError) as err:
        scale_fabric(spec, big)
    msg = str(err.value)
    n = int(scale_fabric(spec, big, limit=10**6).is_switch.sum())
    assert n > MAX_SWITCHES
    assert f"has {n} switches" in msg and "--scale small" in msg


def test_cli_too_big_scale_exits_2_with_one_line(cli):
    """`lab up --scale` with a copy too big: exit 2, one line, before touching the machine."""
    r = cli("lab", "up", EXAMPLES / "hpn-pod.yaml", "--scale", "rails=8,segments=4,uplinks=4",
            "--dir", "/nonexistent/aifabric-lab")
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "switches" in lines[0] and "--scale small" in lines[0]
