"""Goodput of one job: the fabric, the routing model's answers, the Monte Carlo, the report.

:func:`run_goodput` is the pure core behind ``aifabric goodput``: no printing, no files.
It places the scenario's jobs as ``simulate`` does (:func:`aifabric.sim.run.compile_workload`),
asks the routing model once per group of components what a failure does to the job
(:mod:`aifabric.reliability.impact`), turns the per-instance failure rates into the rates of
interrupting and degrading failures, and runs the vectorised Monte Carlo
(:mod:`aifabric.reliability.montecarlo`) for the configured checkpoint intervals and a sweep
of one level's interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.reliability.checkpoint import ResolvedLevel, nest, resolve_levels
from aifabric.reliability.impact import ImpactTable, component_groups, failure_entry, job_impact
from aifabric.reliability.montecarlo import (
    BadHosts,
    Degrade,
    EngineResult,
    Kind,
    Levels,
    run_engine,
)
from aifabric.reliability.rates import CLASSES, DEFAULTS, HOST_CLASSES, MONTH_S
from aifabric.reliability.spec import JOB_CLASS, GoodputScenario, horizon_problem
from aifabric.topology.fabric import Fabric, LinkKind

__all__ = ["ClassRow", "GoodputResult", "optimum", "run_goodput"]

#: the most sweep points x trials one run holds (memory: ~20 arrays of this size)
MAX_CELLS = 4_000_000
DAY = 86400.0


@dataclass
class ClassRow:
    """One failure class: its rate and what the routing model said about its parts."""

    cls: str
    rate_per_month: float  # per instance
    repair_s: float
    source: str
    instances: int
    interrupting: int
    degrading: int
    slowdown: float  # worst slowdown of a degrading group (1: none)
    interrupts_per_day: float  # expected, from the rates
    degrades_per_day: float
    shape: float = 1.0  # Weibull shape of the class's failure times


@dataclass
class GoodputResult:
    scenario: str
    summary: dict[str, Any]
    classes: list[ClassRow]
    engine: EngineResult
    sweep_intervals: np.ndarray  # (S - 1,) swept level's interval of each sweep point
    tables: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)  # seconds per phase (not in JSON)


#: the source of a class that ``rates: none`` leaves out
NONE_SOURCE = "rates: none (not in goodput.failures: never fails)"


def _rates(sc: GoodputScenario) -> dict[str, tuple[float, float, str, float]]:
    """Per class: failures per instance per second, repair seconds, source, Weibull
    shape. A class not in ``goodput.failures`` takes its published default under
    ``rates: defaults`` (or unset) and never fails under ``rates: none``; the ``job``
    class (per job, not per part) is there only when given."""
    out = {}
    gp = sc.goodput
    for c in (*CLASSES, JOB_CLASS):
        given = gp.failures.get(c)
        if c == JOB_CLASS:
            if given is None:
                continue
            rate, repair, src = 0.0, 0.0, "scenario"
        elif given is None and gp.rates == "none":
            rate, repair, src = 0.0, DEFAULTS[c].repair_s, NONE_SOURCE
        else:
            d = DEFAULTS[c]
            rate, repair, src = d.rate_per_month / MONTH_S, d.repair_s, d.source
        shape = 1.0
        if given is not None:
            if given.rate_per_month is not None:
                rate, src = given.rate_per_month / MONTH_S, "scenario"
            elif given.mtbf is not None:
                rate, src = 1.0 / given.mtbf, "scenario"
            if given.repair is not None:
                repair = float(given.repair)
            shape = float(given.shape)
        out[c] = (rate, repair, src, shape)
    return out


def rates_choice(sc: GoodputScenario) -> dict[str, Any]:
    """What the report says about the classes the scenario left out: the choice
    (``defaults`` or ``none``), whether the scenario made it, and the classes it
    covers."""
    gp = sc.goodput
    left = [c for c in CLASSES if c not in gp.failures]
    return {"choice": gp.rates or "defaults", "set_in_scenario": gp.rates is not None,
            "classes_not_given": left}


def optimum(intervals: np.ndarray, ettr: np.ndarray, window: int = 4) -> float:
    """The interval of the highest mean ETTR, refined by a least-squares parabola in
    log(interval) through the best point and up to ``window`` points each side."""
    i = int(np.argmax(ettr))
    lo, hi = max(0, i - window), min(len(ettr), i + window + 1)
    x, y = np.log(intervals[lo:hi]), ettr[lo:hi]
    if hi - lo >= 3 and 0 < i < len(ettr) - 1:
        a, b, _ = np.polyfit(x, y, 2)
        if a < 0:
            v = -b / (2 * a)
            if x[0] <= v <= x[-1]:
                return float(np.exp(v))
    return float(intervals[i])


def _job(sc: GoodputScenario) -> int:
    names = [j.name or f"job{i}" for i, j in enumerate(sc.jobs)]
    if not names:
        raise SpecError(Problem("jobs", "goodput needs a job; allowed: a jobs: entry"))
    want = sc.goodput.job
    if want is None:
        return 0
    if want not in names:
        raise SpecError(Problem("goodput.job", f"no job {want!r}; allowed: "
                                f"{', '.join(names)}"))
    return names.index(want)


def _iteration_s(sc: GoodputScenario, fabric: Fabric, ji: int, gpus: np.ndarray,
                 failures: list[Any]) -> float:
    """The flow model's iteration time (s) of job ``ji`` on its GPUs, with ``failures``."""
    from aifabric.sim.run import simulate
    from aifabric.sim.scenario import SimScenario

    js = sc.jobs[ji].model_copy(update={"gpus": [str(x) for x in fabric.nodes.name[gpus]]})
    fields = {k: getattr(sc, k) for k in SimScenario.model_fields}
    fields.update(jobs=[js], collectives=[], traffic=[], failures=failures, sim="flow")
    if "workload" in fields:  # only this job: no imported (Chakra) workload beside it
        fields["workload"] = None
    scn = SimScenario.model_construct(**fields)
    scn._file, scn._base_dir, scn._spec_file = sc._file, sc._base_dir, sc._spec_file
    res = simulate(scn, fabric, name="goodput")
    return float(res.summary["jobs"][0]["iteration_ns"]) / 1e9


