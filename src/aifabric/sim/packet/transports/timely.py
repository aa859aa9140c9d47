"""TIMELY (Mittal et al., SIGCOMM'15): rate control from the RTT and its gradient.

Per ACK the sender measures the RTT (the echoed send time), keeps an EWMA of RTT
differences and normalizes it by the minimum (unloaded) RTT. Below ``t_low`` it adds
delta; above ``t_high`` it cuts ``rate *= 1 - beta (1 - t_high/rtt)``; in between a
non-positive gradient adds delta (N x delta after ``hai_after`` in a row) and a positive
one cuts ``rate *= 1 - beta x gradient``.

Compiled functions over the simulator's arrays (:mod:`aifabric.sim.packet.layout`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from aifabric.sim.packet.engine import PS_PER_US
from aifabric.sim.packet.layout import (
    CF_,
    CI_,
    F_0,
    F_1,
    F_LINE,
    F_RATE,
    F_WIN,
    K_TS,
    KI_,
    Q_I0,
    Q_I1,
    QF_,
    QI_,
    TM_A,
    TM_BETA,
    TM_DELTA,
    TM_HAI,
    TM_MINRATE,
    TM_THIGH,
    TM_TLOW,
)

__all__ = ["FIELDS", "init", "on_ack", "params"]

PREVRTT, NEG = Q_I0, Q_I1
DIFF, MINRTT = F_0, F_1
FIELDS = {"diff": ("QF", DIFF), "min_rtt": ("QF", MINRTT), "prev_rtt": ("QI", PREVRTT),
          "neg": ("QI", NEG)}


def params(ci: np.ndarray, cf: np.ndarray, p: Any) -> None:
    """The scenario's ``cc.timely`` into the settings arrays."""
    ci[TM_HAI] = p.hai_after
    cf[TM_A], cf[TM_BETA], cf[TM_DELTA] = p.ewma_alpha, p.beta, p.delta_mbps * 1e6
    cf[TM_TLOW], cf[TM_THIGH] = p.t_low_us * PS_PER_US, p.t_high_us * PS_PER_US
    cf[TM_MINRATE] = p.min_rate_mbps * 1e6


def init(qi: np.ndarray, qf: np.ndarray, line: float, base_rtt_ps: int) -> None:
    """A QP starts at line rate; the unloaded RTT normalizes the gradient."""
    qf[F_RATE] = line
    qf[F_WIN] = math.inf
    qf[MINRTT] = max(base_rtt_ps, 1)
    qi[PREVRTT] = -1


@njit(cache=True)
def on_ack(S, q, now, k):
    """An ACK (frame ``k``) echoing its data packet's send time."""
    CI, CF, KI, QI, QF = S[CI_], S[CF_], S[KI_], S[QI_], S[QF_]
    rtt = now - KI[k, K_TS]
    if QI[q, PREVRTT] < 0:
        QI[q, PREVRTT] = rtt
        return
    a = CF[TM_A]
    diff = (1 - a) * QF[q, DIFF] + a * (rtt - QI[q, PREVRTT])
    QF[q, DIFF] = diff
    QI[q, PREVRTT] = rtt
    grad = diff / QF[q, MINRTT]
    r = QF[q, F_RATE]
    beta = CF[TM_BETA]
    if rtt < CF[TM_TLOW]:
        r += CF[TM_DELTA]
        QI[q, NEG] = 0
    elif rtt > CF[TM_THIGH]:
        r *= 1 - beta * (1 - CF[TM_THIGH] / rtt)
        QI[q, NEG] = 0
    elif grad <= 0:
        QI[q, NEG] += 1
        r += CF[TM_DELTA] * (CI[TM_HAI] if QI[q, NEG] >= CI[TM_HAI] else 1)
    else:
        QI[q, NEG] = 0
        r *= 1 - beta * min(grad, 1.0)
    QF[q, F_RATE] = min(max(r, CF[TM_MINRATE]), QF[q, F_LINE])
