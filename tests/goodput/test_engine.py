"""The Monte Carlo engine against closed forms (exponential failures, no topology).

Model under test (see :mod:`aifabric.reliability.montecarlo`): failures arrive as a Poisson
process of rate ``lam = 1/M`` in wall-clock time; one checkpoint level every ``tau``
seconds of work with a stall ``delta``; a failure loses the work since the last
checkpoint and costs ``D + R`` (detect + restart) of downtime, and a failure during the
downtime starts it again.

* Renewal argument (exact, long horizon): a cycle of ``tau + delta`` completes without
  failure with probability ``exp(-lam (tau + delta))``; the expected wall time to
  complete one is ``(exp(lam (tau + delta)) - 1) exp(lam (D + R)) / lam``, so
  ``ETTR = lam tau exp(-lam (D + R)) / (exp(lam (tau + delta)) - 1)``.
* Expanding to first order in ``delta/tau``, ``tau/M`` and ``(D + R)/M``:
  ``ETTR ~ 1 - delta/tau - tau/(2M) - (D + R)/M``, maximal at Young's interval
  ``tau* = sqrt(2 delta M)``. Its neglected terms are second order: here
  ``(delta/tau)^2 + (tau/M)^2 + delta/M + (D + R) tau/M^2`` ~ 1e-3 (bounded below).
"""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.reliability.model import optimum
from aifabric.reliability.montecarlo import Degrade, Kind, Levels, run_engine

M = 10 * 3600.0  # job MTBF
DELTA = 18.0  # checkpoint stall
D, R = 60.0, 120.0  # detect, restart
YEAR = 365 * 86400.0


def _levels(taus: np.ndarray, save: float = DELTA, upload: float = 0.0,
            host_memory: bool = False) -> Levels:
    taus = np.atleast_1d(np.asarray(taus, dtype=float))
    return Levels(["l"], taus, np.ones((len(taus), 1)), [save], [upload], [0.0], [host_memory])


def _run(taus, trials=1000, seed=1, horizon=YEAR, kinds=None, **kw):
    kinds = kinds or [Kind("software", 1.0 / M)]
    args = dict(detect=D, restart=R, swap=0.0, spares=0, pool_weights=np.ones(1),
                horizon=horizon, trials=trials, seed=seed)
    args.update(kw)
    return run_engine(kinds, [], _levels(taus), **args)


def exact(tau, delta=DELTA, lam=1.0 / M, down=D + R):
    return lam * tau * np.exp(-lam * down) / np.expm1(lam * (tau + delta))


def first_order(tau, delta=DELTA, m=M, down=D + R):
    return 1 - delta / tau - tau / (2 * m) - down / m


@pytest.fixture(scope="module")
def sweep():
    young = np.sqrt(2 * DELTA * M)
    taus = young * np.geomspace(0.4, 2.5, 25)
    return young, taus, _run(taus, trials=2000, seed=7, horizon=YEAR / 2)


def test_interruption_count_is_poisson():
    lam, H, T = 1.0 / M, 60 * 86400.0, 4000
    r = _run([600.0], trials=T, horizon=H, seed=3)
    n = r.counts.sum(axis=0)
    mu = lam * H
    assert abs(n.mean() - mu) < 4 * np.sqrt(mu / T)
    # Poisson: variance = mean (the sample variance's sd is ~ mu sqrt(2/T))
    assert abs(n.var() - mu) < 4 * mu * np.sqrt(2.0 / T)


def test_counts_split_by_kind_in_proportion():
    kinds = [Kind("gpu", 3.0 / M), Kind("software", 1.0 / M)]
    r = _run([600.0], kinds=kinds, trials=2000, horizon=30 * 86400.0)
    mu = 30 * 86400.0 / M
    for i, share in enumerate((3.0, 1.0)):
        assert abs(r.counts[i].mean() - share * mu) < 4 * np.sqrt(share * mu / 2000)


def test_time_accounting_is_exact_per_trial(sweep):
    _, _, r = sweep
    total = r.useful + r.recompute + r.stalls + r.detect + r.wait + r.restart
    assert np.abs(total - r.horizon).max() < 1e-6 * r.horizon
    assert (r.recompute >= 0).all() and (r.stalls >= 0).all()


def test_ettr_matches_the_renewal_formula(sweep):
    _, taus, r = sweep
    mean = r.ettr.mean(axis=1)
    se = r.ettr.std(axis=1) / np.sqrt(r.ettr.shape[1])
    edge = taus / r.horizon  # the last, unfinished cycle counts as useful
    assert (np.abs(mean - exact(taus)) < 4 * se + edge).all()


