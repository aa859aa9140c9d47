"""Switch buffers of the packet simulator (issue 33): a headroom pool for every lossless
port and priority, a shared pool for the rest, each switch's buffer from its model in
the Fabric, and a lossless class that pauses instead of dropping."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric import build_fabric
from aifabric.errors import SpecError
from aifabric.sim.packet import layout as L
from aifabric.sim.packet.config import PacketConfig
from aifabric.sim.packet.engine import PS_PER_US
from aifabric.sim.packet.network import DEFAULT_RESPONSE_NS
from aifabric.sim.packet.run import run_packet, switch_buffers
from aifabric.sim.packet.sim import Topology
from aifabric.spec import spec_from_dict
from aifabric.topology.buffers import buffer_plan, pg_headroom
from tests.sim.packet.nets import config, routed

#: the issue's switch, scaled down: 128 x 400G ports, 200 m cables, no switch latency; 4
#: leaves of 64 hosts down and 64 uplinks up, so every leaf port is cabled and its
#: headroom pool is the full-size one (128 ports)
LEAF_SPINE = {
    "name": "ls", "hosts": {"count": 256, "gpus_per_host": 1, "nics_per_host": 1,
                            "port_gbps": 400},
    "switch_models": {"sw128": {"ports": 128, "port_gbps": 400, "latency_ns": 0}},
    "latency": {"access_m": 200, "leaf_spine_m": 200},
    "topology": {"family": "clos", "leaf": {"model": "sw128", "down_ports": 64,
                                            "up_ports": 64}, "spine": {"model": "sw128"}}}
#: every host sends to the host 64 further on (the next leaf): every flow crosses the
#: spines, ECMP collisions queue on leaf -> spine and spine -> leaf ports
SHIFT = [{"pattern": "permutation", "gpus": "all", "shift": 64, "size_bytes": 1_000_000}]
PACKET = {"cc": {"algorithm": "dcqcn"}, "nic": {"window": "bdp"},
          "ecn": {"kmin_bytes": 103_750, "kmax_bytes": 311_250}, "pfc": {"enabled": True}}


def _leaf_spine_run(packet: dict):
    from aifabric.sim.packet.config import effective_packet_config, packet_config_from_dict

    f, wl, paths, xconn = routed({"name": "ls", "spec": LEAF_SPINE,
                                  "routing": {"policy": "ecmp", "seed_mode": "per_switch"},
                                  "traffic": SHIFT})
    cfg = effective_packet_config(packet_config_from_dict(packet), f.spec.deploy)
    return f, run_packet(wl.dag, f, paths, xconn, cfg, routing=f.spec.routing)


@pytest.mark.parametrize("override", [None, 32 << 20])
def test_the_measured_leaf_spine_case_pauses_and_never_drops_the_lossless_class(override):
    """The issue's case (128 x 400G ports, 200 m links, 1 MB flows, DCQCN, window bdp,
    ECN 103,750/311,250 B, PFC on), 256 hosts instead of 8,192: with the switch model's
    buffer (114 MB) and with the old 32 MiB for every switch (the headroom pool of 128
    ports, 21.6 MB, fits): PFC pauses and nothing on TC 3 drops. Before issue 33 the
    32 MiB run dropped 1,774 frames on TC 3 (headroom and shared bytes counted as one)."""
    packet = dict(PACKET)
    if override:
        packet["buffer"] = {"size_bytes": override}
    _, run = _leaf_spine_run(packet)
    c = run.counters
    assert c["pfc_frames"] > 0  # the mechanism is exercised: ingress queues paused
    assert c["drops_by_tc"].get(3, 0) == 0 and c["lossless_drops"] == 0
    assert c["qps_done"] == c["qps"] == 256
    assert c["buffer"]["source"] == ("override" if override else "model")
    assert c["buffer"]["size_bytes"] == [override or 114_000_000] * 2
    xoff = pg_headroom(400, 200 * 5.0, 9100, 1000)[0]  # one port: 168,448 B
    assert c["buffer"]["headroom_pool_bytes"][1] == 128 * xoff
    assert not [a for a in run.alarms if "lossless" in a]


def test_a_model_buffer_that_cannot_hold_the_headroom_pool_is_refused_naming_the_shortfall():
    """buffer_mb 20 for 128 ports x 168,448 B of headroom (21.6 MB): refused before
    anything runs, one line naming the switch model, the numbers and what would fit."""
    spec = json.loads(json.dumps(LEAF_SPINE))
    spec["switch_models"]["sw128"]["buffer_mb"] = 20
    f = build_fabric(spec_from_dict(spec))
    with pytest.raises(SpecError) as e:
        switch_buffers(f, PacketConfig.model_validate({"pfc": {"enabled": True}}))
    (p,) = e.value.problems
    assert p.path == "switch_models.sw128.buffer_mb"
    pool = 128 * pg_headroom(400, 1000.0, 9100, 1000)[0]
    assert "switch model 'sw128' (buffer_mb 20)" in p.message
    assert f"{pool:,} B" in p.message and f"{pool + (256 << 10) - 20_000_000:,} B short" \
        in p.message
    assert f"at least {pool + (256 << 10):,} B" in p.message
    # allowed: runs, and says which switches are overcommitted
    cfg = PacketConfig.model_validate({"pfc": {"enabled": True, "allow_overcommit": True}})
    assert switch_buffers(f, cfg).node_buffer_bytes.max() == 20_000_000


def _incast(cfg: PacketConfig, n: int, gbps: float, delay_ns: float, size: int,
            checks: list | None = None):
    t = Topology()
    s = t.switch("s")
    d = t.host("d")
    t.link(s, d, gbps, delay_ns)
    hs = [t.host(f"h{i}") for i in range(n)]
    for h in hs:
        t.link(h, s, gbps, delay_ns)
    sim = t.sim(cfg)
    for h in hs:
        sim.add_flow(t.route(h, s, d), size)
    if checks is not None:  # every microsecond: headroom held <= headroom reserved
        net = sim.net

        def check(_: object) -> None:
            checks.append((int(net.NU[s, L.U_HUSED]), int(net.NU[s, L.U_RESV]),
                           bool((net.PT[:, L.T_HDRM] <= net.PI[:, L.P_HEADROOM, None]).all()),
                           int(net.NU[s, L.U_USED]), int(net.NU[s, L.U_BUF])))
            sim.ev.at(sim.ev.now + PS_PER_US, check, None)

        sim.ev.at(0, check, None)
    sim.run()
    return sim


def _edge_buffer(n: int, gbps: float, delay_ns: float, frame: int = 4096 + 62 + 20) -> int:
    """The smallest buffer the simulator accepts for :func:`_incast`: the headroom of
    its n + 1 ports into the switch plus one XOFF threshold (256 KiB)."""
    return (n + 1) * pg_headroom(gbps, delay_ns, frame, DEFAULT_RESPONSE_NS)[0] + (256 << 10)


def test_an_incast_that_fills_a_small_buffer_pauses_and_never_drops_the_lossless_class():
    """16 senders at line rate (no congestion control) into one 100G port, the buffer as
    small as is accepted: the lossless class pauses and loses nothing; the same incast
    without PFC drops (the buffer really is full)."""
    n, gbps, delay = 16, 100.0, 1000.0
    buf = _edge_buffer(n, gbps, delay)
    base = {"cc": {"algorithm": "none"}, "buffer": {"size_bytes": buf}}
    sim = _incast(config(**base), n, gbps, delay, 400_000)
    c = sim.counters()
    assert c["pfc_frames"] > 0 and c["drops"] == 0 and c["lossless_drops"] == 0
    assert c["qps_done"] == n and not sim.alarms()
    lossy = _incast(config(**base, pfc={"enabled": False}), n, gbps, delay, 400_000)
    assert lossy.counters()["drops_by_tc"].get(3, 0) > 0


def test_a_buffer_below_the_headroom_pool_is_refused_unless_overcommit_is_allowed():
    n, gbps, delay = 16, 100.0, 1000.0
    buf = _edge_buffer(n, gbps, delay) - 1
    with pytest.raises(SpecError) as e:
        _incast(config(cc={"algorithm": "none"}, buffer={"size_bytes": buf}), n, gbps,
                delay, 10_000)
    (p,) = e.value.problems
    assert p.path == "packet.buffer.size_bytes" and "switch s" in p.message
    assert "(1 B short)" in p.message and "allow_overcommit" in p.message
    sim = _incast(config(cc={"algorithm": "none"}, buffer={"size_bytes": buf},
                         pfc={"allow_overcommit": True}), n, gbps, delay, 10_000)
    assert sim.counters()["buffer"]["overcommit"][0].startswith("switch s: buffer")


def test_a_lossless_drop_is_an_alarm():
    """A headroom far below what arrives after XOFF (an explicit pfc.headroom_bytes of one
    frame on 10 us links): TC 3 drops, counted per class and named as an alarm."""
    cfg = config(cc={"algorithm": "none"}, buffer={"size_bytes": 1 << 20},
                 pfc={"headroom_bytes": 5000, "xoff_bytes": 20_000, "xon_bytes": 10_000})
    sim = _incast(cfg, 8, 100.0, 10_000.0, 200_000)
    c = sim.counters()
    assert c["lossless_drops"] == c["drops_by_tc"][3] > 0
    (alarm,) = [a for a in sim.alarms() if a.startswith("lossless drops")]
    assert f"TC3 {c['drops_by_tc'][3]:,}" in alarm


def test_a_lossless_drop_exits_1_on_the_command_line(cli, tmp_path):
    doc = {"name": "drop", "spec": {
        "name": "one", "hosts": {"count": 8, "gpus_per_host": 1, "nics_per_host": 1,
                                 "port_gbps": 100},
        "switch_models": {"t": {"ports": 16, "port_gbps": 100}},
        "latency": {"access_m": 2000},
        "topology": {"family": "single_tor", "tor": {"model": "t"}}},
        "traffic": [{"pattern": "incast", "senders": "1:8", "to": "host-s00-h000-gpu0",
                     "size_bytes": 300_000}],
        "sim": "packet",
        "packet": {"cc": {"algorithm": "none"},
                   "pfc": {"headroom_bytes": 5000, "xoff_bytes": 20_000, "xon_bytes": 10_000}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = cli("simulate", path)
    assert r.code == 1, r.out
    assert "lossless drops" in r.out
    # the counters' line says which classes dropped, the lossless ones named
    (line,) = [x for x in r.out.splitlines() if x.startswith("packet: ")]
    assert "TC3 " in line and "on lossless classes" in line, line


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 12), gbps=st.sampled_from([25.0, 100.0, 200.0, 400.0]),
       delay=st.floats(50.0, 3000.0), extra=st.integers(0, 400_000),
       alpha=st.sampled_from([0.25, 1.0, 4.0]))
def test_headroom_held_never_exceeds_the_headroom_reserved(n, gbps, delay, extra, alpha):
    """Random incasts (senders, speeds, cable delays, buffers from the smallest accepted
    up, DT alpha): at every microsecond each priority group holds at most its headroom,
    the switch at most its headroom pool in headroom and at most its buffer in all; no
    lossless frame is dropped."""
    buf = _edge_buffer(n, gbps, delay) + extra
    checks: list = []
    sim = _incast(config(cc={"algorithm": "none"}, buffer={"size_bytes": buf,
                                                           "alpha": alpha}),
                  n, gbps, delay, 60_000, checks)
    assert checks
    for held, resv, per_pg, used, total in checks:
        assert held <= resv and per_pg and used <= total
    assert sim.counters()["lossless_drops"] == 0


@settings(max_examples=20, deadline=None)
@given(ports=st.sampled_from([16, 32, 64, 128]), port_gbps=st.sampled_from([100, 200, 400]),
       cable_m=st.floats(1.0, 500.0), latency_ns=st.integers(0, 1500),
       buffer_mb=st.floats(1.0, 200.0), hosts=st.integers(2, 12))
def test_the_headroom_pool_is_the_sum_of_every_lossless_port_and_fits_or_is_refused(
        ports, port_gbps, cable_m, latency_ns, buffer_mb, hosts):
    """Random switch models, port counts, speeds and cable lengths: each switch's headroom
    pool is the sum of its cabled ports' headroom, each at least what arrives after XOFF
    (line rate x (2 x cable + pipeline + response) + 2 MTU); the plan is accepted exactly
    when the pool plus one XOFF threshold fits the model's buffer."""
    spec = spec_from_dict({
        "name": "p", "hosts": {"count": hosts, "gpus_per_host": 1, "nics_per_host": 1,
                               "port_gbps": port_gbps},
        "switch_models": {"m": {"ports": ports, "port_gbps": port_gbps,
                                "latency_ns": latency_ns, "buffer_mb": buffer_mb}},
        "latency": {"access_m": cable_m, "leaf_spine_m": cable_m},
        "topology": {"family": "clos", "leaf": {"model": "m"}, "spine": {"model": "m"}}})
    f = build_fabric(spec)
    plan = buffer_plan(f, 1, mtu_bytes=9100, response_ns=1000)
    _, dst, cap = f.arcs
    sw = f.is_switch
    into = (plan.arc_xoff > 0)
    assert np.array_equal(into, sw[dst] & np.repeat(f.links.kind >= 2, 2))
    pool = np.bincount(dst[into], weights=plan.arc_xoff[into], minlength=len(sw))
    assert np.array_equal(pool.astype(np.int64), plan.headroom_pool_bytes)
    cls = plan.arc_cable_m[into]
    assert (cls >= cable_m - 1e-9).all()
    bound = cap[into] / 8 * (2 * cls * 5.0 + latency_ns + 1000) + 2 * 9100
    assert (plan.arc_xoff[into] >= bound).all() and (plan.arc_xoff[into] < bound + 256).all()
    cfg = PacketConfig.model_validate({"pfc": {"enabled": True}})
    fits = (plan.headroom_pool_bytes[sw] + (256 << 10) <= math.floor(buffer_mb * 1e6)).all()
    if fits:
        b = switch_buffers(f, cfg)
        assert (b.node_reserved_bytes + (256 << 10) <= b.node_buffer_bytes)[sw].all()
    else:
        with pytest.raises(SpecError):
            switch_buffers(f, cfg)


def test_a_hosts_scale_up_switch_on_an_nvlink_route_forwards_without_loss():
    """A ring over 2-GPU hosts: some transfers stay inside a host (NVLink through its
    scale-up switch, a node the fabric's buffer plan has no model for): it forwards with
    the default buffer and headroom from its links, every byte arrives, nothing drops."""
    doc = {"name": "ring", "spec": {
        "name": "two", "hosts": {"count": 4, "gpus_per_host": 2, "nics_per_host": 2,
                                 "port_gbps": 100},
        "switch_models": {"t": {"ports": 16, "port_gbps": 100}},
        "topology": {"family": "single_tor", "tor": {"model": "t"}}},
        "traffic": [{"pattern": "ring", "gpus": "all", "size_bytes": 200_000}]}
    f, wl, paths, xconn = routed(doc)
    cfg = PacketConfig.model_validate({"pfc": {"enabled": True}})
    run = run_packet(wl.dag, f, paths, xconn, cfg)
    c = run.counters
    assert c["drops"] == 0 and c["qps_done"] == c["qps"] > 0
    assert c["delivered_bytes"] == 8 * 200_000
