"""The state of a :class:`~aifabric.web.twin.Twin`: its fabric, the flows routed, and
one :class:`RoutedState` per failure set (LRU of :data:`CACHE`) with its per-arc loads.

*Utilization* of an arc, where no simulator measured it: its bytes' drain time at its
capacity over the longest drain time of any arc (the time the busiest link needs to
carry its bytes bounds the whole transfer from below; 1 = that link). A simulated run
without extra failures uses the run's measured mean utilization (``links`` table).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.topology.fabric import Fabric, LinkKind

if TYPE_CHECKING:  # imported when used (the server starts fast)
    import scipy.sparse as sp

    from aifabric.routing.route import Routed
    from aifabric.routing.scenario import Scenario
    from aifabric.web.loads import LoadSeries

__all__ = ["CACHE", "MAX_FAIL", "NO_SCENARIO", "UNITS", "RoutedState", "TwinCore", "arc_tiers",
           "parse_failures"]

#: the failure sets kept routed (besides the base)
CACHE = 8
#: most entries in one failure set (the API's limit too: aifabric.web.app uses it). A
#: whole plane, pod or segment is one entry (``plane:<n>``, ``pod:<n>``,
#: ``segment:<n>``); the bound leaves room to name every switch of a plane of the HPN
#: pod one by one (184: 120 ToRs, 60 aggs, 4 cores) and more, while one request stays
#: far under the body limit (1,024 names of at most 200 characters: 200 KB) and its
#: parsing under a second
MAX_FAIL = 1024
#: the whole-unit failure entries: every switch of the plane, pod or segment
UNITS = ("plane", "pod", "segment")
NO_SCENARIO = ("topology, tracing and what-if need the run's scenario: run.json or "
               "--scenario")


# --------------------------------------------------------------------- helpers
def parse_failures(f: Fabric, fail: tuple[str, ...] | list[str]) -> np.ndarray:
    """Bool per link: down by the failure set ``fail`` (see :mod:`aifabric.web.twin`).

    A switch name maps to scenario ``{switch: name}``, ``device:iface`` to ``{port:
    ...}`` (:func:`aifabric.routing.failover.failed_links`), ``link:<id>`` to one link,
    ``plane:<n>``, ``pod:<n>`` and ``segment:<n>`` to every link of every switch of that
    plane, pod or segment (a pod's ToRs and aggs; a segment's ToRs). Bad entries: one
    SpecError on field ``fail`` naming each.
    """
    from aifabric.routing.failover import failed_links

    fail = tuple(fail)
    if len(fail) > MAX_FAIL:
        raise SpecError(Problem("fail", f"{len(fail)} entries; allowed: at most {MAX_FAIL}"))
    down = np.zeros(f.n_links, dtype=bool)
    items: list[dict[str, str]] = []
    problems: list[Problem] = []
    for text in fail:
        if not isinstance(text, str) or not text.strip() or len(text) > 200:
            problems.append(Problem("fail", "an empty or over-long entry; allowed: a switch "
                                    "name, device:iface, link:<id>, plane:<n>, pod:<n> or "
                                    "segment:<n>"))
            continue
        text = text.strip()
        unit, _, num = text.partition(":")
        if unit in UNITS:
            col = getattr(f.nodes, unit)
            have = np.unique(col[f.is_switch & (col >= 0)])
            if not num.isdigit() or int(num) not in set(have.tolist()):
                shown = f"0..{int(have.max())}" if len(have) else "none in this fabric"
                problems.append(Problem("fail", f"{text[:80]!r}: allowed: {unit}:<n> with n "
                                        f"a {unit} of the fabric ({shown})"))
                continue
            sw = np.flatnonzero(f.is_switch & (col == int(num)))
            hit = np.zeros(f.n_nodes, dtype=bool)
            hit[sw] = True
            down |= hit[f.links.a] | hit[f.links.b]
            continue
        if text.startswith("link:"):
            lid = text[5:]
            if not lid.isdigit() or int(lid) >= f.n_links:
                problems.append(Problem("fail", f"{text!r}: allowed: link:<id> with id "
                                        f"0..{f.n_links - 1}"))
            else:
                down[int(lid)] = True
            continue
        items.append({"port": text} if ":" in text else {"switch": text})
    if items:
        try:
            down |= failed_links(f, items, path="fail")
        except SpecError as err:
            problems.extend(Problem("fail", p.message) for p in err.problems)
    if problems:
        raise SpecError(problems)
    return down


def arc_tiers(f: Fabric) -> np.ndarray:
    """``"leaf_spine up"`` ... per arc (the simulators' link-group names)."""
    labels = np.array([f"{k.label} {d}" for k in LinkKind for d in ("up", "down")],
                      dtype=object)
    return labels[np.repeat(f.links.kind.astype(np.int64) * 2, 2)
                  + np.tile(np.array([0, 1]), f.n_links)]


@dataclass
class RoutedState:
    """One failure set, routed."""

    fail: tuple[str, ...]
    down: np.ndarray  # bool per link (scenario failures included)
    routed: Routed
    arc_bytes: np.ndarray
    arc_flows: np.ndarray
    util: np.ndarray  # per arc, see the module docstring
    measured: bool  # util is the run's measured mean utilization
    whatif: dict[str, Any] | None = None  # Twin.whatif's answer, once asked


# ------------------------------------------------------------------------ core
class TwinCore:
    """What every part of the twin shares: the fabric, the routed flows, the routing of
    each failure set (cached), the loads. Safe to call from several threads: the caches
    are guarded by a short lock and each entry is made once, outside it
    (:meth:`_cached`); what is made is never changed after (``RoutedState.whatif`` is
    set once, to the same answer by whoever sets it)."""

    mode: str
    name: str
    fabric: Fabric | None
    run_dir: Path | None
    missing: list[str]

    def __init__(self) -> None:
        self.mode, self.name = "design", ""
        self.fabric, self.run_dir = None, None
        self.missing = []
        self.source = ""  # "spec" | "scenario" | "sim" | "run" | "lab"
        self.traffic_note = ""
        self.scenario: Scenario | None = None
        self.run_command: str | None = None
        self.tables: dict[str, dict[str, np.ndarray]] = {}
        self.lab_dir: Path | None = None
        self._flows: Any = None
        self._pinned: Any = None
        self._base_down: np.ndarray | None = None
        self._policy: Any = None
        self._reroute = True
        self._dag: Any = None
        self._xconn: np.ndarray | None = None
        self._pattern_of_flow: np.ndarray | None = None
        self._patterns: list[str] = []
        self._states: OrderedDict[tuple[str, ...], RoutedState] = OrderedDict()
        self._base: RoutedState | None = None
        self._loads: OrderedDict[tuple[str, ...], LoadSeries] = OrderedDict()
        self._collector: Any = None
        self._pinned_paths: Any = None
        self._base_cache: dict[str, Any] = {}
        self._has_scenario = False
        # the server answers from several threads: the lock guards the caches only (held
        # to look up and store, never while routing: see _cached)
        self._lock = threading.Lock()
        self._flights: dict[tuple[int, Any], threading.Event] = {}
        #: called with the failure set before it is routed (a test holds a what-if here)
        self.before_route: Any = None
        self._lab_lock = threading.Lock()  # the lab's collector and counters: one reader
        self._lab_prev: tuple[float, dict[tuple[str, str], tuple[float, float]]] | None = None
    # --------------------------------------------------------------- routing
    def _need_fabric(self, what: str) -> Fabric:
        if self.fabric is None:
            raise SpecError(Problem(what, f"not available: {NO_SCENARIO}"))
        return self.fabric

    def _need_routing(self, what: str) -> RoutedState:
        self._need_fabric(what)
        if self._flows is None:
            raise SpecError(Problem(what, "not available: nothing routed (the lab has no "
                                    "traffic model)"))
        return self._state(())

    def _norm(self, fail: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
        """The failure set as the user gave it: each name once, in their order (echoed
        back as ``failed`` / ``fail``)."""
        return tuple(dict.fromkeys(str(x).strip() for x in (fail or ())))

    def _key(self, fail: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
        """The failure set as a cache key: the same set in any order is one routing."""
        return tuple(sorted(self._norm(fail)))

    def _state(self, fail: tuple[str, ...]) -> RoutedState:
        """The routing with failure set ``fail`` on top of the scenario's (cached)."""
        return self._cached(self._states, self._key(fail), self._route_state)  # type: ignore[no-any-return]

    def _cached(self, cache: dict[Any, Any], key: Any, make: Any,
                limit: int | None = CACHE + 1) -> Any:
        """``cache[key]``, made by ``make(key)`` when missing: once, outside the lock.

        The lock is held only to look up and to store, so a call that needs something
        already made (``/api/info``, the base routing's views) never waits on one that
        is making something else (a what-if routing a new failure set). A second caller
        of the same missing key waits for the first one's result instead of making it
        again; if the first one failed, it tries itself (and fails the same way). An
        OrderedDict cache keeps the ``limit`` most recently used keys, the base (``()``)
        always.
        """
        flight_key = (id(cache), key)
        while True:
            with self._lock:
                if key in cache:
                    if isinstance(cache, OrderedDict):
                        cache.move_to_end(key)
                    return cache[key]
                done = self._flights.get(flight_key)
                if done is None:
                    done = self._flights[flight_key] = threading.Event()
                    break
            done.wait()
        try:
            value = make(key)
            with self._lock:
                cache[key] = value
                if isinstance(cache, OrderedDict) and limit is not None:
                    while len(cache) > limit:
                        old = next((k for k in cache if k), None)
                        if old is None:
                            break
                        del cache[old]
            return value
        finally:
            with self._lock:
                del self._flights[flight_key]
            done.set()

    def _route_state(self, key: tuple[str, ...]) -> RoutedState:
        from aifabric.routing.route import route

        f = self.fabric
        assert f is not None and self._base_down is not None
        down = self._base_down.copy()
        if key:
            if not self._reroute:
                raise SpecError(Problem("fail", "what-if is not available for a workload "
                                        "with pinned paths (they cannot move)"))
            down |= parse_failures(f, key)
            if self.before_route is not None:
                self.before_route(key)
        if not key and not self._reroute:
            routed = self._pinned_routed()
        else:
            seed = int(getattr(self.scenario, "seed", 0) or 0) if self._dag is not None else 0
            routed = route(f, self._flows, self._policy, failures=~down,
                           pinned=self._pinned, seed=seed)
        return self._make_state(key, down, routed)

    def _pinned_routed(self) -> Routed:
        """The simulators' own paths (pinned connections included) as a Routed."""
        from aifabric.routing.route import Routed
        from aifabric.sim.paths import route_dag

        f = self.fabric
        sc = self.scenario
        assert f is not None and sc is not None
        paths, _ = route_dag(f, self._dag, self._policy, failures=sc.failures or None,
                             seed=int(getattr(sc, "seed", 0) or 0),
                             pinned=self._pinned_paths)
        inc = paths.incidence.tocsr()
        n = len(self._flows)
        assert inc.shape[0] == n, (inc.shape, n)
        return Routed(f, self._policy, self._flows, inc.indptr.astype(np.int64),
                      inc.indices.astype(np.int64), inc.data.astype(np.float64),
                      np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), ~self._base_down)

    def _make_state(self, key: tuple[str, ...], down: np.ndarray, routed: Routed) -> RoutedState:
        f = routed.fabric
        by = routed.arc_bytes()
        nf = routed.arc_flows()
        cap = f.arcs[2]
        drain = np.divide(by * 8.0, cap, out=np.zeros_like(by), where=cap > 0)
        top = float(drain.max()) if len(drain) else 0.0
        util = drain / top if top > 0 else drain
        measured = False
        links = self.tables.get("links")
        if not key and self.run_command == "simulate" and links is not None \
                and "mean_util" in links:
            m = _measured_util(f, links)
            if m is not None:
                util, measured = m, True
        return RoutedState(key, down, routed, by, nf, util, measured)

    def load(self, fail: tuple[str, ...] = ()) -> LoadSeries:
        """Per-arc loads (cached per failure set): the run's own where no failure is
        added, else the routing model's."""
        return self._cached(self._loads, self._key(fail), self._make_load)  # type: ignore[no-any-return]

    def _make_load(self, key: tuple[str, ...]) -> LoadSeries:
        from aifabric.web import loads

        series = None
        routed = self.fabric is not None and self._flows is not None
        if not key and self.run_command == "simulate" and self.tables:
            ta = self.transfer_arcs() if routed and self._dag is not None else None
            try:
                series = loads.from_run(self.tables, self.fabric, transfer_arcs=ta)
            except (SpecError, KeyError, ValueError, IndexError) as exc:
                # a damaged or foreign table: say so, show what the routing model says
                why = exc.problems[0] if isinstance(exc, SpecError) else type(exc).__name__
                note = f"the run's tables give no loads ({why})"
                if note not in self.missing:
                    self.missing.append(note + ("; the routing model's are shown" if routed
                                                else ""))
                if not routed:
                    raise SpecError(Problem("metric", note)) from None
        if series is not None:
            pass
        elif routed:
            series = loads.from_routed(self._state(key).routed)
        elif self.tables:
            try:
                series = loads.from_run(self.tables, None)
            except (KeyError, ValueError, IndexError) as exc:
                raise SpecError(Problem("metric", f"the run's tables give no loads "
                                        f"({type(exc).__name__})")) from None
        else:
            raise SpecError(Problem("metric", "no loads: nothing routed or measured here"))
        return series

    def transfer_arcs(self) -> sp.csr_matrix | None:
        """transfers x arcs: the fraction of each transfer's bytes on each arc (its
        connection's QPs share it evenly, as the simulators send it); None without a
        workload."""
        import scipy.sparse as sp

        if self._dag is None or self._xconn is None:
            return None
        st = self._state(())
        inc = st.routed.incidence
        conn = np.asarray(self._flows.conn, dtype=np.int64)
        n_conn = int(self._xconn.max()) + 1 if len(self._xconn) else 0
        nq = np.bincount(conn, minlength=n_conn).astype(np.float64)
        qf = sp.csr_matrix((1.0 / nq[conn], (conn, np.arange(len(conn)))),
                           shape=(n_conn, len(conn)))
        nx = len(self._xconn)
        x = sp.csr_matrix((np.ones(nx), (np.arange(nx), self._xconn)), shape=(nx, n_conn))
        return sp.csr_matrix(x @ qf @ inc)

    def alive(self, fail: tuple[str, ...] = ()) -> np.ndarray:
        """Bool per link: up with the scenario's failures and ``fail``."""
        f = self._need_fabric("fail")
        if self._flows is None:
            down = self._base_down if self._base_down is not None \
                else np.zeros(f.n_links, dtype=bool)
            key = self._norm(fail)
            return ~(down | parse_failures(f, key)) if key else ~down
        return ~self._state(fail).down

    def _base_extra(self, name: str, make: Any) -> Any:
        """A figure of the base routing, computed once."""
        return self._cached(self._base_cache, name, lambda _: make(), limit=None)


def _measured_util(f: Fabric, links: dict[str, np.ndarray]) -> np.ndarray | None:
    """Per arc: a simulated run's mean utilization (``links`` table; 0 where absent)."""
    try:
        lid = np.asarray(links["link"], dtype=np.int64)
        d = np.asarray(links["direction"]).astype(str)
        mu = np.asarray(links["mean_util"], dtype=np.float64)
    except (KeyError, ValueError):
        return None
    if len(lid) and (lid.max() >= f.n_links or lid.min() < 0):
        return None
    out = np.zeros(2 * f.n_links)
    out[2 * lid + (d == "down")] = np.nan_to_num(mu)
    return out