def _pools(sc: GoodputScenario, fabric: Fabric, job_hosts: np.ndarray) -> tuple[int, np.ndarray]:
    rec = sc.goodput.recovery
    seg = fabric.nodes.segment[fabric.host_node[job_hosts]]
    per_seg = int(sc.spec.hosts.backup_per_segment)
    if rec.spare_scope == "cluster":
        n_seg = len(np.unique(fabric.nodes.segment[fabric.host_node]))
        spares = per_seg * n_seg if rec.backup_hosts == "fabric" else int(rec.backup_hosts)
        return spares, np.ones(1)
    spares = per_seg if rec.backup_hosts == "fabric" else int(rec.backup_hosts)
    _, cnt = np.unique(seg, return_counts=True)
    return spares, cnt.astype(np.float64)


def _place(sc: GoodputScenario, fabric: Fabric) -> tuple[int, np.ndarray, np.ndarray]:
    """The job's index, GPUs and hosts, placed as ``simulate`` places them."""
    from aifabric.sim.run import compile_workload

    if sc.failures:
        raise SpecError(Problem("failures", "goodput draws its own failures; allowed: no "
                                "failures: entries (use goodput.failures for rates)"))
    ji = _job(sc)
    placed = sc.model_copy(update={"collectives": [], "traffic": []})
    placed._file, placed._base_dir, placed._spec_file = sc._file, sc._base_dir, sc._spec_file
    wl = compile_workload(placed, fabric)
    gpus = wl.job_gpus[ji]
    return ji, gpus, np.unique(fabric.nodes.host[gpus])


def _slowdowns(sc: GoodputScenario, fabric: Fabric, ji: int, gpus: np.ndarray,
               job_hosts: np.ndarray, table: ImpactTable,
               rates: dict[str, tuple[float, float, str]]) -> tuple[float | None, int]:
    """Set the slowdown of every degrading group with the flow model (once per distinct
    effect on the job's hosts); the job's undisturbed iteration time (s, None if not
    needed) and the flow simulations run for the slowdowns."""
    gp = sc.goodput
    base_it: float | None = None
    need_step = gp.step_time is None and any(lv.every_steps is not None
                                             for lv in gp.checkpoint.levels)
    degr = [g for g in table.groups if g.degrades and rates[g.cls][0] > 0]
    if need_step or (gp.slowdown == "flow" and degr):
        base_it = _iteration_s(sc, fabric, ji, gpus, [])
    sims = 0
    cache: dict[tuple[int, int], float] = {}  # slowdown per effect on the job's hosts
    for g in degr:
        if gp.slowdown == "flow" and base_it:
            key = _effect(fabric, job_hosts, g.rep_links)
            if key not in cache:
                it = _iteration_s(sc, fabric, ji, gpus, [failure_entry(fabric, g)])
                sims += 1
                cache[key] = max(1.0, it / base_it)
            g.slowdown = cache[key]
    return base_it, sims


