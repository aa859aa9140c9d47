"""InfiniBand partitions (``infiniband.partitions``): one P_Key per tenant or job group,
written to OpenSM's partitions.conf with the plan's port GUIDs, NCCL_IB_PKEY (the P_Key
*index*) per host, and the bad input (one line naming the field, exit 2, nothing
written). The real OpenSM loading them: tests/lab/test_infiniband_lab.py."""

from __future__ import annotations

import re

import pytest
import yaml

CLOS = {"name": "ibclos", "transport": "infiniband",
        "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2},
        "topology": {"family": "clos", "leaf": {"down_ports": 8, "up_ports": 4}}}
PARTS = [{"name": "tenant-a", "pkey": "0x0101", "hosts": ["host-s00-h000", "host-s00-h001"]},
         {"name": "job-7", "pkey": 0x0202, "hosts": ["host-s01-h000"], "ipoib": False}]


def _write(tmp_path, doc):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_build_writes_one_pkey_per_tenant_and_nccl_uses_its_index(tmp_path, cli):
    out = tmp_path / "out"
    r = cli("build", _write(tmp_path, {**CLOS, "infiniband": {"partitions": PARTS}}),
            "--out", out)
    assert r.code == 0, r.err
    conf = (out / "subnet-manager" / "partitions.conf").read_text()
    # every definition ends with ';', the P_Keys as given, IPoIB where asked
    defs = [d.strip() for d in re.sub(r"#[^\n]*", "", conf).split(";") if d.strip()]
    assert [d.split("=", 1)[0] for d in defs] == ["Default", "tenant-a", "job-7"]
    assert defs[1].startswith("tenant-a=0x0101, ipoib, defmember=full :")
    assert defs[2].startswith("job-7=0x0202, defmember=full :")
    guids = {d.split("=", 1)[0]: re.findall(r"0x[0-9a-f]{16}", d) for d in defs}
    # 2 NICs per host: tenant-a 4 ports, job-7 2; each tenant port a limited member of
    # the default, the other hosts' ports full members
    assert len(guids["tenant-a"]) == 4 and len(guids["job-7"]) == 2
    assert not set(guids["tenant-a"]) & set(guids["job-7"])
    for g in guids["tenant-a"] + guids["job-7"]:
        assert f"{g}=limited" in defs[0]
    assert len(re.findall(r"=full", defs[0])) == 2 + 16 * 2 - 6  # switches, SM, free ports
    env = {h: (out / "hosts" / h / "nccl.env").read_text()
           for h in ("host-s00-h000", "host-s01-h000", "host-s02-h000")}
    assert "NCCL_IB_PKEY=1\n" in env["host-s00-h000"]
    assert "NCCL_IB_PKEY=1\n" in env["host-s01-h000"]
    assert "NCCL_IB_PKEY=0\n" in env["host-s02-h000"]


def test_without_partitions_the_default_partition_is_unchanged(tmp_path, cli):
    out = tmp_path / "out"
    r = cli("build", _write(tmp_path, CLOS), "--out", out)
    assert r.code == 0, r.err
    assert (out / "subnet-manager" / "partitions.conf").read_text().splitlines()[1] == \
        "Default=0x7fff, ipoib, defmember=full : ALL, SELF=full;"


@pytest.mark.parametrize("parts, field, words", [
    ([PARTS[0], {**PARTS[1], "pkey": "0x0101"}], "infiniband.partitions.1.pkey",
     "also partitions.0"),
    ([{**PARTS[0], "pkey": "0x8001"}], "infiniband.partitions.0.pkey", "0x0001..0x7ffe"),
    ([{**PARTS[0], "pkey": 0}], "infiniband.partitions.0.pkey", "0x0001..0x7ffe"),
    ([{**PARTS[0], "pkey": "0x7fff"}], "infiniband.partitions.0.pkey", "default"),
    ([{**PARTS[0], "hosts": ["host-s00-h000", "host-s99-h000"]}],
     "infiniband.partitions.0.hosts.1", "unknown host"),
    ([PARTS[0], {**PARTS[1], "hosts": ["host-s00-h001"]}],
     "infiniband.partitions.1.hosts.0", "one partition per host"),
], ids=["duplicate", "above-15-bits", "zero", "default", "unknown-host", "two-partitions"])
def test_bad_partitions_are_one_line_exit_2(tmp_path, cli, parts, field, words):
    out = tmp_path / "out"
    r = cli("build", _write(tmp_path, {**CLOS, "infiniband": {"partitions": parts}}),
            "--out", out)
    assert r.code == 2
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and f"{field}:" in lines[0] and words in lines[0], r.err
    assert "Traceback" not in r.err
    assert not out.exists()


