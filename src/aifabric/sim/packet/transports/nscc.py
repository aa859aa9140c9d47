"""NSCC, the sender-based congestion control of Ultra Ethernet (UEC 1.0): a window moved
by the ECN mark each ACK echoes and by the queueing delay it measures.

Per ACK, with ``newly`` the bytes it acknowledges for the first time, ``delay`` = the
RTT of the packet it answers - the QP's base RTT (the smallest RTT seen; the first is the
network RTT), ``skip`` = the ACK echoes an ECN mark:

1. quick adapt (once per period of base RTT + target): when the period's delay passed
   ``quick_adapt_factor`` x target (or a NAK came) and the bytes acknowledged in it are
   below max window / 2^gate, the window becomes those bytes; the increases collected
   so far are dropped and the ACKs of the bytes then in flight are ignored for marks;
2. no mark, delay >= target: fair increase, ``inc += fi x newly``;
3. no mark, delay < target: fast increase (delay below ``fast_increase_delay_us`` for a
   whole window of bytes: ``cwnd += newly x fast_increase_scale x a`` at once), else
   proportional increase ``inc += alpha x newly x (target - delay)``;
4. mark, delay >= target: multiplicative decrease, at most once per base RTT, by
   ``gamma x (avg - target) / avg`` of the window (avg: the EWMA of delays), at most half;
5. mark, delay < target: nothing (the mark is a path's, which spraying moves away from);

then, after ``adjust_bytes_mtus`` MTUs acknowledged or a network RTT, ``cwnd += inc /
cwnd`` (and ``+ eta`` once per adjustment period); the window stays within [one MTU, max
window = ``max_window_bdp`` x BDP]. A NAK takes its bytes off the window and triggers
quick adapt. Byte quantities are whole bytes, as in the reference simulator (uet-htsim,
``UecSrc``), whose rules and defaults follow the specification's.

Compiled functions over the simulator's arrays (:mod:`aifabric.sim.packet.layout`); the
window is ``QF[q, F_WIN]`` (payload bytes; the NIC may send while the bytes in flight
plus the next packet fit in it).
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
    F_2,
    F_3,
    F_4,
    F_5,
    F_LINE,
    F_RATE,
    F_WIN,
    K_CE,
    K_SEQ,
    K_TS,
    KI_,
    MTU,
    NS_ADJB,
    NS_ADJP,
    NS_ALPHA,
    NS_DALPHA,
    NS_ETA,
    NS_FASTD,
    NS_FI,
    NS_FISCALE,
    NS_GAMMA,
    NS_LINE,
    NS_MAXBDP,
    NS_NETRTT,
    NS_QAGATE,
    NS_QAON,
    NS_QATHR,
    NS_REFBDP,
    NS_TARGET,
    Q_I0,
    Q_I1,
    Q_I2,
    Q_I3,
    Q_I4,
    Q_I5,
    Q_I6,
    Q_I7,
    Q_I8,
    Q_I9,
    Q_SNDNXT,
    Q_SNDUNA,
    QF_,
    QI_,
)

__all__ = ["FIELDS", "derive", "init", "on_ack", "on_nak", "params"]

BASE, LASTDEC, LASTADJ, QAEND, RECV, ACHV, FICNT, TOIGN, IGND, LASTACK = (
    Q_I0, Q_I1, Q_I2, Q_I3, Q_I4, Q_I5, Q_I6, Q_I7, Q_I8, Q_I9)
MAXW, INC, AVGD, INCR, TRIGQA, BDP = F_0, F_1, F_2, F_3, F_4, F_5
FIELDS = {"max_w": ("QF", MAXW), "inc": ("QF", INC), "avg_delay": ("QF", AVGD),
          "fast": ("QF", INCR), "trigger_qa": ("QF", TRIGQA), "bdp": ("QF", BDP),
          "base_rtt": ("QI", BASE), "last_dec": ("QI", LASTDEC),
          "last_adjust": ("QI", LASTADJ), "qa_end": ("QI", QAEND),
          "received": ("QI", RECV), "achieved": ("QI", ACHV), "fi_count": ("QI", FICNT),
          "to_ignore": ("QI", TOIGN), "ignored": ("QI", IGND), "last_ack": ("QI", LASTACK)}


def params(ci: np.ndarray, cf: np.ndarray, p: Any) -> None:
    """The scenario's ``cc.nscc`` into the settings arrays (the constants that depend on
    the network RTT and rate: :func:`derive`, again whenever a QP raises them)."""
    ci[NS_QAGATE] = p.quick_adapt_gate
    ci[NS_QAON] = int(p.quick_adapt)
    ci[NS_FASTD] = round(p.fast_increase_delay_us * PS_PER_US)
    ci[NS_NETRTT] = round(p.network_rtt_us * PS_PER_US) if p.network_rtt_us else 0
    cf[NS_GAMMA], cf[NS_DALPHA], cf[NS_MAXBDP] = p.gamma, p.delay_ewma, p.max_window_bdp
    cf[NS_REFBDP] = p.reference_gbps * 1e9 / 8 * p.reference_rtt_us * 1e-6
    cf[NS_LINE] = 0.0


def derive(ci: np.ndarray, cf: np.ndarray, p: Any) -> None:
    """The constants of the network RTT ``ci[NS_NETRTT]`` (ps) and rate ``cf[NS_LINE]``
    (bit/s): target delay, quick-adapt threshold, adjustment period and bytes, and the
    gains scaled by a = network BDP / reference BDP, b = target / reference RTT."""
    rtt = float(ci[NS_NETRTT])
    mss = float(ci[MTU])
    target = p.target_qdelay_us * PS_PER_US if p.target_qdelay_us else rtt
    target = max(round(target), 1)
    ci[NS_TARGET] = target
    ci[NS_QATHR] = int(p.quick_adapt_factor * target)
    ci[NS_ADJP] = round(p.adjust_period_us * PS_PER_US) if p.adjust_period_us \
        else int(rtt)
    ci[NS_ADJB] = p.adjust_bytes_mtus * ci[MTU]
    a = cf[NS_LINE] / 8e12 * rtt / cf[NS_REFBDP]
    b = target / (p.reference_rtt_us * PS_PER_US)
    cf[NS_ALPHA] = p.alpha_factor * mss * a * b / target
    cf[NS_FI] = p.fair_increase_mtus * mss * a
    cf[NS_ETA] = p.eta_mtus * mss * a
    cf[NS_FISCALE] = p.fast_increase_scale * a


def init(qi: np.ndarray, qf: np.ndarray, ci: np.ndarray, cf: np.ndarray, p: Any,
         line: float, base_rtt_ps: int, mtu: int) -> None:
    """A QP starts with its max window (``max_window_bdp`` x BDP of the network RTT, or of
    its own base RTT when the network RTT is derived) at line rate; the network's RTT and
    rate (and the constants) grow to this QP's when it has the longer or faster path."""
    if p.network_rtt_us is None and base_rtt_ps > ci[NS_NETRTT]:
        ci[NS_NETRTT] = base_rtt_ps
        cf[NS_LINE] = max(cf[NS_LINE], line)
        derive(ci, cf, p)
    elif line > cf[NS_LINE]:
        cf[NS_LINE] = line
        derive(ci, cf, p)
    base = int(ci[NS_NETRTT]) if p.network_rtt_us is not None else base_rtt_ps
    qi[BASE] = base
    qf[BDP] = math.floor(base * line / 8e12)
    qf[MAXW] = math.floor(p.max_window_bdp * qf[BDP])
    qf[F_WIN] = float(p.init_window_bytes or max(qf[MAXW], mtu))
    qf[F_RATE] = line
    qi[LASTACK] = 0


