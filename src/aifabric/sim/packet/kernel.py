"""The compiled core of the packet simulator: the event loop and everything it does per
frame, over numpy arrays, compiled by numba (``cache=True``: the first run on a machine
compiles it, later processes load it from ``__pycache__``).

:class:`~aifabric.sim.packet.network.Network` owns the arrays and is the Python face of
this module (ports, QPs, congestion control); this module only mutates them. The state
travels as one tuple ``S`` so that every function takes the same argument; its layout
(what each array and column holds) is :mod:`aifabric.sim.packet.layout`, and the
congestion-control algorithms are in :mod:`aifabric.sim.packet.transports`.

Events live in one binary heap ``HT`` of rows ``(time_ps, seq, kind, a, b)`` ordered by
(time, seq); ``seq`` comes from ``G[SEQ]``, the tie-break counter shared with the Python
event list, so events run in scheduling order at equal times. Frames are rows of the
packet pool ``KI`` linked into per-(port, class) FIFO queues or into a port's *flight*
list (on the wire or propagating; arrivals leave an arc in the order frames went on it,
so only the first frame in flight of each arc has a heap entry).

:func:`run` returns to Python when an event belongs to Python (samples, deadlock checks,
a DAG's compute stages: the Python event list's head comes first), when a QP has
delivered its last byte (its ``on_done`` runs in Python), when an array must grow, or at
the time limit.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
from numba import njit
from numba.core import cgutils
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic

from aifabric.sim.packet import heap, ib
from aifabric.sim.packet.heap import hpop, hpush
from aifabric.sim.packet.layout import (
    ACK,
    ACKB,
    ACKCO,
    ACKINT,
    ALPHA,
    CC,
    CC_DCQCN,
    CC_DCTCP,
    CC_HPCC,
    CC_IBCC,
    CC_NSCC,
    CC_NSCC_RCCC,
    CC_RCCC,
    CC_TIMELY,
    CF_,
    CI_,
    CNP,
    CNPGAP,
    COUNT,
    CREDIT,
    CTC,
    DATA,
    DELIV,
    DROPS,
    E_ARRIVE,
    E_CREDIT,
    E_DCPEND,
    E_DCTIMER,
    E_IBCCTI,
    E_IBCRED,
    E_PAUSE,
    E_QPSTART,
    E_RTO,
    E_RXDONE,
    E_TXDONE,
    E_WAKE,
    ECN_DEQ,
    ECN_ON,
    EV_ALG,
    EV_DT0,
    EV_N,
    EV_NO0,
    EV_NX0,
    EV_RB,
    EV_REPS,
    EV_RR,
    EV_SEL,
    EV_TS,
    EV_W,
    F_LINE,
    F_RATE,
    F_WIN,
    F_WINB,
    FREE_,
    FRX,
    G_,
    HDR,
    HOST_PFC,
    HRXBUF,
    HSIZE,
    HT_,
    IB_AR,
    IB_ON,
    INT_ON,
    K_AR,
    K_AT,
    K_CE,
    K_DIR,
    K_EV,
    K_HOP,
    K_INP,
    K_KIND,
    K_NEXT,
    K_NINT,
    K_PAY,
    K_QP,
    K_SEQ,
    K_SIZE,
    K_TC,
    K_TS,
    KF_,
    KI_,
    LB_GA0,
    LB_GAP,
    LB_GP0,
    LB_GRR0,
    LB_GT0,
    LB_MODE,
    LB_ND,
    LB_SPRAY,
    LB_SPRAYM,
    LBT_,
    LL_,
    MTU,
    NAK,
    NFREE,
    NIL,
    NOW,
    NRH,
    NTC,
    NU_,
    ONE,
    OOO_W,
    OVH,
    P_BH,
    P_BUSY,
    P_DROPS,
    P_DST,
    P_ECN,
    P_FH,
    P_FT,
    P_GBPS,
    P_HEADROOM,
    P_HOST,
    P_KMAX,
    P_KMIN,
    P_LPROP,
    P_NQP,
    P_PMAX,
    P_PPB,
    P_PROP,
    P_QTOT,
    P_REV,
    P_RR,
    P_SRC,
    P_TRIMS,
    P_TXB,
    P_TXEV,
    P_WAKE,
    PAUSE_FRAME_BYTES,
    PF_,
    PI_,
    PQ_,
    PT_,
    Q_ACKEDAT,
    Q_ACKRQ,
    Q_BRTT,
    Q_CNPS,
    Q_DONE,
    Q_DSTI,
    Q_DUP,
    Q_EVB,
    Q_EVBR,
    Q_EVC,
    Q_EVH,
    Q_EVI,
    Q_EVX,
    Q_FIRSTTX,
    Q_FROZEN,
    Q_FRPEND,
    Q_FRREC,
    Q_FRSEQ,
    Q_FRT,
    Q_HIGH,
    Q_LASTCNP,
    Q_LASTPROG,
    Q_LASTW,
    Q_LEN,
    Q_MSA,
    Q_NAKS,
    Q_NAKSENT,
    Q_NEXTAV,
    Q_OOODROP,
    Q_OOON,
    Q_OOOPK,
    Q_PORT,
    Q_PSA,
    Q_RCVNXT,
    Q_RETX,
    Q_RMAX,
    Q_RTOARMED,
    Q_SACKS,
    Q_SIZE,
    Q_SNDNXT,
    Q_SNDUNA,
    Q_SPORT,
    Q_START,
    Q_TC,
    Q_TNAKS,
    Q_TO,
    Q_TRC,
    Q_TRH,
    QF_,
    QI_,
    QR_,
    QX_EV,
    QX_H,
    QX_QL,
    QX_RB,
    QX_RH,
    QX_TRQ,
    R_DONE,
    R_EMPTY,
    R_GROW,
    R_LIMIT,
    R_PY,
    RET,
    RETX,
    RNG_,
    RTO,
    RX_ON,
    RX_OOO,
    RX_PPB,
    SENTPFC,
    T_DROPS,
    T_HDRM,
    T_ING,
    T_PAUSED,
    T_PAUSEDPS,
    T_PFCRX,
    T_PFCTX,
    T_PLONG,
    T_PSINCE,
    T_QB,
    T_QH,
    T_QPEAK,
    T_QT,
    T_XOFF,
    TC0,
    TNAK,
    TRIM,
    TRIM_B,
    TRIM_ON,
    TRIM_THR,
    TRIMS,
    TRQ_N,
    U_BUF,
    U_HUSED,
    U_HXOFF,
    U_HXON,
    U_INP,
    U_RESV,
    U_RXB,
    U_RXBUSY,
    U_RXH,
    U_RXT,
    U_USED,
    WIN_ON,
    WIN_SCALE,
    XOFF,
    XON,
    ZERO,
)
from aifabric.sim.packet.transports import dcqcn, dctcp, hpcc, ibcc, nscc, rccc, timely


# ---------------------------------------------------------------------- frames
@njit(cache=True)
def new_pkt(G, KI, FREE, q, kind, seq, pay, size, tc, rev, ts):
    n = G[NFREE] - 1
    G[NFREE] = n
    k = FREE[n]
    KI[k, K_QP] = q
    KI[k, K_KIND] = kind
    KI[k, K_SEQ] = seq
    KI[k, K_PAY] = pay
    KI[k, K_SIZE] = size
    KI[k, K_TC] = tc
    KI[k, K_HOP] = 0
    KI[k, K_CE] = 0
    KI[k, K_INP] = -1
    KI[k, K_TS] = ts
    KI[k, K_AT] = 0
    KI[k, K_NEXT] = -1
    KI[k, K_DIR] = rev
    KI[k, K_NINT] = 0
    KI[k, K_EV] = -1
    return k


@njit(cache=True)
def free_pkt(G, FREE, k):
    FREE[G[NFREE]] = k
    G[NFREE] += 1


@njit(cache=True)
def q_append(PT, KI, p, tc, k):
    KI[k, K_NEXT] = -1
    t = PT[p, T_QT, tc]
    if t < 0:
        PT[p, T_QH, tc] = k
    else:
        KI[t, K_NEXT] = k
    PT[p, T_QT, tc] = k


@njit(cache=True)
def q_popleft(PT, KI, p, tc):
    k = PT[p, T_QH, tc]
    nx = KI[k, K_NEXT]
    PT[p, T_QH, tc] = nx
    if nx < 0:
        PT[p, T_QT, tc] = -1
    return k


@njit(cache=True)
def send_frame(G, CI, PI, PF, KI, HT, p, k, now):
    """Frame ``k`` goes on the wire of port ``p`` at ``now``; returns when it ends."""
    size = KI[k, K_SIZE]
    end = now + int((size + CI[OVH]) * PF[p, P_PPB] + 0.5)
    PI[p, P_BUSY] = end
    PI[p, P_TXB] += size
    at = end + PI[p, P_PROP]
    KI[k, K_AT] = at
    KI[k, K_NEXT] = -1
    t = PI[p, P_FT]
    if t < 0:
        PI[p, P_FH] = k
        hpush(HT, G, at, E_ARRIVE, p, ZERO)
    else:
        KI[t, K_NEXT] = k
    PI[p, P_FT] = k
    return end


@njit(cache=True)
def stamp(PI, PF, KI, KF, p, k, now, qbytes):
    """HPCC in-band telemetry: (B, bytes sent, time, queue) of egress ``p``."""
    n = KI[k, K_NINT]
    if n >= KF.shape[1]:  # (a sprayed frame on a longer path than its route: no room)
        return
    KF[k, n, 0] = PF[p, P_GBPS]
    KF[k, n, 1] = PI[p, P_TXB]
    KF[k, n, 2] = now
    KF[k, n, 3] = qbytes
    KI[k, K_NINT] = n + 1


@njit(cache=True)
def _splitmix(RNG, k):
    """splitmix64 on stream ``RNG[k]`` -> a float in [0, 1)."""
    x = RNG[k] + np.uint64(0x9E3779B97F4A7C15)
    RNG[k] = x
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def rand01(RNG):
    """The ECN marking stream (``RNG[0]``) -> a float in [0, 1)."""
    return _splitmix(RNG, 0)


@njit(cache=True)
def rand_lb(RNG):
    """The spraying stream (``RNG[1]``) -> a float in [0, 1): apart from the ECN marking
    stream, so spraying does not move WRED's draws."""
    return _splitmix(RNG, 1)