def _failure_kinds(rates: dict[str, tuple[float, float, str, float]], table: ImpactTable,
                   n_gpu: int, n_host: int
                   ) -> tuple[list[Kind], list[Degrade], list[ClassRow]]:
    """Per class: the interrupting failures (a :class:`Kind`), the degrading ones (a
    :class:`Degrade` per group) and the row of the classes table. The ``job`` class is
    one instance that always interrupts: its rate adds to the per-part ones."""
    kinds: list[Kind] = []
    degrades: list[Degrade] = []
    rows: list[ClassRow] = []
    for c in rates:
        rate, repair, src, shape = rates[c]
        if c in ("gpu", "software"):
            inst, intr, deg, slow = n_gpu, n_gpu, 0, 1.0
        elif c == "host":
            inst, intr, deg, slow = n_host, n_host, 0, 1.0
        elif c == JOB_CLASS:
            inst, intr, deg, slow = 1, 1, 0, 1.0
        else:
            gs = table.of(c)
            inst = sum(g.count for g in gs)
            intr = sum(g.count for g in gs if g.interrupts)
            deg = sum(g.count for g in gs if g.degrades)
            slow = max([g.slowdown for g in gs if g.degrades], default=1.0)
            for g in gs:
                if g.degrades and rate > 0:
                    degrades.append(Degrade(c, rate * g.count, g.slowdown, repair, shape))
        if intr and rate > 0:
            kinds.append(Kind(c, rate * intr, needs_host=c in HOST_CLASSES,
                              wait_s=0.0 if c in HOST_CLASSES else repair,
                              repair_s=repair, shape=shape))
        rows.append(ClassRow(c, rate * MONTH_S, repair, src, inst, intr, deg, slow,
                             rate * intr * DAY, rate * deg * DAY, shape))
    return kinds, degrades, rows


def _bad_hosts(sc: GoodputScenario, n_host: int, T: int, seed: int,
               rates: dict[str, tuple[float, float, str, float]]
               ) -> tuple[BadHosts | None, list[Kind]]:
    """The bad hosts of every trial (a binomial draw from ``fraction`` among the job's
    hosts, on a random stream of its own, or ``count``) and their two kinds: a failure
    the host comes back from, and the one that removes it."""
    bh = sc.goodput.bad_hosts
    if bh is None:
        return None, []
    if bh.count is not None:
        count = np.full(T, min(int(bh.count), n_host), dtype=np.int64)
    else:
        rng = np.random.default_rng([seed, 0xBAD])  # apart from the failures' stream
        count = rng.binomial(n_host, float(bh.fraction), T).astype(np.int64)
    rate = bh.rate_per_month / MONTH_S
    after = 0 if bh.removed_after == "never" else int(bh.removed_after)
    kinds = [Kind("bad_host", rate * float(count.mean()), needs_host=False,
                  wait_s=float(bh.repair), loses_memory=True, bad=1),
             Kind("bad_host_removed", 0.0, needs_host=True, repair_s=rates["host"][1], bad=2)]
    return BadHosts(count, rate, after), kinds


@dataclass
class _Runs:
    """The Monte Carlo runs: the configured levels and the sweep of one level."""

    levels: list[ResolvedLevel]
    step: float | None
    spares: int
    pool_w: np.ndarray
    eng: EngineResult
    eng_sw: EngineResult | None
    sw_level: int
    sw_int: np.ndarray  # (points,) the swept level's interval of each sweep point
    storage: dict[str, Any] | None = None  # storage_from: frontend: the simulated runs


