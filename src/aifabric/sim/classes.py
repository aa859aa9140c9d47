"""All-to-All as exact classes with multiplicities (issue #32 item 1).

An All-to-All over a whole pod is n(n-1) transfers (235.9 M on a 15,360-GPU HPN pod):
too many to route one by one. Under a *fluid* routing (``routing.policy: spray``: every
flow split evenly over its equal-cost paths) the part of a flow's path between the
switches depends only on where its ends attach (the switches the hosts' NIC ports are
cabled to), and the rest of the path lies on its own hosts' links (NVLink, PCIe, the NIC
ports' access links). So the transfers fall into *groups* that are alike under the
fabric's symmetry: (source attachment, source GPU's index in its host, destination
attachment, destination GPU's index), or same-host pairs by (attachment, indices). One
representative of each group is routed with the real router; every other member's path
is the representative's with the host links relabelled onto its own hosts (hosts are
checked to be wired alike, link by link; a second member of every group is routed too
and must match the relabelled path).

The max-min fair rates are constant on the classes of an *equitable partition* of the
flow x arc incidence (every arc of an arc class carries the same weighted count of flows
of each flow class; every flow of a class crosses the same weighted count of arcs of each
arc class): water-filling raises a class's flows together and fills a class's arcs
together. Colour refinement over the groups finds the partition, with every product in
aggregated form (per group, per host, per attachment: sparse products, never a per-flow
array); then the partition is *verified* exactly (not by the random projections the
refinement uses): per flow class, the load on every arc of an arc class is the same, and
per arc class, every group of a flow class crosses it with the same weight.

The run is then the flow engine's own (:func:`~aifabric.sim.flow.engine.run_flow`) on the
quotient: one transfer per class, one column per arc class, entry = the load one unit of
the class's rate puts on each arc of the column (count x usage / arcs), capacity = one
arc's. Progressive filling over it is the per-transfer one; its results expand back to
every link (bytes, peaks) and stay per class for the transfers (a ``transfers`` column
gives each class's multiplicity).

Where no exact classes exist (a policy that hashes each flow onto one path, adaptive's
sequential least-loaded placement, pinned paths, hosts not wired alike, uneven
placement) :func:`class_plan` says why, and the scenario runs per transfer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from aifabric.errors import Problem, SpecError
from aifabric.guard import check_classes, fabric_bytes
from aifabric.sim.flow.engine import FlowRun, Paths, run_flow
from aifabric.sim.paths import arc_latency_ns, arc_site
from aifabric.sim.results import SimResult, arc_groups, build_result, collective_links
from aifabric.topology.fabric import Fabric
from aifabric.workload import Collective, DAGBuilder
from aifabric.workload.collectives import busbw_factor

__all__ = ["ClassPlan", "class_plan", "simulate_classes", "why_not_classes"]

MAX_ROUNDS = 64
#: relative tolerance of the exact checks (sums of the same fractions in another order)
RTOL = 1e-9

#: path entries routed at a time (the router's temporaries: ~300 bytes an entry)
CHUNK_ENTRIES = 1 << 20

#: what a fallback says about the policies that do compress
COMPRESSING = "routing.policy: spray (or InfiniBand adaptive routing)"


@dataclass
class ClassPlan:
    """The exact classes of one All-to-All and what the quotient run needs."""

    gpus: np.ndarray  # the collective's GPUs (fabric node ids, placement order)
    size_bytes: float  # per GPU send buffer
    count: np.ndarray  # (K,) transfers per class
    rep_src: np.ndarray  # (K,) a representative transfer of each class
    rep_dst: np.ndarray
    latency_ns: np.ndarray  # (K,)
    quotient: sp.csr_matrix  # (K*Q, M): per-arc load of a unit rate of one QP row
    arc_class: np.ndarray  # (n_arcs,) arc class, -1 for arcs no class crosses
    class_arcs: np.ndarray  # (M,) arcs per arc class
    class_cap: np.ndarray  # (M,) capacity of one arc of the class (Gb/s)
    class_group: np.ndarray  # (M,) the tier group (results.arc_groups) of its arcs
    class_first_arc: np.ndarray  # (M,) one arc of the class (names its bottleneck)
    qps: int
    groups: int  # transfer groups routed (representatives)
    rounds: int
    info: dict[str, Any] = field(default_factory=dict)
    # (attachment per host, class per cross-host group (A, L, A, L), per same-host (A, L, L))
    lookup: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def class_of(self, f: Fabric, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The class of each transfer ``src[i] -> dst[i]`` (GPU node ids) of the
        All-to-All: what a per-transfer run's rows are compared with."""
        assert self.lookup is not None
        att, net_cls, same_cls = self.lookup
        hs, hd = f.nodes.host[src].astype(np.int64), f.nodes.host[dst].astype(np.int64)
        ls, ld = f.nodes.index[src].astype(np.int64), f.nodes.index[dst].astype(np.int64)
        return np.where(hs == hd, same_cls[att[hs], ls, ld],
                        net_cls[att[hs], ls, att[hd], ld])

    @property
    def n_classes(self) -> int:
        return len(self.count)

    @property
    def n_transfers(self) -> int:
        return int(self.count.sum())