@njit(cache=True)
def rand_ev(RNG):
    """The entropy stream (``RNG[2]``) -> a float in [0, 1): NIC-side spraying's own, so
    it moves neither WRED's nor switch spraying's draws."""
    return _splitmix(RNG, 2)


@njit(cache=True, inline='always')
def ev_next(S, q):
    """The entropy value of QP ``q``'s next data packet (``nic.entropy``): its source
    port + i (mod 65,536), i by the algorithm: oblivious = uniform random; round robin =
    in turn; reps = in turn over its first window (``Q_EVX`` packets), then the oldest
    recycled value (an unmarked ACK brought it back, :func:`ev_feedback`), else random;
    once the QP has detected a loss (REPS' freezing mode) a recycled value goes back to
    the end of the buffer instead of being consumed, so the known-good values carry the
    flow around a failed link."""
    CI, QI = S[CI_], S[QI_]
    alg = CI[EV_ALG]
    n = CI[EV_N]
    if alg == EV_RR:
        i = QI[q, Q_EVI]
        QI[q, Q_EVI] = i + 1 if i + 1 < n else 0
        return (QI[q, Q_SPORT] + i) & 0xFFFF
    if alg == EV_REPS:
        c = QI[q, Q_EVI]
        if c < QI[q, Q_EVX]:  # the first window: explore the values in turn
            QI[q, Q_EVI] = c + 1
            return (QI[q, Q_SPORT] + c) & 0xFFFF
        cnt = QI[q, Q_EVC]
        if cnt > 0:  # the oldest value that came back unmarked
            h = QI[q, Q_EVH]
            b = CI[EV_RB]
            ev = QI[q, CI[QX_EV] + h]
            QI[q, Q_EVH] = h + 1 if h + 1 < b else 0
            if QI[q, Q_FROZEN] != 0:  # back to the end of the buffer
                j = h + cnt
                QI[q, CI[QX_EV] + (j - b if j >= b else j)] = ev
            else:
                QI[q, Q_EVC] = cnt - 1
            return ev
    i = int(rand_ev(S[RNG_]) * n)
    return (QI[q, Q_SPORT] + (i if i < n else n - 1)) & 0xFFFF


@njit(cache=True, inline='always')
def ev_feedback(S, q, echo):
    """REPS at the sender: an ACK/NAK echoes the entropy value of the data packet it
    answers (``echo``: value + 65,536 when that packet was ECN-marked, -1: none); an
    unmarked value is kept for reuse (a full buffer drops its oldest), a marked one is
    not."""
    CI, QI = S[CI_], S[QI_]
    if CI[EV_ALG] != EV_REPS or echo < 0 or echo >= 65536:
        return
    b = CI[EV_RB]
    h = QI[q, Q_EVH]
    cnt = QI[q, Q_EVC]
    if cnt < b:
        j = h + cnt
        QI[q, CI[QX_EV] + (j - b if j >= b else j)] = echo
        QI[q, Q_EVC] = cnt + 1
    else:
        QI[q, CI[QX_EV] + h] = echo
        QI[q, Q_EVH] = h + 1 if h + 1 < b else 0


@njit(cache=True, inline='always')
def ecmp_group(CI, QI, QR, T, q, rev, hop, node):
    """The ECMP group of switch ``node`` toward the destination of a frame of QP ``q``
    (direction ``rev``) on its ``hop``-th arc, for :func:`ev_pick` and :func:`lb_pick`:
    (the route's own port, the group, where its members start in ``T``, how many). No
    members (0) where the switch has no group toward the destination or the group's
    paths are not as long as what is left of the route: the frame follows its route."""
    rp = QR[q, rev, hop]
    row = T[node]
    d = QI[q, Q_DSTI + rev]
    if row < 0 or d < 0:
        return rp, -1, 0, 0
    at = CI[LB_GT0] + 2 * (row * CI[LB_ND] + d)
    g = T[at]
    if g < 0 or T[at + 1] != QI[q, Q_LEN] - hop:
        return rp, -1, 0, 0
    gp = CI[LB_GP0] + g
    return rp, g, CI[LB_GA0] + T[gp], T[gp + 1] - T[gp]


@njit(cache=True)
def ev_pick(CI, QI, QR, T, q, rev, hop, node, ev):
    """The egress port at switch ``node`` of a frame of QP ``q`` (direction ``rev``: data,
    or an ACK/NAK echoing the data's value) carrying entropy value ``ev`` on its
    ``hop``-th arc: the switch's own ECMP hash of the frame's header
    (:mod:`aifabric.sim.packet.entropy`: the QP's header hash with source port 0, XOR the
    value's share, XOR the switch's seed share, rotated by its hash-bit offset) picks the
    member of its group toward the destination (``hash mod n``, or through the member
    table). The route's own port where the switch has no group of the right length (as
    :func:`lb_pick`)."""
    rp, _, lo, n = ecmp_group(CI, QI, QR, T, q, rev, hop, node)
    if n == 0:
        return rp
    if n == 1:
        return T[lo]
    w = CI[EV_W]
    mask = (np.int64(1) << w) - 1
    base = QI[q, Q_EVBR] if rev != 0 else QI[q, Q_EVB]
    h = (base ^ T[CI[EV_DT0] + (ev & 0xFFFF)] ^ T[CI[EV_NX0] + node]) & mask
    o = T[CI[EV_NO0] + node] % w
    if o != 0:
        h = ((h >> o) | (h << (w - o))) & mask
    i = h % CI[EV_TS] % n if CI[EV_SEL] != 0 else h % n
    return T[lo + i]


