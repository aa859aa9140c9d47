"""The InfiniBand lab on the real parts: Debian's ibsim (ibsim-utils) runs the scaled
fabric, Debian's OpenSM routes it (LD_PRELOAD libumad2sim), infiniband-diags read every
switch's LFT; the twin's tables must equal OpenSM's, entry by entry, before and after a
link and a switch go down. No root needed (ibsim is a user-space simulator)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests._require import need, need_tool

PACKAGES = "apt-get install -y opensm ibsim-utils infiniband-diags"


@pytest.fixture(autouse=True)
def _parts():
    for prog, pkg in (("ibsim", "ibsim-utils"), ("opensm", "opensm"),
                      ("ibroute", "infiniband-diags"), ("ibnetdiscover", "infiniband-diags"),
                      ("ibtracert", "infiniband-diags")):
        need_tool(prog, f"{pkg}: {PACKAGES}")
    from aifabric.lab.infiniband import UMAD2SIM
    need("libumad2sim.so", os.path.isfile(UMAD2SIM), f"ibsim-utils: {PACKAGES}")


def _spec(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "ib.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


FAT = {"name": "ibft", "transport": "infiniband",
       "hosts": {"count": 32, "nics_per_host": 2, "gpus_per_host": 2},
       "topology": {"family": "fat_tree", "k": 8}}
HPN = {"name": "ibhpn", "transport": "infiniband",
       "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2, "ports_per_nic": 2},
       "topology": {"family": "hpn", "hosts_per_segment": 4}}


@pytest.mark.parametrize("doc, engine, lmc, scale", [
    (FAT, "minhop", 0, "hosts=4,rails=4,segments=4,pods=4,uplinks=4"),
    (FAT, "updn", 0, "hosts=4,rails=4,segments=4,pods=4,uplinks=4"),
    (HPN, "minhop", 2, "medium"),
    (HPN, "updn", 1, "medium"),
    (FAT, "ftree", 0, "hosts=4,rails=4,segments=8,pods=8,uplinks=4"),
    (HPN, "ftree", 0, "medium"),
], ids=["fat_tree-minhop", "fat_tree-updn", "hpn-minhop-lmc2", "hpn-updn-lmc1",
        "fat_tree-ftree", "hpn-ftree"])
def test_twin_lfts_equal_opensm_before_and_after_failures(tmp_path, monkeypatch, doc, engine,
                                                         lmc, scale):
    from aifabric.lab import infiniband as ib

    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # umad2sim writes a sysfs copy into its cwd: never here

    spec = _spec(tmp_path, {**doc, "infiniband": {"routing_engine": engine, "lmc": lmc}})
    d = tmp_path / "lab"
    lab = ib.up(spec, scale, d)
    pids = list(lab.state["pids"].values())
    try:
        r = ib.test(lab)
        # the pre-flight check on the live ibnetdiscover: every planned cable is there
        # (ibsim reports every link at SDR: the speed group is ibsim's, not a miswire)
        from aifabric.configs.infiniband import check_discovered
        _, _, discovered = ib.read_lids(lab)
        assert [d for d in check_discovered(lab.subnet, discovered)
                if d["group"] == "cabling"] == []
        assert r["entries_compared"] >= r["switches"] * 8 > 0
        assert r["differences"] == 0, r["first_differences"]
        assert r["paths_traced"] > 0 and r["path_differences"] == 0
        # the real OpenSM ran the configured engine (ftree did not fall back)
        assert r["opensm_engines"] and set(r["opensm_engines"]) == {engine}, r
        sn = lab.subnet
        S = sn.n_switches
        # a leaf's uplink, then a whole top-tier switch
        leaf = 0
        port = next(p for p in range(1, sn.nports[leaf] + 1) if 0 <= sn.peer[leaf, p] < S)
        ib.fail(lab, f"{sn.sw_name(leaf)}:{port}")
        _, _, discovered = ib.read_lids(ib.load(d))
        missing = [x for x in check_discovered(lab.subnet, discovered)
                   if x["group"] == "cabling"]
        assert len(missing) == 1 and missing[0]["found"] == "not cabled as planned"
        r = ib.test(ib.load(d))
        assert r["differences"] == 0 and r["path_differences"] == 0, r["first_differences"]
        if engine == "ftree" and doc is FAT:
            # a leaf with an up group less is no pure fat-tree: both fall back to minhop
            assert "minhop" in r["opensm_engines"] and r["twin_fallback"], r
        ib.fail(ib.load(d), sn.sw_name(S - 1))
        r = ib.test(ib.load(d))
        assert r["differences"] == 0 and r["path_differences"] == 0, r["first_differences"]
        assert r["entries_compared"] > 0
    finally:
        ib.down(d)
    for p in pids:  # every process started is stopped
        assert not Path(f"/proc/{p}").exists() or \
            Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert not d.exists()
    assert list(work.iterdir()) == []


def test_ftree_after_a_spine_fails_is_still_ftree_and_equal(tmp_path, monkeypatch):
    """A 2-tier fat-tree without one spine is still a pure fat-tree (every leaf loses
    the same up group): the real OpenSM re-runs ftree, and the twin's fresh ftree tables
    equal OpenSM's again; a leaf uplink down then makes both fall back to minhop."""
    from aifabric.lab import infiniband as ib

    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    doc = {"name": "ibclos", "transport": "infiniband",
           "infiniband": {"routing_engine": "ftree"},
           "hosts": {"count": 16, "nics_per_host": 2, "gpus_per_host": 2},
           "topology": {"family": "clos", "leaf": {"down_ports": 8, "up_ports": 4}}}
    d = tmp_path / "lab"
    lab = ib.up(_spec(tmp_path, doc), "hosts=4,rails=2,segments=4,uplinks=4", d)
    try:
        sn = lab.subnet
        S = sn.n_switches
        tier = lab.fabric.nodes.tier[sn.sw_node]
        spines = [s for s in range(S) if tier[s] == tier.max()]
        assert len(spines) >= 3
        r = ib.test(lab)
        assert r["opensm_engines"] == ["ftree"] and r["differences"] == 0
        ib.fail(lab, sn.sw_name(spines[0]))
        r = ib.test(ib.load(d))
        # (the failed spine, cut off, is a subnet of one switch that no SM routes)
        assert r["opensm_engines"][0] == "ftree", r
        assert not any("fat-tree" in why for why in r["twin_fallback"].values()), r
        assert r["entries_compared"] > 0 and r["differences"] == 0, r["first_differences"]
        leaf = next(s for s in range(S) if tier[s] == tier.min())
        port = next(p for p in range(1, sn.nports[leaf] + 1)
                    if 0 <= sn.peer[leaf, p] < S and sn.peer[leaf, p] != spines[0])
        ib.fail(ib.load(d), f"{sn.sw_name(leaf)}:{port}")
        r = ib.test(ib.load(d))
        assert r["opensm_engines"][0] == "minhop", r
        assert any("not a pure fat-tree" in why for why in r["twin_fallback"].values()), r
        assert r["entries_compared"] > 0 and r["differences"] == 0, r["first_differences"]
    finally:
        ib.down(d)


