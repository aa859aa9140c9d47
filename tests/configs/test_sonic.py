"""SONiC config_db.json: valid against SONiC's own YANG models, consistent across the
fabric, QoS on every port with a neighbour."""

from __future__ import annotations

import copy
from functools import cache

import numpy as np
import pytest

from aifabric.configs.yang import to_yang, validate_config_dbs
from aifabric.topology import NodeKind
from aifabric.topology.buffers import pg_headroom
from tests.configs.conftest import FAMILIES, config_dbs, need_tool, small_ctx
from tests.conftest import need_sonic_yang


@cache
def _yang_failures() -> dict[str, list[tuple[str, str]]]:
    """Every config_db.json of every small fabric, validated in one yanglint run."""
    docs = [(f"{fam}/{name}", db) for fam in FAMILIES for name, db in config_dbs(fam).items()]
    out: dict[str, list[tuple[str, str]]] = {fam: [] for fam in FAMILIES}
    for label, msg in validate_config_dbs(docs):
        out[label.split("/")[0]].append((label, msg))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_every_config_db_validates_against_sonic_yang(family):
    """libyang (yanglint) accepts every switch's config_db.json of every family."""
    need_sonic_yang()
    need_tool("yanglint")
    assert _yang_failures()[family] == []


def _broken(db: dict, how: str) -> dict:
    db = copy.deepcopy(db)
    port = sorted(db["PORT"])[0]
    if how == "speed":
        db["PORT"][port]["speed"] = "2000000"
    elif how == "leafref":
        db["BUFFER_PG"]["Ethernet999|3"] = {"profile": "ingress_lossy_profile"}
    elif how == "field":
        db["WRED_PROFILE"]["AIFABRIC_ECN"]["green_min_thresh"] = "1"
    elif how == "enum":
        db["WRED_PROFILE"]["AIFABRIC_ECN"]["ecn"] = "ecn_everything"
    elif how == "mandatory":
        del db["PORT"][port]["lanes"]
    elif how == "pfcwd":
        db["PFC_WD"]["GLOBAL"]["action"] = "drop"
    return db


BREAKS = {"speed": "out of the allowed range", "leafref": "Invalid leafref value",
          "field": "not found as a child", "enum": "Invalid enumeration value",
          "mandatory": 'Mandatory node "lanes"', "pfcwd": "Must condition"}


def test_deliberately_broken_configs_fail():
    """Each kind of breakage (range, dangling reference, unknown field, bad enum, missing
    mandatory leaf, violated must) is rejected and named; the intact one passes."""
    need_sonic_yang()
    need_tool("yanglint")
    good = config_dbs("hpn")["tor-s00-r0-a"]
    docs = [("good", good)] + [(how, _broken(good, how)) for how in BREAKS]
    failures = dict(validate_config_dbs(docs))
    assert set(failures) == set(BREAKS)
    for how, text in BREAKS.items():
        assert text in failures[how], (how, failures[how])


def test_yang_translation_follows_the_models():
    """Keys split over the list's key leaves, map tables nest, 32-bit ints are numbers,
    64-bit ints strings, booleans booleans; the unmodelled SWITCH table is left out."""
    db = config_dbs("hpn")["tor-s00-r0-a"]
    y = to_yang(db)
    pg = y["sonic-buffer-pg:sonic-buffer-pg"]["BUFFER_PG"]["BUFFER_PG_LIST"]
    assert {"port", "pg_num", "profile"} <= set(pg[0])
    port = y["sonic-port:sonic-port"]["PORT"]["PORT_LIST"][0]
    assert isinstance(port["speed"], int) and isinstance(port["mtu"], int)
    wred = y["sonic-wred-profile:sonic-wred-profile"]["WRED_PROFILE"]["WRED_PROFILE_LIST"][0]
    assert wred["wred_green_enable"] is True and isinstance(wred["green_min_threshold"], str)
    dscp = y["sonic-dscp-tc-map:sonic-dscp-tc-map"]["DSCP_TO_TC_MAP"]["DSCP_TO_TC_MAP_LIST"][0]
    assert len(dscp["DSCP_TO_TC_MAP"]) == 64
    assert not any(k.startswith("sonic-switch") for k in y) and "SWITCH" in db