@njit(cache=True)
def lb_pick(CI, PI, QI, QR, T, RNG, q, rev, hop, node, now):
    """The egress port at switch ``node`` of a frame of QP ``q`` (direction ``rev``) on
    its ``hop``-th arc, under per-packet load balancing (``packet.lb``): a member of the
    ECMP group of ``node`` toward the frame's destination, by spray (random or round
    robin) or adaptive (the member with the fewest queued bytes; ties: the flow's route,
    then the flow's hash; per flowlet when ``flowlet_gap_ns`` > 0). The route's own port
    when the switch has no group toward the destination or the group's paths are not as
    long as what is left of the route (a route of another policy): the frame keeps its
    hop count, so it reaches the destination after exactly the route's hops."""
    rp, g, lo, n = ecmp_group(CI, QI, QR, T, q, rev, hop, node)
    if n == 0:
        return rp
    if n == 1:
        return T[lo]
    if CI[LB_MODE] == LB_SPRAYM:
        if CI[LB_SPRAY] != 0:  # round robin, per group
            r = CI[LB_GRR0] + g
            i = T[r]
            T[r] = i + 1 if i + 1 < n else 0
            return T[lo + i]
        i = int(rand_lb(RNG) * n)
        return T[lo + (i if i < n else n - 1)]
    gap = CI[LB_GAP]
    fl = CI[QX_QL] + 2 * (rev * CI[QX_H] + hop)  # flowlet state: last time, port
    if gap > 0:
        lp = QI[q, fl + 1]
        if lp >= 0 and now - QI[q, fl] < gap and PI[lp, P_SRC] == node:
            QI[q, fl] = now
            return lp
    best = -1
    bq = 0
    for j in range(n):
        p = T[lo + j]
        qb = PI[p, P_QTOT]
        if best < 0 or qb < bq:
            best, bq = p, qb
    if PI[rp, P_SRC] == node and PI[rp, P_QTOT] == bq:
        best = rp  # a tie: the flow's hash (its ECMP route) decides
    elif PI[rp, P_SRC] != node:
        h = (q * 2654435761 + hop * 40503) % n  # the flow's hash, off its route
        for j in range(n):
            p = T[lo + (h + j) % n]
            if PI[p, P_QTOT] == bq:
                best = p
                break
    if gap > 0:
        QI[q, fl] = now
        QI[q, fl + 1] = best
    return best


@njit(cache=True)
def wred(PI, PF, KI, RNG, p, k, qb):
    """WRED ECN marking of frame ``k`` on switch egress port ``p`` by ``qb``, the bytes
    of its class's queue (ahead of it on enqueue, behind it on dequeue), with the port's
    own profile: no mark up to Kmin, probability rising linearly to Pmax at Kmax, a mark
    from Kmax. Only data frames are marked."""
    kmin = PI[p, P_KMIN]
    if qb <= kmin or KI[k, K_KIND] != DATA:
        return
    kmax = PI[p, P_KMAX]
    if qb >= kmax or rand01(RNG) < PF[p, P_PMAX] * (qb - kmin) / (kmax - kmin):
        KI[k, K_CE] = 1
        PI[p, P_ECN] += 1


# ---------------------------------------------------------------------- egress
@njit(cache=True)
def release(CI, NU, PT, node, inp, tc, size):
    """A frame of class ``tc`` that came in over ``inp`` leaves switch ``node``'s buffer:
    its bytes leave the PFC headroom first (while the priority group holds any), then
    the shared pool; True: the ingress is at or below XON with its headroom empty, the
    caller sends XON (:func:`send_pause`)."""
    NU[node, U_USED] -= size
    h = PT[inp, T_HDRM, tc]
    if h > 0:
        d = size if size < h else h
        PT[inp, T_HDRM, tc] = h - d
        NU[node, U_HUSED] -= d
    ing = PT[inp, T_ING, tc] - size
    PT[inp, T_ING, tc] = ing
    if PT[inp, T_XOFF, tc] != 0 and ing <= CI[XON] and PT[inp, T_HDRM, tc] == 0:
        PT[inp, T_XOFF, tc] = 0
        return True
    return False


@njit(cache=True)
def drop(G, PI, PT, FREE, p, tc, k):
    """Frame ``k`` of class ``tc`` is dropped at egress port ``p``."""
    PI[p, P_DROPS] += 1
    PT[p, T_DROPS, tc] += 1
    G[DROPS] += 1
    free_pkt(G, FREE, k)


@njit(cache=True)
def tx_start(S, p):
    """Put the next frame on the wire: the highest unpaused class with a frame, then (NIC)
    the next eligible QP, round robin."""
    G, CI, PI, PT, KI = S[G_], S[CI_], S[PI_], S[PT_], S[KI_]
    now = G[NOW]
    k = -1
    ib_on = CI[IB_ON] != 0
    if ib_on and PI[p, P_HOST] == 0:  # InfiniBand: VL arbitration
        tc = ib.vl_pick(S, p)
        if tc >= 0:
            k = q_popleft(PT, KI, p, tc)
            size = KI[k, K_SIZE]
            PT[p, T_QB, tc] -= size
            PI[p, P_QTOT] -= size
    else:
        for i in range(CI[NTC]):
            tc = CI[TC0 + i]
            if PT[p, T_QH, tc] >= 0 and PT[p, T_PAUSED, tc] == 0:
                k = q_popleft(PT, KI, p, tc)
                size = KI[k, K_SIZE]
                PT[p, T_QB, tc] -= size
                PI[p, P_QTOT] -= size
                break
    if k < 0:
        if PI[p, P_NQP] == 0:
            return
        k = pull(S, p, now)
        if k < 0:
            return
    size = KI[k, K_SIZE]
    if PI[p, P_HOST] == 0:  # free the switch buffer; XON when the ingress drains
        tc = KI[k, K_TC]
        inp = KI[k, K_INP]
        if release(CI, S[NU_], PT, PI[p, P_SRC], inp, tc, size):
            send_pause(S, inp, tc, ZERO)
        if ib_on:  # the credit of the buffer it left goes back upstream
            ib.credit_back(S, inp, tc, size)
        if CI[ECN_DEQ] != 0 and CI[ECN_ON] != 0:  # marked on the queue it leaves behind
            wred(PI, S[PF_], KI, S[RNG_], p, k, PT[p, T_QB, tc])
        if CI[INT_ON] != 0 and KI[k, K_KIND] == DATA:
            stamp(PI, S[PF_], KI, S[KF_], p, k, now, PT[p, T_QB, tc])
    HT = S[HT_]
    end = send_frame(G, CI, PI, S[PF_], KI, HT, p, k, now)
    if ib_on:
        ib.on_send(S, p, k)
    if PI[p, P_NQP] > 0 or PI[p, P_QTOT] > 0:
        PI[p, P_TXEV] = 1
        hpush(HT, G, end, E_TXDONE, p, ZERO)


@njit(cache=True, inline='always')
def pull(S, p, now):
    """The next data frame of a NIC port's QPs (round robin, paced by each QP's rate and
    window), or -1; schedules a wake-up when a paced QP becomes ready."""
    G, CI, PI, PT, PQ, QI, QF = S[G_], S[CI_], S[PI_], S[PT_], S[PQ_], S[QI_], S[QF_]
    n = PI[p, P_NQP]
    wake = -1
    win_on = CI[WIN_ON] != 0  # a NIC window (nic.window)
    uec = CC_NSCC <= CI[CC] <= CC_NSCC_RCCC  # NSCC's window, RCCC's credit
    i = PI[p, P_RR]
    for _ in range(n):
        if i >= n:
            i = 0
        q = PQ[p, i]
        i += 1
        if PT[p, T_PAUSED, QI[q, Q_TC]] != 0:
            continue
        while QI[q, Q_TRC] > 0 and QI[q, trq_head(S, q)] < QI[q, Q_SNDUNA]:
            trq_pop(S, q)  # repairs of packets acknowledged since
        # a repair: a fast retransmission of the first missing packet, a trimmed packet
        frx = QI[q, Q_FRPEND] != 0 or QI[q, Q_TRC] > 0
        seq = QI[q, Q_SNDNXT]
        if not frx:
            if seq >= QI[q, Q_SIZE]:
                continue
            fly = seq - QI[q, Q_SNDUNA]
            if fly >= QF[q, F_WIN]:
                continue
            if win_on and fly > 0 and window_full(S, q, seq, fly):
                continue
            if uec and cc_blocked(S, q, seq, fly):
                continue
        avail = QI[q, Q_NEXTAV] + int(QI[q, Q_LASTW] * 8e12 / QF[q, F_RATE])
        if avail > now:
            if wake < 0 or avail < wake:
                wake = avail
            continue
        PI[p, P_RR] = i
        if frx:
            if QI[q, Q_FRPEND] != 0:
                seq = QI[q, Q_FRSEQ]
                QI[q, Q_FRPEND] = 0
            else:
                seq = trq_pop(S, q)
        pay = QI[q, Q_SIZE] - seq
        if pay > CI[MTU]:
            pay = CI[MTU]
        size = pay + CI[HDR]
        KI = S[KI_]
        k = new_pkt(G, KI, S[FREE_], q, DATA, seq, pay, size, QI[q, Q_TC], ZERO, now)
        if CI[EV_ALG] != 0:
            KI[k, K_EV] = ev_next(S, q)
        retx = seq < QI[q, Q_HIGH]
        if retx:
            QI[q, Q_RETX] += pay
            G[RETX] += pay
        force = retx or seq + pay >= QI[q, Q_SIZE]  # (ar: a repair, the last packet)
        if not frx:
            seq += pay
            QI[q, Q_SNDNXT] = seq
            if seq > QI[q, Q_HIGH]:
                QI[q, Q_HIGH] = seq
        if QI[q, Q_FIRSTTX] < 0:
            QI[q, Q_FIRSTTX] = now  # the first data byte goes on the wire
        QI[q, Q_NEXTAV] = now  # pacing: the next packet may leave a gap later
        QI[q, Q_LASTW] = size + CI[OVH]
        cc_on_send(S, q, now, pay)
        if CI[ACKCO] != 0:
            KI[k, K_AR] = ack_request(S, q, force)
        return k
    # drop finished QPs from the round robin
    fin = False
    for j in range(n):
        q = PQ[p, j]
        if QI[q, Q_SNDUNA] >= QI[q, Q_SIZE]:
            fin = True
            break
    if fin:
        m = 0
        for j in range(n):
            q = PQ[p, j]
            if QI[q, Q_SNDUNA] < QI[q, Q_SIZE]:
                PQ[p, m] = q
                m += 1
        PI[p, P_NQP] = m
        PI[p, P_RR] = 0
    if wake >= 0 and (PI[p, P_WAKE] < now or wake < PI[p, P_WAKE]):
        PI[p, P_WAKE] = wake
        hpush(S[HT_], G, wake, E_WAKE, p, ZERO)
    return -1


