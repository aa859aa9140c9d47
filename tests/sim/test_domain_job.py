"""Jobs on scale-up domains: TP and EP inside, PP and DP across; a TP group larger than
the domain is refused, crossing groups are reported; the MoE job on 8-GPU and 72-GPU
domains."""

from __future__ import annotations

import json

import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.sim.domain_job import DomainJob, place_job, run_job
from aifabric.sim.twodim import net_from_spec
from aifabric.spec import spec_from_dict
from tests.conftest import EXAMPLES

SCALEUP = EXAMPLES / "scaleup"


def _net(name):
    return net_from_spec(spec_from_dict(yaml.safe_load((SCALEUP / name).read_text())))


def _job(**kw):
    d = yaml.safe_load((SCALEUP / "moe-576.yaml").read_text())
    d.update(kw)
    return DomainJob.model_validate(d)


def test_tp_larger_than_the_domain_is_refused():
    with pytest.raises(SpecError) as e:
        place_job(_job(tp=16, ep=1), per_domain=8, total_gpus=576)
    (p,) = e.value.problems
    assert p.path == "job.tp" and "larger than the scale-up domain (8 GPUs)" in p.message


def test_crossing_groups_are_reported_not_hidden():
    pl = place_job(_job(tp=6, ep=1, gpus=576), per_domain=8, total_gpus=576)
    # TP groups of 6 on domains of 8: groups [0..5], [6..11] (crosses), [12..17] (crosses),
    # [18..23]: every 4 groups (24 GPUs = 3 domains) two cross
    assert pl.crossing["tp_groups"] == 96 // 4 * 2
    pl = place_job(_job(tp=4, ep=18), per_domain=72, total_gpus=576)
    assert pl.crossing == {"tp_groups": 0, "ep_groups": 0, "dp_groups": 4, "pp_links": 0}
    pl = place_job(_job(tp=4, ep=18), per_domain=8, total_gpus=576)
    assert pl.crossing["ep_groups"] == 576 // 18  # every EP group spans 9 servers


@pytest.mark.parametrize("field, kw", [("job.gpus", {"gpus": 578}),
                                       ("job.ep", {"ep": 7}),
                                       ("job.gpus", {"gpus": 1152})])
def test_bad_jobs_name_the_field(field, kw):
    with pytest.raises(SpecError) as e:
        place_job(_job(**kw), per_domain=72, total_gpus=576)
    assert e.value.problems[0].path == field


def test_moe_on_72_gpu_domains_keeps_the_all_to_all_inside():
    small, big = _net("hgx-b200-x72.yaml"), _net("gb200-nvl72-x8.yaml")
    job = _job()
    a, b = run_job(small, job), run_job(big, job)
    # same GPUs, NVLink and NIC per GPU: only the domain differs
    assert small.physical_scaleup_gbps == big.physical_scaleup_gbps
    assert small.physical_scaleout_gbps == big.physical_scaleout_gbps
    assert b["bytes_leaving_domains_by_phase"].get("ep", 0.0) == 0.0
    # on 8-GPU domains each EP group (18 ranks, 4 apart) spans 9 servers of 2 ranks: a rank
    # sends a2a/18 to each of 16 ranks in other servers, 4 x 60 x 8 times per step
    a2a = job.tokens * job.hidden * job.bytes_per_value * job.top_k / job.tp
    per_step = 4 * job.layers * job.micro_batches
    assert a["bytes_leaving_domains_by_phase"]["ep"] == pytest.approx(
        576 * 16 * a2a / 18 * per_step, rel=1e-9)
    assert b["step_ms"] < a["step_ms"]
    assert b["comm_ms"]["ep"] < a["comm_ms"]["ep"] / 3
    assert a["comm_ms"]["tp"] == b["comm_ms"]["tp"]  # TP stays inside either way


def test_nccl_cli_job(cli):
    r = cli("nccl", SCALEUP / "gb200-nvl72-x8.yaml", "--job", SCALEUP / "moe-576.yaml",
            "--json")
    assert r.code == 0, r.err
    j = json.loads(r.out)
    assert j["crossing"]["ep_groups"] == 0 and j["domains_used"] == 8
    bad = SCALEUP / "moe-576.yaml"
    r = cli("nccl", SCALEUP / "hgx-b200-x72.yaml", "--job", bad)
    assert r.code == 0 and "EP 32" in r.out


def test_nccl_cli_refuses_a_tp_group_larger_than_the_domain(cli, tmp_path):
    job = tmp_path / "tp16.yaml"
    job.write_text(yaml.safe_dump({"gpus": 576, "tp": 16}))
    r = cli("nccl", SCALEUP / "hgx-b200-x72.yaml", "--job", job)
    assert r.code == 2 and r.out == ""
    (line,) = r.err.strip().splitlines()
    assert "job.tp" in line and "larger than the scale-up domain (8 GPUs)" in line
    job.write_text(yaml.safe_dump({"gpus": 576, "tpp": 4}))
    r = cli("nccl", SCALEUP / "hgx-b200-x72.yaml", "--job", job)
    assert r.code == 2 and "tpp" in r.err
