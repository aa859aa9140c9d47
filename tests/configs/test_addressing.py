"""The address and ASN plan: pools respected, nothing overlaps, RFC 7938 ASN scheme."""

from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from aifabric import build_fabric
from aifabric.configs import plan_addresses
from aifabric.errors import SpecError
from aifabric.spec import spec_from_dict
from aifabric.topology import LinkKind, NodeKind
from tests.configs.conftest import FAMILIES, SMALL, small_ctx
from tests.conftest import example


def _in(pool: ipaddress.IPv4Network, addrs: np.ndarray) -> bool:
    lo, hi = int(pool.network_address), int(pool.broadcast_address)
    a = addrs.astype(np.int64)
    return bool(((a >= lo) & (a <= hi)).all())


@pytest.mark.parametrize("family", FAMILIES)
def test_no_address_is_used_twice(family):
    """Every interface address of the fabric (loopbacks, both /31 ends, NIC /32s,
    gateway) is unique."""
    plan = small_ctx(family).plan
    addrs = plan.interface_addresses()
    assert np.unique(addrs).size == addrs.size


@pytest.mark.parametrize("family", FAMILIES)
def test_addresses_come_from_their_pools(family):
    """Loopbacks from the loopback pool, /31s from the p2p pool, NIC /32s and the
    gateway from addressing.nic_pool; both ends of a link share one /31."""
    plan = small_ctx(family).plan
    f = plan.fabric
    spec = f.spec
    assert _in(spec.deploy.pools.loopback, plan.loopback[plan.switches])
    assert _in(spec.deploy.pools.p2p, plan.p2p_a[plan.p2p])
    assert _in(spec.deploy.pools.p2p, plan.p2p_b[plan.p2p])
    assert ((plan.p2p_a[plan.p2p] >> 1) == (plan.p2p_b[plan.p2p] >> 1)).all()
    assert (plan.p2p_b[plan.p2p] % 2 == 0).all()
    assert _in(spec.addressing.nic_pool, f.nodes.ip[f.ids(NodeKind.NIC)])
    assert _in(spec.addressing.nic_pool, np.array([plan.gateway]))
    # every switch-to-switch link, and only those, has a /31
    p2p_kinds = np.isin(f.links.kind, (LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE))
    assert np.array_equal(np.flatnonzero(p2p_kinds), plan.p2p)


def test_the_hpn_pod_has_no_overlap_either():
    """The 15,360-GPU HPN pod: 368 loopbacks, 15,360 /31s, 16,320 NIC /32s, all unique."""
    plan = plan_addresses(example("hpn-pod"))
    addrs = plan.interface_addresses()
    assert np.unique(addrs).size == addrs.size == 368 + 2 * 15_360 + 16_320 + 1


@pytest.mark.parametrize("family", FAMILIES)
def test_asn_scheme_is_rfc7938(family):
    """One ASN per ToR; aggs share one per (pod, plane, group); cores share one per
    core group (the cores over the same aggs); tiers never share an ASN; all in range."""
    plan = small_ctx(family).plan
    f = plan.fabric
    n = f.nodes
    asn = plan.asn
    tors, aggs, cores = (f.ids(k) for k in (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE))
    assert np.unique(asn[tors]).size == tors.size
    for key in {(int(n.pod[a]), int(n.plane[a]), int(n.group[a])) for a in aggs}:
        same = [a for a in aggs if (n.pod[a], n.plane[a], n.group[a]) == key]
        assert np.unique(asn[same]).size == 1
    assert np.unique(asn[aggs]).size == len({(int(n.pod[a]), int(n.plane[a]), int(n.group[a]))
                                             for a in aggs})
    if cores.size:
        li = f.links
        sc = li.kind == LinkKind.SPINE_CORE
        below = {int(c): frozenset(li.a[sc & (li.b == c)].tolist()) for c in cores}
        for c1 in cores:
            for c2 in cores:
                assert (asn[c1] == asn[c2]) == (below[int(c1)] == below[int(c2)])
    tiers = [set(asn[ids].tolist()) for ids in (tors, aggs, cores)]
    assert not (tiers[0] & tiers[1]) and not (tiers[1] & tiers[2]) and not (tiers[0] & tiers[2])
    dep = f.spec.deploy.asn
    assert asn[plan.switches].min() >= dep.first and asn[plan.switches].max() <= dep.last


