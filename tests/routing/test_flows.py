"""Flows as RoCEv2 sees them: one per QP, 5-tuples from the Fabric, NIC port choice."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.errors import SpecError
from aifabric.routing import make_flows
from aifabric.routing.flows import FlowSet, bond_hash, group_rank
from aifabric.topology import NodeKind
from tests.routing.helpers import small


def _gpus(f):
    return f.ids(NodeKind.GPU, active_only=True)


def test_qps_multiply_connections_and_split_their_bytes():
    """Each connection becomes Q flows (QP 0..Q-1) whose sizes add up to its bytes
    exactly, differing by at most one byte."""
    f = small("hpn2")
    g = _gpus(f)
    sizes = np.array([1000, 7, 0])
    fl = make_flows(f, g[:3], g[-3:], sizes, qps_per_connection=4)
    assert len(fl) == 12
    assert fl.conn.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert fl.qp.tolist() == [0, 1, 2, 3] * 3
    per_conn = np.bincount(fl.conn, weights=fl.size_bytes)
    assert per_conn.tolist() == sizes.tolist()
    spread = [np.ptp(fl.size_bytes[fl.conn == c]) for c in range(3)]
    assert max(spread) <= 1


def test_five_tuple_is_roce_v2_with_fabric_addresses():
    """Protocol 17, UDP destination port 4791, source port in 0xC000-0xFFFF; the IPs are
    the /32s the Fabric gave the sending and receiving NICs."""
    f = small("rail")
    g = _gpus(f)
    fl = make_flows(f, g[:40], g[40:80], 1 << 20, qps_per_connection=2)
    assert (fl.proto == 17).all() and (fl.dport == 4791).all()
    assert ((fl.sport >= 0xC000) & (fl.sport <= 0xFFFF)).all()
    assert (fl.src_ip == f.nodes.ip[fl.src_nic]).all()
    assert (fl.dst_ip == f.nodes.ip[fl.dst_nic]).all()
    assert np.unique(fl.sport).size > 60  # per-QP entropy


def test_pxn_uses_the_destination_rail_nic_on_rail_fabrics():
    """On a rail-wired fabric a cross-rail flow leaves through the source host's NIC on the
    destination GPU's rail (NCCL PXN); on a single-ToR fabric through the GPU's own NIC."""
    f = small("rail")
    nodes = f.nodes
    g = _gpus(f)
    src = g[nodes.index[g] == 0][:5]
    dst = g[(nodes.index[g] == 3) & (nodes.host[g] > 10)][:5]
    fl = make_flows(f, src, dst, 100)
    assert (nodes.rail[fl.src_nic] == 3).all()
    assert (nodes.host[fl.src_nic] == nodes.host[src]).all()
    t = small("single_tor")
    g2 = _gpus(t)
    s2 = g2[t.nodes.index[g2] == 0][:3]
    d2 = g2[(t.nodes.index[g2] == 1) & (t.nodes.host[g2] > 5)][:3]
    fl2 = make_flows(t, s2, d2, 100)
    assert (t.nodes.rail[fl2.src_nic] == t.nodes.rail[s2]).all()


def test_same_host_flows_have_no_nic():
    """GPUs of one host talk over NVLink: no NIC port, no IP."""
    f = small("hpn2")
    g = _gpus(f)
    fl = make_flows(f, g[:1], g[1:2], 10)
    assert f.nodes.host[g[0]] == f.nodes.host[g[1]]
    assert fl.src_nic[0] == -1 and fl.dst_nic[0] == -1 and fl.src_ip[0] == 0


def test_round_robin_puts_exactly_half_the_qps_on_each_port():
    """round_robin: a dual-port NIC alternates its QPs over its ports, so 8 QPs per
    connection give 4 per port, for every NIC and connection."""
    f = small("hpn2")
    g = _gpus(f)
    fl = make_flows(f, g[:20], np.roll(g, -8)[:20], 1, qps_per_connection=8,
                    nic_port_choice="round_robin")
    side = f.nodes.side[fl.src_nic]
    per = np.bincount(fl.conn * 2 + side, minlength=40)
    assert (per == 4).all()


def test_hash_port_choice_is_the_bond_hash():
    """hash: the port is the Linux bonding layer3+4 hash of the 5-tuple mod the ports."""
    f = small("hpn2")
    g = _gpus(f)
    fl = make_flows(f, g[:20], np.roll(g, -8)[:20], 1, qps_per_connection=8,
                    nic_port_choice="hash")
    want = bond_hash(fl.src_ip, fl.dst_ip, fl.sport, fl.dport) % 2
    assert (f.nodes.side[fl.src_nic] == want).all()


def test_deterministic_and_seeded():
    """Same inputs and seed give the same flows; another seed other source ports."""
    f = small("rail")
    g = _gpus(f)
    a = make_flows(f, g[:30], g[30:60], 5, seed=1)
    b = make_flows(f, g[:30], g[30:60], 5, seed=1)
    c = make_flows(f, g[:30], g[30:60], 5, seed=2)
    assert all((x == y).all() for x, y in zip(a.columns().values(), b.columns().values(),
                                               strict=True))
    assert (a.sport != c.sport).any()


def test_a_flow_to_a_gpu_that_does_not_exist_is_refused():
    """A destination that is not a GPU node (or not a node) is bad input."""
    f = small("rail")
    g = _gpus(f)
    with pytest.raises(SpecError, match="dst_gpu"):
        make_flows(f, g[:2], np.array([g[0], f.n_nodes + 5]), 1)
    tor = f.ids(NodeKind.TOR)[0]
    with pytest.raises(SpecError, match="src_gpu"):
        make_flows(f, np.array([tor]), g[:1], 1)


def test_concat_renumbers_connections_and_group_rank():
    """Concatenated flow sets keep distinct connection numbers; group_rank counts each
    element's position within its group in array order."""
    f = small("rail")
    g = _gpus(f)
    a = make_flows(f, g[:3], g[40:43], 1, qps_per_connection=2)
    b = make_flows(f, g[3:5], g[43:45], 1, qps_per_connection=2)
    c = FlowSet.concat([a, b])
    assert c.n_connections == 5 and len(c) == 10
    assert group_rank(np.array([3, 1, 3, 3, 1])).tolist() == [0, 0, 1, 2, 1]