@pytest.mark.parametrize("family", FAMILIES)
def test_both_ends_of_every_switch_link_agree(family):
    """DEVICE_NEIGHBOR on switch A port p names (B, q) exactly when B's names (A, p);
    every cabled switch port of the Fabric has that entry."""
    ctx = small_ctx(family)
    dbs = config_dbs(family)
    f = ctx.fabric
    for name, db in dbs.items():
        for port, nb in db["DEVICE_NEIGHBOR"].items():
            if nb["name"] in dbs:
                assert dbs[nb["name"]]["DEVICE_NEIGHBOR"][nb["port"]] == {"name": name,
                                                                          "port": port}
    sw_rows = f.is_switch[ctx.ends.node]
    assert sum(len(db["DEVICE_NEIGHBOR"]) for db in dbs.values()) == int(sw_rows.sum())


@pytest.mark.parametrize("family", FAMILIES)
def test_interface_addresses_are_unique_and_paired(family):
    """Every INTERFACE/LOOPBACK address appears once fabric-wide; a /31's two ends sit on
    the two switches that DEVICE_NEIGHBOR says are joined by that port."""
    dbs = config_dbs(family)
    seen: dict[str, tuple[str, str]] = {}
    for name, db in dbs.items():
        for table in ("INTERFACE", "LOOPBACK_INTERFACE", "VLAN_INTERFACE"):
            for key in db.get(table, {}):
                if "|" in key:
                    ifname, prefix = key.split("|")
                    addr = prefix.split("/")[0]
                    if table == "VLAN_INTERFACE":
                        continue  # the anycast gateway is shared by design
                    assert addr not in seen, (addr, seen.get(addr), name)
                    seen[addr] = (name, ifname)
    for db in dbs.values():
        for key in db.get("INTERFACE", {}):
            if "|" not in key:
                continue
            ifname, prefix = key.split("|")
            a = [int(x) for x in prefix.split("/")[0].split(".")]
            peer_ip = ".".join(map(str, [*a[:3], a[3] ^ 1]))
            nb = db["DEVICE_NEIGHBOR"][ifname]
            assert seen[peer_ip] == (nb["name"], nb["port"])


@pytest.mark.parametrize("family", FAMILIES)
def test_bgp_neighbors_mirror_each_other(family):
    """Each BGP_NEIGHBOR on X (peer IP, ASN) is a switch Y owning that IP with that
    bgp_asn, and Y has X's local address as a neighbour with X's ASN."""
    dbs = config_dbs(family)
    owner = {}
    for name, db in dbs.items():
        for key in db.get("INTERFACE", {}):
            if "|" in key:
                owner[key.split("|")[1].split("/")[0]] = name
    for name, db in dbs.items():
        my_asn = db["DEVICE_METADATA"]["localhost"]["bgp_asn"]
        for ip, nb in db.get("BGP_NEIGHBOR", {}).items():
            peer = owner[ip]
            assert nb["name"] == peer
            assert dbs[peer]["DEVICE_METADATA"]["localhost"]["bgp_asn"] == nb["asn"]
            back = dbs[peer]["BGP_NEIGHBOR"][nb["local_addr"]]
            assert back["asn"] == my_asn and back["name"] == name and back["local_addr"] == ip


