"""Per-arc loads for the web view: binned flow runs average to the links table's mean
utilization, packet counters turn into honest per-step deltas, designs and route folders
give bytes and flows."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.topology import LinkKind, build_fabric
from aifabric.web.loads import (
    MAX_STEPS,
    from_routed,
    from_run,
    read_tables,
    run_transfer_arcs,
)
from aifabric.web.topology import overview
from tests.sim.packet.nets import FT4  # a k=4 fat-tree of 16 single-GPU 100G hosts


def _scenario(doc: dict):
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.scenario import SimScenario

    return scenario_from_dict(doc, model=SimScenario)


def _simulate(doc: dict, out: Path):
    """Simulate ``doc`` and write its tables into ``out`` (as simulate --out does)."""
    from aifabric.report.write import write_tables
    from aifabric.sim.run import simulate

    scn = _scenario(doc)
    f = build_fabric(scn.spec)
    res = simulate(scn, f)
    out.mkdir(parents=True, exist_ok=True)
    write_tables(res, out)
    return scn, f, res


def _link_arcs(lk: dict) -> np.ndarray:
    return lk["link"].astype(np.int64) * 2 + (lk["direction"] == "down")


# ---------------------------------------------------------------- flow runs
@pytest.fixture(scope="module")
def flow_run(tmp_path_factory):
    """A ring AllReduce (many stages: loads move over time) plus a second, later
    collective on half the GPUs, simulated by the flow model."""
    doc = copy.deepcopy(FT4) | {
        "name": "web-loads-flow", "sim": "flow",
        "collectives": [
            {"name": "ar", "op": "allreduce", "algorithm": "ring", "size_bytes": 4_000_000,
             "gpus": 8, "placement": "spread"},
            {"name": "a2a", "op": "alltoall", "size_bytes": 2_000_000, "gpus": 8}]}
    out = tmp_path_factory.mktemp("flow")
    scn, f, res = _simulate(doc, out)
    return scn, f, res, out


def test_binned_flow_run_averages_to_mean_util(flow_run) -> None:
    scn, f, res, out = flow_run
    tables = read_tables(out)
    ls = from_run(tables, f, transfer_arcs=run_transfer_arcs(scn, f))
    assert ls.source == "flow" and ls.metrics[0] == "utilization"
    assert 1 < ls.n_steps <= MAX_STEPS
    lk = tables["links"]
    arcs = _link_arcs(lk)
    assert set(ls.rows.tolist()) == set(arcs.tolist())  # exactly the used arcs
    w = ls.end_ns - ls.times_ns
    assert w.sum() == pytest.approx(res.makespan_ns, rel=1e-12)
    # time-weighted mean over the steps of each arc == the links table's mean_util
    avg = np.zeros(ls.n_arcs)
    avg[ls.rows] = (ls.steps["utilization"].astype(np.float64) * w).sum(axis=1) / w.sum()
    np.testing.assert_allclose(avg[arcs], lk["mean_util"], rtol=1e-6)
    np.testing.assert_allclose(ls.arc_values("utilization", -1)[arcs], lk["mean_util"],
                               rtol=1e-6)
    np.testing.assert_allclose(ls.arc_values("bytes", None)[arcs], lk["bytes"], rtol=1e-9)
    # bytes per step add up to the whole run; loads really move over time
    np.testing.assert_allclose(ls.steps["bytes"].astype(np.float64).sum(axis=1),
                               ls.whole["bytes"], rtol=1e-5)
    per_step = ls.steps["bytes"].astype(np.float64).sum(axis=0)
    assert np.ptp(per_step) > 0.05 * per_step.max()


def test_flow_run_tiers_and_hottest(flow_run) -> None:
    scn, f, _res, out = flow_run
    tables = read_tables(out)
    ls = from_run(tables, f, transfer_arcs=run_transfer_arcs(scn, f))
    ser = ls.tier_series(f, "bytes")
    assert len(ser["times_ns"]) == ls.n_steps
    total = sum(sum(v) for v in ser["tiers"].values())
    assert total == pytest.approx(float(ls.steps["bytes"].astype(np.float64).sum()), rel=1e-6)
    assert "access up" in ser["tiers"]
    t = int(np.argmax(ls.steps["utilization"].max(axis=0)))
    hot = ls.hottest(f, "utilization", t, k=5)
    vals = [h["value"] for h in hot]
    assert vals == sorted(vals, reverse=True) and len(hot) == 5
    assert vals[0] == pytest.approx(float(ls.arc_values("utilization", t).max()))
    from aifabric.telemetry.catalog import device_names

    src, dst, _ = f.arcs
    for h in hot:
        a = h["arc"]
        assert h["link"] == a // 2 and h["direction"] == ("up", "down")[a % 2]
        assert h["from"] == device_names(f, src[[a]])[0]
        assert h["to"] == device_names(f, dst[[a]])[0]
    # whole-run values per tier follow the links table
    whole = ls.hottest(f, "utilization", -1, k=1)[0]
    lk = tables["links"]
    assert whole["value"] == pytest.approx(float(lk["mean_util"].max()), rel=1e-6)


def test_flow_run_without_paths_uses_the_tables(flow_run) -> None:
    _scn, f, _res, out = flow_run
    tables = read_tables(out)
    for fab in (f, None):
        ls = from_run(tables, fab)
        assert ls.n_steps == 1
        lk = tables["links"]
        arcs = _link_arcs(lk)
        np.testing.assert_array_equal(ls.arc_values("utilization", 0)[arcs], lk["mean_util"])
        np.testing.assert_array_equal(ls.arc_values("peak_utilization", -1)[arcs],
                                      lk["peak_util"])
        ser = ls.tier_series(fab, "utilization")
        tl = tables["timeline"]
        assert ser["times_ns"] == [float(x) for x in tl["start_ns"]]
        assert ser["tiers"]["access up"] == [float(x) for x in tl["access_up_util"]]
    hot = from_run(tables, None).hottest(None, "utilization", None, k=3)
    i = int(np.argmax(tables["links"]["mean_util"]))
    assert hot[0]["from"] == tables["links"]["from"][i]


def test_bad_arguments_are_bad_input(flow_run, tmp_path) -> None:
    scn, f, _res, out = flow_run
    tables = read_tables(out)
    T = run_transfer_arcs(scn, f)
    with pytest.raises(SpecError, match="transfer_arcs"):
        from_run(tables, f, transfer_arcs=T[:-1])
    ls = from_run(tables, f, transfer_arcs=T)
    for bad_t in (ls.n_steps, -2, 1.5, "0", True):
        with pytest.raises(SpecError, match=r"^t: "):
            ls.arc_values("utilization", bad_t)
    with pytest.raises(SpecError, match=r"^metric: "):
        ls.arc_values("queue_bytes", 0)
    with pytest.raises(SpecError, match=r"^k: "):
        ls.hottest(f, "bytes", 0, k=-1)
    with pytest.raises(SpecError, match="--scenario"):  # a packet run of another fabric
        q = {c: np.zeros(2) for c in ("time_ns", "tc", "queue_bytes", "ecn_marks", "pfc_sent",
                                      "pfc_received", "paused_ns", "drops", "tx_bytes")}
        from_run({"packet_queues": q | {"arc": np.array([3.0, 2.0 * f.n_links])}}, f)
    with pytest.raises(SpecError):
        read_tables(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError):
        read_tables(tmp_path / "empty")
    # a damaged links table is named, not a traceback
    bad = tmp_path / "bad"
    bad.mkdir()
    for p in out.iterdir():
        (bad / p.name).write_bytes(p.read_bytes())
    (bad / "links.csv").write_text("link,direction,from,to,tier,capacity_gbps,bytes\n"
                                   "0,up,a,b,access up,100,lots\n")
    with pytest.raises(SpecError, match="links"):
        read_tables(bad)


# ---------------------------------------------------------------- packet runs
@pytest.fixture(scope="module")
def packet_run(tmp_path_factory):
    doc = copy.deepcopy(FT4) | {
        "name": "web-loads-packet", "sim": "packet",
        "traffic": [{"pattern": "permutation", "gpus": "all", "size_bytes": 300_000}],
        "packet": {"sample_us": 2}}
    out = tmp_path_factory.mktemp("packet")
    scn, f, res = _simulate(doc, out)
    return scn, f, res, out


def test_packet_run_steps(packet_run) -> None:
    from aifabric.sim.packet.config import PacketConfig

    _scn, f, _res, out = packet_run
    tables = read_tables(out)
    ls = from_run(tables, f)
    assert ls.source == "packet"
    assert set(ls.metrics) == {"utilization", "queue_bytes", "ecn_marks", "pfc_pauses",
                               "drops", "bytes"}
    q = tables["packet_queues"]
    # bytes sent per port over the run == the links table's bytes
    lk = tables["links"]
    arcs = _link_arcs(lk)
    np.testing.assert_array_equal(ls.arc_values("bytes", -1)[arcs], lk["bytes"])
    # utilization of a step: bytes sent in it over what the link carries in it, at most
    # one frame more (a frame is counted when it starts)
    frame = PacketConfig().nic.mtu_payload_bytes + 128
    dt = ls.end_ns - ls.times_ns
    cap = f.arcs[2][ls.rows]
    allowed = 1.0 + frame / (cap[:, None] / 8.0 * dt[None, :])
    assert (ls.steps["utilization"] <= allowed + 1e-6).all()
    assert ls.steps["utilization"].max() > 0.5  # the permutation does load links
    # counters: per-step deltas sum to the last cumulative value of the table
    for metric, col in (("ecn_marks", "ecn_marks"), ("drops", "drops")):
        last = np.zeros(ls.n_arcs)
        np.maximum.at(last, q["arc"].astype(np.int64), q[col])
        np.testing.assert_allclose(ls.steps[metric].astype(np.float64).sum(axis=1),
                                   last[ls.rows])
    deepest = np.zeros(ls.n_arcs)
    np.maximum.at(deepest, q["arc"].astype(np.int64), q["queue_bytes"])
    np.testing.assert_array_equal(ls.arc_values("queue_bytes", None), deepest)
    ser = ls.tier_series(f, "queue_bytes")
    assert max(max(v) for v in ser["tiers"].values()) == deepest.max()


def test_packet_counters_closed_form() -> None:
    """A hand-written packet_queues table: two ports, two traffic classes, a port that
    drops out of a sample keeps its counters."""
    # arc 0 (100G): tx 0 -> 1000 -> 2500 bytes at 10, 20, 30 ns; absent at 40 ns
    # arc 3 (100G): appears at 30 ns with 500 bytes, 60 at 40 ns
    rows = []
    for t, arc, tx, q0, q1, pfc0, pfc1 in [
        (10, 0, 0, 0, 10, 0, 0), (20, 0, 1000, 50, 0, 1, 0), (30, 0, 2500, 0, 0, 1, 2),
        (30, 3, 500, 7, 9, 0, 0), (40, 3, 600, 0, 0, 0, 1)]:
        for tc, qb, pfc in ((3, q0, pfc0), (6, q1, pfc1)):
            rows.append((t, arc, tc, qb, 1 if arc == 3 and t == 40 else 0, pfc, 0, 0, 0, tx))
    cols = ("time_ns", "arc", "tc", "queue_bytes", "ecn_marks", "pfc_sent", "pfc_received",
            "paused_ns", "drops", "tx_bytes")
    arr = np.array(rows, dtype=np.float64)
    tables = {"packet_queues": {c: arr[:, i] for i, c in enumerate(cols)},
              "links": {"link": np.array([0.0, 0.0, 1.0, 1.0]),
                        "capacity_gbps": np.array([100.0, 100.0, 100.0, 100.0]),
                        "direction": np.array(["up", "down", "up", "down"], dtype=object),
                        "from": np.array(["a", "b", "b", "c"], dtype=object),
                        "to": np.array(["b", "a", "c", "b"], dtype=object),
                        "tier": np.array(["access up", "access down", "leaf_spine up",
                                          "leaf_spine down"], dtype=object)}}
    ls = from_run(tables, None)
    assert ls.n_arcs == 4 and ls.rows.tolist() == [0, 3]
    assert ls.times_ns.tolist() == [0, 10, 20, 30] and ls.end_ns.tolist() == [10, 20, 30, 40]
    # 100 Gbit/s = 12.5 bytes/ns: 10 ns carry 125 bytes
    np.testing.assert_allclose(ls.steps["bytes"][0], [0, 1000, 1500, 0])
    np.testing.assert_allclose(ls.steps["bytes"][1], [0, 0, 500, 100])
    np.testing.assert_allclose(ls.steps["utilization"][0], [0, 8, 12, 0])
    np.testing.assert_allclose(ls.steps["queue_bytes"][0], [10, 50, 0, 0])
    np.testing.assert_allclose(ls.steps["queue_bytes"][1], [0, 0, 9, 0])
    np.testing.assert_allclose(ls.steps["pfc_pauses"][0], [0, 1, 2, 0])  # summed over tc
    np.testing.assert_allclose(ls.steps["pfc_pauses"][1], [0, 0, 0, 1])
    np.testing.assert_allclose(ls.steps["ecn_marks"][1], [0, 0, 0, 1])
    assert ls.whole["bytes"].tolist() == [2500, 600]
    assert ls.whole["utilization"][0] == pytest.approx(2500 / (12.5 * 40))
    hot = ls.hottest(None, "bytes", 2, k=5)
    assert [h["arc"] for h in hot] == [0, 3] and hot[0]["from"] == "a"
    assert hot[1]["from"] == "c" and hot[1]["tier"] == "leaf_spine"
    ser = ls.tier_series(None, "pfc_pauses")
    assert ser["tiers"] == {"access up": [0.0, 1.0, 2.0, 0.0],
                            "leaf_spine down": [0.0, 0.0, 0.0, 1.0]}


# ---------------------------------------------------------------- designs and routes
def test_routed_design_loads_and_overview_sums() -> None:
    from aifabric.routing import route
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.routing.traffic import build_traffic

    doc = copy.deepcopy(FT4) | {"name": "perm", "traffic": [
        {"pattern": "permutation", "gpus": "all", "size_bytes": 1_000_000}]}
    sc = scenario_from_dict(doc)
    f = build_fabric(sc.spec)
    flows, pinned = build_traffic(f, sc.traffic, seed=sc.seed, base_dir=sc.base_dir)
    routed = route(f, flows, sc.policy, pinned=pinned)
    ls = from_routed(routed)
    assert ls.metrics == ["bytes", "flows"] and ls.n_steps == 1
    b = ls.arc_values("bytes", None)
    np.testing.assert_array_equal(b, routed.arc_bytes())
    assert ls.arc_values("flows", 0).sum() == routed.arc_flows().sum()
    o = overview(f, b, agg="sum")
    out = np.repeat(f.links.kind >= LinkKind.ACCESS, 2)
    assert sum(e["up"] + e["down"] for e in o["edges"]) == pytest.approx(b[out].sum())
    # every GPU sends 1 MB once: the access-up tier carries 16 MB
    ser = ls.tier_series(f, "bytes")
    assert ser["tiers"]["access up"] == [pytest.approx(16_000_000)]


def test_route_folder(tmp_path: Path) -> None:
    doc = copy.deepcopy(FT4) | {"name": "perm", "traffic": [
        {"pattern": "permutation", "gpus": "all", "size_bytes": 1_000_000}]}
    scn = tmp_path / "perm.yaml"
    scn.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "aifabric", "route", str(scn), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    tables = read_tables(out)
    from aifabric.routing.scenario import scenario_from_dict

    f = build_fabric(scenario_from_dict(doc).spec)
    for fab in (f, None):
        ls = from_run(tables, fab)
        assert ls.source == "route" and ls.metrics == ["bytes", "flows"]
        lk = tables["links"]
        a = lk["arc"].astype(np.int64)
        np.testing.assert_array_equal(ls.arc_values("bytes", -1)[a], lk["bytes"])
        np.testing.assert_array_equal(ls.arc_values("flows", 0)[a], lk["flows"])
        # every GPU sends 1 MB once: its PCIe up arc carries it (16 GPUs)
        pcie_up = np.flatnonzero(np.repeat(f.links.kind == LinkKind.PCIE, 2)
                                 & (np.arange(2 * f.n_links) % 2 == 0))
        assert ls.arc_values("bytes", -1)[pcie_up].sum() == pytest.approx(16_000_000)