#: two job groups split host-s00-h000's two NICs (GPU 0 / GPU 1), a shared tenant
#: partition over the host; P_Keys chosen so that OpenSM's order (bytes swapped) is not
#: the numeric one
GROUPS = [{"name": "tenant", "pkey": "0x0102", "shared": True,
           "hosts": ["host-s00-h000", "host-s00-h001"]},
          {"name": "job-a", "pkey": "0x0a01",
           "gpus": ["host-s00-h000-gpu0", "host-s00-h001-gpu0"]},
          {"name": "job-b", "pkey": "0x0b01",
           "gpus": ["host-s00-h000-gpu1", "host-s00-h001-gpu1"]}]


def test_job_groups_by_gpu_get_their_ports_and_one_env_each(tmp_path, cli):
    """A job group named by GPUs takes exactly those GPUs' NIC ports; a host whose ports
    are in several partitions gets one nccl.<group>.env per group, with only the group's
    HCAs and the P_Key's index in their tables (OpenSM's order: the default, then
    0x0a01 / 0x0b01 before 0x0102); its nccl.env (every HCA of the host) takes the
    partition that holds all of them, the tenant's."""
    out = tmp_path / "out"
    r = cli("build", _write(tmp_path, {**CLOS, "infiniband": {"partitions": GROUPS}}),
            "--out", out)
    assert r.code == 0, r.err
    conf = (out / "subnet-manager" / "partitions.conf").read_text()
    defs = {d.strip().split("=", 1)[0]: re.findall(r"0x[0-9a-f]{16}", d)
            for d in re.sub(r"#[^\n]*", "", conf).split(";") if d.strip()}
    assert len(defs["tenant"]) == 4 and len(defs["job-a"]) == 2 and len(defs["job-b"]) == 2
    assert set(defs["job-a"]) | set(defs["job-b"]) == set(defs["tenant"])
    assert not set(defs["job-a"]) & set(defs["job-b"])
    host = out / "hosts" / "host-s00-h000"
    env = {p.name: dict(x.split("=", 1) for x in p.read_text().splitlines()
                        if x and not x.startswith("#")) for p in host.glob("nccl*.env")}
    assert set(env) == {"nccl.env", "nccl.tenant.env", "nccl.job-a.env", "nccl.job-b.env"}
    assert env["nccl.env"]["NCCL_IB_PKEY"] == "2"
    assert env["nccl.job-a.env"]["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert env["nccl.job-b.env"]["NCCL_IB_HCA"] == "=mlx5_1:1"
    assert env["nccl.job-a.env"]["NCCL_IB_PKEY"] == env["nccl.job-b.env"]["NCCL_IB_PKEY"] \
        == "1"
    assert env["nccl.tenant.env"]["NCCL_IB_PKEY"] == "2"
    assert env["nccl.tenant.env"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    # a host in no partition keeps its single nccl.env (index 0)
    free = sorted(p.name for p in (out / "hosts" / "host-s01-h000").glob("nccl*.env"))
    assert free == ["nccl.env"]
    assert "NCCL_IB_PKEY=0\n" in (out / "hosts" / "host-s01-h000" / "nccl.env").read_text()


@pytest.mark.parametrize("parts, extra, field, words", [
    ([{**GROUPS[1], "gpus": ["host-s00-h000-gpu9"]}], {}, "infiniband.partitions.0.gpus.0",
     "unknown GPU"),
    ([GROUPS[1], {**GROUPS[2], "gpus": ["host-s00-h000-gpu0"]}], {},
     "infiniband.partitions.1.gpus.0", "one partition per host"),
    ([{**GROUPS[1], "hosts": ["host-s00-h000"]}, {**GROUPS[0], "shared": False}], {},
     "infiniband.partitions.1.hosts.0", "one partition per host"),
    (GROUPS, {"pkey_table_size": 2}, "infiniband.partitions.1.gpus.0",
     "pkey_table_size (2)"),
    ([{"name": "empty", "pkey": 5}], {}, "infiniband.partitions.0.hosts", "empty"),
    ([{**GROUPS[0], "hosts": ["host-s00-h000"]}, GROUPS[1]], {}, "infiniband.partitions.0",
     "one index"),
], ids=["unknown-gpu", "gpu-in-two-groups", "host-in-two-groups", "too-many-pkeys",
        "empty", "index-differs"])
def test_bad_job_groups_are_one_line_exit_2(tmp_path, cli, parts, extra, field, words):
    out = tmp_path / "out"
    r = cli("build", _write(tmp_path, {**CLOS, "infiniband": {"partitions": parts,
                                                              **extra}}), "--out", out)
    assert r.code == 2, r.out
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and f"{field}:" in lines[0] and words in lines[0], r.err
    assert "Traceback" not in r.err
    assert not out.exists()
