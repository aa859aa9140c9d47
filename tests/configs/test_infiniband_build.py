"""`aifabric build` of an InfiniBand spec (configs/infiniband.py) and the pre-flight check
of a discovered topology (`aifabric check --ibnetdiscover`). The generated opensm.conf
runs on the real OpenSM in tests/lab/test_infiniband_lab.py."""

from __future__ import annotations

import csv
import io

import yaml

DOC = {"name": "ibft", "transport": "infiniband",
       "infiniband": {"routing_engine": "updn", "lmc": 1, "data_vls": 4, "nccl_sl": 3,
                      "sl2vl": [0, 1, 2, 3] * 4, "vl_weights": [32, 64, 128, 255]},
       "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2},
       "topology": {"family": "fat_tree", "k": 8}}


def _build(tmp_path, cli, doc=DOC):
    spec = tmp_path / "ib.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 0, r.err
    return out, r


def test_an_ib_build_has_the_subnet_managers_files_and_no_ethernet_configs(tmp_path, cli):
    out, r = _build(tmp_path, cli)
    assert "subnet-manager/" in r.out
    assert not (out / "switches").exists()
    conf = (out / "subnet-manager" / "opensm.conf").read_text().splitlines()
    assert "routing_engine updn" in conf and "lmc 1" in conf and "qos TRUE" in conf
    assert "qos_max_vls 4" in conf
    assert "qos_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3" in conf
    assert "qos_vlarb_low 0:32,1:64,2:128,3:255" in conf
    assert any(x.startswith("root_guid_file ") for x in conf)
    roots = (out / "subnet-manager" / "root-guids.conf").read_text().split()
    assert roots and all(g.startswith("0x") and len(g) == 18 for g in roots)
    parts = (out / "subnet-manager" / "partitions.conf").read_text()
    assert "Default=0x7fff" in parts
    rows = list(csv.DictReader(io.StringIO((out / "ib-cabling.csv").read_text())))
    from aifabric.api import build_fabric
    from aifabric.topology import LinkKind
    fab = build_fabric(out / "spec.yaml")
    assert len(rows) == int((fab.links.kind >= LinkKind.ACCESS).sum())
    assert {r["speed"] for r in rows} == {"4xNDR"}
    # every switch port used once
    ends = [(r["a_device"], r["a_port"]) for r in rows] + \
        [(r["b_device"], r["b_port"]) for r in rows]
    assert len(ends) == len(set(ends))
    envs = sorted((out / "hosts").glob("*/nccl.env"))
    assert len(envs) == len(fab.host_node)
    text = envs[0].read_text()
    assert "NCCL_IB_SL=3" in text and "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1" in text
    assert "NCCL_IB_TC" not in text  # RoCE's traffic class has no meaning on IB


def test_check_ibnetdiscover_finds_a_miswired_and_a_missing_cable(tmp_path, cli):
    out, _ = _build(tmp_path, cli)
    planned = out / "subnet-manager" / "topology.net"
    r = cli("check", out, "--ibnetdiscover", planned)
    assert r.code == 0 and "no deviations" in r.out
    text = planned.read_text()
    # swap two cables at a leaf (both records): leaf port 5 <-> port 6
    a = text.replace('"leaf-p00-00"[5]', "@X@").replace('"leaf-p00-00"[6]', '"leaf-p00-00"[5]')
    a = a.replace("@X@", '"leaf-p00-00"[6]')
    lines = a.splitlines()
    start = lines.index('Switch\t8 "leaf-p00-00"')
    for i in range(start + 1, start + 9):
        if lines[i].startswith("[5]"):
            lines[i] = "[6]" + lines[i][3:]
        elif lines[i].startswith("[6]"):
            lines[i] = "[5]" + lines[i][3:]
    bad = tmp_path / "discovered.txt"
    bad.write_text("\n".join(lines) + "\n")
    r = cli("check", out, "--ibnetdiscover", bad, "--json")
    assert r.code == 1
    import json
    found = json.loads(r.out)
    assert len(found) == 4  # two planned cables missing, two unplanned ones found
    assert {d["group"] for d in found} == {"cabling"}
    r = cli("check", out, "--ibnetdiscover", tmp_path / "absent.txt")
    assert r.code == 2 and "--ibnetdiscover" in r.err
