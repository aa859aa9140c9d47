"""The out-of-band management network (``management:``): addresses, switches, cables,
SONiC MGMT_* tables under yanglint, and every monitoring and Ansible target on it."""

from __future__ import annotations

import csv
import io
import ipaddress
import json
import math
import subprocess

import numpy as np
import pytest
import yaml

from aifabric import build_fabric
from aifabric.configs import BuildContext, build_files
from aifabric.errors import SpecError
from aifabric.planning import plan_fabric
from aifabric.spec import spec_from_dict
from aifabric.telemetry.monitoring import render_monitoring
from aifabric.topology.management import plan_management
from tests._require import skip_allowed
from tests.configs.conftest import SMALL, small_files
from tests.telemetry.conftest import promtool  # noqa: F401 (a fixture)

POOL = "172.30.0.0/22"


def _raw(family: str = "hpn", **mg) -> dict:
    raw = json.loads(json.dumps(SMALL[family]))
    raw["management"] = {"pool": POOL, **mg}
    return raw


def _ctx(family: str = "hpn", **mg) -> BuildContext:
    return BuildContext.of(build_fabric(spec_from_dict(_raw(family, **mg))))


def _files(family: str = "hpn", **mg) -> dict[str, str]:
    return build_files(_ctx(family, **mg).fabric, extra=(render_monitoring,))


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_without_the_section_nothing_changes():
    """No ``management:``: no plan key, no mgmt-cabling.csv, no MGMT_* table, no
    management row in the BOM or the address plan (the goldens hold the bytes)."""
    files = small_files("hpn")
    assert "mgmt-cabling.csv" not in files
    assert "mgmt" not in files["bom.csv"]
    assert "Management network" not in files["LLD.md"]
    assert ",mgmt," not in files["addressing.csv"]
    assert not any("MGMT_" in t for r, t in files.items() if r.endswith("config_db.json"))
    f = build_fabric(spec_from_dict(SMALL["hpn"]))
    assert plan_management(f) is None
    assert "management" not in plan_fabric(f, bisection=False)


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("bmc", [True, False])
def test_every_device_has_one_unique_address_in_the_pool(family, bmc):
    ctx = _ctx(family, bmc=bmc)
    f, mg = ctx.fabric, ctx.mgmt
    pool = ipaddress.IPv4Network(POOL)
    sw = np.flatnonzero(f.is_switch)
    hosts = np.asarray(f.host_node)
    # exactly one management address per switch and host, one BMC per host (with bmc)
    assert np.all(mg.node_address[sw] > 0) and np.all(mg.node_address[hosts] > 0)
    other = np.setdiff1d(np.arange(f.n_nodes), np.concatenate([sw, hosts]))
    assert np.all(mg.node_address[other] == 0)
    assert np.all(mg.bmc_address[hosts] > 0) if bmc else np.all(mg.bmc_address == 0)
    for kind, want in ((0, len(sw)), (1, len(hosts)), (2, len(hosts) if bmc else 0)):
        assert int((mg.kind == kind).sum()) == want
    # unique, inside the pool, never its network, broadcast or gateway address
    addr = mg.address.astype(np.int64)
    assert len(np.unique(addr)) == len(addr)
    lo, hi = int(pool.network_address), int(pool.broadcast_address)
    assert np.all((addr > lo + 1) & (addr < hi))
    assert mg.gateway == lo + 1
    # and disjoint from every address of the fabric
    assert not np.isin(addr, ctx.plan.interface_addresses().astype(np.int64)).any()


