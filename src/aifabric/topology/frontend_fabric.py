"""The frontend (storage) network of a spec as a :class:`Fabric` of its own.

The frontend is a second, separate fabric (``frontend`` in the spec, counted by
:func:`aifabric.topology.frontend.plan_frontend`): a 2-tier leaf-spine of
``frontend.switch`` switches. This builder wires it so that ``aifabric build`` can write
its switch configs with the same renderers as the backend's:

* nodes: the compute hosts (the backend's active hosts, same names, host ``h`` in the
  backend's host order) and the storage nodes (``storage-NN``), each with its frontend NIC
  ports; host leaves (``fe-leaf-NN``, TORs), storage leaves (``fe-sleaf-NN``) and spines
  (``fe-spine-NN``, AGGs).
* a compute host's frontend NIC ``i`` is the host's NIC number ``hosts.nics_per_host + i``
  (interface ``ens<n>f<port>``: HPN's ninth NIC is ``ens8``), so its names never clash
  with the backend NICs'; a storage node has one port at ``storage.nic_gbps``
  (``ens0f0``).
* every frontend port is its own L3 interface with a /32 from ``frontend.pools.hosts``
  (``Fabric.nodes.ip``); host ``h`` sits on host leaf ``h // hosts_per_leaf`` (all its
  ports, consecutive down ports), storage node ``s`` on storage leaf ``s //
  nodes_per_leaf``.
* a leaf has ``ceil(up / port)`` uplinks at the switch's port speed (the plan's uplink
  bandwidth rounded up to whole ports: never more oversubscribed than asked), spread
  over the spines: each leaf sends ``u // S`` links to every spine and its ``u mod S``
  others to spines chosen round-robin across the leaves, so the spines' port use differs
  by at most one. The spines are the plan's, or more when whole uplink ports need them.

The derived spec of the frontend fabric (:func:`frontend_spec`) carries the frontend's
pools, ASNs, QoS and MTUs in the places the renderers read the backend's.
"""

from __future__ import annotations

import math

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.deploy import Pools
from aifabric.spec.models import Addressing, Spec
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind
from aifabric.topology.frontend import FrontendPlan, plan_frontend
from aifabric.topology.parts import FabricBuilder, PortPlan, _breakout, fmt

__all__ = ["FAMILY", "build_frontend", "frontend_spec"]

#: the ``family`` of a frontend Fabric (never one of the backend's families)
FAMILY = "frontend"


def frontend_spec(spec: Spec) -> Spec:
    """``spec`` with the frontend's pools, ASNs, QoS and MTUs where the backend's are
    read (``addressing.nic_pool``, ``deploy.pools``, ``deploy.asn``, ``deploy.qos``,
    ``deploy.mtu``); the rest (routing hash, cabling, latency) is shared."""
    fe = spec.frontend
    assert fe is not None
    dep = spec.deploy.model_copy(update={
        "qos": fe.qos, "asn": fe.asn, "mtu": fe.mtu,
        "pools": Pools(loopback=fe.pools.loopback, p2p=fe.pools.p2p)})
    # one /32 per port: no bonds (hosts.ports_per_nic is what the tables read)
    hosts = spec.hosts.model_copy(update={"ports_per_nic": 1})
    return spec.model_copy(update={"deploy": dep, "hosts": hosts,
                                   "addressing": Addressing(nic_pool=fe.pools.hosts)})


