"""A fabric as the input files of ASTRA-sim and SimAI, to compare against those simulators.

* **ASTRA-sim** (analytical/ns-3 network backends) describes a network as a product of
  dimensions, each a ``Ring``, ``FullyConnected`` or ``Switch`` of ``npus_count`` NPUs
  with a per-link bandwidth in "GB/s" and a per-link latency (ns). ASTRA-sim's analytical
  backend reads that GB as 2^30 bytes and charges a ``Switch`` dimension two links (NPU to
  switch, switch to NPU) per message, so the exporter writes Gb/s x 1e9 / 8 / 2^30 and
  half the end-to-end latency. :func:`astra_sim_files` maps an
  aifabric fabric onto the closest stack of ``Switch`` dimensions — the scale-up domain
  (the host's NVSwitch), the hosts of one segment (the rail/ToR tier), the segments of a
  pod, the pods — with each dimension's bandwidth the per-GPU bandwidth the fabric
  offers at that level (oversubscription included) and its latency the base one-way
  latency the plan measures for a pair of GPUs that differ at that level. It also writes
  the system config (collective algorithms matching aifabric's: ring, direct
  All-to-All) and a memory config.
* **SimAI** (Alibaba's ASTRA-sim fork with ns-3) reads one topology text file: a header
  ``nodes gpus_per_server nvswitches switches links gpu_type``, a line of every switch's
  node id (NVSwitches first), then one line per link ``src dst bandwidth latency
  error_rate``. :func:`simai_files` writes every active GPU, one NVSwitch per host and
  every switch with the fabric's own links (a NIC port's link to its ToR becomes its
  GPU's link to that ToR, as SimAI merges NIC and GPU).

Both are built from the node and link arrays; no loop over links in Python. What the
formats cannot carry is listed in the NOTES.md written beside them (:data:`ASTRA_NOTES`,
:data:`SIMAI_NOTES`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["SimExport", "astra_gbps", "astra_sim_files", "simai_files"]


@dataclass
class SimExport:
    """Files (relative path -> text) and a one-line summary."""

    files: dict[str, str | bytes]  # text, or bytes (the Chakra ET files)
    summary: str


#: preferred-dataset-splits and active-chunks-per-dimension per channel of the scenario:
#: ASTRA-sim pipelines a ring collective over its chunks. Measured with its
#: congestion-aware backend, a 1 GiB ring AllReduce over 8 NPUs on one switch at 400G
#: (aifabric: 37.601 ms): 1 chunk 76.944 ms (2.05x: no pipelining), 4 chunks 38.254
#: (+1.7 %), 8 chunks 37.918 (+0.8 %), 16 chunks 37.750 (+0.4 %)
ASTRA_CHUNKS_PER_CHANNEL = 8

ASTRA_NOTES = """\
# ASTRA-sim inputs exported by aifabric

{run}
## How the fabric maps

{table}

Bandwidth is per NPU: the scale-up link of one GPU; the scale-out bandwidth of one GPU
(all its NIC ports); the same divided by the ToR tier's oversubscription across segments;
the bisection bandwidth per GPU across pods. ASTRA-sim's analytical backend reads its
`bandwidth` as GB/s with 1 GB = 2^30 bytes, so network.yml holds Gb/s x 1e9 / 8 / 2^30
(400 Gb/s -> 46.566); the table above shows the decimal GB/s (Gb/s / 8). Latency: a
`Switch` dimension charges its `latency` on each of the two links a message crosses (NPU
to switch, switch to NPU), so network.yml holds half the base one-way latency (links +
switch forwarding) `aifabric plan` reports for a pair of GPUs that differ first at that
dimension; the table shows the whole one-way latency.