class _NoClasses(Exception):
    """No exact classes: the reason, for the summary and the guard's line."""


# ---------------------------------------------------------------- eligibility

def why_not_classes(scn: Any, f: Fabric) -> str | None:
    """Why the scenario cannot run as exact classes, from its fields alone (None: it is
    a candidate; :func:`class_plan` still verifies the classes). Only a scenario whose
    workload is one All-to-All collective is a candidate."""
    if scn.sim != "flow":
        return f"sim: {scn.sim} runs every packet; classes are for sim: flow"
    spec = scn.spec
    routing = spec.routing
    if getattr(spec, "scheduled", None) is not None:
        return "a scheduled fabric has its own closed form"
    ib = getattr(spec, "transport", "roce") == "infiniband"
    if ib and not spec.infiniband.adaptive_routing:
        return ("InfiniBand's subnet manager routes each destination LID on its own "
                f"path (no fluid split); exact classes need {COMPRESSING}")
    pol = routing.policy
    if not ib and pol != "spray":
        if pol == "adaptive":
            why = ("adaptive places each flow on the least-loaded path given every flow "
                   "placed before it, so no representative's path stands for another's")
        elif pol == "pinned":
            why = "pinned paths are per pair"
        else:
            why = (f"{pol} hashes each QP's header onto one path, so transfers alike "
                   "under the fabric's symmetry take different paths and no two share "
                   "a class")
        return f"routing.policy {pol}: {why}; exact classes need {COMPRESSING}"
    # failures: the representatives are routed around them and a host's own dead links
    # make it an attachment of its own; the check below says whether classes stay exact
    return None


def _single_alltoall(scn: Any) -> str | None:
    if scn.jobs or scn.traffic or scn.workload is not None:
        return "the scenario has jobs, traffic or a trace besides collectives"
    if len(scn.collectives) != 1:
        return "classes run one All-to-All collective at a time"
    cs = scn.collectives[0]
    if cs.op != "alltoall":
        return f"collectives[0] is {cs.op}"
    return None


def is_candidate(scn: Any) -> bool:
    """A scenario ``classes: auto`` considers: its workload is one All-to-All on the flow
    simulator (the packet and analytic simulators run per transfer, as before)."""
    return getattr(scn, "classes", "auto") == "auto" and scn.sim == "flow" \
        and _single_alltoall(scn) is None


# ---------------------------------------------------------------- the plan

def class_plan(scn: Any, f: Fabric) -> ClassPlan | str:
    """The exact classes of the scenario's All-to-All, or why there are none."""
    why = _single_alltoall(scn) or why_not_classes(scn, f)
    if why:
        return why
    try:
        return _plan(scn, f)
    except _NoClasses as e:
        return str(e)


def _select_gpus(scn: Any, f: Fabric) -> np.ndarray:
    from aifabric.sim.run import _NAMES, _GpuNames, _select, gpu_pool

    pool = gpu_pool(f)
    taken = np.zeros(len(pool.node), dtype=bool)
    problems: list[Problem] = []
    seed = int(getattr(scn, "seed", 0) or 0)
    _NAMES[id(pool)] = _GpuNames(f, pool)
    try:
        pos = _select(pool, scn.collectives[0], "collectives[0]", taken, seed + 1000,
                      problems)
    finally:
        _NAMES.pop(id(pool), None)
    if problems or pos is None:
        raise SpecError(problems)
    return pool.node[pos]


@dataclass
class _Hosts:
    """Every host's own arcs in one canonical order (role r of host h: ``arc[h, r]``)."""

    arc: np.ndarray  # (H, R) arc ids
    role_of: np.ndarray  # (n_arcs,) role of each host arc, -1 for switch-to-switch arcs
    host_of: np.ndarray  # (n_arcs,) its host, -1
    att: np.ndarray  # (H,) attachment id


