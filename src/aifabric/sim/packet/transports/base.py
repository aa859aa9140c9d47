"""No congestion control: every QP sends at its NIC's line rate."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["NoCC"]


class NoCC:
    """Line rate, unlimited window."""

    __slots__ = ("net", "qp", "rate", "window")

    def __init__(self, net: Any, qp: Any) -> None:
        self.net = net
        self.qp = qp
        self.rate = qp.line_bps
        self.window = math.inf

    def on_send(self, now: int, nbytes: int) -> None:
        pass

    def on_ack(self, now: int, ack: Any) -> None:
        pass

    def on_cnp(self, now: int) -> None:
        pass
