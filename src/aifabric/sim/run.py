"""Run a scenario: place jobs and collectives, compile the DAG, route it, simulate it.

This is the pure core behind ``aifabric simulate``: no printing, no files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.guard import fabric_bytes
from aifabric.sim.analytic import run_analytic
from aifabric.sim.flow.engine import run_flow
from aifabric.sim.paths import PinnedPath, host_side_arcs, route_dag
from aifabric.sim.results import SimResult, arc_groups, build_result, collective_links
from aifabric.sim.scenario import CollectiveSpec, JobSpec, SimScenario
from aifabric.topology.fabric import Fabric, NodeKind
from aifabric.workload import Collective, DAGBuilder, TransferDAG, add_collective
from aifabric.workload.estimate import check_workload
from aifabric.workload.job import GpuPool, JobModel, add_job, place

__all__ = ["Workload", "compile_workload", "gpu_pool", "simulate"]


@dataclass
class Workload:
    dag: TransferDAG
    job_gpus: list[np.ndarray]  # fabric GPU node ids per job
    iterations: list[int]
    coll_gpus: list[np.ndarray]
    # (src GPU, dst GPU) -> the path a traffic CSV pins for that pair
    pinned: dict[tuple[int, int], PinnedPath] = field(default_factory=dict)
    # what the results should say about the workload (e.g. a trace's unsupported nodes)
    notes: list[str] = field(default_factory=list)
    chakra: dict[str, Any] | None = None
    # SHARP AllReduce stages: stage -> the arc each of its transfers is (aifabric.sim.sharp)
    sharp: dict[int, np.ndarray] = field(default_factory=dict)
    # SHARP AllReduce stages: stage -> its operations (a collective, a job's DP group),
    # each a list of reduction trees (the packet simulator's aggregation units)
    sharp_trees: dict[int, list[list[Any]]] = field(default_factory=dict)


def gpu_pool(f: Fabric) -> GpuPool:
    """The fabric's active GPUs, host-major."""
    g = f.ids(NodeKind.GPU, active_only=True)
    g = g[np.lexsort((f.nodes.index[g], f.nodes.host[g]))]
    return GpuPool(node=g, host=f.nodes.host[g].astype(np.int64),
                   segment=f.nodes.segment[g].astype(np.int64),
                   local=f.nodes.index[g].astype(np.int64),
                   gpus_per_host=int(f.spec.hosts.gpus_per_host))


def _select(pool: GpuPool, spec: CollectiveSpec | JobSpec, where: str, taken: np.ndarray,
            seed: int, problems: list[Problem]) -> np.ndarray | None:
    n_all = len(pool.node)
    if isinstance(spec.gpus, int):
        free = int((~taken).sum())
        if spec.gpus > n_all:
            problems.append(Problem(f"{where}.gpus", f"{spec.gpus} GPUs is larger than the "
                                    f"fabric ({n_all} active GPUs)"))
            return None
        try:
            return place(pool, spec.gpus, spec.placement, taken=taken,
                         seed=spec.seed if spec.seed is not None else seed,
                         segments=spec.segments)
        except ValueError as e:
            problems.append(Problem(f"{where}.gpus", f"{e} ({free} of {n_all} GPUs free "
                                    f"after the entries before it)"))
            return None
    sel = list(spec.gpus)
    if sel and isinstance(sel[0], str):
        names = _NAMES.get(id(pool))
        lookup = names.table() if names is not None else {}
        pos = [lookup.get(str(s), -1) for s in sel]
        bad = [s for s, p in zip(sel, pos, strict=True) if p < 0]
        if bad:
            problems.append(Problem(f"{where}.gpus", f"{len(bad)} GPUs do not exist "
                                    f"(first: {bad[0]!r}); allowed: names of active GPUs "
                                    f"like {next(iter(lookup), '')!r}"))
            return None
        arr = np.array(pos, dtype=np.int64)
    else:
        arr = np.array(sel, dtype=np.int64)
        bad = (arr < 0) | (arr >= n_all)
        if bad.any():
            problems.append(Problem(f"{where}.gpus", f"GPU {int(arr[bad][0])} does not exist; "
                                    f"allowed: 0..{n_all - 1} (active GPUs in order) or "
                                    "GPU names"))
            return None
    if len(np.unique(arr)) != len(arr):
        problems.append(Problem(f"{where}.gpus", "lists a GPU twice"))
        return None
    if taken[arr].any():
        problems.append(Problem(f"{where}.gpus", "uses GPUs of an earlier job or collective"))
        return None
    taken[arr] = True
    return arr


class _GpuNames:
    """GPU name -> pool position, made on first use (only a scenario that names its GPUs
    needs it; on a 100K-GPU fabric it costs a quarter of a second)."""

    def __init__(self, f: Fabric, pool: GpuPool) -> None:
        self.f, self.pool = f, pool
        self._table: dict[str, int] | None = None

    def table(self) -> dict[str, int]:
        if self._table is None:
            names = self.f.nodes.name[self.pool.node].tolist()
            self._table = dict(zip(names, range(len(names)), strict=True))
        return self._table


_NAMES: dict[int, _GpuNames] = {}  # GPU names of a pool, while compiling


#: GPU pairs routed to measure how many arcs a fluid policy spreads a flow over
ENTRY_SAMPLE = 256


def _fluid(scn: SimScenario, f: Fabric) -> bool:
    """Whether the scenario's routing splits each flow over every equal-cost path (the
    size guard then samples the routed arcs per flow)."""
    if scn.sim == "packet" or f.spec.scheduled is not None:
        return False  # (a packet's path is chosen per packet; cells are their own model)
    if getattr(f.spec, "transport", "roce") == "infiniband":
        return bool(f.spec.infiniband.adaptive_routing)
    return effective_routing(scn, f).policy == "spray"


