"""Congestion control of a RoCE QP: each algorithm sets the QP's ``rate`` (bit/s, the
pacing of its packets) and ``window`` (bytes in flight; ``inf`` for rate-only schemes).

The NIC calls ``on_send`` per data packet (DCQCN's byte counter, RCCC's credit),
``on_ack`` per ACK or NAK (HPCC, TIMELY, DCTCP, NSCC) and ``on_cnp`` per CNP (DCQCN);
timers go on the network's event heap. The UEC congestion controls (NSCC, RCCC, both)
also hold a packet back (``blocked``: window, credit) and RCCC's receiver grants credit
(``rccc.on_data``, ``rccc.grant`` on its pacer's ``E_CREDIT`` events). Each module holds
its algorithm as compiled functions over the simulator's arrays
(:mod:`aifabric.sim.packet.layout`), ``params`` (the scenario's parameters into the
settings arrays), ``init`` (a QP's starting state) and ``FIELDS`` (the names of its
per-QP state, read through ``qp.cc``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aifabric.sim.packet.config import CC_NAMES
from aifabric.sim.packet.layout import CC, MTU
from aifabric.sim.packet.transports import base, dcqcn, dctcp, hpcc, ibcc, nscc, rccc, timely

__all__ = ["FIELDS", "init_cc", "set_params"]

FIELDS = {"none": base.FIELDS, "dcqcn": dcqcn.FIELDS, "hpcc": hpcc.FIELDS,
          "timely": timely.FIELDS, "dctcp": dctcp.FIELDS, "nscc": nscc.FIELDS,
          "rccc": rccc.FIELDS, "nscc+rccc": {**nscc.FIELDS, **rccc.FIELDS},
          "ibcc": ibcc.FIELDS}


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
    if "nscc" in name or "rccc" in name:  # (other runs: the settings arrays as before)
        nscc.params(ci, cf, cfg.nscc)
        rccc.params(ci, cf, cfg.rccc, int(ci[MTU]))


def init_cc(name: str, cfg: Any, qi: np.ndarray, qf: np.ndarray, line: float,
            base_rtt_ps: int, mtu: int, ci: np.ndarray | None = None,
            cf: np.ndarray | None = None) -> None:
    """The starting state of one QP's congestion control (its rows ``qi``/``qf``; NSCC
    may also raise the network's RTT and rate in the settings ``ci``/``cf``)."""
    if name in ("nscc", "rccc", "nscc+rccc"):
        base.init(qi, qf, line)
        if "nscc" in name:
            assert ci is not None and cf is not None
            nscc.init(qi, qf, ci, cf, cfg.nscc, line, base_rtt_ps, mtu)
        if "rccc" in name:
            rccc.init(qi, qf, cfg.rccc, line, base_rtt_ps, mtu)
    elif name == "ibcc":
        ibcc.init(qi, qf, line)
    elif name == "dcqcn":
        dcqcn.init(qi, qf, cfg.dcqcn, line)
    elif name == "hpcc":
        hpcc.init(qi, qf, cfg.hpcc, line, base_rtt_ps)
    elif name == "timely":
        timely.init(qi, qf, line, base_rtt_ps)
    elif name == "dctcp":
        dctcp.init(qi, qf, cfg.dctcp, line, base_rtt_ps, mtu)
    else:
        base.init(qi, qf, line)
