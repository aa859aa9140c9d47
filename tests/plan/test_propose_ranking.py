"""``plan --gpus N``: candidates ranked by a stated rule, labelled with the tiers their
built Fabric really has, and the table shows oversubscription and backup servers."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from aifabric.planning.propose import RANK_RULE, propose
from aifabric.topology import build_fabric

SIZES = [512, 1024, 2048, 5000]


def _key(c):
    """The documented rule, recomputed from the candidate's plan: fewest tiers, switches,
    optics, then lowest worst-tier oversubscription, then most hosts per segment."""
    p = c.plan
    hosts_per_segment = -(-p["hosts"] // p["segments"])
    return (p["tiers"], p["switches"]["total"], p["cabling"].get("transceivers", 0),
            max(p["oversubscription"].values(), default=1.0), -hosts_per_segment)


@pytest.fixture(scope="module", params=SIZES)
def proposal(request):
    gpus = request.param
    return gpus, *propose(gpus=gpus, nic_gbps=400, switch_ports=128, switch_gbps=400)


def test_pick_is_the_minimum_of_the_rule(proposal):
    _gpus, cands, best = proposal
    fitting = [c for c in cands if c.fits]
    assert best is not None
    best_key = _key(best)
    assert all(best_key <= _key(c) for c in fitting)
    # among equal keys the earlier-listed candidate wins (the rule's last step)
    ties = [c for c in fitting if _key(c) == best_key]
    assert best is ties[0]


def test_tie_at_512_goes_to_the_rail_design():
    """At 512 GPUs the single-ToR Clos and the rail-optimized design have the same
    tiers, switches, optics and oversubscription; a rail group holds 64 hosts one hop
    apart on their rail, a single-ToR segment 8: the rail design wins (it used to lose
    because the Clos is listed first)."""
    cands, best = propose(gpus=512, nic_gbps=400, switch_ports=128, switch_gbps=400)
    by = {c.spec.topology.family: c for c in cands if c.fits}
    assert _key(by["clos"])[:4] == _key(by["rail"])[:4]
    assert best is by["rail"]


def test_labels_state_the_real_tier_count(proposal):
    """Every tier count a label claims is the built Fabric's (fat_tree at 512 GPUs is one
    pod: 2 tiers, not "3-tier")."""
    _gpus, cands, _best = proposal
    for c in cands:
        claims = [int(x) for x in re.findall(r"(\d+)-tier", c.label)]
        if not c.fits:
            assert claims == []
            continue
        f = build_fabric(c.spec)
        real = int(np.unique(f.nodes.tier[f.is_switch]).size)
        assert claims == [real], (c.label, real)


def test_table_shows_rule_oversubscription_and_backups(cli):
    r = cli("plan", "--gpus", "1024")
    assert r.code == 0, r.err
    header = next(line for line in r.out.splitlines() if "┃ design" in line)
    for col in ("rank", "tiers", "switches", "optics", "oversub", "backup servers"):
        assert col in header, col
    flat = " ".join(r.out.split())
    assert f"ranked by: {RANK_RULE}" in flat
    # the HPN candidate's standby hosts appear in its row
    hpn_row = next(line for line in r.out.splitlines() if line.startswith("│") and "hpn" in line)
    assert hpn_row.rstrip("│ ").split()[-1] == "8"


def test_json_ranks_and_columns(cli):
    r = cli("plan", "--gpus", "512", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["rank_rule"] == RANK_RULE
    ranks = [c["rank"] for c in out["candidates"] if c["fits"]]
    assert ranks == list(range(1, len(ranks) + 1))
    first = out["candidates"][0]
    assert first["design"] == out["chosen"]
    for c in out["candidates"]:
        if c["fits"]:
            assert c["tiers"] == c["plan"]["tiers"]
            assert c["backup_hosts"] == c["plan"]["backup_hosts"]
            assert c["oversubscription"] == max(c["plan"]["oversubscription"].values())
