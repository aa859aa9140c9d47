"""Every metric aifabric exports, in one list: the live lab's exporter (``aifabric monitor
lab``) and a finished simulation (``aifabric metrics RUN_DIR``) both take names, types,
units, label names and help texts from here, and the alert rules and dashboards query
only names listed here.

Naming follows Prometheus' conventions: an ``aifabric_`` prefix, base units in the name
(``_bytes``, ``_seconds``, ``_ratio``), counters end in ``_total`` (:attr:`Metric.name` is
the series name a PromQL query uses; :attr:`Metric.family` is the OpenMetrics family,
without ``_total``). The same quantity has the same name whichever producer emits it.

Label vocabulary (a label a sample does not have is simply absent or empty):

- ``device``: the switch or host name of the plan (a NIC port's device is its host);
- ``port``: the interface on ``device`` (``Ethernet12`` on a switch, ``ens5f1`` on a host);
- ``peer``: the device at the other end of the port's link;
- ``tier``: the link's tier (``access``, ``leaf_spine``, ``spine_core``; ``pcie``,
  ``scaleup`` inside a host) — :class:`~aifabric.topology.fabric.LinkKind` labels;
- ``plane``, ``rail``, ``segment``: the link's plane, rail and segment index ("" where
  not applicable);
- ``direction``: ``rx``/``tx`` for interface counters and PFC frames (received/sent
  on ``port``); ``up``/``down`` for a link direction (``up`` = towards the core);
- ``priority``: the traffic class (0-7) of a port's egress queue;
- ``destination``: a route's prefix; ``source``/``target``: a probe's two NIC ports;
- ``collective``, ``job``, ``op``: a collective of the simulated workload
  (``training_job`` where the series also carries port labels: Prometheus renames a
  ``job`` label of imported or scraped samples to ``exported_job``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:  # the label functions import it when called: CATALOG alone stays light
    from aifabric.topology.fabric import Fabric

__all__ = ["CATALOG", "DEVICE_LABELS", "PORT_LABELS", "QUEUE_METRICS", "Metric", "arc_labels",
           "by_name", "device_labels", "port_labels"]

#: the labels that place a fabric port (``port_labels`` gives their values)
PORT_LABELS = ("device", "port", "peer", "tier", "plane", "rail", "segment")
#: the labels that place a device (``device_labels`` gives their values)
DEVICE_LABELS = ("device", "tier", "plane", "rail", "segment")


@dataclass(frozen=True)
class Metric:
    """One metric family: ``name`` as queried (counters end in ``_total``), ``type``,
    ``unit`` (``bytes``, ``seconds``, ``ratio`` or ""; the name ends with it), label
    names, help text, and who emits it (``lab``: the live exporter, ``sim``: ``aifabric
    metrics`` from a flow or packet run)."""

    name: str
    type: Literal["counter", "gauge"]
    unit: str
    labels: tuple[str, ...]
    help: str
    sources: tuple[str, ...] = ("lab",)

    @property
    def family(self) -> str:
        """The OpenMetrics family name (a counter's name without ``_total``)."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name

    def __post_init__(self) -> None:
        assert self.name.startswith("aifabric_"), self.name
        assert (self.type == "counter") == self.name.endswith("_total"), self.name
        assert not self.unit or self.family.endswith("_" + self.unit), self.name


_P = PORT_LABELS
_D = DEVICE_LABELS
_LAB, _SIM, _BOTH = ("lab",), ("sim",), ("lab", "sim")

CATALOG: tuple[Metric, ...] = (
    # ---- interfaces (lab: kernel counters of every namespace; sim: packet runs' ports)
    Metric("aifabric_interface_bytes_total", "counter", "bytes", (*_P, "direction"),
           "Bytes received (rx) or sent (tx) on the port.", _BOTH),
    Metric("aifabric_interface_packets_total", "counter", "", (*_P, "direction"),
           "Packets received (rx) or sent (tx) on the port.", _LAB),
    Metric("aifabric_interface_drops_total", "counter", "", (*_P, "direction"),
           "Packets dropped on the port (rx: on arrival, tx: egress queue full; the "
           "lab adds its egress queue's drops, tc's, to the device's).", _BOTH),
    Metric("aifabric_interface_errors_total", "counter", "", (*_P, "direction"),
           "Errored frames on the port (CRC, FCS, framing).", _LAB),
    Metric("aifabric_interface_oper_up", "gauge", "", _P,
           "1 when the port's operational state is up, 0 when down.", _LAB),
    # ---- BGP (FRR's show bgp summary json through vtysh)
    Metric("aifabric_bgp_session_up", "gauge", "", _P,
           "1 when the BGP session on the port is Established, else 0.", _LAB),
    Metric("aifabric_bgp_session_uptime_seconds", "gauge", "seconds", _P,
           "Time since the BGP session on the port was established (0 when down).", _LAB),
    Metric("aifabric_bgp_received_prefixes", "gauge", "", _P,
           "Prefixes received from the BGP peer on the port.", _LAB),
    # ---- ECMP: the kernel's next hops beside the twin's prediction
    Metric("aifabric_ecmp_next_hops", "gauge", "", (*_D, "destination"),
           "Next hops of the route to destination in the device's kernel FIB.", _LAB),
    Metric("aifabric_ecmp_planned_next_hops", "gauge", "", (*_D, "destination"),
           "Next hops the twin's routing model predicts for the route to destination in "
           "the fabric as planned (every link up).", _LAB),
    Metric("aifabric_ecmp_predicted_next_hops", "gauge", "", (*_D, "destination"),
           "Next hops the twin's routing model predicts for the route to destination with "
           "the links as they are (the failures the lab injected).", _LAB),
    Metric("aifabric_twin_drift", "gauge", "", (*_D, "destination"),
           "Next hops in the kernel's group or the twin's predicted one but not both "
           "(0: kernel and twin agree).", _LAB),
    # ---- probes and targets
    Metric("aifabric_probe_rtt_seconds", "gauge", "seconds", ("source", "target"),
           "Round-trip time of the last ping between two NIC ports.", _LAB),
    Metric("aifabric_probe_loss_ratio", "gauge", "ratio", ("source", "target"),
           "Fraction of the last probe's pings between two NIC ports that were lost.", _LAB),
    Metric("aifabric_up", "gauge", "", ("device", "target"),
           "1 when the exporter could read target (kernel, frr) in the device's "
           "namespace during the last scrape, else 0.", _LAB),
    # ---- links and queues (lab: the switch ports' tc queues, aifabric.lab.queues)
    Metric("aifabric_link_utilization_ratio", "gauge", "ratio", (*_P, "direction"),
           "Bytes the port sent in the sample interval over what the link carries in "
           "that time (up: towards the core; a frame counts when it starts, so one "
           "interval may show up to a frame more than 1; lab: since the previous "
           "scrape, over the lab's shaped port rate).", _BOTH),
    Metric("aifabric_queue_depth_bytes", "gauge", "bytes", (*_P, "priority"),
           "Bytes in the port's egress queue of the priority (lab: its one queue, "
           "priority 0, tc's backlog).", _BOTH),
    Metric("aifabric_ecn_marked_packets_total", "counter", "", _P,
           "Packets ECN-marked (CE) by the port's egress queues (lab: RED's marked "
           "count; absent where the queue cannot mark).", _BOTH),
    Metric("aifabric_pfc_pause_frames_total", "counter", "", (*_P, "priority", "direction"),
           "PFC pause frames of the priority sent (tx) or received (rx) on the port.",
           _SIM),
    Metric("aifabric_pfc_paused_seconds_total", "counter", "seconds", (*_P, "priority"),
           "Time the port's egress queue of the priority was held by PFC pause.", _SIM),
    Metric("aifabric_cnp_received_total", "counter", "", _P,
           "Congestion notification packets (RoCEv2 CNP) received by the NIC port's "
           "senders.", _SIM),
    Metric("aifabric_retransmitted_bytes_total", "counter", "bytes", _P,
           "Bytes the NIC port's senders sent again (go-back-N / selective repeat).",
           _SIM),
    Metric("aifabric_tier_utilization_ratio", "gauge", "ratio", ("tier", "direction"),
           "Mean utilization of the tier's links in the direction over the interval "
           "that starts at the sample (the run's timeline; lab: since the previous "
           "scrape).", _BOTH),
    Metric("aifabric_collective_progress_ratio", "gauge", "ratio",
           ("collective", "training_job", "op"),
           "Fraction of the collective's bytes delivered, each transfer counted at a "
           "constant rate from its start to its end.", _SIM),
    Metric("aifabric_collective_link_bytes", "gauge", "bytes",
           ("collective", "training_job", *_P, "direction"),
           "Bytes the collective puts on the link direction over the run, repeats "
           "included (the links its routed transfers cross; the same value at every "
           "sample, so it joins other series at any time of the run).", _SIM),
)

_BY_NAME = {m.name: m for m in CATALOG}

#: what only a lab with queues (``lab up --queues``, :mod:`aifabric.lab.queues`) exports:
#: a lab without them has no port rate (no utilization) and no queue to read; the ECN
#: marks need RED
QUEUE_METRICS = ("aifabric_link_utilization_ratio", "aifabric_queue_depth_bytes",
                 "aifabric_ecn_marked_packets_total", "aifabric_tier_utilization_ratio")


def by_name(name: str) -> Metric:
    """The catalog entry called ``name`` (KeyError if none)."""
    return _BY_NAME[name]


def _idx(a: np.ndarray) -> np.ndarray:
    """Integer attributes as label strings; -1 (not applicable) becomes ""."""
    s = a.astype(np.int64).astype(str).astype(object)
    s[a < 0] = ""
    return s


def device_names(f: Fabric, nodes: np.ndarray) -> np.ndarray:
    """The device owning each node (a NIC port's device is its host), as strings."""
    from aifabric.topology.fabric import NodeKind

    nodes = np.asarray(nodes, dtype=np.int64)
    own = nodes.copy()
    nic = f.nodes.kind[nodes] == NodeKind.NIC
    own[nic] = f.host_node[f.nodes.host[nodes[nic]]]
    return f.nodes.name[own].astype(object)


def port_names(f: Fabric, nodes: np.ndarray, ports: np.ndarray) -> np.ndarray:
    """The interface name of each (node, port): ``Ethernet<port>`` on a switch,
    ``ens<nic>f<port>`` on a NIC port, ``port<port>`` elsewhere (as
    :meth:`Fabric.port_name`, vectorised)."""
    from aifabric.topology.fabric import NodeKind

    nodes = np.asarray(nodes, dtype=np.int64)
    ports = np.asarray(ports, dtype=np.int64)
    kind = f.nodes.kind[nodes]
    out = np.char.add("port", ports.astype(str)).astype(object)
    sw = f.is_switch[nodes]
    out[sw] = np.char.add("Ethernet", ports[sw].astype(str))
    nic = kind == NodeKind.NIC
    out[nic] = np.char.add(np.char.add(np.char.add("ens", f.nodes.rail[nodes[nic]].astype(str)),
                                       "f"), f.nodes.side[nodes[nic]].astype(str))
    return out


def port_labels(f: Fabric, links: np.ndarray, end: np.ndarray | int) -> dict[str, np.ndarray]:
    """Label values (:data:`PORT_LABELS`) of the port at ``end`` (0: the link's ``a``
    end, 1: ``b``) of each link: object arrays of strings, one entry per link given.

    ``port`` is the interface name (:meth:`Fabric.port_name`) on switches and NIC ports;
    a GPU or a host's scale-up switch has no interface names, so there ``port`` is the
    node at the other end (a GPU's PCIe links to two NIC ports stay two series)."""
    from aifabric.topology.fabric import LinkKind, NodeKind

    links = np.asarray(links, dtype=np.int64)
    end = np.broadcast_to(np.asarray(end, dtype=np.int64), links.shape)
    L = f.links
    here = np.where(end == 0, L.a[links], L.b[links])
    there = np.where(end == 0, L.b[links], L.a[links])
    port = np.where(end == 0, L.a_port[links], L.b_port[links])
    tiers = np.array([k.label for k in LinkKind], dtype=object)
    names = port_names(f, here, port)
    inside = ~f.is_switch[here] & (f.nodes.kind[here] != NodeKind.NIC)
    names[inside] = f.nodes.name[there[inside]]
    return {"device": device_names(f, here), "port": names,
            "peer": device_names(f, there), "tier": tiers[L.kind[links]],
            "plane": _idx(L.plane[links]), "rail": _idx(L.rail[links]),
            "segment": _idx(L.segment[links])}


def arc_labels(f: Fabric, arcs: np.ndarray) -> dict[str, np.ndarray]:
    """Labels of directed arcs (arc ``2l`` = link ``l`` up, sent from its ``a`` end):
    :func:`port_labels` of the sending port plus ``direction`` (``up``/``down``)."""
    arcs = np.asarray(arcs, dtype=np.int64)
    out = port_labels(f, arcs // 2, arcs % 2)
    out["direction"] = np.array(["up", "down"], dtype=object)[arcs % 2]
    return out


def device_labels(f: Fabric, nodes: np.ndarray) -> dict[str, np.ndarray]:
    """Label values (:data:`DEVICE_LABELS`) of devices given by node id; ``tier`` is
    the device kind (``tor``, ``agg``, ``core``, ``host``)."""
    from aifabric.topology.fabric import NodeKind

    nodes = np.asarray(nodes, dtype=np.int64)
    kinds = np.array([k.label for k in NodeKind], dtype=object)
    return {"device": device_names(f, nodes), "tier": kinds[f.nodes.kind[nodes]],
            "plane": _idx(f.nodes.plane[nodes]), "rail": _idx(f.nodes.rail[nodes]),
            "segment": _idx(f.nodes.segment[nodes])}