def _sampled_entries(scn: SimScenario, f: Fabric, pool: GpuPool) -> float | None:
    """Routed arcs per flow of ``ENTRY_SAMPLE`` random GPU pairs (seeded: the same
    scenario, the same figure) under a fluid routing; None under single-path routing."""
    n = len(pool.node)
    if n < 2 or not _fluid(scn, f):
        return None
    rng = np.random.default_rng(int(getattr(scn, "seed", 0) or 0))
    a = rng.integers(0, n, ENTRY_SAMPLE)
    b = (a + rng.integers(1, n, ENTRY_SAMPLE)) % n  # never a GPU to itself
    from aifabric.routing.flows import make_flows
    from aifabric.routing.route import route

    routing, seed = effective_routing(scn, f), int(getattr(scn, "seed", 0) or 0)
    flows = make_flows(f, pool.node[a], pool.node[b], np.ones(ENTRY_SAMPLE, dtype=np.int64),
                       qps_per_connection=routing.qps_per_connection,
                       nic_port_choice=routing.nic_port_choice, seed=seed)
    try:
        routed = route(f, flows, routing, seed=seed,
                       **({"failures": scn.failures} if scn.failures else {}))
    except SpecError:  # (a failure naming nothing: the run itself says so)
        return None
    # a pair the failures cut off is left out (it is the run's to refuse, if it uses it)
    ok = ~np.asarray(routed.unreachable, dtype=bool)
    if not ok.any():
        return None
    import scipy.sparse as sp

    return float(sp.csr_matrix(routed.incidence)[ok].nnz) / int(ok.sum())


def compile_workload(scn: SimScenario, f: Fabric, *, guard_note: str = "") -> Workload:
    """Place every job and collective and compile them into one DAG (SpecError listing
    every problem). ``guard_note`` ends the size guard's refusal (e.g. why an
    All-to-All could not run as classes)."""
    pool = gpu_pool(f)
    # refuse, before placing or compiling anything, a workload too big for the memory limit
    check_workload(scn, len(pool.node), fabric_bytes=fabric_bytes(f), note=guard_note,
                   arcs_per_flow=_sampled_entries(scn, f, pool))
    _NAMES[id(pool)] = _GpuNames(f, pool)
    taken = np.zeros(len(pool.node), dtype=bool)
    problems: list[Problem] = []
    seed = int(getattr(scn, "seed", 0) or 0)
    b = DAGBuilder()
    job_gpus: list[np.ndarray] = []
    iters: list[int] = []
    coll_gpus: list[np.ndarray] = []
    pinned: dict[tuple[int, int], PinnedPath] = {}
    chakra: dict[str, Any] | None = None
    sharp: dict[int, np.ndarray] = {}
    held = _SharpHeld()
    try:
        _add_jobs(b, scn, pool, taken, seed, problems, job_gpus, iters, f=f, sharp=sharp,
                  held=held)
        _add_collectives(b, scn, pool, taken, seed, problems, coll_gpus, f=f, sharp=sharp,
                         held=held)
        if scn.workload is not None and not problems:
            chakra = _add_chakra(b, scn, pool, taken, seed, problems, job_gpus, iters)
    finally:
        _NAMES.pop(id(pool), None)
    # the traffic patterns only once placement went through without raising: an exception
    # above reaches the caller as it was raised, not masked by one from the traffic
    for i, pat in enumerate(scn.traffic):
        _add_traffic(b, scn, f, i, pat, problems, pinned)
    if problems:
        raise SpecError(problems)
    if not scn.jobs and not scn.collectives and not scn.traffic and scn.workload is None:
        raise SpecError(Problem("jobs", "a scenario needs at least one job, collective or "
                                "traffic pattern"))
    return Workload(b.build(), job_gpus, iters, coll_gpus, pinned,
                    notes=held.notes + _chakra_notes(chakra),
                    chakra=chakra,
                    sharp=sharp, sharp_trees=held.trees_of)


@dataclass
class _SharpHeld:
    """SHARP resources the jobs' DP AllReduces hold, in scenario order: trees and
    operations per switch (fabric node id), trees laid so far (the next set starts on
    the next root), and what the results should say (a job beyond the limits)."""

    trees: dict[int, int] = field(default_factory=dict)
    ops: dict[int, int] = field(default_factory=dict)
    laid: int = 0
    notes: list[str] = field(default_factory=list)
    #: stage -> its SHARP operations (jobs' DP groups, collectives), each a list of trees
    trees_of: dict[int, list[list[Any]]] = field(default_factory=dict)
    #: the live links after the scenario's failures (None: none failed), once asked for
    _alive: Any = None
    _alive_done: bool = False

    def alive(self, scn: SimScenario, f: Fabric) -> Any:
        """Bool per link, True = up, after ``scn.failures`` (None without failures): the
        fabric the aggregation manager lays its trees on (the subnet manager's re-sweep,
        :func:`aifabric.sim.sharp.sharp_tree`). Bad failure names are the router's
        problems (:func:`aifabric.routing.failover.failed_links`)."""
        if not self._alive_done:
            from aifabric.routing.failover import live_links

            self._alive = live_links(f, scn.failures) if scn.failures else None
            self._alive_done = True
        return self._alive


