"""DCTCP-style window control (Alizadeh et al., SIGCOMM'10) over RoCE.

The receiver echoes in each ACK how many of the packets it acknowledges were ECN-marked.
Once per window of data the sender updates ``alpha = (1-g) alpha + g F`` (F: fraction of
marked packets) and, if any was marked, cuts ``W *= 1 - alpha/2``; otherwise it grows
one MTU per window (congestion avoidance). Packets go out at line rate within W.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Dctcp"]


class Dctcp:
    """Per-QP DCTCP sender; ``window`` in bytes."""

    __slots__ = (
        "acked",
        "alpha",
        "end_seq",
        "g",
        "last_seq",
        "marked",
        "max_w",
        "min_w",
        "net",
        "qp",
        "rate",
        "window",
    )

    def __init__(self, net: Any, qp: Any, p: Any) -> None:
        self.net = net
        self.qp = qp
        self.rate = qp.line_bps
        bdp = qp.line_bps * qp.base_rtt_ps / 8e12
        self.window = float(p.init_window_bytes or max(bdp, net.mtu))
        self.max_w = max(4 * bdp, self.window)
        self.min_w = float(p.min_window_bytes)
        self.g = p.g
        self.alpha = 0.0
        self.acked = 0
        self.marked = 0
        self.end_seq = 0
        self.last_seq = 0

    def on_send(self, now: int, nbytes: int) -> None:
        pass

    def on_cnp(self, now: int) -> None:
        pass

    def on_ack(self, now: int, ack: Any) -> None:
        # packets this ACK covers (several with ack_interval_packets > 1)
        self.acked += max(1, -(-(ack.seq - self.last_seq) // self.net.mtu))
        self.last_seq = max(self.last_seq, ack.seq)
        self.marked += ack.ce
        if ack.seq < self.end_seq:
            return
        f = min(self.marked / self.acked, 1.0) if self.acked else 0.0
        self.alpha = (1 - self.g) * self.alpha + self.g * f
        if self.marked:
            self.window = max(self.window * (1 - self.alpha / 2), self.min_w)
        else:
            self.window = min(self.window + self.net.mtu, self.max_w)
        self.acked = self.marked = 0
        self.end_seq = self.qp.snd_nxt
