"""The live exporter of a running lab: what ``aifabric monitor lab`` serves on ``/metrics``.

:class:`LabCollector` is a prometheus-client collector that reads the lab *when it is
scraped* (nothing is cached between scrapes but the lab's fabric and the twin's routing
model), all namespaces and daemons at once from a pool of threads:

* **interfaces** -- every cable port of every namespace (switch ``EthernetN``, host
  ``ensNfP``): bytes, packets, drops and errors per direction and the oper state, from
  one ``ip -n <ns> -json -stats -batch -`` per namespace (the same command also lists a
  switch's routes);
* **BGP** -- every session of every switch: state (1 = Established), uptime and
  prefixes received, from ``show bgp ipv4 unicast summary json`` asked of the switch's
  ``bgpd`` over its vty socket (the protocol ``vtysh`` speaks: the command and a NUL,
  the answer ends with three NULs and a status byte), so no process is started per
  switch;
* **ECMP** -- every live switch's next-hop count toward every NIC /32 from its kernel
  (a route delivered by the ToR itself counts 1, no route 0), beside the count the
  twin's routing model (:class:`aifabric.routing.Fib`) predicts for the same fabric
  and the failures the lab knows of (``lab fail``), and for the fabric as planned;
  ``twin_drift`` is 1 for a group whose next-hop *set* differs from the model's, 0 when
  they agree (the same comparison as ``aifabric lab test``);
* **queues** (a lab with ``lab up --queues``, :mod:`aifabric.lab.queues`) -- every
  cable end's egress queue from one ``tc -s -j qdisc show`` per namespace, under the
  simulation's names: ``queue_depth_bytes`` (tc's backlog, priority 0),
  ``ecn_marked_packets_total`` (RED's marks; none from a drop-tail queue), the queue's
  drops added to the port's tx ``interface_drops_total``, and ``link_utilization_ratio``
  / ``tier_utilization_ratio`` (tx bytes since the previous scrape over the shaped port
  rate, timed by each device's own counter reads; none at the first scrape);
* **probes** -- ``ping`` between a fixed sample of NIC pairs on different hosts (3
  echoes 10 ms apart from the source NIC's address, bounded by ``timeout_s``): round
  trip time and loss ratio.

A namespace that is gone or a daemon that does not answer within ``timeout_s`` (a
switch frozen by ``lab fail``) is exported as ``up{target=...}`` = 0 and its other
series are left out; the scrape never fails for it. Labels come from
:func:`aifabric.telemetry.catalog.labels`: device, port, peer, tier, plane, rail,
segment, so a query can aggregate per plane or per rail.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError

__all__ = ["DEFAULT_LISTEN", "LabCollector", "Scrape", "parse_listen", "scrape_text", "serve"]

#: where ``monitor lab`` listens unless ``--listen`` says otherwise (9464: the port the
#: OpenTelemetry Prometheus exporter uses by convention; no standard exporter takes it)
DEFAULT_LISTEN = "127.0.0.1:9464"
_RTT = re.compile(r"= [\d.]+/([\d.]+)/")
_SENT = re.compile(r"(\d+) packets transmitted, (\d+) received")


# ------------------------------------------------------------------------ listen
def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464`` for IPv6) -> ``(host, port)``; SpecError naming
    ``--listen`` otherwise. Port 0 asks the system for any free port."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SpecError(Problem("--listen", f"{text!r} is not HOST:PORT; allowed: an address "
                                "and a port 0-65535 (0: any free port), e.g. "
                                "127.0.0.1:9464"))
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(collector: Any, host: str, port: int) -> Any:
    """Serve ``collector`` on ``http://host:port/metrics`` from a background thread;
    returns the server (``shutdown()`` stops it). A port in use or an address this
    machine does not have is one SpecError naming ``--listen``."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, _thread = start_http_server(port, host, registry=registry)
    except OSError as exc:
        why = "is in use" if exc.errno == 98 else f"cannot be listened on ({exc.strerror or exc})"
        raise SpecError(Problem("--listen", f"{host}:{port} {why}; allowed: a free port on "
                                "an address of this machine")) from None
    return server