def test_the_cli_runs_the_lab(tmp_path, cli):
    spec = _spec(tmp_path, {**FAT, "infiniband": {"routing_engine": "updn"}})
    d = tmp_path / "lab"
    r = cli("lab", "up", spec, "--dir", d)
    try:
        assert r.code == 0, r.err
        r = cli("lab", "test", "--dir", d)
        assert r.code == 0 and "PASS" in r.out, r.out + r.err
        assert "LFT entries equal to the twin's" in r.out
    finally:
        r = cli("lab", "down", "--dir", d)
    assert r.code == 0 and not d.exists()


def test_partitions_load_on_opensm_and_give_each_tenant_its_pkey(tmp_path, monkeypatch):
    """A partitions.conf with two tenants, on the real OpenSM: it loads (no partition
    error in its log) and every HCA port's P_Key table, read with `smpquery pkeys`, is
    the plan's: a tenant's port the default P_Key as a limited member (0x7fff) at index 0
    and its tenant's P_Key as a full member (0x8000 | pkey) at index NCCL_IB_PKEY; a
    port of no tenant the default as a full member (0xffff) alone."""
    from aifabric.configs.infiniband import nccl_pkey_index
    from aifabric.lab import infiniband as ib

    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    parts = [{"name": "tenant-a", "pkey": "0x0101", "hosts": ["host-s00-h000",
                                                               "host-s00-h001"]},
             {"name": "tenant-b", "pkey": 0x0202, "hosts": ["host-s01-h000"]}]
    spec = _spec(tmp_path, {**FAT, "infiniband": {"partitions": parts}})
    d = tmp_path / "lab"
    lab = ib.up(spec, "hosts=4,rails=4,segments=4,pods=4,uplinks=4", d)
    try:
        log = (d / "ib" / "opensm-0.log").read_text(errors="replace")
        assert not [x for x in log.splitlines() if "ERR" in x and
                    ("prtn" in x.lower() or "partition" in x.lower())]
        _, ca_lid, _ = ib.read_lids(lab)
        sn = lab.subnet
        f = lab.fabric
        pkey_of = {h: int(p["pkey"], 0) if isinstance(p["pkey"], str) else p["pkey"]
                   for p in parts for h in p["hosts"]}
        seen = {"tenant": 0, "free": 0}
        for c in range(sn.n_ca_ports):
            host = str(f.nodes.name[f.host_node[f.nodes.host[sn.ca_node[c]]]])
            text = ib._diag(lab, ["smpquery", "pkeys", str(int(ca_lid[c])),
                                  str(int(sn.ca_portnum[c]))], int(sn.ca_sw[c]))
            table = [int(x, 16) for ln in text.splitlines() if ":" in ln and
                     ln.strip()[0].isdigit() for x in ln.split(":", 1)[1].split()]
            keys = [k for k in table if k & 0x7FFF]
            if host in pkey_of:
                assert keys == [0x7FFF, 0x8000 | pkey_of[host]], (host, keys)
                assert table.index(0x8000 | pkey_of[host]) == \
                    nccl_pkey_index(lab.fabric.spec, host) == 1
                seen["tenant"] += 1
            else:
                assert keys == [0xFFFF], (host, keys)
                assert nccl_pkey_index(lab.fabric.spec, host) == 0
                seen["free"] += 1
        nics = int(lab.fabric.spec.hosts.nics_per_host)
        assert seen["tenant"] == 3 * nics and seen["free"] > 0
    finally:
        ib.down(d)


