"""The compiled core of the scheduled fabric: its own event loop over the arrays of
:mod:`aifabric.sim.packet.scheduled.layout`, compiled by numba, on the RoCE simulator's
event heap (:mod:`aifabric.sim.packet.heap`).

What happens to a frame, event by event (times in ps):

1. ``E_HTX`` a host port finishes sending a RoCE frame (payload + headers + preamble and
   gap at the port rate); the frame reaches its edge after the access hop (``E_FARR``)
   and the port sends the next frame of its next flow (round robin), unless paused.
2. ``E_FARR`` the frame joins the VOQ (ingress edge, destination port); a VOQ at XOFF
   pauses the sending port (PFC toward the host: ``E_PAUSE`` after the access hop). A
   credit request for its bytes reaches the destination's scheduler half a
   request-grant time later (``E_REQ``).
3. ``E_REQ``/``E_TICK`` the egress scheduler of a port grants credits to the VOQs that
   asked, round robin, one credit (at most ``credit_bytes``) at a time, paced at the
   port's drain rate and only while the bytes granted but not yet reassembled stay
   within its window; the grant reaches the VOQ half a request-grant time later
   (``E_GRANT``).
4. ``E_GRANT`` the VOQ sends frames while it has credit: each frame is cut into
   fixed-size cells (the last one padded), each cell put on one of the edge's fabric
   uplinks (round robin or least loaded) toward the destination's edge.
5. ``E_ATX``/``E_CARR`` a fabric port sends its head cell (cell bytes at the fabric rate:
   link rate x speedup) and the cell reaches the next switch, which sprays it on toward
   the destination edge over every shortest path. Cells leave an arc in the order they
   went on it, so only the first cell in flight on each arc has a heap entry (``E_CARR``
   of the arc), as in the RoCE simulator's flight lists.
6. At the destination edge the cells of a frame are counted into the reorder buffer;
   a complete frame leaves it only once every earlier frame of its VOQ has (in order),
   into the host port's queue (``E_EGTX``), and reaches the host (``E_HRX``).

:func:`run` returns when a flow delivered its last byte (the caller's DAG driver starts
what follows), when the heap is empty, at the time limit, or before an event when a pool
(frames, cells, heap, grant log) might not hold what it adds (the caller grows it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from aifabric.sim.packet.heap import hpop, hpush
from aifabric.sim.packet.scheduled.layout import (
    A_BUSY,
    A_CELLS,
    A_DST,
    A_FH,
    A_FT,
    A_HEAD,
    A_LAT,
    A_MAXQ,
    A_QB,
    A_TAIL,
    A_TXB,
    C_DEDGE,
    C_FNEXT,
    C_FRAME,
    C_NEXT,
    C_TARR,
    CE_FREE,
    CE_NFREE,
    CELL,
    CELLH,
    CELLS,
    COUNT,
    CREDIT,
    CREDIT_BAD,
    DONE_FLOW,
    E_ATX,
    E_CARR,
    E_EGTX,
    E_FARR,
    E_GRANT,
    E_HRX,
    E_HTX,
    E_KICK,
    E_PAUSE,
    E_REQ,
    E_TICK,
    F_BYTES,
    F_DONE,
    F_DSTP,
    F_FLOW,
    F_FSEQ,
    F_LEFT,
    F_NCELLS,
    F_NEXT,
    F_PAY,
    F_SEQ,
    F_SNEXT,
    F_SRC,
    F_TENQ,
    F_VOQ,
    FAB_BYTES,
    FR_FREE,
    FR_NFREE,
    FRAMES,
    H_BUSY,
    H_DNLAT,
    H_EDGE,
    H_EGBUSY,
    H_EGH,
    H_EGQB,
    H_EGQMAX,
    H_EGT,
    H_ENODE,
    H_FHEAD,
    H_FTAIL,
    H_PAUSED,
    H_PAUSEDPS,
    H_PAUSES,
    H_PSINCE,
    H_PVOQ,
    H_RB,
    H_RBMAX,
    H_RXB,
    H_TXB,
    H_UPLAT,
    HDR,
    HOST_OVH,
    HSIZE,
    INORDER_BAD,
    L_DONE,
    L_DST,
    L_FIRST,
    L_INLIST,
    L_LEFT,
    L_NEXT,
    L_RX,
    L_RXSEQ,
    L_SIZE,
    L_TXSEQ,
    LOCAL_FRAMES,
    LOG,
    LOG_CAP,
    MARGIN,
    MTU,
    NLOG,
    NOW,
    PAUSES,
    PAY_BYTES,
    R_EMPTY,
    R_FLOWDONE,
    R_GROW,
    R_LIMIT,
    REORDERED,
    RET,
    RG_HALF,
    S_GRANTED,
    S_HEAD,
    S_NEXT,
    S_OUT,
    S_OUTMAX,
    S_TAIL,
    S_TICK,
    S_WIN,
    SPRAY,
    SPRAY_LEAST,
    V_ACTIVE,
    V_BYTES,
    V_CREDIT,
    V_HEAD,
    V_MAX,
    V_ROH,
    V_ROT,
    V_RSEQ,
    V_SEQ,
    V_SNEXT,
    V_TAIL,
    V_WANT,
    WAIT_MAX,
    WAIT_N,
    WAIT_SUM,
    WIRE,
    XOFF,
    XON,
    E,
    P,
)

__all__ = ["WAIT_BIN_PS", "run"]

#: the grant-latency histogram's bin (ps)
WAIT_BIN_PS = 100_000


@njit(cache=True)
def _ser(nbytes, ppb):
    return np.int64(nbytes * ppb + 0.5)


@njit(cache=True, inline='always')
def _append(Q, row, head, tail, N, x, nxt):
    """Append item ``x`` (a row of ``N``, linked through column ``nxt``) to the FIFO list
    whose head and tail are columns ``head`` and ``tail`` of ``Q[row]``."""
    N[x, nxt] = -1
    if Q[row, tail] >= 0:
        N[Q[row, tail], nxt] = x
    else:
        Q[row, head] = x
    Q[row, tail] = x


@njit(cache=True, inline='always')
def _grow(Q, row, col, peak, n):
    """Add ``n`` to ``Q[row, col]`` and keep its peak in ``Q[row, peak]``."""
    Q[row, col] += n
    if Q[row, col] > Q[row, peak]:
        Q[row, peak] = Q[row, col]


@njit(cache=True)
def _host_send(G, C, HT, FR, HP, FL, PPBH, p, t):
    """Host port ``p`` sends its next frame if it is idle, not paused and has a flow."""
    if HP[p, H_BUSY] or HP[p, H_PAUSED]:
        return
    fl = HP[p, H_FHEAD]
    if fl < 0:
        return
    pay = min(C[MTU], FL[fl, L_LEFT])
    FL[fl, L_LEFT] -= pay
    if FL[fl, L_FIRST] < 0:
        FL[fl, L_FIRST] = t
    # round robin over the port's flows: this one to the back, or out when all sent
    HP[p, H_FHEAD] = FL[fl, L_NEXT]
    FL[fl, L_NEXT] = -1
    if HP[p, H_FHEAD] < 0:
        HP[p, H_FTAIL] = -1
    if FL[fl, L_LEFT] > 0:
        _append(HP, p, H_FHEAD, H_FTAIL, FL, fl, L_NEXT)
    else:
        FL[fl, L_INLIST] = 0
    f = G[FR_FREE]
    G[FR_FREE] = FR[f, F_NEXT]
    G[FR_NFREE] -= 1
    FR[f, F_FLOW] = fl
    FR[f, F_PAY] = pay
    FR[f, F_BYTES] = pay + C[HDR]
    FR[f, F_NEXT] = -1
    FR[f, F_SNEXT] = -1
    FR[f, F_DONE] = 0
    FR[f, F_SRC] = p
    FR[f, F_DSTP] = FL[fl, L_DST]
    FR[f, F_FSEQ] = FL[fl, L_TXSEQ]
    FL[fl, L_TXSEQ] += 1
    wire = pay + C[HDR] + C[WIRE]
    HP[p, H_BUSY] = 1
    HP[p, H_TXB] += wire
    G[HOST_OVH] += C[HDR] + C[WIRE]
    hpush(HT, G, t + _ser(wire, PPBH[p]), E_HTX, p, f)


@njit(cache=True)
def _kick(G, C, HT, HP, p, t):
    """Wake the scheduler of port ``p`` if it has VOQs waiting and room in its window."""
    if HP[p, S_TICK] or HP[p, S_HEAD] < 0:
        return
    HP[p, S_TICK] = 1
    hpush(HT, G, max(t, HP[p, S_NEXT]), E_TICK, p, 0)


@njit(cache=True)
def _spray(C, AP, NHP, NHA, RR, sw, e, ne):
    """The fabric port a cell at switch ``sw`` takes toward edge ``e``."""
    k = sw * ne + e
    lo = NHP[k]
    n = NHP[k + 1] - lo
    r = RR[k]
    if C[SPRAY] == SPRAY_LEAST:
        best = -1
        bq = np.int64(1) << 62
        for j in range(n):
            a = NHA[lo + (r + j) % n]
            q = AP[a, A_QB] + AP[a, A_BUSY] * C[CELL]
            if q < bq:
                bq = q
                best = a
        RR[k] = (r + 1) % n
        return best
    RR[k] = (r + 1) % n
    return NHA[lo + r]


@njit(cache=True)
def _enqueue_cell(G, C, HT, CE, AP, PPBA, a, c, t):
    _append(AP, a, A_HEAD, A_TAIL, CE, c, C_NEXT)
    _grow(AP, a, A_QB, A_MAXQ, C[CELL])
    if AP[a, A_BUSY] == 0:
        AP[a, A_BUSY] = 1
        hpush(HT, G, t + _ser(C[CELL], PPBA[a]), E_ATX, a, 0)


@njit(cache=True)
def _release(G, C, HT, FR, HP, VQ, PPBH, v, t):
    """Frames of VOQ stream ``v`` complete at the egress leave the reorder buffer in order
    into their host port's queue."""
    while VQ[v, V_ROH] >= 0 and FR[VQ[v, V_ROH], F_DONE]:
        f = VQ[v, V_ROH]
        VQ[v, V_ROH] = FR[f, F_SNEXT]
        if VQ[v, V_ROH] < 0:
            VQ[v, V_ROT] = -1
        VQ[v, V_RSEQ] += 1
        p = FR[f, F_DSTP]
        HP[p, H_RB] -= FR[f, F_NCELLS] * C[CELL]
        HP[p, S_OUT] -= FR[f, F_BYTES]
        _kick(G, C, HT, HP, p, t)
        _append(HP, p, H_EGH, H_EGT, FR, f, F_NEXT)
        _grow(HP, p, H_EGQB, H_EGQMAX, FR[f, F_BYTES])
        if HP[p, H_EGBUSY] == 0:
            HP[p, H_EGBUSY] = 1
            hpush(HT, G, t + _ser(FR[f, F_BYTES] + C[WIRE], PPBH[p]), E_EGTX, p, 0)


