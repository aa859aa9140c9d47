"""``deploy.qos.wred``: one WRED/ECN profile per port speed in the switch configs (SONiC
WRED_PROFILE, bound per port on the RoCE queue), YANG-valid; a single profile still
works; a map missing a speed of the fabric is exit 2 with nothing written; ``aifabric
check`` expects each port's own speed's thresholds."""

from __future__ import annotations

import json

import pytest
import yaml

from aifabric import build_fabric
from aifabric.configs import BuildContext, build_files
from aifabric.configs.check import expected_inventory
from aifabric.configs.yang import validate_config_dbs
from aifabric.errors import SpecError
from aifabric.spec import spec_from_dict
from tests.configs.conftest import SMALL, need_tool
from tests.conftest import need_sonic_yang

P200 = {"min_threshold_bytes": 100_000, "max_threshold_bytes": 800_000,
        "max_mark_percent": 10}
P400 = {"min_threshold_bytes": 200_000, "max_threshold_bytes": 1_600_000,
        "max_mark_percent": 20}
ONE = {"min_threshold_bytes": 120_000, "max_threshold_bytes": 900_000,
       "max_mark_percent": 7}


def _spec(qos: dict, family: str = "hpn") -> dict:
    """The small HPN fabric (200 Gbit/s host ports, 400 Gbit/s ToR-agg) with ``qos``."""
    return {**SMALL[family], "deploy": {"qos": qos}}


def _dbs(qos: dict, family: str = "hpn") -> dict[str, dict]:
    files = build_files(build_fabric(spec_from_dict(_spec(qos, family))))
    return {rel.split("/")[1]: json.loads(text) for rel, text in files.items()
            if rel.endswith("config_db.json")}


def _thresholds(prof: dict) -> tuple[int, int, int]:
    return (int(prof["green_min_threshold"]), int(prof["green_max_threshold"]),
            int(prof["green_drop_probability"]))


def _want(p: dict) -> tuple[int, int, int]:
    return p["min_threshold_bytes"], p["max_threshold_bytes"], p["max_mark_percent"]