@pytest.mark.parametrize("ports_per_switch", [2, 7, 48, 1000])
@pytest.mark.parametrize("bmc", [True, False])
@pytest.mark.parametrize("medium", ["optic", "dac"])
def test_bom_counts_are_the_closed_form(ports_per_switch, bmc, medium):
    """Access switches = ceil(managed ports / ports per switch); an aggregation layer of
    ``uplinks`` switches when there is more than one; a copper cable per managed port,
    an uplink cable per access switch and uplink (two transceivers each on optics)."""
    uplinks = 3
    files = _files(ports_per_switch=ports_per_switch, bmc=bmc, uplinks=uplinks,
                   uplink_medium=medium, agg_ports=1024)
    f = build_fabric(spec_from_dict(SMALL["hpn"]))
    managed = int(f.is_switch.sum()) + (2 if bmc else 1) * len(f.host_node)
    access = math.ceil(managed / ports_per_switch)
    agg = uplinks if access > 1 else 0
    up = access * uplinks if agg else 0
    bom = {(r["item"], r["role"]): int(r["count"]) for r in _csv(files["bom.csv"])}
    assert bom[("switch", "mgmt_access")] == access
    assert bom.get(("switch", "mgmt_agg"), 0) == agg
    assert bom[("copper_cable", "mgmt_access")] == managed
    if medium == "optic":
        assert bom.get(("transceiver", "mgmt_uplink"), 0) == 2 * up
        assert bom.get(("fibre", "mgmt_uplink"), 0) == up
    else:
        assert bom.get(("dac_cable", "mgmt_uplink"), 0) == up
    # the cabling: a row per cable, no access port used twice or beyond the switch's ports
    rows = _csv(files["mgmt-cabling.csv"])
    acc = [r for r in rows if r["tier"] == "mgmt_access"]
    assert len(acc) == managed and len(rows) == managed + up
    ends = [(r["b_device"], r["b_port"]) for r in acc]
    assert len(set(ends)) == len(ends)
    assert max(int(p[1:]) for _, p in ends) <= ports_per_switch
    assert len({d for d, _ in ends}) == access
    uprows = [r for r in rows if r["tier"] == "mgmt_uplink"]
    assert len({(r["a_device"], r["a_port"]) for r in uprows}) == up
    assert len({(r["b_device"], r["b_port"]) for r in uprows}) == up
    # the plan says the same
    ctx = _ctx(ports_per_switch=ports_per_switch, bmc=bmc, uplinks=uplinks,
               uplink_medium=medium, agg_ports=1024)
    p = plan_fabric(ctx.fabric, bisection=False)["management"]
    assert (p["managed_ports"], p["access_switches"], p["agg_switches"],
            p["copper_cables"], p["uplink_cables"]) == (managed, access, agg, managed, up)


def test_addressing_csv_lists_every_management_address_with_its_access_port():
    ctx = _ctx()
    files = _files()
    rows = [r for r in _csv(files["addressing.csv"])
            if r["kind"] in ("mgmt", "bmc", "mgmt_switch")]
    mg = ctx.mgmt
    assert sorted(r["address"] for r in rows) == sorted(
        str(ipaddress.IPv4Address(int(a))) for a in mg.address)
    assert {r["prefixlen"] for r in rows} == {"22"}
    cab = {(r["a_device"], r["a_port"]): (r["b_device"], r["b_port"])
           for r in _csv(files["mgmt-cabling.csv"]) if r["tier"] == "mgmt_access"}
    for r in rows:
        if r["kind"] != "mgmt_switch":
            assert cab[(r["device"], r["interface"])] == (r["peer_device"], r["peer_interface"])


def test_switch_config_db_has_its_management_port_and_address():
    ctx = _ctx()
    files = _files()
    mg = ctx.mgmt
    names = ctx.fabric.nodes.name
    for n in ctx.plan.switches.tolist():
        db = json.loads(files[f"switches/{names[n]}/config_db.json"])
        addr = str(ipaddress.IPv4Address(int(mg.node_address[n])))
        assert db["MGMT_INTERFACE"] == {f"eth0|{addr}/22": {"gwaddr": "172.30.0.1"}}
        assert db["MGMT_PORT"]["eth0"]["speed"] == "1000"
        assert db["MGMT_VRF_CONFIG"] == {"vrf_global": {"mgmtVrfEnabled": "true"}}
    db = json.loads(_files(vrf=False)[f"switches/{names[ctx.plan.switches[0]]}/config_db.json"])
    assert "MGMT_VRF_CONFIG" not in db and "MGMT_INTERFACE" in db


def _missing_mgmt_modules() -> list[str]:
    from aifabric.configs.yang import default_models_dir

    models = default_models_dir()
    return [m for m in ("sonic-mgmt_port.yang", "sonic-mgmt_interface.yang",
                        "sonic-mgmt_vrf.yang") if not (models / m).is_file()]


