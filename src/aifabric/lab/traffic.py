"""``aifabric lab traffic``: a scenario's flows as real UDP packets between lab hosts.

Each flow of the scenario (built on the lab's scaled fabric exactly as ``aifabric route``
builds it: same patterns, same seed, same per-QP UDP source ports) becomes one UDP
socket in its source host's namespace, bound to the source NIC's address and the flow's
source port (so the host's policy routing picks the NIC's ports and the switches' L4 ECMP
hash sees the flow's entropy) and sending to the destination NIC's address on the
flow's destination port (4791, RoCEv2's). Packets carry ECT(0) in the IP header
(``IP_TOS``: the scenario's DSCP << 2 | 0b10), so the switch ports' RED queues
(:mod:`aifabric.lab.queues`) mark them CE instead of dropping them.

One process does it all, for a bounded time (``seconds``): sockets are opened in each
namespace from a short-lived thread that enters it (``setns``), then one loop paces every
flow at ``flow_bps`` (packets sent on a fixed schedule, never more than a short burst to
catch up) and drains one receiving socket per destination host, which counts the packets,
bytes and CE marks that arrive (``IP_RECVTOS``). Flows inside one host (NVLink) carry no
packets and are counted apart. Nothing is left running when it returns.
"""

from __future__ import annotations

import ctypes
import os
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.lab._system import LabError

__all__ = ["MAX_FLOWS", "TrafficResult", "run_traffic"]

CLONE_NEWNET = 0x40000000
IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
#: setsockopt's buffer size past net.core.rmem_max (needs CAP_NET_ADMIN)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
ECT0 = 0b10
CE = 0b11
#: most flows one run paces (one Python loop sends them all)
MAX_FLOWS = 256
MAX_SECONDS = 3600
PAYLOAD = 1400  # UDP payload bytes: 1428-byte IP packets, under every MTU of the lab


