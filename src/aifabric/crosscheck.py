"""Exports of a scenario for cross-checking the packet simulator against the reference
simulators users compare it with: ns-3's RDMA simulator (the HPCC repository,
alibaba-edu/High-Precision-Congestion-Control, ``simulation/mix/``) and htsim
(Broadcom/csg-htsim, ``sim/datacenter/``).

* ``ns3-rdma``: ``topology.txt`` (``node_num switch_num link_num``, the switch ids, then
  ``src dst rate delay error_rate`` per link), ``flow.txt`` (the count, then ``src dst
  priority dport size start_time`` per QP, by start time), ``config.txt`` (the keys
  ``scratch/third.cc`` reads: CC, DCQCN, HPCC, ECN maps by link rate, buffer, MTU, ACKs),
  ``trace.txt`` (no node traced) and ``run.sh``.
* ``htsim``: ``connections.cm`` (``Nodes N``, ``Connections M``, then ``src->dst id k
  start <ps> size <bytes>`` per QP), ``fabric.topo`` (``FatTreeTopology::load``'s format:
  tiers, radixes, speeds, latencies) and ``run.sh`` (the ``htsim_roce`` command line).

Both folders get a ``NOTES.md``: which of this scenario's settings map one to one, which
approximately, and which have no equivalent. Hosts of the reference simulators are the
fabric's NIC ports (the packet simulator runs NIC to NIC too); every QP of a connection is
one flow, with the bytes the packet simulator gives it. Pure: no files are written here
(:func:`export_scenario` returns the texts; the CLI writes them atomically).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["FORMATS", "START_TIMES", "CrossExport", "QpFlows", "export_scenario",
           "htsim_files", "ns3_files", "scenario_flows", "uet_htsim_files"]

FORMATS = ("ns3-rdma", "htsim", "uet-htsim")
START_TIMES = ("zero", "flow")
#: CC_MODE of ns-3's RDMA simulator (mix/config_doc.txt: 1 DCQCN, 3 HPCC, 7 TIMELY,
#: 8 DCTCP); 0 is no documented mode: the code then reacts to no feedback
NS3_CC_MODE = {"none": 0, "dcqcn": 1, "hpcc": 3, "timely": 7, "dctcp": 8}
#: the UDP destination port of every flow (the HPCC repository's traffic generator: 100)
NS3_DPORT = 100
#: sizes the reference simulators read: ns-3 uint32 bytes, htsim a 32-bit int
NS3_MAX_SIZE = (1 << 32) - 1
HTSIM_MAX_SIZE = (1 << 31) - 1
PS_PER_NS = 1000
#: ns-3's RDMA simulator: node ids in 16 bits of 11.x.y.1 (third.cc node_id_to_ip), and
#: SwitchMmu::pCnt = 257 ports of which 1..256 are switch ports
NS3_MAX_NODES = 1 << 16
NS3_MAX_PORTS = 256
#: htsim's RoCE packets: ``-mtu`` is the payload (Packet::data_packet_size) and every
#: data packet carries RocePacket::ACKSIZE = 64 bytes on top; every packet of a flow is a
#: full one (RoceSrc::send_packet sends _mss bytes each time)
HTSIM_HEADER_BYTES = 64
#: ports per switch htsim's FatTreeTopology can build (fat_tree_topology.cpp asserts
#: ``addPort(...) < 96`` on a ToR and ``< 64`` on an agg or core switch)
HTSIM_MAX_PORTS = {"ToR": 96, "agg": 64, "core": 64}


@dataclass
class QpFlows:
    """One flow per QP, sorted by start time: NIC node ids of the fabric, bytes, start."""

    src: np.ndarray  # int64 fabric node id of the sending NIC port
    dst: np.ndarray  # int64 fabric node id of the receiving NIC port
    size_bytes: np.ndarray  # int64
    start_ns: np.ndarray  # float64
    inside_hosts: int = 0  # transfers that never leave a host (NVLink): not exported
    start_times: str = "zero"


@dataclass
class CrossExport:
    """What an export writes (relative path -> text) and what it counted."""

    files: dict[str, str]
    hosts: int
    switches: int
    links: int
    flows: int
    notes: list[tuple[str, str, str]] = field(default_factory=list)  # setting, how, detail


def _refuse(option: str, message: str) -> SpecError:
    return SpecError(Problem(option, message))


def _cat(*parts: Any) -> np.ndarray:
    out: Any = ""
    for p in parts:
        out = np.strings.add(out, p if isinstance(p, str) else np.asarray(p).astype(np.str_))
    return np.asarray(out)


def _lines(*columns: Any) -> str:
    """Space-separated rows from equal-length columns, vectorised (no loop over rows)."""
    parts: list[Any] = []
    for i, c in enumerate(columns):
        if i:
            parts.append(" ")
        parts.append(c)
    rows = _cat(*parts)
    return "".join(np.strings.add(rows, "\n").tolist()) if len(rows) else ""


def _workload_field(scn: Any) -> str:
    """The scenario field that holds its transfers (``workload``, ``collectives`` or
    ``traffic``): what a refusal about the transfers names."""
    for name in ("workload", "collectives", "traffic"):
        if getattr(scn, name, None):
            return name
    return "traffic"


def scenario_flows(scn: Any, f: Fabric, *, start_times: str = "zero",
                   fmt: str = "ns3-rdma") -> QpFlows:
    """The QPs of ``scn`` on ``f`` as the packet simulator runs them: routed like
    :func:`aifabric.sim.run.simulate` (same policy, seed, pinned paths), a transfer split
    evenly over its connection's QPs, each QP from its first NIC port to its last.

    ``start_times``: ``zero`` — every transfer starts at 0, which is what the packet
    simulator does only when no stage waits for another (traffic patterns, one-step
    collectives); anything else is refused. ``flow`` — each transfer starts when the
    flow-level simulation (``sim: flow``) starts it: the DAG's order, without its
    dependencies (ns-3's flow file cannot wait for a flow to finish; htsim's connection
    matrix has triggers that could, which this export does not write). Repeated stages (a
    ring's 2(n-1) steps) are refused in both modes."""
    from aifabric.sim.packet.run import flow_routes
    from aifabric.sim.paths import route_dag
    from aifabric.sim.run import compile_workload
    from aifabric.workload.dag import COMPUTE

    if start_times not in START_TIMES:
        raise _refuse("--start-times", f"{start_times!r} is not a start-time source; "
                      f"allowed: {', '.join(START_TIMES)}")
    if scn.failures:
        raise _refuse("failures", f"{len(scn.failures)} failures: the exports have no "
                      "failed links (ns-3's LINK_DOWN takes one link down at a time, htsim's "
                      "fat-tree file none); allowed: a scenario without failures")
    wl = compile_workload(scn, f)
    dag = wl.dag
    npred = np.diff(dag.dep_ptr)
    rep = np.flatnonzero(dag.repeat > 1)
    if len(rep):
        why = ("htsim's connection matrix would need triggers to start a flow when "
               "another finishes (not exported yet)" if fmt == "htsim" else
               "ns-3's flow file cannot wait for a flow to finish")
        raise _refuse(_workload_field(scn), f"--format {fmt}: repeated stages: {len(rep)} "
                      f"(the first: {_stage_label(dag, int(rep[0]))!r}, "
                      f"{int(dag.repeat[rep[0]])} times, each after the previous one): "
                      f"{why}; allowed: traffic patterns, or collectives whose steps do "
                      "not repeat (alltoall, p2p); --start-times cannot change this")
    waits = np.flatnonzero((npred > 0) | (dag.stage_kind == COMPUTE))
    if start_times == "zero" and len(waits):
        raise _refuse("--start-times", f"stages that wait for others or for compute: "
                      f"{len(waits)} (the first: {_stage_label(dag, int(waits[0]))!r}): the "
                      "exported flows would all start at 0; allowed: --start-times flow "
                      "(each transfer starts when the flow-level simulation starts it), "
                      "or a scenario of traffic patterns")
    paths, xconn = route_dag(f, dag, scn.spec.routing, failures=None,
                             seed=int(scn.seed or 0),
                             pinned=wl.pinned or None)
    if start_times == "flow":
        from aifabric.sim.flow.engine import run_flow

        x_start = np.nan_to_num(run_flow(dag, paths, xconn,
                                         tolerance=scn.tolerance).xfer_start_ns, nan=0.0)
    else:
        x_start = np.zeros(dag.n_transfers)
    routes = flow_routes(f, paths)
    src, dst, _ = f.arcs
    kind = f.nodes.kind
    first = np.array([src[r[0]] if r else -1 for r in routes], dtype=np.int64)
    last = np.array([dst[r[-1]] if r else -1 for r in routes], dtype=np.int64)
    nic_row = (first >= 0) & (kind[np.maximum(first, 0)] == NodeKind.NIC) \
        & (kind[np.maximum(last, 0)] == NodeKind.NIC)
    conn_ptr = np.asarray(paths.conn_ptr, dtype=np.int64)
    xc = np.asarray(xconn, dtype=np.int64)
    lo, hi = conn_ptr[xc], conn_ptr[xc + 1]
    k = hi - lo
    x = np.repeat(np.arange(dag.n_transfers), k)
    j = np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
    row = np.repeat(lo, k) + j
    size = np.round(np.asarray(dag.size_bytes, dtype=np.float64)).astype(np.int64)
    part = size[x] // k[x] + (j < size[x] % k[x])
    keep = nic_row[row] & (part > 0)
    inside = len(np.unique(x[~nic_row[row]]))
    order = np.lexsort((np.arange(int(keep.sum())), x_start[x[keep]]))
    return QpFlows(first[row[keep]][order], last[row[keep]][order], part[keep][order],
                   x_start[x[keep]][order], inside, start_times)


def _stage_label(dag: Any, s: int) -> str:
    labels = dag.stage_label
    if labels is not None and s < len(labels):
        return str(labels[s])
    return f"stage {s}"


# -- the fabric as the reference simulators see it -------------------------------------


def _net_links(f: Fabric) -> np.ndarray:
    """Links between network nodes (NIC ports and switches), in link order."""
    return np.flatnonzero(np.asarray(f.links.kind) >= LinkKind.ACCESS)


def _rate_str(bps: np.ndarray) -> np.ndarray:
    """ns-3 DataRate strings: whole Gbit/s as ``100Gbps``, others in bit/s."""
    gb = bps // 10**9
    whole = bps % 10**9 == 0
    return np.where(whole, _cat(gb, "Gbps"), _cat(bps, "bps"))


def _delay_str(ps: np.ndarray) -> np.ndarray:
    whole = ps % PS_PER_NS == 0
    return np.where(whole, _cat(ps // PS_PER_NS, "ns"), _cat(ps, "ps"))


def _link_delay_ps(f: Fabric, li: np.ndarray) -> np.ndarray:
    """One delay per (symmetric) link: its propagation plus half the forwarding latency
    of each switch at its ends, so that every host-to-host path adds up to the packet
    simulator's (each switch on a path is entered once and left once)."""
    a, b = f.links.a[li], f.links.b[li]
    lat = f.nodes.latency_ns.astype(np.int64)
    return f.links.latency_ns[li].astype(np.int64) * PS_PER_NS + (lat[a] + lat[b]) * 500


def _parallel_links(a: np.ndarray, b: np.ndarray) -> int:
    """How many links repeat an earlier link's pair of ends."""
    lo, hi = np.minimum(a, b).astype(np.int64), np.maximum(a, b).astype(np.int64)
    return int(len(lo) - len(np.unique(lo * (int(hi.max(initial=0)) + 1) + hi)))


def _bps(gbps: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(gbps, dtype=np.float64) * 1e9).astype(np.int64)


# -- ns-3 ------------------------------------------------------------------------------


def ns3_files(scn: Any, f: Fabric, cfg: Any, flows: QpFlows) -> CrossExport:
    """The input files of ns-3's RDMA simulator for ``flows`` on ``f`` with the packet
    settings ``cfg`` (the effective packet config)."""
    kind = f.nodes.kind
    hosts = np.flatnonzero(kind == NodeKind.NIC)
    switches = np.flatnonzero(kind >= NodeKind.TOR)
    nid = np.full(f.n_nodes, -1, dtype=np.int64)
    nid[hosts] = np.arange(len(hosts))
    nid[switches] = len(hosts) + np.arange(len(switches))
    li = _net_links(f)
    a, b = f.links.a[li], f.links.b[li]
    cap = np.asarray(f.links.capacity_gbps)[li]
    notes: list[tuple[str, str, str]] = []
    asym = cap[:, 0] != cap[:, 1]
    if asym.any():
        notes.append(("link speed", "approximately", f"{int(asym.sum())} links have two "
                      "speeds; ns-3's links have one: the lower"))
    _ns3_limits(f)
    bps = _bps(cap.min(axis=1))
    par = _parallel_links(a, b)
    if par:
        notes.append(("parallel links", "approximately", f"{par} links run parallel to "
                      "another between the same two nodes; ns-3's routing keeps one "
                      "interface per neighbour (third.cc nbr2if), so only one of them "
                      "carries traffic there"))
    topo = (f"{len(hosts) + len(switches)} {len(switches)} {len(li)}\n"
            + " ".join(map(str, (len(hosts) + np.arange(len(switches))).tolist())) + "\n"
            + _lines(nid[a], nid[b], _rate_str(bps), _delay_str(_link_delay_ps(f, li)),
                     np.full(len(li), "0")))
    if flows.size_bytes.size and int(flows.size_bytes.max()) > NS3_MAX_SIZE:
        raise _refuse("traffic", f"a QP of {int(flows.size_bytes.max())} bytes: ns-3's "
                      f"flow file reads sizes as 32-bit unsigned; allowed: at most "
                      f"{NS3_MAX_SIZE} bytes per QP (more QPs per connection, or smaller "
                      "transfers)")
    pg = int(cfg.nic.dscp_to_tc.get(cfg.nic.dscp, 0))
    n = len(flows.src)
    start_s = np.char.mod("%.9f", flows.start_ns / 1e9) if n else np.zeros(0, str)
    flow = f"{n}\n" + _lines(nid[flows.src], nid[flows.dst], np.full(n, str(pg)),
                             np.full(n, str(NS3_DPORT)), flows.size_bytes, start_s)
    # ns-3 keys the maps by the rate of the switch's device, which it sets from the link
    # line: the lower of the two directions
    sw_rates = np.unique(np.concatenate([bps[kind[a] >= NodeKind.TOR],
                                         bps[kind[b] >= NodeKind.TOR]]))
    config = _ns3_config(cfg, sw_rates, notes)
    notes.extend(_ns3_notes(cfg, flows))
    run = ("#!/bin/sh\n"
           "# Run ns-3's RDMA simulator (HPCC repository, simulation/) on this folder:\n"
           "#   NS3=/path/to/High-Precision-Congestion-Control/simulation sh run.sh\n"
           "# Outputs land here: fct.txt (sip dip sport dport size start_ns fct_ns "
           "standalone_fct_ns), pfc.txt.\n"
           "set -e\nhere=$(cd \"$(dirname \"$0\")\" && pwd)\n"
           "cd \"${NS3:?set NS3 to the HPCC repository's simulation folder}\"\n"
           "./waf --run \"scratch/third config.txt\" --cwd=\"$here\"\n")
    files = {"topology.txt": topo, "flow.txt": flow, "config.txt": config,
             "trace.txt": "0\n", "run.sh": run}
    files["NOTES.md"] = _notes_md(scn, "ns-3's RDMA simulator (HPCC repository)", notes,
                                  len(hosts), len(switches), len(li), n, flows)
    return CrossExport(files, len(hosts), len(switches), len(li), n, notes)


def _ns3_limits(f: Fabric) -> None:
    """Refuse a fabric ns-3's RDMA simulator cannot hold (before any routing)."""
    kind = f.nodes.kind
    n = int(((kind == NodeKind.NIC) | (kind >= NodeKind.TOR)).sum())
    if n > NS3_MAX_NODES:
        raise _refuse("--format", f"{n} nodes: ns-3's RDMA simulator numbers nodes in 16 "
                      "bits of their address (third.cc node_id_to_ip); allowed: at most "
                      f"{NS3_MAX_NODES} NIC ports and switches")
    li = _net_links(f)
    ports = np.bincount(np.concatenate([f.links.a[li], f.links.b[li]]),
                        minlength=f.n_nodes)[kind >= NodeKind.TOR]
    if len(ports) and int(ports.max()) > NS3_MAX_PORTS:
        raise _refuse("--format", f"a switch with {int(ports.max())} links: ns-3's "
                      f"switches have at most {NS3_MAX_PORTS} ports (SwitchMmu::pCnt 257, "
                      "port 0 unused); allowed: a fabric of smaller switches")


def _kb(x: int) -> int:
    return max(round(x / 1000), 0)


def _ns3_config(cfg: Any, sw_rates: np.ndarray, notes: list[tuple[str, str, str]]) -> str:
    cc = cfg.cc.algorithm
    d, h, t, dc = cfg.cc.dcqcn, cfg.cc.hpcc, cfg.cc.timely, cfg.cc.dctcp
    mtu = int(cfg.nic.mtu_payload_bytes)
    ack_bytes = int(cfg.nic.ack_interval_packets) * mtu
    window = cfg.nic.window
    var_win = cfg.nic.window_scales_with_rate
    has_win = 1 if cc == "hpcc" or window != "none" else 0
    if cc == "hpcc":
        var_win = True
    kmin, kmax, pmax = [], [], []
    for r in sw_rates.tolist():
        prof = cfg.ecn.for_speed(r / 1e9)
        if prof is None:
            raise _refuse("packet.ecn.by_speed", f"no profile for the {r / 1e9:g} Gbit/s "
                          "switch ports of this fabric; allowed: a profile for every port "
                          "speed")
        kmin.append(f"{r} {_kb(prof.kmin_bytes)}")
        kmax.append(f"{r} {_kb(prof.kmax_bytes)}")
        pmax.append(f"{r} {prof.pmax:g}")
        if prof.kmin_bytes % 1000 or prof.kmax_bytes % 1000:
            notes.append(("ecn thresholds", "approximately", f"{r / 1e9:g}G: Kmin/Kmax "
                          f"{prof.kmin_bytes}/{prof.kmax_bytes} bytes rounded to whole KB "
                          "(ns-3 reads them in units of 1000 bytes)"))
    buf_mb = max(round(cfg.buffer.size_bytes / 2**20), 1)
    if buf_mb * 2**20 != cfg.buffer.size_bytes:
        notes.append(("buffer.size_bytes", "approximately", f"{cfg.buffer.size_bytes} "
                      f"bytes -> BUFFER_SIZE {buf_mb} (ns-3 counts whole MiB)"))
    if cc == "dcqcn":
        ai, hai, mn = d.rpg_ai_rate, d.rpg_hai_rate, d.rpg_min_rate
    elif cc == "hpcc":
        ai, hai, mn = h.ai_rate_mbps, 2 * h.ai_rate_mbps, 100.0
    elif cc == "timely":
        ai, hai, mn = t.delta_mbps, t.hai_after * t.delta_mbps, t.min_rate_mbps
    else:
        ai, hai, mn = 5.0, 50.0, 100.0
    stop_s = cfg.until_ms / 1000
    stop_ns = round(cfg.until_ms * 1e6)
    ack_tc = cfg.nic.dscp_to_tc.get(cfg.nic.dscp, 0)  # ACKs: the QP's class
    data_tc = cfg.nic.dscp_to_tc.get(cfg.nic.dscp, 0)
    rows = [
        ("ENABLE_QCN", int(cfg.ecn.enabled)),
        ("USE_DYNAMIC_PFC_THRESHOLD", 1),
        ("PACKET_PAYLOAD_SIZE", mtu),
        ("TOPOLOGY_FILE", "topology.txt"),
        ("FLOW_FILE", "flow.txt"),
        ("TRACE_FILE", "trace.txt"),
        ("TRACE_OUTPUT_FILE", "mix.tr"),
        ("FCT_OUTPUT_FILE", "fct.txt"),
        ("PFC_OUTPUT_FILE", "pfc.txt"),
        ("SIMULATOR_STOP_TIME", f"{stop_s:.9g}"),
        ("CC_MODE", NS3_CC_MODE[cc]),
        ("ALPHA_RESUME_INTERVAL", f"{d.dce_tcp_rtt:g}"),
        ("RATE_DECREASE_INTERVAL", f"{d.rate_reduce_monitor_period:g}"),
        ("CLAMP_TARGET_RATE", int(bool(d.clamp_tgt_rate))),
        ("RP_TIMER", f"{d.rpg_time_reset:g}"),
        ("EWMA_GAIN", f"{dc.g:.9g}" if cc == "dctcp" else f"{(1024 - d.dce_tcp_g) / 1024:.9g}"),
        ("FAST_RECOVERY_TIMES", int(d.rpg_threshold)),
        ("RATE_AI", f"{ai:g}Mb/s"),
        ("RATE_HAI", f"{hai:g}Mb/s"),
        ("MIN_RATE", f"{mn:g}Mb/s"),
        ("DCTCP_RATE_AI", "1000Mb/s"),
        ("ERROR_RATE_PER_LINK", "0.0000"),
        ("L2_CHUNK_SIZE", ack_bytes),
        ("L2_ACK_INTERVAL", ack_bytes),
        ("L2_BACK_TO_ZERO", 0),
        ("HAS_WIN", has_win),
        ("GLOBAL_T", 1 if cc == "hpcc" or window != "bdp" else 0),
        ("VAR_WIN", int(var_win)),
        ("FAST_REACT", 1),
        ("U_TARGET", f"{h.target_utilization:g}"),
        ("MI_THRESH", int(h.max_stage)),
        ("INT_MULTI", 1),
        ("MULTI_RATE", 1),
        ("SAMPLE_FEEDBACK", 0),
        ("RATE_BOUND", 1),
        ("ACK_HIGH_PRIO", int(ack_tc != data_tc)),
        ("LINK_DOWN", "0 0 0"),
        ("ENABLE_TRACE", 0),
        ("KMAX_MAP", f"{len(kmax)} {' '.join(kmax)}".rstrip()),
        ("KMIN_MAP", f"{len(kmin)} {' '.join(kmin)}".rstrip()),
        ("PMAX_MAP", f"{len(pmax)} {' '.join(pmax)}".rstrip()),
        ("BUFFER_SIZE", buf_mb),
        ("QLEN_MON_FILE", "qlen.txt"),
        ("QLEN_MON_START", stop_ns),
        ("QLEN_MON_END", stop_ns),
    ]
    return "".join(f"{k} {v}\n" for k, v in rows)


def _ns3_notes(cfg: Any, flows: QpFlows) -> list[tuple[str, str, str]]:
    cc = cfg.cc.algorithm
    window = cfg.nic.window
    out = [
        ("topology", "one to one", "every NIC port a host, every switch a switch, every "
         "NIC-ToR and switch-switch link a link with its speed"),
        ("link delay", "one to one", "propagation + half the forwarding latency of each "
         "end's switch: host-to-host paths add up to the packet simulator's"),
        ("flows", "one to one", "one per QP: the bytes the packet simulator gives it, "
         f"priority = the data traffic class, dport {NS3_DPORT}"),
        ("start times", "one to one" if flows.start_times == "zero" else "approximately",
         "all at 0" if flows.start_times == "zero" else "the flow-level simulation's start "
         "of each transfer (ns-3 cannot wait for a flow to finish)"),
        ("routing", "no equivalent", "ns-3 hashes each packet's five-tuple with its own "
         "hash and per-switch seed (switch-node.cc GetOutDev); paths differ from "
         "aifabric's hash, per-flow load over ECMP groups is statistically alike"),
        ("packet.nic.ack_path", "approximately" if cfg.nic.ack_path == "hashed"
         else "no equivalent", "ns-3 routes ACKs by the ECMP hash of their own header "
         "(switch-node.cc GetOutDev), like ack_path: hashed, with ns-3's hash"),
        ("mtu_payload_bytes", "one to one", "PACKET_PAYLOAD_SIZE"),
        ("header_bytes, wire_overhead_bytes, ack_bytes", "no equivalent", "ns-3's headers "
         "are fixed (CustomHeader); no preamble or inter-frame gap"),
        ("ack_interval_packets", "one to one", "L2_ACK_INTERVAL = L2_CHUNK_SIZE = n x "
         "payload bytes (ns-3 counts bytes)"),
        ("rto_us", "no equivalent", "ns-3 recovers by NACK and go-back-N (L2_BACK_TO_ZERO "
         "0) without a timeout"),
        ("ecn kmin/kmax/pmax", "one to one", "KMIN_MAP/KMAX_MAP/PMAX_MAP by switch port "
         "rate (KB of 1000 bytes)"),
        ("packet.switch.ecn_mark", "one to one" if cfg.switch.ecn_mark == "dequeue"
         else "approximately", "ns-3 marks at dequeue (SwitchNotifyDequeue)"),
        ("buffer.size_bytes", "one to one", "BUFFER_SIZE in MiB"),
        ("buffer.alpha, pfc.xoff/xon/headroom", "approximately", "ns-3 pauses by its own "
         "dynamic threshold (USE_DYNAMIC_PFC_THRESHOLD 1: 1/8 of the free buffer for "
         "NIC-speed ports) and sets headroom to 3 x rate x link delay"),
        ("pfc.enabled", "one to one" if cfg.pfc.enabled else "no equivalent",
         "ns-3's RDMA simulator is always lossless" + ("" if cfg.pfc.enabled else
                                                        ": this lossy scenario is not")),
        ("pfc.watchdog_ms", "no equivalent", "no PFC watchdog in ns-3"),
        ("cc.algorithm", "one to one" if cc != "none" else "approximately",
         f"CC_MODE {NS3_CC_MODE[cc]}" + (" (not a documented mode: no CC reacts)"
                                         if cc == "none" else "")),
    ]
    if cc == "dcqcn":
        out += [
            ("dcqcn rpg_time_reset, rpg_ai_rate, rpg_hai_rate, rpg_min_rate, "
             "rpg_threshold, dce_tcp_rtt, rate_reduce_monitor_period, clamp_tgt_rate",
             "one to one", "RP_TIMER, RATE_AI, RATE_HAI, MIN_RATE, FAST_RECOVERY_TIMES, "
             "ALPHA_RESUME_INTERVAL, RATE_DECREASE_INTERVAL, CLAMP_TARGET_RATE"),
            ("dcqcn dce_tcp_g", "one to one", "EWMA_GAIN = (1024 - g) / 1024"),
            ("dcqcn rpg_byte_reset", "no equivalent", "ns-3's DCQCN increases by the "
             "timer alone"),
            ("dcqcn rpg_gd, rpg_min_dec_fac, initial_alpha_value, min_time_between_cnps, "
             "rate_to_set_on_first_cnp", "no equivalent", "ns-3 cuts rate x (1 - alpha/2) "
             "from alpha = 1; the receiver echoes ECN in ACKs instead of pacing CNPs"),
        ]
    if cc == "hpcc":
        h = cfg.cc.hpcc
        out += [("hpcc target_utilization, max_stage, ai_rate_mbps", "one to one",
                 "U_TARGET, MI_THRESH, RATE_AI"),
                ("hpcc base_rtt_us", "one to one" if h.base_rtt_us is None else
                 "no equivalent", "GLOBAL_T 1: the largest base RTT")]
    if cc == "timely":
        out.append(("timely delta_mbps, min_rate_mbps", "one to one", "RATE_AI, MIN_RATE; "
                    "ns-3's thresholds and beta are built in"))
    if cc == "dctcp":
        out.append(("dctcp g", "one to one", "EWMA_GAIN; ns-3's DCTCP is rate-based "
                    "(DCTCP_RATE_AI), aifabric's window-based: approximately"))
    if window == "none":
        out.append(("nic.window", "one to one", "none: HAS_WIN 0" if cc != "hpcc" else
                    "none; HPCC's own window: HAS_WIN 1, VAR_WIN 1"))
    elif window == "bdp":
        out.append(("nic.window", "one to one" if cc != "hpcc" else "approximately",
                    "bdp: HAS_WIN 1, GLOBAL_T 0 (each pair's BDP)" if cc != "hpcc" else
                    "bdp: HAS_WIN 1 with GLOBAL_T 1 (the largest BDP), which HPCC needs"))
    else:
        out.append(("nic.window", "approximately", f"{window} bytes: ns-3's window is a "
                    "BDP, not a byte count (HAS_WIN 1)"))
    forced = cc == "hpcc" and not cfg.nic.window_scales_with_rate
    out.append(("nic.window_scales_with_rate", "approximately" if forced else "one to one",
                "VAR_WIN" + (" 1: HPCC's window varies" if forced else "")))
    if cfg.nic.rx_gbps is not None:
        out.append(("nic.rx_gbps, nic.host_pfc", "no equivalent", "ns-3's hosts take data "
                    "at line rate"))
    return out


# -- htsim -----------------------------------------------------------------------------


def _uniform(values: np.ndarray, what: str) -> float:
    u = np.unique(values)
    if len(u) != 1:
        raise _refuse("--format", f"htsim's fat-tree file has one {what} per tier; this "
                      f"fabric has {len(u)} ({', '.join(f'{x:g}' for x in u[:4])}); "
                      "allowed: --format ns3-rdma (any topology)")
    return float(u[0])


def _htsim_topology(f: Fabric, check: Any = None
                    ) -> tuple[str, np.ndarray, list[tuple[str, str, str]]]:
    """``FatTreeTopology::load``'s file for a 2- or 3-tier tree where every NIC port has
    one ToR; and the htsim host number of every NIC port (host i is under ToR i /
    Radix_Down of tier 0; ToRs numbered pod by pod)."""
    kind = f.nodes.kind
    li = _net_links(f)
    a, b = f.links.a[li], f.links.b[li]
    lk = np.asarray(f.links.kind)[li]
    cap = np.asarray(f.links.capacity_gbps)[li].min(axis=1)
    nics = np.flatnonzero(kind == NodeKind.NIC)
    acc = lk == LinkKind.ACCESS
    nic_end = np.where(kind[a] == NodeKind.NIC, a, b)[acc]
    tor_end = np.where(kind[a] == NodeKind.NIC, b, a)[acc]
    per_nic = np.bincount(nic_end, minlength=f.n_nodes)[nics]
    if (per_nic != 1).any():
        raise _refuse("--format", "htsim's fat-tree has one ToR link per host; "
                      f"{int((per_nic != 1).sum())} NIC ports of this fabric have "
                      f"{int(per_nic.max())} or none (dual-ToR, multi-plane); allowed: "
                      "--format ns3-rdma (any topology)")
    (check or _htsim_port_limits)(f, a, b)
    par = _parallel_links(a, b)
    if par:
        raise _refuse("--format", f"{par} links run parallel to another between the same "
                      "two switches; htsim's fat-tree file (Bundle) is not written by this "
                      "export; allowed: --format ns3-rdma")
    tors = np.flatnonzero(kind == NodeKind.TOR)
    has_agg, has_core = bool((kind == NodeKind.AGG).any()), bool((kind == NodeKind.CORE).any())
    tiers = 3 if has_core else 2
    pod = f.nodes.pod.astype(np.int64)
    tor_order = tors[np.lexsort((tors, pod[tors]))] if tiers == 3 else tors
    tor_rank = np.full(f.n_nodes, -1, dtype=np.int64)
    tor_rank[tor_order] = np.arange(len(tor_order))
    nic_tor = np.full(f.n_nodes, -1, dtype=np.int64)
    nic_tor[nic_end] = tor_end
    order = nics[np.lexsort((nics, tor_rank[nic_tor[nics]]))]
    hid = np.full(f.n_nodes, -1, dtype=np.int64)
    hid[order] = np.arange(len(order))
    down0 = np.bincount(tor_rank[tor_end], minlength=len(tors))
    r0 = int(_uniform(down0, "ToR host count"))
    lat = f.nodes.latency_ns.astype(np.float64)
    lines = [f"# aifabric export of {f.name}: NIC ports = htsim hosts, host i under "
             f"ToR i / {r0}", f"Nodes {len(nics)}", f"Tiers {tiers}"]
    notes: list[tuple[str, str, str]] = []
    if not has_agg:
        raise _refuse("--format", "htsim's fat-tree needs an aggregation tier; this "
                      "fabric has ToRs only; allowed: --format ns3-rdma")
    up_kinds = [LinkKind.ACCESS, LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE]
    lower = [NodeKind.TOR, NodeKind.AGG, NodeKind.CORE]
    if tiers == 3:
        pods = np.unique(pod[tors])
        podsize = len(nics) // max(len(pods), 1)
    else:
        podsize = len(nics)
    lines.append(f"Podsize {podsize}")
    params: list[dict[str, Any]] = [{"up": 0, "over": 1} for _ in range(tiers)]
    for t in range(tiers):
        sel = lk == up_kinds[t]
        sw = lower[t]
        ends = np.where(kind[a] == sw, a, b)[sel]
        lines += ["", f"Tier {t}"]
        speed = _uniform(cap[sel], "downlink speed")
        if not float(speed).is_integer():
            raise _refuse("--format", f"htsim reads whole Gbit/s; this fabric's tier-{t} "
                          f"links run at {speed:g}; allowed: --format ns3-rdma")
        lines.append(f"Downlink_speed_Gbps {int(speed)}")
        n_sw = int((kind == sw).sum())
        down = np.bincount(np.searchsorted(np.flatnonzero(kind == sw), ends),
                           minlength=n_sw)
        lines.append(f"Radix_Down {int(_uniform(down, 'down radix'))}")
        params[t].update(speed=int(speed), down=int(_uniform(down, "down radix")))
        if t + 1 < tiers:
            usel = lk == up_kinds[t + 1]
            uends = np.where(kind[a] == sw, a, b)[usel]
            up = np.bincount(np.searchsorted(np.flatnonzero(kind == sw), uends),
                             minlength=n_sw)
            r_up = int(_uniform(up, "up radix"))
            lines.append(f"Radix_Up {r_up}")
            up_speed = _uniform(cap[usel], "uplink speed")
            ratio = int(_uniform(down, "down radix")) * speed / (r_up * up_speed)
            if not (float(ratio).is_integer() and ratio >= 1):
                raise _refuse("--format", f"tier {t} is {ratio:g}:1 oversubscribed; "
                              "htsim's fat-tree takes a whole ratio of at least 1 "
                              "(Oversubscribed); allowed: --format ns3-rdma")
            lines.append(f"Oversubscribed {int(ratio)}")
            params[t]["up"], params[t]["over"] = r_up, int(ratio)
        delay = _uniform(f.links.latency_ns[li][sel].astype(np.float64), "link latency")
        lines.append(f"Downlink_Latency_ns {round(delay)}")
        lines.append(f"Switch_Latency_ns {round(_uniform(lat[kind == sw], 'switch latency'))}")
    _htsim_builds(len(nics), podsize, params)
    notes.append(("topology", "approximately", "htsim builds its own fat-tree from the "
                  "tier counts, speeds and latencies in fabric.topo: the same tree as the "
                  "fabric's for a regular fat-tree or leaf-spine, up to the numbering of "
                  "switches"))
    return "\n".join(lines) + "\n", hid, notes


def _htsim_port_limits(f: Fabric, a: np.ndarray, b: np.ndarray) -> None:
    """Refuse a switch with more ports than htsim's FatTreeTopology builds (it asserts
    fewer than 96 ports on a ToR, 64 on an agg or core switch, and aborts at start-up)."""
    kind = f.nodes.kind
    ports = np.bincount(np.concatenate([a, b]), minlength=f.n_nodes)
    for k, what in ((NodeKind.TOR, "ToR"), (NodeKind.AGG, "agg"), (NodeKind.CORE, "core")):
        sel = np.flatnonzero(kind == k)
        if not len(sel):
            continue
        worst = int(sel[np.argmax(ports[sel])])
        if int(ports[worst]) > HTSIM_MAX_PORTS[what]:
            raise _refuse("--format", f"{what} switch {f.nodes.name[worst]} has "
                          f"{int(ports[worst])} ports; htsim's fat-tree builds at most "
                          f"{HTSIM_MAX_PORTS['ToR']} ports per ToR and "
                          f"{HTSIM_MAX_PORTS['agg']} per agg or core switch "
                          "(fat_tree_topology.cpp asserts it at start-up); allowed: "
                          "--format ns3-rdma, or smaller switches")


def _htsim_builds(nodes: int, podsize: int, p: list[dict[str, Any]]) -> None:
    """htsim's own checks of a fat-tree file (FatTreeTopology::set_custom_params), so
    that what it would exit on is refused here instead."""
    def no(why: str) -> SpecError:
        return _refuse("--format", f"htsim's fat-tree cannot build this fabric: {why} "
                       "(FatTreeTopology::set_custom_params); allowed: --format ns3-rdma")

    t0, t1 = p[0], p[1]
    if nodes % podsize or podsize % t0["down"]:
        raise no(f"{nodes} hosts in pods of {podsize} under ToRs of {t0['down']}")
    pods = nodes // podsize
    if t0["down"] // t0["up"] != t0["over"]:
        raise no(f"ToR radix {t0['down']} down / {t0['up']} up is not its "
                 f"{t0['over']}:1 oversubscription")
    up_num, up_den = nodes * t0["speed"], t1["speed"] * t0["over"]
    if up_num % up_den:
        raise no("the ToR uplinks do not divide evenly")
    tor_up = up_num // up_den
    if tor_up % (pods * t1["down"]) or tor_up // (pods * t1["down"]) != t0["up"]:
        raise no(f"{tor_up} ToR uplinks do not fill aggs of down radix {t1['down']} "
                 f"({t0['up']} per ToR)")
    if len(p) == 3:
        t2 = p[2]
        aggs = tor_up // (pods * t1["down"])
        num, den = tor_up * t1["speed"], t2["speed"] * t1["over"]
        if num % den or (num // den) % t2["down"]:
            raise no("the agg uplinks do not fill the core switches")
        cores = num // den // t2["down"]
        if cores % aggs or cores // aggs != t1["up"]:
            raise no(f"{cores} core switches for {aggs} aggs per pod of up radix "
                     f"{t1['up']}")


def htsim_packets(size_bytes: np.ndarray, cfg: Any) -> tuple[int, np.ndarray]:
    """htsim's ``-mtu`` (its payload) and each flow's packet count: the packet simulator
    sends ``ceil(size / mtu_payload_bytes)`` frames of ``mtu_payload_bytes +
    header_bytes + wire_overhead_bytes`` bytes (the last one shorter); htsim sends full
    packets of ``-mtu + 64`` bytes, so ``-mtu`` = the frame - 64 and each flow's size in
    the connection matrix is its frame count x ``-mtu``: the same packets, the same
    bytes on the wire per full frame."""
    nic = cfg.nic
    frame = int(nic.mtu_payload_bytes) + int(nic.header_bytes) + int(nic.wire_overhead_bytes)
    mtu = frame - HTSIM_HEADER_BYTES
    n = -(-np.asarray(size_bytes, dtype=np.int64) // int(nic.mtu_payload_bytes))
    return mtu, n


def htsim_files(scn: Any, f: Fabric, cfg: Any, flows: QpFlows) -> CrossExport:
    """htsim's connection matrix, fat-tree file and ``htsim_roce`` command line for
    ``flows`` on ``f`` with the packet settings ``cfg``."""
    topo, hid, notes = _htsim_topology(f)
    n = len(flows.src)
    mtu, pkts = htsim_packets(flows.size_bytes, cfg)
    size = pkts * mtu
    if n and int(size.max()) > HTSIM_MAX_SIZE:
        raise _refuse("traffic", f"a QP of {int(flows.size_bytes.max())} bytes "
                      f"({int(size.max())} in htsim's packets): htsim's connection matrix "
                      f"reads sizes as a 32-bit int; allowed: at most {HTSIM_MAX_SIZE} "
                      "bytes per QP")
    start_ps = np.round(flows.start_ns * PS_PER_NS).astype(np.int64)
    cm = (f"Nodes {int((hid >= 0).sum())}\nConnections {n}\n"
          + _lines(_cat(hid[flows.src], "->", hid[flows.dst]),
                   np.full(n, "id"), np.arange(1, n + 1), np.full(n, "start"), start_ps,
                   np.full(n, "size"), size))
    nics = np.flatnonzero(f.nodes.kind == NodeKind.NIC)
    li = _net_links(f)
    acc = np.asarray(f.links.kind)[li] == LinkKind.ACCESS
    host_gbps = float(np.asarray(f.links.capacity_gbps)[li][acc].min())
    frame = mtu + HTSIM_HEADER_BYTES
    alpha = float(cfg.buffer.alpha)
    q_bytes = int(cfg.buffer.size_bytes * alpha / (1 + alpha))
    # htsim: -q packets of -mtu bytes (queuesize = memFromPkt(q) = q x mtu bytes), PFC
    # thresholds in the same packets (LosslessInputQueue: high/low = n x mtu bytes),
    # compared with the bytes queued (packets of mtu + 64)
    q_pkts = max(q_bytes // mtu, 1)
    hi = max(round(cfg.pfc.xoff_bytes / mtu), 1)
    lo = min(max(round(cfg.pfc.xon_bytes / mtu), 0), hi - 1)  # htsim asserts high > low
    end_us = int(np.ceil(cfg.until_ms * 1000))
    seed = int(scn.seed or 0) % (1 << 31)
    cmd = (f"htsim_roce -tm connections.cm -topo fabric.topo -nodes {len(nics)} "
           f"-strat ecmp_host -paths 256 -linkspeed {round(host_gbps * 1000)} "
           f"-mtu {mtu} -q {q_pkts} -queue_type lossless_input -pfc_thresholds {lo} {hi} "
           f"-end {end_us} -seed {seed}")
    run = ("#!/bin/sh\n"
           "# Run htsim's RoCE datacenter binary (csg-htsim, sim/datacenter: make) on this "
           "folder:\n#   HTSIM=/path/to/csg-htsim/sim/datacenter sh run.sh\n"
           "set -e\ncd \"$(dirname \"$0\")\"\n"
           f"\"${{HTSIM:?set HTSIM to csg-htsim's sim/datacenter folder}}\"/{cmd}\n")
    extra = int((size + pkts * HTSIM_HEADER_BYTES).sum()
                - (flows.size_bytes + pkts * (frame - int(cfg.nic.mtu_payload_bytes))).sum())
    pfc_exact = (hi * mtu == cfg.pfc.xoff_bytes and lo * mtu == cfg.pfc.xon_bytes)
    cc = cfg.cc.algorithm
    notes += [
        ("flows", "one to one", "one connection per QP with the bytes the packet "
         "simulator gives it; start in picoseconds (ConnectionMatrix::load)"),
        ("start times", "one to one" if flows.start_times == "zero" else "approximately",
         "all at 0" if flows.start_times == "zero" else "the flow-level simulation's "
         "start of each transfer"),
        ("routing", "no equivalent", "htsim_roce -strat ecmp_host hashes with its own "
         "function over -paths 256 path ids"),
        ("nic.mtu_payload_bytes, header_bytes, wire_overhead_bytes", "approximately",
         f"-mtu {mtu}: htsim's -mtu is the payload and it adds a {HTSIM_HEADER_BYTES}-byte "
         f"header, so its packets are {frame} bytes, the packet simulator's full frames "
         f"({cfg.nic.mtu_payload_bytes} + {cfg.nic.header_bytes} + "
         f"{cfg.nic.wire_overhead_bytes}). Each flow's size in connections.cm is its frame "
         f"count x {mtu}: htsim sends the same number of packets of the same size, but "
         "every packet full, where the packet simulator's last frame is shorter: "
         f"{extra:,} bytes more on the wire over all {n} flows (none when sizes are "
         "multiples of the MTU); htsim's 'total bytes' of a flow is that size"),
        ("buffer.size_bytes, buffer.alpha", "approximately", f"-q {q_pkts}: packets of "
         f"-mtu ({q_pkts * mtu:,} bytes; htsim: queuesize = q x mtu) per port: what one "
         f"queue may hold alone under the dynamic threshold, alpha/(1+alpha) x buffer = "
         f"{q_bytes:,} bytes, rounded down"),
        ("pfc.xoff_bytes, pfc.xon_bytes",
         ("one to one" if pfc_exact else "approximately") if cfg.pfc.enabled else
         "no equivalent", f"-pfc_thresholds {lo} {hi}: htsim pauses above {hi} x {mtu} = "
         f"{hi * mtu:,} bytes queued at an input and resumes below {lo * mtu:,} "
         f"(xoff {cfg.pfc.xoff_bytes:,}, xon {cfg.pfc.xon_bytes:,}; whole packets of -mtu, "
         "nearest) with -queue_type lossless_input" + ("" if cfg.pfc.enabled else
                                                       "; htsim_roce is lossless, this "
                                                       "scenario is not")),
        ("cc.algorithm", "one to one" if cc == "none" else "no equivalent",
         "htsim_roce sends at line rate without congestion control" +
         ("" if cc == "none" else f": this scenario's {cc} is not in it (csg-htsim's "
                                  "htsim_hpcc and htsim_dctcp take their own flags, not "
                                  "written here)")),
        ("ecn", "no equivalent" if cfg.ecn.enabled else "one to one",
         "htsim_roce marks nothing"),
        ("link speeds", "one to one", "per tier (Downlink_speed_Gbps), -linkspeed = the "
         "NIC's rate in Mbit/s"),
    ]
    files = {"connections.cm": cm, "fabric.topo": topo, "run.sh": run,
             "command.txt": cmd + "\n"}
    files["NOTES.md"] = _notes_md(scn, "htsim (csg-htsim, htsim_roce)", notes, len(nics),
                                  int((f.nodes.kind >= NodeKind.TOR).sum()), len(li), n,
                                  flows)
    return CrossExport(files, len(nics), int((f.nodes.kind >= NodeKind.TOR).sum()),
                       len(li), n, notes)


# -- uet-htsim -------------------------------------------------------------------------

#: uet-htsim's header on every data packet (UecSrc::_hdr_size: its -mtu is the whole
#: packet, the payload is -mtu - 64)
UET_HEADER_BYTES = 64
#: ports uet-htsim's FatTreeTopology builds (fat_tree_topology.cpp asserts addPort(...)
#: < 96 for a ToR's hosts, < 128 for ToR-agg links at both ends, < 64 for agg-core links)
UET_MAX_TOR_HOSTS = 96
UET_MAX_PORTS_2TIER = 128
UET_MAX_PORTS_CORE = 64
#: the congestion control flags of htsim_uec (main_uec.cpp): NSCC is its default
UET_CC_FLAGS = {"nscc": "-sender_cc_only", "rccc": "-receiver_cc_only",
                "nscc+rccc": "-sender_cc -receiver_cc"}
#: entropy values per connection when the scenario sprays at the switches (htsim_uec's
#: -paths; its own default is 64)
UET_SPRAY_PATHS = 256
#: the NIC's entropy-value choice (packet.nic.entropy.algorithm) as htsim_uec's
#: -load_balancing_algo: its oblivious mode takes the values in turn (UecMpOblivious)
UET_LB_ALGO = {"round_robin": "oblivious", "oblivious": "oblivious", "reps": "reps"}


def _uet_port_limits(f: Fabric, a: np.ndarray, b: np.ndarray) -> None:
    """Refuse a switch uet-htsim's FatTreeTopology cannot build: at most 96 hosts per
    ToR, 128 ports per ToR and per 2-tier spine, 64 per agg and core switch of a 3-tier
    tree (its asserts abort at start-up)."""
    kind = f.nodes.kind
    ports = np.bincount(np.concatenate([a, b]), minlength=f.n_nodes)
    nic_side = np.concatenate([np.where(kind[a] == NodeKind.NIC, b, -1),
                               np.where(kind[b] == NodeKind.NIC, a, -1)])
    hosts = np.bincount(nic_side[nic_side >= 0], minlength=f.n_nodes)
    three = bool((kind == NodeKind.CORE).any())
    checks = [(NodeKind.TOR, "ToR", hosts, UET_MAX_TOR_HOSTS, "hosts"),
              (NodeKind.TOR, "ToR", ports, UET_MAX_PORTS_2TIER, "ports"),
              (NodeKind.AGG, "agg" if three else "spine", ports,
               UET_MAX_PORTS_CORE if three else UET_MAX_PORTS_2TIER, "ports"),
              (NodeKind.CORE, "core", ports, UET_MAX_PORTS_CORE, "ports")]
    for k, what, count, most, unit in checks:
        sel = np.flatnonzero(kind == k)
        if not len(sel):
            continue
        worst = int(sel[np.argmax(count[sel])])
        if int(count[worst]) > most:
            raise _refuse("--format", f"{what} switch {f.nodes.name[worst]} has "
                          f"{int(count[worst])} {unit}; uet-htsim's fat-tree builds at most "
                          f"{most} (fat_tree_topology.cpp asserts it at start-up); allowed: "
                          "--format ns3-rdma, or smaller switches")


def uet_htsim_files(scn: Any, f: Fabric, cfg: Any, flows: QpFlows) -> CrossExport:
    """uet-htsim's (the UEC consortium's reference simulator, ``sim/datacenter``)
    connection matrix, fat-tree file and ``htsim_uec`` command line for ``flows`` on ``f``
    with the packet settings ``cfg``: the same packets (``-mtu`` = the packet simulator's
    frame; each flow's size its frame count x the -mtu payload), queues and ECN
    thresholds in packets, the congestion control as htsim_uec's flags."""
    topo, hid, notes = _htsim_topology(f, _uet_port_limits)
    n = len(flows.src)
    nic = cfg.nic
    frame = int(nic.mtu_payload_bytes) + int(nic.header_bytes) + int(nic.wire_overhead_bytes)
    mss = frame - UET_HEADER_BYTES
    pkts = -(-np.asarray(flows.size_bytes, dtype=np.int64) // int(nic.mtu_payload_bytes))
    size = pkts * mss
    if n and int(size.max()) > HTSIM_MAX_SIZE:
        raise _refuse("traffic", f"a QP of {int(flows.size_bytes.max())} bytes "
                      f"({int(size.max())} in uet-htsim's packets): its connection matrix "
                      f"reads sizes as a 32-bit int; allowed: at most {HTSIM_MAX_SIZE} "
                      "bytes per QP")
    start_us = np.floor(flows.start_ns / 1000).astype(np.int64)
    cm = (f"Nodes {int((hid >= 0).sum())}\nConnections {n}\n"
          + _lines(_cat(hid[flows.src], "->", hid[flows.dst]),
                   np.full(n, "id"), np.arange(1, n + 1), np.full(n, "start"), start_us,
                   np.full(n, "size"), size))
    nics = np.flatnonzero(f.nodes.kind == NodeKind.NIC)
    li = _net_links(f)
    acc = np.asarray(f.links.kind)[li] == LinkKind.ACCESS
    host_gbps = float(np.asarray(f.links.capacity_gbps)[li][acc].min())
    alpha = float(cfg.buffer.alpha)
    q_bytes = int(cfg.buffer.size_bytes * alpha / (1 + alpha))
    q_pkts = max(q_bytes // frame, 1)
    cc = cfg.cc.algorithm
    mode = cfg.lb.mode or ("spray" if scn.spec.routing.policy == "spray" else
                           "adaptive" if scn.spec.routing.policy == "adaptive" else "ecmp")
    paths = 1 if mode == "ecmp" else UET_SPRAY_PATHS
    # NIC-side entropy values (packet.nic.entropy) where this build has them
    ent = getattr(nic, "entropy", None)
    ev_alg = str(getattr(ent, "algorithm", "fixed"))
    if ev_alg != "fixed":
        paths = int(ent.values)  # type: ignore[union-attr]
    parts = ["htsim_uec -tm connections.cm -topo fabric.topo",
             f"-linkspeed {round(host_gbps * 1000)} -mtu {frame} -q {q_pkts}",
             f"-paths {paths}"]
    if ev_alg in UET_LB_ALGO:
        parts.append(f"-load_balancing_algo {UET_LB_ALGO[ev_alg]}")
    trim = bool(getattr(getattr(cfg.switch, "trim", None), "enabled", False))
    ecn_note = "htsim_uec marks nothing (no -ecn)"
    if cfg.ecn.enabled:
        lo = max(round(cfg.ecn.kmin_bytes / frame), 0)
        hi = min(max(round(cfg.ecn.kmax_bytes / frame), lo), q_pkts)
        lo = min(lo, hi)
        parts.append(f"-ecn {lo} {hi}")
        ecn_note = (f"-ecn {lo} {hi}: packets of {frame} bytes (kmin {cfg.ecn.kmin_bytes:,}, "
                    f"kmax {cfg.ecn.kmax_bytes:,} bytes, nearest; at most -q); htsim_uec's "
                    "probability rises from 0 to 1 between them (pmax "
                    f"{cfg.ecn.pmax:g} here), marked at dequeue, on every switch port but "
                    "a ToR's downlinks under receiver-only CC")
    if cc in UET_CC_FLAGS:
        parts.append(UET_CC_FLAGS[cc])
    if "nscc" in cc:
        p = cfg.cc.nscc
        if p.target_qdelay_us:
            parts.append(f"-target_q_delay {p.target_qdelay_us:g}")
        if p.init_window_bytes:
            parts.append(f"-cwnd {max(round(p.init_window_bytes / frame), 1)}")
    if not trim:
        parts.append("-disable_trim")
    end_us = int(np.ceil(cfg.until_ms * 1000))
    seed = int(scn.seed or 0) % (1 << 31)
    parts.append(f"-end {end_us} -seed {seed}")
    cmd = " ".join(parts)
    run = ("#!/bin/sh\n"
           "# Run the UEC consortium's reference simulator (uet-htsim: htsim/sim, cmake "
           "--build build --target htsim_uec) on this folder:\n"
           "#   UET_HTSIM=/path/to/uet-htsim/htsim/sim/datacenter sh run.sh\n"
           "set -e\ncd \"$(dirname \"$0\")\"\n"
           f"\"${{UET_HTSIM:?set UET_HTSIM to uet-htsim's htsim/sim/datacenter folder}}\""
           f"/{cmd}\n")
    late = flows.start_ns % 1000 != 0
    notes += [
        ("flows", "one to one", "one connection per QP with the packets the packet "
         "simulator sends it: its frame count x the -mtu payload"),
        ("start times", "one to one" if not late.any() else "approximately",
         "htsim_uec reads whole microseconds (timeFromUs((uint32_t)start))" +
         (f": {int(late.sum())} starts rounded down" if late.any() else "")),
        ("nic.mtu_payload_bytes, header_bytes, wire_overhead_bytes", "approximately",
         f"-mtu {frame}: htsim_uec's whole packet, so its packets are the packet "
         f"simulator's full frames; its payload is {mss} (-mtu - {UET_HEADER_BYTES}) where "
         f"the packet simulator carries {nic.mtu_payload_bytes}: each flow's size is its "
         f"frame count x {mss}"),
        ("buffer.size_bytes, buffer.alpha", "approximately", f"-q {q_pkts}: packets of "
         f"{frame} bytes per port, what one queue may hold alone under the dynamic "
         f"threshold, alpha/(1+alpha) x buffer = {q_bytes:,} bytes"),
        ("pfc", "no equivalent" if cfg.pfc.enabled else "one to one",
         "htsim_uec's queues are lossy (composite)" +
         (": this scenario is lossless" if cfg.pfc.enabled else "")),
        ("ecn", "approximately" if cfg.ecn.enabled else "one to one", ecn_note),
        ("packet.lb", "approximately" if mode != "ecmp" else "one to one",
         f"-paths {paths}: " + ("one entropy value per connection: one ECMP path" if
                                mode == "ecmp" and ev_alg == "fixed" else
                                f"the NIC sprays over {paths} entropy values" +
                                (f" ({ev_alg}: -load_balancing_algo "
                                 f"{UET_LB_ALGO[ev_alg]})" if ev_alg in UET_LB_ALGO else
                                 f" (its load-balancing algorithm's choice) where the "
                                 f"packet simulator's switches {mode} per packet"))),
        ("nic.receiver", "one to one" if nic.receiver == "ooo" else "no equivalent",
         "UEC's receiver accepts packets out of order" +
         ("" if nic.receiver == "ooo" else ": this scenario's go_back_n is not in it")),
        ("packet trimming", "one to one", "trimmed in both (htsim_uec's default)" if trim
         else "-disable_trim: dropped, not trimmed, as in the packet simulator (and "
         "NSCC's default target is then the network RTT)"),
        ("cc.algorithm", "one to one" if cc in UET_CC_FLAGS else "no equivalent",
         UET_CC_FLAGS.get(cc, f"htsim_uec runs UEC's congestion control; this "
                          f"scenario's {cc} is not in it: it runs its default, NSCC")),
        ("link speeds", "one to one", "per tier (Downlink_speed_Gbps), -linkspeed = the "
         "NIC's rate in Mbit/s"),
    ]
    if "nscc" in cc:
        p = cfg.cc.nscc
        notes.append(("cc.nscc", "approximately", "htsim_uec derives its network RTT, "
                      "base RTTs and scaled gains from its own topology, with the same "
                      "defaults" + (f"; -target_q_delay {p.target_qdelay_us:g}" if
                                    p.target_qdelay_us else "") +
                      (f"; -cwnd {max(round(p.init_window_bytes / frame), 1)} packets"
                       if p.init_window_bytes else "")))
    if "rccc" in cc:
        notes.append(("cc.rccc.receiver_gbps", "approximately", "htsim_uec's credit pacer "
                      "runs at 0.99 x the NIC's line rate (-linkspeed); receiver_gbps "
                      f"{cfg.cc.rccc.receiver_gbps:g} here"))
    files = {"connections.cm": cm, "fabric.topo": topo, "run.sh": run,
             "command.txt": cmd + "\n"}
    files["NOTES.md"] = _notes_md(scn, "uet-htsim (the UEC reference simulator, htsim_uec)",
                                  notes, len(nics),
                                  int((f.nodes.kind >= NodeKind.TOR).sum()), len(li), n,
                                  flows)
    return CrossExport(files, len(nics), int((f.nodes.kind >= NodeKind.TOR).sum()),
                       len(li), n, notes)


# -- both ------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _notes_md(scn: Any, target: str, notes: list[tuple[str, str, str]], hosts: int,
              switches: int, links: int, n: int, flows: QpFlows) -> str:
    head = [f"# {_md_cell(scn.name)}: export for {target}", "",
            f"{hosts} hosts (NIC ports), {switches} switches, {links} links, {n} flows "
            f"(one per QP); start times: {flows.start_times}.", ""]
    if flows.inside_hosts:
        head += [f"{flows.inside_hosts} transfers stay inside a host (NVLink) and are not "
                 "exported.", ""]
    head += ["| setting | maps | how |", "|---|---|---|"]
    head += [f"| {_md_cell(s)} | {_md_cell(h)} | {_md_cell(d)} |" for s, h, d in notes]
    return "\n".join(head) + "\n"


def export_scenario(scn: Any, f: Fabric, fmt: str, *, start_times: str = "zero"
                    ) -> CrossExport:
    """The files of format ``fmt`` (:data:`FORMATS`) for the scenario ``scn`` on its
    fabric ``f``; settings are the scenario's effective packet config (deploy-derived
    values included). Refusals are :class:`SpecError` with one line each."""
    from aifabric.sim.packet.config import effective_packet_config

    if fmt not in FORMATS:
        raise _refuse("--format", f"{fmt!r}; allowed: {', '.join(FORMATS)}")
    cfg = effective_packet_config(scn.packet, scn.spec.deploy, file=scn.file)
    if cfg.buffer.size_bytes is None:  # the simulator's: each switch model's; one for all
        size = max((int(m.buffer_mb * 1_000_000) for _, m in f.models), default=32 << 20)
        cfg = cfg.model_copy(update={"buffer": cfg.buffer.model_copy(
            update={"size_bytes": size})})
    if fmt == "ns3-rdma":
        _ns3_limits(f)
        if cfg.cc.algorithm not in NS3_CC_MODE:
            raise _refuse("packet.cc.algorithm", f"{cfg.cc.algorithm} has no equivalent in "
                          "ns-3's RDMA simulator; allowed: "
                          f"{', '.join(NS3_CC_MODE)} (or --format uet-htsim)")
    flows = scenario_flows(scn, f, start_times=start_times, fmt=fmt)
    if fmt == "ns3-rdma":
        return ns3_files(scn, f, cfg, flows)
    if fmt == "uet-htsim":
        return uet_htsim_files(scn, f, cfg, flows)
    return htsim_files(scn, f, cfg, flows)
