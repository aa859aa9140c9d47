"""The web view's topology data: aggregation conserves links, capacity and load; the
segment drill-down shows every ToR, host and port; search finds names, ports and IPs."""

from __future__ import annotations

import ipaddress
import json
import time
from pathlib import Path

import numpy as np
import pytest

from aifabric.errors import SpecError
from aifabric.spec import load_spec
from aifabric.topology import LinkKind, NodeKind, build_fabric
from aifabric.web.topology import overview, search, segment_view

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# every example, and the small golden specs (one per family, clos included)
SPECS = sorted(p.name for p in EXAMPLES.glob("*.yaml")) + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "golden").glob("*/spec.yaml"))
_FABRICS: dict[str, object] = {}


def fabric(name: str):
    if name not in _FABRICS:
        path = EXAMPLES / name if "/" not in name else ROOT / name
        _FABRICS[name] = build_fabric(load_spec(path))
    return _FABRICS[name]


@pytest.fixture(scope="module")
def hpn():
    return fabric("hpn-pod.yaml")


def _kind_of_group(f, g: dict) -> int:
    return {"host": NodeKind.HOST, "tor": NodeKind.TOR, "agg": NodeKind.AGG,
            "core": NodeKind.CORE}[g["kind"]]


@pytest.mark.parametrize("name", SPECS)
def test_overview_conserves_links_capacity_and_members(name: str) -> None:
    f = fabric(name)
    o = overview(f, None)
    nodes, edges = o["nodes"], o["edges"]
    assert len(nodes) <= 800
    ids = [n["id"] for n in nodes]
    assert len(set(ids)) == len(ids)
    assert len({e["id"] for e in edges}) == len(edges)
    assert {e["source"] for e in edges} | {e["target"] for e in edges} <= set(ids)
    # every link once: on one edge or inside one group
    assert sum(e["links"] for e in edges) + sum(n["links_inside"] for n in nodes) == f.n_links
    cap = sum(e["capacity_gbps"] for e in edges) + sum(n["capacity_inside_gbps"]
                                                       for n in nodes)
    assert cap == pytest.approx(float(f.links.capacity_gbps[:, 0].sum()), rel=1e-12)
    # scale-out links are never hidden inside a group; host-internal ones always are
    inside = sum(n["links_inside"] for n in nodes)
    assert inside == int((f.links.kind <= LinkKind.PCIE).sum())
    # members: every host, GPU and switch counted in exactly one group
    for kind in ("host", "tor", "agg", "core"):
        k = _kind_of_group(f, {"kind": kind})
        assert sum(n["count"] for n in nodes if n["kind"] == kind) == int(f.mask(k).sum())
    assert sum(n.get("gpus", 0) for n in nodes) == int(f.mask(NodeKind.GPU).sum())
    # positions: finite, tiers in rows top (core) to bottom (hosts)
    ys = {}
    for n in nodes:
        assert np.isfinite(n["x"]) and np.isfinite(n["y"])
        ys.setdefault(n["kind"], set()).add(n["y"])
    rows = [ys[k] for k in ("core", "agg", "tor", "host") if k in ys]
    assert all(len(r) == 1 for r in rows)
    y = [min(r) for r in rows]
    assert y == sorted(y) and len(set(y)) == len(y)
    json.dumps(o)  # JSON-ready


def test_hpn_overview_closed_forms(hpn) -> None:
    o = overview(hpn, None)
    assert o["level"] == "segment"
    by_id = {n["id"]: n for n in o["nodes"]}
    # 15 segments x (hosts + 2 ToR planes) + 2 agg planes + 2 core groups
    assert len(o["nodes"]) == 15 * 3 + 2 + 2
    assert by_id["g:host:s3"]["count"] == 136 and by_id["g:host:s3"]["drill"] == 3
    assert by_id["g:tor:s3:p0"]["count"] == 8 and by_id["g:tor:s3:p1"]["drill"] == 3
    assert by_id["g:agg:p0:pl0:g0"]["count"] == 60 and by_id["g:agg:p0:pl0:g0"]["drill"] is None
    acc = {(e["source"], e["target"]): e for e in o["edges"] if e["tier"] == "access"}
    # each of 136 hosts has 8 NICs with one port per plane
    assert len(acc) == 30
    assert all(e["links"] == 136 * 8 for e in acc.values())
    e = acc[("g:host:s3", "g:tor:s3:p1")]
    nic_gbps = float(hpn.links.capacity_gbps[hpn.links.kind == LinkKind.ACCESS, 0][0])
    assert e["capacity_gbps"] == pytest.approx(136 * 8 * nic_gbps)
    # x order: pod -> segment -> plane
    assert by_id["g:tor:s0:p0"]["x"] < by_id["g:tor:s0:p1"]["x"] < by_id["g:tor:s1:p0"]["x"]
    assert by_id["g:tor:s0:p0"]["x"] < by_id["g:host:s0"]["x"] < by_id["g:tor:s0:p1"]["x"]


