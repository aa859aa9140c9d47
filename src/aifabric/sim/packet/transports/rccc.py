"""RCCC, the receiver credit-based congestion control of Ultra Ethernet (UEC 1.0), for
incast: the receiver decides how fast its senders may send.

A sender starts with a speculative credit (``speculative_bdp`` x its BDP, at least one
packet) and may send a data packet while its credit is positive; each packet spends its
payload. Each data packet that reaches the receiver asks for the credit the sender's
remaining bytes need (what is left to send - its credit - credit already granted and on
its way back). The receiving NIC's credit pacer grants ``credit_mtus`` MTUs at a time,
round robin over the QPs that asked, and after each grant of g bytes waits g /
(``pacer_fraction`` x ``receiver_gbps``): what a receiver grants never runs ahead of its
rate. A grant travels back as a credit frame (``ack_bytes``, the CNP class); the sender
holds at most its speculative credit. A sender that also runs NSCC (``nscc+rccc``) needs
both window and credit.

The pacer's state is per node (``NU[node, U_CRNEXT]``, the FIFO ``U_CRH``/``U_CRT`` linked
through ``QI[q, Q_RNEXT]``); one ``E_CREDIT`` event is pending while the FIFO is not
empty. Defaults: the UEC consortium's reference simulator (uet-htsim ``UecPullPacer``,
``UecSink``), which follows the specification.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from aifabric.sim.packet.heap import hpush
from aifabric.sim.packet.layout import (
    CF_,
    CI_,
    E_CREDIT,
    F_6,
    G_,
    HT_,
    NOW,
    NU_,
    Q_RCRED,
    Q_RGRANT,
    Q_RIN,
    Q_RNEXT,
    Q_RRECV,
    Q_SIZE,
    Q_SNDNXT,
    QF_,
    QI_,
    RC_PPB,
    RC_PULL,
    U_CRH,
    U_CRNEXT,
    U_CRT,
    ZERO,
)

__all__ = ["FIELDS", "blocked", "grant", "init", "need", "on_credit", "on_data", "params"]

MAXCRED = F_6  # the most credit a sender holds (bytes)
FIELDS = {"credit": ("QI", Q_RCRED), "granted": ("QI", Q_RGRANT),
          "received": ("QI", Q_RRECV), "max_credit": ("QF", MAXCRED)}


def params(ci: np.ndarray, cf: np.ndarray, p: Any, mtu: int) -> None:
    """The scenario's ``cc.rccc`` into the settings arrays."""
    ci[RC_PULL] = p.credit_mtus * mtu
    rate = (p.receiver_gbps or 0.0) * 1e9 * p.pacer_fraction
    cf[RC_PPB] = 8e12 / rate if rate > 0 else 0.0


def init(qi: np.ndarray, qf: np.ndarray, p: Any, line: float, base_rtt_ps: int,
         mtu: int) -> None:
    """A QP starts with its speculative credit (at least one packet, which asks for the
    rest)."""
    spec = max(math.floor(p.speculative_bdp * base_rtt_ps * line / 8e12), mtu)
    qi[Q_RCRED] = spec
    qf[MAXCRED] = float(spec)
    qi[Q_RNEXT] = -1


@njit(cache=True)
def blocked(S, q):
    """No credit left?"""
    return S[QI_][q, Q_RCRED] <= 0


@njit(cache=True)
def need(S, q):
    """The credit the sender of QP ``q`` still needs beyond what it holds and what is on
    its way to it (bytes)."""
    QI = S[QI_]
    return (QI[q, Q_SIZE] - QI[q, Q_SNDNXT]) - QI[q, Q_RCRED] - \
        (QI[q, Q_RGRANT] - QI[q, Q_RRECV])


@njit(cache=True)
def _link(S, node, q):
    """QP ``q`` joins the tail of ``node``'s credit FIFO; True when the FIFO was empty."""
    NU, QI = S[NU_], S[QI_]
    QI[q, Q_RIN] = 1
    QI[q, Q_RNEXT] = -1
    t = NU[node, U_CRT]
    NU[node, U_CRT] = q
    if t < 0:
        NU[node, U_CRH] = q
        return True
    QI[t, Q_RNEXT] = q
    return False


@njit(cache=True)
def _pace(S, node):
    """The pacer's next event: when it may grant again (now at the earliest)."""
    now = S[G_][NOW]
    at = S[NU_][node, U_CRNEXT]
    hpush(S[HT_], S[G_], at if at > now else now, E_CREDIT, node, ZERO)


@njit(cache=True)
def on_data(S, q, node):
    """A data packet of QP ``q`` reached its receiver ``node``: it asks for credit."""
    if S[QI_][q, Q_RIN] == 0 and need(S, q) > 0 and _link(S, node, q):
        _pace(S, node)


@njit(cache=True)
def grant(S, node, now):
    """The pacer of ``node`` may grant: the QP at the FIFO's head gets up to one pull of
    credit (QPs that need none leave the FIFO without taking time); returns the QP that
    got credit and how much, or (-1, 0)."""
    CI, CF, NU, QI = S[CI_], S[CF_], S[NU_], S[QI_]
    while NU[node, U_CRH] >= 0:
        q = NU[node, U_CRH]
        nx = QI[q, Q_RNEXT]
        NU[node, U_CRH] = nx
        if nx < 0:
            NU[node, U_CRT] = -1
        QI[q, Q_RIN] = 0
        n = need(S, q)
        if n <= 0:
            continue
        g = CI[RC_PULL]
        if n < g:
            g = n
        QI[q, Q_RGRANT] += g
        NU[node, U_CRNEXT] = now + math.ceil(g * CF[RC_PPB])
        again = need(S, q) > 0
        if NU[node, U_CRH] >= 0:  # others wait: one event for the next grant
            _pace(S, node)
            if again:
                _link(S, node, q)
        elif again and _link(S, node, q):
            _pace(S, node)
        return q, g
    return -1, 0


@njit(cache=True)
def on_credit(S, q, g):
    """A credit frame of ``g`` bytes reaches the sender of QP ``q``."""
    QI = S[QI_]
    QI[q, Q_RRECV] += g
    c = QI[q, Q_RCRED] + g
    cap = int(S[QF_][q, MAXCRED])
    QI[q, Q_RCRED] = c if c < cap else cap


@njit(cache=True)
def on_send(S, q, nbytes):
    """A data packet of ``nbytes`` payload spends its credit."""
    S[QI_][q, Q_RCRED] -= nbytes