def _hosts(f: Fabric, alive: np.ndarray) -> _Hosts:
    """Hosts' own arcs in a canonical order, checked alike on every host, and each
    host's attachment: the switches its arcs reach and which of its links are alive."""
    site = arc_site(f)
    src, dst, _ = f.arcs
    nodes = f.nodes
    own = np.flatnonzero(site >= 0)
    if not len(own):
        raise _NoClasses("the fabric has no host links")
    sw = f.is_switch
    ends = np.concatenate([src[own], dst[own]])
    ends = ends[~sw[ends]]
    if len(ends) and (nodes.index[ends].max() >= 4095 or nodes.rail[ends].max() >= 1023
                      or nodes.side[ends].max() >= 7 or nodes.kind[ends].max() >= 15):
        raise _NoClasses("host nodes beyond the layout the host check packs")

    def end_key(v: np.ndarray) -> np.ndarray:
        k = nodes.kind[v].astype(np.int64)
        idx = np.where(sw[v], -1, nodes.index[v].astype(np.int64)) + 1
        rail = np.where(sw[v], -1, nodes.rail[v].astype(np.int64)) + 1
        side = np.where(sw[v], -1, nodes.side[v].astype(np.int64)) + 1
        return ((k * 4096 + idx) * 1024 + rail) * 8 + side

    key = end_key(src[own]) * (1 << 30) + end_key(dst[own])
    order = np.lexsort((key, site[own]))
    own, key = own[order], key[order]
    hs = site[own]
    H = int(hs.max()) + 1
    per = np.bincount(hs, minlength=H)
    R = int(per.max())
    if (per != R).any():
        raise _NoClasses("the hosts are not wired alike (different numbers of links)")
    keys = key.reshape(H, R)
    if (keys != keys[0]).any() or (R > 1 and (np.diff(keys[0]) <= 0).any()):
        raise _NoClasses("the hosts are not wired alike (their links differ)")
    arc = own.reshape(H, R)
    role_of = np.full(len(site), -1, dtype=np.int64)
    role_of[arc] = np.arange(R)[None, :]
    host_of = np.where(site >= 0, site, -1)
    # attachment: the switch at the far end of each host arc, and its link alive
    far = np.where(sw[dst[arc]], dst[arc], np.where(sw[src[arc]], src[arc], -1))
    sig = np.concatenate([far, alive[arc // 2].astype(np.int64)], axis=1)
    _, att = np.unique(sig, axis=0, return_inverse=True)
    return _Hosts(arc, role_of, host_of, att.ravel().astype(np.int64))


def _plan(scn: Any, f: Fabric) -> ClassPlan:
    from aifabric.routing.failover import live_links
    from aifabric.sim.paths import _routed

    cs = scn.collectives[0]
    gpus = _select_gpus(scn, f)
    n = len(gpus)
    if n < 2:
        raise _NoClasses("an All-to-All of one GPU moves nothing")
    alive = live_links(f, scn.failures or None)
    hosts = _hosts(f, alive)
    nodes = f.nodes
    H = hosts.arc.shape[0]
    L = int(f.spec.hosts.gpus_per_host)
    gh = nodes.host[gpus].astype(np.int64)
    gl = nodes.index[gpus].astype(np.int64)
    if gh.min() < 0 or gh.max() >= H or gl.max() >= L:
        raise _NoClasses("GPUs outside the hosts' layout")
    occ = np.zeros((H, L), dtype=np.int64)
    occ[gh, gl] = 1
    gpu_at = np.full((H, L), -1, dtype=np.int64)
    gpu_at[gh, gl] = gpus
    att = hosts.att
    A = int(att.max()) + 1
    N = np.zeros((A, L), dtype=np.int64)
    np.add.at(N, att, occ)
    P = np.zeros((A, L, L), dtype=np.int64)
    np.add.at(P, att, occ[:, :, None] * occ[:, None, :])
    # groups: cross-host (a_s, l_s, a_d, l_d) and same-host (a, l_s, l_d), with counts
    a_s, l_s, a_d, l_d = (x.ravel() for x in np.meshgrid(
        np.arange(A), np.arange(L), np.arange(A), np.arange(L), indexing="ij"))
    net = N[a_s, l_s] * N[a_d, l_d] - np.where(a_s == a_d, P[a_s, l_s, l_d], 0)
    b_a, b_s, b_d = (x.ravel() for x in np.meshgrid(np.arange(A), np.arange(L),
                                                    np.arange(L), indexing="ij"))
    same = np.where(b_s != b_d, P[b_a, b_s, b_d], 0)
    keep_n, keep_h = np.flatnonzero(net > 0), np.flatnonzero(same > 0)
    g_as = np.concatenate([a_s[keep_n], b_a[keep_h]])
    g_ls = np.concatenate([l_s[keep_n], b_s[keep_h]])
    g_ad = np.concatenate([a_d[keep_n], b_a[keep_h]])
    g_ld = np.concatenate([l_d[keep_n], b_d[keep_h]])
    g_same = np.concatenate([np.zeros(len(keep_n), bool), np.ones(len(keep_h), bool)])
    c = np.concatenate([net[keep_n], same[keep_h]]).astype(np.float64)
    G = len(c)
    # hosts per attachment, in host order
    h_order = np.argsort(att, kind="stable")
    h_ptr = np.searchsorted(att[h_order], np.arange(A + 1))
    reps = _representatives(g_as, g_ls, g_ad, g_ld, g_same, occ, att, h_order, h_ptr)
    routing = scn.spec.routing
    Q = int(routing.qps_per_connection)
    seed = int(getattr(scn, "seed", 0) or 0)
    (s0h, d0h), (s1h, d1h) = reps
    src0, dst0 = gpu_at[s0h, g_ls], gpu_at[d0h, g_ld]
    src1, dst1 = gpu_at[s1h, g_ls], gpu_at[d1h, g_ld]

    def routed(idx: np.ndarray, second: bool) -> sp.csr_matrix:
        """The path (one QP's row) of each group ``idx``'s first (second) member, the
        QPs of a connection checked alike."""
        s_, d_ = (src1, dst1) if second else (src0, dst0)
        inc, conn = _routed(f, s_[idx], d_[idx], np.ones(len(idx)), routing,
                            scn.failures or None, seed)
        inc = sp.csr_matrix(inc)
        if len(conn) != len(idx) * Q:
            raise _NoClasses("the router gave another number of QPs than asked")
        if (np.diff(conn) < 0).any():
            order = np.argsort(conn, kind="stable")
            inc = inc[order]
        inc.sort_indices()
        first = inc[np.arange(0, len(idx) * Q, Q)]
        for q in range(1, Q):  # the QPs of a connection spray alike (fluid)
            if _differs(first, inc[np.arange(q, len(idx) * Q, Q)]):
                raise _NoClasses("the QPs of a connection take different paths")
        return first

    # the size guard, on the class run (not the per-transfer one), from the measured
    # length of a few representatives' paths, before the others are routed
    probe = np.unique(np.linspace(0, G - 1, min(G, 8)).astype(np.int64))
    entries = int(np.diff(routed(probe, False).indptr).max(initial=1))
    check_classes("collectives[0]", G, entries, 2 * f.n_links,
                  int(c.sum()) * int(cs.repeat), fabric_bytes=fabric_bytes(f))
    # the per-host flow counts of every group (sparse G x H, source and destination side)
    cs_m, cd_m = _host_counts(g_as, g_ls, g_ad, g_ld, g_same, occ, N, h_order, h_ptr, H)
    # route the representatives, a chunk at a time (the router's temporaries stay
    # bounded), and a second member of each group: the check of the relabelling
    lat_arc = arc_latency_ns(f)
    R = hosts.arc.shape[1]
    S, D, lat = np.zeros((G, R)), np.zeros((G, R)), np.zeros(G)
    parts: list[sp.csr_matrix] = []
    step = max(1, CHUNK_ENTRIES // max(entries, 1))
    for lo in range(0, G, step):  # chunks of groups
        idx = np.arange(lo, min(G, lo + step))
        r0, r1 = routed(idx, False), routed(idx, True)
        F0, S[idx], D[idx] = _split(r0, hosts, s0h[idx], d0h[idx], g_same[idx])
        F1, S1, D1 = _split(r1, hosts, s1h[idx], d1h[idx], g_same[idx])
        if _differs(F0, F1):
            raise _NoClasses("two transfers alike under the fabric's symmetry cross "
                             "different switch links (the routing breaks the symmetry)")
        if np.abs(S[idx] - S1).max(initial=0) > RTOL or \
                np.abs(D[idx] - D1).max(initial=0) > RTOL:
            raise _NoClasses("two transfers alike under the fabric's symmetry cross "
                             "different host links")
        lat[idx] = r0 @ lat_arc
        if np.abs(lat[idx] - r1 @ lat_arc).max(initial=0) > 1e-6:
            raise _NoClasses("two transfers alike have different latencies")
        parts.append(F0)
    Fm = sp.vstack(parts, format="csr")
    plan = _refine(f, scn, gpus, cs.size_bytes, Q, c, Fm, S, D, cs_m, cd_m, lat, src0,
                   dst0, s0h, d0h, hosts)
    gcol = plan.info.pop("group_class")
    net_cls = np.full((A, L, A, L), -1, dtype=np.int64)
    same_cls = np.full((A, L, L), -1, dtype=np.int64)
    net_cls[g_as[~g_same], g_ls[~g_same], g_ad[~g_same], g_ld[~g_same]] = gcol[~g_same]
    same_cls[g_as[g_same], g_ls[g_same], g_ld[g_same]] = gcol[g_same]
    plan.lookup = (att, net_cls, same_cls)
    return plan


def _representatives(g_as, g_ls, g_ad, g_ld, g_same, occ, att, h_order, h_ptr):
    """Per group, two members' (source host, destination host): the first hosts that
    have the GPUs, and the last ones (another pair where the group has one)."""
    L = occ.shape[1]
    A = len(h_ptr) - 1
    # per (attachment, local index): hosts that have that GPU, in host order
    has = occ[h_order]  # (H, L) in attachment order
    first = np.full((A, L), -1, dtype=np.int64)
    second = np.full((A, L), -1, dtype=np.int64)
    last = np.full((A, L), -1, dtype=np.int64)
    before_last = np.full((A, L), -1, dtype=np.int64)
    for a in range(A):  # attachments: a few hundred at most
        blk = has[h_ptr[a]:h_ptr[a + 1]]
        hh = h_order[h_ptr[a]:h_ptr[a + 1]]
        for lo in range(L):  # GPUs per host
            w = hh[blk[:, lo] > 0]
            if len(w):
                first[a, lo], last[a, lo] = w[0], w[-1]
                if len(w) > 1:
                    second[a, lo], before_last[a, lo] = w[1], w[-2]
    # same host: both on the first (last) host that has both GPUs
    s0 = first[g_as, g_ls].copy()
    d0 = np.where(first[g_ad, g_ld] != s0, first[g_ad, g_ld], second[g_ad, g_ld])
    s1 = last[g_as, g_ls].copy()
    d1 = np.where(last[g_ad, g_ld] != s1, last[g_ad, g_ld], before_last[g_ad, g_ld])
    for g in np.flatnonzero(g_same | (d0 < 0) | (d1 < 0)):  # same-host groups: few
        a = g_as[g]
        hh = h_order[h_ptr[a]:h_ptr[a + 1]]
        if g_same[g]:
            both = hh[(occ[hh, g_ls[g]] > 0) & (occ[hh, g_ld[g]] > 0)]
            s0[g] = d0[g] = both[0]
            s1[g] = d1[g] = both[-1]
        else:  # the only pair is host x -> host y with x first
            src_hosts = hh[occ[hh, g_ls[g]] > 0]
            dh = h_order[h_ptr[g_ad[g]]:h_ptr[g_ad[g] + 1]]
            dst_hosts = dh[occ[dh, g_ld[g]] > 0]
            pairs = [(x, y) for x in src_hosts[:2] for y in dst_hosts[:3] if x != y]
            s0[g], d0[g] = pairs[0]
            s1[g], d1[g] = pairs[-1]
    return (s0, d0), (s1, d1)


def _host_counts(g_as, g_ls, g_ad, g_ld, g_same, occ, N, h_order, h_ptr, H):
    """(G x H) transfers of each group leaving each host, and arriving at each host."""
    def side(a_here, l_here, a_there, l_there, same):
        cnt = h_ptr[a_here + 1] - h_ptr[a_here]
        g = np.repeat(np.arange(len(a_here)), cnt)
        pos = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        h = h_order[h_ptr[a_here][g] + pos]
        mine = occ[h, l_here[g]]
        other = occ[h, l_there[g]]
        same_att = a_here[g] == a_there[g]
        v = np.where(same[g], mine * other,
                     mine * (N[a_there[g], l_there[g]] - np.where(same_att, other, 0)))
        return sp.csr_matrix((v.astype(np.float64), (g, h)), shape=(len(a_here), H))

    cs = side(g_as, g_ls, g_ad, g_ld, g_same)
    cd = side(g_ad, g_ld, g_as, g_ls, g_same)
    cd = cd.multiply((~g_same)[:, None].astype(np.float64)).tocsr()
    return cs, cd


def _split(rows: sp.csr_matrix, hosts: _Hosts, sh: np.ndarray, dh: np.ndarray,
           same: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Each row's path in three parts: the switch arcs (sparse), the source host's arcs
    by role and the destination host's (dense, G x R)."""
    G, n_arcs = rows.shape
    R = hosts.arc.shape[1]
    r = rows.tocoo()
    g, a, w = r.row, r.col.astype(np.int64), r.data
    ho = hosts.host_of[a]
    fab = ho < 0
    at_s = ~fab & (ho == sh[g])
    at_d = ~fab & ~at_s & (ho == dh[g]) & ~same[g]
    if (~(fab | at_s | at_d)).any():
        raise _NoClasses("paths cross the links of a third host (a scale-up domain "
                         "over several hosts)")
    Fm = sp.csr_matrix((w[fab], (g[fab], a[fab])), shape=(G, n_arcs))
    S = np.zeros((G, R))
    D = np.zeros((G, R))
    np.add.at(S, (g[at_s], hosts.role_of[a[at_s]]), w[at_s])
    np.add.at(D, (g[at_d], hosts.role_of[a[at_d]]), w[at_d])
    return Fm, S, D


def _dense(labels: np.ndarray) -> np.ndarray:
    return np.unique(labels, return_inverse=True)[1].ravel().astype(np.int64)


def _refine(f, scn, gpus, size, Q, c, Fm, S, D, cs_m, cd_m, lat, src0, dst0, s0h, d0h,
            hosts) -> ClassPlan:
    """Colour refinement of groups x arcs (aggregated), then the exact check."""
    n_arcs = Fm.shape[1]
    R = hosts.arc.shape[1]
    groups, _ = arc_groups(f)
    cap = f.arcs[2].astype(np.float64)
    gcol = _dense(np.round(lat, 3))
    acol = _dense(np.round(cap, 6) * 64 + groups)
    FmT = Fm.T.tocsr()
    role_arc = hosts.arc
    rep_arcs = role_arc[s0h]  # (G, R) the representative's own host arcs
    dst_arcs = role_arc[d0h]
    csT, cdT = cs_m.T.tocsr(), cd_m.T.tocsr()
    rng = np.random.default_rng(1)
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007
        rg = rng.random(int(gcol.max()) + 1) + 1.0
        ra = rng.random(int(acol.max()) + 1) + 1.0
        sig_a, sig_g = [acol], [gcol]
        for p in (1, 2):
            vg = rg[gcol] ** p
            la = FmT @ (vg * c)
            priv = csT @ (vg[:, None] * S) + cdT @ (vg[:, None] * D)
            la[role_arc] += priv
            sig_a.append(_quantised(la))
            va = ra[acol] ** p
            lg = Fm @ va + (S * va[rep_arcs]).sum(axis=1)
            lg += (D * va[dst_arcs]).sum(axis=1) if D.any() else 0.0
            sig_g.append(_quantised(lg))
        na = _dense_rows(np.stack(sig_a, axis=1))
        ng = _dense_rows(np.stack(sig_g, axis=1))
        stable = na.max() == acol.max() and ng.max() == gcol.max()
        acol, gcol = na, ng
        if stable:
            break
    else:
        raise _NoClasses("the class refinement did not settle")
    K = int(gcol.max()) + 1
    # every host with a GPU of the collective: its arcs coloured alike, role by role
    # (each group's members then cross arcs of the same classes as its representative)
    active = np.flatnonzero(np.asarray(cs_m.sum(axis=0)).ravel()
                            + np.asarray(cd_m.sum(axis=0)).ravel() > 0)
    hc = acol[role_arc[active]]
    if (hc != hc[0]).any():
        raise _NoClasses("the hosts with GPUs of the collective do not carry alike "
                         "loads (uneven placement, or failures near some hosts)")
    # the exact check: per flow class, one load on every arc of an arc class ...
    ind = sp.csr_matrix((c, (gcol, np.arange(len(c)))), shape=(K, len(c)))
    Lk = np.asarray((ind @ Fm).todense())
    for k in range(K):  # flow classes: each group's rows once over the loop
        sel = np.flatnonzero(gcol == k)
        Lk[k, role_arc] += cs_m[sel].T @ S[sel] + cd_m[sel].T @ D[sel]
    M = int(acol.max()) + 1
    order = np.argsort(acol, kind="stable")
    a_ptr = np.searchsorted(acol[order], np.arange(M + 1))
    hi = np.maximum.reduceat(Lk[:, order], a_ptr[:-1], axis=1)
    lo = np.minimum.reduceat(Lk[:, order], a_ptr[:-1], axis=1)
    if (hi - lo > RTOL * np.maximum(np.abs(hi), 1.0)).any():
        raise _NoClasses("the classes are not equitable (an arc class's arcs carry "
                         "different loads)")
    # ... and every group of a flow class crosses each arc class with the same weight
    onehot = sp.csr_matrix((np.ones(n_arcs), (np.arange(n_arcs), acol)), shape=(n_arcs, M))
    U = np.asarray((Fm @ onehot).todense())
    gi = np.repeat(np.arange(len(c))[:, None], R, axis=1)
    np.add.at(U, (gi, acol[rep_arcs]), S)
    if D.any():
        np.add.at(U, (gi, acol[dst_arcs]), D)
    Uk_hi = np.full((K, M), -np.inf)
    Uk_lo = np.full((K, M), np.inf)
    np.maximum.at(Uk_hi, gcol, U)
    np.minimum.at(Uk_lo, gcol, U)
    if (Uk_hi - Uk_lo > RTOL * np.maximum(np.abs(Uk_hi), 1.0)).any():
        raise _NoClasses("the classes are not equitable (a flow class's transfers cross "
                         "an arc class with different weights)")
    lat_hi = np.full(K, -np.inf)
    lat_lo = np.full(K, np.inf)
    np.maximum.at(lat_hi, gcol, lat)
    np.minimum.at(lat_lo, gcol, lat)
    if (lat_hi - lat_lo > 1e-6).any():
        raise _NoClasses("transfers of one class have different latencies")
    count = np.bincount(gcol, weights=c, minlength=K)
    rep = np.zeros(K, dtype=np.int64)
    rep[gcol[::-1]] = np.arange(len(c))[::-1]  # the first group of each class
    # the quotient: per class and arc class, the load of one unit of rate on one arc
    per_arc = hi  # (K, M) = lo: the class's load on each arc of the arc class
    used = (per_arc > 0).any(axis=0)
    col = np.cumsum(used) - 1
    Mu = int(used.sum())
    qk, qm = np.nonzero(per_arc[:, used])
    qrow = np.repeat(qk * Q, 1)
    rows_i = (qrow[:, None] + np.arange(Q)[None, :]).ravel()
    cols_i = np.repeat(qm, Q)
    vals = np.repeat(per_arc[:, used][qk, qm], Q)
    quot = sp.csr_matrix((vals, (rows_i, cols_i)), shape=(K * Q, Mu))
    arc_class = np.where(used[acol], col[acol], -1)
    sizes = np.bincount(acol, minlength=M)[used]
    first_arc = order[a_ptr[:-1]][used]
    return ClassPlan(gpus=gpus, size_bytes=float(size), count=count,
                     rep_src=src0[rep], rep_dst=dst0[rep], latency_ns=lat[rep],
                     quotient=quot, arc_class=arc_class, class_arcs=sizes,
                     class_cap=cap[first_arc], class_group=groups[first_arc],
                     class_first_arc=first_arc, qps=Q,
                     groups=len(c), rounds=rounds,
                     info={"arc_classes_all": M, "hosts_active": len(active),
                           "group_class": gcol})


def _differs(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    d = (a - b).tocsr()
    return bool(d.nnz and np.abs(d.data).max() > RTOL)


def _quantised(x: np.ndarray) -> np.ndarray:
    """Signatures compared to 10 significant digits of the largest: sums of the same
    terms in another order differ in their last bits, and a class must not split on
    that (a too-coarse merge cannot pass the exact check that follows)."""
    top = float(np.abs(x).max(initial=0.0)) or 1.0
    return np.round(x / top, 10)


def _dense_rows(x: np.ndarray) -> np.ndarray:
    return np.unique(x, axis=0, return_inverse=True)[1].ravel().astype(np.int64)


# ---------------------------------------------------------------- the run

def _class_dag(scn: Any, plan: ClassPlan) -> Any:
    """The All-to-All's stages as ``add_collective`` lays them out, with one transfer
    per class (its representative) instead of one per GPU pair."""
    cs = scn.collectives[0]
    n = len(plan.gpus)
    b = DAGBuilder()
    deps = b.compute(cs.start_ms * 1e6, label="collectives[0] start") if cs.start_ms \
        else None
    for r in range(cs.repeat):
        name = (cs.name or f"{cs.op}-0") + (f"#{r}" if cs.repeat > 1 else "")
        b.coll = len(b.collectives)
        first = b.n_stages
        deps = b.transfers(plan.rep_src, plan.rep_dst, plan.size_bytes / n, deps=deps,
                           label="alltoall")
        b.add_collective(Collective(name=name, op="alltoall", algorithm="direct",
                                    n_gpus=n, size_bytes=int(plan.size_bytes),
                                    channels=cs.channels, job=-1,
                                    stages=tuple(range(first, b.n_stages)),
                                    busbw_factor=busbw_factor("alltoall", n)))
        b.coll = -1
    return b.build()


def simulate_classes(scn: Any, f: Fabric, plan: ClassPlan, *, name: str | None = None,
                     progress: Any = None) -> SimResult:
    """Run the plan's quotient on the flow engine and expand it: every link's bytes and
    peak, the collectives' times, one transfer row per class with its multiplicity."""
    from aifabric.sim.results import _hot_links
    from aifabric.sim.run import _policy_label

    dag = _class_dag(scn, plan)
    K, Q = plan.n_classes, plan.qps
    Mu = plan.quotient.shape[1]
    paths = Paths(plan.quotient, np.arange(K + 1, dtype=np.int64) * Q, plan.latency_ns,
                  plan.class_cap)
    stage_of = dag.xfer_stage
    xconn = np.tile(np.arange(K, dtype=np.int64), max(1, len(stage_of) // max(K, 1)))
    q = run_flow(dag, paths, xconn[:dag.n_transfers], tolerance=scn.tolerance,
                 arc_group=np.arange(Mu), n_groups=Mu, progress=progress)
    gnames = arc_groups(f)[1]
    n_arcs = len(plan.arc_class)
    ac = plan.arc_class
    on = ac >= 0
    arc_bytes = np.zeros(n_arcs)
    arc_bytes[on] = q.arc_bytes[ac[on]]
    arc_peak = np.zeros(n_arcs)
    arc_peak[on] = q.arc_peak_gbps[ac[on]]
    # per interval, bytes per tier: a class's bytes times its arcs, into its tier
    to_tier = sp.csr_matrix((plan.class_arcs.astype(np.float64),
                             (np.arange(Mu), plan.class_group)), shape=(Mu, len(gnames)))
    tl_g = np.asarray(sp.csr_matrix(q.timeline_group_bytes) @ to_tier.todense()) \
        if len(q.timeline_ns) else np.zeros((0, len(gnames)))
    bott = np.where(q.xfer_bottleneck_arc >= 0,
                    plan.class_first_arc[np.maximum(q.xfer_bottleneck_arc, 0)], -1)
    run = FlowRun(q.stage_start_ns, q.stage_end_ns, q.xfer_start_ns, q.xfer_end_ns,
                  q.xfer_min_rate_gbps, bott, arc_bytes, arc_peak, q.timeline_ns,
                  np.asarray(tl_g, dtype=np.float64).reshape(len(q.timeline_ns),
                                                             len(gnames)),
                  q.events, q.rate_solves, q.reps_skipped)
    routing = scn.spec.routing
    res = build_result(name or scn.name, "flow", f, dag, run, job_gpus=[], iterations=[],
                       extra={"routing": {"policy": _policy_label(scn.spec, routing.policy),
                                          "qps_per_connection": routing.qps_per_connection,
                                          "nic_port_choice": routing.nic_port_choice}})
    mult = np.tile(plan.count, max(1, dag.n_transfers // max(K, 1)))[:dag.n_transfers]
    tr = res.tables["transfers"]
    tr["class"] = xconn[:dag.n_transfers].copy()
    tr["transfers"] = mult.astype(np.int64)
    # a class's transfers are held back by its bottleneck arc's class: spread evenly over
    # the class's arcs (the per-transfer run names one arc of the class per transfer)
    qb = q.xfer_bottleneck_arc
    held = np.bincount(qb[qb >= 0], weights=mult[qb >= 0], minlength=Mu)
    per_arc = np.zeros(n_arcs)
    per_arc[on] = held[ac[on]] / plan.class_arcs[ac[on]]
    links = res.tables["links"]
    links["bottleneck_of"] = per_arc[2 * links["link"] + (links["direction"] == "down")]
    res.summary["hot_links"] = _hot_links(links)
    res.summary["engine"]["transfers"] = int(mult.sum())
    res.summary["classes"] = classes_summary(plan)
    res.tables["collective_links"] = collective_links(f, dag, _expanded_paths(plan,
                                                                              n_arcs),
                                                      xconn[:dag.n_transfers])
    res.tables["link_classes"] = _link_class_table(plan, q, gnames)
    return res


def classes_summary(plan: ClassPlan) -> dict[str, Any]:
    """What ``simulate --json`` says about a class run."""
    return {"used": True, "classes": plan.n_classes,
            "transfers_represented": plan.n_transfers,
            "arc_classes": int(plan.quotient.shape[1]), "groups_routed": plan.groups,
            "refinement_rounds": plan.rounds,
            "exact": "equitable partition verified"}


def fallback_summary(why: str) -> dict[str, Any]:
    """What the summary of a per-transfer All-to-All run says when classes were not
    used (``why``)."""
    return {"used": False, "reason": why}


def _expanded_paths(plan: ClassPlan, n_arcs: int) -> Paths:
    """The quotient's rows over the real arcs (each class column onto its arcs): what
    ``collective_links`` multiplies by the bytes."""
    ac = plan.arc_class
    arcs = np.flatnonzero(ac >= 0)
    expand = sp.csr_matrix((np.ones(len(arcs)), (ac[arcs], arcs)),
                           shape=(plan.quotient.shape[1], n_arcs))
    K, Q = plan.n_classes, plan.qps
    return Paths(sp.csr_matrix(plan.quotient @ expand),
                 np.arange(K + 1, dtype=np.int64) * Q, plan.latency_ns,
                 np.zeros(n_arcs))


def _link_class_table(plan: ClassPlan, q: FlowRun, gnames: list[str]) -> dict[str, Any]:
    """One row per arc class: its tier, links (multiplicity), capacity, bytes and peak
    per link."""
    return {"arc_class": np.arange(len(plan.class_arcs)),
            "tier": np.array(gnames, dtype=object)[plan.class_group],
            "links": plan.class_arcs.astype(np.int64),
            "capacity_gbps": plan.class_cap,
            "bytes_per_link": q.arc_bytes,
            "peak_util": q.arc_peak_gbps / plan.class_cap}