def test_job_group_partitions_by_gpu_give_opensms_pkey_order(tmp_path, monkeypatch):
    """Job groups named by GPU (each GPU's own NIC port is a member) and a shared
    tenant partition over them, on the real OpenSM: every HCA port's P_Key table
    (`smpquery pkeys`) is the one the twin plans (routing.infiniband.pkey_tables): the
    default at index 0, then the port's partitions in OpenSM's map order -- the P_Key
    byte-swapped: job-a 0x0a01 (0x010a) before the tenant's 0x0102 (0x0201), the
    reverse of their numeric order -- and each job group's env names that index."""
    from aifabric.configs.infiniband import host_groups
    from aifabric.lab import infiniband as ib
    from aifabric.routing.infiniband import partition_members, pkey_tables

    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    parts = [{"name": "tenant", "pkey": "0x0102", "shared": True,
              "hosts": ["host-s00-h000", "host-s00-h001"]},
             {"name": "job-a", "pkey": "0x0a01",
              "gpus": ["host-s00-h000-gpu0", "host-s00-h001-gpu0"]},
             {"name": "job-b", "pkey": "0x0b01",
              "gpus": ["host-s00-h000-gpu1", "host-s00-h001-gpu1", "host-s01-h000-gpu1"]}]
    spec = _spec(tmp_path, {**FAT, "infiniband": {"partitions": parts}})
    d = tmp_path / "lab"
    lab = ib.up(spec, "hosts=4,rails=4,segments=4,pods=4,uplinks=4", d)
    try:
        log = (d / "ib" / "opensm-0.log").read_text(errors="replace")
        assert not [x for x in log.splitlines() if "ERR" in x and
                    ("prtn" in x.lower() or "partition" in x.lower()
                     or "pkey" in x.lower())]
        _, ca_lid, _ = ib.read_lids(lab)
        sn = lab.subnet
        f = lab.fabric
        tables = pkey_tables(f)
        member = set().union(*partition_members(f))
        checked = {"two": 0, "one": 0, "none": 0}
        for c in range(sn.n_ca_ports):
            node = int(sn.ca_node[c])
            text = ib._diag(lab, ["smpquery", "pkeys", str(int(ca_lid[c])),
                                  str(int(sn.ca_portnum[c]))], int(sn.ca_sw[c]))
            got = [int(x, 16) for ln in text.splitlines() if ":" in ln and
                   ln.strip()[0].isdigit() for x in ln.split(":", 1)[1].split()]
            got = [k for k in got if k & 0x7FFF]
            if node in member:
                want = [0x7FFF] + [0x8000 | k for k in tables[node][1:]]
                checked["two" if len(want) == 3 else "one"] += 1
            else:
                want = [0xFFFF]
                checked["none"] += 1
            assert got == want, (f.nodes.name[node], [hex(k) for k in got])
        assert checked["two"] == 4 and checked["one"] == 1 and checked["none"] > 0
        # job-a's ports hold 0x0a01 at index 1 (before the tenant's 0x0102, index 2)
        groups = host_groups(f)
        h0 = next(h for h, n in enumerate(f.nodes.name[f.host_node])
                  if str(n) == "host-s00-h000")
        assert groups[h0][1][1] == 1 and groups[h0][2][1] == 1
        assert tables[groups[h0][1][0][0]] == [0x7FFF, 0x0A01, 0x0102]
    finally:
        ib.down(d)