@pytest.mark.parametrize("family", FAMILIES)
def test_qos_on_every_port_with_a_neighbour(family):
    """PORT, DEVICE_NEIGHBOR and PORT_QOS_MAP have the same ports; each has its queues,
    PG buffers and (lossless) PFC on the RoCE class and a watchdog, (lossy) none."""
    ctx = small_ctx(family)
    q = ctx.fabric.spec.deploy.qos
    lossless = q.mode == "lossless"
    for db in config_dbs(family).values():
        ports = set(db["PORT"])
        assert ports == set(db["DEVICE_NEIGHBOR"]) == set(db["PORT_QOS_MAP"])
        assert ports == set(db["CABLE_LENGTH"]["AIFABRIC"])
        for p in ports:
            m = db["PORT_QOS_MAP"][p]
            assert m["dscp_to_tc_map"] == "AIFABRIC"
            assert f"{p}|{q.roce_tc}" in db["QUEUE"]
            assert db["QUEUE"][f"{p}|{q.roce_tc}"]["wred_profile"] == "AIFABRIC_ECN"
            if lossless:
                assert m["pfc_enable"] == str(q.roce_tc)
                assert db["BUFFER_PG"][f"{p}|{q.roce_tc}"]["profile"].startswith("pg_lossless_")
                assert p in db["PFC_WD"]
            else:
                assert "pfc_enable" not in m and "PFC_WD" not in db
                assert not any(k.startswith("pg_lossless") for k in db["BUFFER_PROFILE"])
        dscp = db["DSCP_TO_TC_MAP"]["AIFABRIC"]
        assert dscp[str(q.roce_dscp)] == str(q.roce_tc)
        assert dscp[str(q.cnp_dscp)] == str(q.cnp_tc)


def test_ecmp_hash_comes_from_the_routing_policy():
    """SWITCH_HASH fields follow routing.hash_fields in order; the seed is routing.seed
    on every switch (same) or differs per switch (per_switch)."""
    from aifabric import build_fabric
    from aifabric.configs import build_files
    from aifabric.spec import spec_from_dict
    from tests.configs.conftest import SMALL

    spec = {**SMALL["clos"], "routing": {"hash_fields": ["dst_ip", "src_port"], "seed": 7,
                                         "seed_mode": "per_switch", "hash": "crc16_ccitt"}}
    files = build_files(build_fabric(spec_from_dict(spec)))
    import json
    dbs = [json.loads(t) for k, t in files.items() if k.endswith("config_db.json")]
    for db in dbs:
        assert db["SWITCH_HASH"]["GLOBAL"] == {"ecmp_hash": ["DST_IP", "L4_SRC_PORT"],
                                               "ecmp_hash_algorithm": "CRC_CCITT"}
    seeds = {db["SWITCH"]["switch"]["ecmp_hash_seed"] for db in dbs}
    assert len(seeds) == len(dbs)
    same = {json.loads(t)["SWITCH"]["switch"]["ecmp_hash_seed"]
            for k, t in build_files(build_fabric(spec_from_dict(SMALL["clos"]))).items()
            if k.endswith("config_db.json")}
    assert same == {"0"}


def test_headroom_grows_with_speed_and_cable_length():
    """XOFF = speed/8 x (2 x length x ns/m + pipeline + response) + 2 MTU, rounded up to
    256 B (SONiC's dynamic headroom calculation: cable round trip, mac/phy and pipeline
    delay, peer response, an MTU at each end)."""
    x, xon = pg_headroom(400, 100 * 5.0, 9100, 1000)
    assert x == int(np.ceil((400 / 8 * (2 * 100 * 5 + 1000) + 2 * 9100) / 256) * 256)
    assert xon == int(np.ceil(2 * 9100 / 256) * 256)
    assert pg_headroom(400, 200 * 5.0, 9100, 1000)[0] > x
    assert pg_headroom(200, 100 * 5.0, 9100, 1000)[0] < x
    assert pg_headroom(400, 100 * 5.0, 9100, 1000, 800)[0] == int(
        np.ceil((400 / 8 * (2 * 100 * 5 + 800 + 1000) + 2 * 9100) / 256) * 256)


