"""Routing like real switches: where every flow goes, and which links collide.

>>> from aifabric import build_fabric, load_spec
>>> from aifabric.routing import make_flows, route, route_stats
>>> fabric = build_fabric(load_spec("examples/hpn-pod.yaml"))          # doctest: +SKIP
>>> gpus = fabric.ids(NodeKind.GPU, active_only=True)                  # doctest: +SKIP
>>> flows = make_flows(fabric, gpus, np.roll(gpus, -1024), 1 << 20)    # doctest: +SKIP
>>> routed = route(fabric, flows)                                      # doctest: +SKIP
>>> routed.incidence.shape                      # flows x arcs          # doctest: +SKIP

* :mod:`~aifabric.routing.flows` — flows as RoCEv2 sees them (one per QP, 5-tuple);
* :mod:`~aifabric.routing.hashing` — CRC32/CRC32C/CRC16/XOR like a switch ASIC;
* :mod:`~aifabric.routing.fib` — ECMP groups of every switch (valley-free, live links);
* :mod:`~aifabric.routing.ecmp`, :mod:`~aifabric.routing.spraying`,
  :mod:`~aifabric.routing.adaptive`, :mod:`~aifabric.routing.ports` — the policies;
* :mod:`~aifabric.routing.failover` — failures, port failover, impact;
* :mod:`~aifabric.routing.traffic` — traffic patterns; :mod:`~aifabric.routing.stats` —
  link loads and the statistics that expose imbalance.
"""

from aifabric.routing.failover import Failure, failed_links, failure_impact, live_links
from aifabric.routing.fib import Fib
from aifabric.routing.flows import FlowSet, make_flows
from aifabric.routing.hashing import hash_keys, select_member, switch_seeds
from aifabric.routing.route import Routed, route
from aifabric.routing.stats import route_stats, two_port_ratio

__all__ = [
    "Failure",
    "Fib",
    "FlowSet",
    "Routed",
    "failed_links",
    "failure_impact",
    "hash_keys",
    "live_links",
    "make_flows",
    "route",
    "route_stats",
    "select_member",
    "switch_seeds",
    "two_port_ratio",
]
