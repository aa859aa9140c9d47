"""HPCC (Li et al., SIGCOMM'19): a window from in-band network telemetry.

Every switch egress appends (link speed B, bytes sent so far, time, queue bytes) to a data
packet; the receiver echoes the list in the ACK. Per hop the sender estimates the
normalized in-flight bytes ``u = min(q, q_prev)/(B*T) + txRate/B``, takes the most loaded
hop, smooths it over one base RTT T (EWMA weighted by the time the sample covers) and
sets ``W = Wc / (U/eta) + W_AI`` when U passes the target utilization eta (or after
``max_stage`` additive steps), else ``W = Wc + W_AI``; Wc is committed once per RTT.
The QP is paced at ``W / T`` and keeps at most W bytes in flight.

Compiled functions over the simulator's arrays (:mod:`aifabric.sim.packet.layout`): the
telemetry of a frame is ``KF[k, :KI[k, K_NINT]]``, the last one a QP saw ``QINT[q]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from aifabric.sim.packet.engine import PS_PER_US
from aifabric.sim.packet.layout import (
    CF_,
    CI_,
    F_0,
    F_1,
    F_2,
    F_3,
    F_RATE,
    F_WIN,
    HP_ETA,
    HP_MAXSTAGE,
    K_NINT,
    K_SEQ,
    KF_,
    KI_,
    MTU,
    Q_I0,
    Q_I1,
    Q_I2,
    Q_I3,
    Q_SNDNXT,
    QF_,
    QI_,
    QINT_,
)

__all__ = ["FIELDS", "init", "on_ack", "params"]

T_, INCSTAGE, LASTSEQ, PREVN = Q_I0, Q_I1, Q_I2, Q_I3
MAXW, WC, WAI, U_ = F_0, F_1, F_2, F_3
FIELDS = {"max_w": ("QF", MAXW), "wc": ("QF", WC), "w_ai": ("QF", WAI), "U": ("QF", U_),
          "T": ("QI", T_), "inc_stage": ("QI", INCSTAGE), "last_seq": ("QI", LASTSEQ)}


def params(ci: np.ndarray, cf: np.ndarray, p: Any) -> None:
    """The scenario's ``cc.hpcc`` into the settings arrays."""
    ci[HP_MAXSTAGE] = p.max_stage
    cf[HP_ETA] = p.target_utilization


def init(qi: np.ndarray, qf: np.ndarray, p: Any, line: float, base_rtt_ps: int) -> None:
    """A QP starts with one bandwidth-delay product of window, at line rate."""
    t_ps = int(p.base_rtt_us * PS_PER_US) if p.base_rtt_us else base_rtt_ps
    T = max(t_ps, 1)
    qi[T_] = T
    qf[MAXW] = line * T / 8e12  # one BDP, bytes
    qf[F_WIN] = qf[WC] = qf[MAXW]
    qf[F_RATE] = line
    qf[WAI] = p.ai_rate_mbps * 1e6 * T / 8e12
    qf[U_] = 1.0
    qi[PREVN] = -1  # no telemetry yet


@njit(cache=True)
def on_ack(S, q, now, k):
    """An ACK (frame ``k``) with the telemetry of the data packet it acknowledges."""
    CI, CF, KI, KF, QI, QF, QINT = S[CI_], S[CF_], S[KI_], S[KF_], S[QI_], S[QF_], S[QINT_]
    n = KI[k, K_NINT]
    if n == 0:
        return
    pn = QI[q, PREVN]
    T = QI[q, T_]
    u_max = 0.0
    tau = float(T)
    if pn == n:
        for i in range(n):
            dt = KF[k, i, 2] - QINT[q, i, 2]
            if dt <= 0:
                continue
            bps = KF[k, i, 0] * 1e9
            tx_rate = (KF[k, i, 1] - QINT[q, i, 1]) * 8e12 / dt
            u = min(KF[k, i, 3], QINT[q, i, 3]) * 8e12 / (bps * T) + tx_rate / bps
            if u > u_max:
                u_max = u
                tau = dt
    for i in range(n):
        for j in range(4):
            QINT[q, i, j] = KF[k, i, j]
    QI[q, PREVN] = n
    if pn != n:
        return
    if tau > T:
        tau = float(T)
    U = (1.0 - tau / T) * QF[q, U_] + tau / T * u_max
    QF[q, U_] = U
    update = KI[k, K_SEQ] > QI[q, LASTSEQ]
    eta = CF[HP_ETA]
    if eta <= U or QI[q, INCSTAGE] >= CI[HP_MAXSTAGE]:
        w = QF[q, WC] / (U / eta) + QF[q, WAI]
        if update:
            QI[q, INCSTAGE] = 0
            QF[q, WC] = min(w, QF[q, MAXW])
    else:
        w = QF[q, WC] + QF[q, WAI]
        if update:
            QI[q, INCSTAGE] += 1
            QF[q, WC] = min(w, QF[q, MAXW])
    if update:
        QI[q, LASTSEQ] = QI[q, Q_SNDNXT]
    w = min(max(w, float(CI[MTU])), QF[q, MAXW])
    QF[q, F_WIN] = w
    QF[q, F_RATE] = max(w * 8e12 / T, 1e6)