def _run_engines(sc: GoodputScenario, fabric: Fabric, job_hosts: np.ndarray,
                 kinds: list[Kind], degrades: list[Degrade], base_it: float | None,
                 params: float, T: int, seed: int, H: float,
                 bad: BadHosts | None = None) -> _Runs:
    """Resolve the checkpoint levels and the sweep, and run the engine on both."""
    gp = sc.goodput
    hs_cap = _host_nic_gbytes(fabric, job_hosts)
    step = float(gp.step_time) if gp.step_time is not None else base_it
    storage = _frontend_storage(sc, fabric, len(job_hosts), params)
    levels = resolve_levels(gp.checkpoint, params=params,
                            hosts=len(job_hosts), nic_gbytes_per_s=hs_cap, step_s=step,
                            storage_write_gbytes_per_s=storage and storage["write"][
                                "gbytes_per_s"],
                            storage_read_gbytes_per_s=storage and storage["read"][
                                "gbytes_per_s"])
    base, mult = nest(levels)
    why = horizon_problem(gp, H, base)  # a level in steps: known once the step time is
    if why:
        raise SpecError(Problem("goodput.horizon", why))
    sw_level, sweep = _sweep(sc, levels, base, mult, kinds)
    T_sw = min(T, sc.goodput.sweep.trials) if sweep and sc.goodput.sweep else 0
    if max(T, len(sweep) * T_sw) > MAX_CELLS:
        raise SpecError(Problem("goodput.trials", f"{T:,} trials, {len(sweep)} sweep points "
                                f"x {T_sw:,} trials: over {MAX_CELLS:,} runs at once; "
                                "allowed: fewer trials or sweep points"))
    spares, pool_w = _pools(sc, fabric, job_hosts)
    rec = gp.recovery

    def engine(bases: list[float], mults: list[np.ndarray], trials_: int) -> EngineResult:
        lv = Levels([x.name for x in levels], np.array(bases), np.array(mults),
                    [x.save_s for x in levels], [x.upload_s for x in levels],
                    [x.restore_s for x in levels], [x.host_memory for x in levels])
        return run_engine(kinds, degrades, lv, detect=rec.detect, restart=rec.restart,
                          swap=rec.swap, spares=spares, pool_weights=pool_w, horizon=H,
                          trials=trials_, seed=seed, queue=float(rec.scheduler_wait),
                          bad=None if bad is None else BadHosts(
                              bad.count[:trials_], bad.rate, bad.removed_after))

    eng = engine([base], [mult], T)
    eng_sw = engine([b for b, _ in sweep], [m for _, m in sweep], T_sw) if sweep else None
    sw_int = np.array([b * m[sw_level] for b, m in sweep]) if sweep else np.zeros(0)
    return _Runs(levels, step, spares, pool_w, eng, eng_sw, sw_level, sw_int, storage)


def _check_frontend(sc: GoodputScenario, fabric: Fabric) -> None:
    """``storage_from: frontend`` needs a frontend with storage nodes."""
    if sc.goodput.checkpoint.storage_from != "frontend":
        return
    fe = fabric.spec.frontend
    if fe is None:
        raise SpecError(Problem("goodput.checkpoint.storage_from", "the spec has no "
                                "frontend network; allowed: given, or a spec with a "
                                "frontend section with storage nodes"))
    if fe.storage.nodes == 0:
        raise SpecError(Problem("frontend.storage.nodes", "checkpoints are derived from "
                                "the frontend, which has no storage nodes; allowed: at "
                                "least 1"))


def _frontend_storage(sc: GoodputScenario, fabric: Fabric, hosts: int,
                      params: float) -> dict[str, Any] | None:
    """``storage_from: frontend``: the job's hosts writing and reading the whole
    checkpoint on the frontend network's storage nodes, simulated (None otherwise)."""
    ck = sc.goodput.checkpoint
    if ck.storage_from != "frontend":
        return None
    from aifabric.sim.storage import simulate_storage

    total = params * ck.bytes_per_param
    where = "frontend" if fabric.spec.frontend is not None else \
        "goodput.checkpoint.storage_from"
    out = {d: simulate_storage(fabric.spec, hosts, total, d, where=where).as_dict()
           for d in ("write", "read")}
    return out


