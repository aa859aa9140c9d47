"""InfiniBand's link layer in the packet simulator's compiled core (issue 27 item 3):
credit-based flow control per virtual lane, VL arbitration, FECN marking and adaptive
routing with credit state. The Python side (settings, checks, reports) is
:mod:`aifabric.sim.packet.ibmodel`; the sender's reaction to BECN (CCTI) is
:mod:`aifabric.sim.packet.transports.ibcc`.

The traffic classes of the core are the VLs on an InfiniBand fabric (``K_TC``, ``Q_TC``:
the VL of the packet, the VL its QP's SL maps to). For every arc ``p`` and VL ``v``:

- ``PT[p, T_CLIM, v]``: the receive buffer of VL ``v`` at the arc's end (the VL's credits
  x 64 bytes);
- ``PT[p, T_CRED, v]``: the credit the sending port of ``p`` holds for it, in bytes of
  whole 64-byte blocks (IBTA counts credits in blocks, :func:`blocks`): it spends a
  packet's blocks when the packet goes on the wire (:func:`on_send`) and gets them back
  when the packet has left that buffer, one link delay later (:func:`credit_back`, a
  flow-control packet; :func:`credit_arrive`);
- the VL may send while its credit holds the largest packet's blocks (``CI[IB_MAXF]``),
  and the VL arbitration (:func:`vl_pick`, IBTA's high- and low-priority tables in
  ``LBT``) picks which VL goes next; below it,
  ``T_PAUSED`` is set (the same gate PFC uses: every dequeue of the core honours it) and
  the time is counted in ``T_CBLKPS`` (``T_CBLONG`` its longest stretch). No frame is
  ever dropped for lack of room: a packet only leaves with room for it downstream.
- ``T_ING`` is what the buffer holds, in the packets' own bytes (raised on admission,
  :func:`admit`; lowered when the packet leaves), ``T_INGPEAK`` its peak (never above
  ``T_CLIM``: the blocks they take are within the credits).
"""

from __future__ import annotations

from numba import njit

from aifabric.sim.packet.heap import hpush
from aifabric.sim.packet.layout import (
    CI_,
    DATA,
    E_IBCRED,
    G_,
    HT_,
    IB_FCPB,
    IB_FRATE,
    IB_FTHR,
    IB_HLIM,
    IB_HN,
    IB_HT0,
    IB_LN,
    IB_LT0,
    IB_MAXF,
    IB_VICT,
    K_CE,
    K_KIND,
    K_SIZE,
    K_TC,
    KI_,
    LB_GA0,
    LB_GP0,
    LB_GT0,
    LB_ND,
    LBT_,
    NOW,
    P_ECN,
    P_FECNC,
    P_LPROP,
    P_PPB,
    P_QTOT,
    P_REV,
    P_SRC,
    P_VLCUR,
    P_VLHCNT,
    P_VLHCUR,
    P_VLHREM,
    P_VLREM,
    PF_,
    PI_,
    PT_,
    Q_DSTI,
    Q_LEN,
    T_CBLKPS,
    T_CBLONG,
    T_CBSINCE,
    T_CRED,
    T_ING,
    T_INGPEAK,
    T_PAUSED,
    T_QH,
    T_VTXB,
)


@njit(cache=True, inline='always')
def blocks(size):
    """``size`` bytes in the receive buffer's 64-byte blocks, as bytes: IBTA's flow
    control counts credits in 64-byte blocks, so a packet takes its size rounded up (vol.
    1, 7.9.4)."""
    return ((size + 63) >> 6) << 6


