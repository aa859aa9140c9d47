"""DCQCN (Zhu et al., SIGCOMM'15) as NVIDIA ConnectX NICs implement it (the mlx5
``ecn/roce_rp`` and ``ecn/roce_np`` parameters; NVIDIA's "DCQCN parameters" page; the
"Mellanox" DCQCN of the HPCC repository's ns-3 ``rdma-hw.cc``).

Reaction point (sender). The first CNP puts the QP under a rate limiter: alpha starts at
``initial_alpha_value``/1024 and, if ``rate_to_set_on_first_cnp`` > 0, the current and
target rates are set to it (that is this CNP's reduction). Every ``dce_tcp_rtt`` us alpha
is updated: ``alpha = alpha*g + F*(1-g)``, g = dce_tcp_g/1024, F = 1 if a CNP came in the
period. A CNP cuts the rate at most once per ``rate_reduce_monitor_period``: at once if
the last cut is that long ago, else at the period's end. A cut: the target rate rt
becomes the current rate rc if ``clamp_tgt_rate``, or if the rate went up by the byte
counter since the last cut, or (``clamp_tgt_rate_after_time_inc``) by the timer; then
``rc -= rc * alpha_1024 / 2^rpg_gd`` (at least ``rpg_min_dec_fac`` % kept, never below
``rpg_min_rate``), and both stage counters restart at 0.

Recovery runs on two clocks, a timer (``rpg_time_reset`` us) and a byte counter
(``rpg_byte_reset`` bytes; 0: off, the timer alone drives the stages). Each expiry is a
rate-increase event, decided by the stage counts T, BC *before* it counts itself (the
order of the ns-3 Mellanox model): fast recovery while max(T, BC) < ``rpg_threshold``
(rt kept), hyper increase when min(T, BC) > ``rpg_threshold`` (rt += i x
``rpg_hai_rate``, i = min(T, BC) - ``rpg_threshold``: 1, 2, ... as in QCN and the DCQCN
authors' ns-3 code), additive increase otherwise (rt += ``rpg_ai_rate``); rt is capped at
the maximum rate and rc = (rt + rc)/2. So each clock gives ``rpg_threshold``
fast-recovery steps first.

Notification point (receiver, in the NIC model: ``kernel.host_receive``): one CNP per QP
per ``min_time_between_cnps`` for ECN-marked packets.

Compiled functions over the simulator's arrays (:mod:`aifabric.sim.packet.layout`); the
per-QP state is ``rate`` (bit/s, ``QF[q, F_RATE]``) plus the columns in :data:`FIELDS`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from aifabric.sim.packet.engine import PS_PER_US
from aifabric.sim.packet.heap import hpush
from aifabric.sim.packet.layout import (
    CF_,
    CI_,
    DC_AI,
    DC_BRESET,
    DC_CLAMP,
    DC_CLAMPTI,
    DC_FIRST,
    DC_G,
    DC_GD,
    DC_HAI,
    DC_KEEP,
    DC_MONITOR,
    DC_PERIOD,
    DC_THRESH,
    DC_TRESET,
    E_DCPEND,
    E_DCTIMER,
    F_0,
    F_1,
    F_2,
    F_3,
    F_4,
    F_RATE,
    F_WIN,
    G_,
    HT_,
    Q_I0,
    Q_I1,
    Q_I2,
    Q_I3,
    Q_I4,
    Q_I5,
    Q_I7,
    Q_SIZE,
    Q_SNDUNA,
    QF_,
    QI_,
)

__all__ = ["FIELDS", "cut", "init", "on_cnp", "on_send", "params", "timer"]

PIDX, LASTCUT, PENDING, TSTAGE, BCSTAGE, GEN, BYTES = (
    Q_I0, Q_I1, Q_I2, Q_I3, Q_I4, Q_I5, Q_I7)
MAXRATE, RT, ALPHA, MINRATE, CNPFLAG = F_0, F_1, F_2, F_3, F_4
FIELDS = {"max_rate": ("QF", MAXRATE), "rt": ("QF", RT), "alpha": ("QF", ALPHA),
          "min_rate": ("QF", MINRATE), "p_idx": ("QI", PIDX), "last_cut": ("QI", LASTCUT),
          "pending": ("QI", PENDING), "t_stage": ("QI", TSTAGE), "bc_stage": ("QI", BCSTAGE),
          "gen": ("QI", GEN), "byte_count": ("QI", BYTES)}


def params(ci: np.ndarray, cf: np.ndarray, p: Any) -> None:
    """The scenario's ``cc.dcqcn`` into the settings arrays."""
    ci[DC_TRESET] = int(p.rpg_time_reset * PS_PER_US)
    ci[DC_BRESET] = p.rpg_byte_reset
    ci[DC_THRESH] = p.rpg_threshold
    ci[DC_PERIOD] = max(int(p.dce_tcp_rtt * PS_PER_US), 1)
    ci[DC_MONITOR] = int(p.rate_reduce_monitor_period * PS_PER_US)
    ci[DC_CLAMP] = p.clamp_tgt_rate
    ci[DC_CLAMPTI] = p.clamp_tgt_rate_after_time_inc
    cf[DC_AI], cf[DC_HAI] = p.rpg_ai_rate * 1e6, p.rpg_hai_rate * 1e6
    cf[DC_GD] = float(1 << p.rpg_gd)
    cf[DC_KEEP] = p.rpg_min_dec_fac / 100.0
    cf[DC_G] = p.dce_tcp_g / 1024.0
    cf[DC_FIRST] = p.rate_to_set_on_first_cnp * 1e6


