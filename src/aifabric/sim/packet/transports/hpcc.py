"""HPCC (Li et al., SIGCOMM'19): a window from in-band network telemetry.

Every switch egress appends (link speed B, bytes sent so far, time, queue bytes) to a data
packet; the receiver echoes the list in the ACK. Per hop the sender estimates the
normalized in-flight bytes ``u = min(q, q_prev)/(B*T) + txRate/B``, takes the most loaded
hop, smooths it over one base RTT T (EWMA weighted by the time the sample covers) and
sets ``W = Wc / (U/eta) + W_AI`` when U passes the target utilization eta (or after
``max_stage`` additive steps), else ``W = Wc + W_AI``; Wc is committed once per RTT.
The QP is paced at ``W / T`` and keeps at most W bytes in flight.
"""

from __future__ import annotations

from typing import Any

from aifabric.sim.packet.engine import PS_PER_US

__all__ = ["Hpcc"]


class Hpcc:
    """Per-QP HPCC sender; ``window`` in bytes, ``rate`` in bit/s."""

    __slots__ = (
        "T",
        "U",
        "eta",
        "inc_stage",
        "last_seq",
        "line",
        "max_stage",
        "max_w",
        "net",
        "prev",
        "qp",
        "rate",
        "w_ai",
        "wc",
        "window",
    )

    def __init__(self, net: Any, qp: Any, p: Any) -> None:
        self.net = net
        self.qp = qp
        self.line = qp.line_bps
        t_ps = int(p.base_rtt_us * PS_PER_US) if p.base_rtt_us else qp.base_rtt_ps
        self.T = max(t_ps, 1)
        self.max_w = self.line * self.T / 8e12  # one BDP, bytes
        self.window = self.wc = self.max_w
        self.rate = self.line
        self.w_ai = p.ai_rate_mbps * 1e6 * self.T / 8e12
        self.eta = p.target_utilization
        self.max_stage = p.max_stage
        self.U = 1.0
        self.inc_stage = 0
        self.last_seq = 0
        self.prev: list[tuple[float, int, int, int]] | None = None

    def on_send(self, now: int, nbytes: int) -> None:
        pass

    def on_cnp(self, now: int) -> None:
        pass

    def on_ack(self, now: int, ack: Any) -> None:
        cur = ack.int_
        if not cur:
            return
        prev = self.prev
        self.prev = cur
        if prev is None or len(prev) != len(cur):
            return
        T = self.T
        u_max, tau = 0.0, T
        for (b, tx, ts, q), (_, tx0, ts0, q0) in zip(cur, prev, strict=True):
            dt = ts - ts0
            if dt <= 0:
                continue
            bps = b * 1e9
            tx_rate = (tx - tx0) * 8e12 / dt
            u = min(q, q0) * 8e12 / (bps * T) + tx_rate / bps
            if u > u_max:
                u_max, tau = u, dt
        if tau > T:
            tau = T
        self.U = (1.0 - tau / T) * self.U + tau / T * u_max
        update = ack.seq > self.last_seq
        if self.eta <= self.U or self.inc_stage >= self.max_stage:
            w = self.wc / (self.U / self.eta) + self.w_ai
            if update:
                self.inc_stage = 0
                self.wc = min(w, self.max_w)
        else:
            w = self.wc + self.w_ai
            if update:
                self.inc_stage += 1
                self.wc = min(w, self.max_w)
        if update:
            self.last_seq = self.qp.snd_nxt
        w = min(max(w, float(self.net.mtu)), self.max_w)
        self.window = w
        self.rate = max(w * 8e12 / T, 1e6)