def run_goodput(sc: GoodputScenario, fabric: Fabric, *, trials: int | None = None,
                seed: int | None = None, horizon: float | None = None) -> GoodputResult:
    """Goodput of the scenario's job on ``fabric`` (SpecError on bad input)."""
    import time

    clock = time.perf_counter()
    gp = sc.goodput
    T = int(trials if trials is not None else gp.trials)
    seed_ = int(seed if seed is not None else gp.seed)
    H = float(horizon if horizon is not None else gp.horizon)
    ji, gpus, job_hosts = _place(sc, fabric)
    job = sc.jobs[ji]
    want = _cluster_jobs(sc)  # a bad name: one line before any model runs
    _check_frontend(sc, fabric)  # before the routing and flow models run
    t_place = time.perf_counter()
    rates = _rates(sc)

    # the routing model, once per group of network components
    groups = component_groups(fabric, job_hosts)
    table: ImpactTable = job_impact(fabric, gpus, sc.policy, groups)
    t_route = time.perf_counter()
    base_it, sims = _slowdowns(sc, fabric, ji, gpus, job_hosts, table, rates)
    t_flow = time.perf_counter()

    # interrupting and degrading failures per class, then the Monte Carlo
    kinds, degrades, rows = _failure_kinds(rates, table, len(gpus), len(job_hosts))
    total_rate = sum(k.rate for k in kinds)  # the bad hosts apart: see summary["bad_hosts"]
    bad, bad_kinds = _bad_hosts(sc, len(job_hosts), T, seed_, rates)
    kinds += bad_kinds
    r = _run_engines(sc, fabric, job_hosts, kinds, degrades, base_it, job.model.params, T,
                     seed_, H, bad)
    t_mc = time.perf_counter()
    summary = _summary(sc, fabric, job, gpus, job_hosts, rows, r.levels, r.eng, r.eng_sw,
                       H, T, seed_, r.spares, r.pool_w, kinds, r.sw_level, r.sw_int,
                       total_rate, table, sims, base_it, r.step)
    if r.storage is not None:  # only with storage_from: frontend
        summary["checkpoint_storage"] = r.storage
    timing = {"place": round(t_place - clock, 3),
              "routing": round(t_route - t_place, 3),
              "flow_model": round(t_flow - t_route, 3),
              "monte_carlo": round(t_mc - t_flow, 3)}
    _extras(summary, sc, rows, kinds, r.eng, bad, H)
    res = GoodputResult(sc.name, summary, rows, r.eng, r.sw_int, timing=timing)
    if want:
        summary["cluster"] = _cluster(sc, fabric, summary, want, T, seed_, H)
    res.tables = _tables(res, r.levels, r.sw_level)
    return res


def _cluster_jobs(sc: GoodputScenario) -> list[str]:
    """The jobs of ``goodput.jobs`` (none when unset)."""
    gp = sc.goodput
    if gp.jobs is None:
        return []
    names = [j.name or f"job{i}" for i, j in enumerate(sc.jobs)]
    want = names if gp.jobs == "all" else list(gp.jobs)
    for n in want:
        if n not in names:
            raise SpecError(Problem("goodput.jobs", f"no job {n!r}; allowed: 'all' or "
                                    f"names of {', '.join(names)}"))
    return want


def _cluster(sc: GoodputScenario, fabric: Fabric, main: dict[str, Any], want: list[str],
             T: int, seed: int, H: float) -> dict[str, Any]:
    """Every job of ``want`` run as the main one is (its own placement, routing answers,
    failures; no sweep), each on its own random stream (seed + its index), and the
    cluster's ETTR: the jobs' mean ETTR weighted by their GPUs (the share of the cluster's
    GPU time that trains), beside the unweighted mean of the jobs. Jobs are independent:
    a switch shared by two jobs fails for each on its own draw, and they do not compete
    for backup hosts (the mean is exact regardless; the spread is not modelled)."""
    names = [j.name or f"job{i}" for i, j in enumerate(sc.jobs)]
    rows = []
    for n in want:
        i = names.index(n)
        if n == main["job"]["name"]:
            s, sd = main, seed
        else:
            sd = (seed + i) % (1 << 63)
            gp = sc.goodput.model_copy(update={"job": n, "jobs": None, "sweep": None})
            sub = sc.model_copy(update={"goodput": gp})
            sub._file, sub._base_dir, sub._spec_file = sc._file, sc._base_dir, sc._spec_file
            s = run_goodput(sub, fabric, trials=T, seed=sd, horizon=H).summary
        it = s["interruptions"]
        rows.append({"job": n, "gpus": s["job"]["gpus"], "hosts": s["job"]["hosts"],
                     "seed": sd, "ettr_mean": s["ettr"]["mean"], "ettr_p5": s["ettr"]["p5"],
                     "ettr_p95": s["ettr"]["p95"],
                     "interruptions_per_day": it["per_day_mean"],
                     "expected_per_day": it["expected_per_day"],
                     "mtbf_hours": it["mtbf_hours"]})
    g = np.array([r["gpus"] for r in rows], dtype=np.float64)
    e = np.array([r["ettr_mean"] for r in rows])
    return {"jobs": rows, "gpus": int(g.sum()),
            "ettr_weighted_by_gpus": float((g * e).sum() / g.sum()),
            "ettr_mean_of_jobs": float(e.mean()),
            "gpu_hours_lost_per_day": float((g * (1.0 - e)).sum() * 24.0)}


