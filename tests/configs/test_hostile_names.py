"""Hostile names cannot run a command or add a line in any generated file.

The schema rejects such names (tests/spec/test_names.py); these tests bypass it
(``model_copy`` does not validate, templates are rendered directly) to prove the second
guard: every template quotes for its language (:mod:`aifabric.configs.quote`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest
import yaml

from aifabric import build_fabric
from aifabric.configs import build_files
from aifabric.configs.frr import template_env
from aifabric.configs.quote import line, md
from aifabric.errors import SpecError
from aifabric.spec import Spec, spec_from_dict
from aifabric.spec.models import SwitchRole
from aifabric.telemetry.monitoring import render_monitoring
from tests._require import need_tool
from tests.configs.conftest import FAMILIES, SMALL, small_files

#: every way out of a shell word, an FRR line, JSON, XML, CSV and Markdown
HOSTILE = ("x\ntouch pwned1\r\n;touch pwned2; $(touch pwned3) `touch pwned4` "
           "\"'\\ <b>&amp; ]]> -- a,b\u2028touch pwned5")
#: an RDMA device prefix: reaches nic-setup.sh, nccl.env and nccl-topo.xml
HOSTILE_RDMA = "m$(touch pwned6)'\n`touch pwned7`<&\"x_"


def _hostile_spec(family: str) -> Spec:
    """The small spec of ``family`` with every user-named string hostile, unvalidated."""
    spec = spec_from_dict(SMALL[family])
    topo = spec.topology
    roles = {k: v for k, v in topo if isinstance(v, SwitchRole)}
    models = {r.model for r in roles.values()}
    assert len(models) == 1, models  # one model per small spec: rename it
    model = spec.switch_model(models.pop())
    assert model is not None
    topo = topo.model_copy(update={k: r.model_copy(update={"model": HOSTILE})
                                   for k, r in roles.items()})
    dep = spec.deploy
    nic = dep.nic.model_copy(update={"rdma_device_prefix": HOSTILE_RDMA})
    return spec.model_copy(update={
        "name": HOSTILE, "description": HOSTILE, "switch_models": {HOSTILE: model},
        "topology": topo, "deploy": dep.model_copy(update={"nic": nic})})


@cache
def hostile_files(family: str) -> dict[str, str]:
    return build_files(build_fabric(_hostile_spec(family)), extra=(render_monitoring,))


def _run_bash(args: list[str], cwd: Path, sysfs: Path | None = None
              ) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "LC_ALL": "C"}
    if sysfs is not None:
        env["AIFABRIC_SYSFS"] = str(sysfs)
    return subprocess.run(["bash", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def _created(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _assert_check_mode_inert(script: str, tmp_path: Path, ports: list[str] | None = None
                             ) -> str:
    """``bash -n`` passes; ``--check`` in an empty folder creates nothing there."""
    bin_dir, cwd = tmp_path / "bin", tmp_path / "cwd"
    bin_dir.mkdir()
    cwd.mkdir()
    path = bin_dir / "nic-setup.sh"
    path.write_text(script, encoding="utf-8")
    syntax = _run_bash(["-n", str(path)], cwd)
    assert syntax.returncode == 0, syntax.stderr
    # a ConnectX behind every port (driver links in a sysfs tree outside both folders),
    # so --check goes past its no-NIC exit and runs every check with the hostile names
    sysfs = tmp_path / "sys"
    (sysfs / "bus/pci/drivers/mlx5_core").mkdir(parents=True)
    if ports is None:
        ports = sorted(set(re.findall(r"^configure_port (\S+)$", script, re.M)))
    for port in ports:
        (sysfs / "class/net" / port / "device").mkdir(parents=True)
        (sysfs / "class/net" / port / "device/driver").symlink_to(
            sysfs / "bus/pci/drivers/mlx5_core")
    proc = _run_bash([str(path), "--check"], cwd, sysfs)
    assert "NO CONNECTX" not in proc.stdout
    assert _created(cwd) == [], proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _created(bin_dir) == ["nic-setup.sh"]
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "command not found" not in proc.stderr, proc.stderr[-2000:]
    return proc.stdout


def test_hostile_spec_bypasses_the_schema() -> None:
    """The fixture really carries the hostile names into the fabric (else the tests
    below would prove nothing)."""
    f = build_fabric(_hostile_spec("hpn"))
    assert f.spec.name == HOSTILE
    assert {name for name, _ in f.models} == {HOSTILE}


@pytest.mark.parametrize("family", FAMILIES)
def test_nic_scripts_run_nothing(family: str, tmp_path: Path) -> None:
    files = hostile_files(family)
    scripts = {k: v for k, v in files.items() if k.endswith("nic-setup.sh")}
    assert scripts
    rel, script = next(iter(sorted(scripts.items())))
    assert HOSTILE_RDMA.split("\n")[0] in script  # the prefix reached the script
    out = _assert_check_mode_inert(script, tmp_path)
    host = rel.split("/")[1]
    assert f"on {host}" in out or f"{host}: all NIC settings" in out
    for text in scripts.values():  # every host's script is valid shell
        assert "\ntouch pwned" not in text


def test_issue_example_runs_nothing(tmp_path: Path) -> None:
    """The issue's example: a spec named ``x<newline>touch ...`` (before: ``--check``
    ran the touch)."""
    spec = spec_from_dict(SMALL["clos"]).model_copy(update={"name": "x\ntouch pwned0"})
    files = build_files(build_fabric(spec))
    script = next(v for k, v in sorted(files.items()) if k.endswith("nic-setup.sh"))
    _assert_check_mode_inert(script, tmp_path)
    conf = next(v for k, v in sorted(files.items()) if k.endswith("frr.conf"))
    assert "\ntouch" not in conf


@pytest.mark.parametrize("family", FAMILIES)
def test_frr_conf_has_no_injected_line(family: str) -> None:
    """Same lines as the build with safe names; only comment lines differ."""
    good = small_files(family)
    bad = hostile_files(family)
    confs = sorted(k for k in bad if k.endswith("frr.conf"))
    assert confs
    for rel in confs:
        a, b = good[rel].splitlines(), bad[rel].splitlines()
        assert len(a) == len(b), rel
        diff = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
        assert diff, rel  # the spec name is in the header comment
        assert all(y.startswith("!") for _, y in diff), diff
        assert f"from spec {line(HOSTILE)}" in b[0]


def test_frr_conf_passes_vtysh() -> None:
    need_tool("vtysh", "Debian package frr")
    from aifabric.configs.frrcheck import validate_frr_confs

    bad = hostile_files("clos")
    docs = [(k, v) for k, v in sorted(bad.items()) if k.endswith("frr.conf")]
    assert validate_frr_confs(docs) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_json_keeps_the_values(family: str) -> None:
    good, bad = small_files(family), hostile_files(family)
    for rel in (k for k in bad if k.endswith(".json")):
        doc = json.loads(bad[rel])
        ref = json.loads(good[rel])
        if rel.endswith("config_db.json"):
            assert doc["DEVICE_METADATA"]["localhost"]["hwsku"] == HOSTILE
            doc["DEVICE_METADATA"]["localhost"]["hwsku"] = \
                ref["DEVICE_METADATA"]["localhost"]["hwsku"]
        assert doc == ref, rel


@pytest.mark.parametrize("family", FAMILIES)
def test_xml_parses(family: str) -> None:
    bad = hostile_files(family)
    topos = [v for k, v in bad.items() if k.endswith("nccl-topo.xml")]
    assert topos
    for text in topos:
        root = ET.fromstring(text)  # a broken comment or attribute raises here
        names = [n.get("name") for n in root.iter("net")]
        assert names and all(n.startswith(line(HOSTILE_RDMA)) for n in names)


def test_nccl_env_sources_without_running_anything(tmp_path: Path) -> None:
    bad = hostile_files("hpn")
    rel, env = next((k, v) for k, v in sorted(bad.items()) if k.endswith("nccl.env"))
    (tmp_path / "cwd").mkdir()
    envfile = tmp_path / "nccl.env"
    envfile.write_text(env, encoding="utf-8")
    proc = _run_bash(["-c", f'set -a; . {envfile}; printf "%s" "$NCCL_IB_HCA"'],
                     tmp_path / "cwd")
    assert proc.returncode == 0, proc.stderr
    assert _created(tmp_path / "cwd") == []
    topo = ET.fromstring(bad[rel.replace("nccl.env", "nccl-topo.xml")])
    n = len(list(topo.iter("net")))
    assert proc.stdout == "=" + ",".join(f"{HOSTILE_RDMA}bond_{i}" for i in range(n))


@pytest.mark.parametrize("family", FAMILIES)
def test_tables_lld_and_spec(family: str) -> None:
    good, bad = small_files(family), hostile_files(family)
    for rel in ("cabling.csv", "addressing.csv", "bom.csv"):
        rows = list(csv.reader(io.StringIO(bad[rel])))
        assert len(rows) == len(list(csv.reader(io.StringIO(good[rel])))), rel
        assert all(len(r) == len(rows[0]) for r in rows), rel
    bom = list(csv.DictReader(io.StringIO(bad["bom.csv"])))
    assert {r["model"] for r in bom if r["item"] == "switch"} == {HOSTILE}
    lld = bad["LLD.md"]
    assert len(lld.splitlines()) == len(good["LLD.md"].splitlines())
    assert lld.splitlines()[0] == f"# Low-level design: {md(HOSTILE)}"
    assert "<b>" not in lld
    assert yaml.safe_load(bad["spec.yaml"])["name"] == HOSTILE


# --- templates rendered directly: values that are generated in a real build (device,
# port and host names, addresses) made hostile too

_NIC_CTX = {
    "host": HOSTILE, "spec_name": HOSTILE, "lossless": True, "roce_dscp": 26, "roce_prio": 3,
    "cnp_dscp": 48, "cnp_prio": 6, "mtu": 9000, "roce_tos": 104, "gateway": HOSTILE,
    "bonded": True, "bond_mode": HOSTILE, "install_path": HOSTILE, "unit": HOSTILE,
    "script_name": HOSTILE, "pfc_state": HOSTILE, "dscp_prio": HOSTILE,
    "rp": {HOSTILE: 5}, "np": {HOSTILE: 4}, "nic_pool": HOSTILE,
    "nics": [{"index": 0, "ip": HOSTILE, "rdma": HOSTILE, "netdev": HOSTILE, "table": 100,
              "ports": [{"ifname": HOSTILE, "peer": HOSTILE, "peer_port": HOSTILE},
                        {"ifname": HOSTILE + "2", "peer": HOSTILE, "peer_port": HOSTILE}]}],
}


def test_nic_template_quotes_every_value(tmp_path: Path) -> None:
    script = template_env().get_template("nic-setup.sh.j2").render(**_NIC_CTX)
    ports = [p["ifname"] for n in _NIC_CTX["nics"] for p in n["ports"]]  # type: ignore[attr-defined]
    out = _assert_check_mode_inert(script, tmp_path, ports)
    assert "deviation(s) on x" in out  # ran to its end


def test_nic_template_refuses_non_numbers() -> None:
    with pytest.raises(SpecError, match="integer"):
        template_env().get_template("nic-setup.sh.j2").render(
            **{**_NIC_CTX, "mtu": "9000; touch pwned"})


@pytest.mark.parametrize("field", ["name", "loopback", "device", "ip"])
def test_frr_template_refuses_unsafe_tokens(field: str) -> None:
    n = {"ip": "10.0.0.1", "asn": 65001, "device": "spine-00", "port": "Ethernet0",
         "local_port": "Ethernet4"}
    ctx = {"name": "leaf-00", "spec_name": "s", "asn": 65000, "loopback": "172.16.0.1",
           "loopback_pool": "172.16.0.0/16", "nic_pool": "10.0.0.0/8", "tor": True,
           "neighbors": [n], "host_routes": "static",
           "static_routes": [{"ip": "10.0.0.2", "dev": "Vlan1000"}], "maximum_paths": 2}
    tmpl = template_env().get_template("frr.conf.j2")
    assert "hostname leaf-00" in tmpl.render(**ctx)
    if field in ("device", "ip"):
        ctx["neighbors"] = [{**n, field: "x\nrouter bgp 1"}]
    else:
        ctx[field] = "x\nrouter bgp 1"
    with pytest.raises(SpecError, match="unsafe value"):
        tmpl.render(**ctx)


def test_xml_template_escapes() -> None:
    cpus = [{"numa": 0, "switches": [{"busid": HOSTILE, "gpus": [
        {"index": 0, "busid": HOSTILE, "nvlinks": [{"busid": HOSTILE, "count": 1,
                                                    "tclass": HOSTILE}]}],
        "nics": [{"index": 0, "rdma": HOSTILE, "speed_mbps": 400000, "busid": HOSTILE}]}]}]
    text = template_env().get_template("nccl-topo.xml.j2").render(
        host=HOSTILE + "-", spec_name=HOSTILE, nics=1, gpus=1, cpus=cpus)
    root = ET.fromstring(text)
    assert root.find(".//net").get("name") == line(HOSTILE)


_QUOTED = {"nic-setup.sh.j2": {"sh", "dq", "num", "line", "words"},
           "frr.conf.j2": {"token", "num", "line"},
           "nccl-topo.xml.j2": {"xml", "xmlcomment", "num"}}


@pytest.mark.parametrize("name", sorted(_QUOTED))
def test_every_value_in_a_template_is_quoted(name: str) -> None:
    """Each ``{{ ... }}`` of the shell, FRR and XML templates ends in a quoting filter,
    so a new value cannot be added unquoted."""
    env = template_env()
    src = env.loader.get_source(env, name)[0]  # type: ignore[union-attr]
    exprs = re.findall(r"\{\{(.*?)\}\}", src)
    assert exprs
    bare = [e for e in exprs if e.strip().rsplit("|", 1)[-1].strip() not in _QUOTED[name]]
    assert bare == []


def test_exports_quote_the_fabric_name() -> None:
    """``aifabric export``: JSON keeps the name, GraphML parses, DOT's graph line is one
    quoted string (``gc`` reads it when graphviz is installed)."""
    from aifabric.export import write_dot, write_graphml, write_json

    f = build_fabric(_hostile_spec("clos"))
    outs = {}
    for name, write in (("json", write_json), ("graphml", write_graphml), ("dot", write_dot)):
        buf = io.StringIO()
        write(f, buf)
        outs[name] = buf.getvalue()
    assert json.loads(outs["json"])["graph"]["name"] == HOSTILE
    ET.fromstring(outs["graphml"])
    first = outs["dot"].splitlines()[0]
    assert first.startswith('graph "') and first.endswith('" {')
    assert re.fullmatch(r'graph "(?:[^"\\]|\\.)*" \{', first), first
    if shutil.which("gc"):
        proc = subprocess.run(["gc", "-n"], input=outs["dot"], capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr
