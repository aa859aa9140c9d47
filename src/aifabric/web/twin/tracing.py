"""Tracing: the paths of a collective, a job or a GPU pair hop by hop, each hop's load,
the bottleneck and the flows (collectives, jobs) that share it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind
from aifabric.web.twin.core import RoutedState, TwinCore, arc_tiers

if TYPE_CHECKING:
    from aifabric.routing.route import Routed

__all__ = ["MAX_TRACE_EDGES", "PATH_ROWS", "SHARING_ROWS", "TRACE_VIEWS", "Tracing"]

#: how a trace is drawn: every arc ("links"), the overview's groups ("groups": a group
#: edge per pair of groups, the selection's bytes summed, its hottest arc's
#: utilization), or "auto": groups when the arcs are more than ``max_edges`` (a whole
#: traffic pattern of a pod), arcs otherwise
TRACE_VIEWS = ("links", "groups", "auto")

#: paths shown in a trace, sharing flows listed
PATH_ROWS, SHARING_ROWS = 50, 50
#: most edges one trace sends (a pattern of the HPN pod uses 151K arcs: 46 MB of JSON)
MAX_TRACE_EDGES = 20_000

_KIND = np.array([k.label for k in NodeKind], dtype=object)


class Tracing(TwinCore):
    """traces, trace, trace_arcs."""

    def traces(self) -> dict[str, Any]:
        """What can be traced: jobs and collectives (a simulation scenario or run), the
        traffic patterns (a route scenario or a spec)."""
        out: dict[str, Any] = {"jobs": [], "collectives": [], "patterns": []}
        if self.fabric is None or self._flows is None:
            return out
        dag = self._dag
        if dag is not None:
            coll_t = self.tables.get("collectives", {})
            times = {str(n): t for n, t in zip(coll_t.get("collective", []),
                                               coll_t.get("time_ns", []), strict=False)}
            c_gpus, j_gpus = self._gpus_drawn()
            for j, name in enumerate(dag.jobs):  # jobs: a handful
                out["jobs"].append({"id": j, "name": name, "gpus": int(j_gpus[j]),
                                    "collectives": sum(c.job == j for c in dag.collectives)})
            for i, c in enumerate(dag.collectives):
                t = times.get(c.name)
                g = int(c_gpus[i])
                out["collectives"].append({
                    "id": i, "name": c.name, "job": dag.jobs[c.job] if c.job >= 0 else "",
                    "op": c.op, "gpus": g, "group_gpus": int(c.n_gpus),
                    "groups": g // int(c.n_gpus) if c.op != "p2p" and c.n_gpus
                    and g > int(c.n_gpus) and g % int(c.n_gpus) == 0 else None,
                    "size_bytes": int(c.size_bytes),
                    "time_ns": None if t is None or not np.isfinite(t) else float(t)})
        out["patterns"] = [{"id": i, "name": n} for i, n in enumerate(self._patterns)]
        return out

    def _gpus_drawn(self) -> tuple[np.ndarray, np.ndarray]:
        """Per collective and per job: the GPUs its transfers join (senders and
        receivers) — the GPUs a trace of it draws. A collective of ``n_gpus`` run by
        several groups at once (a TP AllReduce in every replica) joins ``groups x
        n_gpus``; a send/recv stage counts both sides."""
        dag = self._dag
        xs = dag.xfer_stage
        big = int(max(int(dag.src.max(initial=0)), int(dag.dst.max(initial=0)))) + 1

        def per(owner: np.ndarray, n: int) -> np.ndarray:
            ok = owner >= 0
            o = owner[ok].astype(np.int64)
            keys = np.unique(np.r_[o * big + dag.src[ok], o * big + dag.dst[ok]])
            return np.bincount(keys // big, minlength=n)

        return (per(dag.stage_coll[xs], len(dag.collectives)),
                per(dag.stage_job[xs], len(dag.jobs)))

    def _window_util(self, xsel: np.ndarray | None, fail: tuple[str, ...]
                     ) -> tuple[np.ndarray, dict[str, Any]] | None:
        """Per arc: the utilization during the selected transfers' own window (the first
        start to the last end of a collective's or a job's transfers in the run's
        ``transfers`` table): every transfer's bytes (the whole traffic's) spread evenly
        over its [start, end], the part inside the window, on its arcs, over what each
        arc carries in the window. None where there is no such window: no simulated
        transfers, a traffic pattern or GPU pair, or an added failure (the routing model
        has no time)."""
        tr = self.tables.get("transfers")
        if xsel is None or self._norm(fail) or self.run_command != "simulate" or not tr \
                or "start_ns" not in tr or self._dag is None:
            return None
        s = np.asarray(tr["start_ns"], dtype=np.float64)
        e = np.asarray(tr["end_ns"], dtype=np.float64)
        if len(s) != len(xsel):
            return None
        mine = xsel & np.isfinite(s) & np.isfinite(e)
        if not mine.any():
            return None
        t0, t1 = float(s[mine].min()), float(e[mine].max())
        if not t1 > t0:
            return None
        T = self._base_extra("transfer_arcs", self.transfer_arcs)
        if T is None or T.shape[0] != len(s):
            return None
        done = np.isfinite(s) & np.isfinite(e) & (e >= s)
        rep = np.nan_to_num(np.asarray(tr.get("repeat", np.ones(len(s))), np.float64), nan=1.0)
        moved = np.asarray(tr["size_bytes"], np.float64) * rep
        ov = np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0.0, None)
        dur = e - s
        part = np.where(dur > 0, np.divide(ov, dur, out=np.zeros_like(ov), where=dur > 0),
                        ((s >= t0) & (s <= t1)).astype(np.float64))
        w = np.where(done, moved * part, 0.0)
        by = np.asarray(T.T @ w).ravel()
        cap = self.fabric.arcs[2]
        util = np.divide(by * 8.0, cap * (t1 - t0), out=np.zeros_like(by), where=cap > 0)
        return util, {"start_ns": t0, "end_ns": t1}

    def _lookup(self, text: str | int, names: list[str], what: str) -> int:
        s = str(text).strip()
        if s in names:
            return names.index(s)
        if s.isdigit() and int(s) < len(names):
            return int(s)
        shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        raise SpecError(Problem(what, f"no {what} {s[:80]!r}; allowed: an id 0..{len(names) - 1}"
                                f" or a name ({shown})" if names else
                                f"no {what} {s[:80]!r}; allowed: none here"))

    def _gpu(self, f: Fabric, name: str, what: str) -> int:
        s = str(name).strip()
        if not f.has_node(s) or f.nodes.kind[f.node_id(s)] != NodeKind.GPU:
            raise SpecError(Problem(what, f"no GPU called {s[:80]!r}; allowed: GPU names "
                                    f"like {f.nodes.name[f.ids(NodeKind.GPU)[0]]}"))
        return f.node_id(s)

    def _select(self, collective: str | int | None, job: str | int | None,
                src: str | None, dst: str | None, fail: tuple[str, ...]
                ) -> tuple[Routed, np.ndarray, str, np.ndarray | None]:
        """The routed flows a trace follows: (routing, flow rows, what they are, the
        selected transfers as a bool per transfer — None where whole flows are selected:
        a GPU pair, a traffic pattern). A collective's (a job's) connections also carry
        other collectives' transfers (a job's DP buckets and iterations reuse the same
        GPU pairs): its bytes come from its own transfers (:meth:`_flow_bytes`)."""
        self._need_routing("trace")
        st = self._state(fail)
        f = st.routed.fabric
        given = [x is not None and str(x) != "" for x in (collective, job, src)]
        if sum(given) != 1 or (src is not None and str(src) != "") != \
                (dst is not None and str(dst) != ""):
            raise SpecError(Problem("trace", "give exactly one of collective, job, or a GPU "
                                    "pair src and dst"))
        conn = np.asarray(self._flows.conn, dtype=np.int64)
        dag = self._dag
        if collective is not None and str(collective) != "":
            if dag is not None:
                names = [c.name for c in dag.collectives]
                c = self._lookup(collective, names, "collective")
                mine = dag.stage_coll[dag.xfer_stage] == c
                rows = np.flatnonzero(np.isin(conn, np.unique(self._xconn[mine])))
                return st.routed, rows, f"collective {names[c]}", mine
            p = self._lookup(collective, self._patterns, "collective")
            assert self._pattern_of_flow is not None
            return (st.routed, np.flatnonzero(self._pattern_of_flow == p), self._patterns[p],
                    None)
        if job is not None and str(job) != "":
            if dag is None:
                raise SpecError(Problem("job", "no jobs here; allowed: a simulation scenario "
                                        "or run with jobs"))
            j = self._lookup(job, list(dag.jobs), "job")
            mine = dag.stage_job[dag.xfer_stage] == j
            rows = np.flatnonzero(np.isin(conn, np.unique(self._xconn[mine])))
            return st.routed, rows, f"job {dag.jobs[j]}", mine
        s, d = self._gpu(f, str(src), "src"), self._gpu(f, str(dst), "dst")
        fl = st.routed.flows
        rows = np.flatnonzero((fl.src_gpu == s) & (fl.dst_gpu == d))
        what = f"{f.nodes.name[s]} -> {f.nodes.name[d]}"
        if len(rows) or s == d:
            return st.routed, rows, what, None
        # a pair the traffic does not hold: routed alone, as the switches would
        from aifabric.routing.flows import make_flows
        from aifabric.routing.route import route

        probe = make_flows(f, np.array([s]), np.array([d]), 1 << 20,
                           qps_per_connection=self._policy.qps_per_connection,
                           nic_port_choice=self._policy.nic_port_choice)
        r = route(f, probe, self._policy, failures=~st.down)
        return r, np.arange(len(probe)), what + " (not in the traffic: routed alone)", None

    def trace_arcs(self, *, collective: str | int | None = None, job: str | int | None = None,
                   src: str | None = None, dst: str | None = None,
                   fail: tuple[str, ...] = ()) -> np.ndarray:
        """Sorted unique arcs the selected flows use in the routing model (sprayed flows:
        every arc with a fraction > 0) — exactly the edges :meth:`trace` draws."""
        routed, rows, _, _ = self._select(collective, job, src, dst, fail)
        return _rows_arcs(routed, rows)

    def _flow_bytes(self, routed: Routed, rows: np.ndarray, xsel: np.ndarray | None
                    ) -> np.ndarray:
        """Per flow of ``routed``: the bytes the selection puts on it. Selected transfers
        (``xsel``): each transfer's bytes (repeats included) split evenly over its
        connection's QPs, as the simulators send them and ``collective_links`` counts
        them; otherwise the selected flows' whole sizes."""
        out = np.zeros(len(routed.flows))
        if xsel is None:
            out[rows] = routed.flows.size_bytes[rows]
            return out
        dag, xconn = self._dag, self._xconn
        assert dag is not None and xconn is not None
        conn = np.asarray(routed.flows.conn, dtype=np.int64)
        n_conn = max(int(xconn.max()) + 1 if len(xconn) else 0,
                     int(conn.max()) + 1 if len(conn) else 0)
        moved = (dag.size_bytes * dag.repeat[dag.xfer_stage]).astype(np.float64)
        cb = np.bincount(xconn[xsel], weights=moved[xsel], minlength=n_conn)
        nq = np.bincount(conn, minlength=n_conn).astype(np.float64)
        return cb[conn] / np.maximum(nq[conn], 1.0)

    def trace(self, *, collective: str | int | None = None, job: str | int | None = None,
              src: str | None = None, dst: str | None = None,
              fail: tuple[str, ...] = (), max_edges: int = MAX_TRACE_EDGES,
              view: str = "links") -> dict[str, Any]:
        """The paths of a collective, a job or a GPU pair, hop by hop with each hop's
        load; the bottleneck (the most utilized arc on them) and who shares it.

        ``edges`` are the arcs the flows use (:meth:`trace_arcs`), at most ``max_edges``
        of them: past that (a whole traffic pattern uses most of a pod's 190K arcs) the
        bottleneck, the arcs of the paths listed in ``hops`` and then the heaviest arcs
        (the selection's bytes) are sent, and ``truncated`` says how many of how many.
        ``paths`` lists the first flows (and one through the bottleneck), ``hops`` their
        paths hop by hop: each hop's link, tier, load (bytes, utilization, flows: the
        whole traffic's on that arc) and this flow's bytes on it."""
        if isinstance(max_edges, bool) or not isinstance(max_edges, (int, np.integer)) \
                or not 1 <= int(max_edges) <= 10 * MAX_TRACE_EDGES:
            raise SpecError(Problem("max_edges", f"{max_edges!r}; allowed: 1.."
                                    f"{10 * MAX_TRACE_EDGES}"))
        if view not in TRACE_VIEWS:
            raise SpecError(Problem("view", f"{view!r}; allowed: " + ", ".join(TRACE_VIEWS)))
        self._need_routing("trace")
        st = self._state(fail)
        routed, rows, what, xsel = self._select(collective, job, src, dst, fail)
        f = routed.fabric
        arcs = _rows_arcs(routed, rows)
        names = f.nodes.name
        a_src, a_dst, cap = f.arcs
        tiers = arc_tiers(f)
        # the selection's bytes (its own transfers', not its connections') and flows per arc
        wflow = self._flow_bytes(routed, rows, xsel)
        sel = np.zeros(len(routed.flows), dtype=bool)
        sel[rows] = True
        ent = routed.entry_flow
        keep = sel[ent] & (routed.fractions > 0)
        w = routed.fractions[keep] * wflow[ent[keep]]
        mine_b = np.bincount(routed.arcs[keep], weights=w, minlength=routed.n_arcs)
        mine_f = np.bincount(routed.arcs[keep], minlength=routed.n_arcs)
        util = st.util
        window = self._window_util(xsel, fail) if routed is st.routed else None
        if window is not None:  # the selection's own time window, not the whole run
            util = window[0]
        # the bottleneck: most utilized, then most bytes, then the lowest arc id
        b = -1
        if len(arcs):
            b = int(arcs[np.lexsort((arcs, -st.arc_bytes[arcs], -util[arcs]))[0]])
        # the paths shown hop by hop: the first flows, and one through the bottleneck
        shown = rows[:PATH_ROWS]
        if b >= 0:
            on_b = np.unique(ent[keep][routed.arcs[keep] == b])
            if len(on_b) and not np.isin(on_b, shown).any():
                shown = np.r_[shown, on_b[:1]]
        # the edges sent: all of them, or (past max_edges) the bottleneck, the arcs of
        # the listed paths, then the heaviest; or the overview's groups (``view``)
        total = len(arcs)
        sent = arcs
        grouped = view == "groups" or (view == "auto" and total > max_edges)
        if grouped:
            gd = _grouped(f, arcs, mine_b, mine_f, util, b)
            sent = np.zeros(0, dtype=np.int64)
        elif total > max_edges:
            first = np.unique(np.concatenate(
                [routed.arcs[routed.ptr[i]:routed.ptr[i + 1]] for i in shown.tolist()]
                + [np.array([b] if b >= 0 else [], dtype=np.int64)])).astype(np.int64)
            first = first[np.isin(first, arcs)]
            if b >= 0:  # the bottleneck first, whatever the cap
                first = np.r_[b, first[first != b]]
            rest = arcs[~np.isin(arcs, first)]
            rest = rest[np.lexsort((rest, -mine_b[rest]))]
            sent = np.sort(np.r_[first, rest][:max_edges])
        edges = [{"id": f"a:{a}", "arc": int(a), "link": int(a // 2),
                  "source": f"n:{int(a_src[a])}", "target": f"n:{int(a_dst[a])}",
                  "tier": str(tiers[a]), "bytes": float(mine_b[a]),
                  "total_bytes": float(st.arc_bytes[a]), "flows_here": int(mine_f[a]),
                  "flows_total": int(st.arc_flows[a]), "capacity_gbps": float(cap[a]),
                  "value": float(util[a]), "utilization": float(util[a]),
                  "utilization_run": float(st.util[a]),
                  "bottleneck": int(a) == b} for a in sent.tolist()]
        nodes = _trace_nodes(f, np.unique(np.r_[a_src[sent], a_dst[sent]]))
        if grouped:
            nodes, edges = gd["nodes"], gd["edges"]
        hops, paths = [], []
        fl = routed.flows
        frac = routed.fractions
        base = routed is st.routed
        for i in shown.tolist():  # the first few paths (51 at most)
            lo, hi = int(routed.ptr[i]), int(routed.ptr[i + 1])
            pa = routed.arcs[lo:hi]
            fb = frac[lo:hi] * float(wflow[i])
            hops.append([{"from": str(names[a_src[a]]), "to": str(names[a_dst[a]]),
                          "arc": int(a), "link": int(a // 2), "tier": str(tiers[a]),
                          "value": float(util[a]), "utilization": float(util[a]),
                          "bytes": float(st.arc_bytes[a]), "flows": int(st.arc_flows[a]),
                          "flow_bytes": float(x), "bottleneck": int(a) == b,
                          **({"group_edge": gd["edge_of_link"].get(int(a // 2))}
                             if grouped else {})}
                         for a, x in zip(pa.tolist(), fb.tolist(), strict=True)])
            paths.append({"flow": int(i), "src": str(names[fl.src_gpu[i]]),
                          "dst": str(names[fl.dst_gpu[i]]), "bytes": float(wflow[i]),
                          "hops": hi - lo, "bottleneck": bool((pa == b).any())})
        bott = self._bottleneck(st, b, self._selected_names(rows if base else None, xsel),
                                util) if b >= 0 else None
        if bott is not None:
            bott["utilization_run"] = float(st.util[b])
            bott["window"] = None if window is None else window[1]
        return {"what": what, "flows": len(rows),
                "bytes": float(wflow[rows].sum()),
                "utilization_measured": st.measured, "nodes": nodes, "edges": edges,
                "truncated": {"edges_total": total, "edges_sent": len(sent)}
                if len(sent) < total and not grouped else None,
                "grouped": {"arcs": total, "level": gd["level"],
                            "bytes_inside": gd["bytes_inside"]} if grouped else None,
                "paths": paths, "hops": hops, "bottleneck": bott,
                "utilization_window": None if window is None else window[1],
                "failed": list(self._norm(fail))}

    def _bottleneck(self, st: RoutedState, arc: int, exclude: set[str],
                    util: np.ndarray | None = None) -> dict[str, Any]:
        """An arc's load and the flows of the whole traffic that share it; ``collectives``:
        every collective (pattern) with bytes on it but those in ``exclude`` (the traced
        ones) — a traced DP bucket's arc lists the job's other buckets."""
        r = st.routed
        f = r.fabric
        names = f.nodes.name
        a_src, a_dst, _ = f.arcs
        on = r.arcs == arc
        fl_on = r.entry_flow[on]
        b_on = r.fractions[on] * r.flows.size_bytes[fl_on]
        order = np.lexsort((fl_on, -b_on))[:SHARING_ROWS]
        shown = fl_on[order]  # label only the flows listed
        coll, job = self._flow_labels(shown)
        sharing = [{"flow": int(fl), "src": str(names[r.flows.src_gpu[fl]]),
                    "dst": str(names[r.flows.dst_gpu[fl]]),
                    "collective": ", ".join(cs), "collectives": cs,
                    "job": ", ".join(js), "bytes": float(b_on[i])}
                   for fl, i, cs, js in zip(shown.tolist(), order.tolist(), coll, job,
                                            strict=True)]
        others = [c for c in self._flow_collectives_all(fl_on) if c and c not in exclude]
        return {"arc": arc, "link": arc // 2, "from": str(names[a_src[arc]]),
                "to": str(names[a_dst[arc]]), "tier": str(arc_tiers(f)[arc]),
                "utilization": float((st.util if util is None else util)[arc]),
                "bytes": float(st.arc_bytes[arc]),
                "flows": len(fl_on), "sharing": sharing, "collectives": others[:100]}

    def _selected_names(self, rows: np.ndarray | None, xsel: np.ndarray | None) -> set[str]:
        """The collectives (patterns) a trace follows: those of its transfers, else those
        of its flows (a traffic pattern); none for a pair routed alone."""
        if xsel is not None and self._dag is not None:
            dag = self._dag
            c = np.unique(dag.stage_coll[dag.xfer_stage[xsel]])
            return {dag.collectives[k].name for k in c.tolist() if k >= 0}
        if rows is None or self._dag is not None:
            return set()  # a GPU pair of a workload: every collective on it is another's
        return set(self._flow_collectives_all(rows))

    def _conn_collectives(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR (ptr per connection, collective ids) of the collectives whose transfers use
        each connection, sorted by id (computed once)."""
        def make() -> tuple[np.ndarray, np.ndarray]:
            dag, x = self._dag, self._xconn
            assert dag is not None and x is not None
            nc = max(len(dag.collectives), 1) + 1
            n_conn = int(x.max()) + 1 if len(x) else 0
            c = dag.stage_coll[dag.xfer_stage].astype(np.int64)
            pair = np.unique(x.astype(np.int64) * nc + (c + 1))  # +1: -1 (none) sorts first
            pc, cc = pair // nc, pair % nc - 1
            keep = cc >= 0
            pc, cc = pc[keep], cc[keep]
            ptr = np.searchsorted(pc, np.arange(n_conn + 1))
            return ptr, cc
        return self._base_extra("conn_collectives", make)  # type: ignore[no-any-return]

    def _flow_labels(self, flows: np.ndarray) -> tuple[list[list[str]], list[list[str]]]:
        """Per flow (a few: the listed ones): every collective (pattern) whose transfers
        its connection carries, and their jobs."""
        if self._dag is not None:
            dag = self._dag
            ptr, cc = self._conn_collectives()
            conn = np.asarray(self._flows.conn, dtype=np.int64)[flows]
            colls, jobs = [], []
            for k in conn.tolist():  # the listed flows: 50 at most
                ids = cc[ptr[k]:ptr[k + 1]].tolist() if k + 1 < len(ptr) else []
                colls.append([dag.collectives[i].name for i in ids])
                jobs.append(list(dict.fromkeys(
                    dag.jobs[dag.collectives[i].job] for i in ids
                    if dag.collectives[i].job >= 0)))
            return colls, jobs
        if self._pattern_of_flow is not None:
            return [[self._patterns[k]] for k in self._pattern_of_flow[flows].tolist()], \
                [[] for _ in range(len(flows))]
        return [[] for _ in range(len(flows))], [[] for _ in range(len(flows))]

    def _flow_collectives_all(self, flows: np.ndarray) -> list[str]:
        """Names of the collectives (patterns) whose transfers use ``flows``' connections."""
        if self._dag is not None:
            dag = self._dag
            conn = np.unique(np.asarray(self._flows.conn, dtype=np.int64)[flows])
            xs = np.isin(self._xconn, conn)
            c = np.unique(dag.stage_coll[dag.xfer_stage[xs]])
            return [dag.collectives[k].name for k in c.tolist() if k >= 0]
        if self._pattern_of_flow is not None:
            return [self._patterns[k] for k in np.unique(self._pattern_of_flow[flows]).tolist()]
        return []


def _rows_arcs(routed: Routed, rows: np.ndarray) -> np.ndarray:
    """Sorted unique arcs of the given flows' paths (fraction > 0)."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    sel = np.zeros(len(routed.flows), dtype=bool)
    sel[rows] = True
    keep = sel[routed.entry_flow] & (routed.fractions > 0)
    return np.unique(routed.arcs[keep]).astype(np.int64)


def _trace_nodes(f: Fabric, ids: np.ndarray) -> list[dict[str, Any]]:
    """The nodes of a trace, laid out like the LLD: cores on top, GPUs at the bottom,
    left to right by pod, segment, plane, rail, host."""
    n = f.nodes
    kind = n.kind[ids].astype(np.int64)
    # rows: core 0, agg 1, tor 2, NIC port 3, host (NVSwitch) 4, GPU 5
    level = np.array([5, 4, 3, 2, 1, 0])[kind]
    order = np.lexsort((ids, n.index[ids], n.side[ids], n.host[ids], n.rail[ids],
                        n.plane[ids], n.segment[ids], n.pod[ids], level))
    x = np.zeros(len(ids))
    lv = level[order]
    start = np.r_[0, np.flatnonzero(lv[1:] != lv[:-1]) + 1] if len(lv) else np.zeros(0, int)
    rank = np.arange(len(lv)) - np.repeat(start, np.diff(np.r_[start, len(lv)]))
    x[order] = rank * 60.0
    # short labels per row (tor-s00-r0-a -> s00-r0-a when the row spans segments): a row
    # of 16 ToR names side by side stays readable; the full name is ``name``
    from aifabric.web.topology import short_labels

    names = n.name[ids].astype(str)
    label = names.astype(object)
    for lv_ in np.unique(level).tolist():  # six rows at most
        m = np.flatnonzero(level == lv_)
        label[m] = short_labels(names[m].tolist())
    return [{"id": f"n:{int(i)}", "node": int(i), "name": str(n.name[i]), "label": str(lb),
             "kind": str(_KIND[k]), "tier": int(n.tier[i]), "x": float(xx),
             "y": float(lvl * 120.0)}
            for i, lb, k, xx, lvl in zip(ids.tolist(), label.tolist(), kind.tolist(),
                                         x.tolist(), level.tolist(), strict=True)]


def _grouped(f: Fabric, arcs: np.ndarray, mine_b: np.ndarray, mine_f: np.ndarray,
             util: np.ndarray, b: int) -> dict[str, Any]:
    """A trace drawn on the overview's groups (level auto, the topology's ids and
    layout): one edge per group edge the arcs cross, with the selection's bytes each way
    (``bytes_up``, ``bytes_down``; their sum ``bytes``), its flows, the arcs used and the
    utilization of its busiest arc; arcs inside a group (NVLink, PCIe) are summed on the
    group (``bytes_inside``). Every byte of the selection is on exactly one edge or
    group."""
    from aifabric.web.topology import _KIND_NAME, _groups

    g = _groups(f, "auto")
    links = arcs // 2
    le = g.link_edge[links]
    out = le >= 0
    ea, e_arcs = le[out], arcs[out]
    up = e_arcs % 2 == 0
    E = len(g.edge_src)
    bu = np.bincount(ea[up], weights=mine_b[e_arcs[up]], minlength=E)
    bd = np.bincount(ea[~up], weights=mine_b[e_arcs[~up]], minlength=E)
    fl = np.bincount(ea, weights=mine_f[e_arcs], minlength=E)
    used = np.bincount(ea, minlength=E)
    umax = np.zeros(E)
    np.maximum.at(umax, ea, util[e_arcs])
    has_b = np.zeros(E, dtype=bool)
    if b >= 0 and g.link_edge[b // 2] >= 0:
        has_b[g.link_edge[b // 2]] = True
    inside = ~out
    gin = g.gid[f.links.a[links[inside]]]
    b_in = np.bincount(gin, weights=mine_b[arcs[inside]], minlength=g.n)
    es = np.flatnonzero(used > 0)
    touched = np.unique(np.r_[g.edge_src[es], g.edge_dst[es], np.flatnonzero(b_in > 0)])
    kinds = [k.label for k in LinkKind]
    nodes = [{"id": g.ids[i], "label": g.labels[i], "name": g.labels[i],
              "kind": str(_KIND_NAME[int(g.kind[i])]), "count": int(g.count[i]),
              "x": float(g.x[i]), "y": float(g.y[i]), "group": True,
              "bytes_inside": float(b_in[i])} for i in touched.tolist()]
    edges = []
    for e in es.tolist():  # group edges used (a few hundred at most)
        s_, t_ = int(g.edge_src[e]), int(g.edge_dst[e])
        edges.append({"id": f"e:{g.ids[s_]}|{g.ids[t_]}", "source": g.ids[s_],
                      "target": g.ids[t_], "tier": kinds[int(g.edge_kind[e])],
                      "links": int(g.edge_links[e]), "arcs_used": int(used[e]),
                      "bytes": float(bu[e] + bd[e]), "bytes_up": float(bu[e]),
                      "bytes_down": float(bd[e]), "flows_here": int(fl[e]),
                      "value": float(umax[e]), "utilization": float(umax[e]),
                      "bottleneck": bool(has_b[e])})
    edge_of_link = {int(lk): f"e:{g.ids[int(g.edge_src[e])]}|{g.ids[int(g.edge_dst[e])]}"
                    for lk, e in zip(links[out].tolist(), ea.tolist(), strict=True)} \
        if len(links) <= 200_000 else {}
    return {"nodes": nodes, "edges": edges, "level": g.level,
            "bytes_inside": float(b_in.sum()), "edge_of_link": edge_of_link}