def test_levels(hpn) -> None:
    pod = overview(hpn, None, level="pod")
    assert pod["level"] == "pod"
    hosts = [n for n in pod["nodes"] if n["kind"] == "host"]
    assert len(hosts) == 1 and hosts[0]["count"] == 2040 and hosts[0]["drill"] is None
    assert hosts[0]["segments"] == list(range(15))
    mp = fabric("multiplane-8x128.yaml")
    full = overview(mp, None, level="segment")
    auto = overview(mp, None)
    assert len(full["nodes"]) > 800 >= len(auto["nodes"])
    assert auto["planes_merged"] and auto["level"] == "segment"
    with pytest.raises(SpecError):
        overview(hpn, None, level="rack")
    with pytest.raises(SpecError):
        overview(hpn, None, agg="median")
    with pytest.raises(SpecError):
        overview(hpn, np.zeros(3))


@pytest.mark.parametrize("name", ["hpn-pod.yaml", "fat-tree-k64.yaml", "single-tor-dcn.yaml"])
def test_sum_of_load_over_groups_equals_sum_over_arcs(name: str) -> None:
    f = fabric(name)
    v = np.random.default_rng(7).random(2 * f.n_links)
    o = overview(f, v, agg="sum")
    out = np.repeat(f.links.kind >= LinkKind.ACCESS, 2)
    got = sum(e["up"] + e["down"] for e in o["edges"])
    assert got == pytest.approx(float(v[out].sum()), rel=1e-9)
    up = sum(e["up"] for e in o["edges"])
    assert up == pytest.approx(float(v[0::2][f.links.kind >= LinkKind.ACCESS].sum()), rel=1e-9)
    # mean of a constant is the constant; value = the larger direction
    c = np.where(np.arange(2 * f.n_links) % 2 == 0, 0.25, 0.5)
    for e in overview(f, c)["edges"]:
        assert e["up"] == pytest.approx(0.25) and e["down"] == pytest.approx(0.5)
        assert e["value"] == pytest.approx(0.5)


@pytest.mark.parametrize("name", ["hpn-pod.yaml", "fat-tree-k64.yaml"])
def test_edges_are_coloured_by_a_per_link_figure(name: str) -> None:
    """A summed metric is coloured per link (the group's sum over its links), so that a
    group of hundreds of uplinks does not outshine one access link: with one unit on
    every arc, every edge of the overview and of a segment (access links one by one,
    uplinks per agg group) has per_link 1; a mean or a max is its own figure."""
    f = fabric(name)
    ones = np.ones(2 * f.n_links)
    for view in (overview(f, ones, agg="sum"), segment_view(f, 0, ones, agg="sum")):
        assert view["colour_by"].startswith("per link")
        assert {e["per_link"] for e in view["edges"]} == {1.0}
    # the sums themselves are not
    assert max(e["value"] for e in overview(f, ones, agg="sum")["edges"]) > 1
    v = np.random.default_rng(3).random(2 * f.n_links)
    for agg in ("mean", "max"):
        for view in (overview(f, v, agg=agg), segment_view(f, 0, v, agg=agg)):
            assert all(e["per_link"] == e["value"] for e in view["edges"])
    assert all(e["per_link"] is None for e in overview(f, None)["edges"])


