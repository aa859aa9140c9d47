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
  wait + queue + restart`` (``useful`` includes the work since the last checkpoint at the
  end), and ``ETTR = (useful - slowdown) / horizon``; ``queue`` is the scheduler's wait
  before every restart (``queue`` seconds, 0 by default).

Beyond constant rates
---------------------
* A kind with a Weibull ``shape`` other than 1 arrives as the superposition of its
  parts' first failures, every part new at the start: a power-law process of intensity
  ``rate x shape x (t / H)^(shape - 1)``, whose mean over the horizon ``H`` is ``rate``
  (the expected count stays ``rate x H``). Arrivals are drawn by inverting the summed
  cumulative intensity (in closed form when all kinds share one shape, by bisection
  otherwise) and the kind of each by the intensities at its time. With every shape 1
  the engine draws exactly as the constant-rate model (the same random numbers).
* Bad hosts (:class:`BadHosts`): each trial has ``count[t]`` of them in the job, each
  failing at ``rate``; a failure interrupts the job like a host failure that loses host
  memory, the host is back after its repair (the job waits for it) and fails again,
  until its ``removed_after``-th failure removes it: then a backup host replaces it as
  for a failed host, and the trial has one bad host fewer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import lcm

import numpy as np

__all__ = ["BadHosts", "Degrade", "EngineResult", "Kind", "Levels", "run_engine"]


@dataclass(frozen=True)
class Kind:
    """A kind of interruption: all interrupting instances of one failure class."""

    name: str
    rate: float  # interruptions per second, all instances together
    needs_host: bool = False  # a host leaves the job: spare or wait, host memory lost
    wait_s: float = 0.0  # not needs_host: time until the cut-off part is repaired
    repair_s: float = 0.0  # needs_host: until the failed host is back (as a spare)
    shape: float = 1.0  # Weibull shape of the parts' failure times (1: constant rate)
    loses_memory: bool | None = None  # host-memory checkpoints lost (None: needs_host)
    bad: int = 0  # 1: a bad host's failure (back after repair), 2: its removal


@dataclass(frozen=True)
class BadHosts:
    """Bad hosts in the job: ``count`` (T,) per trial, each failing at ``rate`` per
    second; removed at the ``removed_after``-th failure (0: never). Their failures are
    the kinds with ``bad`` 1 (back after repair) and 2 (the removal)."""

    count: np.ndarray
    rate: float
    removed_after: int


@dataclass(frozen=True)
class Degrade:
    """A failure that only slows the job (``slowdown`` >= 1) for ``duration_s``."""

    name: str
    rate: float  # per second, all degrading instances together
    slowdown: float
    duration_s: float
    shape: float = 1.0  # Weibull shape (see Kind)


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
    queue: np.ndarray | None = None  # (S, T) the scheduler's wait before restarts

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