@njit(cache=True, inline='always')
def bounds(S, q):
    """The window within [one MTU, max window]."""
    QF = S[QF_]
    w = QF[q, F_WIN]
    mn = float(S[CI_][MTU])
    if w < mn:
        w = mn
    if w > QF[q, MAXW]:
        w = QF[q, MAXW]
    QF[q, F_WIN] = w


@njit(cache=True, inline='always')
def quick_adapt(S, q, now, is_loss, skip, delay):
    """Quick adapt; True when it acted (or the ACK is one it ignores): the caller skips
    the window update."""
    CI, QI, QF = S[CI_], S[QI_], S[QF_]
    if CI[NS_QAON] == 0:
        return False
    done = False
    if QI[q, IGND] < QI[q, TOIGN] and skip:
        done = True
    elif now > QI[q, QAEND]:
        if QI[q, QAEND] != 0 and (QF[q, TRIGQA] != 0.0 or is_loss or
                                  delay > CI[NS_QATHR]) and \
                QI[q, ACHV] < (int(QF[q, MAXW]) >> CI[NS_QAGATE]):
            QF[q, F_WIN] = float(max(QI[q, ACHV], CI[MTU]))
            QI[q, TOIGN] = QI[q, Q_SNDNXT] - QI[q, Q_SNDUNA]
            QI[q, IGND] = 0
            QF[q, TRIGQA] = 0.0
            done = True
        QI[q, ACHV] = 0
        QI[q, QAEND] = now + QI[q, BASE] + CI[NS_TARGET]
    if done:
        QF[q, INC] = 0.0
        QI[q, RECV] = 0
    return done


