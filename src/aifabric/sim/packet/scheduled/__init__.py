"""The scheduled fabric (GSE / Broadcom DSF) packet by packet: VOQs at the ingress edge,
credits from the egress edge at its port rate, cells sprayed over every fabric link,
reordering at the egress edge, RoCE with PFC toward the hosts only.

:class:`ScheduledNet` runs flows on a fabric whose spec has a ``scheduled`` section;
:func:`run_scheduled` runs a scenario's transfer DAG on it (``sim: packet``).
"""

from aifabric.sim.packet.scheduled.model import ScheduledNet

__all__ = ["ScheduledNet"]