def test_optimum_is_young_and_ettr_is_first_order(sweep):
    young, taus, r = sweep
    mean = r.ettr.mean(axis=1)
    opt = optimum(taus, mean)
    assert abs(opt / young - 1) < 0.05, (opt, young)
    # at the simulated optimum, the first-order formula holds to second order
    best = int(np.argmin(np.abs(taus - opt)))
    x = taus[best]
    second = (DELTA / x) ** 2 + (x / M) ** 2 + DELTA / M + (D + R) * x / M**2
    assert abs(mean[best] - first_order(x)) < second
    # and the simulated curve is not flat: the ends are clearly worse
    assert mean[best] - max(mean[0], mean[-1]) > 5 * r.ettr.std(axis=1).max() / np.sqrt(2000)


def test_no_failures_costs_only_the_stalls():
    r = _run([600.0], kinds=[Kind("gpu", 0.0)], trials=3, horizon=86400.0)
    cycles = 86400.0 // (600 + DELTA)
    assert r.counts.sum() == 0
    assert np.allclose(r.stalls, cycles * DELTA)
    assert np.allclose(r.ettr, (86400.0 - cycles * DELTA) / 86400.0)


@pytest.mark.parametrize("k", [0, 1, 3])
def test_the_k_plus_first_host_failure_waits_for_repair(k):
    """k spares in one pool; hosts are repaired only after the horizon: the first k host
    failures swap a spare in, every later one waits (for its own repair)."""
    H = 30 * 86400.0
    kinds = [Kind("host", 8.0 / H, needs_host=True, repair_s=10 * H)]
    r = _run([600.0], kinds=kinds, trials=500, horizon=H, spares=k, swap=900.0)
    n = r.counts.sum(axis=0)
    assert n.max() > k + 1  # the test sees trials past the spares
    assert np.array_equal(r.swapped, np.minimum(n, k))
    assert np.array_equal(r.waited, np.maximum(n - k, 0))
    # a wait for repair outlasts the horizon: nothing useful after the (k+1)-th failure
    hit = n > k
    assert (r.wait[0][hit] > 0).all()


def test_spares_come_back_after_repair():
    """Repairs faster than failures: a single spare is (almost) always free again."""
    H = 30 * 86400.0
    kinds = [Kind("host", 8.0 / H, needs_host=True, repair_s=60.0)]
    r = _run([600.0], kinds=kinds, trials=300, horizon=H, spares=1, swap=900.0)
    assert r.waited.sum() <= 0.01 * r.swapped.sum()


def test_host_memory_copies_are_lost_with_the_host():
    """Memory every tau, storage every 6 tau: a failure that replaces a host restores from
    storage (loses ~3 tau), one that does not restores from memory (~tau/2)."""
    tau = 600.0
    lv = Levels(["mem", "sto"], [tau], [[1, 6]], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0],
                [True, False])
    H = 365 * 86400.0
    args = dict(detect=0.0, restart=0.0, swap=0.0, spares=10**3, pool_weights=np.ones(1),
                horizon=H, trials=300, seed=5)
    soft = run_engine([Kind("software", 1 / M)], [], lv, **args)
    host = run_engine([Kind("gpu", 1 / M, needs_host=True, repair_s=1.0)], [], lv, **args)
    per_soft = soft.recompute.sum() / soft.counts.sum()
    per_host = host.recompute.sum() / host.counts.sum()
    assert abs(per_soft / tau - 0.5) < 0.05
    assert abs(per_host / (6 * tau) - 0.5) < 0.05


def test_an_unfinished_upload_is_not_used():
    """A checkpoint whose background upload outlasts most of its interval is usually not
    yet usable when the failure comes: the loss per failure grows accordingly."""
    tau = 600.0
    args = dict(detect=0.0, restart=0.0, swap=0.0, spares=0, pool_weights=np.ones(1),
                horizon=YEAR, trials=300, seed=9)
    fast = run_engine([Kind("s", 1 / M)], [], _levels([tau], save=1.0, upload=0.0), **args)
    slow = run_engine([Kind("s", 1 / M)], [], _levels([tau], save=1.0, upload=0.9 * tau),
                      **args)
    lf = fast.recompute.sum() / fast.counts.sum()
    ls = slow.recompute.sum() / slow.counts.sum()
    # uniform failure phase: the previous checkpoint (one tau more) with probability 0.9,
    # except in the first cycle after a restart, whose checkpoint is the one restored (a
    # fraction ~ tau/M of the failures)
    assert abs((ls - lf) / tau - 0.9 * (1 - tau / M)) < 0.03


def test_degradation_costs_its_slowdown():
    H = 30 * 86400.0
    dg = [Degrade("tor", 4.0 / H, slowdown=1.25, duration_s=3600.0)]
    r = run_engine([], dg, _levels([600.0]), detect=0, restart=0, swap=0, spares=0,
                   pool_weights=np.ones(1), horizon=H, trials=2000, seed=2)
    # each degradation: 1 h at 1/1.25 speed = 0.2 h lost (far from the horizon's end)
    per = r.slowdown.sum() / r.degrades.sum()
    assert abs(per / 3600.0 - 0.2) < 0.002


