"""af.build: the folder ``aifabric build`` writes (the command is a thin layer over it),
with the counts the command prints; bad input is a SpecError before anything is written."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml

import aifabric as af
from tests.configs.conftest import SMALL


def _digest(folder) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
            h.update(str(p.stat().st_mode & 0o111).encode())
    return h.hexdigest()


@pytest.mark.parametrize("family", ["hpn", "clos"])
def test_build_writes_what_the_command_writes(cli, tmp_path, family):
    spec_path = tmp_path / f"{family}.yaml"
    spec_path.write_text(yaml.safe_dump(SMALL[family]))
    r = cli("build", spec_path, "--out", tmp_path / "cli")
    assert r.code == 0, r.err
    res = af.build(spec_path, tmp_path / "api")
    assert _digest(tmp_path / "api") == _digest(tmp_path / "cli")
    # a Spec object, not a file: the same folder
    again = af.build(af.load_spec(spec_path), tmp_path / "obj")
    assert _digest(tmp_path / "obj") == _digest(tmp_path / "cli")
    assert again.to_dict() | {"out": ""} == res.to_dict() | {"out": ""}

    written = res.paths()
    assert res.written and res.ok and res.files == len(written) > 0
    assert {p.parts[0] for p in written} >= {"switches", "hosts", "monitoring"}
    fab = af.build_fabric(af.load_spec(spec_path))
    assert res.switches == int(fab.is_switch.sum())
    assert res.switches == len({p.parts[1] for p in written if p.parts[0] == "switches"})
    assert res.hosts == len(fab.host_node) == len(
        {p.parts[1] for p in written if p.parts[0] == "hosts"})
    cabling = (tmp_path / "api" / "cabling.csv").read_text().strip().splitlines()
    assert res.cables == len(cabling) - 1
    # the numbers the command printed are the result's
    text = " ".join(r.out.split())
    assert f"{res.files:,} files in" in text
    assert f"{res.switches:,} switches: config_db.json" in text
    assert f"NIC /32s {res.nic_addresses:,}" in text and f"ASNs {res.asns:,}" in text
    assert res.family == family and res.qos in text


def test_bad_input_is_one_problem_before_anything_is_written(tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    spec_path = tmp_path / "clos.yaml"
    spec_path.write_text(yaml.safe_dump(SMALL["clos"]))
    with pytest.raises(af.SpecError, match="is not an aifabric build folder"):
        af.build(spec_path, out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SMALL["hpn"],
                                   "deploy": {"asn": {"first": 65000, "last": 65010}}}))
    with pytest.raises(af.SpecError, match=re.escape("deploy.asn: 65000..65010")) as e:
        af.build(bad, tmp_path / "new")
    assert "\n" not in str(e.value) and not (tmp_path / "new").exists()
    with pytest.raises(af.SpecError, match="allowed: a Spec"):
        af.build({"topology": {}}, tmp_path / "new")


def test_validate_without_the_tools_is_one_line_before_any_work(tmp_path, monkeypatch):
    from aifabric.configs.yang import MODELS_ENV, models_problem

    monkeypatch.delenv(MODELS_ENV, raising=False)  # as on a fresh clone, also in CI
    assert models_problem() is not None
    spec_path = tmp_path / "clos.yaml"
    spec_path.write_text(yaml.safe_dump(SMALL["clos"]))
    with pytest.raises(af.SpecError) as e:
        af.build(spec_path, tmp_path / "out", validate=True)
    (p,) = e.value.problems
    assert p.path == "validate" and "AIFABRIC_SONIC_YANG" in p.message
    assert not (tmp_path / "out").exists()
