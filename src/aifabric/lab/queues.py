"""Egress queues on every switch port of the lab: a shaper and an ECN-marking queue.

A veth sends as fast as the CPU copies, so without a shaper no queue ever forms in the
lab and there is nothing to mark, drop or measure. ``lab up`` (``--queues``, default
``auto``) installs on every switch port, in the switch's namespace:

* an HTB root (``handle 1:``) whose one class ``1:1`` sends at the lab's port rate
  (``--port-mbit``, default 10 Mbit/s): the port's capacity in the lab, the
  denominator of ``aifabric_link_utilization_ratio``;
* under it (``handle 10:``) the queue that holds what the shaper cannot send yet:

  - ``red``: Linux RED with ``ecn`` -- an ECN-capable packet (ECT(0)/ECT(1)) is marked
    CE instead of dropped once the average queue passes ``min`` (probability rising
    to ``probability`` at ``max``); ``min``/``max`` are 5 ms and 15 ms of the port
    rate, ``limit`` 50 ms (the same step-like marking the packet simulator's
    ``kmin``/``kmax`` describe, at the lab's rate);
  - ``fifo``: a byte FIFO (``bfifo``) of the same ``limit``: drop-tail, no marks --
    for kernels built without ``sch_red`` (CONFIG_NET_SCH_RED);
  - ``auto``: ``red`` where the kernel has it, else ``fifo`` (``lab up`` says which).

Every host's NIC ports get the same shaper over a drop-tail FIFO (a NIC sends no
faster than its link; it marks nothing), so a link's rate holds in both directions.
``none`` leaves the kernel's default (no shaper: no queue, no utilization). What was
installed is kept in the lab's ``state.json`` (``queues``) for the exporter and
``lab traffic``. The exporter reads the counters back with ``tc -s -j qdisc show``
(:func:`read_queues`).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.lab._system import LabError

__all__ = ["DEFAULT_PORT_MBIT", "QUEUE_KINDS", "PortQueue", "Queues", "install_queues",
           "parse_queues", "read_queues"]

QUEUE_KINDS = ("auto", "red", "fifo", "none")
DEFAULT_PORT_MBIT = 10
#: the queue thresholds, in milliseconds of the port rate
RED_MIN_MS, RED_MAX_MS, LIMIT_MS = 5.0, 15.0, 50.0
RED_PROBABILITY = 0.1
AVPKT = 1000


@dataclass(frozen=True)
class Queues:
    """What ``lab up`` installs on every switch port (kind after ``auto`` is resolved)."""

    kind: str  # red | fifo | none (auto before install)
    rate_bps: int
    min_bytes: int
    max_bytes: int
    limit_bytes: int
    probability: float = RED_PROBABILITY

    def as_state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state(cls, d: dict[str, Any] | None) -> Queues | None:
        if not d or d.get("kind") in (None, "none"):
            return None
        return cls(**{k: d[k] for k in ("kind", "rate_bps", "min_bytes", "max_bytes",
                                          "limit_bytes", "probability")})


def parse_queues(kind: str, port_mbit: float) -> Queues:
    """``--queues`` and ``--port-mbit`` -> :class:`Queues`; SpecError naming the option."""
    if kind not in QUEUE_KINDS:
        raise SpecError(Problem("--queues", f"{kind!r} is not a queue kind; allowed: "
                                + ", ".join(QUEUE_KINDS)))
    if not 1 <= port_mbit <= 10000:
        raise SpecError(Problem("--port-mbit", f"{port_mbit:g} is out of range; allowed: "
                                "1-10000 Mbit/s (the lab's shaped port rate)"))
    rate = int(port_mbit * 1_000_000)
    per_ms = rate / 8 / 1000
    return Queues(kind, rate, int(RED_MIN_MS * per_ms), int(RED_MAX_MS * per_ms),
                  int(LIMIT_MS * per_ms))


def _batch(q: Queues, kind: str, ports: list[str], *, leaf_only: bool = False) -> str:
    rate = f"{q.rate_bps}bit"
    burst = max(1, (2 * q.min_bytes + q.max_bytes) // (3 * AVPKT))
    leaf = (f"red limit {q.limit_bytes} min {q.min_bytes} max {q.max_bytes} avpkt {AVPKT} "
            f"burst {burst} probability {q.probability} bandwidth {rate} ecn"
            if kind == "red" else f"bfifo limit {q.limit_bytes}")
    lines = []
    for p in ports:
        if not leaf_only:
            lines += [f"qdisc add dev {p} root handle 1: htb default 1",
                      f"class add dev {p} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
                      "quantum 9200"]
        lines.append(f"qdisc add dev {p} parent 1:1 handle 10: {leaf}")
    return "\n".join(lines) + "\n"


def _tc_batch(ns: str, text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tc", "-n", ns, "-batch", "-"], input=text, capture_output=True,
                          text=True, timeout=60, check=False)


def install_queues(q: Queues, ports: dict[str, list[str]],
                   nic_ports: dict[str, list[str]] | None = None) -> Queues:
    """Install ``q`` on ``ports`` (namespace -> switch interfaces) and the shaper with a
    drop-tail FIFO on ``nic_ports`` (namespace -> host interfaces: a NIC sends no faster
    than its link and marks nothing); returns ``q`` with ``auto`` resolved. LabError
    when ``red`` is asked of a kernel without sch_red or ``tc`` fails."""
    if q.kind == "none" or not ports:
        return q
    kind = "red" if q.kind in ("auto", "red") else "fifo"
    items = sorted(ports.items())
    first_ns, first_ports = items[0]
    # the first port tells whether this kernel has RED (the shaper is added first)
    r = _tc_batch(first_ns, _batch(q, kind, first_ports[:1]))
    if r.returncode != 0 and kind == "red" and "unknown" in r.stderr.lower():
        if q.kind == "red":
            raise LabError("this kernel has no RED qdisc (sch_red, CONFIG_NET_SCH_RED): "
                           "use --queues fifo (drop-tail, no ECN marks) or auto")
        kind = "fifo"
        r = _tc_batch(first_ns, _batch(q, kind, first_ports[:1], leaf_only=True))
    if r.returncode != 0:
        raise LabError(f"tc in {first_ns}: {r.stderr.strip()[-300:]}")
    items = [(ns, p[1:] if ns == first_ns else p) for ns, p in items]
    items = [(ns, p) for ns, p in items if p]
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(ns, _batch(q, kind, p)) for ns, p in items]
    jobs += [(ns, _batch(q, "fifo", p)) for ns, p in sorted((nic_ports or {}).items())]
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda it: (it[0], _tc_batch(it[0], it[1])), jobs))
    for ns, res in results:
        if res.returncode != 0:
            raise LabError(f"tc in {ns}: {res.stderr.strip()[-300:]}")
    return Queues(kind, q.rate_bps, q.min_bytes, q.max_bytes, q.limit_bytes, q.probability)


@dataclass(frozen=True)
class PortQueue:
    """One port's queue counters as ``tc -s`` reads them (cumulative since install)."""

    sent_bytes: int  # the root's bytes (what the shaper let out)
    sent_packets: int
    drops: int  # packets the queue dropped (the root counts its child's)
    backlog_bytes: int  # bytes queued now
    marked: int | None  # packets RED marked CE (None: the queue does not mark)