@dataclass
class _Cycles:
    """The checkpoint cycles of every sweep point, shaped to broadcast over (S, T):
    ``base`` (S, 1) seconds of work per cycle, ``mult`` (S, 1, L), ``M`` (S, 1) cycles
    and ``P`` (S, 1) job time per super-period (the levels' least common multiple)."""

    base: np.ndarray
    mult: np.ndarray
    save: np.ndarray
    M: np.ndarray
    P: np.ndarray

    @classmethod
    def of(cls, levels: Levels) -> _Cycles:
        save = levels.save
        Mi = np.array([lcm(*map(int, row)) for row in levels.mult], dtype=np.int64)
        P = (Mi * levels.base + (save[None, :] * (Mi[:, None] // levels.mult)).sum(axis=1))
        return cls(levels.base[:, None], levels.mult[:, None, :], save, Mi[:, None],
                   P[:, None])


@dataclass
class _Kinds:
    """The interruption kinds as arrays; index K (one past the last) is "none"."""

    total: float  # interruptions per second, all kinds
    cum: np.ndarray  # (K,) cumulative share of the rate: draws a kind
    needs_host: np.ndarray  # (K + 1,) bool
    wait: np.ndarray  # (K + 1,) s
    repair: np.ndarray  # (K + 1,) s
    loses_memory: np.ndarray  # (K + 1,) bool

    @classmethod
    def of(cls, kinds: list[Kind]) -> _Kinds:
        rates = np.array([k.rate for k in kinds], dtype=np.float64)
        total = float(rates.sum())
        cum = np.cumsum(rates) / total if total > 0 else np.ones(max(len(kinds), 1))
        mem = [k.needs_host if k.loses_memory is None else k.loses_memory for k in kinds]
        return cls(total, cum, np.array([k.needs_host for k in kinds] + [False], dtype=bool),
                   np.array([k.wait_s for k in kinds] + [0.0]),
                   np.array([k.repair_s for k in kinds] + [0.0]),
                   np.array([*mem, False], dtype=bool))


class _Arrivals:
    """The next interruption of every trial and its kind.

    Constant rates and no bad hosts: exponential gaps at the total rate, the kind by its
    share (the draws of the original model, in its order). Otherwise the regular kinds'
    power-law process (:func:`_after`) and the bad hosts' exponential clock race; the
    first wins."""

    def __init__(self, kinds: list[Kind], kt: _Kinds, bad: BadHosts | None, H: float,
                 T: int, rng: np.random.Generator) -> None:
        self.kt, self.rng, self.H, self.T, self.K = kt, rng, H, T, len(kinds)
        self.reg = np.array([i for i, k in enumerate(kinds) if not k.bad], dtype=np.int64)
        self.R = np.array([kinds[i].rate for i in self.reg], dtype=np.float64)
        self.B = np.array([kinds[i].shape for i in self.reg], dtype=np.float64)
        self.bad = bad
        self.simple = bad is None and bool(np.all(self.B == 1.0)) and len(self.reg) == self.K
        if bad is not None:
            self.i_bad = next(i for i, k in enumerate(kinds) if k.bad == 1)
            self.i_out = next(i for i, k in enumerate(kinds) if k.bad == 2)
            self.nb = np.asarray(bad.count, dtype=np.int64).copy()
            self.fails = np.zeros((T, max(int(self.nb.max(initial=0)), 1)), dtype=np.int64)

    # the cumulative intensity of the regular kinds at t (T,) and its inverse
    def _cum(self, t: np.ndarray) -> np.ndarray:
        x = np.clip(t / self.H, 0.0, 1.0)[None, :]
        return (self.R[:, None] * self.H * x ** self.B[:, None]).sum(axis=0)

    def _after(self, s: np.ndarray, E: np.ndarray) -> np.ndarray:
        """The first arrival of the regular kinds after ``s``: the t with
        ``cum(t) = cum(s) + E``; inf past the horizon."""
        total_h = float(self.R.sum() * self.H)
        if total_h <= 0:
            return np.full(len(s), np.inf)
        target = self._cum(s) + E
        past = target >= total_h
        if np.all(self.B[0] == self.B):  # one shape: closed form
            t = self.H * np.minimum(target / total_h, 1.0) ** (1.0 / self.B[0])
        else:  # a few shapes: bisection on [s, H] to float precision
            lo, hi = np.asarray(s, dtype=np.float64).copy(), np.full(len(s), self.H)
            for _ in range(64):
                mid = (lo + hi) / 2
                below = self._cum(mid) < target
                lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
            t = hi
        return np.where(past, np.inf, t)

    def _bad_after(self, a: np.ndarray) -> np.ndarray:
        rate = self.nb * self.bad.rate
        gap = self.rng.exponential(1.0, self.T)
        return np.where(rate > 0, a + gap / np.where(rate > 0, rate, 1.0), np.inf)

    def first(self) -> np.ndarray:
        kt, T = self.kt, self.T
        if self.simple:
            if kt.total > 0:
                return self.rng.exponential(1.0 / kt.total, T)
            return np.full(T, np.inf)
        self.a_reg = self._after(np.zeros(T), self.rng.exponential(1.0, T))
        self.a_bad = self._bad_after(np.zeros(T)) if self.bad is not None \
            else np.full(T, np.inf)
        return np.minimum(self.a_reg, self.a_bad)

    def kind(self, a: np.ndarray, act: np.ndarray) -> np.ndarray:
        """The kind of each active trial's interruption at ``a`` (K: none)."""
        K, T = self.K, self.T
        if self.simple:
            ki = np.minimum(np.searchsorted(self.kt.cum, self.rng.random(T), side="right"),
                            K - 1)
            return np.where(act, ki, K)
        u = self.rng.random(T)
        ki = np.full(T, K, dtype=np.int64)
        if len(self.reg):
            x = np.clip(a / self.H, 1e-300, 1.0)[None, :]
            w = self.R[:, None] * self.B[:, None] * x ** (self.B[:, None] - 1.0)
            cum = np.cumsum(w, axis=0)
            tot = cum[-1]
            j = np.minimum((u[None, :] * tot[None, :] >= cum).sum(axis=0), len(self.reg) - 1)
            ki = self.reg[j]
        self.was_bad = act & (self.a_bad <= self.a_reg) if self.bad is not None \
            else np.zeros(T, dtype=bool)
        if self.was_bad.any():
            t = np.flatnonzero(self.was_bad)
            slot = np.minimum((self.rng.random(len(t)) * self.nb[t]).astype(np.int64),
                              self.nb[t] - 1)
            self.fails[t, slot] += 1
            out = (self.bad.removed_after > 0) & (self.fails[t, slot] >= self.bad.removed_after)
            ki[t] = np.where(out, self.i_out, self.i_bad)
            r = t[out]  # removed: the last bad host takes its slot
            self.fails[r, slot[out]] = self.fails[r, self.nb[r] - 1]
            self.fails[r, self.nb[r] - 1] = 0
            self.nb[r] -= 1
        return np.where(act, ki, K)

    def next(self, a: np.ndarray, act: np.ndarray) -> np.ndarray:
        """Every active trial's next interruption after the one at ``a``."""
        kt, T = self.kt, self.T
        if self.simple:
            return np.where(act, a + (self.rng.exponential(1.0 / kt.total, T) if kt.total > 0
                                      else np.inf), a)
        reg = act & ~self.was_bad
        if reg.any():
            self.a_reg = np.where(reg, self._after(a, self.rng.exponential(1.0, T)),
                                  self.a_reg)
        if self.was_bad.any():
            self.a_bad = np.where(self.was_bad, self._bad_after(a), self.a_bad)
        return np.where(act, np.minimum(self.a_reg, self.a_bad), a)


class _Trials:
    """The state of every trial at every sweep point (S, T) and what it has lost so far.

    Between interruptions a trial trains from cycle ``k0`` (its last restart) once it is
    up again (``t_up``); the pending recovery started at ``r0`` and has the phases
    ``ph_d`` (detect), ``ph_w`` (wait) and ``ph_r`` (restart + restore)."""

    def __init__(self, S: int, T: int, K: int, L: int) -> None:
        shape = (S, T)
        self.k0 = np.zeros(shape, dtype=np.int64)  # base cycle of the last restart
        self.t_up = np.zeros(shape)  # when the job runs again
        self.valid_from = np.zeros(shape, dtype=np.int64)  # host-memory copies: from this
        self.r0 = np.zeros(shape)  # pending recovery: start and phases
        self.ph_d, self.ph_w, self.ph_r = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.ph_q = np.zeros(shape)  # the scheduler's queue, between the wait and restart
        self.pend = np.full(T, K, dtype=np.int64)  # kind of the pending recovery (K: none)
        self.acc = {k: np.zeros(shape)
                    for k in ("recompute", "stalls", "detect", "wait", "restart", "queue")}
        self.counts = np.zeros((K, T))
        self.lost_kind = np.zeros((K + 1, T))
        self.restores = np.zeros(L + 1)
        self.swapped = np.zeros(T)
        self.waited = np.zeros(T)
        self.arange_t = np.arange(T)

    def charge(self, until: np.ndarray, mask: np.ndarray) -> None:
        """Book the pending recovery's time up to ``until`` by phase."""
        el = np.clip(until - self.r0, 0.0, None)
        d = np.minimum(el, self.ph_d)
        w = np.clip(el - self.ph_d, 0.0, self.ph_w)
        q = np.clip(el - self.ph_d - self.ph_w, 0.0, self.ph_q)
        r = np.clip(el - self.ph_d - self.ph_w - self.ph_q, 0.0, self.ph_r)
        for name, v in (("detect", d), ("wait", w), ("queue", q), ("restart", r)):
            self.acc[name] += np.where(mask, v, 0.0)
        self.lost_kind[self.pend, self.arange_t] += np.where(
            mask[0], d[0] + w[0] + q[0] + r[0], 0.0)

    def advance(self, cyc: _Cycles, until: np.ndarray, mask: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Train until ``until``: the job time ``e`` since ``t_up``, the cycles completed
        ``n`` and the partial work of the next one; stalls are booked."""
        run = mask & (until > self.t_up)
        e = np.where(run, until - self.t_up, 0.0)
        n, r = _progress(cyc.base, cyc.mult, cyc.save, cyc.M, cyc.P, self.k0, e)
        part = np.minimum(r, cyc.base)
        self.acc["stalls"] += np.where(run, e - (n * cyc.base + part), 0.0)
        return e, n, part

    def restart_from(self, aa: np.ndarray, am: np.ndarray, act: np.ndarray, ki: np.ndarray,
                     w: np.ndarray, best: np.ndarray, rest_s: np.ndarray, nh: np.ndarray,
                     detect: float, restart: float, queue: float = 0.0) -> None:
        """Start the recovery from the interruptions at ``aa``: down for detect + wait +
        the scheduler's queue + restart and restore, then training from checkpoint cycle
        ``best``. A part the
        previous recovery still waits for (a switch under repair, a host with no spare)
        is still missing: its wait goes on."""
        hold = np.maximum(self.r0 + self.ph_d + self.ph_w - aa - detect, 0.0)
        self.r0 = np.where(am, aa, self.r0)
        self.ph_d = np.where(am, detect, self.ph_d)
        self.ph_w = np.where(am, np.maximum(w[None, :], hold), self.ph_w)
        self.ph_q = np.where(am, queue, self.ph_q)
        self.ph_r = np.where(am, restart + rest_s, self.ph_r)
        self.pend = np.where(act, ki, self.pend)
        self.t_up = np.where(am, aa + self.ph_d + self.ph_w + self.ph_q + self.ph_r, self.t_up)
        self.valid_from = np.where(am & nh, best, self.valid_from)
        self.k0 = np.where(am, best, self.k0)


def _newest_checkpoints(cyc: _Cycles, levels: Levels, st: _Trials, k_done: np.ndarray,
                        e: np.ndarray, nh: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The newest usable checkpoint (cycle index; 0 = from scratch), the least restore
    time among the levels that hold it (inf: none), and every level's newest usable
    checkpoint (-1 = none). A checkpoint is usable once saved and uploaded; a host-memory
    one not after its host is lost (``nh``), nor from before the last such loss."""
    shape = k_done.shape
    best = np.zeros(shape, dtype=np.int64)  # from scratch: cycle 0
    rest = np.full(shape, np.inf)
    cands = []
    for lv in range(len(levels.names)):
        m = cyc.mult[..., lv]
        j = (k_done // m) * m
        done = _cost(cyc.base, cyc.mult, cyc.save, st.k0, j - st.k0) + levels.upload[lv]
        late = (j > st.k0) & (e < done)
        j = np.where(late, j - m, j)
        ok = np.ones(shape, dtype=bool)
        if levels.host_memory[lv]:
            ok = ~nh & (j >= st.valid_from)
        cands.append(np.where(ok, j, -1))
    for lv in range(len(levels.names)):
        best = np.maximum(best, cands[lv])
    for lv in range(len(levels.names)):
        rest = np.where(cands[lv] == best, np.minimum(rest, levels.restore[lv]), rest)
    return best, rest, cands


def _restored_level(levels: Levels, cands: list[np.ndarray], best: np.ndarray,
                    rest: np.ndarray) -> np.ndarray:
    """(T,) the level restored at sweep point 0 (L: from scratch)."""
    L = len(levels.names)
    which = np.full(best.shape[1], L)
    for lv in reversed(range(L)):
        which = np.where((cands[lv][0] == best[0]) & (levels.restore[lv] == rest[0]), lv,
                         which)
    return which


def _host_waits(w: np.ndarray, a: np.ndarray, hn: np.ndarray, ki: np.ndarray,
                pool: np.ndarray, kt: _Kinds, st: _Trials, free_at: np.ndarray,
                spares: int, detect: float, swap: float) -> None:
    """The wait (in ``w``) of the trials whose failure takes a host out (``hn``): a
    backup host of its pool if one is free, else the first of the pool to come back or
    the failed host's own repair, whichever is first; then the swap."""
    idx = np.flatnonzero(hn)
    own = a[idx] + kt.repair[ki[idx]]
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
    st.swapped[idx] += is_free
    st.waited[idx] += ~is_free


def _degradations(degrades: list[Degrade], rng: np.random.Generator, H: float,
                  T: int) -> tuple[np.ndarray, np.ndarray]:
    """(T,) training time lost to degraded periods and (D, T) their counts."""
    slow = np.zeros(T)
    dcounts = np.zeros((len(degrades), T))
    for i, dg in enumerate(degrades):
        c = rng.poisson(dg.rate * H, T) if dg.rate > 0 else np.zeros(T, dtype=np.int64)
        dcounts[i] = c
        if c.sum():
            who = np.repeat(np.arange(T), c)
            t0 = rng.uniform(0.0, H, len(who))
            if dg.shape != 1.0:  # the power-law process: cum(t) / cum(H) = (t / H)^shape
                t0 = H * (t0 / H) ** (1.0 / dg.shape)
            loss = (1.0 - 1.0 / dg.slowdown) * np.minimum(dg.duration_s, H - t0)
            slow += np.bincount(who, weights=loss, minlength=T)
    return slow, dcounts


def run_engine(kinds: list[Kind], degrades: list[Degrade], levels: Levels, *,
               detect: float, restart: float, swap: float, spares: int,
               pool_weights: np.ndarray, horizon: float, trials: int,
               seed: int, queue: float = 0.0, bad: BadHosts | None = None,
               draw: str = "auto") -> EngineResult:
    """Simulate ``trials`` runs of ``horizon`` seconds for every sweep point of
    ``levels``; ``pool_weights`` (P,): how the job's hosts spread over the spare pools,
    each with ``spares`` backup hosts; ``queue``: the scheduler's wait before every
    restart; ``bad``: bad hosts. ``draw="general"`` draws the arrivals by inverting the
    cumulative intensity even when every rate is constant (the check that shape 1 is the
    exponential)."""
    rng = np.random.default_rng(seed)
    T, H = int(trials), float(horizon)
    S, L = levels.mult.shape
    K = len(kinds)
    cyc = _Cycles.of(levels)
    kt = _Kinds.of(kinds)
    pw = np.asarray(pool_weights, dtype=np.float64)
    pcum = np.cumsum(pw) / pw.sum()
    n_pools = len(pw)
    free_at = np.full((T, n_pools, spares), -np.inf)  # when each spare slot is free
    st = _Trials(S, T, K, L)
    shape = (S, T)
    arr = _Arrivals(kinds, kt, bad, H, T, rng)
    if draw == "general":
        arr.simple = False

    a = arr.first()  # the next interruption of every trial
    while True:
        act = a < H
        if not act.any():
            break
        ki = arr.kind(a, act)
        pool = np.minimum(np.searchsorted(pcum, rng.random(T), side="right"), n_pools - 1)
        am = act[None, :]
        aa = np.broadcast_to(a[None, :], shape)
        st.charge(aa, am)
        e, n, part = st.advance(cyc, aa, am)
        k_done = st.k0 + n
        nh = kt.loses_memory[ki][None, :]
        best, rest, cands = _newest_checkpoints(cyc, levels, st, k_done, e, nh)
        rest_s = np.where(np.isfinite(rest), rest, 0.0)
        lost = np.where(am, (k_done - best) * cyc.base + part, 0.0)
        st.acc["recompute"] += lost
        st.lost_kind[ki, st.arange_t] += np.where(act, lost[0], 0.0)
        np.add.at(st.restores, _restored_level(levels, cands, best, rest)[act], 1.0)
        # recovery: the wait of this kind (shared by every sweep point)
        w = np.where(act, np.maximum(kt.wait[ki] - detect, 0.0), 0.0)
        hn = act & kt.needs_host[ki]
        if hn.any():
            _host_waits(w, a, hn, ki, pool, kt, st, free_at, spares, detect, swap)
        st.counts[ki[act], st.arange_t[act]] += 1.0
        st.restart_from(aa, am, act, ki, w, best, rest_s, nh, detect, restart, queue)
        a = arr.next(a, act)
    HH = np.full(shape, H)
    st.charge(HH, np.ones(shape, dtype=bool))
    _, n, part = st.advance(cyc, HH, np.ones(shape, dtype=bool))
    useful = (st.k0 + n) * cyc.base + part
    slow, dcounts = _degradations(degrades, rng, H, T)
    return EngineResult(horizon=H, useful=useful, slowdown=slow, counts=st.counts,
                        degrades=dcounts, swapped=st.swapped, waited=st.waited,
                        lost_by_kind=st.lost_kind[:K], restores=st.restores, **st.acc)
