"""InfiniBand congestion control (IBTA vol. 1, annex A10), the sender's side.

A switch marks FECN on data packets that join a congested VL queue
(:func:`aifabric.sim.packet.ib.fecn`); the receiving HCA answers each marked packet with
a BECN (a congestion notification packet on the QP's own VL); the sender raises the QP's
Congestion Control Table Index by ``ccti_increase`` (at most ``ccti_limit``) and, while
the index is above ``ccti_min``, a timer lowers it by one every ``ccti_timer``
(IBTA: units of 1.024 us). The three, and whether the QP reacts at all (the CA's
Control_Map), are the settings of the QP's service level (IBTA's CACongestionSetting has
one entry per SL). The index selects an entry of the Congestion Control Table:
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
    IB_CCTLIM,
    IB_SLCC0,
    LBT_,
    Q_I0,
    Q_I1,
    Q_I2,
    Q_I3,
    QF_,
    QI_,
    ZERO,
)

__all__ = ["FIELDS", "init", "on_becn", "timer"]

CCTI, BECNS, ARMED = Q_I0, Q_I1, Q_I2
#: the QP's service level (its row of the per-SL settings, ``CI[IB_SLCC0]`` in LBT: on,
#: CCTI increase, CCTI timer in ps, CCTI minimum; set when the QP is made)
SL = Q_I3
FIELDS = {"ccti": ("QI", CCTI), "becns": ("QI", BECNS), "timer_armed": ("QI", ARMED),
          "sl": ("QI", SL)}


def init(qi: np.ndarray, qf: np.ndarray, line: float) -> None:
    """A QP starts at CCTI 0 (no delay: line rate), no window."""
    qf[F_RATE] = line
    qf[F_WIN] = np.inf
    qi[CCTI] = qi[BECNS] = qi[ARMED] = qi[SL] = 0


@njit(cache=True, inline='always')
def _rate(S, q):
    QF, QI = S[QF_], S[QI_]
    m = S[LBT_][S[CI_][IB_CCT0] + QI[q, CCTI]]
    QF[q, F_RATE] = QF[q, F_LINE] * 1024.0 / (1024.0 + m)


@njit(cache=True)
def on_becn(S, q, now):
    """A BECN reaches QP ``q``'s sender: CCTI up by its SL's ``ccti_increase`` (capped),
    the rate of the new table entry, the CCTI timer armed; nothing but the count when its
    SL's congestion control is off."""
    CI, QI, T = S[CI_], S[QI_], S[LBT_]
    QI[q, BECNS] += 1
    o = CI[IB_SLCC0] + 4 * QI[q, SL]
    if T[o] == 0:  # the SL is not in the CA's control map: no reaction
        return
    c = QI[q, CCTI] + T[o + 1]
    if c > CI[IB_CCTLIM]:
        c = CI[IB_CCTLIM]
    QI[q, CCTI] = c
    _rate(S, q)
    if QI[q, ARMED] == 0 and c > T[o + 3]:
        QI[q, ARMED] = 1
        hpush(S[HT_], S[G_], now + T[o + 2], E_IBCCTI, q, ZERO)


@njit(cache=True)
def timer(S, q, now):
    """QP ``q``'s CCTI timer expires: CCTI down by one (not below ``ccti_min``), the
    rate of that entry; armed again while above ``ccti_min``. True: the rate rose (the
    caller kicks the QP's port)."""
    CI, QI, T = S[CI_], S[QI_], S[LBT_]
    o = CI[IB_SLCC0] + 4 * QI[q, SL]
    c = QI[q, CCTI]
    if c > T[o + 3]:
        c -= 1
        QI[q, CCTI] = c
        _rate(S, q)
    if c > T[o + 3]:
        hpush(S[HT_], S[G_], now + T[o + 2], E_IBCCTI, q, ZERO)
    else:
        QI[q, ARMED] = 0
    return True
