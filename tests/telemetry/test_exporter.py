"""``aifabric monitor lab``: the live exporter of the lab, against the kernel, FRR, promtool
and a real Prometheus.

The live tests need root, ``ip netns`` and FRR (as tests/lab) and Debian's prometheus
package; each says the rule it checks. Expected values come from the fabric (links,
sessions, NICs) or from the kernel itself (``/sys/class/net`` inside the namespace),
never written in by hand.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime

import numpy as np
import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.lab import check_lab
from aifabric.lab import core as lab_core
from aifabric.lab.daemons import daemon_pids
from aifabric.telemetry.exporter import (
    LabCollector,
    parse_listen,
    scrape_text,
    serve,
    vty_query,
)
from aifabric.topology import LinkKind
from tests._require import need
from tests.conftest import EXAMPLES, families
from tests.lab.live import LAB, NO_LAB, live
from tests.telemetry.conftest import free_port, need_prometheus

#: bounded waits
SETTLE_S = 60.0
SERVE_S = 30.0
COUNTERS = ("bytes", "packets", "drops", "errors")
_SYS = {"bytes": "bytes", "packets": "packets", "drops": "dropped", "errors": "errors"}


def _get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        assert r.status == 200
        return r.read().decode()


def _kernel_counters(ns: str) -> dict[tuple[str, str, str], int]:
    """``(interface, counter, rx|tx) -> value`` of every interface of namespace ``ns``,
    read from ``/sys/class/net/*/statistics`` inside it."""
    script = ("cd /sys/class/net && for i in *; do for f in rx_bytes tx_bytes rx_packets "
              "tx_packets rx_dropped tx_dropped rx_errors tx_errors; do "
              "echo $i $f $(cat $i/statistics/$f); done; done")
    out = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script], capture_output=True,
                         text=True, check=True, timeout=20).stdout
    rev = {v: k for k, v in _SYS.items()}
    got = {}
    for line in out.splitlines():
        ifname, stat, value = line.split()
        direction, what = stat.split("_", 1)
        got[(ifname, rev[what], direction)] = int(value)
    return got


# --------------------------------------------------------------- without a lab
def test_listen_must_be_host_and_port():
    """--listen is HOST:PORT with a port 0-65535 (0: any free port, as for serve; IPv6 in
    brackets); anything else is one problem naming --listen."""
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:80") == ("::1", 80)
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    for bad in ("9464", "127.0.0.1:", ":9464", "127.0.0.1:-1", "127.0.0.1:70000", "h:x"):
        with pytest.raises(SpecError) as exc:
            parse_listen(bad)
        assert exc.value.problems[0].path == "--listen"


def test_bad_options_and_no_lab_are_one_line_exit_2(cli, tmp_path):
    """A bad --listen, --probes or --timeout, or no lab up in --dir: exit 2, one line."""
    for args, word in ((["--listen", "localhost"], "--listen"),
                       (["--probes", "-1"], "--probes"),
                       (["--timeout", "0"], "--timeout"),
                       ([], "no lab is up")):
        r = cli("monitor", "lab", "--dir", tmp_path / "nolab", *args)
        assert r.code == 2, (args, r.out, r.err)
        assert len(r.err.strip().splitlines()) == 1 and word in r.err, r.err
    assert not (tmp_path / "nolab").exists()


def test_port_in_use_is_one_problem_naming_listen():
    """Serving on a port something else listens on: SpecError naming --listen."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(SpecError) as exc:
            serve(object(), "127.0.0.1", port)
    p = exc.value.problems[0]
    assert p.path == "--listen" and "in use" in p.message


def test_a_daemon_that_never_answers_is_given_up_on_in_bounded_time(tmp_path):
    """A vty socket that accepts nothing (a frozen daemon) or does not exist: None, within
    the timeout -- never a hang."""
    path = tmp_path / "bgpd.vty"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(str(path))
        srv.listen(1)
        t0 = time.monotonic()
        assert vty_query(tmp_path, "bgpd", "show bgp summary json", 0.3) is None
        assert time.monotonic() - t0 < 0.3 + 0.5
    assert vty_query(tmp_path / "nothing", "bgpd", "show version", 0.3) is None


# ------------------------------------------------------------------- live lab
@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    need(LAB, not NO_LAB, NO_LAB)
    lab_dir = tmp_path_factory.mktemp("mon") / "lab"
    lab = lab_core.up(EXAMPLES / "hpn-pod.yaml", "small", lab_dir)
    try:
        assert check_lab(lab_core.load_lab(lab_dir), timeout_s=SETTLE_S).ok
        yield lab
    finally:
        if (lab_dir / "state.json").exists():
            lab_core.teardown(lab_dir)


@pytest.fixture(scope="module")
def exporter(lab):
    """``aifabric monitor lab`` as a subprocess on a free loopback port (stopped by pid)."""
    port = free_port()
    log = lab.dir.parent / "monitor.log"
    env = {**os.environ, "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", "")}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "aifabric", "monitor", "lab", "--dir",
                                 str(lab.dir), "--listen", f"127.0.0.1:{port}"],
                                stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + SERVE_S
    try:
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                _get(url, timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        yield url, port, proc, log
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@live
def test_scrape_of_the_small_hpn_lab_passes_promtool_and_takes_under_1s(lab, exporter):
    """A real scrape of the live small HPN lab: `promtool check metrics` passes; it takes
    under 1 s; every cable end is there with its oper state up, every BGP session (2 per
    switch-to-switch link) Established with prefixes, every switch x NIC group of the
    kernel equals the twin's (drift 0, counts as planned), every probe answered, every
    target up."""
    url, *_ = exporter
    promtool, _ = need_prometheus()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        text = _get(url)
        times.append(time.perf_counter() - t0)
    print(f"scrape of the small HPN lab: {', '.join(f'{t * 1000:.0f} ms' for t in times)}")
    assert min(times) < 1.0, times
    chk = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=30)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    m = families(text)
    from aifabric.telemetry.catalog import CATALOG, QUEUE_METRICS

    # exactly the catalog's lab metrics: none missing, none the catalog does not list
    # (this lab has no queues: tests/lab/test_traffic.py checks a lab with them)
    assert set(m) == {c.name for c in CATALOG if "lab" in c.sources} - set(QUEUE_METRICS)
    f = lab.fabric
    ends = 2 * len(lab.layout.links)
    assert len(m["aifabric_interface_oper_up"]) == ends
    assert all(s.value == 1 for s in m["aifabric_interface_oper_up"])
    for c in COUNTERS:
        assert len(m[f"aifabric_interface_{c}_total"]) == 2 * ends
    p2p = int(np.isin(f.links.kind, (LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE)).sum())
    assert len(m["aifabric_bgp_session_up"]) == 2 * p2p
    assert all(s.value == 1 for s in m["aifabric_bgp_session_up"])
    assert all(s.value > 0 for s in m["aifabric_bgp_received_prefixes"])
    assert all(s.value > 0 for s in m["aifabric_bgp_session_uptime_seconds"])
    n_groups = len(lab.layout.switches) * len({s.labels["destination"]
                                               for s in m["aifabric_ecmp_next_hops"]})
    assert len(m["aifabric_ecmp_next_hops"]) == n_groups == len(m["aifabric_twin_drift"])
    assert all(s.value == 0 for s in m["aifabric_twin_drift"])
    kernel = {tuple(sorted(s.labels.items())): s.value for s in m["aifabric_ecmp_next_hops"]}
    planned = {tuple(sorted(s.labels.items())): s.value
               for s in m["aifabric_ecmp_planned_next_hops"]}
    assert kernel == planned and max(kernel.values()) >= 2  # real ECMP groups among them
    assert m["aifabric_probe_loss_ratio"] and all(
        s.value == 0 for s in m["aifabric_probe_loss_ratio"])
    assert all(0 < s.value < 0.1 for s in m["aifabric_probe_rtt_seconds"])
    ups = m["aifabric_up"]
    assert len(ups) == len(lab.layout.namespaces) + len(lab.layout.switches)
    assert all(s.value == 1 for s in ups)
    # labels place every port: per plane sums are possible
    planes = {s.labels["plane"] for s in m["aifabric_interface_oper_up"]
              if s.labels["tier"] == "leaf_spine"}
    assert planes == {"0", "1"}


@live
def test_counters_equal_the_kernels(lab):
    """Every exported interface counter lies between the kernel's (``/sys`` inside the
    namespace) just before and just after the scrape, and equals it where the kernel's
    did not move (every host port: no probes run here)."""
    col = LabCollector(lab.dir, probes=0)
    try:
        nss = lab.layout.ns
        before = {d: _kernel_counters(ns) for d, ns in nss.items()}
        text = scrape_text(col)
        after = {d: _kernel_counters(ns) for d, ns in nss.items()}
    finally:
        col.close()
    m = families(text)
    checked = equal = 0
    for c in COUNTERS:
        for s in m[f"aifabric_interface_{c}_total"]:
            key = (s.labels["port"], c, s.labels["direction"])
            lo, hi = before[s.labels["device"]][key], after[s.labels["device"]][key]
            assert lo <= s.value <= hi, (s.labels, c, lo, s.value, hi)
            checked += 1
            if lo == hi:
                assert s.value == lo
                equal += 1
    hosts = sum(1 for c in COUNTERS for s in m[f"aifabric_interface_{c}_total"]
                if s.labels["device"] in lab.layout.hosts)
    assert checked == 8 * 2 * len(lab.layout.links) and equal >= hosts > 0
    # and the counters moved at all: BGP keepalives crossed every switch-to-switch port
    assert any(s.value > 0 for s in m["aifabric_interface_bytes_total"])


@live
def test_a_frozen_daemon_is_up_0_and_the_scrape_goes_on(lab, exporter):
    """A bgpd that does not answer (SIGSTOP, as `lab fail` freezes a switch) is exported as
    aifabric_up{target="frr"} 0 for its switch only, its sessions are left out, and the
    scrape still succeeds (promtool-clean) within the exporter's timeout."""
    url, *_ = exporter
    promtool, _ = need_prometheus()
    sw = lab.layout.switches[-1]
    pid = daemon_pids(lab.dir)[f"{sw}/bgpd"]
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.perf_counter()
        text = _get(url)
        dt = time.perf_counter() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert dt < 0.5 + 1.0, dt  # --timeout 0.5 s, the rest in parallel
    chk = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=30)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    m = families(text)
    down = {(s.labels["device"], s.labels["target"]) for s in m["aifabric_up"] if s.value == 0}
    assert down == {(sw, "frr")}
    assert sw not in {s.labels["device"] for s in m["aifabric_bgp_session_up"]}
    assert len({s.labels["device"] for s in m["aifabric_bgp_session_up"]}) == \
        len(lab.layout.switches) - 1


@live
def test_cli_refuses_a_port_in_use(lab, exporter, cli):
    """`monitor lab --listen` on the port the running exporter holds: exit 2, one line
    naming --listen."""
    _, port, *_ = exporter
    r = cli("monitor", "lab", "--dir", lab.dir, "--listen", f"127.0.0.1:{port}")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "--listen" in r.err and "in use" in r.err


#: the end-to-end test's Prometheus: scrape and rule evaluation every SCRAPE_S seconds
SCRAPE_S = 2.0
E2E_BUDGET_S = 90.0


def _active(prom, names: set[str]) -> list[dict]:
    """The alerts of ``names`` Prometheus holds now (pending or firing)."""
    return [a for a in prom.get("alerts")["alerts"] if a["labels"]["alertname"] in names]


def _epoch(rfc3339: str) -> float:
    """Prometheus' ``activeAt`` (RFC 3339, up to nanoseconds) as Unix seconds."""
    head, _, frac = rfc3339.rstrip("Z").partition(".")
    t = datetime.fromisoformat(head + "+00:00").timestamp()
    return t + (float("0." + frac) if frac else 0.0)


@live
def test_end_to_end_prometheus_fires_link_down_and_bgp_alerts_after_a_tor_fails(
        lab, exporter, start_prometheus):
    """The lab, `monitor lab` and a real Prometheus with the generated prometheus.yml and
    alerts.yml (scrape and evaluation every 2 s): healthy, no link-down or BGP alert; after
    `lab fail` of a ToR, FabricLinkDown fires for exactly the ends of the ToR's cables and
    FabricBgpSessionDown for exactly its sessions seen from its aggs, each active within
    two scrape intervals plus one evaluation of the failure; the twin (which knows the
    failure) shows no drift; the counters Prometheus holds equal the kernel's (between a
    read before and after, exactly where the kernel did not move: the dead ToR's ports).
    Under 90 s."""
    from aifabric.lab import fail as lab_fail
    from aifabric.lab import load_lab
    from aifabric.telemetry.alerts import render_alerts
    from aifabric.telemetry.monitoring import prometheus_yml

    t_start = time.monotonic()
    _, port, *_ = exporter
    f = lab.fabric
    work = lab.dir.parent / "prometheus"
    work.mkdir(exist_ok=True)
    (work / "alerts.yml").write_text(render_alerts(f.spec, SCRAPE_S))
    # the generated prometheus.yml, its rule file by absolute path and only the lab's job
    # (the SONiC/node exporter jobs point at the plan's addresses, which are not
    # reachable from here and must not be tried on a network that happens to use them)
    config = yaml.safe_load(prometheus_yml(lab.ctx, SCRAPE_S, exporter=f"127.0.0.1:{port}"))
    assert config["rule_files"] == ["alerts.yml"]
    config["rule_files"] = [str(work / "alerts.yml")]
    config["scrape_configs"] = [j for j in config["scrape_configs"]
                                if j["job_name"] == "aifabric"]
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == [f"127.0.0.1:{port}"]
    prom = start_prometheus(yaml.safe_dump(config))
    watched = {"FabricLinkDown", "FabricBgpSessionDown", "FabricTwinDrift"}
    ends = 2 * len(lab.layout.links)
    deadline = time.monotonic() + 30
    while True:  # scraped and evaluated at least once, healthy
        up = prom.query('up{job="aifabric"}')
        n = prom.query("count(aifabric_interface_oper_up)")
        if up and up[0]["value"][1] == "1" and n and int(n[0]["value"][1]) == ends:
            break
        assert time.monotonic() < deadline, prom.log.read_text()[-2000:]
        time.sleep(0.2)
    time.sleep(SCRAPE_S)  # one more evaluation of the rules
    assert _active(prom, watched) == []
    # the failure
    target = "tor-s01-r0-a"
    tor = f.node_id(target)
    mine = np.flatnonzero((f.links.a == tor) | (f.links.b == tor))
    want_down = set()
    want_bgp = set()
    for lk in lab.layout.links:
        if lk.link in mine:
            want_down |= {(_dev(lab, lk.ns_a), lk.if_a),
                          (_dev(lab, lk.ns_b), lk.if_b)}
            if f.links.kind[lk.link] != LinkKind.ACCESS:
                want_bgp.add((_dev(lab, lk.ns_b), lk.if_b))  # the agg's end
    assert len(want_down) == 2 * len(mine) and want_bgp
    # the moment the ToR's first port goes down, as its kernel reports it (ip monitor)
    watch = subprocess.Popen(["ip", "-n", lab.layout.ns[target], "-ts", "monitor", "link"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        time.sleep(0.3)  # subscribed before the failure
        res = lab_fail(load_lab(lab.dir), target, timeout_s=30)
    finally:
        os.kill(watch.pid, signal.SIGTERM)
        events = watch.communicate(timeout=10)[0]
    assert res.routes_s is not None
    downs = [line[1:].split("]")[0] for line in events.splitlines() if "state DOWN" in line]
    assert downs, events
    t_fail = min(datetime.fromisoformat(t).timestamp() for t in downs)  # local time
    bound = 2 * SCRAPE_S + SCRAPE_S  # two scrape intervals + one rule evaluation
    deadline = time.monotonic() + 30
    while True:
        alerts = _active(prom, watched)
        firing = {(a["labels"]["alertname"], a["labels"]["device"], a["labels"]["port"]):
                  a for a in alerts if a["state"] == "firing"}
        got_down = {(d, p) for (n, d, p) in firing if n == "FabricLinkDown"}
        got_bgp = {(d, p) for (n, d, p) in firing if n == "FabricBgpSessionDown"}
        if got_down == want_down and got_bgp == want_bgp:
            break
        assert time.monotonic() < deadline, (sorted(got_down), sorted(got_bgp))
        time.sleep(0.2)
    delays = [_epoch(a["activeAt"]) - t_fail for a in firing.values()]
    print(f"alerts active {min(delays):.1f}-{max(delays):.1f} s after `lab fail` "
          f"(bound {bound:.0f} s)")
    assert max(delays) <= bound, sorted(delays)
    assert not [a for a in alerts if a["labels"]["alertname"] == "FabricTwinDrift"
                and a["state"] == "firing"]
    # Prometheus' counters against the kernel's
    before = {d: _kernel_counters(ns) for d, ns in lab.layout.ns.items()}
    t_read = time.time()
    deadline = time.monotonic() + 30
    while True:  # a scrape that started after the read
        ts = prom.query("min(timestamp(aifabric_interface_bytes_total))")
        if ts and float(ts[0]["value"][1]) > t_read:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    held = {c: prom.query(f"aifabric_interface_{c}_total") for c in COUNTERS}
    after = {d: _kernel_counters(ns) for d, ns in lab.layout.ns.items()}
    exact = 0
    for c, rows in held.items():
        assert len(rows) == 2 * ends
        for r in rows:
            lv = r["metric"]
            key = (lv["port"], c, lv["direction"])
            lo, hi = before[lv["device"]][key], after[lv["device"]][key]
            v = float(r["value"][1])
            assert lo <= v <= hi, (lv, lo, v, hi)
            if lv["device"] == target:
                assert lo == hi == v, (lv, lo, v, hi)  # a dead switch's counters stand still
                exact += 1
    assert exact == 8 * len(mine)
    took = time.monotonic() - t_start
    print(f"end-to-end Prometheus test: {took:.1f} s")
    assert took < E2E_BUDGET_S


def _dev(lab, ns: str) -> str:
    return {v: k for k, v in lab.layout.ns.items()}[ns]


@live
def test_a_lab_taken_down_is_exported_as_every_target_down(lab, exporter, cli):
    """`lab down` under a running exporter: the next scrape still answers 200 with every
    aifabric_up 0 (and nothing else of the lab), never a crash."""
    url, _, proc, log = exporter
    r = cli("lab", "down", "--dir", lab.dir)
    assert r.code == 0, r.err
    m = families(_get(url))
    assert proc.poll() is None, log.read_text()
    ups = m["aifabric_up"]
    assert len(ups) == len(lab.layout.namespaces) + len(lab.layout.switches)
    assert all(s.value == 0 for s in ups)
    assert "aifabric_interface_oper_up" not in m and "aifabric_bgp_session_up" not in m