def build_frontend(spec: Spec, backend: Fabric) -> Fabric | None:
    """The frontend Fabric of ``spec`` beside the backend ``backend``; None when the spec
    has no frontend. SpecError naming the ``frontend`` field that cannot be built."""
    hosts = backend.ids(NodeKind.HOST, active_only=True)
    hosts = hosts[np.argsort(backend.nodes.host[hosts], kind="stable")]
    fp = plan_frontend(spec, len(hosts))
    if fp is None:
        return None
    fe = spec.frontend
    assert fe is not None
    fspec = frontend_spec(spec)
    model = spec.switch_model(fe.switch)
    assert model is not None  # plan_frontend checked it
    S = model.port_gbps
    host_b = _breakout(model, fe.switch, fe.port_gbps, "frontend.port_gbps")
    ports_host = fe.nics_per_host * fe.ports_per_nic
    fb = FabricBuilder(fspec)
    names = backend.nodes.name[hosts]
    node_b = (_breakout(model, fe.switch, int(fp.storage_gbps), "frontend.storage.nic_gbps")
              if fp.storage_nodes else 1)
    n_up, host_down, node_down = _leaf_ports(fp, model.ports, S, host_b, ports_host, node_b)
    # compute hosts and their frontend ports
    H = len(hosts)
    fb.add_nodes(NodeKind.HOST, names, host=np.arange(H), index=np.arange(H))
    pool = fe.pools.hosts
    first = int(pool.network_address) + 1
    nh = np.repeat(np.arange(H), ports_host)
    k = np.tile(np.arange(ports_host), H)
    nic_i, port_i = k // fe.ports_per_nic, k % fe.ports_per_nic
    rail = spec.hosts.nics_per_host + nic_i
    h_nic = fb.add_nodes(NodeKind.NIC, fmt(names[nh], "-fe", nic_i, "p", port_i), host=nh,
                         rail=rail, index=rail, side=port_i,
                         ip=(first + np.arange(H * ports_host)).astype(np.uint32))
    # storage nodes, one port each
    Sn = fp.storage_nodes
    s_names = fmt("storage-", (np.arange(Sn), 2))
    fb.add_nodes(NodeKind.HOST, s_names, host=H + np.arange(Sn), index=np.arange(Sn))
    s_nic = fb.add_nodes(NodeKind.NIC, fmt(s_names, "-fe0p0"), host=H + np.arange(Sn),
                         rail=0, index=0, side=0,
                         ip=(first + H * ports_host + np.arange(Sn)).astype(np.uint32))
    # leaves (host leaves, then storage leaves) and spines
    up = PortPlan(fe.switch, model, fe.port_gbps, host_down, host_b, S, n_up, 1)
    hl = np.arange(fp.host_leaves)
    h_leaf = fb.add_switches(NodeKind.TOR, up, fmt("fe-leaf-", (hl, 2)), segment=hl,
                             index=hl, pod=0)
    fb.connect_access(h_nic, h_leaf[nh // fp.hosts_per_leaf],
                      (nh % fp.hosts_per_leaf) * ports_host + k, up)
    leaves = [h_leaf]
    plans = [up]
    if Sn:
        sp = PortPlan(fe.switch, model, int(fp.storage_gbps), node_down, node_b, S, n_up, 1)
        sl = np.arange(fp.storage_leaves)
        s_leaf = fb.add_switches(NodeKind.TOR, sp, fmt("fe-sleaf-", (sl, 2)),
                                 segment=fp.host_leaves + sl, index=sl, pod=0)
        s = np.arange(Sn)
        fb.connect_access(s_nic, s_leaf[s // fp.nodes_per_leaf], s % fp.nodes_per_leaf, sp)
        leaves.append(s_leaf)
        plans.append(sp)
    L = fp.host_leaves + fp.storage_leaves
    spines = max(fp.spines, math.ceil(L * n_up / model.ports))
    spine_plan = PortPlan(fe.switch, model, S, model.ports, 1, S, 0, 1)
    spine = fb.add_switches(NodeKind.AGG, spine_plan, fmt("fe-spine-", (np.arange(spines), 2)),
                            index=np.arange(spines), pod=0, plane=0, group=0)
    _mesh(fb, np.concatenate(leaves), np.concatenate([np.full(len(x), i) for i, x in
                                                      enumerate(leaves)]),
          plans, spine, spine_plan, n_up)
    f = fb.build(spec.name, FAMILY)
    f.meta["frontend"] = fp.as_dict()
    f.meta["frontend_spines"] = spines
    return f


def _leaf_ports(fp: FrontendPlan, ports: int, S: int, host_b: int, ports_host: int,
                node_b: int) -> tuple[int, int, int]:
    """A leaf's uplinks (whole ports, at least the plan's bandwidth where the down ports
    leave room) and the down ports of a host leaf and of a storage leaf; SpecError when
    no uplink fits."""
    n_up = max(1, math.ceil(fp.leaf_up_gbps / S - 1e-9))
    host_down = min(fp.hosts, fp.hosts_per_leaf) * ports_host  # the fullest leaf's
    node_down = max(1, min(fp.storage_nodes, fp.nodes_per_leaf))
    phys = max(-(-host_down // host_b), -(-node_down // node_b))
    n_up = min(n_up, ports - phys)
    if n_up < 1:
        raise SpecError.at("frontend.oversubscription", f"a leaf of {fp.hosts_per_leaf} "
                           f"hosts x {ports_host} ports leaves no port for an uplink; "
                           "allowed: more oversubscription or a larger switch")
    return n_up, host_down, node_down


def _mesh(fb: FabricBuilder, leaves: np.ndarray, plan_of: np.ndarray, plans: list[PortPlan],
          spine: np.ndarray, spine_plan: PortPlan, n_up: int) -> None:
    """Every leaf's ``n_up`` uplinks over the spines: ``n_up // S`` to each, the rest
    round-robin across the leaves (spine port use even to within one)."""
    L, U = len(leaves), len(spine)
    j = np.repeat(np.arange(L), n_up)
    t = np.tile(np.arange(n_up), L)
    base, rest = divmod(n_up, U)
    # link t < base*U goes to spine t % U; the rest continue where the previous leaf's
    # extras stopped
    s = np.where(t < base * U, t % U, (j * rest + (t - base * U)) % U)
    # the spine's down port: links in (leaf, link) order, numbered per spine
    order = np.lexsort((t, j, s))
    slot = np.empty(len(s), dtype=np.int64)
    counts = np.bincount(s, minlength=U)
    starts = np.cumsum(counts) - counts
    slot[order] = np.arange(len(s)) - np.repeat(starts, counts)
    if counts.max(initial=0) > spine_plan.model.ports:
        raise SpecError.at("frontend.switch", f"{L} leaves x {n_up} uplinks need "
                           f"{int(counts.max())} ports on a spine; allowed: a larger switch "
                           "or more oversubscription")
    lat, medium = fb.cable(LinkKind.LEAF_SPINE)
    a_port = np.empty(len(j), dtype=np.int64)
    for i, p in enumerate(plans):  # (one or two leaf kinds)
        m = plan_of[j] == i
        a_port[m] = p.up_lane(t[m])
    fb.add_links(leaves[j], spine[s], LinkKind.LEAF_SPINE, spine_plan.down_gbps, lat, medium,
                 a_port=a_port, b_port=spine_plan.down_lane(slot))