def test_segment_labels_are_short_and_unique(hpn) -> None:
    """16 ToR names side by side do not fit: the segment view labels each ToR and host by
    its name less the prefix they share (the full name stays in ``name``)."""
    for seg in (0, 14):
        sv = segment_view(hpn, seg, None)
        for kind in ("tor", "host"):
            nodes = [x for x in sv["nodes"] if x["kind"] == kind]
            labels = [x["label"] for x in nodes]
            assert len(set(labels)) == len(labels)
            assert all(x["name"].endswith(x["label"]) and len(x["label"]) < len(x["name"])
                       for x in nodes)
    tors = [x["label"] for x in segment_view(hpn, 3, None)["nodes"] if x["kind"] == "tor"]
    assert tors == [f"r{r}-{s}" for r in range(8) for s in "ab"]


def test_max_finds_the_one_hot_arc(hpn) -> None:
    L = hpn.links
    link = int(np.flatnonzero((L.kind == LinkKind.LEAF_SPINE) & (L.segment == 4))[5])
    v = np.zeros(2 * hpn.n_links)
    v[2 * link + 1] = 5.0  # down: agg -> ToR
    o = overview(hpn, v, agg="max")
    hot = [e for e in o["edges"] if e["value"] > 0]
    assert len(hot) == 1 and hot[0]["down"] == 5.0 and hot[0]["up"] == 0.0
    plane = int(hpn.nodes.plane[L.a[link]])
    assert hot[0]["source"] == f"g:tor:s4:p{plane}"
    assert hot[0]["target"].startswith(f"g:agg:p0:pl{plane}")


def test_failed_tor_is_counted(hpn) -> None:
    t = hpn.node_id("tor-s02-r3-b")
    L = hpn.links
    dead = (L.a == t) | (L.b == t)
    o = overview(hpn, None, alive=~dead)
    by_id = {n["id"]: n for n in o["nodes"]}
    assert by_id["g:tor:s2:p1"]["down"] == 1
    assert sum(n["down"] for n in o["nodes"]) == 1
    assert sum(e["links_down"] for e in o["edges"]) == int(dead.sum())
    assert all(n["down"] == 0 for n in overview(hpn, None)["nodes"])


def test_deterministic_and_independent_of_cache() -> None:
    f1 = build_fabric(load_spec(EXAMPLES / "single-tor-dcn.yaml"))
    f2 = build_fabric(load_spec(EXAMPLES / "single-tor-dcn.yaml"))
    v = np.linspace(0, 1, 2 * f1.n_links)
    a = json.dumps(overview(f1, v), sort_keys=True)
    overview(f1, v, level="pod")
    assert json.dumps(overview(f1, v), sort_keys=True) == a
    assert json.dumps(overview(f2, v), sort_keys=True) == a
    assert json.dumps(segment_view(f1, 3, v)) == json.dumps(segment_view(f2, 3, v))


# ------------------------------------------------------------------ one segment
def test_hpn_segment_view(hpn) -> None:
    n, L = hpn.nodes, hpn.links
    v = np.arange(2 * hpn.n_links, dtype=np.float64)
    sv = segment_view(hpn, 0, v)
    tors = [x for x in sv["nodes"] if x["kind"] == "tor"]
    hosts = [x for x in sv["nodes"] if x["kind"] == "host"]
    assert [t["name"] for t in tors] == [f"tor-s00-r{r}-{s}" for r in range(8) for s in "ab"]
    assert len(hosts) == 136 and sum(h["backup"] for h in hosts) == 8
    assert [h["node"] for h in hosts] == sorted(h["node"] for h in hosts)
    access = [e for e in sv["edges"] if e["tier"] == "access"]
    assert len(access) == 2176 == 136 * 8 * 2
    ids = {x["id"] for x in sv["nodes"]}
    assert len(ids) == len(sv["nodes"])
    for e in access[:: 37]:  # a sample: every field against the fabric's tables
        lk = e["link"]
        nic, tor = int(L.a[lk]), int(L.b[lk])
        assert L.kind[lk] == LinkKind.ACCESS
        assert e["source"] == f"n:{int(hpn.host_node[n.host[nic]])}"
        assert e["target"] == f"n:{tor}" and e["target"] in ids and e["source"] in ids
        assert e["from_port"] == f"ens{n.rail[nic]}f{n.side[nic]}"
        assert e["to_port"] == f"Ethernet{L.b_port[lk]}"
        assert e["nic"] == str(n.name[nic])
        assert e["ip"] == str(ipaddress.IPv4Address(int(n.ip[nic])))
        assert e["up"] == 2 * lk and e["down"] == 2 * lk + 1 and e["value"] == 2 * lk + 1
    # uplinks: all leaf-spine links of these ToRs, grouped per agg group
    tor_ids = np.array([t["node"] for t in tors])
    ups = [e for e in sv["edges"] if e["tier"] != "access"]
    assert sum(e["links"] for e in ups) == int((np.isin(L.a, tor_ids)
                                                & (L.kind == LinkKind.LEAF_SPINE)).sum())
    groups = {x["id"] for x in sv["nodes"] if x["kind"] == "agg"}
    assert {e["target"] for e in ups} == groups == {"g:agg:p0:pl0:g0", "g:agg:p0:pl1:g1"}
    assert len(ups) == 16  # each ToR reaches the aggs of its own plane only
    json.dumps(sv)