def test_same_seed_same_answer():
    a = _run([600.0, 900.0], trials=50, horizon=30 * 86400.0, seed=11)
    b = _run([600.0, 900.0], trials=50, horizon=30 * 86400.0, seed=11)
    assert np.array_equal(a.ettr, b.ettr)


def test_progress_inverts_the_job_time_exactly():
    """Cycles completed and partial work after job time ``e`` from cycle ``k0``, against a
    walk cycle by cycle (work, then the stalls of every level due at its end)."""
    from math import lcm

    from aifabric.reliability.montecarlo import _progress

    rng = np.random.default_rng(0)
    base, mult, save = 60.0, np.array([1, 4, 6]), np.array([2.0, 5.0, 30.0])
    M = lcm(*mult.tolist())
    P = M * base + (save * (M // mult)).sum()
    k0 = rng.integers(0, 50, 400)
    e = rng.uniform(0, 3000, 400)
    n, r = _progress(np.array([[base]]), mult[None, None, :], save, np.array([[M]]),
                     np.array([[P]]), k0[None, :], e[None, :])
    for i in range(len(k0)):
        k, t = int(k0[i]), e[i]
        while True:
            stall = save[(k + 1) % mult == 0].sum()
            if t < base + stall:
                break
            t -= base + stall
            k += 1
        assert n[0, i] == k - k0[i]
        assert abs(r[0, i] - t) < 1e-6


def test_multi_level_accounting_is_exact():
    lv = Levels(["mem", "peer", "sto"], [300.0, 600.0], [[1, 2, 12], [1, 3, 6]],
                [1.0, 2.0, 5.0], [0.0, 30.0, 200.0], [1.0, 20.0, 300.0],
                [True, False, False])
    kinds = [Kind("gpu", 2 / M, needs_host=True, repair_s=86400.0), Kind("sw", 1 / M),
             Kind("tor", 0.5 / M, wait_s=4 * 3600.0)]
    r = run_engine(kinds, [], lv, detect=D, restart=R, swap=600.0, spares=2,
                   pool_weights=np.array([3.0, 1.0]), horizon=60 * 86400.0, trials=300,
                   seed=4)
    total = r.useful + r.recompute + r.stalls + r.detect + r.wait + r.restart
    assert np.abs(total - r.horizon).max() < 1e-6 * r.horizon
    assert (r.useful > 0).all() and (r.wait >= 0).all()
    assert r.restores[:3].sum() > 0


@pytest.mark.parametrize("blocker", ["switch", "host"])
def test_a_later_failure_does_not_cut_a_wait_short(blocker):
    """A job waiting for a repair (a cut-off switch, or a host with no spare free) cannot
    restart before the part is back, however many other failures (software, say) arrive
    during the wait: they restart the recovery, they do not end the wait. Here the repair
    outlasts the horizon and the blocking failure comes early (rate 200 per horizon: it
    is later than 10 % of the horizon with probability e^-20), so no trial makes
    progress after the first 10 % of the horizon."""
    H = 30 * 86400.0
    if blocker == "switch":
        block = Kind("tor", 200.0 / H, wait_s=10 * H)
    else:
        block = Kind("host", 200.0 / H, needs_host=True, repair_s=10 * H)
    kinds = [block, Kind("software", 200.0 / H)]
    r = _run([600.0], kinds=kinds, trials=200, horizon=H, spares=0, swap=0.0)
    assert r.counts[1].min() > 50  # software failures keep coming during the wait
    assert r.useful.max() <= 0.1 * H
    total = r.useful + r.recompute + r.stalls + r.detect + r.wait + r.restart
    assert np.abs(total - r.horizon).max() < 1e-6 * r.horizon


def test_spares_serve_only_their_own_pool():
    """Two segments of equal size, one spare each, no repair within the horizon: a host
    failure takes its own segment's spare; when both failures of a trial hit the same
    segment (probability 1/2) the second waits although the other segment's spare is
    free."""
    H = 30 * 86400.0
    kinds = [Kind("host", 2.0 / H, needs_host=True, repair_s=10 * H)]
    r = _run([600.0], kinds=kinds, trials=4000, horizon=H, spares=1, swap=900.0,
             pool_weights=np.array([8.0, 8.0]))
    n = r.counts.sum(axis=0)
    assert np.array_equal(r.swapped + r.waited, n)
    assert (r.swapped <= np.minimum(n, 2)).all()
    two = n == 2
    same = (r.swapped[two] == 1).mean()  # both in one segment
    assert abs(same - 0.5) < 4 * np.sqrt(0.25 / two.sum())
    # one pool of two spares (spare_scope: cluster) never leaves a spare unused
    c = _run([600.0], kinds=kinds, trials=4000, horizon=H, spares=2, swap=900.0)
    assert np.array_equal(c.swapped, np.minimum(c.counts.sum(axis=0), 2))
