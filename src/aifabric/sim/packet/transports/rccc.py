"""RCCC, the receiver credit-based congestion control of Ultra Ethernet (UEC 1.0), for
incast: the receiver decides how fast its senders may send.

A sender starts with a speculative credit (``speculative_bdp`` x its BDP, at least one
packet) and may send a data packet while its credit is positive; each packet spends its
payload; its first ACK ends the speculation (what is left of the speculative credit is
dropped: from then on only granted credit counts, as uet-htsim's ``stopSpeculating``).
Each data packet that reaches the receiver asks for the credit the sender's remaining
bytes need (what is left to send, at most its NSCC window + one MTU under ``nscc+rccc``,
- its credit - credit already granted and on its way back). The receiving NIC's credit
pacer grants ``credit_mtus`` MTUs at a time, round robin over the QPs that asked, and
after each grant of g bytes waits as long as the grant's packets take on the receiver's
link at ``pacer_fraction`` x ``receiver_gbps`` (payload plus each packet's headers and
preamble/gap): what a receiver grants never runs ahead of its rate. A grant travels back
as a credit frame (``ack_bytes``, the CNP class); the sender holds at most its
speculative credit. A sender that also runs NSCC (``nscc+rccc``) needs both window and
credit.

The pacer's state is per node (``NU[node, U_CRNEXT]``, the FIFO ``U_CRH``/``U_CRT``
linked through ``QI[q, Q_RNEXT]``); one ``E_CREDIT`` event is pending while the FIFO is
not empty. Defaults: the UEC consortium's reference simulator (uet-htsim
``UecPullPacer``, ``UecSink``), which follows the specification.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from aifabric.sim.packet.heap import hpush
from aifabric.sim.packet.layout import (
    CC,
    CC_NSCC_RCCC,
    CF_,
    CI_,
    E_CREDIT,
    F_6,
    F_WIN,
    G_,
    HDR,
    HT_,
    MTU,
    NOW,
    NU_,
    OVH,
    Q_RCRED,
    Q_RGRANT,
    Q_RIN,
    Q_RNEXT,
    Q_RRECV,
    Q_RSPEC,
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

__all__ = ["FIELDS", "blocked", "grant", "init", "need", "on_ack", "on_credit", "on_data",
           "on_send", "params"]

MAXCRED = F_6  # the most credit a sender holds (bytes)
FIELDS = {"credit": ("QI", Q_RCRED), "credit_granted": ("QI", Q_RGRANT),
          "credit_received": ("QI", Q_RRECV), "max_credit": ("QF", MAXCRED),
          "speculating": ("QI", Q_RSPEC)}


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
    qi[Q_RSPEC] = 1


@njit(cache=True)
def blocked(S, q):
    """No credit left?"""
    return S[QI_][q, Q_RCRED] <= 0


@njit(cache=True)
def need(S, q):
    """The credit the sender of QP ``q`` still needs beyond what it holds and what is on
    its way to it (bytes)."""
    QI = S[QI_]
    rem = QI[q, Q_SIZE] - QI[q, Q_SNDNXT]
    if S[CI_][CC] == CC_NSCC_RCCC:  # no more than the window lets it send
        w = S[QF_][q, F_WIN] + S[CI_][MTU]
        if rem > w:
            rem = int(w)
    return rem - QI[q, Q_RCRED] - (QI[q, Q_RGRANT] - QI[q, Q_RRECV])


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
        mtu = CI[MTU]  # the grant's packets on the wire: payload, headers, preamble/IFG
        wire = g + (g + mtu - 1) // mtu * (CI[HDR] + CI[OVH])
        NU[node, U_CRNEXT] = now + math.ceil(wire * CF[RC_PPB])
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
def on_ack(S, q):
    """The sender's first ACK ends its speculation: unspent speculative credit is gone."""
    QI = S[QI_]
    if QI[q, Q_RSPEC] != 0:
        QI[q, Q_RSPEC] = 0
        if QI[q, Q_RCRED] > 0:
            QI[q, Q_RCRED] = 0


@njit(cache=True)
def on_send(S, q, nbytes):
    """A data packet of ``nbytes`` payload spends its credit."""
    S[QI_][q, Q_RCRED] -= nbytes
