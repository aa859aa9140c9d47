"""ACKs, NAKs and CNPs on their own path: the return 5-tuple (IPs swapped, the same UDP
source port) routed by the fabric's hash (``packet.nic.ack_path: hashed``), or the data
route reversed (``reverse``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from aifabric import build_fabric
from aifabric.errors import SpecError
from aifabric.routing.flows import FlowSet, make_flows
from aifabric.routing.route import route
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.packet.config import PacketConfig, packet_config_from_dict
from aifabric.sim.packet.run import ack_routes, flow_routes, run_packet
from aifabric.sim.packet.sim import PacketSim, Topology
from aifabric.sim.paths import connections, route_dag
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario
from aifabric.topology.fabric import NodeKind
from tests.sim.packet.nets import ft4_permutation, routed

EX = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
SIZE = 200_000
DOC = ft4_permutation(SIZE)


def _cfg(mode: str, **kw) -> PacketConfig:
    return PacketConfig.model_validate({"cc": {"algorithm": "none"}, "nic": {"ack_path": mode},
                                        **kw})


@pytest.fixture(scope="module")
def perm():
    return routed(DOC)


@pytest.fixture(scope="module")
def runs(perm):
    f, wl, paths, xconn = perm
    return {m: run_packet(wl.dag, f, paths, xconn, _cfg(m)) for m in ("hashed", "reverse")}


def _reversed(r):
    return tuple(a ^ 1 for a in reversed(r))


def _expected_return_routes(f, dag, failures=None):
    """Route the swapped 5-tuples of the permutation's QPs with the routing module
    (not through the simulator): the forward flows as the scenario makes them, then
    flows from each receiving NIC port back to its sender, IPs swapped, the same UDP
    source port; cut to the arcs between network nodes (NIC and switches), hop order."""
    src, dst, _ = connections(dag)
    rt = f.spec.routing
    flows = make_flows(f, src, dst, SIZE, qps_per_connection=rt.qps_per_connection, seed=0)
    kw = {} if failures is None else {"failures": failures}
    fwd = route(f, flows, rt, **kw).flows
    back = route(f, FlowSet(
        src_gpu=fwd.dst_gpu, dst_gpu=fwd.src_gpu, conn=fwd.conn, qp=fwd.qp,
        src_nic=fwd.dst_nic, dst_nic=fwd.src_nic, src_ip=fwd.dst_ip, dst_ip=fwd.src_ip,
        sport=fwd.sport, dport=np.full(len(fwd), 4791, dtype=np.int32), proto=fwd.proto,
        size_bytes=fwd.size_bytes), rt, **kw)
    a_src, a_dst, _ = f.arcs
    net = f.nodes.kind >= NodeKind.NIC
    out = []
    for i in range(len(fwd)):
        arcs = back.path_arcs(i)
        out.append(tuple(int(a) for a in arcs if net[a_src[a]] and net[a_dst[a]]))
    return out, back


def test_hashed_ack_paths_are_the_routed_return_5tuples(perm, runs):
    """QP by QP, the ACK path of a hashed run is the route the fabric's ECMP gives the
    return 5-tuple; the fraction equal to the reversed data route is what that hash
    gives (here neither 0 nor 1: a k=4 fat-tree has 2-4 paths between pods), and the
    run counts it."""
    f, wl, paths, _ = perm
    data = flow_routes(f, paths)
    expect, back = _expected_return_routes(f, wl.dag)
    assert not back.unreachable.any()
    run = runs["hashed"]
    assert run.ack_routes == expect
    same = sum(e == _reversed(d) for e, d in zip(expect, data, strict=True))
    frac = same / len(data)
    print(f"ACK paths equal to the reversed data path: {same}/{len(data)} = {frac:.2f}")
    assert 0 < frac < 1
    info = run.counters["ack_paths"]
    assert info["hashed"] == len(data) and info["same_as_reverse"] == same
    # the same-ToR pairs have one path only: their ACKs retrace it
    hops = np.array([len(d) for d in data])
    assert all(e == _reversed(d) for e, d, h in zip(expect, data, hops, strict=True) if h == 2)


def test_failed_links_apply_to_the_acks():
    """With a failed spine-core link the return flows are routed on the live links, as
    the data: the same routes as the routing module gives the swapped 5-tuples, none
    over the failed link, the hop count of the data route (a Clos keeps its shortest
    paths), so no QP falls back to the reversed route."""
    doc = {**DOC, "failures": [{"link": ["spine-p00-00", "core-g0-00-c00"]}]}
    scn = scenario_from_dict(doc, model=SimScenario)
    f = build_fabric(scn.spec)
    dag = compile_workload(scn, f).dag
    paths, _ = route_dag(f, dag, scn.spec.routing, failures=scn.failures, seed=0)
    data = flow_routes(f, paths)
    backs, info = ack_routes(f, dag, data, scn.spec.routing, failures=scn.failures)
    expect, _ = _expected_return_routes(f, dag, scn.failures)
    assert backs == expect
    assert info["hashed"] == 16 and info["fallback_hops"] == info["fallback_other"] == 0
    names = f.nodes.name
    a_src, a_dst, _ = f.arcs
    dead = {a for a in range(len(a_src)) if {names[a_src[a]], names[a_dst[a]]}
            == {"spine-p00-00", "core-g0-00-c00"}}
    assert len(dead) == 2
    assert not any(dead & set(b) for b in backs)
    nodead, _ = ack_routes(f, dag, data, scn.spec.routing)  # the same links, all alive
    assert any(dead & set(b) for b in nodead if b is not None)


def test_pinned_connections_keep_the_reversed_route():
    """Pinned paths (a what-if of stale routes) are the data's only: their ACKs retrace
    them, counted as ``fallback_pinned``."""
    from aifabric.routing.scenario import load_scenario

    scn = load_scenario(EX / "deadlock-bounce.yaml", model=SimScenario)
    f = build_fabric(scn.spec)
    wl = compile_workload(scn, f)
    paths, _ = route_dag(f, wl.dag, scn.spec.routing, failures=scn.failures, seed=0,
                         pinned=wl.pinned)
    data = flow_routes(f, paths)
    backs, info = ack_routes(f, wl.dag, data, scn.spec.routing, failures=scn.failures,
                             pinned=wl.pinned)
    assert backs == [None] * len(data)
    assert info["fallback_pinned"] == len(data) == 4 and info["hashed"] == 0


def test_reverse_retraces_the_data_route(perm, runs):
    f, _, paths, _ = perm
    data = flow_routes(f, paths)
    run = runs["reverse"]
    assert run.ack_routes == [_reversed(d) for d in data]
    assert run.counters["ack_paths"]["hashed"] == 0


def _predicted_tx(f, data, acks, cfg):
    """Bytes each arc sends when every QP's data follows ``data`` and its ACKs (one per
    data frame: no loss, no CNP) follow ``acks``: payload + headers per data frame,
    ``ack_bytes`` per ACK."""
    mtu, hdr, ack = cfg.nic.mtu_payload_bytes, cfg.nic.header_bytes, cfg.nic.ack_bytes
    frames = math.ceil(SIZE / mtu)
    tx = np.zeros(2 * f.n_links)
    for d, a in zip(data, acks, strict=True):
        tx[list(d)] += SIZE + frames * hdr
        tx[list(a)] += frames * ack
    return tx


def test_ack_bytes_travel_on_the_return_route(perm, runs):
    """Bytes conservation per port, on the fabric's arcs with each QP's ACK route as the
    run chose it, run until every last ACK is back: what each arc sent is exactly the
    data frames of the QPs routed over it plus one ACK per frame of the QPs whose return
    route crosses it. With hashed ACKs the reversed data routes do not account for the
    bytes."""
    from aifabric.sim.paths import arc_latency_ns

    f, _, paths, _ = perm
    data = flow_routes(f, paths)
    src, dst, cap = f.arcs
    kind = f.nodes.kind
    for mode, run in runs.items():
        cfg = _cfg(mode)
        sim = PacketSim(cfg, arc_src=src.tolist(), arc_dst=dst.tolist(), arc_gbps=cap.tolist(),
                        arc_delay_ns=arc_latency_ns(f).tolist(),
                        is_host=((kind == NodeKind.NIC) | (kind == NodeKind.GPU)).tolist(),
                        used_arcs=range(len(src)))
        qps = [sim.add_flow(d, SIZE, ack_route=a)
               for d, a in zip(data, run.ack_routes, strict=True)]
        sim.keep_running = lambda: True  # past the last delivery: the last ACKs return
        sim.run(until_ns=3 * float(np.nanmax(run.xfer_end_ns)))
        assert all(q.acked_at >= 0 for q in qps)
        c = sim.counters()
        assert c["drops"] == 0 and c["naks"] == 0 and c["cnps"] == 0 and c["retx_bytes"] == 0
        tx = np.zeros(len(src))
        for a, p in sim.net.ports.items():
            tx[a] = p.tx_bytes
        np.testing.assert_array_equal(tx, _predicted_tx(f, data, run.ack_routes, cfg))
        if mode == "hashed":
            wrong = _predicted_tx(f, data, [_reversed(d) for d in data], cfg)
            assert (wrong != tx).sum() >= 4


def test_scenario_run_sends_acks_on_the_hashed_arcs(perm, runs):
    """In the scenario run itself: an arc that only a hashed ACK path uses carries
    bytes, an arc that only a reversed data path would use carries none."""
    f, _, paths, _ = perm
    data = flow_routes(f, paths)
    run = runs["hashed"]
    used = {a for r in data for a in r}
    hashed = {a for r in run.ack_routes for a in r}
    reverse = {a for r in data for a in _reversed(r)}
    assert hashed - used - reverse and reverse - used - hashed
    assert all(run.arc_bytes[a] > 0 for a in hashed - used)
    assert all(run.arc_bytes[a] == 0 for a in reverse - used - hashed)
    rev = runs["reverse"]
    assert all(rev.arc_bytes[a] == 0 for a in hashed - used - reverse)
    assert all(rev.arc_bytes[a] > 0 for a in reverse - used)


def test_hashed_acks_are_deterministic(perm, runs):
    f, wl, paths, xconn = perm
    again = run_packet(wl.dag, f, paths, xconn, _cfg("hashed"))
    first = runs["hashed"]
    assert again.ack_routes == first.ack_routes
    np.testing.assert_array_equal(again.arc_bytes, first.arc_bytes)
    np.testing.assert_array_equal(again.xfer_end_ns, first.xfer_end_ns)


def test_scenario_runs_route_acks_with_the_scenarios_routing():
    """Through ``simulate`` (the CLI's path): another hash seed moves other ACKs, and
    the summary says how many ACK paths equal the reversed data path."""
    out = {}
    for seed in (0, 7):
        doc = {**DOC, "routing": {**DOC["routing"], "seed": seed}, "sim": "packet",
               "packet": {"cc": {"algorithm": "none"}}}
        scn = scenario_from_dict(doc, model=SimScenario)
        res = simulate(scn, build_fabric(scn.spec))
        out[seed] = res.summary["packet"]["ack_paths"]
        assert out[seed]["mode"] == "hashed" and out[seed]["hashed"] == 16
        assert 0 < out[seed]["same_as_reverse"] < 16
    print(out)


def _two_paths():
    """h0 - s0 = {s1, s2} = s3 - h1: two equal paths between the hosts."""
    t = Topology()
    h0, h1 = t.host("h0"), t.host("h1")
    s0, s1, s2, s3 = (t.switch(f"s{i}") for i in range(4))
    for u, v in ((h0, s0), (s0, s1), (s0, s2), (s1, s3), (s2, s3), (s3, h1)):
        t.link(u, v, 100, 500)
    return t, (h0, h1, s0, s1, s2, s3)


def test_topology_flow_takes_its_own_ack_route():
    """A hand-built flow with data over s1 and ACKs over s2: the ACK arcs carry exactly
    one ACK per data frame, the reversed data arcs nothing."""
    t, (h0, h1, s0, s1, s2, s3) = _two_paths()
    sim = t.sim(_cfg("hashed"))
    size = 100_000
    qp = sim.add_flow(t.route(h0, s0, s1, s3, h1), size,
                      ack_route=t.route(h1, s3, s2, s0, h0))
    sim.keep_running = lambda: True  # past the last delivery: the last ACKs return
    sim.run(until_ns=1e6)
    assert qp.done_ps >= 0 and qp.acked_at >= 0
    cfg = sim.cfg
    acks = math.ceil(size / cfg.nic.mtu_payload_bytes) * cfg.nic.ack_bytes
    ports = sim.net.ports
    for a in t.route(h1, s3, s2, s0, h0):
        assert ports[a].tx_bytes == acks
    for a in t.route(s3, s1, s0):
        assert ports[a].tx_bytes == 0
    # the reversed default puts the ACKs back on s1
    sim2 = t.sim(_cfg("hashed"))
    sim2.add_flow(t.route(h0, s0, s1, s3, h1), size)
    sim2.keep_running = lambda: True
    sim2.run(until_ns=1e6)
    assert sim2.net.ports[t.route(h1, s3, s1)[-1]].tx_bytes == acks


@pytest.mark.parametrize("bad", ["short", "wrong_start", "gap"])
def test_bad_ack_route_is_one_problem(bad):
    t, (h0, h1, s0, s1, s2, s3) = _two_paths()
    sim = t.sim(_cfg("hashed"))
    ack = {"short": t.route(h1, s3, s2, s0),
           "wrong_start": t.route(s1, s3, s2, s0, h0)[:4],
           "gap": t.route(h1, s3, s2) + t.route(s1, s0, h0)}[bad]
    with pytest.raises(SpecError) as e:
        sim.add_flow(t.route(h0, s0, s1, s3, h1), 10_000, ack_route=ack)
    assert len(e.value.problems) == 1 and "ack_route" in str(e.value)


def test_ack_path_setting_is_checked():
    """An unknown ack_path: one problem naming the field and the allowed values."""
    with pytest.raises(SpecError) as err:
        packet_config_from_dict({"nic": {"ack_path": "symmetric"}}, file="s.yaml")
    probs = err.value.problems
    assert len(probs) == 1 and probs[0].path == "packet.nic.ack_path"
    assert "'hashed'" in probs[0].message and "'reverse'" in probs[0].message