def test_one_wred_profile_per_speed_bound_to_each_ports_roce_queue():
    """A map by speed: each switch has one WRED_PROFILE per speed of its ports, with that
    speed's thresholds (green, yellow and red alike), and every port's RoCE queue (3) is
    bound to the profile of the port's own speed."""
    dbs = _dbs({"wred": {200: P200, 400: P400}})
    want = {"AIFABRIC_ECN_200G": _want(P200), "AIFABRIC_ECN_400G": _want(P400)}
    seen = set()
    for name, db in dbs.items():
        speeds = {int(p["speed"]) // 1000 for p in db["PORT"].values()}
        profs = db["WRED_PROFILE"]
        assert set(profs) == {f"AIFABRIC_ECN_{s}G" for s in speeds}, name
        for pname, prof in profs.items():
            assert _thresholds(prof) == want[pname]
            assert (prof["yellow_min_threshold"], prof["red_max_threshold"]) == \
                (prof["green_min_threshold"], prof["green_max_threshold"])
        for port, p in db["PORT"].items():
            q = db["QUEUE"][f"{port}|3"]
            assert q["wred_profile"] == f"AIFABRIC_ECN_{int(p['speed']) // 1000}G"
            seen.add(int(p["speed"]) // 1000)
        assert not any("wred_profile" in v for k, v in db["QUEUE"].items()
                       if not k.endswith("|3"))
    assert seen == {200, 400}


def test_per_speed_config_dbs_validate_against_sonic_yang():
    """Every config_db.json with per-speed profiles passes yanglint (the profile names,
    fields and the QUEUE -> WRED_PROFILE leafrefs)."""
    need_sonic_yang()
    need_tool("yanglint")
    docs = [(name, db) for name, db in _dbs({"wred": {200: P200, 400: P400}}).items()]
    assert validate_config_dbs(docs) == []


def test_a_single_profile_still_works_under_ecn_and_under_wred():
    """``ecn: {...}`` (as before) and ``wred: {...}`` (one profile) give the same bytes:
    one AIFABRIC_ECN profile with those thresholds on every port."""
    a, b = _dbs({"ecn": ONE}), _dbs({"wred": ONE})
    assert a == b
    for db in a.values():
        assert set(db["WRED_PROFILE"]) == {"AIFABRIC_ECN"}
        assert _thresholds(db["WRED_PROFILE"]["AIFABRIC_ECN"]) == _want(ONE)
        assert {v.get("wred_profile") for k, v in db["QUEUE"].items()
                if k.endswith("|3")} == {"AIFABRIC_ECN"}


def test_check_expects_each_ports_own_speeds_thresholds():
    """``aifabric check``: a switch port's expected ECN thresholds are its speed's."""
    ctx = BuildContext.of(build_fabric(spec_from_dict(_spec({"wred": {200: P200,
                                                                        400: P400}}))))
    speeds = set()
    for dev in expected_inventory(ctx)["switches"].values():
        for i in dev["interfaces"].values():
            p = P200 if i["speed_gbps"] == 200 else P400
            assert (i["ecn_min_threshold_bytes"], i["ecn_max_threshold_bytes"],
                    i["ecn_max_mark_percent"]) == _want(p)
            speeds.add(i["speed_gbps"])
    assert speeds == {200, 400}


def test_a_map_missing_a_speed_is_a_spec_error():
    """The 400 Gbit/s ToR-agg ports have no profile: one problem naming deploy.qos.wred,
    the missing speed and the speeds present."""
    with pytest.raises(SpecError) as exc:
        BuildContext.of(build_fabric(spec_from_dict(_spec({"wred": {200: P200}}))))
    (p,) = exc.value.problems
    assert p.path == "deploy.qos.wred"
    assert "400 Gbit/s" in p.message and "has: 200" in p.message


@pytest.mark.parametrize(("qos", "text"), [
    ({"wred": {200: P200}}, "deploy.qos.wred: no profile for port speed 400 Gbit/s"),
    ({"wred": {200: P200, 400: P400}, "ecn": ONE}, "deploy.qos: set either ecn"),
    ({"wred": {400: {**P400, "max_threshold_bytes": 1}, 200: P200}}, "deploy.qos.wred.400"),
])
def test_bad_wred_is_exit_2_with_one_line_and_nothing_written(cli, tmp_path, qos, text):
    """A map missing a speed, ``wred`` and ``ecn`` both set, a profile with Kmax below
    Kmin: ``aifabric build`` exits 2 with one line naming the field; no output folder."""
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(_spec(qos)))
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 2
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1, r.err
    assert text in lines[0] and "s.yaml" in lines[0]
    assert not out.exists()


def test_a_spec_with_a_wred_map_round_trips():
    """The spec written into a build folder (``spec.yaml``, read back by ``aifabric
    check``) and a full dump both load back to the same per-speed profiles."""
    from aifabric.spec import dump_spec

    s = spec_from_dict(_spec({"wred": {200: P200, 400: P400}}))
    again = spec_from_dict(yaml.safe_load(dump_spec(s)))
    assert again.deploy.qos.wred == s.deploy.qos.wred and len(s.deploy.qos.wred) == 2
    full = spec_from_dict(s.model_dump(mode="json"))
    assert full.deploy.qos == s.deploy.qos


def test_the_lld_lists_the_profile_of_each_speed():
    """LLD.md's QoS table gives each speed's thresholds (one profile: as before)."""
    files = build_files(build_fabric(spec_from_dict(_spec({"wred": {200: P200,
                                                                     400: P400}}))))
    row = next(x for x in files["LLD.md"].splitlines() if x.startswith("| RoCE"))
    assert "200G 100000..800000 B, 10%; 400G 200000..1600000 B, 20%" in row
    one = build_files(build_fabric(spec_from_dict(_spec({"ecn": ONE}))))["LLD.md"]
    assert "WRED/ECN 120000..900000 B, 7% |" in one