@pytest.mark.parametrize("family", ["hpn", "single_tor"])
def test_management_tables_are_valid_sonic_yang(family):
    """yanglint against SONiC's models: every switch valid; a wrong speed, a gateway of
    the wrong family and an unknown port name are each rejected (the tables are checked,
    not skipped)."""
    from aifabric.configs.yang import default_models_dir, validate_config_dbs
    from tests.conftest import need_sonic_yang

    need_sonic_yang()
    files = _files(family)
    docs = [(rel, json.loads(t)) for rel, t in sorted(files.items())
            if rel.endswith("config_db.json")]
    assert docs and all("MGMT_INTERFACE" in d for _, d in docs)
    # every other table of the same documents is valid whatever the models folder holds
    rest = [(rel, {k: v for k, v in d.items() if not k.startswith("MGMT_")})
            for rel, d in docs]
    assert validate_config_dbs(rest) == []
    missing = _missing_mgmt_modules()
    if missing:
        skip_allowed("the SONiC models have no management modules",
                     f"{', '.join(missing)} not in {default_models_dir()}")
    assert validate_config_dbs(docs) == []
    good = docs[0][1]
    bad_speed = json.loads(json.dumps(good))
    bad_speed["MGMT_PORT"]["eth0"]["speed"] = "25000"
    bad_gw = json.loads(json.dumps(good))
    key = next(iter(bad_gw["MGMT_INTERFACE"]))
    bad_gw["MGMT_INTERFACE"][key]["gwaddr"] = "fe80::1"
    bad_port = json.loads(json.dumps(good))
    bad_port["MGMT_PORT"] = {"mgmt0": bad_port["MGMT_PORT"]["eth0"]}
    failures = validate_config_dbs([("speed", bad_speed), ("gw", bad_gw),
                                    ("port", bad_port)])
    assert [f[0] for f in failures] == ["speed", "gw", "port"]


def test_prometheus_targets_and_ansible_hosts_are_the_management_addresses():
    ctx = _ctx()
    files = _files()
    mg, f = ctx.mgmt, ctx.fabric
    names = f.nodes.name
    want_sw = {f"{ipaddress.IPv4Address(int(mg.node_address[n]))}:9101": str(names[n])
               for n in ctx.plan.switches.tolist()}
    want_host = {f"{ipaddress.IPv4Address(int(mg.node_address[n]))}:9100": str(names[n])
                 for n in f.host_node.tolist()}
    cfg = yaml.safe_load(files["monitoring/prometheus.yml"])
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    for job, want in (("sonic", want_sw), ("node", want_host)):
        got = {sc["targets"][0]: sc["labels"]["device"] for sc in jobs[job]["static_configs"]}
        assert got == want
    inv = yaml.safe_load(files["ansible/inventory.yml"])["all"]["children"]
    for group, want in (("switches", want_sw), ("servers", want_host)):
        hosts = inv[group]["hosts"]
        assert {k: v["ansible_host"] for k, v in hosts.items()} == {
            dev: target.split(":")[0] for target, dev in want.items()}
        assert all(v["aifabric_mgmt"] == v["ansible_host"] for v in hosts.values())
    # every BMC through the IPMI exporter (remote mode): target = the BMC's address
    want_bmc = {str(ipaddress.IPv4Address(int(mg.bmc_address[n]))): str(names[n])
                for n in f.host_node.tolist()}
    assert {sc["targets"][0]: sc["labels"]["device"]
            for sc in jobs["bmc"]["static_configs"]} == want_bmc
    assert jobs["bmc"]["relabel_configs"][-1]["replacement"] == "127.0.0.1:9290"
    assert "bmc" not in {j["job_name"] for j in yaml.safe_load(
        _files(bmc=False)["monitoring/prometheus.yml"])["scrape_configs"]}
    bmc = {k: v["aifabric_bmc"] for k, v in inv["servers"]["hosts"].items()}
    assert bmc == {str(names[n]): str(ipaddress.IPv4Address(int(mg.bmc_address[n])))
                   for n in f.host_node.tolist()}


def test_same_spec_same_bytes():
    a, b = _files(), _files()
    assert "## Management network (out of band)" in a["LLD.md"]
    for rel in ("LLD.md", "mgmt-cabling.csv", "bom.csv", "addressing.csv",
                "monitoring/prometheus.yml", "ansible/inventory.yml"):
        assert a[rel] == b[rel]


def test_lab_ports_are_the_builds_scrape_ports():
    from aifabric.lab import mgmt
    from aifabric.telemetry import monitoring

    assert mgmt.SONIC_EXPORTER_PORT == monitoring.SONIC_EXPORTER_PORT
    assert mgmt.NODE_EXPORTER_PORT == monitoring.NODE_EXPORTER_PORT


