"""aifabric build: the whole folder, deterministic, atomic; bad input writes nothing."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from aifabric.configs.build import n_files
from tests.configs.conftest import SMALL, small_ctx


def _spec(tmp_path, family="hpn", **deploy):
    spec = dict(SMALL[family])
    if deploy:
        spec["deploy"] = deploy
    path = tmp_path / f"{family}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _digest(folder):
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_build_writes_every_file(cli, tmp_path):
    """Per switch config_db.json + frr.conf (+ lacp.json on HPN ToRs), per host the NIC
    script and NCCL files, the fabric-wide tables, LLD and spec; scripts executable."""
    out = tmp_path / "build"
    r = cli("build", _spec(tmp_path), "--out", out)
    assert r.code == 0, r.err
    f = small_ctx("hpn").fabric
    switches = sorted(p.name for p in (out / "switches").iterdir())
    assert len(switches) == int(f.is_switch.sum())
    for s in switches:
        names = {p.name for p in (out / "switches" / s).iterdir()}
        assert names == ({"config_db.json", "frr.conf", "lacp.json"} if s.startswith("tor")
                         else {"config_db.json", "frr.conf"})
    hosts = list((out / "hosts").iterdir())
    assert len(hosts) == len(f.host_node)
    for h in hosts:
        assert {p.name for p in h.iterdir()} == {"nic-setup.sh", "nccl-topo.xml", "nccl.env"}
        assert (h / "nic-setup.sh").stat().st_mode & 0o111
    for name in ("cabling.csv", "addressing.csv", "bom.csv", "LLD.md", "spec.yaml"):
        assert (out / name).is_file()
    assert f"wrote {out}/: " in r.out
    assert n_files(f) == len(switches) + len(hosts) + 1


def test_build_is_deterministic_and_replaces_a_previous_build(cli, tmp_path):
    """Same spec -> same bytes; rebuilding into the same folder replaces it whole and
    leaves no temporary folder behind."""
    spec = _spec(tmp_path, "single_tor")
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli("build", spec, "--out", a).code == 0
    assert cli("build", spec, "--out", b).code == 0
    assert _digest(a) == _digest(b)
    (a / "switches" / "stale").mkdir()
    assert cli("build", spec, "--out", a).code == 0
    assert not (a / "switches" / "stale").exists()
    assert _digest(a) == _digest(b)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize(("deploy", "message"), [
    ({"pools": {"loopback": "172.16.0.0/29"}}, "deploy.pools.loopback: 172.16.0.0/29 holds 6"),
    ({"pools": {"p2p": "10.200.0.0/16"}}, "deploy.pools.p2p: 10.200.0.0/16 overlaps "
                                           "addressing.nic_pool 10.0.0.0/8"),
    ({"asn": {"first": 65000, "last": 65010}}, "deploy.asn: 65000..65010 holds 11 ASNs"),
    ({"qos": {"mode": "lossles"}}, "deploy.qos.mode: Input should be 'lossless' or 'lossy'"),
    ({"qos": {"roce_dscp": 64}}, "deploy.qos.roce_dscp: Input should be less than or equal "
                                 "to 63"),
])
def test_bad_input_exits_2_and_writes_nothing(cli, tmp_path, deploy, message):
    """Pools too small or overlapping, an ASN range too small, an unknown QoS mode:
    exit 2, one line naming the file and the field, and no output folder (a previous
    build stays untouched)."""
    spec = _spec(tmp_path, **deploy)
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 2
    (line,) = r.err.strip().splitlines()
    assert line.startswith(f"error: {spec}: ") and message in line, line
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == [spec.name]


def test_build_refuses_a_folder_that_is_not_a_build(cli, tmp_path):
    """An existing non-empty folder without spec.yaml is never replaced."""
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    r = cli("build", _spec(tmp_path, "clos"), "--out", out)
    assert r.code == 2 and "is not an aifabric build folder" in r.err
    assert (out / "notes.txt").read_text() == "keep me"


def test_build_validate_runs_the_real_tools(cli, tmp_path):
    """--validate checks every config_db.json with yanglint and every frr.conf with FRR."""
    from tests.configs.conftest import need_tool
    from tests.conftest import need_sonic_yang

    need_sonic_yang()
    need_tool("yanglint")
    need_tool("vtysh")
    out = tmp_path / "build"
    r = cli("build", _spec(tmp_path, "clos"), "--out", out, "--validate")
    assert r.code == 0, r.err
    assert "validated 2 config_db.json with SONiC YANG: 0 invalid; 2 frr.conf with FRR: " \
           "0 rejected" in r.out
