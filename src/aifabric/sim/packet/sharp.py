"""SHARP in-network AllReduce at packet level, on an InfiniBand fabric (issue 27 item 4).

The flow level (:mod:`aifabric.sim.sharp`) runs a SHARP AllReduce as the fluid limit of
its pipeline. Here the same reduction trees run packet by packet, under InfiniBand's
credit-based flow control, as a Quantum switch runs them:

* **aggregation nodes**: every switch on a tree gets an aggregation unit, modelled as an
  end node of the packet network attached to its switch by an internal link (two arcs
  past the fabric's own: ``switch -> unit`` and ``unit -> switch``). The QPs of the
  kernel still start and end at end nodes; the reduction is the dependency between
  per-chunk transfers below. The internal link's rate is the switch's whole port
  bandwidth (model ports x port speed) unless ``agg_gbps`` says otherwise: NVIDIA
  publishes no per-switch reduction rate, and the streaming-aggregation paper measures
  reductions at ~95% of the network's point-to-point bandwidth (Graham et al., ISC
  2020), so by default the unit keeps up with every port at line rate (ours). Its
  *latency* is the propagation of the ``switch -> unit`` arc, :data:`AGG_LATENCY_NS` by
  default (ours: no per-switch figure is published; SHArP's 8-byte MPI_Allreduce on 128
  hosts took 2.83 us end to end on Switch-IB 2, Graham et al., COMHPC at SC16, which
  bounds a few hundred ns per tree level);
* **chunks**: each GPU's buffer (its slice, with several GPUs per host) is cut into
  chunks of ``chunk_bytes`` (:data:`DEFAULT_CHUNK_BYTES`, 512 KiB: NCCL's CollNet proxy
  hands the SHARP plugin one buffer slot per operation, ``NCCL_BUFFSIZE`` 4 MiB /
  ``NCCL_STEPS`` 8, src/transport/coll_net.cc); a host keeps at most ``outstanding``
  (8, NCCL_STEPS) chunk operations posted whose result has not come back;
* **up the tree**: a host sends chunk i to its leaf's unit (one QP per chunk and tree
  edge, each edge's chunks one after another: the next starts when the NIC has put the
  last byte of the previous on the wire, as one send queue does); a unit that has
  chunk i from every child (the whole chunk: store and forward per chunk) sends one
  chunk i to its parent's unit; the root's unit, having chunk i from every child,
  starts it down;
* **down the tree**: each unit replicates chunk i to each child (one QP per child
  edge, through its internal link), and every host receives the full result;
* **done**: the operation ends when every host has every chunk of the result.

The trees are the flow level's, laid on the live fabric under the scenario's failures
(:func:`aifabric.sim.sharp.sharp_tree`): the chunks never cross a failed link.

So every host link carries ``S`` up and ``S`` down (plus the packet model's headers
and ACKs), where a ring moves ``2(n-1)/n x S`` each way; and with ``N`` chunks of wire
time ``c`` and ``E`` store-and-forward edges on the longest root path (up and down:
2 per tree level, 4 on a 2-tier fabric) an idle fabric takes
``(N + E - 1) x c`` plus the edges' path latency and the units' latency
(:func:`closed_form_ns`): the pipeline fill is ``(E - 1) x c``, not ``E x S / B``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.topology.fabric import Fabric, LinkKind

__all__ = ["AGG_LATENCY_NS", "DEFAULT_CHUNK_BYTES", "DEFAULT_OUTSTANDING", "SharpNet",
           "SharpPlan", "closed_form_ns", "sharp_net"]

#: a SHARP operation's message at packet level: one NCCL CollNet buffer slot
#: (NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8)
DEFAULT_CHUNK_BYTES = 512 * 1024
#: chunk operations a host keeps posted at once (NCCL_STEPS)
DEFAULT_OUTSTANDING = 8
#: the reduction's latency in a switch's aggregation unit, ns (ours; module doc)
AGG_LATENCY_NS = 200.0
#: a SHARP run's events per (frame x hop + 1) over the packet core's usual
#: ``EVENTS_PER_FRAME_HOP``: its chunk QPs' start, timers and the units' ports (measured:
#: 1.29-1.37 on a 2-tier 16-host run at 16 and 64 MiB, a k=4 fat-tree with AR, 4 GPUs
#: per host on 4 rails)
EVENTS_FACTOR = 1.36


@dataclass
class SharpNet:
    """The aggregation units of the switches on the trees of a run: one end node per
    switch (ids from ``n_nodes``), and per unit an internal link (arcs ``2(L+j)``:
    switch -> unit, ``2(L+j)+1``: unit -> switch, ``L`` the fabric's links)."""

    n_nodes: int  # the fabric's nodes
    n_arcs: int  # the fabric's arcs
    switch: np.ndarray  # fabric node of each unit
    gbps: np.ndarray  # internal link rate of each unit
    latency_ns: float
    names: list[str]
    unit_of: dict[int, int] = field(default_factory=dict)  # switch -> unit index

    def node(self, j: int) -> int:
        return self.n_nodes + j

    def arc_in(self, sw: int) -> int:
        """The arc from switch ``sw`` into its unit."""
        return self.n_arcs + 2 * self.unit_of[sw]

    def arc_out(self, sw: int) -> int:
        """The arc from the unit of switch ``sw`` back into it."""
        return self.n_arcs + 2 * self.unit_of[sw] + 1

    def arcs(self) -> tuple[list[int], list[int], list[float], list[float]]:
        """(src, dst, gbps, delay_ns) of the units' arcs, in arc order."""
        src: list[int] = []
        dst: list[int] = []
        g: list[float] = []
        d: list[float] = []
        for j, sw in enumerate(self.switch.tolist()):
            src += [sw, self.node(j)]
            dst += [self.node(j), sw]
            g += [float(self.gbps[j])] * 2
            d += [self.latency_ns, 0.0]
        return src, dst, g, d


def sharp_net(f: Fabric, trees: list[Any], *, agg_gbps: float | None = None,
              agg_latency_ns: float = AGG_LATENCY_NS) -> SharpNet:
    """The aggregation units of every switch on ``trees``
    (:class:`aifabric.sim.sharp.SharpTree`)."""
    from aifabric.sim.sharp import tree_switches

    sws = sorted({int(x) for tr in trees for x in tree_switches(f, tr).tolist()})
    gbps = np.array([float(agg_gbps) if agg_gbps is not None else
                     float(f.switch_model(x).ports * f.switch_model(x).port_gbps)
                     for x in sws], dtype=np.float64)
    names = [f"{f.nodes.name[x]}/sharp" for x in sws]
    return SharpNet(n_nodes=f.n_nodes, n_arcs=2 * f.n_links,
                    switch=np.array(sws, dtype=np.int64), gbps=gbps,
                    latency_ns=float(agg_latency_ns), names=names,
                    unit_of={x: j for j, x in enumerate(sws)})


@dataclass
class _Edge:
    """One sender -> receiver edge of a tree: its route, its chunks waiting to be
    sent, the one being sent, and what receives it."""

    route: tuple[int, ...]
    gbps: float  # its sending rate: the slowest hop of its route (module doc)
    x: int  # the stage's transfer of its fabric arc (results, QP tags)
    kind: str  # "up" (into a unit), "down" (into a unit from its parent), "host"
    to: Any  # the receiving _Unit or _Host
    queue: deque[int] = field(default_factory=deque)
    qp: Any = None
    busy: bool = False


@dataclass
class _Unit:
    children: int = 0
    got: np.ndarray | None = None  # chunks received from children, per chunk
    up: _Edge | None = None
    down: list[_Edge] = field(default_factory=list)


@dataclass
class _Host:
    up: _Edge | None = None
    posted: int = 0
    got: int = 0


class SharpPlan:
    """The SHARP stages of a packet run: per stage its trees and the arcs of its first
    transfers (:func:`aifabric.sim.run._sharp_transfers`), run by :meth:`start` on the
    packet simulator when the DAG driver reaches them."""

    def __init__(self, f: Fabric, arcs: dict[int, np.ndarray],
                 trees: dict[int, list[list[Any]]],
                 *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 outstanding: int = DEFAULT_OUTSTANDING, agg_gbps: float | None = None,
                 agg_latency_ns: float = AGG_LATENCY_NS) -> None:
        if chunk_bytes < 1 or outstanding < 1:
            raise ValueError("chunk_bytes and outstanding must be >= 1")
        self.f = f
        self.arcs = {int(s): np.asarray(a, dtype=np.int64) for s, a in arcs.items()}
        #: per stage: its operations (a collective, a job's DP group), each its trees
        self.ops = {int(s): [list(g) for g in t] for s, t in trees.items()}
        self.trees = {s: [tr for g in ops for tr in g] for s, ops in self.ops.items()}
        self.stages = set(self.arcs)
        missing = self.stages - set(self.trees)
        if missing:
            raise ValueError(f"SHARP stage(s) {sorted(missing)} without their trees")
        self.chunk_bytes = int(chunk_bytes)
        self.outstanding = int(outstanding)
        links = f.links
        acc = np.flatnonzero(links.kind == LinkKind.ACCESS)
        #: each NIC port's access link (-1: none)
        self.acc_of = np.full(f.n_nodes, -1, dtype=np.int64)
        self.acc_of[links.a[acc]] = acc
        self.net = sharp_net(f, [t for ts in self.trees.values() for t in ts],
                             agg_gbps=agg_gbps, agg_latency_ns=agg_latency_ns)
        self._routes = {s: self._stage_routes(s) for s in sorted(self.stages)}
        #: per stage run: what it did (the run's summary)
        self.report: list[dict[str, Any]] = []

    # ------------------------------------------------------------ the static part
    def _stage_routes(self, s: int) -> list[dict[str, Any]]:
        """Per tree of stage ``s``: its hosts' NICs with their up/down access arcs,
        its switches with parent, children and the tree arcs between them."""
        f = self.f
        links = f.links
        src, dst, _ = f.arcs
        out = []
        for tr in self.trees[s]:
            parent: dict[int, tuple[int, int]] = {}  # switch -> (parent switch, up arc)
            for a in tr.up_arcs.tolist():
                c, p = int(src[a]), int(dst[a])
                if c in parent and parent[c][0] != p:
                    raise ValueError(f"switch {f.nodes.name[c]} has two parents on a "
                                     "SHARP tree")
                parent[c] = (p, int(a))
            hosts = []
            for nic, acc in zip(tr.nics.tolist(), self.acc_of[tr.nics].tolist(),
                                strict=True):  # the tree's NICs
                hosts.append((int(nic), 2 * acc, 2 * acc + 1, int(links.b[acc])))
            sws = sorted({h[3] for h in hosts} | set(parent) | {p for p, _ in parent.values()})
            roots = [x for x in sws if x not in parent]
            if len(roots) != 1:
                raise ValueError("a SHARP tree must have one root")
            out.append({"tree": tr, "parent": parent, "hosts": hosts, "switches": sws,
                        "root": roots[0],
                        "depth": max(self._depth(parent, h[3]) for h in hosts)})
        return out

    @staticmethod
    def _depth(parent: dict[int, tuple[int, int]], x: int) -> int:
        d = 0
        while x in parent:
            x = parent[x][0]
            d += 1
        return d

    def extra_arcs(self) -> list[int]:
        """Every arc the chunks use (fabric arcs of the trees and the units' arcs)."""
        used: set[int] = set()
        for trees in self._routes.values():
            for t in trees:
                for _, up, down, leaf in t["hosts"]:
                    used |= {up, down, self.net.arc_in(leaf), self.net.arc_out(leaf)}
                for c, (p, a) in t["parent"].items():
                    used |= {a, a ^ 1, self.net.arc_in(c), self.net.arc_out(c),
                             self.net.arc_in(p), self.net.arc_out(p)}
        return sorted(used)

    def edges_per_op(self, s: int) -> list[tuple[tuple[int, ...], int]]:
        """(route, count of chunks) of every edge of stage ``s`` (the event estimate)."""
        net = self.net
        out = []
        for t in self._routes[s]:
            for _, up, down, leaf in t["hosts"]:
                out += [((up, net.arc_in(leaf)), 1), ((net.arc_out(leaf), down), 1)]
            for c, (p, a) in t["parent"].items():
                out += [((net.arc_out(c), a, net.arc_in(p)), 1),
                        ((net.arc_out(p), a ^ 1, net.arc_in(c)), 1)]
        return out

    def extra_events(self, dag: Any, cfg: Any, per_frame_hop: float) -> float:
        """The events the SHARP stages add to :func:`aifabric.sim.packet.run.
        estimate_events`'s count of their placeholder transfers (every edge's chunks,
        frames x (hops + 1) x ACKs; the placeholders counted there are taken off)."""
        mtu = cfg.nic.mtu_payload_bytes
        acks = 1.0 + 1.0 / cfg.nic.ack_interval_packets
        ev = 0.0
        for s in self.stages:
            x0 = int(dag.xfer_ptr[s])
            size = float(dag.size_bytes[x0])
            frames = np.ceil(size / mtu)
            reps = float(dag.repeat[s])
            hop1 = sum(len(r) + 1 for r, _ in self.edges_per_op(s))
            ev += reps * frames * hop1 * acks * per_frame_hop * EVENTS_FACTOR
            ev -= reps * frames * len(self.arcs[s]) * 2 * acks * per_frame_hop
        return max(ev, 0.0)

    # ------------------------------------------------------------ the run
    def rates(self, net: Any) -> dict[int, float]:
        """The rate (Gbit/s) of every port of the packet network ``net``."""
        if getattr(self, "_rates", None) is None or self._rates[0] is not net:
            self._rates = (net, {a: p.gbps for a, p in net.ports.items()})
        return self._rates[1]

    def start(self, drive: Any, s: int) -> range:
        """Start one run of SHARP stage ``s`` on ``drive`` (the DAG driver of
        :mod:`aifabric.sim.packet.run`); returns the stage's other transfers (the NVLink
        phases inside the hosts), which the driver runs as usual. When every host has
        the result, ``drive.sharp_done(s)`` is called."""
        _Op(self, drive, s).begin()
        lo, hi = int(drive.dag.xfer_ptr[s]), int(drive.dag.xfer_ptr[s + 1])
        return range(lo + len(self.arcs[s]), hi)

    def summary(self) -> dict[str, Any]:
        """The ``sharp`` block of the packet summary: the model's settings, the units,
        and one line per SHARP operation run."""
        # an operation is a set of trees (a collective's, a DP group's): its repeats
        # and buckets hold the same trees, counted once, as the limits count them
        per_switch_trees: dict[str, int] = {}
        per_switch_ops: dict[str, int] = {}
        names = self.f.nodes.name
        trees_seen: set[int] = set()
        ops_seen: set[frozenset[int]] = set()
        sw_of = {id(t["tree"]): t["switches"] for r in self._routes.values() for t in r}
        for s in sorted(self.stages):
            for op in self.ops[s]:
                key = frozenset(id(tr) for tr in op)
                if key in ops_seen:
                    continue
                ops_seen.add(key)
                sws: set[int] = set()
                for tr in op:
                    sws.update(sw_of[id(tr)])
                    if id(tr) in trees_seen:
                        continue
                    trees_seen.add(id(tr))
                    for x in sw_of[id(tr)]:
                        n = str(names[x])
                        per_switch_trees[n] = per_switch_trees.get(n, 0) + 1
                for x in sorted(sws):
                    n = str(names[x])
                    per_switch_ops[n] = per_switch_ops.get(n, 0) + 1
        return {
            "model": "aggregation units on internal links; per-chunk transfers; a unit "
                     "forwards chunk i when it has it from every child; replicated down",
            "chunk_bytes": self.chunk_bytes, "outstanding_chunks": self.outstanding,
            "aggregation_latency_ns": self.net.latency_ns,
            "aggregation_units": len(self.net.switch),
            "unit_gbps": {n: float(g) for n, g in zip(self.net.names,
                                                       self.net.gbps.tolist(), strict=True)},
            "trees_per_switch": per_switch_trees, "operations_per_switch": per_switch_ops,
            "operations": list(self.report)}


class _Op:
    """One run of a SHARP stage: its units, hosts and edges, and the chunks moving."""

    def __init__(self, plan: SharpPlan, drive: Any, s: int) -> None:
        self.plan, self.drive, self.s = plan, drive, s
        sim = drive.sim
        self.sim, self.ev = sim, sim.ev
        net = sim.net
        self.mtu, self.frame_extra = net.mtu, net.hdr + net.ovh
        dag = drive.dag
        x0 = int(dag.xfer_ptr[s])
        arcs = plan.arcs[s]
        self.x_of = {int(a): x0 + k for k, a in enumerate(arcs.tolist())}
        size = round(float(dag.size_bytes[x0]))
        c = plan.chunk_bytes
        n = -(-size // c) if size > 0 else 0
        self.sizes = [min(c, size - i * c) for i in range(n)]
        self.n = n
        self.t0 = sim.ev.now
        self.sl = drive.stage_sl[s] if drive.stage_sl is not None else None
        self.x_last: dict[int, int] = {}
        self.hosts: list[_Host] = []
        self.n_qps = 0
        sn = plan.net
        rate = plan.rates(net)

        def gb(route: tuple[int, ...]) -> float:
            return min(rate[a] for a in route)
        for t in plan._routes[s]:
            units = {x: _Unit() for x in t["switches"]}
            for u in units.values():
                u.got = np.zeros(n, dtype=np.int64)
            for _nic, up, down, leaf in t["hosts"]:
                h = _Host()
                h.up = _Edge((up, sn.arc_in(leaf)), gb((up, sn.arc_in(leaf))),
                             self.x_of.get(up, x0), "up", units[leaf])
                units[leaf].children += 1
                ao = sn.arc_out(leaf)
                units[leaf].down.append(_Edge((ao, down), gb((ao, down)),
                                              self.x_of.get(down, x0), "host", h))
                self.hosts.append(h)
            for ch, (p, a) in t["parent"].items():
                units[p].children += 1
                r_up = (sn.arc_out(ch), a, sn.arc_in(p))
                r_dn = (sn.arc_out(p), a ^ 1, sn.arc_in(ch))
                units[ch].up = _Edge(r_up, gb(r_up), self.x_of.get(a, x0), "up", units[p])
                units[p].down.append(_Edge(r_dn, gb(r_dn), self.x_of.get(a ^ 1, x0), "down",
                                           units[ch]))
        # the PCIe placeholders (not simulated packet by packet) end with their host
        # link's direction
        self.pcie: list[tuple[int, int]] = []
        links = plan.f.links
        for a, x in self.x_of.items():  # the stage's placeholders: a few per GPU
            if links.kind[a // 2] == LinkKind.PCIE:
                acc = int(plan.acc_of[int(links.b[a // 2])])
                if acc >= 0:
                    self.pcie.append((x, 2 * acc + (a & 1)))
        self.left = len(self.hosts) * n

    def begin(self) -> None:
        if self.left == 0:
            self.ev.at(self.ev.now, lambda _: self.finish())
            return
        w = self.plan.outstanding
        for h in self.hosts:
            while h.posted < min(w, self.n):
                self.push(h.up, h.posted)
                h.posted += 1

    def wire_ps(self, nbytes: int, gbps: float) -> int:
        frames = -(-nbytes // self.mtu)
        return max(1, int((nbytes + frames * self.frame_extra) * 8000.0 / gbps + 0.5))

    def push(self, e: _Edge, i: int) -> None:
        e.queue.append(i)
        if not e.busy:
            self.send(e)

    def send(self, e: _Edge) -> None:
        i = e.queue.popleft()
        e.busy = True
        self.n_qps += 1
        e.qp = qp = self.sim.add_flow(e.route, self.sizes[i], tag=(self.s, e.x), sl=self.sl,
                                      on_done=lambda _qp, e=e, i=i: self.delivered(e, i))
        if e.gbps * 1e9 < qp.line_bps:  # a unit sends at its tree port's rate
            from aifabric.sim.packet import layout as L

            qf = self.sim.net.QF
            qp.line_bps = qf[qp.id, L.F_LINE] = qf[qp.id, L.F_RATE] = e.gbps * 1e9
        self.ev.at(self.ev.now + self.wire_ps(self.sizes[i], e.gbps), self.sent, e)

    def sent(self, e: _Edge) -> None:
        """The edge's NIC has put (or not yet) the last byte of its chunk on the wire:
        the next chunk of the edge may start."""
        qp = e.qp
        left = qp.size - qp.snd_nxt
        if left > 0:
            self.ev.at(self.ev.now + self.wire_ps(left, e.gbps), self.sent, e)
            return
        e.busy = False
        if e.queue:
            self.send(e)

    def delivered(self, e: _Edge, i: int) -> None:
        now = self.ev.now
        self.x_last[e.x] = now
        to = e.to
        if e.kind == "up":
            to.got[i] += 1
            if to.got[i] == to.children:  # reduced: on to the parent, or down from the root
                if to.up is not None:
                    self.push(to.up, i)
                else:
                    for d in to.down:
                        self.push(d, i)
        elif e.kind == "down":
            for d in to.down:
                self.push(d, i)
        else:  # a host has chunk i of the result
            to.got += 1
            self.left -= 1
            if to.posted < self.n:
                self.push(to.up, to.posted)
                to.posted += 1
            if self.left == 0:
                self.finish()

    def finish(self) -> None:
        d = self.drive
        now_ns = self.ev.now / 1000.0
        t0_ns = self.t0 / 1000.0
        dag = d.dag
        for x in self.x_of.values():
            if np.isnan(d.x_start[x]):
                d.x_start[x] = t0_ns
        for x, t in self.x_last.items():
            d.x_end[x] = t / 1000.0
        for x, acc_arc in self.pcie:
            xa = self.x_of.get(acc_arc)
            if xa is not None and xa in self.x_last:
                d.x_end[x] = self.x_last[xa] / 1000.0
        for x in self.x_of.values():
            if np.isnan(d.x_end[x]):
                d.x_end[x] = now_ns
            dur = d.x_end[x] - t0_ns
            if dur > 0:
                d.x_minr[x] = min(d.x_minr[x], float(dag.size_bytes[x]) * 8 / dur)
        self.plan.report.append({"stage": self.s, "start_ns": t0_ns, "end_ns": now_ns,
                                 "time_ns": now_ns - t0_ns, "hosts": len(self.hosts),
                                 "chunks": self.n, "chunk_qps": self.n_qps})
        d.sharp_done(self.s)


def closed_form_ns(size_bytes: float, chunk_bytes: int, gbps: float, mtu: int,
                   frame_extra: int, edges: int, path_ns: float) -> float:
    """The time of one SHARP AllReduce on an idle fabric whose links all run at ``gbps``
    (the model of the module doc): ``N`` chunks and ``E = edges`` store-and-forward
    edges on the longest root path make ``(N + E - 1)`` chunk wire times (the last
    chunk smaller), plus ``path_ns``: each edge's route latency (propagation, switch
    latency, the units' latency and a frame's serialization at each hop after the
    first) summed over the ``E`` edges."""
    size = int(size_bytes)
    n = -(-size // chunk_bytes)
    last = size - (n - 1) * chunk_bytes

    def wire(b: int) -> float:
        frames = -(-b // mtu)
        return (b + frames * frame_extra) * 8 / gbps

    full = wire(chunk_bytes) if n > 1 else wire(last)
    return (n - 1) * full + wire(last) + (edges - 1) * wire(min(chunk_bytes, size)) + path_ns


def with_units(net: SharpNet, arrays: list[list[Any]], buffers: Any) -> tuple[list[list[Any]],
                                                                              Any]:
    """The packet network's arrays (arc src, dst, Gbit/s, delay ns; node is-host, names)
    and switch buffers (:class:`aifabric.sim.packet.network.SwitchBuffers`) with the
    aggregation units of ``net`` added: their nodes (end nodes: no switch buffer) and
    their internal links' arcs (no PFC headroom; the units' latency as propagation)."""
    from dataclasses import replace

    src, dst, gbps, delay, is_host, names = (list(a) for a in arrays)
    if len(src) != net.n_arcs or len(is_host) != net.n_nodes:
        raise ValueError("the aggregation units go after the fabric's own nodes and arcs")
    s2, d2, g2, l2 = net.arcs()
    n_units = len(net.switch)
    out = [src + s2, dst + d2, gbps + g2, delay + l2, is_host + [True] * n_units,
           names + list(net.names)]

    def grow(a: Any, n: int, fill: Any = 0) -> Any:
        if a is None:
            return None
        a = np.asarray(a)
        return np.concatenate([a, np.full(n, fill, dtype=a.dtype)])

    b = replace(buffers,
                node_buffer_bytes=grow(buffers.node_buffer_bytes, n_units),
                node_reserved_bytes=grow(buffers.node_reserved_bytes, n_units),
                arc_headroom=grow(buffers.arc_headroom, len(s2)),
                arc_link_delay_ns=None if buffers.arc_link_delay_ns is None else
                np.concatenate([np.asarray(buffers.arc_link_delay_ns, dtype=np.float64),
                                np.asarray(l2, dtype=np.float64)]))
    return out, b