def test_segment_view_marks_failures(hpn) -> None:
    L = hpn.links
    t = hpn.node_id("tor-s01-r5-a")
    dead = (L.a == t) | (L.b == t)
    sv = segment_view(hpn, 1, None, alive=~dead)
    node = next(x for x in sv["nodes"] if x["name"] == "tor-s01-r5-a")
    assert node["alive"] is False
    assert sum(not x["alive"] for x in sv["nodes"]) == 1  # hosts keep their other ports
    down = [e for e in sv["edges"] if e["tier"] == "access" and not e["alive"]]
    assert len(down) == int((dead & (L.kind == LinkKind.ACCESS)).sum())
    assert all(e["value"] is None for e in sv["edges"])


@pytest.mark.parametrize("bad", [-1, 15, 10**9, "0", 1.0, True, None])
def test_segment_view_rejects_unknown_segments(hpn, bad) -> None:
    with pytest.raises(SpecError, match=r"segment.*allowed: 0\.\.14"):
        segment_view(hpn, bad, None)


@pytest.mark.parametrize("name", SPECS)
def test_every_family_drills_into_segment_zero(name: str) -> None:
    f = fabric(name)
    sv = segment_view(f, 0, None)
    hosts = int(((f.nodes.kind == NodeKind.HOST) & (f.nodes.segment == 0)).sum())
    assert sv["hosts"] == hosts
    nics = (f.nodes.kind == NodeKind.NIC) & (f.nodes.segment == 0)
    acc = (f.links.kind == LinkKind.ACCESS) & nics[f.links.a]
    assert sum(e["tier"] == "access" for e in sv["edges"]) == int(acc.sum())


# ------------------------------------------------------------------ search
def test_search_by_name_is_exact_first(hpn) -> None:
    hits = search(hpn, "host-s00-h001")
    assert hits[0]["name"] == "host-s00-h001" and hits[0]["match"] == "name"
    assert hits[0]["exact"] and hits[0]["kind"] == "host" and hits[0]["segment"] == 0
    assert all(h["name"].startswith("host-s00-h001") for h in hits)
    assert not any(h["exact"] for h in hits[1:])
    assert search(hpn, "HOST-S00-H001")[0]["name"] == "host-s00-h001"
    gpu = search(hpn, "host-s03-h010-gpu5")[0]
    assert gpu["kind"] == "gpu" and gpu["rail"] == 5 and gpu["segment"] == 3
    assert len(search(hpn, "gpu", limit=7)) == 7


def test_search_nic_by_ip(hpn) -> None:
    n, L = hpn.nodes, hpn.links
    nic = hpn.node_id("host-s02-h017-nic3b")
    ip = str(ipaddress.IPv4Address(int(n.ip[nic])))
    hits = search(hpn, ip)
    assert {h["name"] for h in hits} == {"host-s02-h017-nic3a", "host-s02-h017-nic3b"}
    for h in hits:
        assert h["match"] == "ip" and h["kind"] == "nic"
        assert int(L.a[h["link"]]) == h["node"] and L.kind[h["link"]] == LinkKind.ACCESS
    assert search(hpn, "203.0.113.77") == []


