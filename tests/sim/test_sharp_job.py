"""A training job's DP gradient AllReduce with SHARP (``jobs[].dp_algorithm: sharp``):
the job's step time equals the closed form on an idle fabric (within 1%), each host link
carries the gradients once where the ring carries 2(n-1)/n times them, the switches'
limits on trees and concurrent operations are counted across jobs (a job beyond them
runs the ring, and the results say so), and bad input is one line naming the field,
exit 2."""

from __future__ import annotations

import copy

import pytest
import yaml

from aifabric import api
from tests.conftest import ROOT

JOB = ROOT / "examples" / "scenarios" / "job-ndr-sharp.yaml"
NIC_GBPS = 400


def _scenario(tmp_path, change=None, name="s.yaml"):
    doc = copy.deepcopy(yaml.safe_load(JOB.read_text()))
    if change:
        change(doc)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _ring(doc):
    doc["jobs"][0]["dp_algorithm"] = "ring"


def _closed_form_ns(doc, dp_factor):
    """The step of the example job on an idle fabric: forward (32 layers), the forward
    TP AllReduce over NVLink, the first backward chunk, then the 4 DP buckets one after
    another (each longer than a backward chunk), each ``dp_factor x bucket / NIC rate``
    (SHARP: 1; ring: 2(n-1)/n); the backward TP AllReduce overlaps them on NVLink."""
    js = doc["jobs"][0]
    m, par = js["model"], js["parallel"]
    layers, tp, dp = m["layers"], par["tp"], par["dp"]
    fwd = layers * js["compute"]["fwd_ms_per_layer"] * 1e6
    bwd_chunk = 2 * fwd / js["buckets"]
    act = m["seq_len"] * m["hidden"] * 2
    nvlink_gbps = 3600  # the example's per-GPU NVLink (the spec's default)
    tp_ns = 2 * (tp - 1) / tp * (2 * layers * act) * 8 / nvlink_gbps
    bucket = float(m["params"]) * 2 / tp / js["buckets"]
    dp_ns = js["buckets"] * dp_factor * bucket * 8 / NIC_GBPS
    assert dp_ns / js["buckets"] > bwd_chunk  # the buckets queue on the network
    return fwd + tp_ns + bwd_chunk + dp_ns, dp


def test_a_sharp_jobs_step_meets_the_closed_form_and_beats_the_ring(tmp_path):
    """Idle 2-tier NDR fabric, TP 8 x DP 16 (each DP group one GPU per host, on one
    rail): with SHARP each bucket takes bucket / 400 Gbit/s, with the ring 2(n-1)/n
    times that; both steps within 1% of their closed forms."""
    doc = yaml.safe_load(JOB.read_text())
    sharp = api.simulate(JOB)
    ring = api.simulate(_scenario(tmp_path, _ring))
    closed, dp = _closed_form_ns(doc, 1.0)
    closed_ring, _ = _closed_form_ns(doc, 2 * (dp - 1) / dp)
    t_sharp = sharp.summary["jobs"][0]["iteration_ns"]
    t_ring = ring.summary["jobs"][0]["iteration_ns"]
    assert t_sharp == pytest.approx(closed, rel=0.01)
    assert t_ring == pytest.approx(closed_ring, rel=0.01)
    assert t_sharp < 0.6 * t_ring
    dp_colls = [c for c in sharp.summary["collectives"] if " dp " in c["collective"]]
    assert len(dp_colls) == 4 and {c["algorithm"] for c in dp_colls} == {"sharp"}
    assert all(c["job"] == "llm-7b" and c["gpus"] == dp for c in dp_colls)
    assert "notes" not in sharp.summary


def test_each_host_link_carries_the_gradients_once_against_the_rings_2_n_minus_1_over_n(
        tmp_path):
    """The invariant SHARP exists for: on every host link (NIC -> leaf and back), the
    SHARP job moves its GPU's gradients once; the ring moves 2(n-1)/n of them. The
    host links only carry DP traffic here (TP stays in the host), so the bytes are exact;
    nothing crosses a link above its capacity."""
    doc = yaml.safe_load(JOB.read_text())
    js = doc["jobs"][0]
    grad = float(js["model"]["params"]) * 2 / js["parallel"]["tp"]
    n = js["parallel"]["dp"]
    runs = {"sharp": api.simulate(JOB), "ring": api.simulate(_scenario(tmp_path, _ring))}
    per_link = {}
    for algo, res in runs.items():
        links = res.raw.tables["links"]
        rows = {(str(a), str(b)): float(x) for a, b, t, x in zip(
            links["from"], links["to"], links["tier"], links["bytes"], strict=True)
            if t in ("access up", "access down")}
        assert len(rows) == 2 * 128
        per_link[algo] = rows
        assert max(float(u) for u in links["peak_util"]) <= 1.0 + 1e-9
    assert per_link["sharp"].keys() == per_link["ring"].keys()
    for key, b in per_link["sharp"].items():
        assert b == pytest.approx(grad, rel=1e-9), key
        assert per_link["ring"][key] == pytest.approx(2 * (n - 1) / n * b, rel=1e-9), key


def dp_algorithms(res) -> dict[str, set[str]]:
    """Per job: the algorithms its DP AllReduces ran."""
    algos: dict[str, set[str]] = {}
    for c in res.summary["collectives"]:
        if " dp " in c["collective"]:
            algos.setdefault(c["job"], set()).add(c["algorithm"])
    return algos