def _extras(summary: dict[str, Any], sc: GoodputScenario, rows: list[ClassRow],
            kinds: list[Kind], eng: EngineResult, bad: BadHosts | None, H: float) -> None:
    """What the failure model adds to the summary: the rates choice always; the Weibull
    shapes, the scheduler's wait and the bad hosts when the scenario uses them."""
    gp = sc.goodput
    summary["rates"] = rates_choice(sc)
    if any(r.shape != 1.0 for r in rows):
        for c, r in zip(summary["classes"], rows, strict=True):
            c["shape"] = r.shape
    q = float(gp.recovery.scheduler_wait)
    if q > 0 and eng.queue is not None:
        summary["time_lost_hours"]["scheduler"] = float(np.mean(eng.queue[0]) / 3600.0)
        summary["time_lost_fraction"]["scheduler"] = float(np.mean(eng.queue[0]) / H)
        summary["scheduler_wait_s"] = q
    if bad is not None:
        bh = gp.bad_hosts
        i_bad = next(i for i, k in enumerate(kinds) if k.bad == 1)
        i_out = next(i for i, k in enumerate(kinds) if k.bad == 2)
        fails = eng.counts[i_bad] + eng.counts[i_out]
        summary["bad_hosts"] = {
            "fraction": bh.fraction, "count": bh.count,
            "in_job_mean": float(bad.count.mean()),
            "trials_with_any": float((bad.count > 0).mean()),
            "rate_per_month": bh.rate_per_month, "repair_s": float(bh.repair),
            "removed_after": bh.removed_after,
            "failures_per_run": float(fails.mean()),
            "removed_per_run": float(eng.counts[i_out].mean()),
            "hours_lost_per_run": float((eng.lost_by_kind[i_bad] + eng.lost_by_kind[i_out])
                                        .mean() / 3600.0),
            "per_day": float(fails.mean() / H * DAY)}


def _effect(fabric: Fabric, job_hosts: np.ndarray, down: np.ndarray) -> tuple[int, int]:
    """What a degrading failure takes from the job: (job hosts that lose NIC ports, most
    ports one of them loses). Failures alike in this slow the job alike (the fabric's
    symmetry: which rail or side does not matter), so the flow model runs once per key."""
    links = fabric.links
    d = down[links.kind[down] == LinkKind.ACCESS]
    host = fabric.nodes.host[links.a[d]]
    host = host[np.isin(host, job_hosts)]
    if not len(host):
        return (0, 0)
    _, cnt = np.unique(host, return_counts=True)
    return (len(cnt), int(cnt.max()))


def _host_nic_gbytes(fabric: Fabric, job_hosts: np.ndarray) -> float:
    """Scale-out bandwidth of one job host, GB/s (its access links' up capacity)."""
    links = fabric.links
    acc = np.flatnonzero(links.kind == LinkKind.ACCESS)
    host = fabric.nodes.host[links.a[acc]]
    h0 = int(job_hosts[0])
    cap = links.capacity_gbps[acc[host == h0], 0].sum()
    return float(cap) / 8.0 if cap > 0 else 1.0


