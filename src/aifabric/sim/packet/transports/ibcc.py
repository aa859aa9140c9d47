"""InfiniBand congestion control (IBTA vol. 1, annex A10), the sender's side.

A switch marks FECN on data packets that join a congested VL queue
(:func:`aifabric.sim.packet.ib.fecn`); the receiving HCA answers each marked packet with
a BECN (a congestion notification packet on the QP's own VL); the sender raises the QP's
Congestion Control Table Index by ``ccti_increase`` (at most ``ccti_limit``) and, while
the index is above ``ccti_min``, a timer lowers it by one every ``ccti_timer``
(IBTA: units of 1.024 us). The index selects an entry of the Congestion Control Table:
an inter-packet (injection rate) delay. Here an entry is a multiplier ``m`` of the
packet's own wire time (x 1/1024): after a packet of wire time T the QP waits ``T x m``
more, so it sends at ``line / (1 + m)`` (:mod:`aifabric.sim.packet.ibmodel` documents
the default table). Control is per QP (``cc_ca_cong_setting_port_control`` bit 0 = 0).

Compiled functions over the simulator's arrays (:mod:`aifabric.sim.packet.layout`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from aifabric.sim.packet.heap import hpush
from aifabric.sim.packet.layout import (
    CI_,
    E_IBCCTI,
    F_LINE,
    F_RATE,
    F_WIN,
    G_,
    HT_,
    IB_CCT0,
    IB_CCTINC,
    IB_CCTLIM,
    IB_CCTMIN,
    IB_CCTT,
    LBT_,
    Q_I0,
    Q_I1,
    Q_I2,
    QF_,
    QI_,
    ZERO,
)

__all__ = ["FIELDS", "init", "on_becn", "timer"]

CCTI, BECNS, ARMED = Q_I0, Q_I1, Q_I2
FIELDS = {"ccti": ("QI", CCTI), "becns": ("QI", BECNS), "timer_armed": ("QI", ARMED)}


def init(qi: np.ndarray, qf: np.ndarray, line: float) -> None:
    """A QP starts at CCTI 0 (no delay: line rate), no window."""
    qf[F_RATE] = line
    qf[F_WIN] = np.inf
    qi[CCTI] = qi[BECNS] = qi[ARMED] = 0


@njit(cache=True, inline='always')
def _rate(S, q):
    QF, QI = S[QF_], S[QI_]
    m = S[LBT_][S[CI_][IB_CCT0] + QI[q, CCTI]]
    QF[q, F_RATE] = QF[q, F_LINE] * 1024.0 / (1024.0 + m)


@njit(cache=True)
def on_becn(S, q, now):
    """A BECN reaches QP ``q``'s sender: CCTI up by ``ccti_increase`` (capped), the rate of
    the new table entry, the CCTI timer armed."""
    CI, QI = S[CI_], S[QI_]
    QI[q, BECNS] += 1
    c = QI[q, CCTI] + CI[IB_CCTINC]
    if c > CI[IB_CCTLIM]:
        c = CI[IB_CCTLIM]
    QI[q, CCTI] = c
    _rate(S, q)
    if QI[q, ARMED] == 0 and c > CI[IB_CCTMIN]:
        QI[q, ARMED] = 1
        hpush(S[HT_], S[G_], now + CI[IB_CCTT], E_IBCCTI, q, ZERO)


@njit(cache=True)
def timer(S, q, now):
    """QP ``q``'s CCTI timer expires: CCTI down by one (not below ``ccti_min``), the
    rate of that entry; armed again while above ``ccti_min``. True: the rate rose (the
    caller kicks the QP's port)."""
    CI, QI = S[CI_], S[QI_]
    c = QI[q, CCTI]
    if c > CI[IB_CCTMIN]:
        c -= 1
        QI[q, CCTI] = c
        _rate(S, q)
    if c > CI[IB_CCTMIN]:
        hpush(S[HT_], S[G_], now + CI[IB_CCTT], E_IBCCTI, q, ZERO)
    else:
        QI[q, ARMED] = 0
    return True