@njit(cache=True, inline='always')
def ack_request(S, q, force):
    """The ar flag of the data packet QP ``q`` sends now (``nic.ooo_acks: coalesced``, as
    uet-htsim's UecSrc sets it): ``force`` (a retransmission, the QP's last packet), or
    the window (the congestion control's, the NIC's) holds the next packet back once this
    one is in flight (or RCCC's credit is spent)."""
    if force:
        return 1
    CI, QI, QF = S[CI_], S[QI_], S[QF_]
    fly = QI[q, Q_SNDNXT] - QI[q, Q_SNDUNA]
    if fly + CI[MTU] > QF[q, F_WIN]:
        return 1
    if CI[WIN_ON] != 0 and window_full(S, q, QI[q, Q_SNDNXT], fly):
        return 1
    if CI[CC] >= CC_RCCC and rccc.blocked(S, q):  # its last credit
        return 1
    return 0


@njit(cache=True, inline='always')
def trq_head(S, q):
    """The QI column of QP ``q``'s oldest queued repair (trimming)."""
    return S[CI_][QX_TRQ] + S[QI_][q, Q_TRH]


@njit(cache=True, inline='always')
def trq_pop(S, q):
    """The oldest trimmed packet QP ``q`` has to repair (its sequence), off the queue."""
    CI, QI = S[CI_], S[QI_]
    h = QI[q, Q_TRH]
    seq = QI[q, CI[QX_TRQ] + h]
    QI[q, Q_TRH] = h + 1 if h + 1 < CI[TRQ_N] else 0
    QI[q, Q_TRC] -= 1
    return seq


@njit(cache=True, inline='always')
def window_full(S, q, seq, fly):
    """The NIC window (``nic.window``): would the next packet of QP ``q`` put more than
    the window un-acknowledged? The window follows the rate (x rate / line) when
    ``window_scales_with_rate``, never below one ACK interval of packets (else the sender
    would stop short of the packet that makes the receiver ACK, and wait for the
    retransmission timeout); a QP with nothing in flight may always send."""
    CI, QI, QF = S[CI_], S[QI_], S[QF_]
    w = QF[q, F_WINB]
    if CI[WIN_SCALE] != 0:
        w = w * QF[q, F_RATE] / QF[q, F_LINE]
    floor = CI[ACKINT] * CI[MTU]
    if w < floor:
        w = floor
    pay = QI[q, Q_SIZE] - seq
    if pay > CI[MTU]:
        pay = CI[MTU]
    return fly + pay > w


@njit(cache=True, inline='always')
def kick(S, p):
    """Something may be ready to send on port ``p``: start it now, or when the frame on the
    wire is done."""
    PI = S[PI_]
    if PI[p, P_TXEV] != 0:
        return
    busy = PI[p, P_BUSY]
    if busy > S[G_][NOW]:
        PI[p, P_TXEV] = 1
        hpush(S[HT_], S[G_], busy, E_TXDONE, p, ZERO)
    else:
        tx_start(S, p)


# ---------------------------------------------------------------------- PFC
@njit(cache=True)
def send_pause(S, inp, tc, on):
    """The node at the end of arc ``inp`` sends a PFC frame (XOFF or XON) back over it."""
    G, PI, PF, PT = S[G_], S[PI_], S[PF_], S[PT_]
    back = PI[inp, P_REV]
    PT[back, T_PFCTX, tc] += 1
    G[SENTPFC] += 1
    delay = PI[inp, P_LPROP] + int(PAUSE_FRAME_BYTES * PF[back, P_PPB] + 0.5)
    hpush(S[HT_], G, G[NOW] + delay, E_PAUSE, inp, tc * 2 + on)


@njit(cache=True)
def pause_apply(S, p, tc, on):
    PT = S[PT_]
    now = S[G_][NOW]
    PT[p, T_PFCRX, tc] += 1
    if on != 0 and PT[p, T_PAUSED, tc] == 0:
        PT[p, T_PAUSED, tc] = 1
        PT[p, T_PSINCE, tc] = now
    elif on == 0 and PT[p, T_PAUSED, tc] != 0:
        PT[p, T_PAUSED, tc] = 0
        d = now - PT[p, T_PSINCE, tc]
        PT[p, T_PAUSEDPS, tc] += d
        if d > PT[p, T_PLONG, tc]:
            PT[p, T_PLONG, tc] = d
        kick(S, p)


# ---------------------------------------------------------------------- NIC
@njit(cache=True, inline='always')
def reply(S, q, kind, seq, tc, data):
    """The receiving NIC of QP ``q`` sends an ACK/NAK (echoing ``data``'s timestamp,
    telemetry and ECN count) or a CNP back along the reverse route."""
    G, CI, PI, PT, KI, KF, QI, QR = S[G_], S[CI_], S[PI_], S[PT_], S[KI_], S[KF_], S[QI_], S[QR_]
    now = G[NOW]
    size = CI[ACKB]
    k = new_pkt(G, KI, S[FREE_], q, kind, seq, ZERO, size, tc, ONE, now)
    if data >= 0:
        if KI[data, K_EV] >= 0:  # the entropy value it answers, and its ECN mark
            KI[k, K_EV] = KI[data, K_EV] + (65536 if KI[data, K_CE] != 0 else 0)
        KI[k, K_TS] = KI[data, K_TS]
        KI[k, K_CE] = QI[q, Q_MSA]
        n = KI[data, K_NINT]
        for i in range(n):
            for j in range(4):
                KF[k, i, j] = KF[data, i, j]
        KI[k, K_NINT] = n
    p = QR[q, 1, 0]
    q_append(PT, KI, p, tc, k)
    PT[p, T_QB, tc] += size
    PI[p, P_QTOT] += size
    kick(S, p)


@njit(cache=True, inline='always')
def reorder(S, q, d):
    """A data frame of QP ``q`` reaches its receiver ``d`` packets ahead of the next
    expected one (0: in order): the QP's reorder histogram (exact below 16, then one
    bucket per power of two), its out-of-order count and largest distance."""
    QI = S[QI_]
    h = S[CI_][QX_RH]
    if d <= 0:
        QI[q, h] += 1
        return
    QI[q, Q_OOOPK] += 1
    if d > QI[q, Q_RMAX]:
        QI[q, Q_RMAX] = d
    b = d
    if d >= 16:
        b = 12
        x = d
        while x >= 2:
            x >>= 1
            b += 1
        if b >= NRH:
            b = NRH - 1
    QI[q, h + b] += 1


