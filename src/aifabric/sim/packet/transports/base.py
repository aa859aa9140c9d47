"""No congestion control: every QP sends at its NIC's line rate, unlimited window."""

from __future__ import annotations

import math

import numpy as np

from aifabric.sim.packet.layout import F_RATE, F_WIN

__all__ = ["FIELDS", "init"]

FIELDS: dict[str, tuple[str, int]] = {}


def init(qi: np.ndarray, qf: np.ndarray, line: float) -> None:
    """Line rate, unlimited window."""
    qf[F_RATE] = line
    qf[F_WIN] = math.inf
