"""The scale-up side of a build: nvlink-cabling.csv (every NVLink link of every domain)
and the NCCL environment and topology of hosts in a domain."""

from __future__ import annotations

import csv
import io
from collections import Counter

import pytest
import yaml

from aifabric.configs.build import build_files
from aifabric.errors import SpecError
from aifabric.spec import spec_from_dict
from aifabric.topology import build_fabric
from tests.conftest import EXAMPLES

SCALEUP = EXAMPLES / "scaleup"
HGX16 = {"name": "hgx16",
         "hosts": {"count": 4, "gpus_per_host": 8, "nics_per_host": 8, "port_gbps": 400},
         "topology": {"family": "clos", "rail_optimized": True}}


def _files(doc):
    return build_files(build_fabric(spec_from_dict(doc)))


def _rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_nvl72_links_use_every_chip_port_once():
    doc = yaml.safe_load((SCALEUP / "gb200-nvl72-x8.yaml").read_text())
    doc["hosts"]["gpus"] = 144  # two racks keep the build small
    files = _files(doc)
    rows = _rows(files["nvlink-cabling.csv"])
    assert len(rows) == 144 * 18
    ports = Counter((r["domain"], r["switch_chip"], r["chip_port"]) for r in rows)
    assert max(ports.values()) == 1  # a chip port carries one link
    per_chip = Counter((r["domain"], r["switch_chip"]) for r in rows)
    assert set(per_chip.values()) == {72} and len(per_chip) == 2 * 18  # 72 ports each
    per_gpu = {}
    for r in rows:
        per_gpu.setdefault(r["gpu"], set()).add(r["switch_chip"])
    assert all(len(c) == 18 for c in per_gpu.values())  # link l to chip l
    assert {r["medium"] for r in rows} == {"spine"}
    assert len({(r["domain"], r["cartridge"]) for r in rows}) == 2 * 4
    assert len({(r["domain"], r["switch_tray"]) for r in rows}) == 2 * 9
    env = files["hosts/host-s00-h000/nccl.env"]
    assert "NCCL_NVLS_ENABLE=1\nNCCL_MNNVL_ENABLE=1\nNCCL_CUMEM_ENABLE=1\n" in env
    assert 'count="18"' in files["hosts/host-s00-h000/nccl-topo.xml"]


def test_hgx_h100_spreads_each_gpu_over_its_four_chips():
    doc = yaml.safe_load((SCALEUP / "hgx-h100-x2.yaml").read_text())
    files = _files(doc)
    rows = _rows(files["nvlink-cabling.csv"])
    assert len(rows) == 16 * 18 and {r["medium"] for r in rows} == {"baseboard"}
    by = Counter((r["gpu"], r["switch_chip"]) for r in rows)
    assert set(by.values()) == {4, 5}  # 18 links over 4 chips: 5, 4, 4, 5 or a rotation
    assert set(Counter((r["domain"], r["switch_chip"]) for r in rows).values()) == {36}
    env = files["hosts/host-s00-h000/nccl.env"]
    assert "NCCL_NVLS_ENABLE=1" in env and "MNNVL" not in env


def test_pins_and_nvls_off_reach_nccl_env():
    doc = {**HGX16, "scaleup_domain": {"gpus": 8, "switch": "nvswitch2", "links_per_gpu": 12,
                                        "nccl_algo": ["Ring", "Tree"],
                                        "nccl_proto": ["Simple"]}}
    files = _files(doc)
    env = files["hosts/host-s00-h000/nccl.env"]
    assert "NCCL_NVLS_ENABLE=0\nNCCL_ALGO=Ring,Tree\nNCCL_PROTO=Simple\n" in env
    assert 'count="12"' in files["hosts/host-s00-h000/nccl-topo.xml"]


def test_a_domain_of_one_host_changes_only_the_domain_files():
    a = _files(HGX16)
    b = _files({**HGX16, "scaleup_domain": {"gpus": 8, "switch": "nvswitch3"}})
    assert "nvlink-cabling.csv" not in a and "nvlink-cabling.csv" in b
    changed = {k for k in a if a[k] != b.get(k)}
    # the spec, the plan digest of the inventory (a hash of the spec) and the NCCL env
    assert changed == {"spec.yaml", "ansible/inventory.yml"} | {
        k for k in a if k.endswith("/nccl.env")}
    for k in a:
        if k.endswith("/nccl.env"):  # the same lines, the domain's added at the end
            assert b[k].startswith(a[k]) and b[k][len(a[k]):] == "NCCL_NVLS_ENABLE=1\n"


def test_a_bad_pin_names_the_field():
    with pytest.raises(SpecError) as e:
        spec_from_dict({**HGX16, "scaleup_domain": {"gpus": 8, "nccl_algo": ["Rings"]}})
    assert "scaleup_domain.nccl_algo" in str(e.value)