The system config splits every collective into {splits} chunks, all active at once
(`preferred-dataset-splits`, `active-chunks-per-dimension`: 8 per channel, the
scenario's largest `channels` being {channels}): ASTRA-sim pipelines a ring over its
chunks, and with one chunk its congestion-aware backend takes about twice the ring's
time.

## Which backend

- **Congestion-aware** (`AstraSim_Analytical_Congestion_Aware`): shares each link between
  the messages on it, as aifabric does; use it to compare with aifabric. It takes one
  dimension only (it stops with "only support 1-dim topology"): a fabric of one GPU per
  host under one switch tier exports as one; with more dimensions only the
  congestion-unaware backend runs these files.
- **Congestion-unaware** (`AstraSim_Analytical_Congestion_Unaware`): every message gets a
  link's whole bandwidth however many share it: it ignores NIC sharing, so whatever runs
  at once through one NIC is too fast. An All-to-All, where each NPU sends to all others
  at once, runs about (peers x active chunks) times too fast: measured on 64 NPUs, 64 MiB
  each, 4.07 us against 1.325 ms congestion-aware (aifabric: 1.323 ms), 325x; ~1,000x and
  more on a thousand NPUs. With more than one active chunk (this config: {splits}) even
  a ring is too fast (8 chunks, 1 GiB over 8 NPUs: 4.94 ms against 37.92 ms
  congestion-aware); with `preferred-dataset-splits` and
  `active-chunks-per-dimension` set to 1 a ring comes out within 5 % (39.36 ms; aifabric
  37.60 ms), an All-to-All still (NPUs - 1) times too fast.

## What is lost

- Paths: ASTRA-sim's dimensions have no ECMP, hashing, source-port choice, spraying,
  adaptive routing or failures; every flow of a dimension sees the same bandwidth.
  aifabric's collisions (polarization, two-port imbalance) cannot appear.
- Wiring: rails, dual-ToR and dual-plane NICs, backup hosts and the exact leaf/spine
  fan-out are folded into one `Switch` per dimension. A rail-optimized fabric's cross-rail
  traffic, which aifabric sends over NVLink first (PXN), is not modelled.
- Oversubscription is an average per dimension, not per switch.
- Congestion control, PFC and ECN: not in these files (the ns-3 backend has its own).
- The system config's `local-mem-bw` and `endpoint-delay` are ASTRA-sim defaults;
  aifabric does not model memory or NIC processing.
"""

ASTRA_RUN_SPEC = """\
Run with ASTRA-sim 2.x, e.g. the analytical congestion-aware backend:

    AstraSim_Analytical_Congestion_Aware --workload-configuration=TRACE/PREFIX \\
        --system-configuration=system.json --network-configuration=network.yml \\
        --remote-memory-configuration=memory.json

No workload is written for a spec: export a scenario (its collectives and jobs become
`workload/aifabric.<rank>.et`), or give a Chakra trace `TRACE/PREFIX.<rank>.et`, the same
one `aifabric simulate` reads with `workload: {chakra: TRACE/PREFIX}`; ranks are laid out
host-major (rank r on GPU r of the dimension order below), as `placement: pack` does on an
empty fabric.
"""

ASTRA_RUN_WORKLOAD = """\
Run with ASTRA-sim 2.x's analytical congestion-aware backend, from this folder:

    AstraSim_Analytical_Congestion_Aware --workload-configuration=workload/aifabric \\
        --comm-group-configuration=workload/comm_group.json \\
        --system-configuration=system.json --network-configuration=network.yml \\
        --remote-memory-configuration=memory.json

The workload is the scenario's collectives and jobs as Chakra ET files, one per rank
(`workload/aifabric.<rank>.et`, {ranks} ranks; rank r is NPU r of the dimension order
below: host-major, the order aifabric places on), with their process groups in
`workload/comm_group.json` ({groups} groups; a collective over every rank has none).
Each collective is a `COMM_COLL_NODE` (`comm_type`, `comm_size` = the scenario's
`size_bytes`, `pg_name`); a `start_ms` is a `COMP_NODE` before it, a `repeat` a chain; a
job is aifabric's iteration (compute nodes, TP/EP/DP collectives, pipeline sends and
receives). `aifabric simulate` reads the same folder with
`workload: {chakra: workload/aifabric}`.
"""

SIMAI_NOTES = """\
# SimAI topology exported by aifabric

Run with SimAI's ns-3 backend, e.g.:

    SimAI_simulator -t 16 -w WORKLOAD.txt -n {topo} -c SimAI.conf

## How the fabric maps

- {gpus} GPUs are nodes 0..{last_gpu} (host-major: GPU g of host h is h x {gph} + g);
  {nvs} NVSwitches follow (one per host), then {sw} switches (ToR, agg, core in the
  fabric's order); `switches.csv` names every switch node.
- Each GPU links to its host's NVSwitch at the scale-up bandwidth, and to the ToR of each
  of its NIC ports at that port's speed (SimAI merges NIC and GPU, so the PCIe hop is
  dropped and its latency added to the access link).
