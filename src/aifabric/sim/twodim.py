"""The two-dimension flow simulator: collectives and jobs over scale-up domains and the
scale-out fabric between them.

The network is what NCCL sees of a cluster of D domains of N GPUs. Every GPU has four
arcs: NVLink up to its domain's switches and down from them (point-to-point copies at
the NVLink rate, ``scaleup_gbps``), and its NIC out and in (``scaleout_gbps``). NVLS
traffic (to and from the switch, which reduces and multicasts) also crosses an arc per
GPU and direction at the rate in-switch reduction sustains (``nvls_gbps``). NVLink
switch chips are full crossbars: inside a domain only the GPU's own links bind. Between
domains a transfer crosses the source's NIC and the destination's NIC; with a scale-out
``oversubscription`` above 1, also its domain's uplink and the far domain's downlink
(N x NIC / oversubscription each way).

The DAG (:mod:`aifabric.workload.collectives.twodim`) runs on these arcs in the flow
engine (:func:`aifabric.sim.flow.engine.run_flow`, max-min fair); the result is the
bandwidth time, to which the cost model (:mod:`aifabric.workload.tuner`) adds NCCL's
latency and protocol efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from aifabric.errors import SpecError
from aifabric.sim.flow.engine import FlowRun, Paths, run_flow
from aifabric.spec.models import Spec
from aifabric.topology.domain import resolve_domain
from aifabric.topology.parts import active_hosts
from aifabric.workload.collectives.twodim import ALGORITHMS_2D, add_2d_collective
from aifabric.workload.dag import DAGBuilder, TransferDAG
from aifabric.workload.tuner import Choice, TwoDim, bandwidth_ns, choose, price

__all__ = ["CollectiveResult", "DomainNet", "net_from_spec", "run_collective", "simulate_dag"]


@dataclass(frozen=True)
class DomainNet:
    """D domains of N GPUs with their rates per GPU per direction (Gbit/s): the effective
    ones the simulation uses and the physical ones the results are checked against."""

    domains: int
    per_domain: int
    scaleup_gbps: float  # point-to-point NVLink (physical x p2p efficiency)
    scaleout_gbps: float  # NIC (physical x scale-out efficiency)
    nvls_gbps: float = 0.0  # NVLS traffic (physical x NVLS efficiency); 0: no NVLS
    channels: int = 1
    oversubscription: float = 1.0
    physical_scaleup_gbps: float = 0.0
    physical_scaleout_gbps: float = 0.0
    total_domains: int = 0  # domains of the whole fabric (the run may use fewer)
    # storage nodes on the scale-out fabric (the converged option): count, NIC Gbit/s,
    # media write and read Gbit/s per node; ids past the switches
    storage: tuple[int, float, float, float] | None = None

    @property
    def n(self) -> int:
        return self.domains * self.per_domain

    @property
    def twodim(self) -> TwoDim:
        return TwoDim(self.domains, self.per_domain, self.scaleup_gbps, self.scaleout_gbps,
                      self.nvls_gbps, self.channels)

    def sized(self, gpus: int) -> DomainNet:
        """The same network cut to ``gpus`` GPUs: whole domains, or part of one."""
        N = self.per_domain
        if gpus <= N:
            d, per = 1, gpus
        elif gpus % N == 0:
            d, per = gpus // N, N
        else:
            raise ValueError(f"{gpus} GPUs is neither part of one domain nor whole domains "
                             f"of {N}")
        if d > self.total_domains:
            raise ValueError(f"{gpus} GPUs is more than the fabric's {self.total_domains} "
                             f"domains of {N}")
        return DomainNet(d, per, self.scaleup_gbps, self.scaleout_gbps, self.nvls_gbps,
                         min(self.channels, per), self.oversubscription,
                         self.physical_scaleup_gbps, self.physical_scaleout_gbps,
                         self.total_domains, self.storage)

    # ------------------------------------------------------------------ arcs
    def arc_capacity(self) -> np.ndarray:
        n, D = self.n, self.domains
        cap = [np.full(2 * n, self.scaleup_gbps), np.full(2 * n, self.scaleout_gbps),
               np.full(2 * n, self.nvls_gbps if self.nvls_gbps > 0 else self.scaleup_gbps)]
        if self.oversubscription > 1:
            cap.append(np.full(2 * D, self.per_domain * self.scaleout_gbps
                               / self.oversubscription))
        if self.storage is not None:  # NIC in, NIC out, media write, media read
            S, nic, wr, rd = self.storage
            cap += [np.full(2 * S, nic), np.full(S, wr), np.full(S, rd)]
        return np.concatenate(cap)

    def paths(self, dag: TransferDAG) -> tuple[Paths, np.ndarray]:
        """The connections of ``dag``'s transfers and their arcs: (Paths, conn of each
        transfer). GPU ids are 0..n-1 (rank order), ids n + d the switches of domain d."""
        n, N, D = self.n, self.per_domain, self.domains
        S = self.storage[0] if self.storage is not None else 0
        sw_end = n + D
        ids = sw_end + S
        key = dag.src * ids + dag.dst
        uk, xconn = np.unique(key, return_inverse=True)
        s, t = uk // ids, uk % ids
        if (s >= ids).any() or (t >= ids).any() or ((s >= n) & (t >= n)).any():
            raise ValueError("a transfer between two switches or an unknown id")
        to_st, from_st = t >= sw_end, s >= sw_end  # storage nodes (converged option)
        to_sw, from_sw = (t >= n) & ~to_st, (s >= n) & ~from_st
        p2p = ~to_sw & ~from_sw & ~to_st & ~from_st
        same = p2p & (s // N == t // N)
        cross = p2p & ~same
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []

        def add(mask: np.ndarray, *arcs: np.ndarray) -> None:
            idx = np.flatnonzero(mask)
            for a in arcs:
                rows.append(idx)
                cols.append(a)

        add(same, s[same], n + t[same])  # NVLink up, then down
        if self.oversubscription > 1:
            add(cross, 2 * n + s[cross], 3 * n + t[cross], 6 * n + s[cross] // N,
                6 * n + D + t[cross] // N)
        else:
            add(cross, 2 * n + s[cross], 3 * n + t[cross])  # NIC out, NIC in
        add(to_sw, s[to_sw], 4 * n + s[to_sw])  # NVLink up, NVLS share
        add(from_sw, n + t[from_sw], 5 * n + t[from_sw])  # NVLink down, NVLS share
        if S:  # the GPU's NIC, its domain's uplink, the node's NIC and media
            st = 6 * n + (2 * D if self.oversubscription > 1 else 0)
            w, r = t[to_st] - sw_end, s[from_st] - sw_end
            add(to_st, 2 * n + s[to_st], st + w, st + 2 * S + w)
            add(from_st, st + S + r, st + 3 * S + r, 3 * n + t[from_st])
            if self.oversubscription > 1:
                add(to_st, 6 * n + s[to_st] // N)
                add(from_st, 6 * n + D + t[from_st] // N)
        cap = self.arc_capacity()
        r, c = np.concatenate(rows), np.concatenate(cols)
        inc = sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(len(uk), len(cap)))
        paths = Paths(incidence=inc, conn_ptr=np.arange(len(uk) + 1, dtype=np.int64),
                      latency_ns=np.zeros(len(uk)), capacity_gbps=cap)
        return paths, xconn.astype(np.int64)

    def dimension_of_arcs(self) -> dict[str, slice]:
        n = self.n
        return {"scaleup_up": slice(0, n), "scaleup_down": slice(n, 2 * n),
                "scaleout_out": slice(2 * n, 3 * n), "scaleout_in": slice(3 * n, 4 * n),
                "nvls_up": slice(4 * n, 5 * n), "nvls_down": slice(5 * n, 6 * n)}


def net_from_spec(spec: Spec, *, channels: int | None = None) -> DomainNet:
    """The two dimensions of ``spec``: its scale-up domain (or one domain per host when it
    has none: NVLink at ``hosts.scaleup_gbps``, no NVLS) and its NICs per GPU."""
    h = spec.hosts
    try:
        hosts = active_hosts(spec)
    except SpecError:  # a fat-tree with no count builds all its pods: count them
        from aifabric.topology import build_fabric
        from aifabric.topology.fabric import NodeKind

        f = build_fabric(spec)
        host_ids = f.ids(NodeKind.HOST)
        hosts = int((~f.nodes.backup[host_ids]).sum())
    dom = resolve_domain(spec, hosts)
    nic = h.nics_per_host * h.ports_per_nic * h.port_gbps / h.gpus_per_host
    topo = spec.topology
    over = float(getattr(topo, "oversubscription", None) or 1.0)
    if dom is None:
        N, count = h.gpus_per_host, hosts
        su, su_eff, nv, so_eff = float(h.scaleup_gbps), 1.0, 0.0, 1.0
    else:
        N, count = dom.gpus, dom.count
        su, su_eff, so_eff = dom.gbps_per_gpu, dom.p2p_efficiency, dom.scaleout_efficiency
        nv = dom.gbps_per_gpu * dom.nvls_efficiency if dom.nvls else 0.0
    C = channels if channels is not None else min(N, 32)
    return DomainNet(count, N, su * su_eff, nic * so_eff, nv, C, max(1.0, over), su, nic,
                     count)


@dataclass
class CollectiveResult:
    """One collective over two dimensions: NCCL's choice, its time and bandwidths, and
    what crossed each dimension."""

    op: str
    size_bytes: float
    gpus: int
    domains: int
    per_domain: int
    choice: Choice  # the algorithm/protocol run, priced with the simulated bandwidth time
    closed_form_ns: float  # bandwidth time by the closed form
    simulated_ns: float  # bandwidth time by the flow simulation
    bytes: dict[str, float]  # per dimension, from the simulation's arcs
    dag_bytes: dict[str, float]  # per dimension, from the DAG's transfers
    peak_gbps_per_gpu: dict[str, float]  # busiest GPU's average rate per dimension
    candidates: list[Choice] = field(default_factory=list)  # the cost model's ranking

    def as_dict(self) -> dict[str, Any]:
        c = self.choice
        return {"op": self.op, "size_bytes": self.size_bytes, "gpus": self.gpus,
                "domains": self.domains, "gpus_per_domain": self.per_domain,
                "algorithm": c.algorithm, "protocol": c.protocol,
                "time_us": round(c.time_ns / 1000, 3),
                "latency_us": round(c.latency_ns / 1000, 3),
                "algbw_gbs": round(c.algbw_gbs, 3), "busbw_gbs": round(c.busbw_gbs, 3),
                "bandwidth_time_us": {"simulated": round(self.simulated_ns / 1000, 3),
                                      "closed_form": round(self.closed_form_ns / 1000, 3)},
                "bytes": {k: float(v) for k, v in self.bytes.items()},
                "peak_gbps_per_gpu": {k: round(v, 3)
                                      for k, v in self.peak_gbps_per_gpu.items()}}


def simulate_dag(net: DomainNet, dag: TransferDAG) -> tuple[FlowRun, dict[str, float],
                                                            dict[str, float]]:
    """Run ``dag`` on ``net``: the flow run, bytes per dimension by the arcs and by the
    transfers (scale-up: NVLink copies and NVLS, each counted once at the sender;
    scale-out: bytes leaving their domain)."""
    paths, xconn = net.paths(dag)
    run = run_flow(dag, paths, xconn)
    sl = net.dimension_of_arcs()
    ab = run.arc_bytes
    # scale-up: what GPUs put on NVLink plus what the switches send on their own (NVLS
    # results and multicast, on the NVLS down arcs); scale-out: what leaves a domain
    by_arc = {"scaleup": float(ab[sl["scaleup_up"]].sum() + ab[sl["nvls_down"]].sum()),
              "scaleout": float(ab[sl["scaleout_out"]].sum())}
    n, N = net.n, net.per_domain
    size = dag.size_bytes * dag.repeat[dag.xfer_stage]
    s, t = dag.src, dag.dst
    cross = (s < n) & (t < n) & (s // N != t // N)
    by_dag = {"scaleup": float(size[~cross].sum()), "scaleout": float(size[cross].sum())}
    return run, by_arc, by_dag


def run_collective(net: DomainNet, op: str, size_bytes: float, *, gpus: int | None = None,
                   algorithm: str | None = None, protocol: str | None = None,
                   chunk_bytes: float = 4 << 20, pipeline: int = 1) -> CollectiveResult:
    """Choose (or take the pinned) algorithm and protocol for ``op`` of ``size_bytes`` on
    ``gpus`` GPUs (default: the whole fabric), simulate its transfers, and price it.
    ``pipeline`` K > 1: hierarchical's phases pipelined over K chunks (1: one after the
    other)."""
    if op not in ALGORITHMS_2D:
        raise SpecError.at("op", f"unknown collective {op!r}; allowed: "
                           f"{', '.join(ALGORITHMS_2D)}")
    try:
        sub = net.sized(gpus if gpus is not None else net.total_domains * net.per_domain)
    except ValueError as e:
        raise SpecError.at("gpus", str(e)) from None
    p = sub.twodim
    try:
        best, cands = choose(op, p, size_bytes, algorithm=algorithm, protocol=protocol,
                             pipeline=pipeline)
    except ValueError as e:
        raise SpecError.at("algorithm" if algorithm else "protocol", str(e)) from None
    b = DAGBuilder()
    grid = np.arange(sub.n, dtype=np.int64).reshape(sub.domains, sub.per_domain)
    switch = sub.n + np.arange(sub.domains, dtype=np.int64)
    add_2d_collective(b, op, best.algorithm, grid, size_bytes, switch=switch,
                      channels=sub.channels, chunk_bytes=chunk_bytes, pipeline=pipeline)
    dag = b.build()
    run, by_arc, by_dag = simulate_dag(sub, dag)
    sim_ns = float(run.stage_end_ns.max()) if dag.n_stages else 0.0
    closed = bandwidth_ns(op, best.algorithm, p, size_bytes, chunk_bytes=chunk_bytes,
                          pipeline=pipeline)
    final = price(op, best.algorithm, best.protocol, p, size_bytes, bandwidth_time_ns=sim_ns)
    sl = sub.dimension_of_arcs()
    ab = run.arc_bytes
    t = max(sim_ns, 1e-9)
    peak = {"scaleup": float(max(ab[sl["scaleup_up"]].max(initial=0),
                                 ab[sl["scaleup_down"]].max(initial=0))) * 8 / t,
            "scaleout": float(max(ab[sl["scaleout_out"]].max(initial=0),
                                  ab[sl["scaleout_in"]].max(initial=0))) * 8 / t}
    return CollectiveResult(op, float(size_bytes), sub.n, sub.domains, sub.per_domain, final,
                            closed, sim_ns, by_arc, by_dag, peak, cands)