def scrape_text(collector: Any) -> str:
    """One scrape of ``collector`` in the Prometheus text format (what ``/metrics`` says)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


# ---------------------------------------------------------------------- scraping
@dataclass
class Scrape:
    """What one scrape read, before it becomes metric families."""

    up: dict[str, bool] = field(default_factory=dict)  # target -> answered
    links: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # device -> ip link
    routes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # switch -> routes
    bgp: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # sw -> peers
    probes: list[tuple[int, int, int, float]] = field(default_factory=list)  # sent, got, rtt
    failures: list[dict[str, Any]] = field(default_factory=list)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)  # sw -> port -> queue
    at: float = 0.0  # time.monotonic() when the read started
    # device -> time.monotonic() of its interface counters: the middle of its ``ip`` run
    # (the reads run in a pool; on a busy machine one may wait long after ``at``)
    links_at: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


def _ns_cmd(ns: str, cmd: list[str]) -> list[str]:
    if shutil.which("nsenter"):
        return ["nsenter", f"--net=/run/netns/{ns}", *cmd]
    return ["ip", "netns", "exec", ns, *cmd]


def _run(cmd: list[str], stdin: str | None, timeout_s: float, *,
         any_status: bool = False) -> str | None:
    """stdout of ``cmd``, or None when it overruns ``timeout_s`` or (unless
    ``any_status``) exits non-zero."""
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return proc.stdout if proc.returncode == 0 or any_status else None


def _timed_run(cmd: list[str], stdin: str | None, timeout_s: float) -> tuple[str | None, float]:
    """``_run`` and the middle of the command's run (``time.monotonic()``)."""
    t0 = time.monotonic()
    text = _run(cmd, stdin, timeout_s)
    return text, (t0 + time.monotonic()) / 2