@pytest.mark.parametrize(("mg", "field", "says"), [
    ({"pool": "172.30.0.0/27"}, "management.pool", "allowed: a /25 or larger"),
    ({"pool": "10.1.0.0/16"}, "management.pool", "overlaps addressing.nic_pool"),
    ({"pool": "172.16.4.0/24"}, "management.pool", "overlaps deploy.pools.loopback"),
    # 62 managed ports / 2 = 31 access switches: 8 blocks of 4 > a 4-port core switch
    ({"pool": POOL, "ports_per_switch": 2, "agg_ports": 4}, "management.agg_ports",
     "allowed: agg_ports >= 6"),
    ({"pool": POOL, "ports_per_switch": 1}, "management.ports_per_switch", "allowed: 2..1024"),
    ({"pool": POOL, "host_interface": "eno1; rm"}, "management.host_interface", ""),
    ({"pool": POOL, "bmc_exporter": "x:9290\nevil: 1"}, "management.bmc_exporter", ""),
])
@pytest.mark.parametrize("command", ["build", "plan"])
def test_bad_management_input_is_one_line_exit_2_nothing_written(cli, tmp_path, mg, field,
                                                                 says, command):
    raw = json.loads(json.dumps(SMALL["hpn"]))
    raw["management"] = mg
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    args = ("build", spec, "--out", out) if command == "build" else ("plan", spec)
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    msg = r.err.strip()
    assert len(msg.splitlines()) == 1 and field in msg and says in msg, msg
    assert "Traceback" not in r.err
    assert not out.exists()


def test_a_models_folder_without_the_management_modules_is_named(tmp_path):
    """Models from before the MGMT_* modules: one line naming the missing files."""
    from aifabric.configs.yang import default_models_dir, validate_config_dbs
    from tests.conftest import need_sonic_yang

    need_sonic_yang()
    for p in default_models_dir().glob("*.yang"):
        if not p.name.startswith("sonic-mgmt_"):
            (tmp_path / p.name).symlink_to(p)
    files = _files()
    doc = json.loads(next(t for r, t in files.items() if r.endswith("config_db.json")))
    with pytest.raises(FileNotFoundError) as err:
        validate_config_dbs([("sw", doc)], tmp_path)
    msg = str(err.value)
    assert "sonic-mgmt_interface.yang" in msg and "sonic-mgmt_port.yang" in msg
    assert "sonic-mgmt_vrf.yang" in msg and "\n" not in msg
    # a document without management tables validates as before with those models
    plain = {k: v for k, v in doc.items() if not k.startswith("MGMT_")}
    assert validate_config_dbs([("sw", plain)], tmp_path) == []


def test_an_infiniband_build_plans_its_management_network_too(tmp_path, cli):
    """IB switches have a management port as well: the same closed form, the same files
    (no SONiC config: an IB build writes none)."""
    from tests.configs.test_infiniband_build import DOC

    doc = {**json.loads(json.dumps(DOC)), "management": {"pool": POOL, "ports_per_switch": 10}}
    spec = tmp_path / "ib.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 0, r.err
    assert "mgmt-cabling.csv" in r.out
    f = build_fabric(spec_from_dict(doc))
    managed = int(f.is_switch.sum()) + 2 * len(f.host_node)
    bom = {(x["item"], x["role"]): int(x["count"])
           for x in _csv((out / "bom.csv").read_text())}
    assert bom[("switch", "mgmt_access")] == math.ceil(managed / 10)
    assert bom[("copper_cable", "mgmt_access")] == managed
    rows = _csv((out / "mgmt-cabling.csv").read_text())
    assert sum(x["tier"] == "mgmt_access" for x in rows) == managed