def _add_jobs(b: DAGBuilder, scn: SimScenario, pool: GpuPool, taken: np.ndarray, seed: int,
              problems: list[Problem], job_gpus: list[np.ndarray], iters: list[int], *,
              f: Fabric | None = None, sharp: dict[int, np.ndarray] | None = None,
              held: _SharpHeld | None = None) -> None:
    """Place the scenario's jobs (``jobs[i]`` with seed ``seed + i``) and add each to ``b``
    as one job; their GPUs (fabric node ids) go into ``job_gpus``, their iteration counts
    into ``iters``. A job with a problem (appended to ``problems``) adds nothing, and no
    job is added after the first problem. ``dp_algorithm: sharp`` lays the job's DP
    groups on the fabric ``f``'s aggregation trees (:func:`_job_sharp`)."""
    for i, js in enumerate(scn.jobs):
        where = f"jobs[{i}]"
        par = js.parallel
        _check_parallel(js, where, problems)
        pos = _select(pool, js, where, taken, seed + i, problems)
        if pos is None or problems:
            continue
        name = js.name or f"job{i}"
        if js.dp_algorithm == "hierarchical":
            ok = _same_locals(pool, pos.reshape(par.pp, par.dp, par.tp), par)
            if not ok:
                problems.append(Problem(f"{where}.dp_algorithm", "hierarchical needs the "
                                        "DP group of every TP rank on whole hosts"))
                continue
        model = _job_model(js, name)
        dp_sharp = None
        if js.dp_algorithm == "sharp":
            assert held is not None and sharp is not None
            dp_sharp = _job_sharp(scn, f, pool, pos, js, name, where, problems, sharp, held)
            if problems:
                continue
            if dp_sharp is None:  # beyond the switches' limits: NCCL's ring
                model = replace(model, dp_algorithm="ring")
        b.job = len(b.jobs)
        b.jobs.append(name)
        add_job(b, model, pool.node[pos], pool.host[pos], pool.local[pos],
                dp_sharp=dp_sharp)
        job_gpus.append(pool.node[pos])
        iters.append(js.iterations)
    b.job = -1


def _job_sharp(scn: SimScenario, f: Fabric | None, pool: GpuPool, pos: np.ndarray,
               js: JobSpec, name: str, where: str, problems: list[Problem],
               sharp: dict[int, np.ndarray], held: _SharpHeld) -> Any:
    """The job's DP AllReduce with SHARP: one reduction tree per rail of each DP group
    (a group per pipeline stage and TP rank), counted against every switch's limits on
    top of what the jobs before it hold. Returns what ``add_job`` calls per gradient
    bucket; None (and a note) when a switch has no room left, so the job runs NCCL's
    ring, as NCCL does when the aggregation manager gives it no resources. Refused
    (``problems``): a RoCE fabric, another simulator than flow or packet, a tree through
    a switch whose model does not aggregate."""
    from aifabric.sim.sharp import SharpUnavailable, live_trees, sharp_over, sharp_usage

    if getattr(scn.spec, "transport", "roce") != "infiniband":
        problems.append(Problem(f"{where}.dp_algorithm", "sharp reduces in InfiniBand "
                                "switches; allowed on this RoCE fabric: ring, tree, "
                                "halving_doubling, hierarchical (or transport: infiniband)"))
        return None
    if scn.sim not in ("flow", "packet"):
        problems.append(Problem(f"{where}.dp_algorithm", f"sharp runs on the flow and "
                                f"packet simulators, not sim: {scn.sim}; allowed: sim: "
                                "flow, sim: packet"))
        return None
    assert f is not None
    par = js.parallel
    pp, dp, tp = par.pp, par.dp, par.tp
    g = pool.node[pos].reshape(pp, dp, tp)
    h = pool.host[pos].reshape(pp, dp, tp)
    if dp < 2:  # no DP AllReduce to reduce
        return None
    groups: list[list[Any]] = []
    laid = held.laid
    alive = held.alive(scn, f)
    try:
        for p in range(pp):
            for t in range(tp):
                groups.append(live_trees(f, g[p, :, t], first_root=laid, alive=alive))
                laid += len(groups[-1])
    except SpecError as err:
        problems.extend(Problem(f"{where}.{q.path}" if q.path == "gpus" else q.path,
                                q.message) for q in err.problems)
        return None
    except SharpUnavailable as why:  # NCCL runs its ring when SHARP has no tree
        held.notes.append(f"{where} ({name}): no SHARP tree after the failures ({why}); "
                          "its DP AllReduce runs NCCL's ring instead")
        return None
    trees_on, ops_on, bad = sharp_usage(f, groups)
    if bad is not None:
        model = f.models[int(f.nodes.model[bad])][0]
        problems.append(Problem(f"switch_models.{model}.sharp", f"false: switch "
                                f"{f.nodes.name[bad]} on a SHARP tree of {where} ({name}) "
                                "does not aggregate; allowed: true (an aggregation-capable "
                                "switch model, e.g. NVIDIA Quantum-2), or another "
                                "dp_algorithm"))
        return None
    why = sharp_over(f, (held.trees, held.ops), (trees_on, ops_on))
    if why:
        held.notes.append(f"{where} ({name}): SHARP beyond the switches' limits ({why}); "
                          "its DP AllReduce runs NCCL's ring instead")
        return None
    for x, n in trees_on.items():
        held.trees[x] = held.trees.get(x, 0) + n
    for x, n in ops_on.items():
        held.ops[x] = held.ops.get(x, 0) + n
    held.laid = laid
    # per pipeline stage: every TP rank's group, transfers per byte of the bucket
    per_stage = []
    for p in range(pp):
        parts = [_sharp_transfers(f, groups[p * tp + t], g[p, :, t], h[p, :, t], 1.0)
                 for t in range(tp)]
        arc_part = [np.concatenate([x[0][k] for x in parts]) for k in range(4)]
        ring_part = [np.concatenate([x[1][k] for x in parts]) for k in range(3)]
        per_stage.append((np.concatenate([arc_part[0], ring_part[0]]),
                          np.concatenate([arc_part[1], ring_part[1]]),
                          np.concatenate([arc_part[2], ring_part[2]]), arc_part[3]))

    def dp_sharp(b: DAGBuilder, p: int, bucket: float, deps: Any, label: str) -> int:
        src, dst, unit, arcs = per_stage[p]
        b.coll = len(b.collectives)
        stage = b.transfers(src, dst, unit * bucket, deps=deps, label=f"{label} (sharp)")
        sharp[stage] = arcs
        held.trees_of[stage] = [list(groups[p * tp + t]) for t in range(tp)]
        b.add_collective(Collective(name=label, op="allreduce", algorithm="sharp",
                                    n_gpus=dp, size_bytes=int(bucket), channels=1,
                                    job=b.job, stages=(stage,),
                                    busbw_factor=2 * (dp - 1) / dp))
        b.coll = -1
        return stage

    return dp_sharp


