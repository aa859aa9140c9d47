"""The lab's management network, live: the small HPN copy with ``management:``, a
bridge in the root namespace, a veth into every namespace carrying the device's
management address, a real node exporter on each, and a real Prometheus in the root
namespace scraping every target of the build's own ``prometheus.yml`` over it.

Every wait is bounded (polled until converged); ``lab down`` must leave no namespace,
bridge or exporter behind.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from aifabric.lab import core as lab_core
from aifabric.lab.mgmt import EXPORTER, bridge_name
from tests._require import need
from tests.conftest import EXAMPLES
from tests.lab.live import established_lab, live
from tests.telemetry.conftest import start_prometheus  # noqa: F401 (a fixture)

pytestmark = live

#: how long Prometheus may take to see every target up (scrapes every 2 s)
CONVERGE_S = 90.0


def _routes() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-4", "-json", "route", "show", "table", "all"],
                         capture_output=True, text=True, check=False).stdout
    nets = []
    for r in json.loads(out or "[]"):
        dst = r.get("dst", "")
        if dst not in ("", "default") and r.get("type") not in ("local", "broadcast"):
            nets.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32",
                                              strict=False))
    return nets


def _free_pool() -> str:
    """A /24 of 198.18.0.0/15 (RFC 2544, benchmarking) no route of this machine covers:
    another lab running at the same time keeps its own."""
    taken = _routes()
    start = os.getpid() % 500
    for k in range(512):
        x = (start + k) % 512
        net = ipaddress.IPv4Network(f"198.{18 + x // 256}.{x % 256}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return str(net)
    raise AssertionError("no free /24 in 198.18.0.0/15 for the management network")


def _spec(tmp: Path, pool: str) -> Path:
    raw = yaml.safe_load((EXAMPLES / "hpn-pod.yaml").read_text())
    raw["management"] = {"pool": pool, "ports_per_switch": 8}
    raw.setdefault("deploy", {})["monitoring"] = {"scrape_interval_s": 2}
    path = tmp / "hpn-mgmt.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(scope="module")
def mlab(tmp_path_factory):
    need("prometheus-node-exporter (Debian package)",
         any(shutil.which(b) for b in EXPORTER), "apt-get install prometheus-node-exporter")
    tmp = tmp_path_factory.mktemp("mgmt")
    spec = _spec(tmp, _free_pool())
    with established_lab(tmp / "lab", spec) as up:
        yield up


def _addr_in(ns: str, ifname: str) -> list[str]:
    out = subprocess.run(["ip", "-n", ns, "-4", "-json", "addr", "show", "dev", ifname],
                         capture_output=True, text=True, check=True).stdout
    return [f"{a['local']}/{a['prefixlen']}" for i in json.loads(out)
            for a in i.get("addr_info", [])]


def test_every_namespace_carries_its_management_address_on_the_bridge(mlab):
    m = mlab.layout.mgmt
    assert m is not None and m.bridge == bridge_name(mlab.prefix)
    assert _addr_in_root(m.bridge) == [f"{m.gateway}/{m.prefixlen}"]
    mg = mlab.ctx.mgmt
    f = mlab.fabric
    want = {str(f.nodes.name[n]): str(ipaddress.IPv4Address(int(mg.node_address[n])))
            for n in [*mlab.ctx.plan.switches.tolist(), *f.host_node.tolist()]}
    assert {p.device: p.address for p in m.ports} == want
    for p in m.ports:
        assert _addr_in(p.ns, p.ifname) == [f"{p.address}/{m.prefixlen}"]
    # every veth's root end is on the lab's bridge, and nothing else is
    out = subprocess.run(["ip", "-json", "link", "show", "master", m.bridge],
                         capture_output=True, text=True, check=True).stdout
    assert sorted(i["ifname"] for i in json.loads(out)) == sorted(p.root_if for p in m.ports)


def _addr_in_root(ifname: str) -> list[str]:
    out = subprocess.run(["ip", "-4", "-json", "addr", "show", "dev", ifname],
                         capture_output=True, text=True, check=True).stdout
    return [f"{a['local']}/{a['prefixlen']}" for i in json.loads(out)
            for a in i.get("addr_info", [])]


def test_lab_status_says_the_bridge_is_up_and_every_exporter_answers(mlab, cli):
    m = mlab.layout.mgmt
    r = cli("lab", "status", "--dir", mlab.dir)
    assert r.code == 0, r.err
    n = len(m.ports)
    assert (f"management network: bridge {m.bridge} up ({m.gateway}/{m.prefixlen}), "
            f"exporters answering {n}/{n}") in r.out, r.out


def test_the_lab_test_passes_beside_the_management_network(mlab):
    """Sessions, ECMP groups equal to the model, reachability and hops: unchanged by the
    management interfaces and their connected routes."""
    from aifabric.lab import check_lab

    res = check_lab(mlab)
    assert res.ok, res


def test_management_subnet_stays_out_of_bgp(mlab):
    """The pool's connected route never reaches another switch's routing table by BGP."""
    from aifabric.lab.daemons import vtysh

    pool = str(mlab.layout.mgmt.pool)
    for sw in mlab.layout.switches:
        out = vtysh(mlab.dir, sw, f"show ip bgp {pool} longer-prefixes json")
        routes = json.loads(out or "{}").get("routes", {})
        assert routes == {}, (sw, routes)


def test_real_prometheus_scrapes_every_target_over_the_management_network(
        mlab, start_prometheus):  # noqa: F811 (the imported fixture)
    """The build's prometheus.yml (its sonic and node jobs: a target per switch and host
    at its management address) in a real Prometheus in the root namespace: every target
    up, and each switch reports exactly its own cable ports (the namespace's kernel)."""
    from aifabric.telemetry.monitoring import prometheus_yml

    cfg = yaml.safe_load(prometheus_yml(mlab.ctx))
    cfg.pop("rule_files")
    # the sonic and node jobs (the lab's BMCs are planned, not emulated: no bmc job here)
    cfg["scrape_configs"] = [j for j in cfg["scrape_configs"]
                             if j["job_name"] in ("sonic", "node")]
    targets = {sc["targets"][0]: sc["labels"]["device"]
               for j in cfg["scrape_configs"] for sc in j["static_configs"]}
    m = mlab.layout.mgmt
    assert targets == {f"{p.address}:{p.port}": p.device for p in m.ports}
    prom = start_prometheus(yaml.safe_dump(cfg))
    deadline = time.monotonic() + CONVERGE_S
    while True:
        up = {r["metric"]["instance"]: r["value"][1] for r in prom.query("up")}
        if set(up) == set(targets) and set(up.values()) == {"1"}:
            break
        assert time.monotonic() < deadline, (
            f"not every target up after {CONVERGE_S:.0f} s: "
            f"{sorted(k for k, v in up.items() if v != '1')[:5]} down, "
            f"{len(set(targets) - set(up))} never scraped")
        time.sleep(0.5)
    # the ports each switch exports are the lab's cable ports of it plus its eth0
    cables: dict[str, set[str]] = {}
    ns_dev = {v: k for k, v in mlab.layout.ns.items()}
    for lk in mlab.layout.links:
        cables.setdefault(ns_dev[lk.ns_a], set()).add(lk.if_a)
        cables.setdefault(ns_dev[lk.ns_b], set()).add(lk.if_b)
    series = prom.query('node_network_receive_bytes_total{job="sonic"}')
    got: dict[str, set[str]] = {}
    for s in series:
        got.setdefault(s["metric"]["device"], set()).add(s["metric"]["port"])
    assert got == {sw: cables[sw] | {"eth0"} for sw in mlab.layout.switches}
    # and the management port's counters move: Prometheus's own scrapes cross it
    q = 'node_network_transmit_bytes_total{job="node",port="eno1"}'
    assert {s["metric"]["device"] for s in prom.query(q)} == set(mlab.layout.hosts)
    assert all(float(s["value"][1]) > 0 for s in prom.query(q))


def test_a_second_lab_on_the_same_pool_is_refused_before_anything_is_made(mlab, tmp_path,
                                                                           cli):
    """The pool is this machine's route now (the first lab's bridge): one line naming
    management.pool, exit 2, no namespace, bridge or folder made."""
    from aifabric.lab import lab_namespaces, lab_prefix

    spec = _spec(tmp_path, str(mlab.layout.mgmt.pool))
    other = tmp_path / "other-lab"
    r = cli("lab", "up", spec, "--dir", other)
    assert r.code == 2, (r.out, r.err)
    assert len(r.err.strip().splitlines()) == 1 and "management.pool" in r.err, r.err
    assert not other.exists()
    assert lab_namespaces(lab_prefix(other)) == []
    assert subprocess.run(["ip", "link", "show", bridge_name(lab_prefix(other))],
                          capture_output=True, check=False).returncode != 0


def test_lab_down_removes_the_bridge_and_every_exporter(tmp_path):
    """A second, short-lived lab: after ``lab down`` no namespace, bridge, veth or node
    exporter of it is left."""
    need("prometheus-node-exporter (Debian package)",
         any(shutil.which(b) for b in EXPORTER), "apt-get install prometheus-node-exporter")
    spec = _spec(tmp_path, _free_pool())
    lab_dir = tmp_path / "lab"
    up = lab_core.up(spec, "small", lab_dir)
    try:
        pids = list(up.state["mgmt"]["exporter_pids"].values())
        assert len(pids) == len(up.layout.mgmt.ports)
        bridge = up.layout.mgmt.bridge
        root_ifs = [p.root_if for p in up.layout.mgmt.ports]
    finally:
        lab_core.down(lab_dir)
    for name in [bridge, *root_ifs]:
        assert subprocess.run(["ip", "link", "show", name], capture_output=True,
                              check=False).returncode != 0, name
    for pid in pids:  # gone or a zombie of this process waiting to be reaped
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert not lab_dir.exists()