def test_search_switch_loopback(hpn) -> None:
    from aifabric.configs.addressing import plan_addresses

    plan = plan_addresses(hpn)
    agg = hpn.node_id("agg-p00-pl1-07")
    hits = search(hpn, str(ipaddress.IPv4Address(int(plan.loopback[agg]))))
    assert [h["node"] for h in hits] == [agg] and hits[0]["match"] == "ip"


def test_search_switch_port(hpn) -> None:
    L = hpn.links
    tor = hpn.node_id("tor-s00-r0-a")
    port = int(sorted(L.b_port[L.b == tor])[1])  # an existing downlink lane
    hits = search(hpn, f"tor-s00-r0-a:Ethernet{port}")
    assert hits[0]["match"] == "port" and hits[0]["exact"]
    lk = hits[0]["link"]
    assert int(L.b[lk]) == tor and int(L.b_port[lk]) == port
    assert hits[0]["node"] == tor
    assert search(hpn, f"TOR-S00-R0-A:ethernet{port}")[0]["link"] == lk
    # an interface the switch lacks: no exact hit
    missing = next(p for p in range(1, 999) if not ((L.b == tor) & (L.b_port == p)).any()
                   and not ((L.a == tor) & (L.a_port == p)).any())
    assert not any(h["exact"] for h in search(hpn, f"tor-s00-r0-a:Ethernet{missing}"))
    # uplink end: the port on the a side
    up = int(np.flatnonzero((L.a == tor) & (L.kind == LinkKind.LEAF_SPINE))[0])
    h = search(hpn, f"tor-s00-r0-a:Ethernet{int(L.a_port[up])}")[0]
    assert h["link"] == up


def test_search_host_port(hpn) -> None:
    L = hpn.links
    h = search(hpn, "host-s00-h000:ens0f1")
    assert len(h) == 1 and h[0]["match"] == "port" and h[0]["nic"] == "host-s00-h000-nic0b"
    nic = hpn.node_id("host-s00-h000-nic0b")
    assert int(L.a[h[0]["link"]]) == nic
    assert len(search(hpn, "host-s00-h000:ens")) == 16  # every port of the host


def _names_matching(f, q: str, limit: int = 50) -> list[str]:
    """The node names a plain-text query finds, by Python's own string operations (not
    numpy's): case-insensitive, the exact name first, then the names starting with the
    query, then those containing it further in (node order within each), each once, at
    most ``limit``."""
    names = [str(x) for x in f.nodes.name]
    ql = q.strip().lower()
    low = [n.lower() for n in names]
    exact = [i for i, n in enumerate(low) if n == ql]
    pre = [i for i, n in enumerate(low) if n.startswith(ql) and n != ql][:limit]
    sub = [i for i, n in enumerate(low) if ql in n and not n.startswith(ql)][:limit]
    return [names[i] for i in dict.fromkeys(exact + pre + sub)][:limit]


@pytest.mark.parametrize("q", ["<script>alert(1)</script>", "'; DROP TABLE x", "%s%n%x",
                               "../../etc/passwd", ":", "a:", ":b", "x:y:z", "...",
                               "1.2.3.4.5", "999.1.1.1", "\ud800", "tor-s00-r0-a:",
                               "tor-s00-r0-a:Ethernet-1", "host-s00-h000:", "*", ".*",
                               "[", "\\", "é", "\u202e", "a" * 200,
                               # hostile-looking but matching: case, blanks, a substring
                               "TOR-S00-R0-A", "  tor-s01-r1-b  ", "S01-R1", "-H00", "0"])