@njit(cache=True, inline='always')
def table_pick(S, p, t0, n, ccur, crem):
    """One VLArbitration table at egress port ``p`` (IBTA vol. 1, 7.6.9): its ``n``
    entries (VL, weight in bytes) from ``LBT[t0]`` take turns; the current entry
    (``PI[p, ccur]``) sends up to its weight (``PI[p, crem]`` left), then the next entry
    whose VL has a packet and credit takes its turn (an entry of weight 0 or a VL with
    nothing to send is skipped). The VL whose head packet goes next, or -1; the weight
    left is charged with the packet's bytes (a packet that overruns it still goes: IBTA
    lets the last packet of a turn complete)."""
    PI, PT, KI, T = S[PI_], S[PT_], S[KI_], S[LBT_]
    cur = PI[p, ccur]
    rem = PI[p, crem]
    for j in range(n + 1):
        i = cur + j
        if i >= n:
            i -= n
        vl = T[t0 + 2 * i]
        h = PT[p, T_QH, vl]
        if h < 0 or PT[p, T_PAUSED, vl] != 0:
            continue
        if j == 0:
            if rem <= 0:
                continue
        else:
            rem = T[t0 + 2 * i + 1]
            if rem <= 0:
                continue
        PI[p, ccur] = i
        PI[p, crem] = rem - KI[h, K_SIZE]
        return vl
    return -1


@njit(cache=True, inline='always')
def vl_pick(S, p):
    """VL arbitration at egress port ``p`` with IBTA's two tables (vol. 1, 7.6.9): the
    high-priority table goes first until it has sent LimitOfHighPriority bytes
    (``CI[IB_HLIM]``; the packet that crosses it completes); then the low-priority table
    has its chance for one packet, and the count starts again (also when the low table
    sends because the high one has nothing, or when the low table has nothing either and
    the high one goes on). Without a high table, the low table alone. The VL whose head
    packet goes next, or -1 when no VL has a packet and credit."""
    CI = S[CI_]
    hn = CI[IB_HN]
    if hn == 0:
        return table_pick(S, p, CI[IB_LT0], CI[IB_LN], P_VLCUR, P_VLREM)
    PI, PT, KI = S[PI_], S[PT_], S[KI_]
    if PI[p, P_VLHCNT] < CI[IB_HLIM]:
        vl = table_pick(S, p, CI[IB_HT0], hn, P_VLHCUR, P_VLHREM)
        if vl >= 0:
            PI[p, P_VLHCNT] += KI[PT[p, T_QH, vl], K_SIZE]
            return vl
        vl = table_pick(S, p, CI[IB_LT0], CI[IB_LN], P_VLCUR, P_VLREM)
        if vl >= 0:
            PI[p, P_VLHCNT] = 0
        return vl
    vl = table_pick(S, p, CI[IB_LT0], CI[IB_LN], P_VLCUR, P_VLREM)
    if vl >= 0:
        PI[p, P_VLHCNT] = 0
        return vl
    vl = table_pick(S, p, CI[IB_HT0], hn, P_VLHCUR, P_VLHREM)
    if vl >= 0:
        PI[p, P_VLHCNT] = KI[PT[p, T_QH, vl], K_SIZE]
    return vl


@njit(cache=True, inline='always')
def on_send(S, p, k):
    """Packet ``k`` goes on the wire of port ``p``: it spends its 64-byte blocks of the
    credit for its VL's buffer downstream; below a full packet's worth the VL stops
    (blocked)."""
    PT = S[PT_]
    vl = S[KI_][k, K_TC]
    size = S[KI_][k, K_SIZE]
    PT[p, T_VTXB, vl] += size
    c = PT[p, T_CRED, vl] - blocks(size)
    PT[p, T_CRED, vl] = c
    if c < S[CI_][IB_MAXF] and PT[p, T_PAUSED, vl] == 0:
        PT[p, T_PAUSED, vl] = 1
        PT[p, T_CBSINCE, vl] = S[G_][NOW]


@njit(cache=True, inline='always')
def admit(S, inp, vl, size):
    """A packet of ``size`` bytes on VL ``vl`` enters the buffer at the end of arc
    ``inp``."""
    PT = S[PT_]
    b = PT[inp, T_ING, vl] + size
    PT[inp, T_ING, vl] = b
    if b > PT[inp, T_INGPEAK, vl]:
        PT[inp, T_INGPEAK, vl] = b


@njit(cache=True, inline='always')
def credit_back(S, inp, vl, size):
    """``size`` bytes of VL ``vl`` left the buffer at the end of arc ``inp``: a
    flow-control packet takes their 64-byte blocks of credit back over the link to the
    port that sent them (the link's propagation plus the packet's serialization on the
    reverse arc)."""
    G, PI = S[G_], S[PI_]
    back = PI[inp, P_REV]
    delay = PI[inp, P_LPROP] + int(S[CI_][IB_FCPB] * S[PF_][back, P_PPB] + 0.5)
    hpush(S[HT_], G, G[NOW] + delay, E_IBCRED, inp, blocks(size) * 16 + vl)


