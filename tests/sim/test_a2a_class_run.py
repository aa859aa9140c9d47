"""An All-to-All run as exact classes (aifabric.sim.classes) against the per-transfer run
of the same scenario (``classes: off``): every transfer's completion time within 0.1% of
its class's, the collective's time within 0.1%, every link's bytes equal; where the
classes are not exact the run falls back per transfer and says why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import aifabric as af
from aifabric import api
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.classes import class_plan, simulate_classes
from aifabric.sim.scenario import SimScenario

ROOT = Path(__file__).resolve().parents[2]

FAT_TREE = {"name": "ft8", "hosts": {"count": 64, "gpus_per_host": 1, "nics_per_host": 1,
                                     "port_gbps": 100},
            "switch_models": {"k8": {"ports": 8, "port_gbps": 100}},
            "topology": {"family": "fat_tree", "k": 8, "switch": {"model": "k8"},
                         "rail_optimized": False}}


def _hpn() -> dict:
    """A small HPN-like fabric: dual-ToR dual-port NICs, dual plane, 8 GPUs and 8 rails
    per host, 4 segments of 8 hosts (+1 backup each)."""
    doc = yaml.safe_load((ROOT / "examples" / "hpn-pod.yaml").read_text())
    doc["name"] = "hpn-small"
    doc["hosts"]["count"] = 32
    doc["hosts"]["backup_per_segment"] = 1
    doc["topology"]["hosts_per_segment"] = 8
    return doc


def _scn(spec: dict, policy: str, gpus, classes: str = "auto", **extra):
    return scenario_from_dict({"name": "a2a", "spec": spec, "routing": {"policy": policy},
                               "classes": classes,
                               "collectives": [{"op": "alltoall", "size_bytes": "16MiB",
                                                "gpus": gpus, **extra.pop("coll", {})}],
                               **extra}, base_dir=ROOT, model=SimScenario)


def _links(res) -> dict:
    lk = res.tables["links"]
    return dict(zip(zip(lk["link"].tolist(), lk["direction"].tolist(), strict=True),
                    lk["bytes"].tolist(), strict=True))


def _compare(scn, off) -> dict:
    """Class run of ``scn`` against the per-transfer run of ``off``; the plan's
    summary."""
    f = af.build_fabric(scn.spec)
    plan = class_plan(scn, f)
    assert not isinstance(plan, str), plan
    rc = api.simulate(scn, fabric=f).raw
    rp = api.simulate(off, fabric=f).raw
    assert rc.summary["classes"]["used"] is True
    assert rc.summary["classes"]["exact"] == "equitable partition verified"
    assert "classes" in rp.summary and rp.summary["classes"]["used"] is False
    tc, tp = rc.tables["collectives"]["time_ns"], rp.tables["collectives"]["time_ns"]
    np.testing.assert_allclose(tc, tp, rtol=1e-3)
    # every transfer of the per-transfer run ends when its class does
    tr = rp.tables["transfers"]
    names = {str(n): i for i, n in enumerate(f.nodes.name)}
    src = np.array([names[s] for s in tr["src_gpu"]])
    dst = np.array([names[s] for s in tr["dst_gpu"]])
    k = plan.class_of(f, src, dst)
    assert (k >= 0).all()
    ct = rc.tables["transfers"]
    end = {(int(st), int(c)): e for st, c, e in zip(ct["stage"], ct["class"], ct["end_ns"],
                                                    strict=True)}
    assert set(np.unique(tr["stage"]).tolist()) == set(np.unique(ct["stage"]).tolist())
    want_end = np.array([end[(int(st), int(c))] for st, c in zip(tr["stage"], k,
                                                                 strict=True)])
    np.testing.assert_allclose(tr["end_ns"], want_end, rtol=1e-3)
    # as many transfers, class by class (per stage)
    n_st = len(np.unique(tr["stage"]))
    assert np.array_equal(np.bincount(k, minlength=plan.n_classes), n_st * plan.count)
    assert rc.summary["engine"]["transfers"] == rp.summary["engine"]["transfers"]
    # every link carries the same bytes
    a, b = _links(rc), _links(rp)
    assert set(a) == set(b)
    got = np.array([a[x] for x in b])
    want = np.array(list(b.values()))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # the collective_links table too (whole bytes)
    ca, cb = rc.tables["collective_links"], rp.tables["collective_links"]
    assert np.abs(np.sort(ca["bytes"]) - np.sort(cb["bytes"])).max() <= 1
    # busbw and the tiers' utilizations are the same figures
    assert rc.summary["collectives"][0]["busbw_GBps"] == pytest.approx(
        rp.summary["collectives"][0]["busbw_GBps"], rel=1e-3)
    for tier, v in rp.summary["tiers"].items():
        assert rc.summary["tiers"][tier]["max_peak_util"] == pytest.approx(
            v["max_peak_util"], rel=1e-6)
    return rc.summary["classes"]


@pytest.mark.parametrize("policy", ["spray"])
def test_fat_tree_classes_equal_per_transfer(policy):
    s = _compare(_scn(FAT_TREE, policy, 64), _scn(FAT_TREE, policy, 64, "off"))
    assert s["classes"] < 10 and s["transfers_represented"] == 64 * 63


def test_hpn_classes_equal_per_transfer():
    s = _compare(_scn(_hpn(), "spray", 256), _scn(_hpn(), "spray", 256, "off"))
    assert s["transfers_represented"] == 256 * 255 and s["classes"] < 20


def test_a_subset_of_gpus_still_exact():
    # 2 of the 4 segments (pack placement: whole hosts), a repeated All-to-All
    scn = _scn(_hpn(), "spray", 128, coll={"repeat": 2})
    off = _scn(_hpn(), "spray", 128, "off", coll={"repeat": 2})
    s = _compare(scn, off)
    assert s["transfers_represented"] == 128 * 127


def test_a_failed_link_no_collective_uses_is_still_exact():
    # the backup host's access link: no transfer crosses it
    fail = {"failures": [{"link": ["host-s00-b00-nic0a", "tor-s00-r0-a"]}]}
    s = _compare(_scn(_hpn(), "spray", 256, **dict(fail)),
                 _scn(_hpn(), "spray", 256, "off", **dict(fail)))
    assert s["used"]


def test_a_failed_fabric_link_falls_back_with_the_reason():
    fail = {"failures": [{"link": ["tor-s00-r0-a", "agg-p00-pl0-00"]}]}
    scn = _scn(_hpn(), "spray", 256, **fail)
    f = af.build_fabric(scn.spec)
    why = class_plan(scn, f)
    assert isinstance(why, str) and "alike" in why
    res = api.simulate(scn, fabric=f).raw
    assert res.summary["classes"] == {"used": False, "reason": why}
    assert res.summary["engine"]["transfers"] == 256 * 255  # run per transfer


def test_uneven_placement_falls_back():
    # 4 GPUs of a host and whole other hosts: the hosts do not carry alike loads
    scn = _scn(_hpn(), "spray", list(range(12)))
    f = af.build_fabric(scn.spec)
    why = class_plan(scn, f)
    assert isinstance(why, str) and "uneven" in why


@pytest.mark.parametrize("policy", ["ecmp", "source_port", "adaptive"])
def test_hashing_and_adaptive_policies_fall_back(policy):
    scn = _scn(FAT_TREE, policy, 64)
    f = af.build_fabric(scn.spec)
    res = api.simulate(scn, fabric=f).raw
    why = res.summary["classes"]["reason"]
    assert res.summary["classes"]["used"] is False
    assert f"routing.policy {policy}" in why and "spray" in why
    assert len(res.tables["transfers"]["end_ns"]) == 64 * 63


def test_not_an_all_to_all_is_untouched():
    scn = scenario_from_dict({"name": "ar", "spec": FAT_TREE, "routing": {"policy": "spray"},
                              "collectives": [{"op": "allreduce", "size_bytes": "1MiB",
                                               "gpus": 8}]},
                             base_dir=ROOT, model=SimScenario)
    res = api.simulate(scn).raw
    assert "classes" not in res.summary


def test_the_pod_refusal_names_why(tmp_path, monkeypatch):
    from aifabric.errors import SpecError

    monkeypatch.setenv("AIFABRIC_MAX_MEMORY", "8G")
    scn = scenario_from_dict({"name": "pod", "spec": "examples/hpn-pod.yaml",
                              "routing": {"policy": "ecmp"},
                              "collectives": [{"op": "alltoall", "size_bytes": "1GiB",
                                               "gpus": 15360}]},
                             base_dir=ROOT, model=SimScenario)
    with pytest.raises(SpecError) as e:
        api.simulate(scn)
    msg = str(e.value)
    assert "235,914,240 transfers" in msg and "no exact classes: routing.policy ecmp" in msg
    assert "spray" in msg


def test_class_run_directly_matches_the_summary_of_the_api():
    scn = _scn(FAT_TREE, "spray", 64)
    f = af.build_fabric(scn.spec)
    plan = class_plan(scn, f)
    res = simulate_classes(scn, f, plan)
    assert int(res.tables["transfers"]["transfers"].sum()) == 64 * 63
    lc = res.tables["link_classes"]
    assert int(lc["links"].sum()) == len(res.tables["links"]["link"])


def test_a_bad_classes_value_is_one_line(tmp_path, cli):
    from tests.conftest import one_line_exit_2

    (tmp_path / "ft.yaml").write_text(yaml.safe_dump(FAT_TREE))
    (tmp_path / "a2a.yaml").write_text(yaml.safe_dump({
        "name": "a2a", "spec": "ft.yaml", "classes": "always",
        "collectives": [{"op": "alltoall", "size_bytes": "1MiB", "gpus": 8}]}))
    line = one_line_exit_2(cli("simulate", tmp_path / "a2a.yaml", "--json"))
    assert "classes" in line and "'auto' or 'off'" in line


def test_simulate_json_says_classes_were_used(tmp_path, cli):
    import json

    (tmp_path / "ft.yaml").write_text(yaml.safe_dump(FAT_TREE))
    (tmp_path / "a2a.yaml").write_text(yaml.safe_dump({
        "name": "a2a", "spec": "ft.yaml", "routing": {"policy": "spray"},
        "collectives": [{"op": "alltoall", "size_bytes": "1MiB", "gpus": 64}]}))
    r = cli("simulate", tmp_path / "a2a.yaml", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)["classes"]
    assert s["used"] and s["transfers_represented"] == 64 * 63
    assert s["exact"] == "equitable partition verified"


def test_the_guard_sizes_the_class_run(monkeypatch):
    """The size guard estimates the class run (groups routed, arcs), not the
    per-transfer one: a limit under it refuses with the class line."""
    from aifabric.errors import SpecError
    from aifabric.guard import class_run_bytes

    scn = _scn(_hpn(), "spray", 256)
    f = af.build_fabric(scn.spec)
    monkeypatch.setenv("AIFABRIC_MAX_MEMORY", "100M")
    with pytest.raises(SpecError) as e:
        class_plan(scn, f)
    msg = str(e.value)
    assert "as exact classes would route" in msg and "65,280 transfers" in msg
    assert class_run_bytes(1000, 100, 10_000) > class_run_bytes(10, 100, 10_000)


def test_infiniband_adaptive_routing_two_qps_equal_per_transfer():
    """InfiniBand adaptive routing is a fluid split too; two QPs per connection, a
    4-rail 8-GPU host on a k=8 fat-tree."""
    spec = yaml.safe_load((ROOT / "examples" / "infiniband-fat-tree.yaml").read_text())
    spec["infiniband"]["adaptive_routing"] = True
    spec["hosts"]["count"] = 16
    routing = {"qps_per_connection": 2}
    scn = scenario_from_dict({"name": "a2a", "spec": spec, "routing": routing,
                              "collectives": [{"op": "alltoall", "size_bytes": "16MiB",
                                               "gpus": 128}]},
                             base_dir=ROOT, model=SimScenario)
    off = scn.with_overrides({"classes": "off"})
    s = _compare(scn, off)
    assert s["transfers_represented"] == 128 * 127


def test_other_simulators_run_per_transfer_and_say_nothing():
    scn = _scn(FAT_TREE, "spray", 16).with_overrides({"sim": "analytic"})
    res = api.simulate(scn).raw
    assert "classes" not in res.summary and len(res.tables["transfers"]["end_ns"]) == 240