def _check_parallel(js: JobSpec, where: str, problems: list[Problem]) -> None:
    """The job's parallel layout against its GPU count and DP algorithm (problems named
    ``<where>.parallel``, ``.parallel.ep``, ``.dp_algorithm``)."""
    par = js.parallel
    n_par = par.dp * par.tp * par.pp
    count = js.gpus if isinstance(js.gpus, int) else len(js.gpus)
    if n_par != count:
        problems.append(Problem(f"{where}.parallel", f"dp x tp x pp = {par.dp} x "
                                f"{par.tp} x {par.pp} = {n_par} does not match the "
                                f"job's {count} GPUs"))
    if par.dp % par.ep:
        problems.append(Problem(f"{where}.parallel.ep", f"ep {par.ep} must divide "
                                f"dp {par.dp}"))
    if js.dp_algorithm == "halving_doubling" and par.dp & (par.dp - 1):
        problems.append(Problem(f"{where}.dp_algorithm", "halving_doubling needs a "
                                f"power-of-two dp (got {par.dp})"))


def _job_model(js: JobSpec, name: str) -> JobModel:
    """The job spec as the workload model takes it: compute times per layer in ns (given
    in ms; backward twice forward when not given)."""
    par = js.parallel
    fwd = js.compute.fwd_ms_per_layer * 1e6
    bwd = (js.compute.bwd_ms_per_layer * 1e6 if js.compute.bwd_ms_per_layer
           is not None else 2 * fwd)
    m = js.model
    return JobModel(name=name, dp=par.dp, tp=par.tp, pp=par.pp, ep=par.ep,
                    params=m.params, layers=m.layers, hidden=m.hidden,
                    seq_len=m.seq_len, micro_batch=m.micro_batch,
                    micro_batches=js.micro_batches,
                    bytes_per_value=m.bytes_per_value, moe_every=m.moe_every,
                    top_k=m.top_k, fwd_ns_per_layer=fwd, bwd_ns_per_layer=bwd,
                    buckets=js.buckets, dp_algorithm=js.dp_algorithm,
                    channels=js.channels, iterations=js.iterations)


def _add_collectives(b: DAGBuilder, scn: SimScenario, pool: GpuPool, taken: np.ndarray,
                     seed: int, problems: list[Problem], coll_gpus: list[np.ndarray], *,
                     f: Fabric | None = None, sharp: dict[int, np.ndarray] | None = None,
                     held: _SharpHeld | None = None) -> None:
    """Place the scenario's collectives (``collectives[i]`` with seed ``seed + 1000 + i``)
    and add each, ``repeat`` times in a row after its start delay (``start_ms``), to
    ``b``; their GPUs (fabric node ids) go into ``coll_gpus``. Nothing is added once a
    problem (appended to ``problems``) was found. ``algorithm: sharp`` (an AllReduce
    reduced in the switches) is laid on the fabric ``f``'s aggregation trees; its stages
    and their arcs go into ``sharp``; they count on top of what the jobs' SHARP DP
    AllReduces ``held``."""
    sharp_ops: list[tuple[int, Any, np.ndarray]] = []
    for i, cs in enumerate(scn.collectives):
        where = f"collectives[{i}]"
        pos = _select(pool, cs, where, taken, seed + 1000 + i, problems)
        if pos is None:
            continue
        n = len(pos)
        algo = cs.algorithm
        if algo == "halving_doubling" and n & (n - 1):
            problems.append(Problem(f"{where}.algorithm", f"halving_doubling needs a "
                                    f"power-of-two GPU count (got {n})"))
            continue
        if algo == "hierarchical" and not _whole_hosts(pool, pos):
            problems.append(Problem(f"{where}.algorithm", "hierarchical needs the same "
                                    "GPUs on every host"))
            continue
        peers = None
        if cs.op == "p2p":
            if cs.peers is None or len(cs.peers) != n or min(cs.peers) < 0 \
                    or max(cs.peers) >= n:
                problems.append(Problem(f"{where}.peers", f"p2p needs one peer per GPU "
                                        f"({n}), each a position 0..{n - 1}"))
                continue
            peers = pool.node[pos][np.array(cs.peers)]
        if not 0 <= cs.root < n:
            problems.append(Problem(f"{where}.root", f"allowed: 0..{n - 1}"))
            continue
        if problems:
            continue
        if algo == "sharp":
            trees = _sharp_trees(scn, f, pool.node[pos], where, problems, held=held)
            if not isinstance(trees, str):
                if trees is not None:
                    sharp_ops.append((i, trees, pool.node[pos]))
                continue
            # the failures leave no tree: NCCL runs its ring, and the results say why
            if held is not None:
                held.notes.append(f"{where} ({cs.name or f'{cs.op}-{i}'}): no SHARP tree "
                                  f"after the failures ({trees}); its AllReduce runs "
                                  "NCCL's ring instead")
            algo = "ring"
        deps = b.compute(cs.start_ms * 1e6, label=f"{where} start") if cs.start_ms else None
        for r in range(cs.repeat):
            name = (cs.name or f"{cs.op}-{i}") + (f"#{r}" if cs.repeat > 1 else "")
            deps = add_collective(b, cs.op, pool.node[pos], cs.size_bytes, algorithm=algo,
                                  channels=cs.channels, host=pool.host[pos],
                                  local=pool.local[pos], peers=peers, root=cs.root,
                                  chunk_bytes=cs.chunk_bytes, deps=deps, name=name)
        coll_gpus.append(pool.node[pos])
    if sharp_ops and not problems:
        from aifabric.sim.sharp import sharp_limits

        assert f is not None and sharp is not None
        problems += sharp_limits(f, [t for _, t, _ in sharp_ops],
                                 [f"collectives[{i}]" for i, _, _ in sharp_ops],
                                 used=(held.trees, held.ops) if held and held.trees
                                 else None)
        for i, trees, gpus in sharp_ops:
            if not problems:
                _add_sharp(b, scn.collectives[i], i, f, trees, gpus, sharp,
                           pool.host[np.searchsorted(pool.node, gpus)]
                           if _sorted(pool.node) else _host_of(pool, gpus),
                           trees_of=held.trees_of if held is not None else None)
                coll_gpus.append(gpus)