@njit(cache=True, inline='always')
def credit_arrive(S, p, b):
    """Credit (``b`` = bytes x 16 + VL) reaches port ``p``; True when its VL may send
    again (the caller kicks the port)."""
    PT = S[PT_]
    vl = b & 15
    c = PT[p, T_CRED, vl] + (b >> 4)
    PT[p, T_CRED, vl] = c
    if PT[p, T_PAUSED, vl] != 0 and c >= S[CI_][IB_MAXF]:
        PT[p, T_PAUSED, vl] = 0
        d = S[G_][NOW] - PT[p, T_CBSINCE, vl]
        PT[p, T_CBLKPS, vl] += d
        if d > PT[p, T_CBLONG, vl]:
            PT[p, T_CBLONG, vl] = d
        return True
    return False


@njit(cache=True, inline='always')
def fecn(S, p, k, qb):
    """FECN at switch egress ``p``: a data packet joining a queue of its VL that holds
    more than the threshold (``CI[IB_FTHR]`` bytes, -1: off) is eligible, unless the port
    is a victim of congestion (its VL has no credit: the congestion is downstream) and
    not in the switch's Victim_Mask (``CI[IB_VICT]``: the mask's flags in LBT, -1: every
    port in it); every (marking rate + 1)-th eligible packet is marked (IBTA
    Marking_Rate: the mean number of packets between marks, 0: every one)."""
    CI, PI, KI = S[CI_], S[PI_], S[KI_]
    thr = CI[IB_FTHR]
    if thr < 0 or qb <= thr or KI[k, K_KIND] != DATA or KI[k, K_CE] != 0:
        return  # (a packet already marked upstream is not marked again)
    vm = CI[IB_VICT]
    if vm >= 0 and S[LBT_][vm + p] == 0 and S[PT_][p, T_PAUSED, KI[k, K_TC]] != 0:
        return  # a victim of congestion (its VL out of credit), not in the Victim_Mask
    c = PI[p, P_FECNC] + 1
    if c > CI[IB_FRATE]:
        KI[k, K_CE] = 1
        PI[p, P_ECN] += 1
        c = 0
    PI[p, P_FECNC] = c


@njit(cache=True)
def ar_pick(CI, PI, PT, QI, QR, T, q, rev, hop, node, vl):
    """Adaptive routing as NVIDIA Quantum switches do it, per packet: among the ports of
    switch ``node`` with least hops to the packet's destination (its AR group: the
    Fabric's shortest-path group), the one whose VL ``vl`` has credit and the fewest
    queued bytes; ties: the port of the subnet manager's table (the QP's route), then a
    hash of the QP. The table's port where the switch has no group of the right length
    (as :func:`aifabric.sim.packet.kernel.lb_pick`)."""
    rp = QR[q, rev, hop]
    row = T[node]
    d = QI[q, Q_DSTI + rev]
    if row < 0 or d < 0:
        return rp
    at = CI[LB_GT0] + 2 * (row * CI[LB_ND] + d)
    g = T[at]
    if g < 0 or T[at + 1] != QI[q, Q_LEN] - hop:
        return rp
    gp = CI[LB_GP0] + g
    lo = CI[LB_GA0] + T[gp]
    n = T[gp + 1] - T[gp]
    if n == 1:
        return T[lo]
    blocked = 1 << 50
    best = -1
    bq = 0
    for j in range(n):
        p = T[lo + j]
        sc = PI[p, P_QTOT] + (blocked if PT[p, T_PAUSED, vl] != 0 else 0)
        if best < 0 or sc < bq:
            best, bq = p, sc
    if PI[rp, P_SRC] == node and \
            PI[rp, P_QTOT] + (blocked if PT[rp, T_PAUSED, vl] != 0 else 0) == bq:
        return rp
    h = (q * 2654435761 + hop * 40503) % n
    for j in range(n):
        p = T[lo + (h + j) % n]
        if PI[p, P_QTOT] + (blocked if PT[p, T_PAUSED, vl] != 0 else 0) == bq:
            return p
    return best