- Switch-to-switch links are the fabric's own, one line per link (parallel links repeat).
- Bandwidth in Gbps, latency one way in ms (link propagation only: switch forwarding
  latency is SimAI's own setting), error rate 0.

## What is lost

- Backup (standby) hosts and their links are left out.
- A GPU mesh scale-up (`scaleup: mesh`) becomes an NVSwitch at the per-GPU bandwidth.
- Routing policy, failures, QoS and DCQCN settings stay in aifabric (SimAI.conf holds
  SimAI's own); the GPU type `{gpu_type}` is a label SimAI uses for its NVLink defaults.
"""


def _fixed(x: np.ndarray, digits: int) -> np.ndarray:
    """Plain decimals, trailing zeros dropped, never an exponent ("2.5e-05" is how %g
    writes 25 ns in ms; SimAI's own generator writes "0.000025ms")."""
    s = np.char.rstrip(np.char.mod(f"%.{digits}f", np.asarray(x, dtype=np.float64)), "0")
    return np.char.rstrip(s, ".")


def _ms(ns: np.ndarray) -> np.ndarray:
    return np.char.add(_fixed(np.asarray(ns) / 1e6, 9), "ms")


def _active_gpus(f: Fabric) -> np.ndarray:
    g = f.ids(NodeKind.GPU, active_only=True)
    return g[np.lexsort((f.nodes.index[g], f.nodes.host[g]))]


def astra_sim_files(f: Fabric, *, channels: int = 1, scenario: Any = None) -> SimExport:
    """ASTRA-sim's network.yml, system.json and memory.json for ``f`` (+ NOTES.md); with
    a ``scenario``, its collectives and jobs as the workload too (Chakra ET files, one
    per rank, and comm_group.json: :func:`astra_workload`), and the system config's
    dataset splits for the scenario's channels."""
    from aifabric.planning.summary import plan_fabric

    nodes, links = f.nodes, f.links
    gpus = _active_gpus(f)
    G = len(gpus)
    plan = plan_fabric(f, bisection=True)
    hosts = nodes.host[gpus]
    _, per_host = np.unique(hosts, return_counts=True)
    gph = int(per_host[0])
    seg = nodes.segment[gpus]
    pod = nodes.pod[gpus]
    if (per_host != gph).any():
        raise SpecError(Problem("--format", "astra-sim needs the same GPUs on every host"))
    # hosts per segment and segments per pod, each uniform
    hs = np.unique(np.stack([seg, hosts]), axis=1)
    _, hps = np.unique(hs[0], return_counts=True)
    sp = np.unique(np.stack([pod, seg]), axis=1)
    _, spp = np.unique(sp[0], return_counts=True)
    n_pods = len(np.unique(pod))
    uniform = (hps == hps[0]).all() and (spp == spp[0]).all()
    hops = plan["hops"]

    def lat(kind: str, fallback: str | None = None) -> float:
        h = hops.get(kind) or (hops.get(fallback) if fallback else None)
        return float(h["latency_ns"]) if h else 0.0

    sc = (links.kind == LinkKind.SCALEUP)
    scale_up = float(links.capacity_gbps[sc, 0].max()) if sc.any() else 0.0
    scale_out = float(plan["scaleout_gbps_per_gpu"])
    tor_over = float(plan["oversubscription"].get("tor", 1.0) or 1.0)
    agg_over = float(plan["oversubscription"].get("agg", 1.0) or 1.0)
    dims: list[tuple[str, int, float, float, str]] = []  # (what, npus, Gb/s, ns, from)
    if gph > 1:
        dims.append(("scale-up (NVSwitch of a host)", gph, scale_up, lat("same_host"),
                     "scaleup link; plan hops same_host"))
    if uniform:
        dims.append(("hosts of a segment (ToR / rail tier)", int(hps[0]), scale_out,
                     lat("same_rail_segment"), "NIC ports per GPU; hops same_rail_segment"))
        if int(spp[0]) > 1:
            dims.append(("segments of a pod (agg tier)", int(spp[0]),
                         scale_out / max(tor_over, 1.0), lat("cross_segment"),
                         "scale-out / ToR oversubscription; hops cross_segment"))
        if n_pods > 1:
            dims.append(("pods (core tier)", n_pods,
                         min(float(plan.get("bisection_gbps_per_gpu") or scale_out),
                             scale_out / max(tor_over, 1.0) / max(agg_over, 1.0)),
                         lat("cross_pod"), "bisection per GPU; hops cross_pod"))
    else:  # uneven segments: one switch over every host
        far = "cross_pod" if n_pods > 1 else "cross_segment"
        dims.append(("all hosts (segments are uneven)", G // gph,
                     float(plan.get("bisection_gbps_per_gpu") or scale_out),
                     lat(far, "same_rail_segment"), f"bisection per GPU; hops {far}"))
    dims = [d for d in dims if d[1] > 1] or [("one NPU", 1, scale_out, 0.0, "-")]
    assert int(np.prod([d[1] for d in dims])) == G
    net = ("# ASTRA-sim network config exported by aifabric from "
           f"{_yaml_str(f.name)} ({G} GPUs)\n"
           f"topology: [ {', '.join('Switch' for _ in dims)} ]\n"
           f"npus_count: [ {', '.join(str(d[1]) for d in dims)} ]\n"
           f"bandwidth: [ {', '.join(f'{astra_gbps(d[2]):.3f}' for d in dims)} ]"
           "  # GB/s per link, 1 GB = 2^30 B (as ASTRA-sim reads it)\n"
           f"latency: [ {', '.join(f'{d[3] / 2:.1f}' for d in dims)} ]"
           "  # ns per link (a Switch dimension: 2 links per message)\n")
    n = len(dims)
    wl_files, wl_notes = astra_workload(scenario, f) if scenario is not None else ({}, [])
    if scenario is not None:
        channels = max([int(channels)] + [c.channels for c in scenario.collectives]
                       + [j.channels for j in scenario.jobs])
    splits = ASTRA_CHUNKS_PER_CHANNEL * int(channels)
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": splits,
        "preferred-dataset-splits": splits,
        "all-reduce-implementation": ["ring"] * n,
        "all-gather-implementation": ["ring"] * n,
        "reduce-scatter-implementation": ["ring"] * n,
        "all-to-all-implementation": ["direct"] * n,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1600,
        "boost-mode": 0,
    }
    memory = {"memory-type": "NO_MEMORY_EXPANSION"}
    rows = ["| dim | what | NPUs | bandwidth GB/s (10^9 B) | one-way latency ns | from |",
            "|---|---|---|---|---|---|"]
    rows += [f"| {i} | {d[0]} | {d[1]} | {d[2] / 8:.3f} | {d[3]:.1f} | {d[4]} |"
             for i, d in enumerate(dims)]
    notes = _astra_notes(rows, splits, channels, G, wl_files if scenario is not None
                         else None, wl_notes)
    files: dict[str, bytes | str] = {"network.yml": net,
             "system.json": json.dumps(system, indent=2) + "\n",
             "memory.json": json.dumps(memory, indent=2) + "\n",
             "NOTES.md": notes, **wl_files}
    what = f", {G:,} Chakra rank files" if wl_files else ""
    return SimExport(files, f"{G:,} NPUs in {n} dimension(s) "
                     f"{' x '.join(str(d[1]) for d in dims)}{what}")


def _astra_notes(rows: list[str], splits: int, channels: int, G: int,
                 wl_files: dict[str, bytes | str] | None, wl_notes: list[str]) -> str:
    notes = ASTRA_NOTES.replace("{table}", "\n".join(rows)).replace(
        "{splits}", str(splits)).replace("{channels}", str(channels))
    if wl_files is not None:
        run = ASTRA_RUN_WORKLOAD.replace("{ranks}", f"{G:,}").replace(
            "{groups}", str(len(json.loads(str(wl_files["workload/comm_group.json"])))))
        if wl_notes:
            run += "\n" + "\n".join(f"- {x}" for x in wl_notes) + "\n"
    else:
        run = ASTRA_RUN_SPEC
    return notes.replace("{run}", run)


def astra_gbps(gbps: float) -> float:
    """Gb/s as ASTRA-sim's analytical ``bandwidth`` (its "GB/s" is 2^30 bytes per second)."""
    return gbps * 1e9 / 8 / 2**30


def _yaml_str(s: str) -> str:
    return json.dumps(str(s))  # a JSON string is a YAML string


def simai_files(f: Fabric, *, gpu_type: str = "H100") -> SimExport:
    """SimAI's topology file for ``f`` (+ switches.csv naming the switch nodes, NOTES.md)."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", gpu_type):
        raise SpecError(Problem("--gpu-type", f"{gpu_type!r}; allowed: letters, digits, "
                                "._- (e.g. H100, A100, H800)"))
    nodes, links = f.nodes, f.links
    gpus = _active_gpus(f)
    G = len(gpus)
    hosts = np.unique(nodes.host[gpus])
    gph = int(f.spec.hosts.gpus_per_host)
    if gph < 2:
        raise SpecError(Problem("--format", "simai needs hosts with more than one GPU (an "
                                "NVSwitch per host); allowed: gpus_per_host >= 2"))
    H = len(hosts)
    sw = np.flatnonzero(f.is_switch & ~nodes.backup)
    sw = sw[np.lexsort((sw, nodes.tier[sw]))]
    S = len(sw)
    new = np.full(f.n_nodes, -1, dtype=np.int64)
    new[gpus] = np.arange(G)
    host_node = f.ids(NodeKind.HOST, active_only=True)
    hrank = np.full(int(nodes.host.max()) + 1, -1, dtype=np.int64)
    hrank[hosts] = np.arange(H)
    new[host_node] = G + hrank[nodes.host[host_node]]
    new[sw] = G + H + np.arange(S)
    a, b, kind = links.a.astype(np.int64), links.b.astype(np.int64), links.kind
    cap = links.capacity_gbps[:, 0]
    lat = links.latency_ns.astype(np.float64)
    live = ~nodes.backup[a] & ~nodes.backup[b]
    # GPU of each NIC port: through its PCIe link
    pcie = (kind == LinkKind.PCIE) & live
    pa, pb = a[pcie], b[pcie]
    gpu_end = np.where(nodes.kind[pa] == NodeKind.GPU, pa, pb)
    nic_end = np.where(nodes.kind[pa] == NodeKind.GPU, pb, pa)
    nic_gpu = np.full(f.n_nodes, -1, dtype=np.int64)
    nic_pcie_lat = np.zeros(f.n_nodes)
    counts = np.bincount(nic_end, minlength=f.n_nodes)
    if (counts > 1).any():
        raise SpecError(Problem("--format", "simai needs one GPU per NIC (SimAI merges NIC "
                                "and GPU); this fabric shares NICs between GPUs; allowed: "
                                "nics_per_host = gpus_per_host"))
    nic_gpu[nic_end] = gpu_end
    nic_pcie_lat[nic_end] = lat[pcie]
    out_src: list[np.ndarray] = []
    out_dst: list[np.ndarray] = []
    out_bw: list[np.ndarray] = []
    out_lat: list[np.ndarray] = []
    # scale-up: GPU <-> its host's NVSwitch (a mesh: one per GPU at its total NVLink rate)
    su = (kind == LinkKind.SCALEUP) & live
    if gph > 1:
        per_gpu = np.bincount(np.concatenate([a[su], b[su]]),
                              weights=np.concatenate([cap[su], cap[su]]), minlength=f.n_nodes)
        su_lat = np.zeros(f.n_nodes)
        su_lat[a[su]] = lat[su]
        su_lat[b[su]] = lat[su]
        out_src.append(np.arange(G))
        out_dst.append(G + hrank[nodes.host[gpus]])
        out_bw.append(per_gpu[gpus])
        out_lat.append(su_lat[gpus])
    acc = (kind == LinkKind.ACCESS) & live
    aa, ab = a[acc], b[acc]
    nic = np.where(nodes.kind[aa] == NodeKind.NIC, aa, ab)
    tor = np.where(nodes.kind[aa] == NodeKind.NIC, ab, aa)
    g_of = nic_gpu[nic]
    ok = g_of >= 0
    out_src.append(new[g_of[ok]])
    out_dst.append(new[tor[ok]])
    out_bw.append(cap[acc][ok])
    out_lat.append(lat[acc][ok] + nic_pcie_lat[nic[ok]])
    up = ((kind == LinkKind.LEAF_SPINE) | (kind == LinkKind.SPINE_CORE)) & live
    out_src.append(new[a[up]])
    out_dst.append(new[b[up]])
    out_bw.append(cap[up])
    out_lat.append(lat[up])
    src, dst = np.concatenate(out_src), np.concatenate(out_dst)
    bw, la = np.concatenate(out_bw), np.concatenate(out_lat)
    assert (src >= 0).all() and (dst >= 0).all()
    L = len(src)
    nvs = H
    lines = np.char.add(np.char.add(np.char.add(src.astype(str), " "), dst.astype(str)), " ")
    lines = np.char.add(np.char.add(lines, np.char.add(_fixed(bw, 6), "Gbps ")),
                        np.char.add(_ms(la), " 0"))
    total = G + nvs + S
    ids = np.arange(G, total)
    head = f"{total} {gph} {nvs} {S} {L} {gpu_type}\n"
    body = " ".join(map(str, ids.tolist())) + "\n"
    topo = head + body + "\n".join(lines.tolist()) + "\n"
    names = ["node,name,kind"]
    names += [f"{G + H + i},{nodes.name[s]},{NodeKind(int(nodes.kind[s])).label}"
              for i, s in enumerate(sw.tolist())]  # switches: hundreds to thousands
    name = f"{_safe(f.name)}.topo"
    notes = (SIMAI_NOTES.replace("{topo}", name).replace("{gpus}", f"{G:,}")
             .replace("{last_gpu}", str(G - 1)).replace("{gph}", str(gph))
             .replace("{nvs}", f"{nvs:,}").replace("{sw}", f"{S:,}")
             .replace("{gpu_type}", gpu_type))
    return SimExport({name: topo, "switches.csv": "\n".join(names) + "\n", "NOTES.md": notes},
                     f"{G:,} GPUs, {nvs:,} NVSwitches, {S:,} switches, {L:,} links")


def _safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "fabric"


# -- ASTRA-sim workload: the scenario's collectives and jobs as Chakra ET files ---------

#: aifabric's collective ops as Chakra's CollectiveCommType (et_def.proto), which ASTRA-sim
#: runs (Workload::issue_coll_comm) and aifabric's own reader maps back (chakra.COLL_OPS)
_COMM_TYPE = {"allreduce": 0, "allgather": 2, "broadcast": 5, "alltoall": 6,
              "reduce_scatter": 7}
#: the trace's name: ASTRA-sim opens ``<prefix>.<rank>.et`` (Workload::Workload)
ET_PREFIX = "aifabric"
_COMP, _SEND, _RECV, _COLL = 4, 5, 6, 7


#: per rank, the nodes the next node of that rank waits for (Chakra data_deps)
Deps = dict[int, list[int]]


class _Ranks:
    """Per-rank Chakra node lists built in the scenario's order (node ids per rank from
    0). A node is (id, type, name, duration_us, deps, attrs)."""

    def __init__(self, n: int) -> None:
        self.nodes: list[list[tuple]] = [[] for _ in range(n)]
        self.groups: dict[tuple[int, ...], str] = {}

    def add(self, r: int, ntype: int, name: str, deps: list[int], dur_us: int = 0,
            **attrs: Any) -> int:
        deps = sorted({d for d in deps if d >= 0})
        if len(deps) > 1:
            # one parent per node: a zero-time compute node joins the others first (the
            # ASTRA-sim build checked here crashed at exit on nodes with several
            # parents, and refuses CPU nodes in its statistics)
            j = len(self.nodes[r])
            self.nodes[r].append((j, _COMP, f"{name} (join)", 0, deps, {}))
            deps = [j]
        i = len(self.nodes[r])
        self.nodes[r].append((i, ntype, name, int(dur_us), deps, attrs))
        return i

    def group(self, ranks: np.ndarray, n_all: int) -> str:
        """ASTRA-sim's pg_name: "" (every rank, in order) or a group id (1, 2, ...) of
        comm_group.json."""
        key = tuple(int(x) for x in ranks)
        if key == tuple(range(n_all)):
            return ""
        if key not in self.groups:
            self.groups[key] = str(len(self.groups) + 1)
        return self.groups[key]


def _coll(R: _Ranks, ranks: np.ndarray, deps: Deps, op: str, size: int,
          name: str, n_all: int) -> Deps:
    """One collective on ``ranks`` (each after its ``deps`` node); returns the new nodes."""
    pg = R.group(ranks, n_all)
    out = {}
    grp = {"pg_name": pg} if pg else {}  # none: every rank (ASTRA-sim's and aifabric's)
    if op == "allgather":  # ASTRA-sim gathers comm_size from each rank (n x in all)
        size = round(size / len(ranks))
    for r in ranks.tolist():
        out[r] = [R.add(r, _COLL, name, deps.get(r, []), comm_type=_COMM_TYPE[op],
                        comm_size=int(size), **grp)]
    return out


def _p2p(R: _Ranks, src: np.ndarray, dst: np.ndarray, deps: Deps, size: int,
         tag: int, name: str) -> Deps:
    """src[i] sends ``size`` bytes to dst[i]; each rank's node(s) after its ``deps``; the
    returned nodes of a rank are its sends and receives."""
    ends: dict[int, list[int]] = {}
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        ends.setdefault(a, []).append(R.add(a, _SEND, f"{name} send", deps.get(a, []),
                                            comm_src=a, comm_dst=b, comm_size=int(size),
                                            comm_tag=tag))
        ends.setdefault(b, []).append(R.add(b, _RECV, f"{name} recv", deps.get(b, []),
                                            comm_src=a, comm_dst=b, comm_size=int(size),
                                            comm_tag=tag))
    return ends


def _us(ns: float) -> int:
    return round(ns / 1000)


def _job(R: _Ranks, job: Any, ranks: np.ndarray, n_all: int, tag0: int) -> int:
    """One training job, per rank, as aifabric's job model builds it
    (:func:`aifabric.workload.job.add_job`: GPipe schedule, TP AllReduces and EP
    All-to-Alls per stage and micro-batch, activations point to point between stages,
    the DP gradient AllReduce in buckets overlapped with the last backward). Returns the
    next free p2p tag."""
    par, m = job.parallel, job.model
    dp, tp, pp, ep = par.dp, par.tp, par.pp, par.ep
    g = ranks.reshape(pp, dp, tp)
    L = max(1, m.layers // pp)
    moe = (L // m.moe_every) if m.moe_every else 0
    act = m.micro_batch * m.seq_len * m.hidden * m.bytes_per_value
    grad = m.params * m.bytes_per_value / (tp * pp)
    fwd = job.compute.fwd_ms_per_layer * 1e6
    bwd = job.compute.bwd_ms_per_layer * 1e6 if job.compute.bwd_ms_per_layer is not None \
        else 2 * fwd
    M, name = job.micro_batches, job.name or "job"
    tp_bytes = round(2 * L * act)
    ep_bytes = round(2 * moe * act * m.top_k / tp)
    last: Deps = {}
    tag = tag0

    def comp(rs: np.ndarray, ns: float, deps: Deps, label: str) -> Deps:
        return {r: [R.add(r, _COMP, label, deps.get(r, []), dur_us=_us(ns))]
                for r in rs.ravel().tolist()}

    def join(*ds: Deps) -> Deps:
        """Every node of ``ds`` per rank (the next node waits for all of them)."""
        keys = sorted(set().union(*ds))
        return {r: sorted({x for d in ds for x in d.get(r, [])}) for r in keys}

    def tp_ar(p: int, deps: Deps, label: str) -> Deps:
        if tp < 2:
            return deps
        out: Deps = {}
        for d in range(dp):
            out |= _coll(R, g[p, d], deps, "allreduce", tp_bytes, label, n_all)
        return out

    def ep_a2a(p: int, deps: Deps, label: str) -> Deps:
        if ep < 2 or not moe:
            return deps
        grp = g[p].reshape(dp // ep, ep, tp).transpose(0, 2, 1).reshape(-1, ep)
        out: Deps = {}
        for row in grp:
            out |= _coll(R, row, deps, "alltoall", ep_bytes, label, n_all)
        return out

    for it in range(job.iterations):
        fwd_end: dict[tuple[int, int], Deps] = {}
        send_f: dict[tuple[int, int], Deps] = {}
        bwd_end: dict[tuple[int, int], Deps] = {}
        send_b: dict[tuple[int, int], Deps] = {}
        for mb in range(M):
            for p in range(pp):
                deps = join(fwd_end[p, mb - 1] if mb else last,
                            send_f.get((p - 1, mb), {}))
                lab = f"{name} it{it} fwd p{p} m{mb}"
                c = comp(g[p], fwd * L, deps, lab)
                c = ep_a2a(p, tp_ar(p, c, lab + " tp"), lab + " ep")
                fwd_end[p, mb] = c
                if p + 1 < pp:
                    send_f[p, mb] = _p2p(R, g[p].ravel(), g[p + 1].ravel(), c,
                                         round(act / tp), tag, lab + " pp")
                    tag += 1
        dp_end: Deps = {}
        for p in reversed(range(pp)):
            for mb in range(M):
                deps = join(fwd_end[p, M - 1], bwd_end.get((p, mb - 1), {}),
                            send_b.get((p + 1, mb), {}))
                lab = f"{name} it{it} bwd p{p} m{mb}"
                chunks = job.buckets if (mb == M - 1 and dp > 1) else 1
                c = deps
                for k in range(chunks):
                    c = comp(g[p], bwd * L / chunks, c, lab + (f" chunk {k}" if chunks > 1
                                                               else ""))
                    if mb == M - 1 and dp > 1:
                        prev = join(c, dp_end if k else {})
                        for t in range(tp):
                            dp_end |= _coll(R, g[p, :, t], prev, "allreduce",
                                            round(grad / chunks),
                                            f"{name} it{it} dp p{p} bucket {k}", n_all)
                c = ep_a2a(p, tp_ar(p, c, lab + " tp"), lab + " ep")
                bwd_end[p, mb] = c
                if p > 0:
                    send_b[p, mb] = _p2p(R, g[p].ravel(), g[p - 1].ravel(), c,
                                         round(act / tp), tag, lab + " pp")
                    tag += 1
        last = join(*[bwd_end[p, M - 1] for p in range(pp)], dp_end)
    return tag


def astra_workload(scn: Any, f: Fabric) -> tuple[dict[str, bytes | str], list[str]]:
    """The scenario's collectives and jobs as one Chakra ET file per rank
    (``workload/aifabric.<rank>.et``, rank = NPU in the network config's host-major
    order) and ``workload/comm_group.json`` (ASTRA-sim's process groups, which aifabric's
    Chakra reader takes too); returns the files and notes."""
    from aifabric.sim.run import compile_workload
    from aifabric.workload.chakra import et_classes

    if scn.traffic or scn.workload is not None:
        what = "traffic patterns" if scn.traffic else "a Chakra workload"
        raise SpecError(Problem("--format", f"astra-sim writes a scenario's collectives and "
                                f"jobs as its workload; this scenario has {what}; allowed: "
                                "collectives and jobs (a Chakra workload: give ASTRA-sim "
                                "that trace with the network config of its spec)"))
    pb = et_classes()  # mlc-chakra's protobuf classes (a one-line refusal without the extra)
    wl = compile_workload(scn, f)  # placement as aifabric's (and its refusals)
    gpus = _active_gpus(f)
    N = len(gpus)
    rank_of = np.full(f.n_nodes, -1, dtype=np.int64)
    rank_of[gpus] = np.arange(N)
    R = _Ranks(N)
    notes: list[str] = []
    tag = 1
    for js, jg in zip(scn.jobs, wl.job_gpus, strict=True):
        tag = _job(R, js, rank_of[jg], N, tag)
    for i, (cs, cg) in enumerate(zip(scn.collectives, wl.coll_gpus, strict=True)):
        ranks = rank_of[cg]
        deps: Deps = {}
        name = cs.name or f"{cs.op}-{i}"
        if cs.start_ms:
            deps = {r: [R.add(r, _COMP, f"{name} start", [], dur_us=round(cs.start_ms * 1000))]
                    for r in ranks.tolist()}
            if not float(cs.start_ms * 1000).is_integer():
                notes.append(f"{name}: start_ms {cs.start_ms:g} rounded to whole "
                             "microseconds (Chakra's duration_micros)")
        if cs.algorithm not in (None, "ring", "direct"):
            notes.append(f"{name}: algorithm {cs.algorithm} is aifabric's; ASTRA-sim runs "
                         "the system config's (ring; direct All-to-All)")
        if "chunk_bytes" in cs.model_fields_set:
            notes.append(f"{name}: chunk_bytes is aifabric's pipelining; ASTRA-sim splits "
                         "by the system config's preferred-dataset-splits")
        if cs.op == "allgather":
            notes.append(f"{name}: an AllGather's comm_size is what each rank contributes "
                         f"(size_bytes / {len(ranks)}), as ASTRA-sim reads it (it gathers "
                         "that from every rank); aifabric's own Chakra reader takes "
                         "comm_size as the whole size_bytes")
        if cs.op == "broadcast":
            notes.append(f"{name}: ASTRA-sim does not simulate a BROADCAST (it waits the "
                         "node's duration_micros, 0 here: 1 ns)")
        for r in range(cs.repeat):
            nm = name + (f"#{r}" if cs.repeat > 1 else "")
            if cs.op == "p2p":
                peers = ranks[np.asarray(cs.peers, dtype=np.int64)]
                deps = _p2p(R, ranks, peers, deps, int(cs.size_bytes), tag, nm)
                tag += 1
            else:
                deps = _coll(R, ranks, deps, cs.op, int(cs.size_bytes), nm, N)
    files: dict[str, bytes | str] = {}
    meta = pb.GlobalMetadata(version="0.0.4")
    for r in range(N):
        buf = bytearray(_frame(meta.SerializeToString()))
        for i, ntype, name, dur, deps, attrs in R.nodes[r]:
            nd = pb.Node(id=i, name=name, type=ntype, duration_micros=dur)
            nd.data_deps.extend(deps)
            nd.attr.append(pb.AttributeProto(name="is_cpu_op",
                                             bool_val=bool(attrs.get("is_cpu_op", False))))
            for k, v in attrs.items():
                if k == "is_cpu_op":
                    continue
                a = pb.AttributeProto(name=k)
                if isinstance(v, str):
                    a.string_val = v
                else:
                    a.int64_val = int(v)
                nd.attr.append(a)
            buf += _frame(nd.SerializeToString())
        files[f"workload/{ET_PREFIX}.{r}.et"] = bytes(buf)
    groups = {gid: list(k) for k, gid in R.groups.items()}
    files["workload/comm_group.json"] = json.dumps(groups) + "\n"
    return files, notes


def _frame(msg: bytes) -> bytes:
    """protolib's framing (encodeMessage): the length as a varint, then the message."""
    n, out = len(msg), bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out) + msg
