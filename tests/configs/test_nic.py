"""NIC setup scripts and NCCL files: consistent with the switches and the host's rails."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from tests.configs.conftest import FAMILIES, config_dbs, small_ctx, small_files


def _host_files(family: str, kind: str) -> dict[str, str]:
    return {rel.split("/")[1]: text for rel, text in small_files(family).items()
            if rel.startswith("hosts/") and rel.endswith(kind)}


@pytest.mark.parametrize("family", FAMILIES)
def test_nic_dscp_and_priority_match_the_switches(family):
    """The NIC maps RoCE DSCP -> the switch's lossless TC and CNP DSCP -> CNP TC, enables
    PFC exactly on the priorities the switches' PORT_QOS_MAP enables, sets the RoCE ToS
    DSCP<<2 and the host MTU, which fits the switch MTU."""
    dep = small_ctx(family).fabric.spec.deploy
    db = next(iter(config_dbs(family).values()))
    dscp = db["DSCP_TO_TC_MAP"]["AIFABRIC"]
    pfc = {v.get("pfc_enable") for v in db["PORT_QOS_MAP"].values()} - {None}
    for text in _host_files(family, "nic-setup.sh").values():
        (pairs,) = re.findall(r"dcb app replace dev \"\$i\" dscp-prio (.+)$", text, re.M)
        mapping = dict(p.split(":") for p in pairs.split())
        for d, prio in mapping.items():
            assert dscp[d] == prio
        (state,) = re.findall(r"dcb pfc set dev \"\$i\" prio-pfc (.+)$", text, re.M)
        on = {p.split(":")[0] for p in state.split() if p.endswith(":on")}
        assert on == pfc
        assert f"default_roce_tos\" {dep.qos.roce_dscp << 2}" in text
        mtu = int(re.search(r'write_file "\$SYS/class/net/\$i/mtu" (\d+)', text).group(1))
        assert mtu <= int(db["PORT"][sorted(db["PORT"])[0]]["mtu"])
        for k, v in dep.dcqcn.rp().items():
            assert f'"$e/roce_rp/{k}" {v}\n' in text


def test_nic_script_is_valid_bash_and_check_mode_changes_nothing(tmp_path):
    """bash -n accepts the script; --check (and apply) on a machine without these NICs
    says so, naming the ports, exits 3 and writes nothing (no unit file, no installed
    copy)."""
    bash = shutil.which("bash")
    assert bash
    for text in _host_files("hpn", "nic-setup.sh").values():
        script = tmp_path / "syntax.sh"
        script.write_text(text)
        assert subprocess.run([bash, "-n", str(script)], check=False).returncode == 0
    script.unlink()
    name, text = sorted(_host_files("clos", "nic-setup.sh").items())[0]
    script = tmp_path / "nic-setup.sh"
    script.write_text(text)
    assert subprocess.run([bash, "-n", str(script)], check=False).returncode == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["--check"], []):
        r = subprocess.run([bash, str(script), *args], capture_output=True, text=True,
                           check=False, timeout=60,
                           env={**os.environ, "AIFABRIC_SYSFS": str(tmp_path / "no-sys"),
                                "AIFABRIC_ROOT": str(tmp_path / "root")})
        assert r.returncode == 3, r.stdout + r.stderr
        assert f"NO CONNECTX on {name}" in r.stdout and "ens0f0" in r.stdout
        assert sorted(p.name for p in tmp_path.iterdir()) == before
    r = subprocess.run([bash, str(script), "--bogus"], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 2


def test_hpn_hosts_bond_both_ports_and_copy_arp():
    """HPN: each NIC's two ports form one 802.3ad bond carrying the NIC's /32, and each
    port mirrors its ARP to the other; the ports reach the a and b ToR of its rail."""
    ctx = small_ctx("hpn")
    for _name, text in _host_files("hpn", "nic-setup.sh").items():
        for r in range(ctx.fabric.spec.hosts.nics_per_host):
            assert f"bond bond{r} ens{r}f0 ens{r}f1\n" in text
            assert re.search(rf"ens{r}f0 -> tor-s\d+-r{r}-a:Ethernet\d+; ens{r}f1 -> "
                             rf"tor-s\d+-r{r}-b:Ethernet\d+", text)
        assert "mode 802.3ad" in text and "mirred egress mirror" in text


@pytest.mark.parametrize("family", FAMILIES)
def test_nccl_topology_matches_the_rails(family):
    """Each GPU sits under the PCIe switch of NIC g*N//G (the Fabric's PCIe links), the
    NIC names follow NCCL_IB_HCA's order, speeds are the NIC's scale-out speed; the
    environment carries TC, QPs per connection and the topology file."""
    ctx = small_ctx(family)
    f = ctx.fabric
    h = f.spec.hosts
    envs = _host_files(family, "nccl.env")
    for name, text in _host_files(family, "nccl-topo.xml").items():
        root = ET.fromstring(text)
        env = dict(line.split("=", 1) for line in envs[name].splitlines()
                   if not line.startswith("#"))
        hca = env["NCCL_IB_HCA"].lstrip("=").split(",")
        assert env["NCCL_IB_TC"] == str(f.spec.deploy.qos.roce_tos)
        assert env["NCCL_IB_QPS_PER_CONNECTION"] == str(f.spec.routing.qps_per_connection)
        assert env["NCCL_TOPO_FILE"] == "/etc/aifabric/nccl-topo.xml"
        seen = []
        for sw in root.iter("pci"):
            if sw.get("class") != "0x060400":
                continue
            gpus = [int(g.get("dev")) for g in sw.iter("gpu")]
            (net,) = list(sw.iter("net"))
            nic = int(net.get("dev"))
            assert gpus == [g for g in range(h.gpus_per_host)
                            if g * h.nics_per_host // h.gpus_per_host == nic]
            assert net.get("name") == hca[nic]
            assert int(net.get("speed")) == h.port_gbps * h.ports_per_nic * 1000
            seen.append(nic)
        assert seen == list(range(h.nics_per_host))
