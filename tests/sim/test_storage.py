"""The frontend (storage) network: what plan counts, checkpoint writes and reads against
their closed forms and bottlenecks, goodput's storage levels derived from it, and the
refusals."""

from __future__ import annotations

import pytest

from aifabric.errors import SpecError
from aifabric.planning import plan_fabric
from aifabric.reliability.checkpoint import resolve_levels
from aifabric.reliability.spec import CheckpointSpec
from aifabric.sim.storage import simulate_storage
from aifabric.spec import spec_from_dict
from aifabric.topology import build_fabric

BASE = {"name": "fe",
        "hosts": {"count": 256, "gpus_per_host": 8, "nics_per_host": 8, "port_gbps": 400},
        "topology": {"family": "clos", "rail_optimized": True}}


def _spec(hosts: int = 256, **fe):
    storage = fe.pop("storage", {"nodes": 16, "nic_gbps": 400, "write_gbytes_per_s": 10,
                                 "read_gbytes_per_s": 20})
    front = {"nics_per_host": 1, "ports_per_nic": 2, "port_gbps": 200,
             "oversubscription": 3, "storage": storage, **fe}
    return spec_from_dict({**BASE, "hosts": {**BASE["hosts"], "count": hosts},
                           "frontend": front})


def test_plan_counts_the_frontend():
    p = plan_fabric(build_fabric(_spec()), bisection=False)
    fe = p["frontend"]
    # tomahawk5: 128 x 400G = 51.2T; 3:1 -> 38.4T down (96 hosts of 400G), 12.8T up
    assert fe["hosts_per_leaf"] == 96 and fe["host_leaves"] == 3  # ceil(256 / 96)
    assert fe["storage_leaves"] == 1 and fe["leaf_up_gbps"] == 12_800
    assert fe["spines"] == 1  # 4 leaves x 12.8T of uplinks on 51.2T spines
    assert fe["storage_write_gbytes_per_s"] == 160 and fe["storage_read_gbytes_per_s"] == 320
    assert "frontend" not in plan_fabric(build_fabric(spec_from_dict(BASE)), bisection=False)


@pytest.mark.parametrize("hosts, fe, direction, rate, bottleneck", [
    # 16 nodes x 10 GB/s media: 160 GB/s, far below 192 x 50 GB/s of host NICs
    (192, {}, "write", 160.0, "storage media"),
    (192, {}, "read", 320.0, "storage media"),
    # 2 hosts x 2 x 200G = 100 GB/s
    (2, {}, "write", 100.0, "host NIC"),
    # fast media behind 16 x 100G NICs: 200 GB/s
    (192, {"storage": {"nodes": 16, "nic_gbps": 100, "write_gbytes_per_s": 1000,
                       "read_gbytes_per_s": 1000}}, "write", 200.0, "storage NIC"),
    # 10:1 leaves: 116 hosts per leaf, one leaf of uplinks = 51.2T / 11
    (116, {"oversubscription": 10, "storage": {"nodes": 64, "nic_gbps": 800,
                                               "write_gbytes_per_s": 100,
                                               "read_gbytes_per_s": 100}},
     "write", 51_200 / 11 / 8, "leaf uplink"),
])
def test_storage_runs_match_their_closed_form(hosts, fe, direction, rate, bottleneck):
    r = simulate_storage(_spec(hosts, **fe), hosts, 1e12, direction)
    assert r.gbytes_per_s == pytest.approx(rate, rel=1e-6)
    assert r.time_s == pytest.approx(1e12 / (rate * 1e9), rel=1e-6)
    assert r.bottleneck == bottleneck


def test_no_frontend_or_no_storage_is_refused_naming_the_field():
    with pytest.raises(SpecError) as e:
        simulate_storage(spec_from_dict(BASE), 4, 1e9, where="goodput.checkpoint.storage_from")
    assert e.value.problems[0].path == "goodput.checkpoint.storage_from"
    with pytest.raises(SpecError) as e:
        simulate_storage(_spec(storage={"nodes": 0}), 4, 1e9)
    assert e.value.problems[0].path == "frontend.storage.nodes"


def test_goodput_storage_levels_take_the_simulated_rates():
    ck = CheckpointSpec.model_validate({"levels": [
        {"name": "storage", "store": "storage", "every": 3600}], "storage_from": "frontend"})
    w = simulate_storage(_spec(64), 64, 13e9 * 14, "write")
    r = simulate_storage(_spec(64), 64, 13e9 * 14, "read")
    (lv,) = resolve_levels(ck, params=13e9, hosts=64, nic_gbytes_per_s=50.0, step_s=None,
                           storage_write_gbytes_per_s=w.gbytes_per_s,
                           storage_read_gbytes_per_s=r.gbytes_per_s)
    assert lv.upload_s == pytest.approx(w.time_s) and lv.restore_s == pytest.approx(r.time_s)
    (given,) = resolve_levels(ck, params=13e9, hosts=64, nic_gbytes_per_s=50.0, step_s=None)
    assert given.upload_s == pytest.approx(13e9 * 14 / 200e9)  # storage_gbytes_per_s