def _sweep(sc: GoodputScenario, levels: list[ResolvedLevel], base: float, mult: np.ndarray,
           kinds: list[Kind]) -> tuple[int, list[tuple[float, np.ndarray]]]:
    """The swept level and, per sweep point, (base interval, multiples)."""
    sw = sc.goodput.sweep
    if sw is None:
        return 0, []
    names = [x.name for x in levels]
    if sw.level is not None and sw.level not in names:
        raise SpecError(Problem("goodput.sweep.level", f"no level {sw.level!r}; allowed: "
                                f"{', '.join(names)}"))
    li = names.index(sw.level) if sw.level is not None else 0
    lvl = levels[li]
    floor_s = lvl.save_s + lvl.upload_s
    if sw.intervals is not None:
        grid = np.array(sorted(set(float(x) for x in sw.intervals)))
    else:
        usable = _usable_rate(kinds, lvl)
        mtbf = 1.0 / usable if usable > 0 else sc.goodput.horizon
        young = float(np.sqrt(2 * max(lvl.save_s, 1e-3) * mtbf))
        grid = young * np.geomspace(0.25, 4.0, sw.points)
    grid = grid[grid > floor_s * 1.0001]
    out: list[tuple[float, np.ndarray]] = []
    is_base = int(mult[li]) == 1
    others = [i for i in range(len(levels)) if i != li]
    # sweeping the most frequent level keeps the other levels' intervals exactly: its
    # interval runs over G / k, G the largest interval all of theirs are multiples of
    g = int(np.gcd.reduce(mult[others])) if others else 0
    seen = set()
    for tau in grid:
        if is_base and others:
            k = max(1, round(g * base / tau))
            b = g * base / k
            m = mult // g * k
            m[li] = 1
        elif is_base:
            b, m = float(tau), mult.copy()
        else:
            b = base
            m = mult.copy()
            m[li] = max(1, round(tau / base))
        if (m * b <= np.array([x.save_s + x.upload_s for x in levels]) * 1.0001).any():
            continue
        key = (b, tuple(m.tolist()))
        if key in seen:
            continue
        seen.add(key)
        out.append((b, m))
    return li, out


def _usable_rate(kinds: list[Kind], lvl: ResolvedLevel) -> float:
    """The rate of the interruptions after which ``lvl``'s checkpoint can be restored (a
    host-memory copy is lost with its host): Young's ``M`` for that level."""
    return sum(k.rate for k in kinds if not (lvl.host_memory and (
        k.needs_host if k.loses_memory is None else k.loses_memory)))


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q))


