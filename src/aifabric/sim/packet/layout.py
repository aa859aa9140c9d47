"""The array layout of the packet simulator's compiled core (plain constants: importing
this module does not import numba; the event heap's functions are in
:mod:`aifabric.sim.packet.heap`).

:class:`~aifabric.sim.packet.network.Network` keeps the whole state of a run in numpy
arrays; the constants below name their columns (``PI[p, P_BUSY]``: when port ``p``'s
serializer is free). The arrays travel together as one tuple ``S`` in the order of
:data:`STATE` (``S[0]`` is ``G``, ``S[10]`` is ``KI``, ...):

- ``G`` global counters and the clock; ``CI``/``CF`` integer/float settings (the
  scenario's ``packet:`` section, congestion-control parameters included);
- ``HT`` the event heap: rows ``(time_ps, seq, kind, a, b)``; ``seq`` is the tie-break
  counter shared with the Python event list (``G[SEQ]``);
- ``PI``/``PF``/``PT`` ports (one per arc): integers, floats, and per traffic class
  (queue bytes, pause state, PFC counters, ingress bytes and the part in headroom, drops,
  FIFO head/tail); ``PQ`` the QPs of each NIC port (round robin); ``NU`` per node buffer,
  its headroom pool and the bytes held (all, in headroom); ``LL`` lossless classes;
- ``KI``/``KF`` the frame pool (``KF``: HPCC telemetry per hop), ``FREE`` its free rows;
- ``QI``/``QF`` QPs (sender, receiver and congestion-control state), ``QR`` their routes
  as port rows (forward, reverse), ``QINT`` HPCC's last telemetry; ``RNG`` the random
  generators' states (ECN marking, spraying);
- ``LBT`` per-packet load balancing's tables (below).
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------- G: global scalars
NOW, SEQ, HSIZE, NFREE, DROPS, RETX, DELIV, SENTPFC, COUNT, RET = range(10)
# data packets trimmed (packet.switch.trim)
TRIMS = 10
NG = 11
# ---------------------------------------------------------------------- CI: int settings
(BUF, XOFF, XON, KMIN, KMAX, ECN_ON, INT_ON, OVH, HDR, MTU, ACKB, DTC, CTC, CC, CNPGAP,
 RTO, ACKINT, NTC, TC0, TC1, DC_TRESET, DC_BRESET, DC_THRESH, DC_PERIOD, DC_MONITOR,
 DC_CLAMP, HP_MAXSTAGE, TM_HAI) = range(28)
# NIC window and host-side PFC (issue 12 items 1, 6); where ECN marks (item 3)
(WIN_SCALE, HOST_PFC, HXOFF, HXON, HRXBUF, ECN_DEQ, RX_ON, WIN_ON) = range(28, 36)
# DCQCN as NVIDIA documents it (item 5): clamp after a timer increase, spare slots
(DC_CLAMPTI, DC_X0, DC_X1, DC_X2) = range(36, 40)
# per-packet load balancing at the switches (packet.lb) and the receiver (nic.receiver):
# mode (0 ecmp, 1 spray, 2 adaptive), spray kind (0 random, 1 round robin), flowlet gap
# (ps, 0: per packet), out-of-order receiver on, its bitmap (packets)
(LB_MODE, LB_SPRAY, LB_GAP, RX_OOO, OOO_W) = range(40, 45)
# where the tables live in LBT (destinations, then the offsets of GT, GP, GA, GRR) and the
# QP's extra columns in QI (reorder histogram, bitmap, flowlet state; the hops it holds)
(LB_ND, LB_GT0, LB_GP0, LB_GA0, LB_GRR0, QX_RH, QX_RB, QX_QL, QX_H) = range(45, 54)
# NIC-side spraying (nic.entropy): the algorithm (0 fixed, 1 oblivious, 2 round robin,
# 3 reps), values per QP, the REPS buffer's entries and its first QI column; where the
# switches' hash lives in LBT (the EV's share of the hash per UDP source port, each node's
# seed XOR and hash-bit offset), the hash width (bits), member selection (0 mod, 1 member
# table) and table size; the ooo receiver's fast retransmit (ACKs ahead, 0: off)
(EV_ALG, EV_N, EV_RB, QX_EV, EV_DT0, EV_NX0, EV_NO0, EV_W, EV_SEL, EV_TS, FRX) = range(54, 65)
# packet trimming (packet.switch.trim): on, the threshold (bytes of the egress queue; -1:
# only instead of a drop), the trimmed frame's size
(TRIM_ON, TRIM_THR, TRIM_B) = range(65, 68)
# the sender's queue of trimmed packets to repair (ooo receiver): entries, first QI column
(TRQ_N, QX_TRQ) = range(68, 70)
# UEC congestion control (issue 25 item 5; transports/nscc.py, rccc.py): NSCC's target
# queueing delay, quick-adapt delay threshold, adjustment period (ps), adjustment bytes,
# quick-adapt gate (a shift), fast-increase delay (ps), the network RTT (ps), quick adapt
# on; RCCC's credit per pull (bytes)
(NS_TARGET, NS_QATHR, NS_ADJP, NS_ADJB, NS_QAGATE, NS_FASTD, NS_NETRTT, NS_QAON,
 RC_PULL) = range(70, 79)
# the ooo receiver's ACKs (nic.ooo_acks): 0 per_packet, 1 coalesced (uet-htsim's UecSink)
ACKCO = 79
# InfiniBand's link model (issue 27 item 3; :mod:`aifabric.sim.packet.ib`): on, the
# largest frame (a VL sends while its credit holds one), the flow-control packet's bytes,
# FECN marking (queue threshold in bytes, mark every n-th eligible packet, 0: off),
# CCTI timer (ps), increase, limit, minimum, the CCT's first entry in LBT, adaptive
# routing with credit state, VL arbitration weights of VL 0..15 (64-byte units per turn;
# the settings' record: the arbitration itself reads its tables from LBT, below)
(IB_ON, IB_MAXF, IB_FCPB, IB_FTHR, IB_FRATE, IB_CCTT, IB_CCTINC, IB_CCTLIM, IB_CCTMIN,
 IB_CCT0, IB_AR) = range(80, 91)
IB_W0 = 91
# InfiniBand's VL arbitration with both of IBTA's tables (vol. 1, 7.6.9), in LBT as
# (VL, weight in bytes) pairs: the high table's entries and first index, the low table's,
# LimitOfHighPriority in bytes (a huge number: unbounded); the switch ports' Victim_Mask
# (its first index in LBT, one flag per port row; -1: every port marks as a victim too);
# the congestion control per SL (first index in LBT of 16 rows: on, CCTI increase, timer
# in ps, CCTI minimum)
(IB_HN, IB_HT0, IB_LN, IB_LT0, IB_HLIM, IB_VICT, IB_SLCC0) = range(IB_W0 + 16, IB_W0 + 23)
NCI = IB_W0 + 23
LB_ECMP, LB_SPRAYM, LB_ADAPTIVE = range(3)
EV_FIXED, EV_OBLIVIOUS, EV_RR, EV_REPS = range(4)
# ---------------------------------------------------------------------- CF: float settings
(ALPHA, PMAX, DC_AI, DC_HAI, DC_GD, DC_KEEP, DC_G, TM_A, TM_BETA, TM_DELTA, TM_TLOW,
 TM_THIGH, TM_MINRATE, DT_G, DT_MINW, HP_ETA) = range(16)
# DCQCN: the rate set on the first CNP (bit/s, 0: not set), spare slots
(DC_FIRST, DC_XF0, DC_XF1) = range(16, 19)
# the NIC: host receive drain (ps per payload byte; nic.rx_gbps), spare slot
(RX_PPB, X_NICF1) = range(19, 21)
# NSCC: alpha (bytes per byte-ps), fair-increase and eta (bytes), fast-increase scale,
# decrease gamma, delay EWMA gain, max window (x BDP), the network line rate (bit/s),
# the reference BDP (bytes); RCCC: the pacer's ps per credit byte
(NS_ALPHA, NS_FI, NS_ETA, NS_FISCALE, NS_GAMMA, NS_DALPHA, NS_MAXBDP, NS_LINE, NS_REFBDP,
 RC_PPB) = range(21, 31)
NCF = 31
# congestion-control codes (CI[CC]), in the order of config.CC_NAMES
CC_NONE, CC_DCQCN, CC_HPCC, CC_TIMELY, CC_DCTCP = range(5)
CC_NSCC, CC_RCCC, CC_NSCC_RCCC = range(5, 8)
CC_IBCC = 8  # InfiniBand congestion control (FECN/BECN, CCTI; transports/ibcc.py)
# ---------------------------------------------------------------------- PI: port ints
# (numbered so that what a frame's hop reads of its ingress and egress port lies in two
# cache lines of the row: numpy starts a large array 16 bytes into a line, so columns
# 0-5 and 6-13 of a 24-column row each share one)
(P_ARC, P_SRC, P_DST, P_HOST, P_PROP, P_BH, P_REV, P_BUSY, P_TXEV, P_TXB, P_QTOT, P_FH,
 P_FT, P_KMIN, P_ECN, P_DROPS, P_WAKE, P_NQP, P_RR) = range(19)
# P_BH: a black-holed arc (PacketSim.blackhole: its frames are lost, the switches still
# use it); P_KMIN (above), P_KMAX: the port's own WRED profile (issue 12 item 2: per port
# speed); the link's own propagation (ps, without the switch latency: what a PFC frame
# back over it takes); spare slot; the PFC headroom
(P_KMAX, P_LPROP, P_X1, P_HEADROOM) = range(19, 23)
# data packets this port trimmed (packet.switch.trim)
P_TRIMS = 23
# InfiniBand (ib.py): the VL arbitration's current VL and the weight left of its turn
# (bytes), FECN's count of eligible packets since the last mark
(P_VLCUR, P_VLREM, P_FECNC) = range(24, 27)
# the high-priority table's current entry and the weight left of its turn (bytes), the
# high-priority bytes sent since the low table last had its chance
(P_VLHCUR, P_VLHREM, P_VLHCNT) = range(27, 30)
NPI = 30
P_PPB, P_GBPS, P_PMAX, P_XF0 = 0, 1, 2, 3  # PF: ps per byte, Gbit/s, WRED Pmax, spare
NPF = 4
# ---------------------------------------------------------------------- PT: port x field x TC
(T_QB, T_QPEAK, T_PAUSED, T_PSINCE, T_PAUSEDPS, T_PLONG, T_PFCTX, T_PFCRX, T_ING, T_XOFF,
 T_QH, T_QT) = range(12)
# of the ingress bytes (T_ING) of a lossless class, those in the PFC headroom; frames
# dropped at this egress port per class
T_HDRM, T_DROPS = range(12, 14)
# InfiniBand (ib.py), per (arc, VL): the credit the sending port holds for the buffer at
# the arc's end (bytes), that buffer's size (the VL's credits x 64), the time the VL had
# no credit for a full packet (ps, total and the longest stretch) and since when, the
# peak bytes the buffer held (T_ING's; never above its size), the bytes the port sent on
# the VL
(T_CRED, T_CLIM, T_CBLKPS, T_CBLONG, T_CBSINCE, T_INGPEAK, T_VTXB) = range(14, 21)
NPT = 21
# NU per node: shared-buffer bytes used, PFC headroom reserved (switches); a NIC's receive
# buffer (nic.rx_gbps): bytes held, when its drain is free, FIFO head/tail (pool rows),
# XOFF/XON thresholds, the one arc into it (-1: several); the switch's buffer (bytes) and
# the bytes of it held in PFC headroom
U_USED, U_RESV, U_RXB, U_RXBUSY, U_RXH, U_RXT, U_HXOFF, U_HXON, U_INP = range(9)
U_BUF, U_HUSED = range(9, 11)
# RCCC's credit pacer of a receiving NIC: when it may grant next, the FIFO of QPs waiting
# for credit (head, tail: QP rows linked through Q_RNEXT)
U_CRNEXT, U_CRH, U_CRT = range(11, 14)
NNU = 14
# ---------------------------------------------------------------------- KI: packet pool
(K_QP, K_KIND, K_SEQ, K_PAY, K_SIZE, K_TC, K_HOP, K_CE, K_INP, K_TS, K_AT, K_NEXT, K_DIR,
 K_NINT) = range(14)
# the entropy value a data frame carries (nic.entropy; -1: none); on an ACK/NAK: the value
# of the data frame it answers, + 65,536 when that frame was ECN-marked (-1: none)
K_EV = 14
# a data frame's ACK request (nic.ooo_acks coalesced: the sender asks for an ACK at once,
# uet-htsim's ar flag; 0/1, set on data frames only when coalescing)
K_AR = 15
NKI = 16
# ---------------------------------------------------------------------- QI / QF: QPs
(Q_SIZE, Q_TC, Q_SNDNXT, Q_SNDUNA, Q_HIGH, Q_RCVNXT, Q_NEXTAV, Q_LASTW, Q_START, Q_DONE,
 Q_ACKEDAT, Q_LASTCNP, Q_NAKSENT, Q_PSA, Q_MSA, Q_LASTPROG, Q_RTOARMED, Q_RETX, Q_DUP,
 Q_TO, Q_NAKS, Q_CNPS, Q_PORT, Q_BRTT, Q_LEN, Q_I0, Q_I1, Q_I2, Q_I3, Q_I4, Q_I5, Q_I6,
 Q_I7) = range(33)
# first data byte on the wire (issue 12 item 7); congestion control's extra columns;
# NIC spare columns
(Q_FIRSTTX, Q_I8, Q_I9, Q_X0, Q_X1) = range(33, 38)
# the NIC spare columns, for the coalescing ooo receiver (nic.ooo_acks: coalesced): the
# packets it holds out of order; an ACK request pending (ACK again when they drain)
Q_OOON, Q_ACKRQ = Q_X0, Q_X1
# the destination's row in the load-balancing tables, data then return direction (-1:
# follow the route); out-of-order arrivals (packets ahead of the expected sequence),
# the largest distance ahead (packets), packets refused beyond the out-of-order bitmap
(Q_DSTI, Q_RDSTI, Q_OOOPK, Q_RMAX, Q_OOODROP) = range(38, 43)
# NIC-side spraying: the hash of the QP's header with UDP source port 0, its own source
# port, packets given a value so far (round robin, REPS' first window), REPS' first-window
# length, its buffer's oldest entry and count; fast retransmit: ACKs ahead since the last
# progress, the sequence last fast-retransmitted (-1: none), a retransmission pending,
# when it was sent; the hash of the return header (IPs swapped) with source port 0 (ACKs
# and NAKs echo the data's value and are hashed with it on their way back)
# REPS' freezing mode (a loss was detected: recycled values are reused, not consumed)
# and the recovery point of fast retransmit (the highest sequence sent when it began)
(Q_EVB, Q_SPORT, Q_EVI, Q_EVX, Q_EVH, Q_EVC, Q_SACKS, Q_FRSEQ, Q_FRPEND, Q_FRT,
 Q_EVBR, Q_FROZEN, Q_FRREC) = range(43, 56)
# trimming: NACKs of trimmed packets the sender received
Q_TNAKS = 56
# the repair queue of trimmed packets: its oldest entry and count
(Q_TRH, Q_TRC) = range(57, 59)
# RCCC (issue 25 item 5): the sender's credit (bytes; may go below 0 by one packet), the
# credit the receiver granted and the sender received (cumulative bytes), the next QP in
# the receiver's credit FIFO (-1: last), in that FIFO (0/1), still speculating (0/1)
(Q_RCRED, Q_RGRANT, Q_RRECV, Q_RNEXT, Q_RIN, Q_RSPEC) = range(59, 65)
NQI = 65
#: buckets of the per-QP reorder histogram: distance d < 16 exactly, then one per
#: power of two (16..31, 32..63, ...), the last open
NRH = 32
# after column NQI of QI: the reorder histogram (NRH columns from CI[QX_RH]); with
# nic.receiver ooo the out-of-order bitmap (one bit per packet ahead, 64 per column, from
# CI[QX_RB]); with nic.entropy reps its buffer (CI[EV_RB] columns from CI[QX_EV]); with
# trimming and the ooo receiver the repair queue (CI[TRQ_N] columns from CI[QX_TRQ]); with
# lb flowlets the flowlet state per (direction, hop): last time, port
# (from CI[QX_QL], CI[QX_H] hops)
F_RATE, F_WIN, F_LINE, F_0, F_1, F_2, F_3, F_4 = range(8)
# the QP's fixed window (bytes; issue 12 item 1); congestion control's extra; spare
F_WINB, F_5, F_6, F_X0 = range(8, 12)
NQF = 12
# columns Q_I0..Q_I9 and F_0..F_6: the congestion control's own (transports/*.FIELDS)
# ---------------------------------------------------------------------- events, frames
# numpy scalars, not ints: numba compiles a function once per distinct *literal* int it is
# called with, once for all int64 values
E_ARRIVE, E_TXDONE, E_QPSTART, E_RTO, E_WAKE, E_PAUSE, E_DCPEND, E_DCTIMER, E_RXDONE = (
    np.arange(9, dtype=np.int64))
E_CREDIT = np.int64(9)  # RCCC: a receiver's credit pacer may grant
# InfiniBand: credits come back to a port (a flow-control packet: a = port, b = bytes x
# 16 + VL); a QP's CCTI timer expires (a = QP)
E_IBCRED, E_IBCCTI = np.int64(10), np.int64(11)
DATA, ACK, NAK, CNP = np.arange(4, dtype=np.int64)
# a trimmed data packet (its header: seq and payload length kept, the payload cut) and
# the receiver's NACK of it (seq: the trimmed packet's, not cumulative)
TRIM, TNAK = np.arange(4, 6, dtype=np.int64)
CREDIT = np.int64(6)  # RCCC: credit from the receiver (K_SEQ: bytes granted)
ZERO, ONE, NIL = np.int64(0), np.int64(1), np.int64(-1)
PAUSE_FRAME_BYTES = 64 + 20
# run() results
R_LIMIT, R_EMPTY, R_PY, R_DONE, R_GROW = range(5)

STATE = ("G", "CI", "CF", "HT", "PI", "PF", "PT", "PQ", "NU", "LL", "KI", "KF", "FREE", "QI",
         "QF", "QR", "QINT", "RNG", "LBT")
# positions in S
(G_, CI_, CF_, HT_, PI_, PF_, PT_, PQ_, NU_, LL_, KI_, KF_, FREE_, QI_, QF_, QR_, QINT_,
 RNG_) = range(18)
# load balancing (packet.lb), one flat int64 array LBT (one array: every array of S is
# passed to every compiled call): from 0 the switch row of each node (-1: not a switch);
# from CI[LB_GT0] per (switch row, destination row) the ECMP group toward it and the hops
# left from there (-1: none); from CI[LB_GP0]/CI[LB_GA0] the groups' members (CSR of port
# rows); from CI[LB_GRR0] each group's round-robin position
LBT_ = 18
NEVER = 1 << 62