@dataclass
class TrafficResult:
    """What one run sent and what arrived."""

    flows: int  # flows that carried packets (between two hosts)
    local_flows: int  # flows inside one host (no packets)
    seconds: float
    flow_bps: int
    sent_packets: int = 0
    sent_bytes: int = 0  # UDP payload bytes
    send_errors: int = 0  # sends the kernel refused (ENOBUFS, no route)
    received_packets: int = 0
    received_bytes: int = 0
    received_ce: int = 0  # packets that arrived marked CE
    received_ect: int = 0  # packets that arrived ECN-capable and unmarked (ECT(0))
    per_host: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _in_ns(ns: str, make: Any) -> Any:
    """Run ``make()`` in a fresh thread that entered namespace ``ns``; its result
    (sockets keep the namespace they were made in)."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            try:
                if _libc().setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns {ns}")
            finally:
                os.close(fd)
            box["out"] = make()
        except BaseException as exc:  # handed to the caller
            box["err"] = exc

    t = threading.Thread(target=body, name=f"netns-{ns}")
    t.start()
    t.join()
    if "err" in box:
        raise box["err"]
    return box["out"]


def _flows(lab: Any, scenario: Path) -> tuple[Any, Any]:
    from aifabric.routing.scenario import load_scenario, scenario_traffic

    sc = load_scenario(scenario)
    return sc, scenario_traffic(sc, lab.fabric).flows


def run_traffic(lab: Any, scenario: Path, seconds: float, flow_mbit: float | None = None,
                progress: Any = None) -> TrafficResult:
    """Send the flows of ``scenario`` between the hosts of ``lab`` for ``seconds``, each
    at ``flow_mbit`` Mbit/s (default the lab's port rate: a flow fills a port, so two
    flows on one port congest it). SpecError naming the option or the scenario's field
    on bad input; LabError when a namespace is gone."""
    from aifabric.configs.addressing import ip_str
    from aifabric.lab.queues import DEFAULT_PORT_MBIT, Queues

    if not 0 < seconds <= MAX_SECONDS:
        raise SpecError(Problem("--seconds", f"{seconds:g} is out of range; allowed: more "
                                f"than 0 and at most {MAX_SECONDS}"))
    q = Queues.from_state(lab.state.get("queues"))
    if flow_mbit is None:
        flow_mbit = q.rate_bps / 1e6 if q else DEFAULT_PORT_MBIT
    if not 0.01 <= flow_mbit <= 10000:
        raise SpecError(Problem("--flow-mbit", f"{flow_mbit:g} is out of range; allowed: "
                                "0.01-10000 Mbit/s per flow"))
    sc, fl = _flows(lab, scenario)
    f = lab.fabric
    remote = np.flatnonzero((fl.src_nic >= 0) & (fl.dst_nic >= 0))
    if len(remote) > MAX_FLOWS:
        raise SpecError(Problem("traffic", f"{len(remote)} flows between hosts on the lab's "
                                f"fabric; allowed: at most {MAX_FLOWS} (one loop paces them)",
                                sc.file))
    if not len(remote):
        raise SpecError(Problem("traffic", "no flow between two hosts on the lab's fabric; "
                                "allowed: a pattern whose GPUs are on different hosts",
                                sc.file))
    host_name = f.nodes.name[f.host_node].astype(str)
    src_host = host_name[f.nodes.host[fl.src_nic[remote]]]
    dst_host = host_name[f.nodes.host[fl.dst_nic[remote]]]
    src_ip = ip_str(fl.src_ip[remote])
    dst_ip = ip_str(fl.dst_ip[remote])
    sport = fl.sport[remote].astype(int)
    dport = fl.dport[remote].astype(int)
    nic = getattr(getattr(sc, "packet", None), "nic", None)
    dscp = int(getattr(nic, "dscp", 26))  # the packet model's RoCE DSCP (26 by default)
    tos = (dscp << 2) | ECT0
    ns = lab.layout.ns
    step = progress or (lambda _m: None)
    res = TrafficResult(len(remote), len(fl) - len(remote), float(seconds),
                        int(flow_mbit * 1e6))
    socks: list[socket.socket] = []
    try:
        # receivers: one socket per destination host and port
        rx: dict[int, str] = {}
        for host, port in sorted({(str(h), int(p)) for h, p in zip(dst_host, dport,
                                                                    strict=True)}):
            def make_rx(port: int = port) -> socket.socket:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:  # root (the lab): past net.core.rmem_max, so a receiver that a
                    # busy machine leaves waiting does not overflow its socket
                    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
                except OSError:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
                s.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
                s.bind(("0.0.0.0", port))
                s.setblocking(False)
                return s
            s = _in_ns(ns[host], make_rx)
            socks.append(s)
            rx[s.fileno()] = host
            res.per_host.setdefault(host, {"received_packets": 0, "received_bytes": 0,
                                           "received_ce": 0, "received_ect": 0})
        tx: list[socket.socket] = []
        for i in range(len(remote)):
            def make_tx(i: int = i) -> socket.socket:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
                s.bind((str(src_ip[i]), int(sport[i])))
                s.connect((str(dst_ip[i]), int(dport[i])))
                s.setblocking(False)
                return s
            s = _in_ns(ns[str(src_host[i])], make_tx)
            socks.append(s)
            tx.append(s)
    except FileNotFoundError as exc:
        for s in socks:
            s.close()
        raise LabError(f"a namespace of the lab is gone ({exc.filename}); is the lab up?"
                       ) from None
    except OSError as exc:
        for s in socks:
            s.close()
        raise LabError(f"cannot open the flows' sockets: {exc}") from None
    step(f"sending {len(tx)} flows for {seconds:g} s at {flow_mbit:g} Mbit/s each")
    try:
        _loop(res, tx, socks[: len(rx)], rx, seconds)
    finally:
        for s in socks:
            s.close()
    return res


def _loop(res: TrafficResult, tx: list[socket.socket], rxs: list[socket.socket],
          rx_host: dict[int, str], seconds: float) -> None:
    payload = bytes(PAYLOAD)
    gap = PAYLOAD * 8 / res.flow_bps  # seconds between a flow's packets
    n = len(tx)
    sel = selectors.DefaultSelector()
    for s in rxs:
        sel.register(s, selectors.EVENT_READ)
    t0 = time.monotonic()
    end = t0 + seconds
    # flows start spread over one gap, so they do not send in lockstep
    due = t0 + gap * np.arange(n) / max(n, 1)
    cmsg = socket.CMSG_SPACE(4)

    def drain(s: socket.socket) -> None:
        host = rx_host[s.fileno()]
        ph = res.per_host[host]
        for _ in range(256):
            try:
                data, anc, _flags, _addr = s.recvmsg(65536, cmsg)
            except (BlockingIOError, InterruptedError):
                return
            ph["received_packets"] += 1
            ph["received_bytes"] += len(data)
            for level, kind, value in anc:
                if level == socket.IPPROTO_IP and kind == socket.IP_TOS and value:
                    ecn = value[0] & 0b11
                    ph["received_ce"] += ecn == CE
                    ph["received_ect"] += ecn == ECT0

    try:
        while True:
            now = time.monotonic()
            if now >= end:
                break
            late = np.flatnonzero(due <= now)
            for i in late.tolist():
                burst = min(8, int((now - due[i]) / gap) + 1)
                for _ in range(burst):
                    try:
                        tx[i].send(payload)
                        res.sent_packets += 1
                        res.sent_bytes += PAYLOAD
                    except (BlockingIOError, OSError):
                        res.send_errors += 1
                due[i] += gap * burst
                if due[i] < now - 8 * gap:  # far behind (a slow machine): skip, not burst
                    due[i] = now
            wait = max(0.0, min(float(due.min()), end) - time.monotonic())
            for key, _ev in sel.select(timeout=wait):
                drain(key.fileobj)  # type: ignore[arg-type]
        # what is still in flight: queues of at most a few tens of ms
        stop = time.monotonic() + 0.3
        while time.monotonic() < stop:
            for key, _ev in sel.select(timeout=0.05):
                drain(key.fileobj)  # type: ignore[arg-type]
    finally:
        sel.close()
    for ph in res.per_host.values():
        res.received_packets += ph["received_packets"]
        res.received_bytes += ph["received_bytes"]
        res.received_ce += ph["received_ce"]
        res.received_ect += ph["received_ect"]