@njit(cache=True, inline='always')
def delay_sample(S, q, raw, skip):
    """The base RTT (the smallest RTT, with its BDP and max window) and the average delay
    from one RTT sample ``raw`` (ps); returns the sample's queueing delay."""
    CF, QI, QF = S[CF_], S[QI_], S[QF_]
    if raw < QI[q, BASE]:
        QI[q, BASE] = raw
        QF[q, BDP] = math.floor(raw * QF[q, F_LINE] / 8e12)
        QF[q, MAXW] = math.floor(CF[NS_MAXBDP] * QF[q, BDP])
    base = QI[q, BASE]
    d = raw - base
    da = CF[NS_DALPHA]
    if not skip and d > S[CI_][NS_TARGET]:
        QF[q, AVGD] = da * base * 0.25 + (1.0 - da) * QF[q, AVGD]
    elif d > 5 * base:
        QF[q, AVGD] = 0.0125 * d + (1.0 - 0.0125) * QF[q, AVGD]
    else:
        QF[q, AVGD] = da * d + (1.0 - da) * QF[q, AVGD]
    return float(d)


@njit(cache=True, inline='always')
def on_ack(S, q, now, k):
    """An ACK (frame ``k``): its cumulative sequence, the send time and ECN count of the
    packets it answers."""
    KI = S[KI_]
    raw = now - KI[k, K_TS]
    skip = KI[k, K_CE] != 0
    delay = delay_sample(S, q, raw, skip)
    seq = KI[k, K_SEQ]
    QI = S[QI_]
    newly = seq - QI[q, LASTACK]
    if newly < 0:
        newly = 0
    else:
        QI[q, LASTACK] = seq
    update(S, q, now, skip, delay, newly)


@njit(cache=True, inline='always')
def update(S, q, now, skip, delay, newly):
    """The window update of one ACK: ``skip`` (an ECN mark echoed), ``delay`` (ps of
    queueing), ``newly`` (bytes acknowledged for the first time)."""
    CI, CF, QI, QF = S[CI_], S[CF_], S[QI_], S[QF_]
    QI[q, ACHV] += newly
    QI[q, RECV] += newly
    if quick_adapt(S, q, now, False, skip, delay):
        return
    target = CI[NS_TARGET]
    if not skip and delay >= target:  # fair increase
        QF[q, INC] = math.floor(QF[q, INC] + CF[NS_FI] * newly)
    elif not skip:  # proportional increase, or fast increase near an empty network
        fast = False
        if delay < CI[NS_FASTD]:
            QI[q, FICNT] += newly
            if QI[q, FICNT] > QF[q, F_WIN] or QF[q, INCR] != 0.0:
                QF[q, F_WIN] = math.floor(QF[q, F_WIN] + newly * CF[NS_FISCALE])
                fast = True
        else:
            QI[q, FICNT] = 0
        QF[q, INCR] = 1.0 if fast else 0.0
        if not fast:
            QF[q, INC] = math.floor(QF[q, INC] + CF[NS_ALPHA] * newly * (target - delay))
    elif delay >= target:  # multiplicative decrease
        QF[q, INCR] = 0.0
        QI[q, FICNT] = 0
        avg = QF[q, AVGD]
        if avg > target and now - QI[q, LASTDEC] > QI[q, BASE]:
            f = 1.0 - CF[NS_GAMMA] * (avg - target) / avg
            if f < 0.5:
                f = 0.5
            QF[q, F_WIN] = max(math.floor(QF[q, F_WIN] * f), float(CI[MTU]))
            QI[q, LASTDEC] = now
    bounds(S, q)
    if QI[q, RECV] > CI[NS_ADJB] or now - QI[q, LASTADJ] > CI[NS_ADJP]:
        w = QF[q, F_WIN]
        QF[q, F_WIN] = math.floor(w + math.floor(QF[q, INC] / w))
        if now - QI[q, LASTADJ] >= CI[NS_ADJP]:
            QF[q, F_WIN] = math.floor(QF[q, F_WIN] + CF[NS_ETA])
            QI[q, LASTADJ] = now
        QF[q, INC] = 0.0
        QI[q, RECV] = 0
    bounds(S, q)


@njit(cache=True)
def on_nak(S, q, now, nbytes):
    """A NAK (the receiver saw a gap): ``nbytes`` come off the window and quick adapt is
    due, as for UEC's NACK of a trimmed packet."""
    QI, QF = S[QI_], S[QF_]
    QI[q, IGND] += nbytes
    QF[q, TRIGQA] = 1.0
    if quick_adapt(S, q, now, True, True, 0):
        return
    QF[q, F_WIN] -= nbytes
    bounds(S, q)


@njit(cache=True, inline='always')
def blocked(S, q, fly, pay):
    """The window holds the bytes in flight plus the next packet's?"""
    return fly + pay > S[QF_][q, F_WIN]