def parse_qdiscs(text: str) -> dict[str, PortQueue]:
    """``tc -s -j qdisc show`` of one namespace -> interface -> its queue (ports without
    the lab's HTB root are left out)."""
    try:
        items = json.loads(text or "[]")
    except ValueError:
        return {}
    roots: dict[str, dict[str, Any]] = {}
    leaves: dict[str, dict[str, Any]] = {}
    for it in items:
        dev = it.get("dev")
        if not dev:
            continue
        if it.get("root") and it.get("kind") == "htb" and it.get("handle") == "1:":
            roots[dev] = it
        elif it.get("handle") == "10:" and it.get("parent") == "1:1":
            leaves[dev] = it
    out = {}
    for dev, root in roots.items():
        leaf = leaves.get(dev, {})
        marked = None
        if leaf.get("kind") == "red":
            x = leaf.get("xstats", leaf)
            marked = int(x.get("marked", 0))
        out[dev] = PortQueue(int(root.get("bytes", 0)), int(root.get("packets", 0)),
                             int(root.get("drops", 0)), int(root.get("backlog", 0)), marked)
    return out


def read_queues(ns: str, timeout_s: float = 5.0) -> dict[str, PortQueue] | None:
    """The queues of namespace ``ns`` (None when ``tc`` does not answer in time)."""
    try:
        r = subprocess.run(["tc", "-n", ns, "-s", "-j", "qdisc", "show"], capture_output=True,
                           text=True, timeout=timeout_s, check=False)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return parse_qdiscs(r.stdout) if r.returncode == 0 else None


def switch_ports(lay: Any, hosts: bool = False) -> dict[str, list[str]]:
    """namespace -> the cable interfaces of every switch (``hosts``: of every host) of a
    lab's layout."""
    sw = set(lay.hosts if hosts else lay.switches)
    dev_of = {ns: d for d, ns in lay.ns.items()}
    out: dict[str, list[str]] = {}
    for lk in lay.links:
        for ns, ifname in ((lk.ns_a, lk.if_a), (lk.ns_b, lk.if_b)):
            if dev_of[ns] in sw:
                out.setdefault(ns, []).append(ifname)
    return out