def test_per_pair_asn_gives_both_tors_of_a_pair_one_asn():
    """deploy.asn.tor: per_pair -> the a and b ToR of a segment's rail share an ASN,
    different pairs do not."""
    spec = spec_from_dict({**SMALL["hpn"], "deploy": {"asn": {"tor": "per_pair"}}})
    plan = plan_addresses(build_fabric(spec))
    f = plan.fabric
    tors = f.ids(NodeKind.TOR)
    pair = f.nodes.segment[tors] * 100 + f.nodes.rail[tors]
    for p in np.unique(pair):
        assert np.unique(plan.asn[tors[pair == p]]).size == 1
    assert np.unique(plan.asn[tors]).size == np.unique(pair).size


def _problems(overrides: dict) -> list[str]:
    spec = spec_from_dict({**SMALL["hpn"], **overrides})
    with pytest.raises(SpecError) as exc:
        plan_addresses(build_fabric(spec))
    return [f"{p.path}: {p.message}" for p in exc.value.problems]


def test_pool_too_small_is_named():
    """A loopback or p2p pool smaller than the fabric needs is an error naming the field
    and the size allowed."""
    (msg,) = _problems({"deploy": {"pools": {"loopback": "172.16.0.0/28"}}})
    assert msg.startswith("deploy.pools.loopback: 172.16.0.0/28 holds 14 loopbacks; 22 ")
    assert "/27 or larger" in msg
    (msg,) = _problems({"deploy": {"pools": {"p2p": "100.64.0.0/24"}}})
    assert msg.startswith("deploy.pools.p2p: 100.64.0.0/24 holds 128 /31s; 144 switch links")


def test_nic_pool_needs_room_for_the_gateway():
    """62 NICs fill a /26 (62 usable addresses); the hosts' gateway needs one more."""
    base = {**SMALL["clos"], "hosts": {"count": 31, "nics_per_host": 2, "gpus_per_host": 2}}
    with pytest.raises(SpecError) as exc:
        plan_addresses(build_fabric(spec_from_dict({**base, "addressing": {
            "nic_pool": "10.0.0.0/26"}})))
    (p,) = exc.value.problems
    assert (p.path, p.message) == ("addressing.nic_pool", "10.0.0.0/26 holds 62 addresses; "
                                   "62 NICs plus the hosts' gateway need a larger pool")
    plan = plan_addresses(build_fabric(spec_from_dict({**base, "addressing": {
        "nic_pool": "10.0.0.0/25"}})))
    assert plan.gateway_str == "10.0.0.126"


def test_overlapping_pools_are_named():
    """Pools that overlap are errors, one line per overlapping pair."""
    msgs = _problems({"deploy": {"pools": {"loopback": "10.1.0.0/16",
                                           "p2p": "10.2.0.0/16"}}})
    assert msgs == [
        "deploy.pools.loopback: 10.1.0.0/16 overlaps addressing.nic_pool 10.0.0.0/8; "
        "allowed: disjoint pools",
        "deploy.pools.p2p: 10.2.0.0/16 overlaps addressing.nic_pool 10.0.0.0/8; "
        "allowed: disjoint pools"]


def test_asn_range_too_small_is_named():
    """20 ASNs needed (16 ToRs, 2 agg planes, 2 core groups); a range of 10 fails."""
    (msg,) = _problems({"deploy": {"asn": {"first": 65000, "last": 65009}}})
    assert msg == ("deploy.asn: 65000..65009 holds 10 ASNs; the fabric needs 20 (one per "
                   "ToR, agg plane and core group); allowed: last >= 65019")