def _examples() -> list[str]:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    specs = sorted(str(p) for p in root.glob("*.yaml"))
    scns = sorted(str(p) for p in (root / "scenarios").glob("*.yaml")
                  if "sim: packet" in p.read_text())
    return specs + scns


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.rsplit("/", 1)[-1])
def test_sonic_buffers_and_the_packet_simulators_are_one_computation(path):
    """On every example fabric (and every packet scenario's): the SONiC build's
    BUFFER_POOL (ingress lossless pool size + xoff = the switch model's buffer; xoff = the
    headroom pool) and each lossless BUFFER_PG's xoff are the packet simulator's buffer,
    headroom pool and per-port headroom, switch by switch (one switch of each tier and
    model)."""
    from aifabric import build_fabric, load_spec
    from aifabric.configs.addressing import plan_addresses
    from aifabric.configs.sonic import SwitchContext, render_config_db
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.packet.config import PacketConfig, effective_packet_config
    from aifabric.sim.packet.run import switch_buffers
    from aifabric.sim.scenario import SimScenario

    if "/scenarios/" in path:
        scn = load_scenario(path, SimScenario)
        spec, packet = scn.spec, scn.packet
    else:
        spec, packet = load_spec(path), PacketConfig()
    f = build_fabric(spec)
    ctx = SwitchContext(plan_addresses(f))
    if not ctx.lossless:
        pytest.skip("lossy deployment: no lossless buffers")
    cfg = effective_packet_config(packet, spec.deploy)
    sim = switch_buffers(f, cfg)
    if not cfg.pfc.enabled:  # the scenario runs the fabric lossy (UEC, trimming): the
        # simulated switches keep no headroom whatever the deployment reserves
        assert not np.any(sim.node_reserved_bytes)
        return
    nodes = f.nodes
    picks = {}
    for n in np.flatnonzero(f.is_switch).tolist():
        picks.setdefault((int(nodes.kind[n]), int(nodes.model[n])), n)
    for n in picks.values():
        db = render_config_db(ctx, n)
        pool = db["BUFFER_POOL"]["ingress_lossless_pool"]
        assert int(pool["xoff"]) == sim.node_reserved_bytes[n] > 0
        if cfg.buffer.size_bytes is None:
            assert int(pool["size"]) + int(pool["xoff"]) == sim.node_buffer_bytes[n]
        prof = db["BUFFER_PROFILE"]
        rows = range(int(ctx.ends.start[n]), int(ctx.ends.stop[n]))
        roce = spec.deploy.qos.roce_tc
        assert len(rows) == sum(1 for k in db["BUFFER_PG"] if k.endswith(f"|{roce}"))
        total = 0
        for r in rows:
            pg = db["BUFFER_PG"][f"{ctx.port_name[r]}|{roce}"]
            xoff = int(prof[pg["profile"]]["xoff"])
            assert xoff == sim.arc_headroom[ctx.arc_in[r]]
            total += xoff
        assert total == int(pool["xoff"])


def test_hpn_tor_pair_answers_lacp_as_one_system():
    """HPN: every host port of both ToRs of a pair is a PortChannel with the spec's
    system MAC, in the host VLAN with proxy ARP; the ToRs are not linked to each other."""
    ctx = small_ctx("hpn")
    dbs = config_dbs("hpn")
    mac = ctx.fabric.spec.deploy.hpn.lacp_system_mac.lower()
    for name, db in dbs.items():
        if not name.startswith("tor-"):
            continue
        assert {pc["system_mac"] for pc in db["PORTCHANNEL"].values()} == {mac}
        assert db["VLAN_INTERFACE"]["Vlan1000"]["proxy_arp"] == "enabled"
        assert not any(nb["name"].startswith("tor-") for nb in db["DEVICE_NEIGHBOR"].values())
    f = ctx.fabric
    assert len(f.ids(NodeKind.TOR)) == sum(n.startswith("tor-") for n in dbs)
