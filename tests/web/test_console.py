"""The console's data (issue 30) without a browser: the plane and ToR levels, whole-unit
failures (plane, pod, segment) and the failure bound, why flows moved, traces drawn by
group, the drivers of hot links. Each against an independent source: the Fabric's
cabling, the routing model, or another way to name the same failure set."""

from __future__ import annotations

import json as _json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aifabric.errors import SpecError
from aifabric.topology.fabric import LinkKind, NodeKind

ROOT = Path(__file__).resolve().parents[2]
HPN = ROOT / "examples" / "hpn-pod.yaml"


@pytest.fixture(scope="module")
def twin():
    from aifabric.web.twin import Twin

    return Twin.open(HPN)


class _Client:
    """GET and POST on a real ``aifabric serve`` (the conftest's start_serve)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _send(self, req: urllib.request.Request) -> _Answer:
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return _Answer(r.status, r.read())
        except urllib.error.HTTPError as e:
            return _Answer(e.code, e.read())

    def get(self, path: str) -> _Answer:
        return self._send(urllib.request.Request(self.url + path))

    def post(self, path: str, json: Any) -> _Answer:
        return self._send(urllib.request.Request(
            self.url + path, data=_json.dumps(json).encode(), method="POST",
            headers={"Content-Type": "application/json"}))


class _Answer:
    def __init__(self, status: int, body: bytes) -> None:
        self.status_code, self.text = status, body.decode()

    def json(self) -> Any:
        return _json.loads(self.text)


@pytest.fixture(scope="module")
def client(start_serve):
    return _Client(start_serve(HPN).url)


def test_a_whole_plane_pod_or_segment_is_one_entry_naming_every_switch(twin):
    from aifabric.web.twin import MAX_FAIL, parse_failures

    f = twin.fabric
    n, L = f.nodes, f.links
    for unit in ("plane", "pod", "segment"):
        col = getattr(n, unit)
        k = int(np.unique(col[f.is_switch & (col >= 0)])[-1])
        names = n.name[f.is_switch & (col == k)].tolist()
        by_unit = parse_failures(f, (f"{unit}:{k}",))
        assert (by_unit == parse_failures(f, tuple(names))).all(), unit
        sw = f.is_switch & (col == k)
        assert by_unit.sum() == int((sw[L.a] | sw[L.b]).sum()) > 0
    # a plane of the HPN pod named switch by switch: over the old cap of 64, under the bound
    plane1 = n.name[f.is_switch & (n.plane == 1)].tolist()
    assert 64 < len(plane1) <= MAX_FAIL
    for bad in ("plane:9", "pod:x", "segment:", "plane:-1"):
        with pytest.raises(SpecError) as e:
            parse_failures(f, (bad,))
        p = e.value.problems[0]
        assert p.path == "fail" and "allowed:" in p.message and "\n" not in p.message


def test_a_plane_named_switch_by_switch_is_accepted_by_the_api(client, twin):
    f = twin.fabric
    n = f.nodes
    plane1 = n.name[f.is_switch & (n.plane == 1)].tolist()
    by_name = client.post("/api/whatif", json={"fail": plane1})
    assert by_name.status_code == 200, by_name.text
    by_unit = client.post("/api/whatif", json={"fail": ["plane:1"]}).json()
    assert by_name.json()["links_down"] == by_unit["links_down"]
    assert by_name.json()["flows"] == by_unit["flows"]
    r = client.post("/api/whatif", json={"fail": ["plane:7"]})
    assert r.status_code == 400 and r.json()["error"].startswith("fail: 'plane:7'")


def test_plane_view_draws_every_agg_and_core_of_the_plane(client, twin):
    f = twin.fabric
    n, L = f.nodes, f.links
    d = client.get("/api/plane?pod=0&plane=0&metric=bytes").json()
    aggs = np.flatnonzero((n.kind == NodeKind.AGG) & (n.pod == 0) & (n.plane == 0))
    drawn = {nd["node"] for nd in d["nodes"] if nd["kind"] == "agg"}
    assert drawn == set(aggs.tolist())
    cores = np.unique(L.b[np.isin(L.a, aggs) & (n.kind[L.b] == NodeKind.CORE)])
    assert {nd["node"] for nd in d["nodes"] if nd["kind"] == "core"} == set(cores.tolist())
    # every ToR-agg and agg-core link of the plane is on exactly one edge
    ids = {nd["id"] for nd in d["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in d["edges"])
    is_agg = np.zeros(f.n_nodes, bool)
    is_agg[aggs] = True
    want = int(((L.kind > LinkKind.ACCESS) & (is_agg[L.a] | is_agg[L.b])).sum())
    assert sum(e["links"] for e in d["edges"]) == want
    assert d["scale"]["hi"] == max(e["per_link"] for e in d["edges"])
    # without a pod: the plane's first pod (a core group's plane)
    assert client.get("/api/plane?plane=1").json()["pod"] == 0
    for q, field in (("pod=0&plane=5", "plane"), ("pod=3&plane=0", "pod")):
        r = client.get(f"/api/plane?{q}")
        assert r.status_code == 404 and r.json()["error"].startswith(f"{field}: ")


def test_tor_view_lists_every_port_with_the_routing_models_flows(client, twin):
    f = twin.fabric
    L = f.links
    tor = "tor-s02-r5-a"
    t = f.node_id(tor)
    d = client.get(f"/api/tor/{tor}?metric=bytes").json()
    mine = np.flatnonzero((L.a == t) | (L.b == t))
    assert sorted(p["link"] for p in d["ports"]) == sorted(mine.tolist())
    assert [p["port"] for p in d["ports"]] == sorted(p["port"] for p in d["ports"])
    st = twin._state(())
    by = st.routed.arc_bytes()
    for p in d["ports"]:
        assert p["out"] == pytest.approx(by[p["arc_out"]])
        assert p["flows_out"] == int(st.arc_flows[p["arc_out"]])
        # the top flows leaving are the heaviest on that arc, at most 5, each with a path
        # through it
        for fl in p["top_out"]:
            assert p["arc_out"] in st.routed.path_arcs(fl["flow"])
    assert d["uplinks"] + d["downlinks"] == len(mine)
    for bad in ("nope", "agg-p00-pl0-00", "x" * 201):
        r = client.get(f"/api/tor/{bad}")
        assert r.status_code == 404 and r.json()["error"].startswith("tor: ")


def test_why_flows_moved_adds_up_and_matches_their_old_paths(twin):
    w = twin.whatif(("agg-p00-pl1-07",))
    why = w["moved_why"]
    assert sum(why.values()) == w["moved_total"] > 0
    f = twin.fabric
    a = f.node_id("agg-p00-pl1-07")
    base = twin._state(()).routed
    for m in w["moved"]:
        crossed = a in f.arcs[1][base.path_arcs(m["flow"])]
        assert m["why"] == ("path_lost" if crossed else "rehashed")
    # the graph: every failed link on one group edge
    assert sum(e["links_down"] for e in w["graph"]["edges"]) == w["links_down"]
    assert w["graph"]["scale"]["hi"] == max(abs(e["delta"]) for e in w["graph"]["edges"])


def test_a_trace_by_group_holds_every_byte_on_one_group_link_or_group(twin):
    tr = twin.trace(collective=0, view="groups")
    assert tr["grouped"] is not None and tr["truncated"] is None
    arcs_b = twin._state(()).routed.arc_bytes()
    total = sum(e["bytes"] for e in tr["edges"]) + tr["grouped"]["bytes_inside"]
    assert total == pytest.approx(float(arcs_b.sum()))
    assert sum(e["bytes_up"] + e["bytes_down"] for e in tr["edges"]) == \
        pytest.approx(sum(e["bytes"] for e in tr["edges"]))
    assert sum(e["bottleneck"] for e in tr["edges"]) == 1
    # auto: groups only past max_edges
    assert twin.trace(collective=0, view="auto")["grouped"] is not None
    assert twin.trace(collective=0, view="auto", max_edges=200_000)["grouped"] is None
    with pytest.raises(SpecError):
        twin.trace(collective=0, view="nodes")


def test_the_hottest_links_name_the_pattern_driving_them(twin):
    hot = twin.heatmap(metric="bytes", k=10)["hottest"]
    assert hot and all(h["driver"] == "traffic.0 permutation" and h["driver_share"] == 1.0
                       for h in hot)
    for h in hot:
        v = h["view"]
        if h["tier"].startswith("leaf_spine"):
            assert v["tor"] in (h["from"], h["to"])