def _two_jobs(limit_field, limit):
    def change(doc):
        doc["spec"]["switch_models"]["quantum2"][limit_field] = limit
        job = doc["jobs"][0]
        job.update(gpus=64, parallel={"dp": 8, "tp": 8})
        doc["jobs"] = [job, {**copy.deepcopy(job), "name": "llm-b"}]
    return change


@pytest.mark.parametrize("limit_field, limit, words", [
    ("sharp_trees", 6, "SHARP trees"),
    ("sharp_active_ops", 6, "SHARP operations"),
])
def test_a_job_beyond_the_switches_sharp_limits_runs_the_ring_and_says_so(
        tmp_path, limit_field, limit, words):
    """Two jobs of 8 hosts: each lays 8 trees (one per rail), spread over the 2 spines
    (4 trees and 4 DP groups on each); a spine model holding 6 trees or running 6
    operations takes the first job, not the second: its DP AllReduce runs NCCL's ring,
    the results name the switch and the limit, and the first job keeps SHARP."""
    res = api.simulate(_scenario(tmp_path, _two_jobs(limit_field, limit)))
    assert dp_algorithms(res) == {"llm-7b": {"sharp"}, "llm-b": {"ring"}}
    notes = res.summary["notes"]
    assert len(notes) == 1 and notes[0].startswith("jobs[1] (llm-b)")
    assert words in notes[0] and f"{limit_field} is {limit}" in notes[0]
    assert "ring" in notes[0]
    # with room for both (the default limits), both reduce in the switches
    both = api.simulate(_scenario(tmp_path, _two_jobs(limit_field, 8), name="b.yaml"))
    assert {c["algorithm"] for c in both.summary["collectives"]
            if " dp " in c["collective"]} == {"sharp"}
    assert "notes" not in both.summary


def _roce(doc):
    doc["spec"].pop("transport")


def _not_capable(doc):
    doc["spec"]["switch_models"]["quantum2"]["sharp"] = False


def _analytic(doc):
    doc["sim"] = "analytic"


@pytest.mark.parametrize("change, field", [
    (_roce, "jobs[0].dp_algorithm"),
    (_not_capable, "switch_models.quantum2.sharp"),
    (_analytic, "jobs[0].dp_algorithm"),
], ids=["roce", "switch-does-not-aggregate", "analytic"])
def test_sharp_jobs_bad_input_is_one_line_exit_2(tmp_path, cli, change, field):
    path = _scenario(tmp_path, change)
    out = tmp_path / "out"
    r = cli("simulate", path, "--out", out)
    assert r.code == 2, r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and f"{field}:" in lines[0], r.err
    assert "Traceback" not in r.err
    assert not out.exists()


def test_a_dp_group_with_8_gpus_per_host_runs_nccls_collnet_phases(tmp_path):
    """TP 1 x DP 128: each host has 8 GPUs of the one DP group, so NCCL's CollNet
    reduces inside the host over NVLink (ReduceScatter, AllGather) and each NIC sends
    its slice S/8 once: a bucket takes max(2(g-1)/g x S / NVLink, S/g / NIC), here the
    NVLink phases' 1.75 x S / 3,600 Gbit/s (within 1%)."""
    def change(doc):
        doc["jobs"][0]["parallel"] = {"dp": 128, "tp": 1}
    res = api.simulate(_scenario(tmp_path, change))
    bucket = 7e9 * 2 / 4
    closed = max(1.75 * bucket * 8 / 3600, bucket / 8 * 8 / NIC_GBPS)
    dp = [c for c in res.summary["collectives"] if " dp " in c["collective"]]
    assert len(dp) == 4 and {c["algorithm"] for c in dp} == {"sharp"}
    for c in dp:
        assert c["time_ns"] == pytest.approx(closed, rel=0.01)


def test_the_jobs_cross_segment_bytes_are_the_trees_links_between_segments(tmp_path):
    """A SHARP transfer is one tree link carrying the bucket once (its GPU pair is a
    placeholder): the jobs table counts it as crossing segments when the link leaves a
    segment and the tree's hosts span more than one. The example's 16 DP hosts are in
    two segments: each TP rank's tree joins its two leaves at a spine, so exactly the
    bytes on the leaf-spine links cross (8 trees x 2 links x 2 directions x the
    gradients = 56 GB), equal to the link table's leaf_spine bytes. Packed into one
    segment (DP 8), the trees' spine links move nothing between segments: 0, as the
    ring's."""
    res = api.simulate(JOB).raw
    job = res.tables["jobs"]
    doc = yaml.safe_load(JOB.read_text())
    js = doc["jobs"][0]
    grad = float(js["model"]["params"]) * 2 / js["parallel"]["tp"]
    links = res.tables["links"]
    spine = sum(float(b) for t, b in zip(links["tier"], links["bytes"], strict=True)
                if str(t).startswith("leaf_spine"))
    assert float(job["cross_segment_bytes"][0]) == pytest.approx(spine, rel=1e-9)
    assert float(job["cross_segment_bytes"][0]) == pytest.approx(
        js["parallel"]["tp"] * 2 * 2 * grad, rel=1e-9)

    def one_segment(doc):
        doc["jobs"][0].update(gpus=64, parallel={"dp": 8, "tp": 8})

    small = api.simulate(_scenario(tmp_path, one_segment)).raw
    assert int(small.tables["jobs"]["segments"][0]) == 1
    assert float(small.tables["jobs"]["cross_segment_bytes"][0]) == 0.0
    small_links = small.tables["links"]
    assert sum(float(b) for t, b in zip(small_links["tier"], small_links["bytes"],
                                        strict=True) if str(t).startswith("leaf_spine")) > 0
