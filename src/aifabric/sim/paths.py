"""From the DAG's transfers to paths on the fabric, through :mod:`aifabric.routing`.

Every distinct (source GPU, destination GPU) pair of the DAG is one *connection*; the
router turns it into flows (one per QP) and each flow into the fraction of its bytes on
each arc. Identical pairs across stages, steps and jobs are routed once.

A connection may instead be *pinned* (a traffic CSV row with a ``path`` column, under
``routing.policy: pinned``): its QPs follow the given switches exactly, whatever the
routing tables would do, so a path may also bounce (go down and up again), as the
packets of a switch with a stale route do after a link failure. The path is checked as
the router checks its own: every hop a live link after the scenario's failures, the
first switch cabled to a live port of the source host, the last to one of the
destination host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from aifabric.errors import Problem, SpecError
from aifabric.sim.flow.engine import Paths
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind
from aifabric.workload.dag import TransferDAG

__all__ = ["PinnedPath", "arc_latency_ns", "arc_site", "connections", "host_side_arcs",
           "pinned_arcs", "route_dag"]


@dataclass(frozen=True, eq=False)
class PinnedPath:
    """An explicit switch path for one (source GPU, destination GPU) pair.

    ``nodes``: switch node ids, the source ToR first and the destination ToR last;
    ``where``: the field path problems name (``traffic.0.file line 3: path``);
    ``file``: the CSV the path came from (named in the messages).
    """

    nodes: np.ndarray
    where: str
    file: str = ""


def connections(dag: TransferDAG) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (src, dst) pairs: (src, dst, connection of each transfer)."""
    if not dag.n_transfers:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    key = dag.src.astype(np.int64) * (int(max(dag.dst.max(), dag.src.max())) + 1) + dag.dst
    _uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return dag.src[first], dag.dst[first], inv.astype(np.int64)


def arc_latency_ns(f: Fabric) -> np.ndarray:
    """Latency of each arc: the link's propagation plus the forwarding latency of the
    switch it enters."""
    _src, dst, _ = f.arcs
    lat = np.repeat(f.links.latency_ns.astype(np.float64), 2)
    return lat + f.nodes.latency_ns[dst].astype(np.float64)


def arc_site(f: Fabric) -> np.ndarray:
    """The server each arc belongs to: the host of its GPU/NVSwitch/NIC end (the tail's
    when both are), -1 for arcs between switches."""
    src, dst, _ = f.arcs
    inside = f.nodes.kind <= NodeKind.NIC
    host = f.nodes.host.astype(np.int64)
    return np.where(inside[src], host[src], np.where(inside[dst], host[dst], -1))


def host_side_arcs(f: Fabric) -> np.ndarray:
    """Arcs inside or at the edge of a host (NVLink, PCIe, NIC-ToR links)."""
    return np.repeat(f.links.kind <= LinkKind.ACCESS, 2)


def route_dag(f: Fabric, dag: TransferDAG, routing: Any, *, failures: Any = None,
              seed: int = 0, pinned: Mapping[tuple[int, int], PinnedPath] | None = None
              ) -> tuple[Paths, np.ndarray]:
    """Route every connection of ``dag`` on ``f`` with the policy ``routing`` (the
    spec's :class:`~aifabric.spec.models.Routing`, scenario overrides applied).

    ``pinned`` maps (source GPU, destination GPU) node ids to an explicit path: those
    connections are not routed, their ``routing.qps_per_connection`` QPs follow the path
    (checked by :func:`pinned_arcs`; a bad one is bad input naming its file, row and hop).

    Returns the paths and the connection of each transfer. Unreachable connections are
    bad input: one problem naming the first few.
    """
    src, dst, xconn = connections(dag)
    # bytes per connection over the whole DAG (what load-aware policies balance)
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    conn_bytes = np.maximum(np.bincount(xconn, weights=moved, minlength=len(src)), 1)
    pin_of = _pinned_connections(src, dst, pinned)
    if pin_of is None:
        inc, conn = _routed(f, src, dst, conn_bytes, routing, failures, seed)
    else:
        free = np.flatnonzero(pin_of < 0)
        inc, conn = _routed(f, src[free], dst[free], conn_bytes[free], routing, failures,
                            seed)
        conn = free[conn]
        assert pinned is not None
        keys = list(pinned)
        pc = np.flatnonzero(pin_of >= 0)
        Q = int(routing.qps_per_connection)
        rows = pinned_arcs(f, src[pc], dst[pc], [pinned[keys[k]] for k in pin_of[pc]],
                           qps=Q, failures=failures)
        lens = np.array([len(r) for r in rows], dtype=np.int64)
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        arcs = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        pin_inc = sp.csr_matrix((np.ones(len(arcs)), arcs, ptr),
                                shape=(len(rows), 2 * f.n_links))
        inc = sp.vstack([inc, pin_inc], format="csr")
        conn = np.concatenate([conn, np.repeat(pc, Q)])
    if len(conn) and (np.diff(conn) < 0).any():  # keep the QPs of a connection together
        order = np.argsort(conn, kind="stable")
        inc, conn = inc[order], conn[order]
    ptr = np.searchsorted(conn, np.arange(len(src) + 1))
    lat_flow = inc @ arc_latency_ns(f)
    nz = np.diff(ptr) > 0
    lat = np.zeros(len(src))
    lat[nz] = np.maximum.reduceat(lat_flow, ptr[:-1][nz])
    return Paths(inc.tocsr(), ptr, lat, f.arcs[2].astype(np.float64),
                 arc_site=arc_site(f)), xconn