def init(qi: np.ndarray, qf: np.ndarray, p: Any, line: float) -> None:
    """A QP starts at line rate (or ``rpg_max_rate``), no rate limiter yet."""
    mx = min(line, p.rpg_max_rate * 1e6) if p.rpg_max_rate > 0 else line
    qf[F_RATE] = qf[RT] = qf[MAXRATE] = mx
    qf[F_WIN] = math.inf
    qf[MINRATE] = min(p.rpg_min_rate * 1e6, mx)
    qf[ALPHA] = p.initial_alpha_value / 1024.0
    qi[PIDX] = -1  # alpha's update clock starts with the first CNP
    qi[LASTCUT] = -(1 << 62)


@njit(cache=True)
def sync_alpha(S, q, now):
    """Apply the alpha updates of the periods that ended before ``now`` (lazily: idle
    periods decay alpha by g each)."""
    CI, CF, QI, QF = S[CI_], S[CF_], S[QI_], S[QF_]
    k = now // CI[DC_PERIOD]
    if k > QI[q, PIDX]:
        g = CF[DC_G]
        a = QF[q, ALPHA] * g + (1.0 - g) * (1.0 if QF[q, CNPFLAG] != 0.0 else 0.0)
        n = k - QI[q, PIDX] - 1
        if n > 0:
            a *= g ** float(n)  # libm pow, as in Python
        QF[q, ALPHA] = a
        QF[q, CNPFLAG] = 0.0
        QI[q, PIDX] = k


@njit(cache=True)
def on_cnp(S, q, now):
    """A CNP: update alpha, cut now or at the end of the monitor period. The first CNP
    sets rc = rt = ``rate_to_set_on_first_cnp`` instead of a cut when that is set."""
    CI, CF, QI, QF = S[CI_], S[CF_], S[QI_], S[QF_]
    if QI[q, PIDX] < 0:  # the first CNP puts the QP under a rate limiter
        QI[q, PIDX] = now // CI[DC_PERIOD]
        QF[q, CNPFLAG] = 1.0
        first = CF[DC_FIRST]
        if first > 0.0:
            r = min(max(first, QF[q, MINRATE]), QF[q, MAXRATE])
            QF[q, F_RATE] = QF[q, RT] = r
            restart(S, q, now)
            return
    sync_alpha(S, q, now)
    QF[q, CNPFLAG] = 1.0
    if now - QI[q, LASTCUT] >= CI[DC_MONITOR]:
        cut(S, q, now)
    elif QI[q, PENDING] == 0:
        QI[q, PENDING] = 1
        hpush(S[HT_], S[G_], QI[q, LASTCUT] + CI[DC_MONITOR], E_DCPEND, q, QI[q, GEN])


