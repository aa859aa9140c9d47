"""The twin's topology and load views: what it is (:meth:`Views.info`), the aggregated
graph and one segment coloured by a metric, the per-tier heatmap, search."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import LinkKind, NodeKind
from aifabric.web.twin.core import TwinCore, arc_tiers

if TYPE_CHECKING:
    from aifabric.web.loads import LoadSeries

__all__ = ["HOT_SCOPES", "Views"]


class Views(TwinCore):
    """info, topology, segment, heatmap, search."""

    def info_is_quick(self) -> bool:
        """:meth:`info` would only read what is made already (the server may then answer
        it on its event loop, without a hop through the thread pool)."""
        return () in self._loads and (self.fabric is None
                                      or "info_fabric" in self._base_cache)

    def info(self) -> dict[str, Any]:
        """What this twin is and what the page can show."""
        f = self.fabric
        fab = None
        if f is not None:
            # counted once: under load each numpy call here hands the GIL to the
            # what-ifs' threads and waits to get it back
            fab = dict(self._base_extra("info_fabric", lambda: _fabric_figures(f)))
        routed = f is not None and self._flows is not None
        views = ["topology"] if f is not None else []
        if routed or self.tables:
            views.append("heatmap")
        if routed:
            views += ["trace", "whatif"] if self._reroute else ["trace"]
        if self.run_dir is not None:
            views.append("run")
        if self.mode == "lab":
            views.append("lab")
        metrics: list[str] = []
        times: list[float] = []
        try:
            series = self.load()
            metrics, times = list(series.metrics), [float(x) for x in series.times_ns]
        except (SpecError, ImportError):
            pass
        return {"mode": self.mode, "name": self.name, "source": self.source,
                "fabric": fab, "views": views, "metrics": metrics, "times_ns": times,
                "missing": list(self.missing), "traffic": self.traffic_note or None,
                "collectives": self._dag is not None and bool(len(self._dag.collectives)),
                "whatif": routed and self._reroute}

    def _metric(self, series: LoadSeries, metric: str | None) -> str:
        if metric is None or metric == "":
            return series.metrics[0]
        if metric not in series.metrics:
            raise SpecError(Problem("metric", f"unknown metric {metric!r}; allowed: "
                                    f"{', '.join(series.metrics)}"))
        return metric

    def _values(self, metric: str | None, t: int | None, fail: tuple[str, ...]
                ) -> tuple[LoadSeries, str, np.ndarray, int | None]:
        if self._flows is None and not self.tables:
            raise SpecError(Problem("metric", "no loads here (nothing routed or measured); "
                                    "allowed: the topology without a metric"))
        series = self.load(fail)
        n = len(series.times_ns)
        if self._norm(fail) and series is not self.load(()):
            # a run's measured series has no what-if: the routing model's metric, one step
            if metric and metric not in series.metrics and metric in self.load(()).metrics:
                metric = None
            if t is not None and not -1 <= t < n:
                t = None
        m = self._metric(series, metric)
        if t is not None and t != -1 and not 0 <= t < n:
            raise SpecError(Problem("t", f"{t}; allowed: -1 (the whole run) or 0..{n - 1}"))
        tt = None if t is None or t == -1 else int(t)
        return series, m, series.arc_values(m, tt), tt

    def topology(self, *, metric: str | None = None, t: int | None = None,
                 level: str = "auto", fail: tuple[str, ...] = (),
                 stat: str = "max") -> dict[str, Any]:
        """The aggregated graph (:func:`aifabric.web.topology.overview`) coloured by
        ``metric`` at step ``t``, each group edge by the ``stat`` (max, p99, mean) of its
        links, with the failure set and the colour scale (:func:`colour_scale`)."""
        from aifabric.web.topology import overview

        f = self._need_fabric("topology")
        alive = self.alive(fail)
        vals, m, agg = self._colour(metric, t, fail)
        out = overview(f, vals, level=level, alive=alive, agg=agg, stat=stat)
        out.update({"metric": m, "failed": list(self._norm(fail)),
                    "links_down": int((~alive).sum()),
                    "scale": colour_scale(m, out["edges"])})
        return out

    def _colour(self, metric: str | None, t: int | None, fail: tuple[str, ...]
                ) -> tuple[np.ndarray | None, str | None, str]:
        """Per-arc values to colour a graph by (None where nothing is measured: the
        lab's topology)."""
        if self._flows is None and not self.tables and not metric:
            return None, None, "mean"
        series, m, vals, _ = self._values(metric, t, fail)
        return vals, m, series.agg.get(m, "mean")

    def segment(self, seg: int, *, metric: str | None = None, t: int | None = None,
                fail: tuple[str, ...] = (), stat: str = "max") -> dict[str, Any]:
        """One segment's ToRs, hosts and ports (:func:`aifabric.web.topology.segment_view`),
        the uplink groups coloured by ``stat``, with the colour scale."""
        from aifabric.web.topology import segment_view

        f = self._need_fabric("segment")
        alive = self.alive(fail)
        vals, m, agg = self._colour(metric, t, fail)
        out = segment_view(f, int(seg), vals, alive=alive, agg=agg, stat=stat)
        out.update({"metric": m, "failed": list(self._norm(fail)),
                    "scale": colour_scale(m, out["edges"])})
        return out

    def plane(self, pod: int | None, plane: int, *, metric: str | None = None, t: int | None = None,
              fail: tuple[str, ...] = (), stat: str = "max") -> dict[str, Any]:
        """One plane of a pod, every agg and core drawn (:func:`aifabric.web.levels.
        plane_view`), coloured by ``stat``, with the colour scale."""
        from aifabric.web.levels import plane_view

        f = self._need_fabric("plane")
        alive = self.alive(fail)
        vals, m, agg = self._colour(metric, t, fail)
        out = plane_view(f, pod, plane, vals, alive=alive, agg=agg, stat=stat)
        out.update({"metric": m, "failed": list(self._norm(fail)),
                    "scale": colour_scale(m, out["edges"])})
        return out

    def tor(self, name: str, *, metric: str | None = None, t: int | None = None,
            fail: tuple[str, ...] = ()) -> dict[str, Any]:
        """One ToR: every port with its load and the flows crossing it
        (:func:`aifabric.web.levels.tor_view`), with the colour scale."""
        from aifabric.web.levels import tor_view

        f = self._need_fabric("tor")
        alive = self.alive(fail)
        vals, m, _ = self._colour(metric, t, fail)
        routed = arc_flows = None
        if self._flows is not None:
            st = self._state(fail)
            routed, arc_flows = st.routed, st.arc_flows
        out = tor_view(f, name, vals, alive=alive, routed=routed, arc_flows=arc_flows,
                       flow_label=getattr(self, "_flow_labels", None))
        out.update({"metric": m, "failed": list(self._norm(fail)),
                    "scale": colour_scale(m, out["edges"])})
        return out

    def heatmap(self, *, metric: str | None = None, t: int | None = None,
                fail: tuple[str, ...] = (), k: int = 20, scope: str = "all") -> dict[str, Any]:
        """Per-tier statistics of ``metric`` at ``t``, the ``k`` hottest arcs, the tier
        series over time. A tier's ``mean`` is over all its (alive) arcs; ``active``
        counts those with a value > 0 and ``mean_active`` is the mean over them — the
        figure report.md gives ("links that carried traffic")."""
        if not 1 <= int(k) <= 1000:
            raise SpecError(Problem("k", f"{k}; allowed: 1..1000"))
        if scope not in HOT_SCOPES:
            raise SpecError(Problem("scope", f"{scope!r}; allowed: " + ", ".join(HOT_SCOPES)))
        series, m, vals, tt = self._values(metric, t, fail)
        f = self.fabric
        tiers = []
        alive = self.alive(fail) if f is not None else None
        if f is not None:
            names = arc_tiers(f)
            ok = np.repeat(alive, 2)
            kinds = f.links.kind.astype(np.int64)
            for kd in np.unique(kinds):  # a handful of tiers
                for d, dname in ((0, "up"), (1, "down")):
                    sel = np.zeros(2 * f.n_links, dtype=bool)
                    sel[2 * np.flatnonzero(kinds == kd) + d] = True
                    sel &= ok
                    if not sel.any():
                        continue
                    v = vals[sel]
                    act = v[v > 0]  # the arcs that carried traffic (report.md's "links")
                    tiers.append({"tier": str(names[np.flatnonzero(sel)[0]]),
                                  "kind": LinkKind(int(kd)).label, "direction": dname,
                                  "arcs": int(sel.sum()), "mean": float(v.mean()),
                                  "active": len(act),
                                  "mean_active": float(act.mean()) if len(act) else 0.0,
                                  "p99": float(np.percentile(v, 99)),
                                  "max": float(v.max())})
        only = None
        if scope == "fabric" and f is not None:  # the scale-out links: NIC port and up
            only = np.repeat(f.links.kind >= LinkKind.ACCESS, 2)
        hot = series.hottest(f, m, tt, k=int(k), alive=alive, only=only)
        if f is not None and self._flows is not None and hot:
            self._add_drivers(hot, fail)
        return {"metric": m, "t": -1 if tt is None else tt, "scope": scope,
                "times_ns": [float(x) for x in series.times_ns], "tiers": tiers,
                "hottest": hot, "series": series.tier_series(f, m)}

    def _add_drivers(self, hot: list[dict[str, Any]], fail: tuple[str, ...]) -> None:
        """Put on each hottest row what drives it: the collective (traffic pattern) with
        the most bytes on that arc in the routing model (``driver``, its ``job``, its
        ``driver_share`` of the arc's bytes, ``drivers``: how many share it), and the
        view that draws that link one by one (``view``: a ToR's or a plane's)."""
        st = self._state(fail)
        r = st.routed
        f = r.fabric
        arcs = np.array([h["arc"] for h in hot], dtype=np.int64)
        by, names, jobs = self._arc_collective_bytes(r, arcs)
        n, L = f.nodes, f.links
        for i, h in enumerate(hot):  # k rows (20 by default)
            row = by[i]
            tot = float(row.sum())
            if tot > 0:
                c = int(np.argmax(row))
                h.update(driver=names[c], job=jobs[c], driver_share=float(row[c] / tot),
                         drivers=int((row > 0).sum()))
            else:
                h.update(driver="", job="", driver_share=0.0, drivers=0)
            lk = int(h["link"])
            a, b = int(L.a[lk]), int(L.b[lk])
            if n.kind[b] == NodeKind.TOR or n.kind[a] == NodeKind.TOR:
                h["view"] = {"tor": str(n.name[b if n.kind[b] == NodeKind.TOR else a])}
            elif n.kind[a] == NodeKind.AGG:
                h["view"] = {"plane": {"pod": int(n.pod[a]), "plane": int(n.plane[a])}}
            else:
                h["view"] = None

    def _arc_collective_bytes(self, r: Any, arcs: np.ndarray
                              ) -> tuple[np.ndarray, list[str], list[str]]:
        """arcs x collectives (patterns): the bytes each puts on each arc of ``arcs`` in
        the routing ``r`` (a workload: each connection's transfers, split over its QPs as
        the simulators send them), the collectives' names and jobs."""
        import scipy.sparse as sp

        want = np.full(r.n_arcs, -1, dtype=np.int64)
        want[arcs] = np.arange(len(arcs))
        pos = want[r.arcs]
        on = np.flatnonzero((pos >= 0) & (r.fractions > 0))
        fl = np.repeat(np.arange(len(r.flows)), np.diff(r.ptr))[on]
        K = len(arcs)
        dag = self._dag
        if dag is not None and self._xconn is not None:
            conn = np.asarray(r.flows.conn, dtype=np.int64)
            xconn = self._xconn.astype(np.int64)
            n_conn = max(int(xconn.max()) + 1 if len(xconn) else 0,
                         int(conn.max()) + 1 if len(conn) else 0)
            nc = len(dag.collectives)
            xc = dag.stage_coll[dag.xfer_stage].astype(np.int64)
            ok = xc >= 0
            moved = (dag.size_bytes * dag.repeat[dag.xfer_stage]).astype(np.float64)
            cx = sp.csr_matrix((moved[ok], (xconn[ok], xc[ok])), shape=(n_conn, max(nc, 1)))
            nq = np.bincount(conn, minlength=n_conn).astype(np.float64)
            c_on = conn[fl]
            e = sp.csr_matrix((r.fractions[on] / np.maximum(nq[c_on], 1.0), (pos[on], c_on)),
                              shape=(K, n_conn))
            out = np.asarray((e @ cx).todense())
            names = [c.name for c in dag.collectives] or [""]
            jobs = [dag.jobs[c.job] if c.job >= 0 else "" for c in dag.collectives] or [""]
            return out, names, jobs
        if self._pattern_of_flow is not None and self._patterns:
            P = len(self._patterns)
            w = r.fractions[on] * r.flows.size_bytes[fl]
            out = np.bincount(pos[on] * P + self._pattern_of_flow[fl], weights=w,
                              minlength=K * P).reshape(K, P)
            return out, list(self._patterns), [""] * P
        return np.zeros((K, 1)), [""], [""]

    def search(self, q: str) -> list[dict[str, Any]]:
        """Nodes, ports and IPs matching ``q`` (:func:`aifabric.web.topology.search`)."""
        from aifabric.web.topology import search

        return search(self._need_fabric("q"), q)


#: which links the hottest list ranks: every link, or the scale-out fabric's (access,
#: leaf-spine, spine-core: not NVLink or PCIe inside a host)
HOT_SCOPES = ("all", "fabric")
#: the unit of each metric's per-link figure (the legend prints it)
METRIC_UNIT = {"utilization": "fraction of capacity", "peak_utilization":
               "fraction of capacity", "bytes": "bytes", "queue_bytes": "bytes",
               "flows": "flows", "ecn_marks": "ECN marks", "pfc_pauses": "PFC pauses",
               "drops": "packets"}


def colour_scale(metric: str | None, edges: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The colour scale of a graph: ``lo`` (0) is the bottom colour, ``hi`` the top one,
    the largest ``per_link`` drawn, so the hottest group (the hottest link, coloured by
    max) is always the top colour; ``min`` and ``max`` of what is drawn and the
    metric's ``unit``. None without a metric."""
    if metric is None:
        return None
    v = np.array([e["per_link"] for e in edges if e.get("per_link") is not None],
                 dtype=np.float64)
    v = v[np.isfinite(v)]
    top = float(v.max()) if len(v) else 0.0
    return {"lo": 0.0, "hi": top, "min": float(v.min()) if len(v) else 0.0, "max": top,
            "unit": METRIC_UNIT.get(metric, metric)}


def _fabric_figures(f: Any) -> dict[str, Any]:
    """The fabric's size as /api/info gives it."""
    n = f.nodes
    return {"name": f.name, "family": f.family,
            "gpus": int((n.kind == NodeKind.GPU).sum()),
            "hosts": int((n.kind == NodeKind.HOST).sum()),
            "switches": int(f.is_switch.sum()), "links": int(f.n_links),
            "segments": len(np.unique(n.segment[f.is_switch & (n.segment >= 0)])),
            "pods": len(np.unique(n.pod[f.is_switch & (n.pod >= 0)])),
            "planes": len(np.unique(n.plane[f.is_switch & (n.plane >= 0)]))}