def _summary(sc, fabric, job, gpus, job_hosts, rows, levels, eng: EngineResult,
             eng_sw: EngineResult | None, H, T, seed, spares, pool_w, kinds, sw_level,
             sw_int, total_rate, table, sims, base_it, step) -> dict[str, Any]:
    days = H / DAY
    e0 = eng.ettr[0]
    lost = {
        "detect": eng.detect[0], "wait": eng.wait[0], "restart": eng.restart[0],
        "recompute": eng.recompute[0], "stalls": eng.stalls[0], "slowdown": eng.slowdown,
    }
    per_class = {k.name: eng.counts[i] for i, k in enumerate(kinds)}
    sweep = None
    if len(sw_int) and eng_sw is not None:
        m = eng_sw.ettr.mean(axis=1)
        opt = optimum(sw_int, m)
        lvl = levels[sw_level]
        # Young's interval counts the failures this level survives (a host-memory copy
        # is lost with its host)
        usable = _usable_rate(kinds, lvl)
        young = float(np.sqrt(2 * lvl.save_s / usable)) if usable > 0 else None
        best = int(np.argmax(m))
        sweep = {
            "level": lvl.name,
            "trials": int(eng_sw.ettr.shape[1]),
            "points": [{"interval_s": float(t), "ettr_mean": float(v),
                        "ettr_p5": _pct(eng_sw.ettr[i], 5),
                        "ettr_p95": _pct(eng_sw.ettr[i], 95)}
                       for i, (t, v) in enumerate(zip(sw_int, m, strict=True))],
            "optimum_interval_s": opt,
            "best_point": {"interval_s": float(sw_int[best]), "ettr_mean": float(m[best])},
            "young_interval_s": young,
        }
    return {
        "scenario": sc.name,
        "fabric": fabric.name,
        "family": fabric.family,
        "job": {"name": job.name or f"job{sc.jobs.index(job)}", "gpus": len(gpus),
                "hosts": len(job_hosts),
                "segments": len(np.unique(fabric.nodes.segment[fabric.host_node[job_hosts]])),
                "iteration_s": base_it, "step_s": step},
        "horizon_days": days,
        "trials": T,
        "seed": seed,
        "ettr": {"mean": float(e0.mean()), "std": float(e0.std()), "p5": _pct(e0, 5),
                 "p50": _pct(e0, 50), "p95": _pct(e0, 95), "min": float(e0.min())},
        "interruptions": {
            "per_trial_mean": float(eng.counts.sum(axis=0).mean()),
            "per_day_mean": float(eng.counts.sum(axis=0).mean() / days),
            "expected_per_day": total_rate * DAY,
            "mtbf_hours": (1.0 / total_rate / 3600.0) if total_rate > 0 else None,
            "by_cause_per_day": {c: float(v.mean() / days) for c, v in per_class.items()},
        },
        "degradations_per_day": {c.cls: c.degrades_per_day for c in rows if c.degrading},
        "time_lost_hours": {k: float(np.mean(v) / 3600.0) for k, v in lost.items()},
        "time_lost_fraction": {k: float(np.mean(v) / H) for k, v in lost.items()},
        "lost_by_class_hours": {k.name: float(eng.lost_by_kind[i].mean() / 3600.0)
                                for i, k in enumerate(kinds)},
        "backup_hosts": {"per_pool": spares, "pools": len(pool_w),
                         "scope": sc.goodput.recovery.spare_scope,
                         "used_per_trial": float(eng.swapped.mean()),
                         "exhausted_per_trial": float(eng.waited.mean()),
                         "trials_exhausted": float((eng.waited > 0).mean())},
        "checkpoint": [{"name": x.name, "store": x.store, "every_s": x.every_s,
                        "save_s": x.save_s, "upload_s": x.upload_s, "restore_s": x.restore_s}
                       for x in levels],
        "restores": {name: float(v / T) for name, v in
                     zip([x.name for x in levels] + ["scratch"], eng.restores, strict=True)},
        "classes": [{"class": r.cls, "rate_per_month": r.rate_per_month, "repair_s": r.repair_s,
                     "source": r.source, "instances": r.instances,
                     "interrupting": r.interrupting, "degrading": r.degrading,
                     "slowdown": r.slowdown, "interruptions_per_day": r.interrupts_per_day,
                     "degradations_per_day": r.degrades_per_day} for r in rows],
        "routing": {"groups": len(table.groups), "route_calls": table.route_calls,
                    "flow_simulations": sims},
        "sweep": sweep,
        "notes": _notes(total_rate * H),
    }


def _notes(expected: float) -> list[str]:
    """What a reader should know before trusting the figures: a horizon too short to
    hold one interruption (``expected`` per run) reports an ETTR near 1 that says little
    about failures."""
    if expected >= 1:
        return []
    return [f"the horizon holds {expected:.3g} expected interruptions per run (fewer than "
            "one): the ETTR is mostly checkpoint stalls; a horizon of days to weeks (30d) "
            "shows what failures cost"]


def _tables(res: GoodputResult, levels, sw_level) -> dict[str, dict[str, list[Any]]]:
    s = res.summary
    eng = res.engine
    cls = {k: [c[k] for c in s["classes"]] for k in s["classes"][0]}
    causes = {"cause": list(s["time_lost_hours"]),
              "hours_per_trial": list(s["time_lost_hours"].values()),
              "fraction_of_horizon": list(s["time_lost_fraction"].values())}
    trials = {"trial": list(range(len(eng.swapped))),
              "ettr": eng.ettr[0].tolist(),
              "interruptions": eng.counts.sum(axis=0).astype(int).tolist(),
              "recompute_h": (eng.recompute[0] / 3600).tolist(),
              "down_h": ((eng.detect[0] + eng.wait[0] + eng.restart[0]) / 3600).tolist(),
              "stalls_h": (eng.stalls[0] / 3600).tolist(),
              "slowdown_h": (eng.slowdown / 3600).tolist(),
              "backup_used": eng.swapped.astype(int).tolist(),
              "backup_exhausted": eng.waited.astype(int).tolist()}
    out = {"classes": cls, "causes": causes, "trials": trials}
    if s.get("cluster"):
        jobs = s["cluster"]["jobs"]
        out["jobs"] = {k: [j[k] for j in jobs] for k in jobs[0]}
    if s["sweep"]:
        pts = s["sweep"]["points"]
        out["sweep"] = {k: [p[k] for p in pts] for k in pts[0]}
    del levels, sw_level
    return out