def _pinned_connections(src: np.ndarray, dst: np.ndarray,
                        pinned: Mapping[tuple[int, int], PinnedPath] | None
                        ) -> np.ndarray | None:
    """Per connection: the position of its pair in ``pinned`` (-1: routed); None when
    nothing is pinned."""
    if not pinned or not len(src):
        return None
    keys = np.array(list(pinned), dtype=np.int64).reshape(-1, 2)
    m = int(max(src.max(), dst.max(), keys.max())) + 1
    ck = src.astype(np.int64) * m + dst
    pk = keys[:, 0] * m + keys[:, 1]
    order = np.argsort(pk)
    i = np.minimum(np.searchsorted(pk[order], ck), len(pk) - 1)
    hit = pk[order][i] == ck
    out = np.where(hit, order[i], -1)
    return out if hit.any() else None


def _routed(f: Fabric, src: np.ndarray, dst: np.ndarray, conn_bytes: np.ndarray,
            routing: Any, failures: Any, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """The router's flows x arcs rows for connections ``src -> dst`` and the connection
    (index into ``src``) of each row."""
    try:
        from aifabric.routing import make_flows, route
    except ImportError:  # the package's public names are not exported yet
        from aifabric.routing.flows import make_flows
        from aifabric.routing.route import route

    if not len(src):
        return (sp.csr_matrix((0, 2 * f.n_links)), np.zeros(0, dtype=np.int64))
    flows = make_flows(f, src, dst, conn_bytes.astype(np.int64),
                       qps_per_connection=routing.qps_per_connection,
                       nic_port_choice=routing.nic_port_choice, seed=seed)
    kw: dict[str, Any] = {"seed": seed}
    if failures is not None:
        kw["failures"] = failures
    routed = route(f, flows, routing, **kw)
    inc = sp.csr_matrix(routed.incidence)
    bad = np.asarray(routed.unreachable, dtype=bool)
    if bad.any():
        conns = np.unique(np.asarray(flows.conn)[bad])
        names = [f"{f.nodes.name[src[c]]} -> {f.nodes.name[dst[c]]}" for c in conns[:3]]
        raise SpecError(Problem("routing", f"{len(conns)} GPU pairs have no path "
                                f"(e.g. {', '.join(names)})"))
    return inc, np.asarray(flows.conn, dtype=np.int64)


def pinned_arcs(f: Fabric, src: np.ndarray, dst: np.ndarray, pins: list[PinnedPath], *,
                qps: int = 1, failures: Any = None) -> list[np.ndarray]:
    """The arcs of the ``qps`` QPs of each pinned connection ``src[i] -> dst[i]`` along
    ``pins[i]`` (connection-major), host hops included: GPU -> (NVLink to the GPU of the
    NIC cabled to the first switch, if another) -> PCIe -> NIC port -> the switches ->
    NIC port -> PCIe -> (NVLink) -> GPU.

    Checks, every problem reported at once (naming the pin's file, row and hop): the
    source and destination are on different hosts; every node is a switch, visited once;
    the first switch is cabled to a live port of the source host, the last to one of
    the destination host; every hop is a live link (``failures`` applied). Parallel
    links between two switches are shared out over the QPs.
    """
    from aifabric.routing.failover import live_links
    from aifabric.routing.hostside import host_side

    alive = live_links(f, failures)
    hs = host_side(f)
    key, lid = _switch_links(f)
    problems: list[Problem] = []
    rows: list[np.ndarray] = []
    for c, pin in enumerate(pins):  # explicit CSV rows: small by nature
        def bad(msg: str, pin: PinnedPath = pin) -> None:
            problems.append(Problem(pin.where, f"{pin.file}: {msg}" if pin.file else msg))

        path = np.asarray(pin.nodes, dtype=np.int64).reshape(-1)
        s_gpu, d_gpu = int(src[c]), int(dst[c])
        if not _pin_shape_ok(f, path, s_gpu, d_gpu, bad):
            continue
        sh, dh = int(f.nodes.host[s_gpu]), int(f.nodes.host[d_gpu])
        s_ports = _ports_on(f, hs, sh, int(path[0]), alive, s_gpu)
        d_ports = _ports_on(f, hs, dh, int(path[-1]), alive, d_gpu)
        ok = _pin_ends_ok(f, hs, path, alive, ((s_ports, "first", sh, s_gpu),
                                               (d_ports, "last", dh, d_gpu)), bad)
        hop_links, hops_ok = _pin_hop_links(f, path, key, lid, alive, bad)
        if not (ok and hops_ok):
            continue
        rows += _pinned_qp_arcs(f, hs, path, hop_links, s_ports, d_ports, s_gpu, d_gpu, qps,
                                alive, bad)
    if problems:
        raise SpecError(problems)
    return rows


def _switch_links(f: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """Switch-to-switch links keyed by their unordered ends (``min * n_nodes + max``):
    the sorted keys and the link ids in that order, parallel links side by side."""
    links, n = f.links, f.n_nodes
    lid = np.flatnonzero(f.is_switch[links.a] & f.is_switch[links.b])
    lo = np.minimum(links.a[lid], links.b[lid]).astype(np.int64)
    hi = np.maximum(links.a[lid], links.b[lid]).astype(np.int64)
    order = np.argsort(lo * n + hi, kind="stable")
    return (lo * n + hi)[order], lid[order]


def _pin_shape_ok(f: Fabric, path: np.ndarray, s_gpu: int, d_gpu: int,
                  bad: Callable[[str], None]) -> bool:
    """A pinned path's own shape: the GPUs on different hosts, a non-empty path of
    switches, none visited twice; False after reporting the first problem to ``bad``."""
    nodes, names = f.nodes, f.nodes.name
    if int(nodes.host[s_gpu]) == int(nodes.host[d_gpu]):
        bad(f"{names[s_gpu]} and {names[d_gpu]} are on one host (the transfer stays on "
            "NVLink); allowed: an empty path")
        return False
    if not len(path):
        bad("empty path; allowed: switch names from the source ToR to the destination ToR")
        return False
    not_sw = np.flatnonzero(~f.is_switch[path])
    if len(not_sw):
        j = int(not_sw[0])
        bad(f"switch {j + 1} of the path, {names[path[j]]}, is a "
            f"{NodeKind(int(nodes.kind[path[j]])).label}; allowed: switch names")
        return False
    uniq, cnt = np.unique(path, return_counts=True)
    if (cnt > 1).any():
        bad(f"visits {names[uniq[cnt > 1][0]]} twice; allowed: each switch at most once "
            "(a loop is not a path; a bounce goes down to another switch and up again)")
        return False
    return True


def _pin_ends_ok(f: Fabric, hs: Any, path: np.ndarray, alive: np.ndarray,
                 ends: tuple[tuple[list[tuple[int, int]], str, int, int], ...],
                 bad: Callable[[str], None]) -> bool:
    """The first and last switch of the path each reach a live port of their host
    (``ends``: the ports found, "first"/"last", the host, its GPU); every end that does
    not is reported to ``bad``."""
    names = f.nodes.name
    ok = True
    for ports, end, host, gpu in ends:
        if not ports:
            sw = path[0] if end == "first" else path[-1]
            tors = _live_tors(hs, host, alive)
            bad(f"the {end} switch {names[sw]} is not cabled to a live port of "
                f"{names[f.host_node[host]]} (the host of {names[gpu]}); allowed: "
                f"{', '.join(str(names[t]) for t in tors) or 'none: the host is cut off'}")
            ok = False
    return ok


def _pin_hop_links(f: Fabric, path: np.ndarray, key: np.ndarray, lid: np.ndarray,
                   alive: np.ndarray, bad: Callable[[str], None]
                   ) -> tuple[list[np.ndarray], bool]:
    """The live links of each hop of the path (``key``/``lid``: :func:`_switch_links`)
    and whether every hop has one; each hop without is reported to ``bad``."""
    names, n = f.nodes.name, f.n_nodes
    u, v = path[:-1], path[1:]
    hk = np.minimum(u, v) * n + np.maximum(u, v)
    first, last = np.searchsorted(key, hk, "left"), np.searchsorted(key, hk, "right")
    hop_links: list[np.ndarray] = []
    ok = True
    for j in range(len(u)):  # hops of one path
        cand = lid[first[j]:last[j]]
        live = cand[alive[cand]]
        if not len(live):
            why = ("every link between them is down (the scenario's failures)" if len(cand)
                   else "they are not cabled together")
            bad(f"hop {j + 1} {names[u[j]]} -> {names[v[j]]}: no live link, {why}; "
                "allowed: neighbouring switches joined by a live link")
            ok = False
        hop_links.append(live)
    return hop_links, ok


def _pinned_qp_arcs(f: Fabric, hs: Any, path: np.ndarray, hop_links: list[np.ndarray],
                    s_ports: list[tuple[int, int]], d_ports: list[tuple[int, int]],
                    s_gpu: int, d_gpu: int, qps: int, alive: np.ndarray,
                    bad: Callable[[str], None]) -> list[np.ndarray]:
    """The arcs of each of the ``qps`` QPs along the path, host hops included; QP q
    takes port ``q mod`` the ports at each end and link ``q mod`` the parallel links of
    each hop. Stops at the first QP whose hosts' own links are down (reported to
    ``bad``)."""
    links, n, names = f.links, f.n_nodes, f.nodes.name
    u = path[:-1]
    rows: list[np.ndarray] = []
    for q in range(qps):
        p, via = s_ports[q % len(s_ports)]
        r, vd = d_ports[q % len(d_ports)]
        arcs: list[int] = []
        if via != s_gpu:  # NVLink to the GPU whose NIC sends it (PXN)
            arcs += [int(a[0]) for a in hs.gpu_gpu_arcs(np.array([s_gpu]), np.array([via]),
                                                        n)]
        arcs += [2 * _pcie(hs, via, p, n), 2 * int(hs.access_link[p])]
        for j, live in enumerate(hop_links):
            lk = int(live[q % len(live)])
            arcs.append(2 * lk + int(links.a[lk] != u[j]))
        arcs += [2 * int(hs.access_link[r]) + 1, 2 * _pcie(hs, vd, r, n) + 1]
        if vd != d_gpu:
            arcs += [int(a[0]) for a in hs.gpu_gpu_arcs(np.array([vd]), np.array([d_gpu]),
                                                        n)]
        row = np.array(arcs, dtype=np.int64)
        dead = np.flatnonzero(~alive[row // 2])
        if len(dead):
            a = int(row[dead[0]])
            bad(f"the hosts' own link {names[f.arcs[0][a]]} -> {names[f.arcs[1][a]]} is "
                "down; allowed: a path between live hosts")
            break
        rows.append(row)
    return rows


def _pcie(hs: Any, gpu: int, port: int, n: int) -> int:
    return int(hs.pcie_link(np.array([gpu]), np.array([port]), n)[0])


def _live_tors(hs: Any, host: int, alive: np.ndarray) -> np.ndarray:
    ports = hs.nic_port[host].reshape(-1)
    ports = ports[ports >= 0]
    acc = hs.access_link[ports]
    ok = (acc >= 0) & alive[np.maximum(acc, 0)]
    return np.unique(hs.access_tor[ports[ok]])


def _ports_on(f: Fabric, hs: Any, host: int, tor: int, alive: np.ndarray, gpu: int
              ) -> list[tuple[int, int]]:
    """(NIC port, GPU that feeds it) for each live port of ``host`` cabled to ``tor``:
    the ports of ``gpu``'s own NIC if it has any there, else every such port with a GPU
    of the host wired to it (the data crosses NVLink first)."""
    ports = hs.nic_port[host].reshape(-1)
    ports = ports[ports >= 0]
    acc = hs.access_link[ports]
    ports = ports[(acc >= 0) & (hs.access_tor[ports] == tor) & alive[np.maximum(acc, 0)]]
    gpus = hs.gpu[host]
    gpus = gpus[gpus >= 0]
    own, other = [], []
    for p in ports.tolist():  # the few ports of one host
        pl = hs.pcie_link(gpus, np.full(len(gpus), p), f.n_nodes)
        wired = gpus[pl >= 0]
        if gpu in wired:
            own.append((p, gpu))
        elif len(wired):
            other.append((p, int(wired[hs.gpu_index[gpu] % len(wired)])))
    return own or other
