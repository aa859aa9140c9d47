"""The packet-level RoCE simulator: queues, shared buffers, PFC, ECN, a RoCE NIC with
go-back-N, and DCQCN / HPCC / TIMELY / DCTCP congestion control (``sim: packet``).

A scenario's DAG of transfers runs on the routed paths of the flow engine; the result
has the same tables plus time series per port/queue and per QP, pause ratios per port and
priority, alarm lines (a PFC deadlock, a PFC-watchdog storm) and plots. Small networks can
be built by hand with :class:`Topology`.
"""

from aifabric.sim.packet.config import PacketConfig, packet_config_from_dict
from aifabric.sim.packet.engine import EventList
from aifabric.sim.packet.network import QP, Network, Packet, Port
from aifabric.sim.packet.results import attach_packet_results, write_packet_plots
from aifabric.sim.packet.run import PacketRun, flow_routes, run_packet
from aifabric.sim.packet.sim import PacketSim, Topology

__all__ = ["QP", "EventList", "Network", "Packet", "PacketConfig", "PacketRun", "PacketSim",
           "Port", "Topology", "attach_packet_results", "flow_routes", "packet_config_from_dict",
           "run_packet", "write_packet_plots"]
