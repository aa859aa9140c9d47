"""DCTCP-style window control (Alizadeh et al., SIGCOMM'10) over RoCE.

The receiver echoes in each ACK how many of the packets it acknowledges were ECN-marked.
Once per window of data the sender updates ``alpha = (1-g) alpha + g F`` (F: fraction of
marked packets) and, if any was marked, cuts ``W *= 1 - alpha/2``; otherwise it grows
one MTU per window (congestion avoidance). Packets go out at line rate within W.

Compiled functions over the simulator's arrays (:mod:`aifabric.sim.packet.layout`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from aifabric.sim.packet.layout import (
    CF_,
    CI_,
    DT_G,
    DT_MINW,
    F_0,
    F_1,
    F_RATE,
    F_WIN,
    K_CE,
    K_SEQ,
    KI_,
    MTU,
    Q_I0,
    Q_I1,
    Q_I2,
    Q_I3,
    Q_SNDNXT,
    QF_,
    QI_,
)

__all__ = ["FIELDS", "init", "on_ack", "params"]

ACKED, MARKED, ENDSEQ, LASTSEQ = Q_I0, Q_I1, Q_I2, Q_I3
MAXW, ALPHA = F_0, F_1
FIELDS = {"max_w": ("QF", MAXW), "alpha": ("QF", ALPHA), "acked": ("QI", ACKED),
          "marked": ("QI", MARKED), "end_seq": ("QI", ENDSEQ), "last_seq": ("QI", LASTSEQ)}


def params(ci: np.ndarray, cf: np.ndarray, p: Any) -> None:
    """The scenario's ``cc.dctcp`` into the settings arrays."""
    cf[DT_G], cf[DT_MINW] = p.g, float(p.min_window_bytes)


def init(qi: np.ndarray, qf: np.ndarray, p: Any, line: float, base_rtt_ps: int,
         mtu: int) -> None:
    """A QP starts with ``init_window_bytes`` (default one BDP) at line rate."""
    bdp = line * base_rtt_ps / 8e12
    qf[F_RATE] = line
    qf[F_WIN] = float(p.init_window_bytes or max(bdp, mtu))
    qf[MAXW] = max(4 * bdp, qf[F_WIN])


@njit(cache=True)
def on_ack(S, q, now, k):
    """An ACK (frame ``k``) with its count of ECN-marked packets."""
    CI, CF, KI, QI, QF = S[CI_], S[CF_], S[KI_], S[QI_], S[QF_]
    seq = KI[k, K_SEQ]
    # packets this ACK covers (several with ack_interval_packets > 1)
    QI[q, ACKED] += max(1, -(-(seq - QI[q, LASTSEQ]) // CI[MTU]))
    QI[q, LASTSEQ] = max(QI[q, LASTSEQ], seq)
    QI[q, MARKED] += KI[k, K_CE]
    if seq < QI[q, ENDSEQ]:
        return
    acked = QI[q, ACKED]
    marked = QI[q, MARKED]
    f = min(marked / acked, 1.0) if acked else 0.0
    g = CF[DT_G]
    QF[q, ALPHA] = (1 - g) * QF[q, ALPHA] + g * f
    if marked:
        QF[q, F_WIN] = max(QF[q, F_WIN] * (1 - QF[q, ALPHA] / 2), CF[DT_MINW])
    else:
        QF[q, F_WIN] = min(QF[q, F_WIN] + CI[MTU], QF[q, MAXW])
    QI[q, ACKED] = 0
    QI[q, MARKED] = 0
    QI[q, ENDSEQ] = QI[q, Q_SNDNXT]