@njit(cache=True, inline='always')
def bitmap_drain(QI, q, rcv, size, mtu, W, rb, most):
    """The frames an out-of-order receiver holds right behind ``rcv`` (QP ``q``'s
    bitmap: packet i -> bit i % 64 of column ``rb + i // 64``, ``W`` packets), at most
    ``most`` of them, cleared from the bitmap: (the new cumulative point, how many)."""
    n = 0
    while n < most and rcv < size:
        i = (rcv // mtu) % W
        c = rb + i // 64
        m = np.int64(1) << (i % 64)
        if QI[q, c] & m == 0:
            break
        QI[q, c] &= ~m
        n += 1
        rcv += mtu if size - rcv > mtu else size - rcv
    return rcv, n


@njit(cache=True, inline='always')
def ooo_receive(S, q, k, seq, rcv, pay, now):
    """The out-of-order receiver (``nic.receiver: ooo``, UEC RUD): a frame at the next
    expected sequence is delivered and so are the frames the bitmap holds right behind
    it, then a cumulative ACK (every ``ack_interval_packets`` frames, and whenever holes
    filled); a frame ahead is delivered into the bitmap (no NAK, no ACK), or discarded
    when it is more than the bitmap ahead; a duplicate is ACKed. Returns the QP whose
    last byte it delivered, or -1."""
    G, CI, QI = S[G_], S[CI_], S[QI_]
    mtu = CI[MTU]
    W = CI[OOO_W]
    rb = CI[QX_RB]  # the bitmap: packet i -> bit i % 64 of column rb + i // 64
    size = QI[q, Q_SIZE]
    done = -1
    if seq == rcv:
        rcv += pay
        G[DELIV] += pay
        rcv, n = bitmap_drain(QI, q, rcv, size, mtu, W, rb, size)
        filled = n > 0
        QI[q, Q_RCVNXT] = rcv
        QI[q, Q_PSA] += 1
        last = rcv >= size
        if last and QI[q, Q_DONE] < 0:
            QI[q, Q_DONE] = now
            done = q
        if last or filled or QI[q, Q_PSA] >= CI[ACKINT]:
            QI[q, Q_PSA] = 0
            reply(S, q, ACK, rcv, QI[q, Q_TC], k)
            QI[q, Q_MSA] = 0
    elif seq > rcv:
        if (seq - rcv) // mtu >= W:
            QI[q, Q_OOODROP] += 1
        else:
            i = (seq // mtu) % W
            c = rb + i // 64
            m = np.int64(1) << (i % 64)
            if QI[q, c] & m != 0:
                QI[q, Q_DUP] += pay
            else:
                QI[q, c] |= m
                G[DELIV] += pay
            if CI[FRX] != 0 or CI[EV_ALG] == EV_REPS:
                # a selective ACK: the cumulative point and this packet's entropy value
                reply(S, q, ACK, rcv, QI[q, Q_TC], k)
    else:  # a duplicate of delivered bytes
        QI[q, Q_DUP] += pay
        reply(S, q, ACK, rcv, QI[q, Q_TC], k)
    return done


@njit(cache=True, inline='always')
def ooo_coalesced(S, q, k, seq, rcv, pay, now):
    """The out-of-order receiver with coalesced ACKs (``nic.ooo_acks: coalesced``, the
    UEC RUD receiver of uet-htsim's UecSink): it takes and delivers frames as
    :func:`ooo_receive` does; every frame it takes, in order or ahead, counts, and a
    cumulative ACK (echoing this frame's entropy value and mark) goes when the count
    reaches ``ack_interval_packets``, at once for an ECN-marked frame, the QP's first
    frame, its last byte, a frame whose sender asked for an ACK (``K_AR``), and again
    when the frames held ahead at such a request have drained; a duplicate is ACKed at
    once. Returns the QP whose last byte it delivered, or -1."""
    G, CI, QI, KI = S[G_], S[CI_], S[QI_], S[KI_]
    mtu = CI[MTU]
    W = CI[OOO_W]
    rb = CI[QX_RB]  # the bitmap: packet i -> bit i % 64 of column rb + i // 64
    size = QI[q, Q_SIZE]
    done = -1
    held = QI[q, Q_OOON]  # frames held ahead of a hole
    ack = rcv == 0 and held == 0  # the first frame
    if seq < rcv:  # a duplicate of delivered bytes: ACK at once
        QI[q, Q_DUP] += pay
        ack = True
    elif seq > rcv:
        if (seq - rcv) // mtu >= W:
            QI[q, Q_OOODROP] += 1
            return done
        i = (seq // mtu) % W
        c = rb + i // 64
        m = np.int64(1) << (i % 64)
        if QI[q, c] & m != 0:  # a duplicate: ACK at once
            QI[q, Q_DUP] += pay
            ack = True
        else:
            QI[q, c] |= m
            G[DELIV] += pay
            QI[q, Q_OOON] = held + 1
            if KI[k, K_AR] != 0:
                QI[q, Q_ACKRQ] = 1
                ack = True
    else:
        rcv += pay
        G[DELIV] += pay
        rcv, n = bitmap_drain(QI, q, rcv, size, mtu, W, rb, held)
        held -= n
        QI[q, Q_OOON] = held
        QI[q, Q_RCVNXT] = rcv
        if rcv >= size:
            ack = True
            if QI[q, Q_DONE] < 0:
                QI[q, Q_DONE] = now
                done = q
        if KI[k, K_AR] != 0:
            ack = True
            QI[q, Q_ACKRQ] = 1
        if held == 0 and QI[q, Q_ACKRQ] != 0:  # drained after a request
            QI[q, Q_ACKRQ] = 0
            ack = True
    n = QI[q, Q_PSA] + 1
    if ack or n >= CI[ACKINT] or KI[k, K_CE] != 0:
        QI[q, Q_PSA] = 0
        reply(S, q, ACK, rcv, QI[q, Q_TC], k)
        QI[q, Q_MSA] = 0
    else:
        QI[q, Q_PSA] = n
    return done


@njit(cache=True)
def host_receive(S, k):
    """A NIC receives frame ``k``; returns the QP whose last byte it delivered, or -1."""
    G, CI, KI, QI, QR = S[G_], S[CI_], S[KI_], S[QI_], S[QR_]
    q = KI[k, K_QP]
    kind = KI[k, K_KIND]
    now = G[NOW]
    done = -1
    if kind == DATA:
        if KI[k, K_CE] != 0:
            QI[q, Q_MSA] += 1
            if CI[CC] == CC_DCQCN and now - QI[q, Q_LASTCNP] >= CI[CNPGAP]:
                QI[q, Q_LASTCNP] = now
                reply(S, q, CNP, ZERO, CI[CTC], NIL)
            elif CI[CC] == CC_IBCC:  # InfiniBand: a BECN for each FECN, on the QP's VL
                reply(S, q, CNP, ZERO, QI[q, Q_TC], NIL)
        seq = KI[k, K_SEQ]
        rcv = QI[q, Q_RCVNXT]
        pay = KI[k, K_PAY]
        if seq >= rcv:
            reorder(S, q, (seq - rcv) // CI[MTU])
        if CI[ACKCO] != 0:
            done = ooo_coalesced(S, q, k, seq, rcv, pay, now)
        elif CI[RX_OOO] != 0:
            done = ooo_receive(S, q, k, seq, rcv, pay, now)
        elif seq == rcv:
            rcv += pay
            QI[q, Q_RCVNXT] = rcv
            G[DELIV] += pay
            QI[q, Q_NAKSENT] = 0
            QI[q, Q_PSA] += 1
            last = rcv >= QI[q, Q_SIZE]
            if last and QI[q, Q_DONE] < 0:
                QI[q, Q_DONE] = now
                done = q
            if last or QI[q, Q_PSA] >= CI[ACKINT]:
                QI[q, Q_PSA] = 0
                reply(S, q, ACK, rcv, QI[q, Q_TC], k)
                QI[q, Q_MSA] = 0
        elif seq > rcv:  # a gap: go-back-N
            if QI[q, Q_NAKSENT] == 0:
                QI[q, Q_NAKSENT] = 1
                reply(S, q, NAK, rcv, QI[q, Q_TC], k)
        else:  # a duplicate of delivered bytes
            QI[q, Q_DUP] += pay
            reply(S, q, ACK, rcv, QI[q, Q_TC], k)
        if CC_RCCC <= CI[CC] <= CC_NSCC_RCCC:  # RCCC: the packet asks the receiver for credit
            rccc.on_data(S, q, S[PI_][QR[q, 1, 0], P_SRC])
        free_pkt(S[G_], S[FREE_], k)
        return done
    if kind == CREDIT:
        rccc.on_credit(S, q, KI[k, K_SEQ])
        free_pkt(S[G_], S[FREE_], k)
        kick(S, QI[q, Q_PORT])
        return -1
    if kind == TRIM:  # a trimmed packet's header: NACK it at once, at high priority
        reply(S, q, TNAK, KI[k, K_SEQ], CI[CTC], k)
        free_pkt(S[G_], S[FREE_], k)
        return -1
    if kind == TNAK:  # the sender: retransmit the trimmed packet
        QI[q, Q_TNAKS] += 1
        seq = KI[k, K_SEQ]
        if seq >= QI[q, Q_SNDUNA]:
            c = QI[q, Q_TRC]
            if c < CI[TRQ_N]:  # ooo receiver: that packet alone, in turn
                j = QI[q, Q_TRH] + c
                n = CI[TRQ_N]
                QI[q, CI[QX_TRQ] + (j - n if j >= n else j)] = seq
                QI[q, Q_TRC] = c + 1
            elif QI[q, Q_SNDNXT] > seq:  # go back to it
                QI[q, Q_SNDNXT] = seq
            if CI[CC] in (CC_NSCC, CC_NSCC_RCCC):  # NSCC: a trimmed packet's NACK
                nscc.on_nak(S, q, now, CI[MTU])
        free_pkt(S[G_], S[FREE_], k)
        kick(S, QI[q, Q_PORT])
        return -1
    if kind == CNP:
        QI[q, Q_CNPS] += 1
        cc_on_cnp(S, q, now)
        free_pkt(S[G_], S[FREE_], k)
        return -1
    seq = KI[k, K_SEQ]
    ev_feedback(S, q, KI[k, K_EV])
    if seq > QI[q, Q_SNDUNA]:
        QI[q, Q_SNDUNA] = seq
        QI[q, Q_LASTPROG] = now
        QI[q, Q_SACKS] = 0
        if QI[q, Q_SNDNXT] < seq:
            QI[q, Q_SNDNXT] = seq
        if CI[FRX] != 0 and kind == ACK and seq < QI[q, Q_FRREC] and \
                QI[q, Q_HIGH] >= QI[q, Q_SIZE] > seq:
            # a partial ACK in recovery at the flow's tail (all sent: too few packets
            # left to ACK past the next hole): that hole, at once (NewReno, RFC 6582)
            QI[q, Q_FRSEQ] = seq
            QI[q, Q_FRT] = now
            QI[q, Q_FRPEND] = 1
    elif CI[FRX] != 0 and kind == ACK and seq == QI[q, Q_SNDUNA] and \
            seq < QI[q, Q_SNDNXT]:  # a selective ACK: the receiver has a hole at seq
        QI[q, Q_SACKS] += 1
        if QI[q, Q_SACKS] >= CI[FRX] and (QI[q, Q_FRSEQ] != seq or
                                          now - QI[q, Q_FRT] > 4 * QI[q, Q_BRTT]):
            QI[q, Q_FRSEQ] = seq  # once per hole, again if its repair seems lost too
            QI[q, Q_FRT] = now
            QI[q, Q_FRPEND] = 1
            QI[q, Q_FRREC] = QI[q, Q_HIGH]  # recovery until what was sent is acked
            QI[q, Q_FROZEN] = 1  # REPS: a loss: freeze the recycled values
    if kind == NAK:
        QI[q, Q_NAKS] += 1
        if QI[q, Q_SNDNXT] > seq:
            QI[q, Q_SNDNXT] = seq
    cc_on_ack(S, q, now, k)
    if QI[q, Q_SNDUNA] >= QI[q, Q_SIZE] and QI[q, Q_ACKEDAT] < 0:
        QI[q, Q_ACKEDAT] = now
    free_pkt(S[G_], S[FREE_], k)
    kick(S, QI[q, Q_PORT])
    return -1


@njit(cache=True)
def rx_arrive(S, k, inp):
    """Data frame ``k`` reaches a NIC over arc ``inp`` with a receive drain modelled
    (``nic.rx_gbps``): into the NIC's receive buffer, out of it (delivered, ACKed) when
    the host has taken its payload at rx_gbps, in arrival order. Above the XOFF
    threshold the NIC pauses the port feeding it (host PFC, lossless classes); a frame
    that does not fit is dropped."""
    G, CI, CF, PI, PT, NU, LL, KI = (S[G_], S[CI_], S[CF_], S[PI_], S[PT_], S[NU_], S[LL_],
                                      S[KI_])
    node = PI[inp, P_DST]
    b = NU[node, U_RXB] + KI[k, K_SIZE]
    tc = KI[k, K_TC]
    if b > CI[HRXBUF]:
        PI[inp, P_DROPS] += 1
        PT[inp, T_DROPS, tc] += 1
        G[DROPS] += 1
        free_pkt(S[G_], S[FREE_], k)
        return
    NU[node, U_RXB] = b
    if CI[HOST_PFC] != 0 and LL[tc] != 0 and b > NU[node, U_HXOFF] and \
            PT[inp, T_XOFF, tc] == 0:
        PT[inp, T_XOFF, tc] = 1
        send_pause(S, inp, tc, ONE)
    end = NU[node, U_RXBUSY]
    if end < G[NOW]:
        end = G[NOW]
    end += int(KI[k, K_PAY] * CF[RX_PPB] + 0.5)
    NU[node, U_RXBUSY] = end
    KI[k, K_AT] = end
    KI[k, K_INP] = inp
    KI[k, K_NEXT] = -1
    t = NU[node, U_RXT]
    if t < 0:
        NU[node, U_RXH] = k
        hpush(S[HT_], G, end, E_RXDONE, node, ZERO)
    else:
        KI[t, K_NEXT] = k
    NU[node, U_RXT] = k


@njit(cache=True)
def rx_done(S, node):
    """The host has taken the head frame of NIC ``node``'s receive buffer: returns it
    (for :func:`host_receive`); XON to the ports it paused once at or below XON."""
    G, CI, PI, PT, NU, KI = S[G_], S[CI_], S[PI_], S[PT_], S[NU_], S[KI_]
    k = NU[node, U_RXH]
    nx = KI[k, K_NEXT]
    NU[node, U_RXH] = nx
    if nx < 0:
        NU[node, U_RXT] = -1
    else:
        hpush(S[HT_], G, KI[nx, K_AT], E_RXDONE, node, ZERO)
    b = NU[node, U_RXB] - KI[k, K_SIZE]
    NU[node, U_RXB] = b
    if CI[HOST_PFC] != 0 and b <= NU[node, U_HXON]:
        lo = NU[node, U_INP]  # the one port into it, else: every port
        hi = lo + 1
        if lo < 0:
            lo, hi = 0, PI.shape[0]
        for p in range(lo, hi):
            if PI[p, P_DST] != node:
                continue
            for i in range(CI[NTC]):
                tc = CI[TC0 + i]
                if PT[p, T_XOFF, tc] != 0:
                    PT[p, T_XOFF, tc] = 0
                    send_pause(S, p, tc, ZERO)
    return k


@njit(cache=True)
def qp_start(S, q):
    """QP ``q`` starts: joins its NIC port's round robin; returns q if it has nothing to
    send (done at once), else -1."""
    G, CI, PI, PQ, QI = S[G_], S[CI_], S[PI_], S[PQ_], S[QI_]
    now = G[NOW]
    QI[q, Q_START] = now
    QI[q, Q_NEXTAV] = now
    QI[q, Q_LASTPROG] = now
    if QI[q, Q_SIZE] <= 0:
        QI[q, Q_DONE] = now
        return q
    p = QI[q, Q_PORT]
    PQ[p, PI[p, P_NQP]] = q
    PI[p, P_NQP] += 1
    if QI[q, Q_RTOARMED] == 0:
        QI[q, Q_RTOARMED] = 1
        hpush(S[HT_], G, now + CI[RTO], E_RTO, q, ZERO)
    kick(S, p)
    return -1


@njit(cache=True)
def rto(S, q):
    """Retransmission timeout: no ACK progress for ``rto_us`` -> go back to snd_una."""
    G, CI, QI = S[G_], S[CI_], S[QI_]
    if QI[q, Q_SNDUNA] >= QI[q, Q_SIZE]:
        QI[q, Q_RTOARMED] = 0
        return
    now = G[NOW]
    r = CI[RTO]
    if QI[q, Q_SNDNXT] > QI[q, Q_SNDUNA] and now - QI[q, Q_LASTPROG] >= r:
        QI[q, Q_TO] += 1
        QI[q, Q_FROZEN] = 1  # REPS: a loss: freeze the recycled values
        QI[q, Q_SNDNXT] = QI[q, Q_SNDUNA]
        QI[q, Q_LASTPROG] = now
        kick(S, QI[q, Q_PORT])
    lp = QI[q, Q_LASTPROG]
    t = max(lp, now) + r if lp + r <= now else lp + r
    hpush(S[HT_], G, t, E_RTO, q, ZERO)


# ---------------------------------------------------------------------- congestion control
@njit(cache=True, inline='always')
def cc_on_send(S, q, now, nbytes):
    c = S[CI_][CC]
    if c == CC_DCQCN:
        dcqcn.on_send(S, q, nbytes)
    elif c in (CC_RCCC, CC_NSCC_RCCC):
        rccc.on_send(S, q, nbytes)


@njit(cache=True, inline='always')
def cc_on_cnp(S, q, now):
    c = S[CI_][CC]
    if c == CC_DCQCN:
        dcqcn.on_cnp(S, q, now)
    elif c == CC_IBCC:  # a BECN
        ibcc.on_becn(S, q, now)


@njit(cache=True, inline='always')
def cc_blocked(S, q, seq, fly):
    """NSCC's window or RCCC's credit holds QP ``q``'s next packet back?"""
    c = S[CI_][CC]
    if c != CC_NSCC and rccc.blocked(S, q):
        return True
    if c != CC_RCCC:
        pay = S[QI_][q, Q_SIZE] - seq
        mtu = S[CI_][MTU]
        return nscc.blocked(S, q, fly, pay if pay < mtu else mtu)
    return False


@njit(cache=True, inline='always')
def cc_on_ack(S, q, now, k):
    c = S[CI_][CC]
    if CC_RCCC <= c <= CC_NSCC_RCCC:  # RCCC: the first ACK ends the speculation
        rccc.on_ack(S, q)
    if c in (CC_NSCC, CC_NSCC_RCCC):
        if S[KI_][k, K_KIND] == NAK:
            nscc.on_nak(S, q, now, S[CI_][MTU])
        nscc.on_ack(S, q, now, k)
    elif c == CC_HPCC:
        hpcc.on_ack(S, q, now, k)
    elif c == CC_TIMELY:
        timely.on_ack(S, q, now, k)
    elif c == CC_DCTCP:
        dctcp.on_ack(S, q, now, k)


# ---------------------------------------------------------------------- the loop
@intrinsic
def _borrowed(typingctx, a):
    """A view of array ``a`` that holds no reference (no meminfo, no parent): numba's
    reference counting of it is a null test instead of an atomic add. Only for arrays
    that outlive every use of the view (see :func:`run`)."""
    def codegen(context, builder, sig, args):
        view = cgutils.create_struct_proxy(sig.return_type)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()
    return a(a), codegen


@njit(cache=True)
def run(S, limit, py_t, py_s):
    """Process events in (time, seq) order while they come before the Python event list's
    head ``(py_t, py_s)`` and not after ``limit``; see the module docstring for what it
    returns.

    Every compiled function that takes the state tuple would increment and decrement the
    reference count of each of its arrays on entry and exit, an atomic operation each
    (measured: over a quarter of the loop's time). The loop runs on borrowed views of
    the arrays instead (:func:`_borrowed`): the caller's ``S`` keeps them alive for the
    whole call, and nothing in the loop allocates, resizes or keeps an array (growing
    them is Python's, between calls)."""
    B = (_borrowed(S[0]), _borrowed(S[1]), _borrowed(S[2]), _borrowed(S[3]),
         _borrowed(S[4]), _borrowed(S[5]), _borrowed(S[6]), _borrowed(S[7]),
         _borrowed(S[8]), _borrowed(S[9]), _borrowed(S[10]), _borrowed(S[11]),
         _borrowed(S[12]), _borrowed(S[13]), _borrowed(S[14]), _borrowed(S[15]),
         _borrowed(S[16]), _borrowed(S[17]), _borrowed(S[18]))
    return loop(B, limit, py_t, py_s)


@njit(cache=True)
def loop(S, limit, py_t, py_s):
    """The event loop of :func:`run`, on the borrowed views."""
    G, CI, CF, HT, PI, PT, PQ, NU, LL, KI, QI, QR = (S[G_], S[CI_], S[CF_], S[HT_], S[PI_],
                                                    S[PT_], S[PQ_], S[NU_], S[LL_], S[KI_],
                                                    S[QI_], S[QR_])
    PF, KF, FREE, RNG, LBT = S[PF_], S[KF_], S[FREE_], S[RNG_], S[LBT_]
    xoff_b = CI[XOFF]
    ecn_enq = CI[ECN_ON] != 0 and CI[ECN_DEQ] == 0  # WRED marks on admission
    ecn_deq = CI[ECN_ON] != 0 and CI[ECN_DEQ] != 0  # ... or when the frame leaves
    int_on = CI[INT_ON] != 0
    alpha = CF[ALPHA]
    ntc = CI[NTC]
    rx_on = CI[RX_ON] != 0
    lb_on = CI[LB_MODE] != 0
    ev_on = CI[EV_ALG] != 0
    trim_on = CI[TRIM_ON] != 0
    ib_on = CI[IB_ON] != 0  # InfiniBand: credits per VL, no PFC (ib.py)
    hcap = HT.shape[0] - 64
    kcap = 64
    qcap = PQ.shape[1]
    n = 0
    while True:
        if G[HSIZE] == 0:
            G[COUNT] += n
            if py_t <= limit:
                return R_PY
            return R_EMPTY
        t = HT[0, 0]
        s = HT[0, 1]
        if py_t < t or (py_t == t and py_s < s):
            G[COUNT] += n
            if py_t <= limit:
                return R_PY
            G[NOW] = limit
            return R_LIMIT
        if t > limit:
            G[COUNT] += n
            G[NOW] = limit
            return R_LIMIT
        kind = HT[0, 2]
        a = HT[0, 3]
        b = HT[0, 4]
        if G[HSIZE] > hcap or G[NFREE] < kcap or (
                kind == E_QPSTART and PI[QI[a, Q_PORT], P_NQP] >= qcap):
            G[COUNT] += n
            return R_GROW
        hpop(HT, G)
        G[NOW] = t
        n += 1
        if kind == E_ARRIVE:
            inp = a
            k = PI[inp, P_FH]
            nx = KI[k, K_NEXT]
            PI[inp, P_FH] = nx
            if nx < 0:
                PI[inp, P_FT] = -1
            else:
                hpush(HT, G, KI[nx, K_AT], E_ARRIVE, inp, ZERO)
            if PI[inp, P_BH] != 0:  # a black-holed link: the frame is lost
                if ib_on:
                    ib.credit_back(S, inp, KI[k, K_TC], KI[k, K_SIZE])
                PI[inp, P_DROPS] += 1
                PT[inp, T_DROPS, KI[k, K_TC]] += 1
                G[DROPS] += 1
                free_pkt(G, FREE, k)
                continue
            q = KI[k, K_QP]
            rev = KI[k, K_DIR]
            hop = KI[k, K_HOP] + 1
            KI[k, K_HOP] = hop
            if hop >= QI[q, Q_LEN]:
                if rx_on and KI[k, K_KIND] == DATA and PI[inp, P_HOST] == 0:
                    if ib_on:  # into the HCA's receive buffer: within its credits
                        ib.admit(S, inp, KI[k, K_TC], KI[k, K_SIZE])
                    rx_arrive(S, k, inp)  # from the network (not NVLink, PCIe)
                    continue
                if ib_on:  # the HCA takes it: its buffer's credit goes back
                    ib.credit_back(S, inp, KI[k, K_TC], KI[k, K_SIZE])
                done = host_receive(S, k)
                if done >= 0:
                    G[RET] = done
                    G[COUNT] += n
                    return R_DONE
                continue
            if lb_on and LBT[PI[inp, P_DST]] >= 0:  # at a switch: per packet
                if CI[IB_AR] != 0:  # InfiniBand AR: queue and credit state
                    p = ib.ar_pick(CI, PI, PT, QI, QR, LBT, q, rev, hop, PI[inp, P_DST],
                                   KI[k, K_TC])
                else:
                    p = lb_pick(CI, PI, QI, QR, LBT, RNG, q, rev, hop, PI[inp, P_DST], t)
            elif ev_on and KI[k, K_EV] >= 0 and LBT[PI[inp, P_DST]] >= 0:
                p = ev_pick(CI, QI, QR, LBT, q, rev, hop, PI[inp, P_DST],
                            KI[k, K_EV])  # the switch's hash
            else:
                p = QR[q, rev, hop]
            tc = KI[k, K_TC]
            size = KI[k, K_SIZE]
            if PI[p, P_HOST] != 0:  # a NIC forwarding (not used by routes from the router)
                if ib_on:
                    ib.credit_back(S, inp, tc, size)
                q_append(PT, KI, p, tc, k)
                PT[p, T_QB, tc] += size
                PI[p, P_QTOT] += size
                kick(S, p)
                continue
            # a switch admits the frame to the egress port: shared pool (dynamic
            # threshold), PFC headroom of the ingress priority group, WRED ECN
            node = PI[p, P_SRC]
            u = NU[node, U_USED]
            buf = NU[node, U_BUF]
            free = buf - NU[node, U_RESV] - (u - NU[node, U_HUSED])  # of the shared pool
            qb = PT[p, T_QB, tc]
            if trim_on and LL[tc] == 0 and KI[k, K_KIND] == DATA:
                thr = CI[TRIM_THR]
                if (thr >= 0 and qb + size > thr) or size > free or \
                        qb + size > alpha * (free - size):
                    # trimmed: the payload cut, the header on in the highest class
                    KI[k, K_KIND] = TRIM
                    size = CI[TRIM_B]
                    tc = CI[CTC]
                    KI[k, K_SIZE] = size
                    KI[k, K_TC] = tc
                    qb = PT[p, T_QB, tc]
                    PI[p, P_TRIMS] += 1
                    G[TRIMS] += 1
            to_h = False
            if ib_on:  # InfiniBand: the sender had credit for it; FECN
                ib.admit(S, inp, tc, size)
                ib.fecn(S, p, k, qb)
            elif LL[tc] != 0:
                ing = PT[inp, T_ING, tc]
                hd = PT[inp, T_HDRM, tc]
                thr = alpha * free if free > 0 else 0.0
                if thr > xoff_b:
                    thr = float(xoff_b)
                if ing - hd + size > thr or size > free:
                    # past the XOFF threshold: into the headroom (XOFF sent)
                    if hd + size > PI[inp, P_HEADROOM] or u + size > buf:
                        drop(G, PI, PT, FREE, p, tc, k)
                        continue
                    to_h = True
                PT[inp, T_ING, tc] = ing + size
            else:
                if size > free or qb + size > alpha * (free - size):
                    drop(G, PI, PT, FREE, p, tc, k)
                    continue
                PT[inp, T_ING, tc] += size
            KI[k, K_INP] = inp
            if ecn_enq and qb > PI[p, P_KMIN]:  # on the queue ahead of the frame
                wred(PI, PF, KI, RNG, p, k, qb)
            if PI[p, P_QTOT] == 0 and PI[p, P_TXEV] == 0 and PI[p, P_BUSY] <= t and \
                    PT[p, T_PAUSED, tc] == 0:
                # the port is idle and nothing waits: straight onto the wire (what
                # enqueue + dequeue would do, without touching the queue or the buffer)
                if size > PT[p, T_QPEAK, tc]:
                    PT[p, T_QPEAK, tc] = size
                if int_on and KI[k, K_KIND] == DATA:
                    stamp(PI, PF, KI, KF, p, k, t, ZERO)
                PT[inp, T_ING, tc] -= size
                send_frame(G, CI, PI, PF, KI, HT, p, k, t)
                if ib_on:
                    ib.credit_back(S, inp, tc, size)
                    ib.on_send(S, p, k)
                continue
            if to_h:
                PT[inp, T_HDRM, tc] += size
                NU[node, U_HUSED] += size
                if PT[inp, T_XOFF, tc] == 0:
                    PT[inp, T_XOFF, tc] = 1
                    send_pause(S, inp, tc, ONE)
            NU[node, U_USED] = u + size
            qb += size
            PT[p, T_QB, tc] = qb
            PI[p, P_QTOT] += size
            if qb > PT[p, T_QPEAK, tc]:
                PT[p, T_QPEAK, tc] = qb
            q_append(PT, KI, p, tc, k)
            if PI[p, P_TXEV] == 0:
                if PI[p, P_BUSY] > t:
                    PI[p, P_TXEV] = 1
                    hpush(HT, G, PI[p, P_BUSY], E_TXDONE, p, ZERO)
                else:
                    tx_start(S, p)
        elif kind == E_TXDONE:
            p = a
            PI[p, P_TXEV] = 0
            if PI[p, P_HOST] != 0:
                tx_start(S, p)
                continue
            # a switch port: the highest unpaused class with a frame (InfiniBand: the VL
            # arbitration's)
            k = -1
            tc = 0
            if ib_on:
                tc = ib.vl_pick(S, p)
                if tc >= 0:
                    k = q_popleft(PT, KI, p, tc)
            else:
                for i in range(ntc):
                    tc = CI[TC0 + i]
                    if PT[p, T_QH, tc] >= 0 and PT[p, T_PAUSED, tc] == 0:
                        k = q_popleft(PT, KI, p, tc)
                        break
            if k < 0:
                continue
            size = KI[k, K_SIZE]
            PT[p, T_QB, tc] -= size
            PI[p, P_QTOT] -= size
            if ecn_deq:  # WRED on the queue the frame leaves behind
                wred(PI, PF, KI, RNG, p, k, PT[p, T_QB, tc])
            inp = KI[k, K_INP]
            if release(CI, NU, PT, PI[p, P_SRC], inp, tc, size):
                send_pause(S, inp, tc, ZERO)  # XON: the ingress drained
            if int_on and KI[k, K_KIND] == DATA:
                stamp(PI, PF, KI, KF, p, k, t, PT[p, T_QB, tc])
            end = send_frame(G, CI, PI, PF, KI, HT, p, k, t)
            if ib_on:
                ib.credit_back(S, inp, tc, size)
                ib.on_send(S, p, k)
            if PI[p, P_QTOT] > 0:
                PI[p, P_TXEV] = 1
                hpush(HT, G, end, E_TXDONE, p, ZERO)
        elif kind == E_QPSTART:
            done = qp_start(S, a)
            if done >= 0:
                G[RET] = done
                G[COUNT] += n
                return R_DONE
        elif kind == E_RTO:
            rto(S, a)
        elif kind == E_WAKE:
            if PI[a, P_WAKE] == t:
                PI[a, P_WAKE] = -1
                kick(S, a)
        elif kind == E_PAUSE:
            pause_apply(S, a, b >> 1, b & 1)
        elif kind == E_DCPEND and b == QI[a, dcqcn.GEN]:
            dcqcn.cut(S, a, t)  # (a cut since it was scheduled makes it stale)
        elif kind == E_DCTIMER and dcqcn.timer(S, a, b, t):
            kick(S, QI[a, Q_PORT])
        elif kind == E_CREDIT:  # RCCC: the receiver's pacer grants credit
            q, g = rccc.grant(S, a, t)
            if q >= 0:
                reply(S, q, CREDIT, g, CI[CTC], NIL)
        elif kind == E_IBCRED:  # InfiniBand: credit back at port a
            if ib.credit_arrive(S, a, b):
                kick(S, a)
        elif kind == E_IBCCTI:  # InfiniBand: QP a's CCTI timer
            if ibcc.timer(S, a, t):
                kick(S, QI[a, Q_PORT])
        elif kind == E_RXDONE:
            k = rx_done(S, a)
            if ib_on:  # out of the HCA's receive buffer: the credit goes back
                PT[KI[k, K_INP], T_ING, KI[k, K_TC]] -= KI[k, K_SIZE]
                ib.credit_back(S, KI[k, K_INP], KI[k, K_TC], KI[k, K_SIZE])
            done = host_receive(S, k)
            if done >= 0:
                G[RET] = done
                G[COUNT] += n
                return R_DONE


# ---------------------------------------------------------------------- the cache
def _sources_digest() -> str:
    here = Path(__file__).parent
    h = hashlib.sha256()
    for f in (here / "layout.py", here / "heap.py", here / "kernel.py", here / "ib.py",
              *sorted((here / "transports").glob("*.py"))):
        h.update(f.read_bytes())
    return h.hexdigest()


def _drop_stale_cache() -> None:
    """numba keys a cached function on its own source file only, but the compiled loop
    also holds the functions it calls (heap, transports) and the layout's constants:
    when any of these files changed since the cache was written, empty the cache of
    every compiled function of the core (they compile again on first use)."""
    mods = (sys.modules[__name__], heap, ib, dcqcn, dctcp, hpcc, ibcc, nscc, rccc, timely)
    disp = {id(v): v for m in mods for v in vars(m).values() if isinstance(v, Dispatcher)}
    try:
        stamp = Path(run._cache._cache_path) / "aifabric-packet-core.sha256"
        digest = _sources_digest()
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for d in disp.values():
            d._cache.flush()
        stamp.write_text(digest)
    except (OSError, AttributeError):  # no writable cache, another numba: nothing cached
        pass


_drop_stale_cache()
