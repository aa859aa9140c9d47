"""The frontend (storage) network of a spec, counted.

A 2-tier leaf-spine of the spec's ``frontend.switch`` model. A leaf of P ports at S
Gbit/s gives ``P x S x o / (1 + o)`` down and ``P x S / (1 + o)`` up (o the
oversubscription); compute hosts fill host leaves (``frontend.host_gbps`` each), storage
nodes their own storage leaves (``storage.nic_gbps`` each); the spines take every leaf
uplink (a spine port per leaf, so at most P leaves). Host ``h`` sits on host leaf
``h // hosts_per_leaf``, storage node ``s`` on storage leaf ``s // nodes_per_leaf``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from aifabric.errors import SpecError
from aifabric.spec.models import Spec

__all__ = ["FrontendPlan", "plan_frontend"]


@dataclass(frozen=True)
class FrontendPlan:
    hosts: int
    host_gbps: float
    hosts_per_leaf: int
    host_leaves: int
    storage_nodes: int
    storage_gbps: float
    nodes_per_leaf: int
    storage_leaves: int
    leaf_up_gbps: float  # uplink capacity of one leaf
    spines: int
    oversubscription: float
    storage_write_gbytes_per_s: float  # all nodes' media together
    storage_read_gbytes_per_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_frontend(spec: Spec, hosts: int) -> FrontendPlan | None:
    """The frontend of ``spec`` for ``hosts`` compute hosts; None when it has none."""
    fe = spec.frontend
    if fe is None:
        return None
    sw = spec.switch_model(fe.switch)
    if sw is None:
        raise SpecError.at("frontend.switch", f"unknown switch model {fe.switch!r}; "
                           f"allowed: {', '.join(spec.known_models())}")
    o = fe.oversubscription
    cap = sw.ports * sw.port_gbps
    down, up = cap * o / (1 + o), cap / (1 + o)
    per_leaf = int(down // fe.host_gbps)
    if per_leaf < 1:
        raise SpecError.at("frontend.port_gbps", f"a host's {fe.host_gbps:g} Gb/s does not fit "
                           f"a {fe.switch} leaf's {down:g} Gb/s of down ports")
    st = fe.storage
    node_leaf = int(down // st.nic_gbps) if st.nodes else 0
    if st.nodes and node_leaf < 1:
        raise SpecError.at("frontend.storage.nic_gbps", f"{st.nic_gbps:g} Gb/s does not fit "
                           f"a {fe.switch} leaf's {down:g} Gb/s of down ports")
    host_leaves = math.ceil(hosts / per_leaf)
    st_leaves = math.ceil(st.nodes / node_leaf) if st.nodes else 0
    leaves = host_leaves + st_leaves
    if leaves > sw.ports:
        raise SpecError.at("frontend.switch", f"{leaves} leaves exceed a 2-tier leaf-spine "
                           f"of {sw.ports}-port switches; allowed: a larger switch or more "
                           "oversubscription")
    spines = math.ceil(leaves * up / cap)
    return FrontendPlan(hosts, fe.host_gbps, per_leaf, host_leaves, st.nodes, st.nic_gbps,
                        node_leaf, st_leaves, up, spines, o,
                        st.nodes * st.write_gbytes_per_s, st.nodes * st.read_gbytes_per_s)