def vty_query(sock_dir: Path, daemon: str, command: str, timeout_s: float) -> str | None:
    """Ask ``daemon`` (``bgpd``) of the FRR whose vty sockets are in ``sock_dir`` one
    command, as vtysh does; None when it does not answer within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    buf = bytearray()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(str(sock_dir / f"{daemon}.vty"))
            s.sendall(command.encode() + b"\0")
            while len(buf) < 4 or buf[-4:-1] != b"\0\0\0":
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                s.settimeout(left)
                chunk = s.recv(1 << 16)
                if not chunk:
                    return None
                buf += chunk
    except OSError:
        return None
    if buf[-1] != 0:  # the daemon's status byte: the command failed
        return None
    return buf[:-4].decode(errors="replace")


def _count(group: Any) -> int:
    """Next hops of an ECMP group: a set's size, 1 for a route the switch delivers
    itself (``direct``), 0 for no route."""
    if group is None:
        return 0
    return 1 if isinstance(group, str) else len(group)


def _drift(got: Any, want: Any) -> int:
    """Next hops in one group and not the other (0 when kernel and model agree)."""
    if got == want:
        return 0
    if isinstance(got, frozenset) and isinstance(want, frozenset):
        return len(got ^ want)
    return max(_count(got), _count(want), 1)


@dataclass(frozen=True)
class _Probe:
    host: str  # source host (namespace)
    ifname: str  # the port it leaves by (its fwmark selects the port's table)
    mark: int
    src_ip: str
    dst_ip: str
    source: str  # label: host:port
    target: str  # label: host:nic


class LabCollector:
    """A prometheus-client collector of the lab kept in ``lab_dir`` (LabError if none is
    up there). Every ``collect()`` (one per scrape; scrapes are serialised) reads all of
    the lab concurrently, each read bounded by ``timeout_s``; ``probes`` caps the ping
    probes per scrape (0: none)."""

    def __init__(self, lab_dir: Path | None = None, *, probes: int = 24,
                 timeout_s: float = 0.5, workers: int = 64) -> None:
        from aifabric.lab import load_lab

        self.probes_max = probes
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scrape")
        self._load(load_lab(lab_dir))

    # ------------------------------------------------------------------ setup
    def _load(self, lab: Any) -> None:
        from aifabric.lab import verify
        from aifabric.lab.netns import PORT_TABLE_BASE
        from aifabric.telemetry.catalog import (
            DEVICE_LABELS,
            PORT_LABELS,
            device_labels,
            port_labels,
        )

        self.lab = lab
        f = lab.fabric
        lay = lab.layout
        self.started = lab.state.get("started")
        self.dev_of_ns = {ns: dev for dev, ns in lay.ns.items()}
        # (device, interface) -> label values of that port, for every cable of the lab
        lids = np.array([lk.link for lk in lay.links], dtype=np.int64)
        self.port_of: dict[tuple[str, str], tuple[str, ...]] = {}
        self.end_of: dict[tuple[str, str], int] = {}  # 0: the link's a end (sends up)
        for end in (0, 1):
            cols = port_labels(f, lids, end)
            rows = zip(*(cols[k].tolist() for k in PORT_LABELS), strict=True)
            for lk, row in zip(lay.links, rows, strict=True):
                dev = self.dev_of_ns[lk.ns_a if end == 0 else lk.ns_b]
                ifname = lk.if_a if end == 0 else lk.if_b
                assert (row[0], row[1]) == (dev, ifname), (row, dev, ifname)
                self.port_of[(dev, ifname)] = tuple(row)
                self.end_of[(dev, ifname)] = end
        # (switch, BGP peer address) -> label values of the port the session runs on
        self.gw_link = verify.gateway_links(f)
        keys = list(self.gw_link)
        s_lids = np.array([self.gw_link[k] for k in keys], dtype=np.int64)
        s_node = np.array([k[0] for k in keys], dtype=np.int64)
        cols = port_labels(f, s_lids, (f.links.a[s_lids] != s_node).astype(np.int64))
        rows = zip(*(cols[k].tolist() for k in PORT_LABELS), strict=True)
        self.session_of: dict[tuple[str, str], tuple[str, ...]] = {
            (str(f.nodes.name[node]), ip): tuple(row)
            for (node, ip), row in zip(keys, rows, strict=True)}
        self.switches = list(lay.switches)
        from aifabric.lab.queues import Queues

        self.queues = Queues.from_state(lab.state.get("queues"))
        self._last_tx: dict[tuple[str, str], tuple[float, int]] = {}
        dl = device_labels(f, np.array([f.node_id(s) for s in self.switches], dtype=np.int64))
        self.device_of = {s: tuple(str(dl[k][i]) for k in DEVICE_LABELS)
                          for i, s in enumerate(self.switches)}
        self.nics = verify.nics(f)
        self.targets = [n.ip for n in self.nics]
        self.planned = verify.model_groups(f, np.ones(f.n_links, dtype=bool), self.switches)
        self._predicted: dict[str, verify.Groups] = {}
        # probes: each NIC port in turn pings a NIC of another host (rotating), at most
        # probes_max of them, spread over the ports
        ports = verify.live_ports(f, np.ones(f.n_links, dtype=bool))
        picks: list[_Probe] = []
        for k, p in enumerate(ports):
            others = [n for n in self.nics if n.host != p.nic.host]
            if not others:
                continue
            d = others[k % len(others)]
            rail, side = (int(x) for x in p.ifname[3:].split("f"))
            picks.append(_Probe(p.nic.host, p.ifname, PORT_TABLE_BASE + 8 * rail + side,
                                p.nic.ip, d.ip, f"{p.nic.host}:{p.ifname}",
                                f"{d.host}:ens{d.number % f.spec.hosts.nics_per_host}"))
        if self.probes_max < len(picks):
            step = len(picks) / max(self.probes_max, 1)
            picks = [picks[int(i * step)] for i in range(self.probes_max)]
        self.probes = picks

    def _predicted_groups(self, failures: list[dict[str, Any]], live: list[str]) -> Any:
        """The twin's groups for the lab's links as they are (its injected failures)."""
        from aifabric.lab import verify
        from aifabric.lab.inject import alive_links

        key = json.dumps([{k: x[k] for k in ("switch", "port") if k in x} for x in failures],
                         sort_keys=True)
        if key not in self._predicted:
            f = self.lab.fabric
            self._predicted[key] = verify.model_groups(f, alive_links(f, failures),
                                                      self.switches)
        return self._predicted[key]

    # ----------------------------------------------------------------- reading
    def read(self) -> Scrape:
        """Read the whole lab once (what one scrape exports)."""
        from aifabric.lab import load_lab
        from aifabric.lab.core import STATE

        t0 = time.perf_counter()
        out = Scrape(at=time.monotonic())
        try:
            state = json.loads((self.lab.dir / STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = None  # the lab was taken down: every target is down
        if state is not None and state.get("started") != self.started:
            try:  # a new lab in the same folder
                self._load(load_lab(self.lab.dir))
            except Exception:  # half-built or gone: exported as down
                state = None
        devices = self.switches + list(self.lab.layout.hosts)
        if state is None:
            out.up = {f"{d}/kernel": False for d in devices}
            out.up.update({f"{s}/frr": False for s in self.switches})
            out.seconds = time.perf_counter() - t0
            return out
        out.failures = list(state.get("failures", []))
        ns = self.lab.layout.ns
        t = self.timeout_s
        is_switch = set(self.switches)
        jobs = {}
        for d in devices:
            lines = "link show\n" + ("route show table main\n" if d in is_switch else "")
            jobs[("kernel", d)] = self._pool.submit(
                _timed_run, ["ip", "-n", ns[d], "-json", "-stats", "-batch", "-"], lines, t)
        if self.queues is not None:
            from aifabric.lab.queues import read_queues

            for d in devices:
                jobs[("tc", d)] = self._pool.submit(read_queues, ns[d], t)
        frr = self.lab.dir / "frr"
        for s in self.switches:
            jobs[("frr", s)] = self._pool.submit(
                vty_query, frr / s, "bgpd", "show bgp ipv4 unicast summary json", t)
        wait = max(0.05, t * 0.6)
        for i, p in enumerate(self.probes):
            jobs[("probe", str(i))] = self._pool.submit(
                _run, _ns_cmd(ns[p.host], ["ping", "-n", "-q", "-c", "3", "-i", "0.01",
                                           "-W", f"{wait:.2f}", "-m", str(p.mark),
                                           "-I", p.src_ip, p.dst_ip]), None, t + 0.5,
                any_status=True)
        probes: list[tuple[int, int, int, float]] = []
        for (kind, who), fut in jobs.items():
            result = fut.result()
            text = result[0] if kind == "kernel" else result
            if kind == "kernel":
                out.links_at[who] = result[1]
                parsed = _json_lines(text)
                out.up[f"{who}/kernel"] = parsed is not None and len(parsed) >= 1
                if parsed:
                    out.links[who] = parsed[0]
                    if who in is_switch and len(parsed) > 1:
                        out.routes[who] = parsed[1]
            elif kind == "tc":
                if text is not None:
                    out.queues[who] = text  # type: ignore[assignment]
            elif kind == "frr":
                peers = None
                with contextlib.suppress(ValueError, AttributeError):
                    peers = json.loads(text).get("peers") if text else None
                out.up[f"{who}/frr"] = isinstance(peers, dict)
                if isinstance(peers, dict):
                    out.bgp[who] = peers
            else:
                sent, got, rtt = _ping_result(text)
                probes.append((int(who), sent, got, rtt))
        out.probes = probes
        out.seconds = time.perf_counter() - t0
        return out

    # -------------------------------------------------------------- exporting
    def collect(self) -> Iterator[Any]:
        """The metric families of one fresh read (prometheus-client calls this per scrape)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from aifabric.lab import verify
        from aifabric.lab.inject import dead_switches
        from aifabric.telemetry.catalog import by_name

        with self._lock:
            s = self.read()

        def fam(name: str) -> Any:
            m = by_name(name)
            cls = CounterMetricFamily if m.type == "counter" else GaugeMetricFamily
            return cls(m.family, m.help, labels=list(m.labels), unit=m.unit)

        # interfaces
        byt, pkt, drp, err = (fam(f"aifabric_interface_{k}_total")
                              for k in ("bytes", "packets", "drops", "errors"))
        oper = fam("aifabric_interface_oper_up")
        depth, marks = fam("aifabric_queue_depth_bytes"), fam("aifabric_ecn_marked_packets_total")
        util, tier_util = (fam("aifabric_link_utilization_ratio"),
                           fam("aifabric_tier_utilization_ratio"))
        per_tier: dict[tuple[str, str], list[float]] = {}
        for dev in sorted(s.links):
            qs = s.queues.get(dev, {})
            for link in s.links[dev]:
                ifname = link.get("ifname", "")
                labels = self.port_of.get((dev, ifname))
                if labels is None:
                    continue  # lo, bridges: not a cable of the fabric
                st = link.get("stats64") or link.get("stats") or {}
                q = qs.get(ifname)
                for direction in ("rx", "tx"):
                    c = st.get(direction, {})
                    lv = [*labels, direction]
                    byt.add_metric(lv, float(c.get("bytes", 0)))
                    pkt.add_metric(lv, float(c.get("packets", 0)))
                    # tx: the device's drops and the egress queue's (tc counts those)
                    dropped = c.get("dropped", 0) + (q.drops if q and direction == "tx"
                                                     else 0)
                    drp.add_metric(lv, float(dropped))
                    err.add_metric(lv, float(c.get("errors", 0)))
                oper.add_metric(list(labels), 1.0 if link.get("operstate") == "UP" else 0.0)
                if q is not None:
                    depth.add_metric([*labels, "0"], float(q.backlog_bytes))
                    if q.marked is not None:
                        marks.add_metric(list(labels), float(q.marked))
                if self.queues is not None:  # utilization: tx bytes since the last scrape
                    key = (dev, ifname)
                    tx = int(st.get("tx", {}).get("bytes", 0))
                    at = s.links_at.get(dev, s.at)
                    last = self._last_tx.get(key)
                    self._last_tx[key] = (at, tx)
                    if last is not None and at > last[0] and tx >= last[1]:
                        ratio = (tx - last[1]) * 8 / (self.queues.rate_bps * (at - last[0]))
                        direction = "up" if self.end_of[key] == 0 else "down"
                        util.add_metric([*labels, direction], ratio)
                        per_tier.setdefault((labels[3], direction), []).append(ratio)
        for (tier, direction), vals in sorted(per_tier.items()):
            tier_util.add_metric([tier, direction], float(np.mean(vals)))
        yield from (byt, pkt, drp, err, oper, depth, marks, util, tier_util)
        # BGP
        up, uptime, pfx = (fam(n) for n in ("aifabric_bgp_session_up",
                                            "aifabric_bgp_session_uptime_seconds",
                                            "aifabric_bgp_received_prefixes"))
        for sw in sorted(s.bgp):
            for ip, peer in sorted(s.bgp[sw].items()):
                labels = self.session_of.get((sw, ip))
                if labels is None:
                    continue
                est = peer.get("state") == "Established"
                up.add_metric(list(labels), 1.0 if est else 0.0)
                uptime.add_metric(list(labels),
                                  float(peer.get("peerUptimeMsec", 0)) / 1000 if est else 0.0)
                pfx.add_metric(list(labels), float(peer.get("pfxRcd", 0) or 0) if est else 0.0)
        yield from (up, uptime, pfx)
        # ECMP: the kernel beside the twin
        dead = set(dead_switches(s.failures))
        live = [sw for sw in self.switches if sw not in dead and sw in s.routes]
        predicted = self._predicted_groups(s.failures, live)
        hops, planned, pred, drift = (fam(n) for n in (
            "aifabric_ecmp_next_hops", "aifabric_ecmp_planned_next_hops",
            "aifabric_ecmp_predicted_next_hops", "aifabric_twin_drift"))
        node_of = {sw: self.lab.fabric.node_id(sw) for sw in live}
        for sw in live:
            got = verify.route_groups(s.routes[sw], node_of[sw], self.targets, self.gw_link)
            for ip in self.targets:
                lv = [*self.device_of[sw], f"{ip}/32"]
                hops.add_metric(lv, float(_count(got[ip])))
                planned.add_metric(lv, float(_count(self.planned[sw][ip])))
                pred.add_metric(lv, float(_count(predicted[sw][ip])))
                drift.add_metric(lv, float(_drift(got[ip], predicted[sw][ip])))
        yield from (hops, planned, pred, drift)
        # probes
        rtt, loss = fam("aifabric_probe_rtt_seconds"), fam("aifabric_probe_loss_ratio")
        for i, sent, got_, seconds in sorted(s.probes):
            p = self.probes[i]
            if sent:
                loss.add_metric([p.source, p.target], 1.0 - got_ / sent)
            if got_ and not math.isnan(seconds):
                rtt.add_metric([p.source, p.target], seconds)
        yield from (rtt, loss)
        # targets
        tup = fam("aifabric_up")
        for key in sorted(s.up):
            dev, target = key.split("/")
            tup.add_metric([dev, target], 1.0 if s.up[key] else 0.0)
        yield tup

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _json_lines(text: str | None) -> list[Any] | None:
    """The JSON documents of an ``ip -json -batch`` run, one per line (None if unreadable)."""
    if text is None:
        return None
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return None


def _ping_result(text: str | None) -> tuple[int, int, float]:
    """(sent, received, mean round trip in seconds) of a ``ping -q`` summary; a probe
    that could not send (no route out of its port, namespace gone) counts as one echo
    sent and lost."""
    m = _SENT.search(text or "")
    if not m or int(m.group(1)) == 0:
        return 1, 0, math.nan
    r = _RTT.search(text)
    return int(m.group(1)), int(m.group(2)), float(r.group(1)) / 1000 if r else math.nan
