"""TIMELY (Mittal et al., SIGCOMM'15): rate control from the RTT and its gradient.

Per ACK the sender measures the RTT (the echoed send time), keeps an EWMA of RTT
differences and normalizes it by the minimum (unloaded) RTT. Below ``t_low`` it adds
delta; above ``t_high`` it cuts ``rate *= 1 - beta (1 - t_high/rtt)``; in between a
non-positive gradient adds delta (N x delta after ``hai_after`` in a row) and a positive
one cuts ``rate *= 1 - beta x gradient``.
"""

from __future__ import annotations

import math
from typing import Any

from aifabric.sim.packet.engine import PS_PER_US

__all__ = ["Timely"]


class Timely:
    """Per-QP TIMELY sender; ``rate`` in bit/s."""

    __slots__ = ("a", "beta", "delta", "diff", "hai_after", "line", "min_rate", "min_rtt",
                 "neg", "net", "prev_rtt", "qp", "rate", "t_high", "t_low", "window")

    def __init__(self, net: Any, qp: Any, p: Any) -> None:
        self.net = net
        self.qp = qp
        self.line = qp.line_bps
        self.rate = self.line
        self.window = math.inf
        self.a = p.ewma_alpha
        self.beta = p.beta
        self.delta = p.delta_mbps * 1e6
        self.t_low = p.t_low_us * PS_PER_US
        self.t_high = p.t_high_us * PS_PER_US
        self.hai_after = p.hai_after
        self.min_rate = p.min_rate_mbps * 1e6
        self.min_rtt = max(qp.base_rtt_ps, 1)
        self.prev_rtt = -1
        self.diff = 0.0
        self.neg = 0

    def on_send(self, now: int, nbytes: int) -> None:
        pass

    def on_cnp(self, now: int) -> None:
        pass

    def on_ack(self, now: int, ack: Any) -> None:
        rtt = now - ack.ts
        if self.prev_rtt < 0:
            self.prev_rtt = rtt
            return
        self.diff = (1 - self.a) * self.diff + self.a * (rtt - self.prev_rtt)
        self.prev_rtt = rtt
        grad = self.diff / self.min_rtt
        r = self.rate
        if rtt < self.t_low:
            r += self.delta
            self.neg = 0
        elif rtt > self.t_high:
            r *= 1 - self.beta * (1 - self.t_high / rtt)
            self.neg = 0
        elif grad <= 0:
            self.neg += 1
            r += self.delta * (self.hai_after if self.neg >= self.hai_after else 1)
        else:
            self.neg = 0
            r *= 1 - self.beta * min(grad, 1.0)
        self.rate = min(max(r, self.min_rate), self.line)
