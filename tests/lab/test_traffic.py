"""Traffic through the lab's queues, and the exporter's queue, mark, drop and utilization
series read from the kernel (``tc -s``, ``ip -stats``) under the simulation's names.

One small HPN lab (``lab up`` with the shaped queues on every port) carries the flows of
examples/scenarios/lab-incast.yaml: a cross-segment permutation (leaf-spine links) and
a 5-to-1 incast (the receiver's ToR ports congest)."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from aifabric.lab.queues import Queues, parse_queues, read_queues
from aifabric.lab.traffic import PAYLOAD, run_traffic
from aifabric.telemetry.exporter import LabCollector, scrape_text
from tests._require import need, skip_allowed
from tests.conftest import EXAMPLES, families, one_line_exit_2
from tests.lab.live import established_lab, live

SPEC = EXAMPLES / "hpn-pod.yaml"
SCENARIO = EXAMPLES / "scenarios" / "lab-incast.yaml"
PORT_MBIT = 10.0
SECONDS = 6.0


def test_bad_queue_options_are_one_line_exit_2(cli, tmp_path):
    line = one_line_exit_2(cli("lab", "up", SPEC, "--queues", "wred", "--dir", tmp_path / "lab"))
    assert "--queues" in line and "auto, red, fifo, none" in line
    line = one_line_exit_2(cli("lab", "up", SPEC, "--port-mbit", "0", "--dir", tmp_path / "lab"))
    assert "--port-mbit" in line
    assert not (tmp_path / "lab").exists()


def test_red_thresholds_are_milliseconds_of_the_port_rate():
    q = parse_queues("auto", 10)
    # 10 Mbit/s = 1250 bytes per ms: 5, 15 and 50 ms
    assert (q.rate_bps, q.min_bytes, q.max_bytes, q.limit_bytes) == (10**7, 6250, 18750, 62500)


@pytest.fixture(scope="module")
def qlab(tmp_path_factory):
    from tests.lab.live import LAB, NO_LAB

    need(LAB, not NO_LAB, NO_LAB)
    lab_dir = tmp_path_factory.mktemp("traffic") / "lab"
    with established_lab(lab_dir, SPEC, queues=parse_queues("auto", PORT_MBIT)) as up:
        yield up


def _tc(ns: str) -> list[dict]:
    r = subprocess.run(["tc", "-n", ns, "-s", "-j", "qdisc", "show"], capture_output=True,
                       text=True, timeout=10, check=True)
    return json.loads(r.stdout)


def _ports(lab) -> list[tuple[str, str, str]]:
    """(device, namespace, interface) of both ends of every cable."""
    dev_of = {ns: d for d, ns in lab.layout.ns.items()}
    return [(dev_of[ns], ns, i) for lk in lab.layout.links
            for ns, i in ((lk.ns_a, lk.if_a), (lk.ns_b, lk.if_b))]


@live
def test_every_cable_end_has_the_shaper_and_the_queue(qlab):
    """HTB at the port rate on both ends of every cable; under it RED with ECN on switch
    ports (fifo where the kernel has no sch_red) and a drop-tail FIFO on NIC ports."""
    q = Queues.from_state(qlab.state["queues"])
    assert q is not None and q.kind in ("red", "fifo") and q.rate_bps == PORT_MBIT * 1e6
    by_ns: dict[str, list[dict]] = {}
    n = 0
    for dev, ns, ifname in _ports(qlab):
        items = by_ns.setdefault(ns, _tc(ns))
        mine = [x for x in items if x.get("dev") == ifname]
        root = [x for x in mine if x.get("root")]
        leaf = [x for x in mine if x.get("parent") == "1:1"]
        assert [r["kind"] for r in root] == ["htb"], (dev, ifname, mine)
        want = q.kind if dev in qlab.layout.switches else "fifo"
        assert [lf["kind"] for lf in leaf] == [{"red": "red", "fifo": "bfifo"}[want]], mine
        n += 1
    assert n == 2 * len(qlab.layout.links)


def _drops(lab) -> dict[tuple[str, str], int]:
    out = {}
    for dev, ns in lab.layout.ns.items():
        for ifname, pq in (read_queues(ns) or {}).items():
            out[(dev, ifname)] = pq.drops
    return out


def _udp_rcvbuf_errors(lab) -> int:
    """UDP datagrams the hosts' kernels dropped for a full socket buffer (``RcvbufErrors``
    of /proc/net/snmp, per namespace): losses after the fabric, when a busy machine left
    the receiver waiting."""
    total = 0
    for host in lab.layout.hosts:
        text = subprocess.run(["ip", "netns", "exec", lab.layout.ns[host], "cat",
                               "/proc/net/snmp"], capture_output=True, text=True,
                              check=True).stdout
        head, vals = [line.split()[1:] for line in text.splitlines()
                      if line.startswith("Udp:")][:2]
        total += int(dict(zip(head, vals, strict=True))["RcvbufErrors"])
    return total


@live
def test_traffic_fills_the_tiers_and_the_scrape_equals_the_kernels_counters(qlab):
    """While the scenario's flows run, every tier they cross shows utilization (never
    above 1: the shaper holds the port rate), the incast's ToR ports hold a queue; the
    packets lost are exactly the queues' drops (tc); afterwards every exported queue
    counter equals ``tc -s`` and tx drops equal the device's plus the queue's."""
    col = LabCollector(qlab.dir, probes=0, timeout_s=5.0)  # a loaded machine
    try:
        drops0, rcvbuf0 = _drops(qlab), _udp_rcvbuf_errors(qlab)
        box: dict = {}
        sending = threading.Event()
        th = threading.Thread(target=lambda: box.setdefault(
            "r", run_traffic(qlab, SCENARIO, SECONDS, progress=lambda _m: sending.set())))
        th.start()
        try:
            # utilization is the counters' change between two scrapes: both inside the
            # sending (opening the sockets in the namespaces takes a while on a busy
            # machine, and an idle stretch in the window would dilute it); each device's
            # change is over the time between its own two reads, and a longer window
            # leaves less weight to the rest of a busy machine's jitter
            assert sending.wait(timeout=30)
            time.sleep(0.5)
            t_first = time.monotonic()
            scrape_text(col)
            time.sleep(2.5)
            during = families(scrape_text(col))
            assert time.monotonic() - t_first < SECONDS - 0.5, "the scrapes outlasted the run"
        finally:
            th.join(timeout=SECONDS + 30)
        assert not th.is_alive()
        r = box["r"]
        drops1, rcvbuf1 = _drops(qlab), _udp_rcvbuf_errors(qlab)
        after_text = scrape_text(col)
        tc_after = {d: read_queues(ns) for d, ns in qlab.layout.ns.items()}
    finally:
        col.close()
    # what was sent and what arrived
    assert r.flows == 13 and r.sent_packets > 0 and r.send_errors == 0
    assert r.sent_bytes == r.sent_packets * PAYLOAD
    # every packet arrived ECN-capable: ECT(0) as sent, or CE where a queue marked it
    assert r.received_ect + r.received_ce == r.received_packets > 0
    lost = r.sent_packets - r.received_packets
    queue_drops = sum(drops1.values()) - sum(drops0.values())
    socket_drops = rcvbuf1 - rcvbuf0
    # every lost packet was dropped by a queue (a BGP keepalive may be dropped too) or,
    # past the fabric, by a receiver's full socket buffer
    assert lost > 0 and lost <= queue_drops + socket_drops <= lost + 50, \
        (lost, queue_drops, socket_drops)
    assert queue_drops > 0.8 * lost, (lost, queue_drops, socket_drops)  # the fabric's
    # utilization per tier while it ran
    tiers = {(s.labels["tier"], s.labels["direction"]): s.value
             for s in during["aifabric_tier_utilization_ratio"]}
    print("tier utilization:", {k: round(v, 3) for k, v in sorted(tiers.items())})
    for key in (("access", "up"), ("access", "down"), ("leaf_spine", "up"),
                ("leaf_spine", "down")):
        assert tiers[key] > 0.05, (key, tiers)
    util = during["aifabric_link_utilization_ratio"]
    assert len(util) == 2 * len(qlab.layout.links)
    assert max(s.value for s in util) <= 1.05
    top = max(util, key=lambda s: s.value)
    print(f"hottest link: {top.labels['device']} {top.labels['port']} {top.value:.3f}")
    assert top.value > 0.8
    depth = during["aifabric_queue_depth_bytes"]
    assert len(depth) == 2 * len(qlab.layout.links)
    incast_tor = [s for s in depth if s.labels["peer"] == "host-s00-h000"]
    assert max(s.value for s in incast_tor) > 0, incast_tor
    # the exported queue counters are tc's (after the traffic: nothing moves but BGP)
    after = families(after_text)
    q_depth = {(s.labels["device"], s.labels["port"]): s.value
               for s in after["aifabric_queue_depth_bytes"]}
    tx_drops = {(s.labels["device"], s.labels["port"]): s.value
                for s in after["aifabric_interface_drops_total"]
                if s.labels["direction"] == "tx"}
    for dev, pqs in tc_after.items():
        for ifname, pq in (pqs or {}).items():
            assert q_depth[(dev, ifname)] == pq.backlog_bytes == 0
            assert tx_drops[(dev, ifname)] >= pq.drops
            dev_drops = int(subprocess.run(
                ["ip", "netns", "exec", qlab.layout.ns[dev], "cat",
                 f"/sys/class/net/{ifname}/statistics/tx_dropped"], capture_output=True,
                text=True, timeout=10, check=True).stdout)
            assert tx_drops[(dev, ifname)] == dev_drops + pq.drops
    print(f"lab traffic: sent {r.sent_packets} received {r.received_packets} lost {lost} "
          f"queue drops {queue_drops} CE {r.received_ce}")


@live
def test_bad_traffic_input_is_one_line_exit_2(qlab, cli, tmp_path):
    line = one_line_exit_2(cli("lab", "traffic", SCENARIO, "--seconds", "0", "--dir", qlab.dir))
    assert "--seconds" in line
    line = one_line_exit_2(cli("lab", "traffic", SCENARIO, "--flow-mbit", "0", "--dir", qlab.dir))
    assert "--flow-mbit" in line
    big = tmp_path / "big.yaml"
    big.write_text("name: big\nspec: " + str(SPEC) + "\ntraffic:\n"
                   "  - {pattern: permutation, gpus: '0:64', shift: 8}\n")
    line = one_line_exit_2(cli("lab", "traffic", big, "--dir", qlab.dir))
    assert "traffic" in line and "big.yaml" in line


@live
def test_red_marks_ecn_on_the_congested_port(qlab):
    """With RED (the kernel's sch_red), the incast's ToR port marks CE: the exported
    aifabric_ecn_marked_packets_total equals tc's count, and the receivers saw CE on
    at most that many packets (a marked packet may still be dropped later)."""
    q = Queues.from_state(qlab.state["queues"])
    assert q is not None
    if q.kind != "red":  # `auto` fell back: `tc` does not know the qdisc kind "red"
        skip_allowed("the kernel has no RED qdisc", "CONFIG_NET_SCH_RED is not set: the "
                     "lab's switch ports are drop-tail")
    col = LabCollector(qlab.dir, probes=0, timeout_s=5.0)  # a loaded machine
    try:
        r = run_traffic(qlab, SCENARIO, SECONDS)
        m = families(scrape_text(col))
        tc_now = {d: read_queues(qlab.layout.ns[d]) for d in qlab.layout.switches}
    finally:
        col.close()
    marks = {(s.labels["device"], s.labels["port"]): s.value
             for s in m["aifabric_ecn_marked_packets_total"]}
    assert len(marks) == sum(len(v or {}) for v in tc_now.values())
    for dev, pqs in tc_now.items():
        for ifname, pq in (pqs or {}).items():
            assert marks[(dev, ifname)] == pq.marked
    incast = max(v for (dev, port), v in marks.items() if dev.startswith("tor-s00"))
    print(f"ECN: {sum(marks.values()):.0f} marks, {incast:.0f} on the incast ToR, "
          f"{r.received_ce} arrived CE")
    assert incast > 0 and 0 < r.received_ce <= sum(marks.values())