def test_a_frontend_that_cannot_be_built_is_refused(cli, tmp_path):
    import yaml

    bad = tmp_path / "bad.yaml"
    # 600 hosts of 400G on 32 x 400G leaves (16 hosts each at 1:1): 38 leaves, but a
    # 32-port spine reaches 32
    doc = {**BASE, "hosts": {**BASE["hosts"], "count": 600},
           "frontend": {"oversubscription": 1, "switch": "tomahawk3"}}
    bad.write_text(yaml.safe_dump(doc))
    r = cli("build", bad, "--out", tmp_path / "b")
    assert r.code == 2 and "frontend.switch" in r.err and not (tmp_path / "b").exists()


def test_a_host_too_fast_for_the_leaf_is_refused():
    with pytest.raises(SpecError) as e:
        build_fabric(_spec(port_gbps=100_000))  # plan, build, simulate: all refuse it
    assert e.value.problems[0].path == "frontend.port_gbps"


def test_the_frontend_example_plans_and_its_goodput_scenario_loads():
    import yaml

    from aifabric.reliability.spec import GoodputScenario
    from tests.conftest import EXAMPLES

    spec = spec_from_dict(yaml.safe_load((EXAMPLES / "scaleup" / "hpn-pod-frontend.yaml")
                                         .read_text()))
    fe = plan_fabric(build_fabric(spec), bisection=False)["frontend"]
    assert fe["hosts"] == 1920 and fe["host_leaves"] == 20 and fe["spines"] == 6
    doc = yaml.safe_load((EXAMPLES / "scaleup" / "goodput-frontend.yaml").read_text())
    doc["spec"] = spec
    sc = GoodputScenario.model_validate(doc)
    assert sc.goodput.checkpoint.storage_from == "frontend"
    # the job's 64 hosts, the whole 13e9 x 14-byte checkpoint: media-bound both ways
    w = simulate_storage(spec, 64, 13e9 * 14, "write")
    assert w.time_s == pytest.approx(182e9 / 160e9) and w.bottleneck == "storage media"


def _conv_spec(nodes=8):
    import yaml

    from tests.conftest import EXAMPLES

    d = yaml.safe_load((EXAMPLES / "scaleup" / "hgx-h100-x2.yaml").read_text())
    d["hosts"]["count"] = 8
    d["frontend"] = {"storage": {"nodes": nodes, "nic_gbps": 400,
                                 "write_gbytes_per_s": 50, "read_gbytes_per_s": 50}}
    return spec_from_dict(d)


def test_converged_storage_interferes_with_the_collective():
    from aifabric.sim.storage import converged

    r = converged(_conv_spec(), "allreduce", float(1 << 30), 100e9, algorithm="ring",
                  protocol="Simple")
    # alone, the write is bound by 8 nodes x 50 GB/s (64 GPUs x 47 GB/s of NICs is more)
    assert r["checkpoint_alone_s"] == pytest.approx(100e9 / 400e9, rel=1e-6)
    assert r["collective_with_checkpoint_ms"] > r["collective_alone_ms"]
    assert r["checkpoint_with_collective_s"] >= r["checkpoint_alone_s"] * (1 - 1e-9)
    # every checkpoint byte leaves its domain, on top of the ring's (2(n-1)/n S x D)
    n, D, S = 64, 8, float(1 << 30)
    assert r["scaleout_bytes"] == pytest.approx(2 * (n - 1) * D * S / n + 100e9, rel=1e-9)


def test_converged_needs_storage_nodes(cli, tmp_path):
    import yaml

    from aifabric.sim.storage import converged

    with pytest.raises(SpecError) as e:
        converged(_conv_spec(nodes=0), "allreduce", 1e9, 1e9)
    assert e.value.problems[0].path == "frontend.storage.nodes"
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(_conv_spec(nodes=0).model_dump(mode="json",
                                                               exclude_defaults=True)))
    r = cli("nccl", p, "--checkpoint", "100GB")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "frontend.storage.nodes" in r.err


@pytest.mark.parametrize("frontend, field", [
    ({"storage": {"nodes": 0}}, "frontend.storage.nodes"),
    (None, "goodput.checkpoint.storage_from")])
def test_goodput_from_a_frontend_without_storage_is_one_line(cli, tmp_path, frontend, field):
    import yaml

    from tests.conftest import EXAMPLES

    spec = yaml.safe_load((EXAMPLES / "scaleup" / "hpn-pod-frontend.yaml").read_text())
    if frontend is None:
        spec.pop("frontend")
    else:
        spec["frontend"] = frontend
    (tmp_path / "hpn-pod-frontend.yaml").write_text(yaml.safe_dump(spec))
    scn = tmp_path / "g.yaml"
    scn.write_text((EXAMPLES / "scaleup" / "goodput-frontend.yaml").read_text())
    r = cli("goodput", scn, "--out", tmp_path / "out")
    assert r.code == 2 and r.out == "" and not (tmp_path / "out").exists()
    (line,) = r.err.strip().splitlines()
    assert f"{field}:" in line
