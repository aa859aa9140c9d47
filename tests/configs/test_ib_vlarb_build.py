"""`aifabric build` writes IBTA's VL arbitration (both tables and the limit of high
priority) into opensm.conf in OpenSM's option names (``qos_vlarb_high``,
``qos_vlarb_low``, ``qos_high_limit``, as ``opensm --create-config`` lists them); the
real OpenSM programs them into the switches in tests/lab/test_ib_qos_lab.py. Bad
tables exit 2 with one line, nothing written."""

from __future__ import annotations

import copy

import pytest
import yaml

DOC = {"name": "ibarb", "transport": "infiniband",
       "infiniband": {"data_vls": 4},
       "hosts": {"count": 16, "nics_per_host": 1, "gpus_per_host": 1},
       "topology": {"family": "fat_tree", "k": 4}}


def _conf(tmp_path, cli, ib: dict) -> list[str]:
    doc = copy.deepcopy(DOC)
    doc["infiniband"].update(ib)
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "ib.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 0, r.err
    return (out / "subnet-manager" / "opensm.conf").read_text().splitlines()


def test_both_tables_and_the_high_limit_reach_opensm_conf(tmp_path, cli):
    conf = _conf(tmp_path, cli, {"vl_arbitration": {
        "high": [{"vl": 3, "weight": 255}, {"vl": 2, "weight": 8}],
        "low": [{"vl": 0, "weight": 64}, {"vl": 1, "weight": 32}, {"vl": 0, "weight": 0}],
        "high_limit": 255}})
    assert "qos_vlarb_high 3:255,2:8" in conf
    assert "qos_vlarb_low 0:64,1:32,0:0" in conf
    assert "qos_high_limit 255" in conf


def test_vl_weights_stay_the_low_table_and_the_high_table_is_given_alone(tmp_path, cli):
    """``vl_weights`` is the low table (one entry per VL in VL order) whether or not a
    high table is given; without ``vl_arbitration`` the file is as before (an empty
    high table, limit 0)."""
    before = _conf(tmp_path / "a", cli, {"vl_weights": [10, 20, 30, 40]})
    assert "qos_vlarb_low 0:10,1:20,2:30,3:40" in before
    assert "qos_vlarb_high 0:0" in before and "qos_high_limit 0" in before
    both = _conf(tmp_path / "b", cli, {"vl_weights": [10, 20, 30, 40], "vl_arbitration": {
        "high": [{"vl": 3, "weight": 100}], "high_limit": 2}})
    assert "qos_vlarb_low 0:10,1:20,2:30,3:40" in both
    assert "qos_vlarb_high 3:100" in both and "qos_high_limit 2" in both


@pytest.mark.parametrize(("ib", "where"), [
    ({"vl_arbitration": {"high": [{"vl": 4, "weight": 1}]}},
     "infiniband.vl_arbitration.high.0.vl"),
    ({"vl_arbitration": {"low": [{"vl": 0, "weight": 1}, {"vl": 15, "weight": 1}]}},
     "infiniband.vl_arbitration.low.1.vl"),
    ({"vl_arbitration": {"high": [{"vl": 0, "weight": 256}]}},
     "infiniband.vl_arbitration.high.0.weight"),
    ({"vl_arbitration": {"high_limit": -1}}, "infiniband.vl_arbitration.high_limit"),
    ({"vl_arbitration": {"high": [{"vl": 0, "weight": 1}] * 65}},
     "infiniband.vl_arbitration.high"),
    ({"vl_weights": [1, 1, 1, 1], "vl_arbitration": {"low": [{"vl": 0, "weight": 1}]}},
     "infiniband.vl_arbitration.low"),
    ({"vl_arbitration": {"middle": []}}, "infiniband.vl_arbitration.middle"),
])
def test_bad_vl_arbitration_exits_2_with_one_line(tmp_path, cli, ib, where):
    doc = copy.deepcopy(DOC)
    doc["infiniband"].update(ib)
    spec = tmp_path / "ib.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 2, r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and where in lines[0], r.err
    assert "Traceback" not in r.err and not out.exists()


def test_the_spec_says_which_vl_is_beyond_the_ports():
    """The spec alone (no build): a table entry naming VL 4 of 4 data VLs says what is
    allowed."""
    from aifabric.errors import SpecError
    from aifabric.spec.load import spec_from_dict

    doc = copy.deepcopy(DOC)
    doc["infiniband"]["vl_arbitration"] = {"high": [{"vl": 4, "weight": 1}]}
    with pytest.raises(SpecError, match=r"VL 4 is not a data VL of the ports; allowed: "
                       r"VL 0\.\.3 \(data_vls: 4\)"):
        spec_from_dict(doc)