def test_promtool_accepts_the_out_of_band_config(promtool, tmp_path):  # noqa: F811
    files = _files(bmc_exporter="ipmi.example.net:9290")
    for name in ("prometheus.yml", "alerts.yml"):
        (tmp_path / name).write_text(files[f"monitoring/{name}"])
    p = subprocess.run([promtool, "check", "config", "prometheus.yml"], cwd=tmp_path,
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert '"ipmi.example.net:9290"' in files["monitoring/prometheus.yml"]


def test_a_management_pool_over_the_frontends_is_one_line(cli, tmp_path):
    """The frontend (storage) network is a fabric of its own with its own pools: the
    management pool overlaps none of them either."""
    raw = json.loads(json.dumps(SMALL["hpn"]))
    raw["frontend"] = {"nics_per_host": 1, "ports_per_nic": 2, "port_gbps": 200,
                       "switch": "tomahawk5", "oversubscription": 3,
                       "storage": {"nodes": 2, "nic_gbps": 400, "write_gbytes_per_s": 10,
                                   "read_gbytes_per_s": 20},
                       "pools": {"hosts": "172.20.0.0/16"}}
    raw["management"] = {"pool": "172.20.128.0/20"}
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(raw))
    r = cli("build", spec, "--out", tmp_path / "out")
    assert r.code == 2, (r.out, r.err)
    msg = r.err.strip()
    assert len(msg.splitlines()) == 1 and "management.pool" in msg
    assert "overlaps frontend.pools.hosts 172.20.0.0/16" in msg, msg
    assert not (tmp_path / "out").exists()
    raw["management"] = {"pool": "192.168.0.0/20"}  # disjoint: builds
    spec.write_text(yaml.safe_dump(raw))
    r = cli("build", spec, "--out", tmp_path / "ok")
    assert r.code == 0, r.err
    assert (tmp_path / "ok" / "mgmt-cabling.csv").is_file()
    assert (tmp_path / "ok" / "frontend" / "cabling.csv").is_file()


# --- the management core: more access switches than one aggregation switch holds ------

def _core_case(ports_per_switch: int, agg_ports: int, uplinks: int, bmc: bool = True):
    """The closed form of a small HPN site: access switches, blocks, aggregation and core
    switches (the fabric's 22 switches and 20 hosts)."""
    f = build_fabric(spec_from_dict(SMALL["hpn"]))
    managed = int(f.is_switch.sum()) + (2 if bmc else 1) * len(f.host_node)
    access = math.ceil(managed / ports_per_switch)
    blocks = math.ceil(access / agg_ports)
    return managed, access, blocks, blocks * uplinks, uplinks if blocks > 1 else 0


CORE_CASES = [  # (ports_per_switch, agg_ports, uplinks, bmc): 2 or 3 aggregation blocks
    (7, 4, 2, True), (5, 5, 3, True), (2, 16, 1, True), (2, 8, 2, False), (4, 8, 4, True)]


@pytest.mark.parametrize(("ports_per_switch", "agg_ports", "uplinks", "bmc"), CORE_CASES)
@pytest.mark.parametrize("medium", ["optic", "dac"])
def test_a_core_bom_and_cabling_are_the_closed_form(ports_per_switch, agg_ports, uplinks,
                                                    bmc, medium):
    """B = ceil(access / agg_ports) blocks of ``uplinks`` aggregation switches and a core
    of ``uplinks`` switches: an uplink cable per access switch and uplink plus one per
    aggregation switch (two transceivers each on optics); one address per switch."""
    managed, access, blocks, agg, core = _core_case(ports_per_switch, agg_ports, uplinks, bmc)
    assert 2 <= blocks <= 3 and core == uplinks  # a core case indeed
    mg = dict(ports_per_switch=ports_per_switch, agg_ports=agg_ports, uplinks=uplinks,
              uplink_medium=medium, bmc=bmc)
    files = _files(**mg)
    up = access * uplinks + agg
    bom = {(r["item"], r["role"]): (r["ports"], int(r["count"]))
           for r in _csv(files["bom.csv"])}
    assert bom[("switch", "mgmt_access")][1] == access
    assert bom[("switch", "mgmt_agg")] == (f"{agg_ports}x10G+1x10G", agg)
    assert bom[("switch", "mgmt_core")] == (f"{agg_ports}x10G", core)
    assert bom[("copper_cable", "mgmt_access")][1] == managed
    if medium == "optic":
        assert bom[("transceiver", "mgmt_uplink")][1] == 2 * up
        assert bom[("fibre", "mgmt_uplink")][1] == up
    else:
        assert bom[("dac_cable", "mgmt_uplink")][1] == up
    rows = _csv(files["mgmt-cabling.csv"])
    tiers = [r["tier"] for r in rows]
    assert (tiers.count("mgmt_access"), tiers.count("mgmt_uplink"),
            tiers.count("mgmt_core_uplink"), len(rows)) == (
                managed, access * uplinks, agg, managed + up)
    # the plan, the LLD and the addresses say the same
    ctx = _ctx(**mg)
    p = plan_fabric(ctx.fabric, bisection=False)["management"]
    assert (p["access_switches"], p["agg_switches"], p["agg_blocks"], p["core_switches"],
            p["uplink_cables"], p["addresses"]) == (
                access, agg, blocks, core, up, managed + access + agg + core)
    assert (p.get("uplink_transceivers"), medium) in ((2 * up, "optic"), (None, "dac"))
    assert f"| core switches ({blocks} aggregation blocks) | {core} |" in files["LLD.md"]
    addr = [r for r in _csv(files["addressing.csv"]) if r["kind"] == "mgmt_switch"]
    assert sorted(r["device"] for r in addr) == sorted(
        [f"mgmt-acc-{i:02d}" for i in range(access)] + [f"mgmt-agg-{i:02d}" for i in range(agg)]
        + [f"mgmt-core-{i:02d}" for i in range(core)])


