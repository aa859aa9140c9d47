"""SHARP as a collective algorithm of a scenario (``algorithm: sharp``), through the
simulate path: the flow engine's time equals the closed form on an idle fabric (within
1%), every host link carries the buffer (or a host's slice of it) once, and the bad input
(RoCE, switches that do not aggregate, the switches' limits, the analytic simulator) is one
line naming the field, exit 2."""

from __future__ import annotations

import pytest

from aifabric import api
from tests.conftest import ROOT, edited_yaml

SHARP = ROOT / "examples" / "scenarios" / "allreduce-ndr-sharp.yaml"


def _scenario(tmp_path, change=None, coll=None, name="s.yaml"):
    return edited_yaml(SHARP, tmp_path / name, change, collectives=coll)


def _one_gpu_per_host(doc):
    doc["spec"]["hosts"] = {"count": 16, "gpus_per_host": 1, "nics_per_host": 1,
                            "port_gbps": 400}
    doc["spec"]["topology"]["leaf"] = {"model": "quantum2", "down_ports": 8,
                                       "up_ports": 8}
    doc["spec"]["topology"]["rail_optimized"] = False
    doc["collectives"][0]["gpus"] = 16


def test_sharp_scenario_one_gpu_per_host_meets_s_over_b_and_halves_host_bytes(tmp_path):
    """One GPU per host: every GPU's NIC sends the buffer S once up the tree and receives
    it once: time = S / 400 Gbit/s + one link latency (within 1%); each host link
    carries S each way, where the ring carries 2(n-1)/n x S."""
    path = _scenario(tmp_path, _one_gpu_per_host)
    res = api.simulate(path)
    size = 1 << 30
    coll = res.summary["collectives"][0]
    assert coll["algorithm"] == "sharp" and coll["gpus"] == 16
    closed_ns = size * 8 / 400
    assert res.summary["makespan_ns"] == pytest.approx(closed_ns, rel=0.01)
    links = res.raw.tables["links"]
    tier = links["tier"]
    access_up = [b for b, t in zip(links["bytes"], tier, strict=True) if t == "access up"]
    assert len(access_up) == 16 and all(b == pytest.approx(size) for b in access_up)
    ring = api.simulate(_scenario(tmp_path, _one_gpu_per_host, name="r.yaml",
                                  coll=[{"op": "allreduce", "algorithm": "ring",
                                         "size_bytes": "1GiB", "gpus": 16}]))
    rl = ring.raw.tables["links"]
    ring_up = [b for b, t in zip(rl["bytes"], rl["tier"], strict=True) if t == "access up"]
    assert max(ring_up) == pytest.approx(2 * 15 / 16 * size, rel=1e-6)
    assert ring.summary["makespan_ns"] > 1.8 * res.summary["makespan_ns"]


def test_sharp_scenario_eight_gpus_per_host_meets_the_pipelined_closed_form():
    """8 GPUs per host (NCCL's CollNet): ReduceScatter and AllGather inside each host on
    NVLink, each GPU's S/8 slice by SHARP on its rail, streamed at once: time =
    max(2(g-1)/g x S / NVLink, S/g / NIC) within 1%; busbw above the ring's."""
    res = api.simulate(SHARP)
    size, g = 1 << 30, 8
    nvlink_ns = 2 * (g - 1) / g * size * 8 / 3600
    nic_ns = size / g * 8 / 400
    assert res.summary["makespan_ns"] == pytest.approx(max(nvlink_ns, nic_ns), rel=0.01)
    ring = api.simulate(ROOT / "examples" / "scenarios" / "allreduce-ndr-ring.yaml")
    assert res.summary["makespan_ns"] < ring.summary["makespan_ns"]
    links = res.raw.tables["links"]
    up = [b for b, t in zip(links["bytes"], links["tier"], strict=True) if t == "access up"]
    assert len(up) == 128 and max(up) == pytest.approx(size / g)


def _no_sharp_model(doc):
    doc["spec"]["switch_models"]["quantum2"]["sharp"] = False


def _roce(doc):
    doc["spec"]["transport"] = "roce"


def _one_op_per_switch(doc):
    doc["spec"]["switch_models"]["quantum2"]["sharp_active_ops"] = 1
    doc["collectives"] = [
        {"op": "allreduce", "algorithm": "sharp", "size_bytes": "1MiB", "gpus": 64},
        {"op": "allreduce", "algorithm": "sharp", "size_bytes": "1MiB", "gpus": 64}]


def _analytic(doc):
    doc["sim"] = "analytic"


@pytest.mark.parametrize("change, field, words", [
    (_roce, "collectives[0].algorithm", "InfiniBand"),
    (_no_sharp_model, "switch_models.quantum2.sharp", "does not aggregate"),
    (_one_op_per_switch, "switch_models.quantum2.sharp_active_ops", "at most 1"),
    (_analytic, "collectives[0].algorithm", "sim: flow, sim: packet"),
], ids=["roce", "no-aggregation", "active-ops", "analytic"])
def test_bad_sharp_input_is_one_line_exit_2(tmp_path, cli, change, field, words):
    path = _scenario(tmp_path, change)
    out = tmp_path / "out"
    r = cli("simulate", path, "--out", out)
    assert r.code == 2, r.out + r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and f"{field}:" in lines[0] and words in lines[0], r.err
    assert "Traceback" not in r.err
    assert not out.exists()


def test_two_sharp_operations_share_the_switches_within_the_limits(tmp_path):
    """Two concurrent SHARP AllReduces of 64 GPUs each: within Quantum-2's defaults (one
    active operation per port, 511 trees) both run, each on its own trees, each arc
    carrying each operation's share once."""
    def two(doc):
        doc["collectives"] = [
            {"name": "a", "op": "allreduce", "algorithm": "sharp", "size_bytes": "64MiB",
             "gpus": 64},
            {"name": "b", "op": "allreduce", "algorithm": "sharp", "size_bytes": "64MiB",
             "gpus": 64}]
    res = api.simulate(_scenario(tmp_path, two))
    colls = res.summary["collectives"]
    assert [c["algorithm"] for c in colls] == ["sharp", "sharp"]
    assert all(c["time_ns"] > 0 for c in colls)
    # the two jobs hold disjoint hosts: each host link carries one job's slice once
    lk = res.raw.tables["links"]
    up = [b for b, t in zip(lk["bytes"], lk["tier"], strict=True) if t == "access up"]
    assert len(up) == 128 and max(up) == pytest.approx((64 << 20) / 8)
