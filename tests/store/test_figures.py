"""summary_row on real summaries (a small flow run and a small packet run): stable names,
plain scalar values equal to the summary's, NaN as None, and a round trip through the
store that gives back the same figures."""

from __future__ import annotations

import copy
import math
import re

import pytest
import yaml

from aifabric.store import summary_row
from tests._require import require_importorskip
from tests.conftest import EXAMPLES
from tests.sim.packet.nets import FT4

NAME = re.compile(r"[a-z0-9_.]+\Z")


def _simulate(doc: dict) -> dict:
    from aifabric import build_fabric
    from aifabric.routing.scenario import scenario_from_dict
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario

    scn = scenario_from_dict(doc, model=SimScenario)
    return simulate(scn, build_fabric(scn.spec)).summary


@pytest.fixture(scope="module")
def flow() -> dict:
    """A 4-GPU AllReduce and an 8-GPU AllGather on the k=4 fat-tree, max-min fair."""
    return _simulate({"name": "ft4-ar", **FT4, "sim": "flow", "collectives": [
        {"name": "ar", "op": "allreduce", "size_bytes": "4MiB", "gpus": 4},
        {"name": "ag", "op": "allgather", "size_bytes": "2MiB", "gpus": 8}]})


@pytest.fixture(scope="module")
def packet() -> dict:
    """The incast example (DCQCN, PFC), at a tenth of its size."""
    doc = yaml.safe_load((EXAMPLES / "scenarios" / "incast-dcqcn.yaml").read_text())
    doc["traffic"][0]["size_bytes"] = 200_000
    return _simulate(doc)


def _check_plain(row: dict) -> None:
    for k, v in row.items():
        assert NAME.match(k), k
        assert v is None or type(v) in (int, float, str, bool), (k, type(v))
        assert not (isinstance(v, float) and math.isnan(v)), k
    assert len({k.lower() for k in row}) == len(row)
    assert "sim" not in row  # a core column of the row, not a figure


def test_flow_figures_equal_the_summary(flow):
    row = summary_row(flow)
    _check_plain(row)
    assert row["makespan_ns"] == flow["makespan_ns"] > 0
    assert row["finished"] is True and row["transfers_undelivered"] == 0
    assert row["scenario"] == "ft4-ar" and row["fabric"] == flow["fabric"]
    assert row["collectives_total"] == 2
    for i, c in enumerate(flow["collectives"]):
        assert row[f"coll.{i}.name"] == c["collective"]
        assert row[f"coll.{i}.time_ns"] == c["time_ns"]
        assert row[f"coll.{i}.busbw_gb_per_s"] == c["busbw_GBps"]
        assert row[f"coll.{i}.algbw_gb_per_s"] == c["algbw_GBps"]
        assert row[f"coll.{i}.gpus"] == c["gpus"]
    # the run's end is its slowest collective's end (both start at 0)
    assert row["makespan_ns"] == max(row["coll.0.time_ns"], row["coll.1.time_ns"])
    assert flow["tiers"]  # every tier and direction that carried traffic
    for tier, figs in flow["tiers"].items():
        slug = tier.replace(" ", "_")
        for k, v in figs.items():
            assert row[f"tier.{slug}.{k}"] == v
    for k, v in flow["engine"].items():
        assert row[f"engine.{k}"] == v
    assert row["routing.policy"] == flow["routing"]["policy"] == "ecmp"
    assert row["slowest.min_rate_gbps"] == flow["slowest_transfers"][0]["min_rate_gbps"]
    assert not any(k.startswith("packet.") for k in row)


def test_packet_figures_equal_the_summary(packet):
    row = summary_row(packet)
    _check_plain(row)
    pk = packet["packet"]
    for k in ("drops", "cnps", "ecn_marks", "pfc_frames", "pause_ns", "qps", "qps_done",
              "delivered_bytes", "paused_queues", "max_pause_ratio", "longest_pause_ns"):
        assert row[f"packet.{k}"] == pk[k], k
    assert row["packet.delivered_bytes"] == 8 * 200_000
    for k, v in pk["fct"].items():
        assert row[f"packet.fct.{k}"] == v, k
    assert row["packet.fct.slowdown_p50"] <= row["packet.fct.slowdown_p99"] \
        <= row["packet.fct.slowdown_max"]
    assert row["packet.deadlocks"] == len(pk["deadlocks"])
    assert row["packet.alarms"] == len(pk["alarms"])
    assert row["packet.settings.cc"] == "dcqcn"
    assert [row[f"packet.settings.ecn.{i}"] for i in range(3)] == pk["settings"]["ecn"]
    assert row["packet.settings.dcqcn.rpg_gd"] == pk["settings"]["dcqcn"]["rpg_gd"]
    assert not any(k.startswith("packet.pauses") for k in row)  # a capped excerpt


def test_nan_becomes_none_and_missing_parts_are_left_out(flow):
    s = copy.deepcopy(flow)
    s["makespan_ns"] = float("nan")
    s["collectives"][0]["time_ns"] = float("nan")
    row = summary_row(s)
    assert row["makespan_ns"] is None and row["coll.0.time_ns"] is None
    del s["tiers"], s["engine"]
    row = summary_row(s)
    assert not any(k.startswith(("tier.", "engine.")) for k in row)


def test_infinities_become_none_and_numpy_scalars_keep_their_kind(flow):
    import numpy as np

    s = copy.deepcopy(flow)
    s["makespan_ns"] = float("inf")
    s["collectives"][0]["time_ns"] = np.float64("-inf")
    s["finished"] = np.bool_(True)
    s["engine"] = {"events": np.int64(7), "ok": np.bool_(False), "rate": np.float64("inf")}
    row = summary_row(s)
    assert row["makespan_ns"] is None and row["coll.0.time_ns"] is None
    assert row["engine.rate"] is None
    assert row["finished"] is True and row["engine.ok"] is False  # bools, not ints
    assert row["engine.events"] == 7 and type(row["engine.events"]) is int


def test_same_run_same_figures_and_a_store_round_trip(flow, tmp_path):
    require_importorskip("duckdb")
    import json

    from aifabric.store import Store

    again = _simulate({"name": "ft4-ar", **FT4, "sim": "flow", "collectives": [
        {"name": "ar", "op": "allreduce", "size_bytes": "4MiB", "gpus": 4},
        {"name": "ag", "op": "allgather", "size_bytes": "2MiB", "gpus": 8}]})
    row = summary_row(flow)
    assert summary_row(again) == row
    st = Store(tmp_path / "st")
    st.write_run({"run_id": "a1", "sweep": "t", "status": "ok", "sim": "flow",
                  "overrides": json.dumps({}), **row})
    back = st.query("SELECT * FROM runs").iloc[0].to_dict()
    for k, v in row.items():
        got = back[k]
        if v is None:
            assert got is None or (isinstance(got, float) and math.isnan(got)), k
        else:
            assert got == v, k