def _sorted(a: np.ndarray) -> bool:
    return bool(len(a) < 2 or (np.diff(a) > 0).all())


def _host_of(pool: GpuPool, gpus: np.ndarray) -> np.ndarray:
    where = {int(n): i for i, n in enumerate(pool.node)}
    return pool.host[np.array([where[int(x)] for x in gpus], dtype=np.int64)]


def _sharp_trees(scn: SimScenario, f: Fabric | None, gpus: np.ndarray, where: str,
                 problems: list[Problem], *, held: _SharpHeld | None = None) -> Any:
    """The SHARP trees of one collective, or None with the problem appended: SHARP
    needs an InfiniBand fabric and the flow or packet simulator. The trees are laid on
    the live fabric (``scn.failures``); where the failures leave none, what failed (a
    str: the collective runs NCCL's ring)."""
    from aifabric.sim.sharp import SharpUnavailable, live_trees

    if getattr(scn.spec, "transport", "roce") != "infiniband":
        problems.append(Problem(f"{where}.algorithm", "sharp reduces in InfiniBand "
                                "switches; allowed on this RoCE fabric: ring, tree, "
                                "halving_doubling, hierarchical (or transport: infiniband)"))
        return None
    if scn.sim not in ("flow", "packet"):
        problems.append(Problem(f"{where}.algorithm", f"sharp runs on the flow and packet "
                                f"simulators, not sim: {scn.sim}; allowed: sim: flow, "
                                "sim: packet"))
        return None
    assert f is not None
    try:
        return live_trees(f, gpus, alive=held.alive(scn, f) if held is not None else None)
    except SharpUnavailable as why:
        return str(why)
    except SpecError as err:
        problems.extend(Problem(f"{where}.{p.path}" if p.path == "gpus" else p.path,
                                p.message) for p in err.problems)
        return None


def _add_sharp(b: DAGBuilder, cs: CollectiveSpec, i: int, f: Fabric, trees: Any,
               gpus: np.ndarray, sharp: dict[int, np.ndarray], host: np.ndarray, *,
               trees_of: dict[int, list[list[Any]]] | None = None) -> None:
    """A SHARP AllReduce as one stage of the DAG, as NCCL's CollNet pipelines it: with
    ``g`` > 1 GPUs on every host, a ring ReduceScatter inside each host (NVLink), each
    GPU's ``S/g`` slice reduced by SHARP on its own rail's tree, and a ring AllGather
    inside each host, all streaming at once; with one GPU per host, SHARP on the whole
    buffer. The stage's transfers: one per arc that carries the slice once (the GPUs'
    PCIe and host links both ways, the trees' links both ways; ``simulate`` routes each
    on its arc), then per host ring neighbour pair the ReduceScatter's and AllGather's
    ``2(g-1)/g x S`` (routed as any GPU pair). The fluid limit of the pipeline: the
    stage ends when the busiest of them drains."""
    (src, dst, sizes, arcs), ring = _sharp_transfers(f, trees, gpus, host,
                                                     float(cs.size_bytes))
    k = len(gpus)
    src = np.concatenate([src, ring[0]])
    dst = np.concatenate([dst, ring[1]])
    sizes = np.concatenate([sizes, ring[2]])
    where = f"collectives[{i}]"
    deps = b.compute(cs.start_ms * 1e6, label=f"{where} start") if cs.start_ms else None
    for r in range(cs.repeat):
        name = (cs.name or f"{cs.op}-{i}") + (f"#{r}" if cs.repeat > 1 else "")
        b.coll = len(b.collectives)
        deps = b.transfers(src, dst, sizes, deps=deps, label=f"{name} (sharp)")
        sharp[deps] = arcs
        if trees_of is not None:
            trees_of[deps] = [list(trees)]
        b.add_collective(Collective(name=name, op="allreduce", algorithm="sharp",
                                    n_gpus=k, size_bytes=int(cs.size_bytes), channels=1,
                                    job=-1, stages=(deps,),
                                    busbw_factor=2 * (k - 1) / k))
    b.coll = -1


def _sharp_transfers(f: Fabric, trees: Any, gpus: np.ndarray, host: np.ndarray,
                     size: float) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """The transfers of one SHARP AllReduce of ``size`` bytes over ``gpus`` (on their
    ``host``) on ``trees`` (:func:`_add_sharp`): (src, dst, size, arc) of the ones that
    each are an arc carrying the slice once, and (src, dst, size) of the NVLink ring
    pairs of the ReduceScatter and AllGather inside each host (empty with one GPU per
    host)."""
    from aifabric.sim.sharp import sharp_flow_arcs

    arcs, _ = sharp_flow_arcs(f, trees)
    n = len(arcs)
    hosts, per = np.unique(host, return_counts=True)
    g = int(per[0]) if (per == per[0]).all() else 1
    src = np.resize(gpus, n)
    dst = np.resize(np.roll(gpus, 1), n)  # placeholders: the arc is the path
    sizes = np.full(n, size / g)
    if g > 1:
        ring = gpus[np.argsort(host, kind="stable")].reshape(len(hosts), g)
        rs = (ring.ravel(), np.roll(ring, -1, axis=1).ravel(),
              np.full(ring.size, 2 * (g - 1) / g * size))
    else:
        e = np.zeros(0, np.int64)
        rs = (e, e, np.zeros(0))
    return (src, dst, sizes, arcs), rs


