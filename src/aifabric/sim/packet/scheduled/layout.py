"""The array layout of the scheduled fabric's compiled core (plain constants: importing
this module does not import numba).

The state of a run is a handful of integer arrays whose columns are named here; the heap
rows are ``(time_ps, seq, kind, a, b)`` as in the RoCE simulator
(:mod:`aifabric.sim.packet.heap`), so ``G[SEQ]`` and ``G[HSIZE]`` sit where that heap
expects them.

- ``G`` globals: the clock, the heap's counters, events processed, free-list heads and
  counts, statistics;
- ``C`` settings (integers; times in ps), ``PPB`` picoseconds per byte per arc;
- ``FR`` frames (RoCE frames queued in a VOQ, cut into cells, reassembled, sent to the
  host), ``CE`` cells, ``AP`` fabric ports (one per arc between switches),
  ``HP`` host ports (one per NIC port: the sender, its edge port, the egress scheduler
  and the reorder buffer of the port as destination), ``VQ`` VOQs (edge x destination
  port), ``FL`` flows (QPs), ``NHP``/``NHA`` the next hops of every switch toward every
  edge (all shortest paths), ``RR`` their round-robin pointers, ``GL`` the grant log.
"""

from __future__ import annotations

from aifabric.sim.packet.layout import HSIZE, SEQ

__all__ = ["HSIZE", "SEQ"]

# ---------------------------------------------------------------------- G: globals
NOW = 0
assert SEQ == 1 and HSIZE == 2
(COUNT, RET, FR_FREE, FR_NFREE, CE_FREE, CE_NFREE, NLOG, WAIT_SUM, WAIT_MAX, WAIT_N,
 PAUSES, FRAMES, CELLS, FAB_BYTES, PAY_BYTES, HOST_OVH, LOCAL_FRAMES, INORDER_BAD,
 CREDIT_BAD, DONE_FLOW, REORDERED) = range(3, 24)
NG = 24
# ---------------------------------------------------------------------- C: settings
(MTU, HDR, WIRE, CELL, CELLH, CREDIT, RG_HALF, XOFF, XON, P, E, LOG, SPRAY, MARGIN,
 LOG_CAP) = range(15)
NC = 15
SPRAY_RR, SPRAY_LEAST = 0, 1
# ---------------------------------------------------------------------- return codes
R_EMPTY, R_LIMIT, R_FLOWDONE, R_GROW = 0, 1, 2, 3
# ---------------------------------------------------------------------- event kinds
(E_HTX, E_FARR, E_REQ, E_TICK, E_GRANT, E_ATX, E_CARR, E_EGTX, E_HRX, E_PAUSE,
 E_KICK) = range(1, 12)
# ---------------------------------------------------------------------- FR: frames
(F_FLOW, F_PAY, F_BYTES, F_NEXT, F_SNEXT, F_LEFT, F_VOQ, F_TENQ, F_DONE, F_SRC, F_DSTP,
 F_NCELLS, F_SEQ, F_FSEQ) = range(14)
NFR = 14
# ---------------------------------------------------------------------- CE: cells
# (C_TARR, C_FNEXT: when it reaches the end of the arc it is on, and the next cell in
# flight on that arc: cells leave an arc in the order they went on it, so only the first
# cell in flight of each arc has a heap entry)
C_FRAME, C_NEXT, C_DEDGE, C_TARR, C_FNEXT = range(5)
NCE = 5
# ---------------------------------------------------------------------- AP: fabric ports
(A_HEAD, A_TAIL, A_QB, A_BUSY, A_MAXQ, A_TXB, A_DST, A_LAT, A_CELLS, A_FH, A_FT) = range(11)
NAP = 11
# ---------------------------------------------------------------------- HP: host ports
(H_NODE, H_EDGE, H_ENODE, H_UPLAT, H_DNLAT, H_BUSY, H_PAUSED, H_PVOQ, H_FHEAD, H_FTAIL,
 H_EGH, H_EGT, H_EGBUSY, H_RB, H_RBMAX, H_PAUSES, H_PAUSEDPS, H_PSINCE, H_EGQB, H_EGQMAX,
 H_TXB, H_RXB, H_UPARC, H_DNARC,
 # the egress scheduler of this port (as a destination)
 S_OUT, S_HEAD, S_TAIL, S_TICK, S_NEXT, S_GRANTED, S_WIN, S_OUTMAX) = range(32)
NHOST = 32
# ---------------------------------------------------------------------- VQ: VOQs
(V_HEAD, V_TAIL, V_BYTES, V_CREDIT, V_WANT, V_ACTIVE, V_SNEXT, V_MAX, V_ROH, V_ROT,
 V_SEQ, V_RSEQ) = range(12)
NVQ = 12
# ---------------------------------------------------------------------- FL: flows
(L_SRC, L_DST, L_SIZE, L_LEFT, L_RX, L_NEXT, L_START, L_FIRST, L_DONE, L_INLIST,
 L_TXSEQ, L_RXSEQ) = range(12)
NFL = 12