def _port(name: str) -> int:
    assert name.startswith("p"), name
    return int(name[1:])


@pytest.mark.parametrize(("ports_per_switch", "agg_ports", "uplinks", "bmc"), CORE_CASES)
def test_every_access_switch_reaches_every_core_switch_through_its_block(
        ports_per_switch, agg_ports, uplinks, bmc):
    """Over the cabling rows: no switch port used twice, no port beyond the switch's
    (access: ports_per_switch + uplinks; aggregation: agg_ports + 1; core: agg_ports);
    access switch ``a``'s uplinks land only in block ``a // agg_ports`` (one on each of
    its ``uplinks`` switches) and every access switch reaches every core switch."""
    managed, access, blocks, agg, core = _core_case(ports_per_switch, agg_ports, uplinks, bmc)
    rows = _csv(_files(ports_per_switch=ports_per_switch, agg_ports=agg_ports,
                       uplinks=uplinks, bmc=bmc)["mgmt-cabling.csv"])
    ends = [(r["a_device"], r["a_port"]) for r in rows] + [
        (r["b_device"], r["b_port"]) for r in rows]
    assert len(set(ends)) == len(ends)  # no port, of any device, used twice
    limit = {"mgmt-acc": ports_per_switch + uplinks, "mgmt-agg": agg_ports + 1,
             "mgmt-core": agg_ports}
    used: dict[str, int] = {}
    for dev, port in ends:
        if dev.startswith("mgmt-"):
            kind = dev.rsplit("-", 1)[0]
            assert 1 <= _port(port) <= limit[kind], (dev, port)
            used[dev] = used.get(dev, 0) + 1
    assert all(used[f"mgmt-agg-{g:02d}"] <= agg_ports + 1 for g in range(agg))
    assert all(used[f"mgmt-core-{c:02d}"] == blocks for c in range(core))
    up = {r["a_device"]: set() for r in rows if r["tier"] == "mgmt_uplink"}
    for r in rows:
        if r["tier"] == "mgmt_uplink":
            up[r["a_device"]].add(r["b_device"])
    to_core: dict[str, set[str]] = {}
    for r in rows:
        if r["tier"] == "mgmt_core_uplink":
            assert r["a_port"] == f"p{agg_ports + 1}"
            to_core.setdefault(r["a_device"], set()).add(r["b_device"])
    assert sorted(to_core) == [f"mgmt-agg-{g:02d}" for g in range(agg)]
    assert all(len(c) == 1 for c in to_core.values())  # one core uplink each
    cores = {f"mgmt-core-{c:02d}" for c in range(core)}
    assert len(up) == access
    for a in range(access):
        aggs = up[f"mgmt-acc-{a:02d}"]
        assert len(aggs) == uplinks
        assert {int(g.rsplit("-", 1)[1]) // uplinks for g in aggs} == {a // agg_ports}
        assert set().union(*(to_core[g] for g in aggs)) == cores
    # and every managed port reaches an access switch that has uplinks
    acc_of = {r["b_device"] for r in rows if r["tier"] == "mgmt_access"}
    assert acc_of == set(up)
    assert sum(r["tier"] == "mgmt_access" for r in rows) == managed


def test_one_block_keeps_its_layout_and_a_second_block_adds_the_core():
    """agg_ports = access switches: one block, no core (as before); one port fewer: two
    blocks and a core, the first block's cabling unchanged."""
    _, access, _, _, _ = _core_case(7, 64, 2)
    one = _csv(_files(ports_per_switch=7, agg_ports=access)["mgmt-cabling.csv"])
    two = _csv(_files(ports_per_switch=7, agg_ports=access - 1)["mgmt-cabling.csv"])
    assert not any(r["tier"] == "mgmt_core_uplink" for r in one)
    key = ("a_device", "a_port", "b_device", "b_port")
    first = [tuple(r[k] for k in key) for r in two if r["tier"] != "mgmt_core_uplink"]
    assert first[:-2] == [tuple(r[k] for k in key) for r in one][:-2]
    # the last access switch moved to block 1: aggregation switches 2 and 3, port 1
    assert first[-2:] == [(f"mgmt-acc-{access - 1:02d}", "p8", "mgmt-agg-02", "p1"),
                          (f"mgmt-acc-{access - 1:02d}", "p9", "mgmt-agg-03", "p1")]
    assert sum(r["tier"] == "mgmt_core_uplink" for r in two) == 4


def test_core_addresses_are_unique_in_the_pool_and_counted_by_its_check():
    """Core switches' addresses follow the aggregation switches'; the pool check counts
    them (the gateway, every managed port and every management switch)."""
    managed, access, _, agg, core = _core_case(7, 4, 2)
    ctx = _ctx(ports_per_switch=7, agg_ports=4)
    mg = ctx.mgmt
    kinds = np.bincount(mg.kind, minlength=6)
    assert kinds[3:].tolist() == [access, agg, core]
    addr = mg.address.astype(np.int64)
    pool = ipaddress.IPv4Network(POOL)
    assert len(np.unique(addr)) == len(addr) == managed + access + agg + core
    assert np.all((addr > int(pool.network_address) + 1) & (addr < int(pool.broadcast_address)))
    core_rows = np.flatnonzero(mg.kind == 5)
    assert mg.device[core_rows].tolist() == ["mgmt-core-00", "mgmt-core-01"]
    assert core_rows.min() > np.flatnonzero(mg.kind == 4).max()  # after the aggregation
    need = 1 + managed + access + agg + core
    raw = _raw(ports_per_switch=7, agg_ports=4)
    raw["management"]["pool"] = "172.30.0.0/26"
    with pytest.raises(SpecError) as err:
        plan_management(build_fabric(spec_from_dict(raw)))
    assert f"needs {need} (the gateway" in str(err.value)


def test_more_blocks_than_a_core_switch_has_ports_is_refused_at_the_bound():
    """31 access switches (62 managed ports / 2): agg_ports 6 gives 6 blocks on a 6-port
    core; agg_ports 5 would need 7 blocks: refused naming management.agg_ports."""
    _, access, _, _, _ = _core_case(2, 6, 2)
    assert access == 31
    ok = plan_management(build_fabric(spec_from_dict(_raw(ports_per_switch=2, agg_ports=6))))
    assert (ok.agg_switches, ok.core_switches) == (12, 2)
    with pytest.raises(SpecError) as err:
        plan_management(build_fabric(spec_from_dict(_raw(ports_per_switch=2, agg_ports=5))))
    msg = str(err.value)
    assert "management.agg_ports" in msg and "allowed: agg_ports >= 6" in msg, msg


def test_the_hpn_pod_example_plans_a_management_core(cli, tmp_path):
    """The flagship pod with ``management: {}``: 368 switches and 2,040 hosts (OS NIC and
    BMC) = 4,448 managed ports on 93 48-port access switches, two blocks of 64 (4
    aggregation switches) and a core of 2; 93 x 2 + 4 = 190 uplinks, 380 optics."""
    from pathlib import Path

    raw = yaml.safe_load((Path(__file__).parents[2] / "examples" / "hpn-pod.yaml").read_text())
    raw["management"] = {}
    spec = tmp_path / "pod.yaml"
    spec.write_text(yaml.safe_dump(raw))
    f = build_fabric(spec_from_dict(raw))
    managed = int(f.is_switch.sum()) + 2 * len(f.host_node)
    access = math.ceil(managed / 48)
    blocks = math.ceil(access / 64)
    assert (managed, access, blocks) == (4448, 93, 2)
    r = cli("plan", spec, "--json")
    assert r.code == 0, r.err
    p = json.loads(r.out)["management"]
    assert (p["access_switches"], p["agg_switches"], p["core_switches"], p["uplink_cables"],
            p["uplink_transceivers"], p["addresses"]) == (
                access, 2 * blocks, 2, access * 2 + 2 * blocks, 2 * (access * 2 + 2 * blocks),
                managed + access + 2 * blocks + 2)
    r = cli("plan", spec)
    assert r.code == 0, r.err
    assert "core switches (2 aggregation blocks)" in r.out
