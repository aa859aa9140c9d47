"""Congestion control of a RoCE QP: each algorithm sets the QP's ``rate`` (bit/s, the
pacing of its packets) and ``window`` (bytes in flight; ``inf`` for rate-only schemes).

The NIC calls ``on_send(now, payload)`` per data packet, ``on_ack(now, ack)`` per ACK or
NAK and ``on_cnp(now)`` per CNP; timers go on the network's event list.
"""

from __future__ import annotations

from typing import Any

from aifabric.sim.packet.transports.base import NoCC
from aifabric.sim.packet.transports.dcqcn import Dcqcn
from aifabric.sim.packet.transports.dctcp import Dctcp
from aifabric.sim.packet.transports.hpcc import Hpcc
from aifabric.sim.packet.transports.timely import Timely

__all__ = ["Dcqcn", "Dctcp", "Hpcc", "NoCC", "Timely", "make_cc"]


def make_cc(name: str, cfg: Any, net: Any, qp: Any) -> Any:
    """The congestion control ``name`` (``none``, ``dcqcn``, ``hpcc``, ``timely``,
    ``dctcp``) for ``qp``, parameters from the scenario's ``cc`` section."""
    if name == "none":
        return NoCC(net, qp)
    if name == "dcqcn":
        return Dcqcn(net, qp, cfg.dcqcn)
    if name == "hpcc":
        return Hpcc(net, qp, cfg.hpcc)
    if name == "timely":
        return Timely(net, qp, cfg.timely)
    if name == "dctcp":
        return Dctcp(net, qp, cfg.dctcp)
    raise ValueError(f"unknown congestion control {name!r}")
