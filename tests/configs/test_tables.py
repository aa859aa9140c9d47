"""cabling.csv, addressing.csv, bom.csv and LLD.md agree with the Fabric and the plan."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from aifabric.planning import plan_fabric
from aifabric.topology import LinkKind, NodeKind
from tests.configs.conftest import FAMILIES, config_dbs, small_ctx, small_files


def _csv(family: str, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(small_files(family)[name])))


@pytest.mark.parametrize("family", FAMILIES)
def test_cabling_plan_has_every_cable_and_both_ends_agree(family):
    """One row per cabled link of the Fabric; every switch end's DEVICE_NEIGHBOR names the
    row's other end; speeds and media are the links'; no port is used twice."""
    f = small_ctx(family).fabric
    rows = _csv(family, "cabling.csv")
    cabled = np.flatnonzero(f.links.kind >= LinkKind.ACCESS)
    assert [int(r["link"]) for r in rows] == cabled.tolist()
    dbs = config_dbs(family)
    ends = set()
    for r in rows:
        for me, my_port, other, other_port in (("a_device", "a_port", "b_device", "b_port"),
                                               ("b_device", "b_port", "a_device", "a_port")):
            if r[me] in dbs:
                assert dbs[r[me]]["DEVICE_NEIGHBOR"][r[my_port]] == {
                    "name": r[other], "port": r[other_port]}
                assert dbs[r[me]]["PORT"][r[my_port]]["speed"] == str(int(r["speed_gbps"]) * 1000)
            ends.add((r[me], r[my_port]))
        assert r["medium"] == {LinkKind.ACCESS: f.spec.cabling.access,
                               LinkKind.LEAF_SPINE: f.spec.cabling.leaf_spine,
                               LinkKind.SPINE_CORE: f.spec.cabling.spine_core}[
            LinkKind[r["tier"].upper()]]
    assert len(ends) == 2 * len(rows)


@pytest.mark.parametrize("family", FAMILIES)
def test_address_plan_lists_every_address_once(family):
    """addressing.csv: one loopback per switch, two /31 ends per switch link, one /32 per
    NIC, the gateway on every ToR; apart from the shared gateway no address repeats."""
    ctx = small_ctx(family)
    f = ctx.fabric
    rows = _csv(family, "addressing.csv")
    kinds = {k: [r for r in rows if r["kind"] == k] for k in
             ("loopback", "p2p", "nic", "anycast_gateway")}
    assert len(kinds["loopback"]) == int(f.is_switch.sum())
    assert len(kinds["p2p"]) == 2 * len(ctx.plan.p2p)
    nics = f.ids(NodeKind.NIC)
    assert len(kinds["nic"]) == np.unique(f.nodes.ip[nics]).size
    assert len(kinds["anycast_gateway"]) == len(f.ids(NodeKind.TOR))
    addrs = [r["address"] for r in rows if r["kind"] != "anycast_gateway"]
    assert len(addrs) == len(set(addrs))
    assert {r["address"] for r in kinds["anycast_gateway"]} == {ctx.plan.gateway_str}


@pytest.mark.parametrize("family", FAMILIES)
def test_bom_matches_the_plan(family):
    """Switch, server and GPU counts equal plan_fabric's; optics and cables per medium
    sum to plan_fabric's totals."""
    f = small_ctx(family).fabric
    p = plan_fabric(f, bisection=False)
    rows = _csv(family, "bom.csv")
    count = {}
    for r in rows:
        count[(r["item"], r["role"])] = count.get((r["item"], r["role"]), 0) + int(r["count"])
    for tier in ("tor", "agg", "core"):
        assert count.get(("switch", tier), 0) == p["switches"][tier]
    assert count[("server", "active")] == p["hosts"]
    assert count.get(("server", "backup"), 0) == p["backup_hosts"]
    assert count[("gpu", "active")] == p["gpus"]
    assert count.get(("gpu", "backup"), 0) == p["backup_gpus"]
    cab = p["cabling"]
    assert sum(v for (i, _), v in count.items() if i == "transceiver") == \
        cab.get("transceivers", 0)
    assert sum(v for (i, _), v in count.items() if i == "fibre") == cab.get("fibers", 0)
    for medium in ("aoc", "dac"):
        assert sum(v for (i, _), v in count.items() if i == f"{medium}_cable") == \
            cab.get(f"{medium}_cables", 0)


@pytest.mark.parametrize("family", FAMILIES)
def test_lld_has_a_table_per_tier_and_a_drawing(family):
    """LLD.md: a section per switch tier listing every switch of it with its ASN and
    loopback (as in config_db), and a Mermaid drawing of one segment."""
    text = small_files(family)["LLD.md"]
    f = small_ctx(family).fabric
    dbs = config_dbs(family)
    for k in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE):
        ids = f.ids(k)
        if len(ids):
            assert f"\n### {k.label} ({len(ids)})\n" in text
    for name, db in dbs.items():
        asn = db["DEVICE_METADATA"]["localhost"]["bgp_asn"]
        lo = next(x for x in db["LOOPBACK_INTERFACE"] if "|" in x).split("|")[1][:-3]
        assert f"| {name} |" in text and f"| {asn} | {lo} |" in text
    assert "```mermaid\nflowchart TB\n" in text
    if family == "hpn":
        assert "## HPN dual-ToR" in text and "00:00:5E:00:01:01" in text