def test_hostile_queries_are_only_compared(hpn, q: str) -> None:
    """A query is compared with the names, never evaluated (no pattern, no format, no
    path): the hits are exactly the names containing it as text, exact first, then
    prefixes, then the rest; none of the hostile ones names anything."""
    hits = search(hpn, q)
    json.dumps(hits)
    expected = _names_matching(hpn, q)
    assert [h["name"] for h in hits] == expected
    assert all(h["match"] == "name" for h in hits)
    assert [h["exact"] for h in hits] == [n.lower() == q.strip().lower() for n in expected]
    if q.strip().isascii() and not any(c.isalnum() for c in q):
        assert hits == []  # punctuation alone matches no name
    if q in ("TOR-S00-R0-A", "  tor-s01-r1-b  "):  # one switch, whatever the case/blanks
        assert expected[0] == q.strip().lower() and hits[0]["exact"]
    if q in ("S01-R1", "-H00", "0"):
        assert len(hits) > 1
    if q == "0":
        assert len(hits) == 50  # capped


@pytest.mark.parametrize("q", ["", "   ", "a" * 201, None, 5, b"tor",
                               # control characters: numpy's string ops drop a NUL, so
                               # "\x00" matched every name
                               "\x00", "tor\x00", "tor-s00\x1b", "\x7f", "a\tb"])
def test_bad_queries_are_bad_input(hpn, q) -> None:
    with pytest.raises(SpecError, match=r"^q: "):
        search(hpn, q)


def test_speed(hpn) -> None:
    """Generous bounds here (a shared test machine); benchmarks/bench_web.py holds the
    real limits."""
    f = build_fabric(load_spec(EXAMPLES / "hpn-pod.yaml"))
    v = np.random.default_rng(1).random(2 * f.n_links)
    t = time.perf_counter()
    overview(f, v)
    assert time.perf_counter() - t < 2.0
    t = time.perf_counter()
    search(f, "tor-s01")
    assert time.perf_counter() - t < 1.0


@pytest.mark.parametrize("stat", ["max", "p99", "mean"])
def test_a_group_is_coloured_by_the_statistic_of_its_links(hpn, stat: str) -> None:
    """Issue 30: each overview edge's per_link is ``stat`` of its links' values in each
    direction (the larger direction), computed here link by link from the grouping: a
    single hot link among 1,024 cold ones shows in its group with max (and not with the
    mean, the washout the issue measured)."""
    from aifabric.web.topology import _groups

    f = hpn
    v = np.random.default_rng(7).random(2 * f.n_links)
    o = overview(f, v, agg="sum", stat=stat)
    assert o["stat"] == stat and o["colour_by"].startswith("per link")
    le = _groups(f, "auto").link_edge  # the grouping overview(level="auto") used
    fn = {"max": np.max, "mean": np.mean, "p99": lambda x: np.percentile(x, 99)}[stat]
    for e in range(0, len(o["edges"]), 7):  # a seventh of the edges, every tier
        links = np.flatnonzero(le == e)
        want = max(fn(v[2 * links]), fn(v[2 * links + 1]))
        assert o["edges"][e]["per_link"] == pytest.approx(want), (stat, e)
    # one hot arc among cold ones: its edge is the hottest, at the arc's own value
    # with max; the mean of its group is far below
    cold = np.full(2 * f.n_links, 0.01)
    hot_link = int(np.flatnonzero(le >= 0)[len(np.flatnonzero(le >= 0)) // 2])
    cold[2 * hot_link] = 0.9
    o = overview(f, cold, stat=stat)
    edge = o["edges"][int(le[hot_link])]
    n_links = int((le == le[hot_link]).sum())
    if stat == "max":
        assert edge["per_link"] == pytest.approx(0.9)
        assert max(e["per_link"] for e in o["edges"]) == edge["per_link"]
    elif stat == "mean":
        assert edge["per_link"] == pytest.approx((0.9 + 0.01 * (n_links - 1)) / n_links)
    # the stat colours the uplink groups of a segment too
    sv = segment_view(f, 0, v, agg="sum", stat=stat)
    assert sv["stat"] == stat
    for e in sv["edges"]:
        if e["tier"] == "access":
            assert e["per_link"] == e["value"]  # one link: its own figure


def test_an_unknown_group_statistic_names_the_field(hpn) -> None:
    for call in (lambda: overview(hpn, None, stat="median"),
                 lambda: segment_view(hpn, 0, None, stat="median")):
        with pytest.raises(SpecError) as err:
            call()
        assert err.value.problems[0].path == "stat"
        assert "max, p99, mean" in str(err.value.problems[0])