@njit(cache=True)
def run(G, C, HT, FR, CE, AP, PPBA, HP, PPBH, PACE, VQ, FL, NHP, NHA, RR, SWI, EDI,
        EHP, EHI, GL, WH, limit):
    """Process events until a flow is done, the heap is empty, ``limit`` (ps) or a pool
    needs to grow; returns the reason (``R_*``)."""
    ne = C[E]  # edges
    nport = C[P]  # host ports
    while True:
        n = G[HSIZE]
        if n == 0:
            return R_EMPTY
        if (G[FR_NFREE] < 4 * C[MARGIN] or G[CE_NFREE] < 4 * C[MARGIN]
                or n + 4 * C[MARGIN] >= HT.shape[0]
                or (C[LOG] and G[NLOG] + 4 >= C[LOG_CAP])):
            return R_GROW
        t = HT[0, 0]
        if t > limit:
            G[NOW] = limit
            return R_LIMIT
        kind = HT[0, 2]
        a = HT[0, 3]
        b = HT[0, 4]
        hpop(HT, G)
        G[NOW] = t
        G[COUNT] += 1
        if kind == E_ATX:  # a fabric port sent its head cell
            c = AP[a, A_HEAD]
            AP[a, A_HEAD] = CE[c, C_NEXT]
            if AP[a, A_HEAD] < 0:
                AP[a, A_TAIL] = -1
            AP[a, A_QB] -= C[CELL]
            AP[a, A_TXB] += C[CELL]
            AP[a, A_CELLS] += 1
            CE[c, C_TARR] = t + AP[a, A_LAT]
            CE[c, C_FNEXT] = -1
            if AP[a, A_FT] >= 0:  # behind the cells already in flight on the arc
                CE[AP[a, A_FT], C_FNEXT] = c
            else:
                AP[a, A_FH] = c
                hpush(HT, G, CE[c, C_TARR], E_CARR, a, 0)
            AP[a, A_FT] = c
            if AP[a, A_HEAD] >= 0:
                hpush(HT, G, t + _ser(C[CELL], PPBA[a]), E_ATX, a, 0)
            else:
                AP[a, A_BUSY] = 0
        elif kind == E_CARR:  # the first cell in flight on arc a reached its switch
            c = AP[a, A_FH]
            AP[a, A_FH] = CE[c, C_FNEXT]
            if AP[a, A_FH] >= 0:
                hpush(HT, G, CE[AP[a, A_FH], C_TARR], E_CARR, a, 0)
            else:
                AP[a, A_FT] = -1
            b = AP[a, A_DST]
            e = CE[c, C_DEDGE]
            if EDI[b] == e:  # its destination edge: into the reorder buffer
                f = CE[c, C_FRAME]
                CE[c, C_NEXT] = G[CE_FREE]
                G[CE_FREE] = c
                G[CE_NFREE] += 1
                p = FR[f, F_DSTP]
                _grow(HP, p, H_RB, H_RBMAX, C[CELL])
                FR[f, F_LEFT] -= 1
                if FR[f, F_LEFT] == 0:
                    FR[f, F_DONE] = 1
                    if VQ[FR[f, F_VOQ], V_ROH] != f:
                        G[REORDERED] += 1  # complete before an earlier frame of its VOQ
                    _release(G, C, HT, FR, HP, VQ, PPBH, FR[f, F_VOQ], t)
            else:
                na = _spray(C, AP, NHP, NHA, RR, SWI[b], e, ne)
                _enqueue_cell(G, C, HT, CE, AP, PPBA, na, c, t)
        elif kind == E_HTX:  # a host port sent a frame: on to its edge
            HP[a, H_BUSY] = 0
            hpush(HT, G, t + HP[a, H_UPLAT], E_FARR, b, 0)
            _host_send(G, C, HT, FR, HP, FL, PPBH, a, t)
        elif kind == E_FARR:  # a frame reached its ingress edge: into its VOQ
            f = a
            src = FR[f, F_SRC]
            dp = FR[f, F_DSTP]
            v = HP[src, H_EDGE] * nport + dp
            FR[f, F_VOQ] = v
            FR[f, F_TENQ] = t
            _append(VQ, v, V_HEAD, V_TAIL, FR, f, F_NEXT)
            _grow(VQ, v, V_BYTES, V_MAX, FR[f, F_BYTES])
            if VQ[v, V_BYTES] >= C[XOFF] and HP[src, H_PVOQ] < 0:
                HP[src, H_PVOQ] = v  # PFC XOFF toward the sending host
                HP[src, H_PAUSES] += 1
                G[PAUSES] += 1
                hpush(HT, G, t + HP[src, H_UPLAT], E_PAUSE, src, 1)
            hpush(HT, G, t + C[RG_HALF], E_REQ, v, FR[f, F_BYTES])
        elif kind == E_REQ:  # a credit request reached the destination's scheduler
            v = a
            p = v % nport
            VQ[v, V_WANT] += b
            if VQ[v, V_ACTIVE] == 0:
                VQ[v, V_ACTIVE] = 1
                _append(HP, p, S_HEAD, S_TAIL, VQ, v, V_SNEXT)
            _kick(G, C, HT, HP, p, t)
        elif kind == E_TICK:  # the scheduler of port a grants one credit
            p = a
            HP[p, S_TICK] = 0
            v = HP[p, S_HEAD]
            if v < 0:
                continue
            g = min(C[CREDIT], VQ[v, V_WANT])
            if HP[p, S_OUT] + g > HP[p, S_WIN]:
                continue  # the window is full: a frame leaving the reorder buffer kicks it
            VQ[v, V_WANT] -= g
            HP[p, S_HEAD] = VQ[v, V_SNEXT]
            if HP[p, S_HEAD] < 0:
                HP[p, S_TAIL] = -1
            if VQ[v, V_WANT] > 0:  # round robin: to the back
                _append(HP, p, S_HEAD, S_TAIL, VQ, v, V_SNEXT)
            else:
                VQ[v, V_ACTIVE] = 0
            _grow(HP, p, S_OUT, S_OUTMAX, g)
            HP[p, S_GRANTED] += g
            HP[p, S_NEXT] = t + np.int64(g * PACE[p] + 0.5)
            if C[LOG]:
                k = G[NLOG]
                GL[k, 0] = t
                GL[k, 1] = p
                GL[k, 2] = g
                G[NLOG] = k + 1
            hpush(HT, G, t + C[RG_HALF], E_GRANT, v, g)
            _kick(G, C, HT, HP, p, t)
        elif kind == E_GRANT:  # a grant reached its VOQ: send frames as cells
            v = a
            VQ[v, V_CREDIT] += b
            e0 = v // nport
            while VQ[v, V_CREDIT] > 0 and VQ[v, V_HEAD] >= 0:
                f = VQ[v, V_HEAD]
                VQ[v, V_HEAD] = FR[f, F_NEXT]
                if VQ[v, V_HEAD] < 0:
                    VQ[v, V_TAIL] = -1
                fb = FR[f, F_BYTES]
                VQ[v, V_BYTES] -= fb
                VQ[v, V_CREDIT] -= fb
                w = t - FR[f, F_TENQ]
                G[WAIT_SUM] += w
                G[WAIT_N] += 1
                if w > G[WAIT_MAX]:
                    G[WAIT_MAX] = w
                WH[min(w // WAIT_BIN_PS, WH.shape[0] - 1)] += 1
                G[FRAMES] += 1
                # the stream (VOQ) order the egress restores
                FR[f, F_SEQ] = VQ[v, V_SEQ]
                VQ[v, V_SEQ] += 1
                _append(VQ, v, V_ROH, V_ROT, FR, f, F_SNEXT)
                dp = FR[f, F_DSTP]
                de = HP[dp, H_EDGE]
                if de == e0:  # switched locally by the edge: no cells
                    FR[f, F_NCELLS] = 0
                    FR[f, F_DONE] = 1
                    G[LOCAL_FRAMES] += 1
                    _release(G, C, HT, FR, HP, VQ, PPBH, v, t)
                    continue
                G[PAY_BYTES] += FR[f, F_PAY]
                nc = (fb + C[CELL] - C[CELLH] - 1) // (C[CELL] - C[CELLH])
                FR[f, F_NCELLS] = nc
                FR[f, F_LEFT] = nc
                G[CELLS] += nc
                G[FAB_BYTES] += nc * C[CELL]
                sw = SWI[HP[FR[f, F_SRC], H_ENODE]]
                for _ in range(nc):
                    c = G[CE_FREE]
                    G[CE_FREE] = CE[c, C_NEXT]
                    G[CE_NFREE] -= 1
                    CE[c, C_FRAME] = f
                    CE[c, C_DEDGE] = de
                    na = _spray(C, AP, NHP, NHA, RR, sw, de, ne)
                    _enqueue_cell(G, C, HT, CE, AP, PPBA, na, c, t)
            if VQ[v, V_CREDIT] > C[CREDIT] + C[MTU] + C[HDR]:
                G[CREDIT_BAD] += 1  # more credit than one grant's worth held idle
            if VQ[v, V_BYTES] <= C[XON]:  # PFC XON to the hosts this VOQ paused
                e = v // nport
                for j in range(EHP[e], EHP[e + 1]):
                    q = EHI[j]
                    if HP[q, H_PVOQ] == v:
                        HP[q, H_PVOQ] = -1
                        hpush(HT, G, t + HP[q, H_UPLAT], E_PAUSE, q, 0)
        elif kind == E_EGTX:  # an edge port sent a frame to its host
            p = a
            f = HP[p, H_EGH]
            HP[p, H_EGH] = FR[f, F_NEXT]
            if HP[p, H_EGH] < 0:
                HP[p, H_EGT] = -1
            HP[p, H_EGQB] -= FR[f, F_BYTES]
            hpush(HT, G, t + HP[p, H_DNLAT], E_HRX, f, p)
            if HP[p, H_EGH] >= 0:
                nf = HP[p, H_EGH]
                hpush(HT, G, t + _ser(FR[nf, F_BYTES] + C[WIRE], PPBH[p]), E_EGTX, p, 0)
            else:
                HP[p, H_EGBUSY] = 0
        elif kind == E_HRX:  # a frame reached its host
            f = a
            fl = FR[f, F_FLOW]
            FL[fl, L_RX] += FR[f, F_PAY]
            if FR[f, F_FSEQ] != FL[fl, L_RXSEQ]:
                G[INORDER_BAD] += 1  # the host got a frame out of its flow's order
            FL[fl, L_RXSEQ] += 1
            HP[b, H_RXB] += FR[f, F_PAY]
            FR[f, F_NEXT] = G[FR_FREE]
            G[FR_FREE] = f
            G[FR_NFREE] += 1
            if FL[fl, L_RX] >= FL[fl, L_SIZE]:
                FL[fl, L_DONE] = t
                G[DONE_FLOW] = fl
                G[RET] = fl
                return R_FLOWDONE
        elif kind == E_PAUSE:  # a PFC frame reached host port a
            if b == 1:
                if HP[a, H_PAUSED] == 0:
                    HP[a, H_PAUSED] = 1
                    HP[a, H_PSINCE] = t
            else:
                if HP[a, H_PAUSED]:
                    HP[a, H_PAUSED] = 0
                    HP[a, H_PAUSEDPS] += t - HP[a, H_PSINCE]
                _host_send(G, C, HT, FR, HP, FL, PPBH, a, t)
        elif kind == E_KICK:  # new flows on host port a
            _host_send(G, C, HT, FR, HP, FL, PPBH, a, t)