@njit(cache=True)
def cut(S, q, now):
    """Multiplicative decrease; restarts the recovery stages and timer."""
    CI, CF, QI, QF = S[CI_], S[CF_], S[QI_], S[QF_]
    sync_alpha(S, q, now)
    rc = QF[q, F_RATE]
    if CI[DC_CLAMP] != 0 or QI[q, BCSTAGE] != 0 or (
            CI[DC_CLAMPTI] != 0 and QI[q, TSTAGE] != 0):
        QF[q, RT] = rc
    new = rc - rc * (QF[q, ALPHA] * 1024.0) / CF[DC_GD]
    new = max(new, rc * CF[DC_KEEP], QF[q, MINRATE])
    QF[q, F_RATE] = new
    restart(S, q, now)


@njit(cache=True)
def restart(S, q, now):
    """A reduction happened at ``now``: the stage counters, the byte counter and the
    increase timer start again."""
    CI, QI = S[CI_], S[QI_]
    QI[q, LASTCUT] = now
    QI[q, PENDING] = 0  # a cut scheduled before this one is stale now
    QI[q, TSTAGE] = 0
    QI[q, BCSTAGE] = 0
    QI[q, BYTES] = 0
    QI[q, GEN] += 1
    hpush(S[HT_], S[G_], now + CI[DC_TRESET], E_DCTIMER, q, QI[q, GEN])


@njit(cache=True)
def timer(S, q, gen, now):
    """The rate-increase timer; True when the rate went up (the port may send)."""
    CI, QI, QF = S[CI_], S[QI_], S[QF_]
    if gen != QI[q, GEN] or QI[q, Q_SNDUNA] >= QI[q, Q_SIZE]:
        return False
    increase(S, q)
    QI[q, TSTAGE] += 1
    if QF[q, F_RATE] < QF[q, MAXRATE] or QF[q, RT] < QF[q, MAXRATE]:
        hpush(S[HT_], S[G_], now + CI[DC_TRESET], E_DCTIMER, q, gen)
    return True


@njit(cache=True)
def on_send(S, q, nbytes):
    """The byte counter of rate recovery (off when ``rpg_byte_reset`` is 0)."""
    CI, QI, QF = S[CI_], S[QI_], S[QF_]
    reset = CI[DC_BRESET]
    if reset <= 0 or QF[q, F_RATE] >= QF[q, MAXRATE]:
        return
    b = QI[q, BYTES] + nbytes
    if b >= reset:
        QI[q, BYTES] = b - reset
        increase(S, q)
        QI[q, BCSTAGE] += 1
    else:
        QI[q, BYTES] = b


@njit(cache=True)
def increase(S, q):
    """One rate-increase event: fast recovery, additive or hyper increase by the stage
    counts before this event (with the byte counter off, the timer's count alone)."""
    CI, CF, QI, QF = S[CI_], S[CF_], S[QI_], S[QF_]
    th = CI[DC_THRESH]
    t = QI[q, TSTAGE]
    b = QI[q, BCSTAGE] if CI[DC_BRESET] > 0 else t
    if max(t, b) < th:
        pass  # fast recovery: rt unchanged
    elif min(t, b) > th:  # the i-th hyper step adds i x rpg_hai_rate
        QF[q, RT] += (min(t, b) - th) * CF[DC_HAI]
    else:
        QF[q, RT] += CF[DC_AI]
    if QF[q, RT] > QF[q, MAXRATE]:
        QF[q, RT] = QF[q, MAXRATE]
    QF[q, F_RATE] = (QF[q, RT] + QF[q, F_RATE]) / 2.0
