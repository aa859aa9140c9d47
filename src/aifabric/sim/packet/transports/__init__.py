"""Congestion control of a RoCE QP: each algorithm sets the QP's ``rate`` (bit/s, the
pacing of its packets) and ``window`` (bytes in flight; ``inf`` for rate-only schemes).

The NIC calls ``on_send`` per data packet (DCQCN's byte counter), ``on_ack`` per ACK or
NAK (HPCC, TIMELY, DCTCP) and ``on_cnp`` per CNP (DCQCN); timers go on the network's
event heap. Each module holds its algorithm as compiled functions over the simulator's
arrays (:mod:`aifabric.sim.packet.layout`), ``params`` (the scenario's parameters into the
settings arrays), ``init`` (a QP's starting state) and ``FIELDS`` (the names of its
per-QP state, read through ``qp.cc``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aifabric.sim.packet.config import CC_NAMES
from aifabric.sim.packet.layout import CC
from aifabric.sim.packet.transports import base, dcqcn, dctcp, hpcc, timely

__all__ = ["FIELDS", "init_cc", "set_params"]

FIELDS = {"none": base.FIELDS, "dcqcn": dcqcn.FIELDS, "hpcc": hpcc.FIELDS,
          "timely": timely.FIELDS, "dctcp": dctcp.FIELDS}


def set_params(name: str, ci: np.ndarray, cf: np.ndarray, cfg: Any) -> None:
    """The congestion control ``name`` and the parameters of every algorithm (the
    scenario's ``cc`` section) into the settings arrays."""
    if name not in CC_NAMES:
        raise ValueError(f"unknown congestion control {name!r}")
    ci[CC] = CC_NAMES.index(name)
    dcqcn.params(ci, cf, cfg.dcqcn)
    hpcc.params(ci, cf, cfg.hpcc)
    timely.params(ci, cf, cfg.timely)
    dctcp.params(ci, cf, cfg.dctcp)


def init_cc(name: str, cfg: Any, qi: np.ndarray, qf: np.ndarray, line: float,
            base_rtt_ps: int, mtu: int) -> None:
    """The starting state of one QP's congestion control (its rows ``qi``/``qf``)."""
    if name == "dcqcn":
        dcqcn.init(qi, qf, cfg.dcqcn, line)
    elif name == "hpcc":
        hpcc.init(qi, qf, cfg.hpcc, line, base_rtt_ps)
    elif name == "timely":
        timely.init(qi, qf, line, base_rtt_ps)
    elif name == "dctcp":
        dctcp.init(qi, qf, cfg.dctcp, line, base_rtt_ps, mtu)
    else:
        base.init(qi, qf, line)
