"""The frontend (storage) network's build: its switch configs pass the backend's checks
(SONiC YANG, FRR's vtysh and bgpd), its addresses and ASNs are its own, its QoS is lossy,
its cabling matches the plan, the backend's files do not change, and bad input is one
line."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache

import pytest

from aifabric.configs import build_files
from aifabric.configs.frrcheck import BGPD, validate_frr_confs
from aifabric.configs.yang import validate_config_dbs
from aifabric.spec import spec_from_dict
from aifabric.topology import build_fabric
from aifabric.topology.frontend import plan_frontend
from tests.configs.conftest import SMALL, need_tool
from tests.conftest import need_sonic_yang

#: a rail backend of 16 hosts; a frontend of 2 x 100G per host on 32 x 400G switches at
#: 2:1 (fractional uplinks: 10.67 ports' worth), 5 storage nodes of 200G
FRONT = {"switch": "tomahawk3", "port_gbps": 100, "oversubscription": 2,
         "storage": {"nodes": 5, "nic_gbps": 200}}
#: HPN (dual-ToR, bonded backend NICs, backup hosts) with 1 x 2 x 200G per host on
#: 128 x 400G switches at 3:1 (20 hosts per leaf: several host leaves), optics between
HPN_FRONT = {"switch": "tomahawk5", "port_gbps": 200, "oversubscription": 3,
             "storage": {"nodes": 3, "nic_gbps": 400}}


def _spec(base: str, front: dict | None, **more):
    d = {**SMALL[base], **more}
    if front is not None:
        d["frontend"] = front
    return spec_from_dict(d)


@cache
def _files(base: str, with_frontend: bool = True) -> dict[str, str]:
    front = {"rail": FRONT, "hpn": HPN_FRONT}[base]
    return build_files(build_fabric(_spec(base, front if with_frontend else None)))


def _fe(base: str, suffix: str) -> dict[str, str]:
    return {rel.split("/")[2]: t for rel, t in _files(base).items()
            if rel.startswith("frontend/switches/") and rel.endswith(suffix)}


def _dbs(base: str) -> dict[str, dict]:
    return {n: json.loads(t) for n, t in _fe(base, "config_db.json").items()}


def test_the_backend_files_do_not_change():
    """A spec with a frontend builds every backend file byte for byte as the same spec
    without one (spec.yaml and the inventory's plan digest name the spec itself)."""
    for base in ("rail", "hpn"):
        a, b = _files(base), _files(base, False)
        assert set(a) - set(b) == {k for k in a if k.startswith("frontend/")}
        assert set(b) <= set(a)
        assert [k for k in b if a[k] != b[k]] == ["spec.yaml", "ansible/inventory.yml"]


@pytest.mark.parametrize("base", ["rail", "hpn"])
def test_every_frontend_config_db_validates_against_sonic_yang(base):
    """libyang (yanglint) accepts every frontend switch's config_db.json."""
    need_sonic_yang()
    need_tool("yanglint")
    assert validate_config_dbs(sorted(_dbs(base).items())) == []


@pytest.mark.parametrize("base", ["rail", "hpn"])
def test_every_frontend_frr_conf_passes_vtysh_and_bgpd(base):
    """vtysh --dryrun rejects no line of any frontend frr.conf; bgpd -C executes a host
    leaf's, a storage leaf's and a spine's and names no rejected line."""
    need_tool("vtysh")
    need_tool(BGPD)
    confs = _fe(base, "frr.conf")
    assert validate_frr_confs(sorted(confs.items())) == []
    picks = [next(n for n in sorted(confs) if n.startswith(p))
             for p in ("fe-leaf-", "fe-sleaf-", "fe-spine-")]
    assert validate_frr_confs([(n, confs[n]) for n in picks], bgpd=True) == []


@pytest.mark.parametrize("base", ["rail", "hpn"])
def test_links_bgp_and_addresses_are_the_frontends_own(base):
    """Both ends of every switch link name each other; every BGP neighbour is a switch
    owning that /31 end with that ASN and lists us back; every address is unique, inside
    a frontend pool, outside every backend pool; ASNs come from frontend.asn."""
    spec = _spec(base, {"rail": FRONT, "hpn": HPN_FRONT}[base])
    fe = spec.frontend
    dbs = _dbs(base)
    owner, asn = {}, {}
    for name, db in dbs.items():
        asn[name] = int(db["DEVICE_METADATA"]["localhost"]["bgp_asn"])
        assert fe.asn.first <= asn[name] <= fe.asn.last
        for port, nb in db["DEVICE_NEIGHBOR"].items():
            if nb["name"] in dbs:
                assert dbs[nb["name"]]["DEVICE_NEIGHBOR"][nb["port"]] == {"name": name,
                                                                          "port": port}
        for table in ("INTERFACE", "LOOPBACK_INTERFACE"):
            for key in db.get(table, {}):
                if "|" in key:
                    addr = key.split("|")[1].split("/")[0]
                    assert addr not in owner
                    owner[addr] = name
    for name, db in dbs.items():
        for ip, nb in db.get("BGP_NEIGHBOR", {}).items():
            assert owner[ip] == nb["name"] and int(nb["asn"]) == asn[nb["name"]]
            assert dbs[nb["name"]]["BGP_NEIGHBOR"][nb["local_addr"]]["name"] == name
    # leaves: one ASN each; the spines share one
    spines = {asn[n] for n in dbs if n.startswith("fe-spine-")}
    leaves = [asn[n] for n in dbs if not n.startswith("fe-spine-")]
    assert len(spines) == 1 and len(set(leaves)) == len(leaves) and not spines & set(leaves)
    backend = [spec.addressing.nic_pool, spec.deploy.pools.loopback, spec.deploy.pools.p2p]
    rows = _files(base)["frontend/addressing.csv"].splitlines()[1:]
    addrs = [r.split(",")[2] for r in rows if r.split(",")[4] != "anycast_gateway"]
    assert len(addrs) == len(set(addrs))
    pools = [fe.pools.hosts, fe.pools.loopback, fe.pools.p2p]
    for a in map(ipaddress.IPv4Address, addrs):
        assert any(a in p for p in pools) and not any(a in p for p in backend)


@pytest.mark.parametrize("base", ["rail", "hpn"])
def test_frontend_qos_is_lossy_with_ecn_on_the_data_class(base):
    """No PFC, no lossless buffers, no watchdog on any frontend port; unmarked traffic
    (DSCP 0) in the ECN-marked data class, CS6 strict; the backend keeps its own mode."""
    spec = _spec(base, FRONT)
    q = spec.frontend.qos
    assert (q.mode, q.roce_dscp, q.roce_tc, q.cnp_dscp, q.cnp_tc) == ("lossy", 0, 3, 48, 6)
    for db in _dbs(base).values():
        assert "PFC_WD" not in db and "MAP_PFC_PRIORITY_TO_QUEUE" not in db
        assert set(db["BUFFER_POOL"]) == {"ingress_lossy_pool", "egress_lossy_pool"}
        assert db["DEVICE_METADATA"]["localhost"]["default_pfcwd_status"] == "disable"
        for p, m in db["PORT_QOS_MAP"].items():
            assert "pfc_enable" not in m
            assert db["QUEUE"][f"{p}|3"]["wred_profile"] == "AIFABRIC_ECN"
        dscp = db["DSCP_TO_TC_MAP"]["AIFABRIC"]
        assert dscp["0"] == "3" and dscp["48"] == "6" and dscp["26"] == "0"
        assert db["SCHEDULER"]["scheduler.cnp"] == {"type": "STRICT"}
        assert db["SCHEDULER"]["scheduler.roce"]["weight"] == "90"
    backend = json.loads(next(t for r, t in _files(base).items()
                              if r.startswith("switches/") and r.endswith("config_db.json")))
    assert any("pfc_enable" in m for m in backend["PORT_QOS_MAP"].values()) == \
        (spec.deploy.qos.mode == "lossless")


@pytest.mark.parametrize("base", ["rail", "hpn"])
def test_cabling_matches_the_plan(base):
    """frontend/cabling.csv: every frontend port of every active host and storage node
    once, on the leaf the plan puts it on; each leaf's uplinks at least the plan's
    bandwidth in whole ports (within the switch), spread over the spines to within one
    link; no spine port used twice; the BOM counts the same switches and links."""
    spec = _spec(base, {"rail": FRONT, "hpn": HPN_FRONT}[base])
    f = build_fabric(spec)
    hosts = int((~f.nodes.backup[f.host_node]).sum())
    fp = plan_frontend(spec, hosts)
    fe = spec.frontend
    rows = [r.split(",") for r in _files(base)["frontend/cabling.csv"].splitlines()[1:]]
    access = [r for r in rows if r[1] == "access"]
    up = [r for r in rows if r[1] == "leaf_spine"]
    per_host = fe.nics_per_host * fe.ports_per_nic
    assert len(access) == hosts * per_host + fe.storage.nodes
    host_names = [str(n) for n in f.nodes.name[f.host_node[~f.nodes.backup[f.host_node]]]]
    for i, name in enumerate(host_names):
        mine = [r for r in access if r[2] == name]
        assert len(mine) == per_host
        assert {r[4] for r in mine} == {f"fe-leaf-{i // fp.hosts_per_leaf:02d}"}
        assert {r[6] for r in mine} == {str(fe.port_gbps)}
    for s in range(fe.storage.nodes):
        (r,) = [r for r in access if r[2] == f"storage-{s:02d}"]
        assert r[4] == f"fe-sleaf-{s // fp.nodes_per_leaf:02d}"
        assert r[6] == f"{fe.storage.nic_gbps:g}"
    leaves = sorted({r[2] for r in up})
    assert len(leaves) == fp.host_leaves + fp.storage_leaves
    model = spec.switch_model(fe.switch)
    spines = sorted({r[4] for r in up})
    assert len(spines) >= fp.spines
    for leaf in leaves:
        mine = [r for r in up if r[2] == leaf]
        assert len(mine) * model.port_gbps >= fp.leaf_up_gbps - 1e-6
        counts = [sum(r[4] == s for r in mine) for s in spines]
        assert max(counts) - min(counts) <= 1
    ends = [(r[4], r[5]) for r in up] + [(r[2], r[3]) for r in up] + \
        [(r[4], r[5]) for r in access]
    assert len(ends) == len(set(ends))
    bom = [r.split(",") for r in _files(base)["frontend/bom.csv"].splitlines()[1:]]
    sw = {r[1]: int(r[5]) for r in bom if r[0] == "switch"}
    assert sw == {"leaf": fp.host_leaves, "storage_leaf": fp.storage_leaves,
                  "spine": len(spines)}
    assert sum(int(r[5]) for r in bom if r[0] == "fibre") + sum(
        int(r[5]) for r in bom if r[0].endswith("_cable") and r[1] == "leaf_spine") > 0


@pytest.mark.parametrize("base", ["rail", "hpn"])
def test_hosts_get_their_frontend_addresses(base):
    """Each active host and storage node has frontend/hosts/<name>/nic-setup.sh that
    configures exactly its ports with the /32s of addressing.csv, new interface names
    (the backend's NICs are ens0..ens<N-1>), and the leaves route each /32 to their VLAN."""
    files = _files(base)
    spec = _spec(base, FRONT)
    n_backend = spec.hosts.nics_per_host
    addr = {}
    for r in files["frontend/addressing.csv"].splitlines()[1:]:
        c = r.split(",")
        if c[4] == "nic":
            addr[(c[0], c[1])] = c[2]
    scripts = {rel.split("/")[2]: t for rel, t in files.items()
               if rel.startswith("frontend/hosts/")}
    assert {d for d, _ in addr} == set(scripts)
    for name, text in scripts.items():
        ports = re.findall(r"^port (\S+) (\S+) (\d+)$", text, re.M)
        assert {(p, ip) for p, ip, _ in ports} == {(i, a) for (d, i), a in addr.items()
                                                    if d == name}
        if not name.startswith("storage-"):
            assert all(int(re.match(r"ens(\d+)f", p).group(1)) >= n_backend
                       for p, _, _ in ports)
    routed = set()
    for text in _fe(base, "frr.conf").values():
        routed |= set(re.findall(r"^ip route (\S+)/32 Vlan\d+$", text, re.M))
    assert routed == set(addr.values())


def test_the_host_script_applies_and_checks_clean_in_a_namespace(tmp_path):
    """In a network namespace with the host's frontend ports (veths): the script sets
    addresses, tables, rules and sysctls, and then --check finds no deviation."""
    from tests._require import need
    from tests.lab.live import NO_LAB

    need("a live lab (root, ip netns)", not NO_LAB, NO_LAB)
    _, text = next((rel.split("/")[2], t) for rel, t in sorted(_files("rail").items())
                      if rel.startswith("frontend/hosts/host-"))
    script = tmp_path / "nic-setup.sh"
    script.write_text(text)
    ports = re.findall(r"^port (\S+) (\S+) (\d+)$", text, re.M)
    ns = f"aifabric-fe-{os.getpid()}"
    ip = shutil.which("ip")
    subprocess.run([ip, "netns", "add", ns], check=True)
    try:
        for i, (p, _, _) in enumerate(ports):
            subprocess.run([ip, "-n", ns, "link", "add", p, "type", "veth", "peer", "name",
                            f"peer{i}"], check=True)
            subprocess.run([ip, "-n", ns, "link", "set", f"peer{i}", "up"], check=True)
        env = {**os.environ, "AIFABRIC_ROOT": str(tmp_path / "root")}
        run = [ip, "netns", "exec", ns, "bash", str(script)]
        r = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        r = subprocess.run([*run, "--check"], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0 and "all frontend NIC settings as planned" in r.stdout, \
            r.stdout + r.stderr
        for p, addr, table in ports:
            got = subprocess.run([ip, "-n", ns, "-4", "-o", "addr", "show", "dev", p],
                                 capture_output=True, text=True, check=True).stdout
            assert f"{addr}/32" in got
            rt = subprocess.run([ip, "-n", ns, "route", "show", "table", table],
                                capture_output=True, text=True, check=True).stdout
            assert rt.startswith("default via ") and f"dev {p}" in rt
    finally:
        subprocess.run([ip, "netns", "del", ns], check=False)


def _cli(tmp_path, spec: dict) -> subprocess.CompletedProcess:
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return subprocess.run([sys.executable, "-m", "aifabric", "build", str(path), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "300"})


@pytest.mark.parametrize("front, field", [
    ({"pools": {"hosts": "10.250.0.0/16"}}, "frontend.pools.hosts"),
    ({"pools": {"loopback": "100.64.1.0/24"}}, "frontend.pools.loopback"),
    ({"pools": {"p2p": "172.17.0.0/24"}}, "frontend.pools.p2p"),  # the frontend's own
    ({"asn": {"first": 4200000000, "last": 4200001000}}, "frontend.asn"),
    ({"pools": {"hosts": "172.20.0.0/28"}}, "frontend.pools.hosts"),  # too small
    ({"pools": {"p2p": "172.18.0.0/30"}}, "frontend.pools.p2p"),  # too small
    ({"storage": {"nodes": 2, "nic_gbps": 300}}, "frontend.storage.nic_gbps"),
    ({"port_gbps": 150}, "frontend.port_gbps"),
])
def test_bad_frontend_input_is_one_line_exit_2_nothing_written(tmp_path, front, field):
    """A frontend pool overlapping a backend pool (or another frontend pool) or too
    small, ASNs overlapping the backend's, a port speed the leaf cannot break out to:
    one line naming the field, exit 2, no folder."""
    spec = {**SMALL["rail"], "frontend": {**FRONT, **front}}
    r = _cli(tmp_path, spec)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f": {field}: " in lines[0], r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def test_uneven_uplinks_spread_over_the_plans_spines():
    """HPN pod frontend: 21 leaves x 32 uplinks over the plan's 6 spines (32 = 5 x 6 +
    2): every leaf sends 5 or 6 links to each spine, the spines' port use differs by at
    most one and fits their 128 ports, and no switch port is cabled twice."""
    import numpy as np

    from aifabric.topology.fabric import LinkKind, NodeKind
    from aifabric.topology.frontend_fabric import build_frontend
    from tests.conftest import EXAMPLES

    spec = spec_from_dict(__import__("yaml").safe_load(
        (EXAMPLES / "scaleup" / "hpn-pod-frontend.yaml").read_text()))
    f = build_fabric(spec)
    fe = build_frontend(spec, f)
    fp = plan_frontend(spec, int((~f.nodes.backup[f.host_node]).sum()))
    li = fe.links
    ls = np.flatnonzero(li.kind == LinkKind.LEAF_SPINE)
    spines = fe.ids(NodeKind.AGG)
    leaves = fe.ids(NodeKind.TOR)
    assert len(spines) == fp.spines == 6 and len(leaves) == 21
    per = np.zeros((len(leaves), len(spines)), dtype=int)
    np.add.at(per, (np.searchsorted(leaves, li.a[ls]), np.searchsorted(spines, li.b[ls])), 1)
    assert (per.sum(axis=1) == 32).all() and set(np.unique(per)) == {5, 6}
    use = per.sum(axis=0)
    assert use.max() - use.min() <= 1 and use.max() <= 128
    for end, port in ((li.a, li.a_port), (li.b, li.b_port)):
        sw = fe.is_switch[end]
        key = end[sw].astype(np.int64) * 65536 + port[sw]
        assert len(np.unique(key)) == int(sw.sum())


@pytest.mark.parametrize("family", ["clos", "fat_tree", "multiplane", "single_tor"])
def test_every_backend_family_takes_a_frontend(family):
    """The frontend builds beside every family's backend, its switch configs as valid as
    the backend's (yanglint, vtysh), and beside an InfiniBand backend too."""
    need_sonic_yang()
    need_tool("yanglint")
    need_tool("vtysh")
    from aifabric.configs import BuildContext
    from aifabric.configs.validate import validate_configs

    ctx = BuildContext.of(build_fabric(_spec(family, FRONT)))
    checked, yang, frr = validate_configs(ctx)
    assert checked == len(ctx.plan.switches) + len(ctx.frontend.plan.switches)
    assert yang == [] and frr == []


def test_an_infiniband_backend_gets_an_ethernet_frontend():
    import yaml

    from tests.conftest import EXAMPLES

    doc = yaml.safe_load((EXAMPLES / "infiniband-fat-tree.yaml").read_text())
    files = build_files(build_fabric(spec_from_dict({**doc, "frontend": FRONT})))
    fe = [k for k in files if k.startswith("frontend/switches/")]
    assert fe and all(k.endswith(("config_db.json", "frr.conf")) for k in fe)
    assert not any(k.startswith("switches/") for k in files)  # no Ethernet backend configs
