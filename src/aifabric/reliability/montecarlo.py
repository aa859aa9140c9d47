"""The Monte Carlo engine: failures arriving over the horizon, recovery, lost work.

Pure numpy, no fabric: the caller (:mod:`aifabric.reliability.model`) has already asked the
routing model which failures interrupt the job (:class:`Kind`, one per failure class with
its total rate) and which only slow it (:class:`Degrade`). Every trial is simulated at
once (arrays over trials), and so is every point of a checkpoint-interval sweep (arrays
over sweep points x trials); all sweep points see the same failures (common random
numbers), so their differences are not drowned in the noise of the failure counts.

The model, per trial
--------------------
* Interruptions arrive as a Poisson process in wall-clock time with rate
  ``sum(kind.rate)``; each is of kind *k* with probability ``rate_k / sum``.
* Training progresses in *base cycles* of ``tau`` seconds of work (the most frequent
  checkpoint level's interval); a level with multiple ``m`` checkpoints every ``m``
  cycles. At the end of a cycle the job stalls for the ``save`` of every level due then;
  a level's checkpoint is usable once its stall is over and its background ``upload`` is
  done (a failure in between falls back to that level's previous checkpoint).
* On an interruption: the work since the newest *usable* checkpoint is lost
  (recomputation). A failure that takes a host out (``needs_host``) makes host-memory
  levels unusable: their copy on that host is gone. The job is down for ``detect`` +
  ``wait`` + ``restart + restore`` of the level restored; ``wait`` is the swap of a
  backup host when one is free in the failed host's pool, else the wait until the first
  host of the pool (or the failed one) is back from repair, plus the swap; for a switch
  or link that cut the job off it is the component's repair. A failure during recovery
  starts the recovery again (it loses no further work unless it also loses the level
  being restored), and it does not end the wait for a part that is still missing: the
  job restarts once every part it waits for is back.
* A :class:`Degrade` (e.g. a dual-ToR host lost one port) does not stop the job: it runs
  ``slowdown`` times slower until the part is repaired. Its cost is charged as
  ``(1 - 1/slowdown) x min(repair, time left)`` of training time; its interplay with
  checkpoint timing is neglected (second order).
* Time accounting is exact per trial: ``horizon = useful + recompute + stalls + detect +
  wait + restart`` (``useful`` includes the work since the last checkpoint at the end),
  and ``ETTR = (useful - slowdown) / horizon``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import lcm

import numpy as np

__all__ = ["Degrade", "EngineResult", "Kind", "Levels", "run_engine"]


@dataclass(frozen=True)
class Kind:
    """A kind of interruption: all interrupting instances of one failure class."""

    name: str
    rate: float  # interruptions per second, all instances together
    needs_host: bool = False  # a host leaves the job: spare or wait, host memory lost
    wait_s: float = 0.0  # not needs_host: time until the cut-off part is repaired
    repair_s: float = 0.0  # needs_host: until the failed host is back (as a spare)


@dataclass(frozen=True)
class Degrade:
    """A failure that only slows the job (``slowdown`` >= 1) for ``duration_s``."""

    name: str
    rate: float  # per second, all degrading instances together
    slowdown: float
    duration_s: float


@dataclass
class Levels:
    """Checkpoint levels for every sweep point: level ``l`` checkpoints every
    ``mult[s, l]`` base cycles of ``base[s]`` seconds."""

    names: list[str]
    base: np.ndarray  # (S,) seconds of work per base cycle
    mult: np.ndarray  # (S, L) int >= 1
    save: np.ndarray  # (L,) stall, s
    upload: np.ndarray  # (L,) background copy, s
    restore: np.ndarray  # (L,) s
    host_memory: np.ndarray  # (L,) bool: lost with its host

    def __post_init__(self) -> None:
        self.base = np.asarray(self.base, dtype=np.float64).reshape(-1)
        self.mult = np.asarray(self.mult, dtype=np.int64).reshape(len(self.base), -1)
        for name in ("save", "upload", "restore"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        self.host_memory = np.asarray(self.host_memory, dtype=bool)


@dataclass
class EngineResult:
    """Per sweep point ``s`` and trial ``t`` (seconds unless named otherwise)."""

    horizon: float
    useful: np.ndarray  # (S, T) progress made (before slowdown)
    slowdown: np.ndarray  # (T,) training time lost to degraded periods
    recompute: np.ndarray  # (S, T)
    stalls: np.ndarray  # (S, T)
    detect: np.ndarray  # (S, T)
    wait: np.ndarray  # (S, T)
    restart: np.ndarray  # (S, T) restart + restore
    counts: np.ndarray  # (K, T) interruptions per kind
    degrades: np.ndarray  # (D, T) degradations per kind
    swapped: np.ndarray  # (T,) backup hosts swapped in
    waited: np.ndarray  # (T,) host failures that found no spare free
    lost_by_kind: np.ndarray  # (K, T) recompute + downtime by kind, sweep point 0
    #: (L + 1,) restores from each level (the last: from scratch), sweep point 0
    restores: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def ettr(self) -> np.ndarray:
        """(S, T) effective training time ratio."""
        return (self.useful - self.slowdown[None, :]) / self.horizon


def _cost(base: np.ndarray, mult: np.ndarray, save: np.ndarray, k0: np.ndarray,
          n: np.ndarray) -> np.ndarray:
    """Job time (work + stalls) of cycles ``k0+1 .. k0+n`` including their stalls."""
    c = n * base
    for lv in range(mult.shape[-1]):
        m = mult[..., lv]
        c = c + save[lv] * ((k0 + n) // m - k0 // m)
    return c


def _progress(base, mult, save, M, P, k0, e):
    """Completed cycles ``n`` and the partial work ``r`` after job time ``e`` from cycle
    boundary ``k0`` (``r`` >= ``base`` means: in the stall after cycle ``n + 1``).

    Whole super-periods (``M`` cycles, the levels' least common multiple, cost ``P``)
    first, then a bisection over the cycles of the last one."""
    q = np.floor(e / P).astype(np.int64)
    rem = e - q * P
    start = k0 + q * M
    L = mult.shape[-1]
    ms = [mult[..., lv] for lv in range(L)]
    before = [start // m for m in ms]

    def cost(n):
        c = n * base
        for lv in range(L):
            if save[lv]:
                c = c + save[lv] * ((start + n) // ms[lv] - before[lv])
        return c

    lo = np.zeros_like(k0)
    hi = np.broadcast_to(M, k0.shape).copy()
    while True:
        open_ = hi - lo > 1
        if not open_.any():
            break
        mid = (lo + hi) // 2
        ok = cost(mid) <= rem
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    n = q * M + lo
    r = rem - cost(lo)
    return n, np.maximum(r, 0.0)


def run_engine(kinds: list[Kind], degrades: list[Degrade], levels: Levels, *,
               detect: float, restart: float, swap: float, spares: int,
               pool_weights: np.ndarray, horizon: float, trials: int,
               seed: int) -> EngineResult:
    """Simulate ``trials`` runs of ``horizon`` seconds for every sweep point of
    ``levels``; ``pool_weights`` (P,): how the job's hosts spread over the spare pools,
    each with ``spares`` backup hosts."""
    rng = np.random.default_rng(seed)
    T, H = int(trials), float(horizon)
    S, L = levels.mult.shape
    K = len(kinds)
    base = levels.base[:, None]  # (S, 1)
    mult = levels.mult[:, None, :]  # (S, 1, L)
    save, upload, restore = levels.save, levels.upload, levels.restore
    hostmem = levels.host_memory
    Mi = np.array([lcm(*map(int, row)) for row in levels.mult], dtype=np.int64)
    M = Mi[:, None]
    P = (Mi * levels.base + (save[None, :] * (Mi[:, None] // levels.mult)).sum(axis=1))[:, None]

    rates = np.array([k.rate for k in kinds], dtype=np.float64)
    total = float(rates.sum())
    cum = np.cumsum(rates) / total if total > 0 else np.ones(max(K, 1))
    needs_host = np.array([k.needs_host for k in kinds] + [False], dtype=bool)
    wait_k = np.array([k.wait_s for k in kinds] + [0.0])
    repair_k = np.array([k.repair_s for k in kinds] + [0.0])
    pw = np.asarray(pool_weights, dtype=np.float64)
    pcum = np.cumsum(pw) / pw.sum()
    n_pools = len(pw)
    free_at = np.full((T, n_pools, spares), -np.inf)  # when each spare slot is free

    shape = (S, T)
    k0 = np.zeros(shape, dtype=np.int64)  # base cycle of the last restart
    t_up = np.zeros(shape)  # when the job runs again
    valid_from = np.zeros(shape, dtype=np.int64)  # host-memory copies: from this cycle
    r0 = np.zeros(shape)  # pending recovery: start and phases
    ph_d, ph_w, ph_r = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    pend = np.full(T, K, dtype=np.int64)  # kind of the pending recovery (K: none)
    acc = {k: np.zeros(shape) for k in ("recompute", "stalls", "detect", "wait", "restart")}
    counts = np.zeros((K, T))
    lost_kind = np.zeros((K + 1, T))
    restores = np.zeros(L + 1)
    swapped = np.zeros(T)
    waited = np.zeros(T)
    arange_t = np.arange(T)

    def charge(until: np.ndarray, mask: np.ndarray) -> None:
        el = np.clip(until - r0, 0.0, None)
        d = np.minimum(el, ph_d)
        w = np.clip(el - ph_d, 0.0, ph_w)
        r = np.clip(el - ph_d - ph_w, 0.0, ph_r)
        for name, v in (("detect", d), ("wait", w), ("restart", r)):
            acc[name] += np.where(mask, v, 0.0)
        lost_kind[pend, arange_t] += np.where(mask[0], d[0] + w[0] + r[0], 0.0)

    def advance(until: np.ndarray, mask: np.ndarray):
        run = mask & (until > t_up)
        e = np.where(run, until - t_up, 0.0)
        n, r = _progress(base, mult, save, M, P, k0, e)
        part = np.minimum(r, base)
        acc["stalls"] += np.where(run, e - (n * base + part), 0.0)
        return e, n, part

    a = np.zeros(T)
    if total > 0:
        a = rng.exponential(1.0 / total, T)
    else:
        a[:] = np.inf
    while True:
        act = a < H
        if not act.any():
            break
        ki = np.minimum(np.searchsorted(cum, rng.random(T), side="right"), K - 1)
        ki = np.where(act, ki, K)
        pool = np.minimum(np.searchsorted(pcum, rng.random(T), side="right"), n_pools - 1)
        am = act[None, :]
        aa = np.broadcast_to(a[None, :], shape)
        charge(aa, am)
        e, n, part = advance(aa, am)
        K_done = k0 + n
        # the newest usable checkpoint of every level (cycle index), -1 = none
        nh = needs_host[ki][None, :]
        best = np.zeros(shape, dtype=np.int64)  # from scratch: cycle 0
        rest = np.full(shape, np.inf)
        cands = []
        for lv in range(L):
            m = mult[..., lv]
            j = (K_done // m) * m
            done = _cost(base, mult, save, k0, j - k0) + upload[lv]
            late = (j > k0) & (e < done)
            j = np.where(late, j - m, j)
            ok = np.ones(shape, dtype=bool)
            if hostmem[lv]:
                ok = ~nh & (j >= valid_from)
            cands.append(np.where(ok, j, -1))
        for lv in range(L):
            best = np.maximum(best, cands[lv])
        for lv in range(L):
            rest = np.where(cands[lv] == best, np.minimum(rest, restore[lv]), rest)
        rest_s = np.where(np.isfinite(rest), rest, 0.0)
        lost = np.where(am, (K_done - best) * base + part, 0.0)
        acc["recompute"] += lost
        lost_kind[ki, arange_t] += np.where(act, lost[0], 0.0)
        which = np.full(T, L)
        for lv in reversed(range(L)):
            which = np.where((cands[lv][0] == best[0]) & (restore[lv] == rest[0]), lv, which)
        np.add.at(restores, which[act], 1.0)
        # recovery: the wait of this kind (shared by every sweep point)
        w = np.where(act, np.maximum(wait_k[ki] - detect, 0.0), 0.0)
        hn = act & needs_host[ki]
        if hn.any():
            idx = np.flatnonzero(hn)
            own = a[idx] + repair_k[ki[idx]]
            if spares > 0:
                slots = free_at[idx, pool[idx], :]
                j = np.argmin(slots, axis=1)
                m = slots[np.arange(len(idx)), j]
                is_free = m <= a[idx]
                ready = np.where(is_free, a[idx], np.minimum(m, own))
                take = is_free | (m < own)
                free_at[idx[take], pool[idx[take]], j[take]] = own[take]
            else:
                is_free = np.zeros(len(idx), dtype=bool)
                ready = own
            w[idx] = np.maximum(ready - a[idx] - detect, 0.0) + swap
            swapped[idx] += is_free
            waited[idx] += ~is_free
        counts[ki[act], arange_t[act]] += 1.0
        # the new pending recovery; a part the previous one still waits for (a switch
        # under repair, a host with no spare) is still missing: its wait goes on
        hold = np.maximum(r0 + ph_d + ph_w - aa - detect, 0.0)
        r0 = np.where(am, aa, r0)
        ph_d = np.where(am, detect, ph_d)
        ph_w = np.where(am, np.maximum(w[None, :], hold), ph_w)
        ph_r = np.where(am, restart + rest_s, ph_r)
        pend = np.where(act, ki, pend)
        t_up = np.where(am, aa + ph_d + ph_w + ph_r, t_up)
        valid_from = np.where(am & nh, best, valid_from)
        k0 = np.where(am, best, k0)
        a = np.where(act, a + (rng.exponential(1.0 / total, T) if total > 0 else np.inf), a)
    HH = np.full(shape, H)
    alls = np.ones(shape, dtype=bool)
    charge(HH, alls)
    e, n, part = advance(HH, alls)
    useful = (k0 + n) * base + part
    # degraded periods
    slow = np.zeros(T)
    dcounts = np.zeros((len(degrades), T))
    for i, dg in enumerate(degrades):
        c = rng.poisson(dg.rate * H, T) if dg.rate > 0 else np.zeros(T, dtype=np.int64)
        dcounts[i] = c
        if c.sum():
            who = np.repeat(np.arange(T), c)
            t0 = rng.uniform(0.0, H, len(who))
            loss = (1.0 - 1.0 / dg.slowdown) * np.minimum(dg.duration_s, H - t0)
            slow += np.bincount(who, weights=loss, minlength=T)
    return EngineResult(horizon=H, useful=useful, slowdown=slow, counts=counts,
                        degrades=dcounts, swapped=swapped, waited=waited,
                        lost_by_kind=lost_kind[:K], restores=restores, **acc)