def _sharp_paths(f: Fabric, dag: TransferDAG, paths: Any, xconn: np.ndarray,
                 sharp: dict[int, np.ndarray]) -> tuple[Any, np.ndarray]:
    """Each SHARP transfer on its own arc: one new connection per transfer, one flow on
    that arc, the arc's latency."""
    import scipy.sparse as sp

    from aifabric.sim.flow.engine import Paths

    if not sharp:
        return paths, xconn
    st = np.array(sorted(sharp), dtype=np.int64)
    idx = np.concatenate([dag.xfer_ptr[s] + np.arange(len(sharp[int(s)])) for s in st])
    arcs = np.concatenate([sharp[int(s)] for s in st])
    assert len(idx) == len(arcs)
    n_old = paths.n_conns
    rows = paths.incidence.shape[0]
    n_arcs = paths.incidence.shape[1]
    extra = sp.csr_matrix((np.ones(len(arcs)), (np.arange(len(arcs)), arcs)),
                          shape=(len(arcs), n_arcs))
    lat = f.links.latency_ns[arcs // 2].astype(np.float64)
    new = Paths(incidence=sp.vstack([paths.incidence, extra], format="csr"),
                conn_ptr=np.concatenate([paths.conn_ptr,
                                         rows + 1 + np.arange(len(arcs), dtype=np.int64)]),
                latency_ns=np.concatenate([np.asarray(paths.latency_ns, np.float64), lat]),
                capacity_gbps=paths.capacity_gbps, arc_site=paths.arc_site)
    xconn = np.asarray(xconn).copy()
    xconn[idx] = n_old + np.arange(len(arcs), dtype=xconn.dtype)
    return new, xconn


def _chakra_notes(chakra: dict[str, Any] | None) -> list[str]:
    """What the results say about a Chakra trace: one note per node type not modelled."""
    if chakra is None:
        return []
    return [f"trace {chakra['trace']}: {n:,} {what} node(s) not modelled (kept as "
            "zero-time steps; their dependencies are kept)"
            for what, n in chakra["unsupported"].items()]


def _add_chakra(b: DAGBuilder, scn: SimScenario, f_pool: GpuPool, taken: np.ndarray,
                seed: int, problems: list[Problem], job_gpus: list[np.ndarray],
                iters: list[int]) -> dict[str, Any] | None:
    """Read the scenario's Chakra trace, place its ranks like a job and add it to ``b``
    as one job (see :mod:`aifabric.workload.chakra`)."""
    from pathlib import Path
    from types import SimpleNamespace

    from aifabric.workload.chakra import compile_chakra, find_rank_files, load_groups, read_trace

    ws = scn.workload
    assert ws is not None
    where = Path(ws.chakra)
    if not where.is_absolute() and scn.base_dir is not None:
        where = scn.base_dir / where
    n_given = ws.ranks if ws.ranks is not None else (len(ws.gpus) if ws.gpus else None)
    name, files = find_rank_files(where, n_given)
    R = len(files)
    sel = SimpleNamespace(gpus=list(ws.gpus) if ws.gpus else R, placement=ws.placement,
                          seed=ws.seed, segments=ws.segments)
    pos = _select(f_pool, sel, "workload", taken, seed + 5000, problems)  # type: ignore[arg-type]
    if pos is None:
        return None
    trace = read_trace(where, R)
    folder = where if where.is_dir() else where.parent
    groups = load_groups(folder, ws.comm_groups)
    b.job = len(b.jobs)
    b.jobs.append(f"chakra {name}")
    m = compile_chakra(b, trace, f_pool.node[pos], f_pool.host[pos], f_pool.local[pos],
                       groups=groups, gpu_tflops=ws.gpu_tflops, channels=ws.channels,
                       name=name, sim=scn.sim,
                       qps=int(scn.spec.routing.qps_per_connection or 1))
    b.job = -1
    job_gpus.append(f_pool.node[pos])
    iters.append(1)
    return {"trace": name, "ranks": R, "nodes": trace.nodes,
            "files_decoded": trace.files_decoded, "rank_classes": len(trace.graphs),
            "collectives": m.collectives, "p2p_transfers": m.transfers_p2p,
            "unsupported": trace.unsupported, "dangling_deps": trace.dangling}


def _add_traffic(b: DAGBuilder, scn: SimScenario, f: Fabric, i: int, pat: Any,
                 problems: list[Problem], pinned: dict[tuple[int, int], PinnedPath]) -> None:
    """One traffic pattern as one stage of point-to-point transfers; the paths its CSV
    pins (``routing.policy: pinned``) go into ``pinned``, by GPU pair."""
    from aifabric.routing.traffic import build_traffic

    where = f"traffic.{i}"
    q = getattr(pat, "qps_per_connection", None)
    if q is not None and q != scn.spec.routing.qps_per_connection:
        problems.append(Problem(f"{where}.qps_per_connection", "simulate uses one QP count "
                                "for all traffic; allowed: set routing.qps_per_connection"))
        return
    try:
        flows, pins = build_traffic(f, [pat], seed=scn.seed + i, base_dir=scn.base_dir,
                                    path="traffic")
    except SpecError as err:
        problems.extend(Problem(p.path.replace("traffic.0", where), p.message, p.file)
                        for p in err.problems)
        return
    conn = np.asarray(flows.conn)
    first = np.searchsorted(conn, np.arange(int(conn.max()) + 1 if len(conn) else 0))
    if pins is not None and not _pin(scn, f, i, pat, flows, first, pins, pinned, problems):
        return
    size = np.bincount(conn, weights=flows.size_bytes)
    src, dst = flows.src_gpu[first], flows.dst_gpu[first]
    if (size <= 0).any():
        problems.append(Problem(f"{where}.size_bytes", "must be > 0"))
        return
    b.coll = len(b.collectives)
    st = b.transfers(src, dst, size, label=f"traffic {i} ({pat.pattern})")
    mean = float(size.mean()) if len(size) else 0.0
    b.add_collective(Collective(name=f"traffic.{i} {pat.pattern}", op=pat.pattern,
                                algorithm="direct", n_gpus=len(np.unique(src)),
                                size_bytes=int(mean), channels=1, job=-1, stages=(st,),
                                busbw_factor=1.0))
    b.coll = -1


def _pin(scn: SimScenario, f: Fabric, i: int, pat: Any, flows: Any, first: np.ndarray,
         pins: tuple[np.ndarray, np.ndarray], pinned: dict[tuple[int, int], PinnedPath],
         problems: list[Problem]) -> bool:
    """Record the path of every CSV row that has one (the row's connection is its row
    index); False (and a problem) when the paths cannot be followed."""
    where = f"traffic.{i}.file"
    policy = scn.spec.routing.policy
    if policy != "pinned":
        problems.append(Problem(where, f"{pat.file!r} pins paths (a path column) but "
                                f"routing.policy is {policy}; allowed: routing.policy: "
                                "pinned (follow them), or a CSV without paths"))
        return False
    ptr, nodes = pins
    ok = True
    for row, k in enumerate(first.tolist()):  # explicit CSV rows: small by nature
        path = nodes[ptr[k]:ptr[k + 1]]
        if not len(path):
            continue
        key = (int(flows.src_gpu[k]), int(flows.dst_gpu[k]))
        here = PinnedPath(path, f"{where} line {row + 2}: path", str(pat.file))
        seen = pinned.get(key)
        if seen is not None and not np.array_equal(seen.nodes, path):
            problems.append(Problem(here.where, f"{pat.file}: "
                                    f"{f.nodes.name[key[0]]} -> {f.nodes.name[key[1]]} is "
                                    f"pinned to another path at {seen.where.split(': ')[0]}; "
                                    "allowed: one path per GPU pair (a pair is one "
                                    "connection)"))
            ok = False
            continue
        pinned.setdefault(key, here)
    return ok


def _whole_hosts(pool: GpuPool, pos: np.ndarray) -> bool:
    h, loc = pool.host[pos], pool.local[pos]
    hosts = np.unique(h)
    if len(pos) % len(hosts):
        return False
    sets = {tuple(sorted(loc[h == x])) for x in hosts[:64]}
    return len(sets) == 1


def _same_locals(pool: GpuPool, grid: np.ndarray, par: Any) -> bool:
    return all(_whole_hosts(pool, grid[p, :, t]) for p in range(par.pp) for t in range(par.tp))


def effective_routing(scn: SimScenario, f: Fabric) -> Any:
    """The routing in force: the scenario's spec has its overrides merged already."""
    del f
    return scn.spec.routing


def simulate(scn: SimScenario, f: Fabric, *, name: str | None = None,
             progress: Callable[[int], None] | None = None,
             workload: Workload | None = None, max_events: float | None = None,
             events_progress: Callable[[int, int], None] | None = None) -> SimResult:
    """Simulate ``scn`` on ``f`` with its simulator; the shared result tables.

    ``sim: packet`` only: a run estimated above ``max_events`` events is refused (None:
    the default limit, :data:`aifabric.sim.packet.run.DEFAULT_MAX_EVENTS`), and
    ``events_progress(done, estimate)`` follows it (see
    :func:`aifabric.sim.packet.run.run_packet`)."""
    wl = workload or compile_workload(scn, f)
    dag = wl.dag
    groups, gnames = arc_groups(f)
    routing = effective_routing(scn, f)
    seed = int(getattr(scn, "seed", 0) or 0)
    if f.spec.scheduled is not None and scn.sim != "packet":  # GSE/DSF: the closed form
        from aifabric.sim.scheduled import route_scheduled

        paths, xconn = route_scheduled(f, dag, routing, scn.packet.nic,
                                       failures=scn.failures or None, seed=seed,
                                       pinned=wl.pinned or None)
    elif wl.sharp:  # the SHARP transfers stream over their tree arcs: not routed
        from aifabric.sim.sharp import without_sharp

        sub, kept = without_sharp(dag, wl.sharp)
        paths, sub_conn = route_dag(f, sub, routing, failures=scn.failures or None,
                                    seed=seed, pinned=wl.pinned or None)
        xconn = np.zeros(dag.n_transfers, dtype=np.int64)
        xconn[kept] = sub_conn  # the SHARP ones: _sharp_paths
    else:
        paths, xconn = route_dag(f, dag, routing, failures=scn.failures or None, seed=seed,
                                 pinned=wl.pinned or None)
    paths, xconn = _sharp_paths(f, dag, paths, xconn, wl.sharp)
    if scn.sim == "analytic":
        run = run_analytic(dag, paths, xconn, host_side_arcs(f), arc_group=groups,
                           n_groups=len(gnames))
    elif scn.sim == "packet" and f.spec.scheduled is not None:  # GSE/DSF, cell by cell
        from aifabric.sim.packet.scheduled.run import run_scheduled
        from aifabric.sim.scheduled import route_scheduled

        if scn.failures:
            raise SpecError(Problem("failures", "the scheduled fabric's cell model sprays "
                                    "over every fabric link and has no failed links; "
                                    "allowed: sim: flow (it routes around failures), or no "
                                    "failures"))

        paths, xconn = route_scheduled(f, dag, routing, scn.packet.nic,
                                       failures=scn.failures or None, seed=seed,
                                       pinned=wl.pinned or None)
        from aifabric.sim.packet.run import DEFAULT_MAX_EVENTS

        run = run_scheduled(dag, f, paths, xconn, scn.packet.nic, arc_group=groups,
                            n_groups=len(gnames), progress=progress,
                            until_ns=scn.packet.until_ms * 1e6,
                            max_events=DEFAULT_MAX_EVENTS if max_events is None
                            else max_events)
    elif scn.sim == "packet":
        from aifabric.sim.packet.config import effective_packet_config
        from aifabric.sim.packet.run import DEFAULT_MAX_EVENTS, run_packet

        cfg = effective_packet_config(scn.packet, scn.spec.deploy)
        if getattr(scn.spec, "transport", "roce") == "infiniband":  # credits, not PFC
            cfg = _ib_packet_config(scn, cfg)
        plan = None
        if wl.sharp:  # SHARP AllReduces: on the switches' aggregation units
            from aifabric.sim.packet.sharp import SharpPlan

            sc = cfg.sharp
            plan = SharpPlan(f, wl.sharp, wl.sharp_trees, chunk_bytes=sc.chunk_bytes,
                             outstanding=sc.outstanding, agg_gbps=sc.aggregation_gbps,
                             agg_latency_ns=sc.aggregation_latency_ns)
        run = run_packet(dag, f, paths, xconn, cfg, arc_group=groups,
                         n_groups=len(gnames), progress=progress,
                         max_events=DEFAULT_MAX_EVENTS if max_events is None else max_events,
                         events_progress=events_progress, routing=routing,
                         failures=scn.failures or None, seed=seed, pinned=wl.pinned or None,
                         sharp=plan)
    else:
        run = run_flow(dag, paths, xconn, tolerance=scn.tolerance, arc_group=groups,
                       n_groups=len(gnames), progress=progress)
    res = build_result(name or scn.name, scn.sim, f, dag, run, job_gpus=wl.job_gpus,
                       iterations=wl.iterations, sharp=wl.sharp,
                       extra={"routing": {"policy": _policy_label(scn.spec, routing.policy),
                                          "qps_per_connection": routing.qps_per_connection,
                                          "nic_port_choice": routing.nic_port_choice}})
    res.tables["collective_links"] = collective_links(f, dag, paths, xconn)
    if wl.sharp:  # the SHARP transfers named by what they are, not by GPU pairs
        _name_sharp_rows(res, f, dag, run, wl.sharp)
    if f.spec.scheduled is not None and scn.sim != "packet":
        from aifabric.sim.scheduled import scheduled_summary

        res.summary["routing"]["policy"] = "scheduled"
        res.summary["scheduled"] = {
            "model": "closed form: max-min over edge ports and cell overhead",
            **scheduled_summary(f, scn.packet.nic, getattr(run, "arc_bytes", None))}
    if wl.chakra is not None:
        res.summary["chakra"] = wl.chakra
    if wl.notes:
        res.summary["notes"] = list(wl.notes)
    if scn.sim == "packet" and f.spec.scheduled is not None:
        from aifabric.sim.packet.scheduled.run import attach_scheduled_results

        attach_scheduled_results(res, run, f)  # type: ignore[arg-type]
    elif scn.sim == "packet":
        from aifabric.sim.packet.results import attach_packet_results

        attach_packet_results(res, run)  # type: ignore[arg-type]
        res.summary["packet"]["settings"] = {
            "pfc": cfg.pfc.enabled, "lossless_priorities": list(cfg.pfc.priorities),
            "pfc_watchdog_ms": cfg.pfc.watchdog_ms,
            "ecn": [cfg.ecn.kmin_bytes, cfg.ecn.kmax_bytes, cfg.ecn.pmax] if cfg.ecn.enabled
            else None,
            "ecn_by_speed": {str(g): [e.kmin_bytes, e.kmax_bytes, e.pmax]
                             for g, e in sorted(cfg.ecn.by_speed.items())}
            if cfg.ecn.enabled and cfg.ecn.by_speed else None,
            "ecn_mark": cfg.switch.ecn_mark, "window": cfg.nic.window,
            "window_scales_with_rate": cfg.nic.window_scales_with_rate,
            "ack_path": cfg.nic.ack_path, "rx_gbps": cfg.nic.rx_gbps,
            "host_pfc": cfg.nic.host_pfc.enabled if cfg.nic.rx_gbps is not None else None,
            "cc": cfg.cc.algorithm,
            **({"dcqcn": cfg.cc.dcqcn.model_dump()} if cfg.cc.algorithm == "dcqcn" else {})}
        if "infiniband" in res.summary["packet"]:  # credits, VLs: no PFC or ECN settings
            from aifabric.sim.packet.ibmodel import settings as ib_settings

            res.summary["packet"]["settings"] = ib_settings(
                f.spec.infiniband, cfg, res.summary["packet"]["infiniband"])
    return res


def _name_sharp_rows(res: SimResult, f: Fabric, dag: TransferDAG, run: Any,
                     sharp: dict[int, np.ndarray]) -> None:
    """The transfers table's SHARP rows name their arc's ends
    (:func:`aifabric.sim.sharp.sharp_transfer_names`), and the summary's slowest
    transfers are read again from it."""
    from aifabric.sim.results import _slowest_transfers
    from aifabric.sim.sharp import sharp_rows, sharp_transfer_names

    idx, arcs = sharp_rows(dag, sharp)
    tr = res.tables["transfers"]
    a, b = sharp_transfer_names(f, arcs)
    for col, val in (("src_gpu", a), ("dst_gpu", b)):
        tr[col] = np.asarray(tr[col], dtype=object).copy()
        tr[col][idx] = val
    res.summary["slowest_transfers"] = _slowest_transfers(run, tr)


def _ib_packet_config(scn: SimScenario, cfg: Any) -> Any:
    """The packet settings of an InfiniBand fabric
    (:func:`aifabric.sim.packet.ibmodel.ib_packet_config`: no PFC or WRED, ``ibcc``
    unless the scenario names a congestion control); with adaptive routing the
    out-of-order receiver (ConnectX places AR's out-of-order packets) unless the scenario
    sets ``packet.nic.receiver``."""
    from aifabric.sim.packet.ibmodel import ib_packet_config

    pk = scn.packet
    explicit = "cc" in pk.model_fields_set and "algorithm" in pk.cc.model_fields_set
    cfg = ib_packet_config(cfg, explicit_cc=explicit)
    if scn.spec.infiniband.adaptive_routing and not (
            "nic" in pk.model_fields_set and "receiver" in pk.nic.model_fields_set):
        cfg = cfg.model_copy(update={"nic": cfg.nic.model_copy(update={"receiver": "ooo"})})
    return cfg


def _policy_label(spec: Any, policy: str) -> str:
    """The routing a run used: the policy, or on InfiniBand the subnet manager's engine
    (``infiniband minhop``) or adaptive routing (``infiniband adaptive``)."""
    if getattr(spec, "transport", "roce") != "infiniband":
        return policy
    ib = spec.infiniband
    return "infiniband adaptive" if ib.adaptive_routing else f"infiniband {ib.routing_engine}"
