"""Invariants every routed flow set must satisfy, and small fabrics to route on.

Each check states the rule it enforces and raises AssertionError with the offenders.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from aifabric import build_fabric, spec_from_dict
from aifabric.routing import Routed
from aifabric.topology import Fabric, LinkKind

SMALL_SPECS: dict[str, dict] = {
    # rail-optimized 2-tier: 4 GPUs/4 NICs per host, 16-port leaves (8 down, 8 up)
    "rail": {"hosts": {"count": 24, "gpus_per_host": 4, "nics_per_host": 4, "port_gbps": 400},
             "switch_models": {"m16": {"ports": 16, "port_gbps": 400}},
             "topology": {"family": "rail", "leaf": {"model": "m16"},
                          "spine": {"model": "m16"}}},
    # dual-plane HPN, two pods over a core layer, 2 GPUs/2 NICs per host
    "hpn2": {"hosts": {"count": 32, "gpus_per_host": 2, "nics_per_host": 2, "ports_per_nic": 2,
                       "port_gbps": 200, "backup_per_segment": 1},
             "topology": {"family": "hpn", "planes": 2, "hosts_per_segment": 8,
                          "segments_per_pod": 1,
                          "tor": {"down_gbps": 200, "up_ports": 12, "up_gbps": 400},
                          "agg": {"count": 12, "down_ports": 120},
                          "core": {"model": "tomahawk5"}}},
    # single-plane HPN (both ToRs of a pair under the same aggs), one pod
    "hpn1": {"hosts": {"count": 16, "gpus_per_host": 2, "nics_per_host": 2, "ports_per_nic": 2,
                       "port_gbps": 200},
             "topology": {"family": "hpn", "planes": 1, "hosts_per_segment": 8,
                          "tor": {"down_gbps": 200, "up_ports": 12, "up_gbps": 400},
                          "agg": {"count": 12, "down_ports": 120},
                          "core": None}},
    # 3-tier single-ToR with parallel links, GPUs meshed (no NVSwitch)
    "single_tor": {"hosts": {"count": 24, "gpus_per_host": 2, "nics_per_host": 2,
                             "port_gbps": 400, "scaleup": "mesh"},
                   "switch_models": {"m16": {"ports": 16, "port_gbps": 400}},
                   "topology": {"family": "single_tor", "hosts_per_tor": 4, "tors_per_pod": 2,
                                "tor": {"model": "m16"}, "agg": {"model": "m16"},
                                "core": {"model": "m16"}}},
    # k = 8 fat-tree, 1 GPU and 1 NIC per host
    "fat_tree": {"hosts": {"count": 128, "gpus_per_host": 1, "nics_per_host": 1,
                           "port_gbps": 400},
                 "switch_models": {"k8": {"ports": 8, "port_gbps": 400}},
                 "topology": {"family": "fat_tree", "k": 8, "switch": {"model": "k8"},
                              "rail_optimized": False}},
    # one 2-tier plane per NIC
    "multiplane": {"hosts": {"count": 16, "gpus_per_host": 2, "nics_per_host": 2,
                             "port_gbps": 400},
                   "switch_models": {"m16": {"ports": 16, "port_gbps": 400}},
                   "topology": {"family": "multiplane", "leaf": {"model": "m16"},
                                "spine": {"model": "m16"}}},
}

_CACHE: dict[str, Fabric] = {}


def small(name: str) -> Fabric:
    """A small fabric of :data:`SMALL_SPECS` (built once per session)."""
    if name not in _CACHE:
        _CACHE[name] = build_fabric(spec_from_dict({"name": name, **SMALL_SPECS[name]}))
    return _CACHE[name]


def _incidence_nodes(f: Fabric) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    src, dst, _ = f.arcs
    A = len(src)
    into = sp.csr_matrix((np.ones(A), (np.arange(A), dst)), shape=(A, f.n_nodes))
    out = sp.csr_matrix((np.ones(A), (np.arange(A), src)), shape=(A, f.n_nodes))
    return into, out


def check_routed(r: Routed) -> None:
    """The path invariants of every routed flow:

    * an unreachable flow has no path, every other flow has one;
    * every arc is live;
    * single-path flows: consecutive arcs join (a walk), from the source GPU to the
      destination GPU, never visiting a node twice;
    * every flow is conserved at every node: what enters a node leaves it, except +1 at
      the destination GPU and -1 at the source GPU (fractions for sprayed flows); summed
      over flows, every switch forwards exactly what it receives;
    * valley-free: no flow enters a switch on a down-link and leaves it on an up-link;
    * a flow's fractions on the arcs leaving its source GPU sum to 1.
    """
    f = r.fabric
    n = len(r.flows)
    lengths = np.diff(r.ptr)
    assert ((lengths == 0) == r.unreachable).all(), "path present <=> reachable"
    assert r.alive[r.arcs // 2].all(), "a path uses a dead link"
    src, dst, _ = f.arcs
    ok = ~r.unreachable
    fl = r.flows
    if r.frac is None and len(r.arcs):
        ent = r.entry_flow
        same_flow = ent[1:] == ent[:-1]
        assert (dst[r.arcs[:-1]][same_flow] == src[r.arcs[1:]][same_flow]).all(), \
            "consecutive arcs do not join"
        first = r.ptr[:-1][ok]
        last = r.ptr[1:][ok] - 1
        assert (src[r.arcs[first]] == fl.src_gpu[ok]).all(), "a path does not start at its GPU"
        assert (dst[r.arcs[last]] == fl.dst_gpu[ok]).all(), "a path does not end at its GPU"
        key = ent * f.n_nodes + dst[r.arcs]
        assert np.unique(key).size == key.size, "a path visits a node twice"
    into, out = _incidence_nodes(f)
    X = r.incidence
    bal = (X @ into - X @ out).tocsr()  # flows x nodes: in - out
    expect = sp.csr_matrix((np.r_[np.ones(ok.sum()), -np.ones(ok.sum())],
                            (np.r_[np.flatnonzero(ok), np.flatnonzero(ok)],
                             np.r_[fl.dst_gpu[ok], fl.src_gpu[ok]])), shape=bal.shape)
    diff = abs(bal - expect)
    assert diff.max() < 1e-9 if diff.nnz else True, "a flow is not conserved at some node"
    total = np.asarray(X.sum(axis=0)).ravel()
    sw = f.is_switch
    node_bal = into.T @ total - out.T @ total
    assert np.abs(node_bal[sw]).max(initial=0) < 1e-6, "a switch does not forward what it gets"
    # valley-free: (flow, switch) entered on a down arc and left on an up arc
    ent = r.entry_flow
    net = f.links.kind[r.arcs // 2] >= LinkKind.ACCESS
    down_in = ent[net & (r.arcs % 2 == 1)] * f.n_nodes + dst[r.arcs[net & (r.arcs % 2 == 1)]]
    up_out = ent[net & (r.arcs % 2 == 0)] * f.n_nodes + src[r.arcs[net & (r.arcs % 2 == 0)]]
    assert not np.intersect1d(down_in, up_out).size, "a path goes down then up (a valley)"
    leave = src[r.arcs] == fl.src_gpu[ent]
    out_sum = np.bincount(ent[leave], weights=r.fractions[leave], minlength=n)
    assert np.allclose(out_sum[ok], 1.0), "a flow's shares leaving its GPU do not sum to 1"
    del n
