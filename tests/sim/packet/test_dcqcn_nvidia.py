"""DCQCN as NVIDIA documents it (issue 12 item 5): each test drives one QP's reaction
point with CNPs at chosen times (``qp.cc.on_cnp``) or a tiny network's notification
point, and checks the rates against a trajectory computed here by hand from the
documented formulas (NVIDIA "DCQCN parameters"; DCQCN, Zhu et al. SIGCOMM'15; the
Mellanox model of the HPCC repository's ns-3 ``rdma-hw.cc``), not by the code under test.

Formulas (rates in bit/s, times in us, g = dce_tcp_g/1024, F = rpg_threshold):
- alpha, once per dce_tcp_rtt period: alpha = alpha*g + (1-g) if a CNP came in the
  period, else alpha*g; the first CNP starts it at initial_alpha_value/1024;
- a cut: rc = max(rc*(1 - alpha*1024/2^rpg_gd), rc*rpg_min_dec_fac/100, rpg_min_rate);
  at most one per rate_reduce_monitor_period;
- a rate-increase event (timer or byte counter) with stage counts T, BC before it:
  max(T, BC) < F: fast recovery; min(T, BC) > F: rt += (min(T, BC) - F)*hai; else
  rt += ai; then rc = (rt + rc)/2.
"""

from __future__ import annotations

import math

import pytest

from tests.sim.packet.nets import config, incast

US = 1_000_000  # ps
G = 1019 / 1024
A0 = 1023 / 1024
AI, HAI = 5e6, 50e6


def _qp(**dcqcn):
    """One 100G QP, a long flow, no ECN (so no CNPs but ours), 1000-byte payloads."""
    cfg = config(cc={"algorithm": "dcqcn", "dcqcn": dcqcn}, ecn={"enabled": False},
                 nic={"mtu_payload_bytes": 1000})
    sim, qps, _ = incast(cfg, n=1, size=10**9)
    return sim, qps[0]


def _cnp(sim, qp, t_us):
    """Run to ``t_us`` and let a CNP reach the sender then."""
    sim.run(until_ns=t_us * 1000)
    qp.cc.on_cnp(int(t_us * US))


def _alpha(a, flags):
    """alpha after one update per period; ``flags``: did a CNP come in each period."""
    for f in flags:
        a = a * G + (1 - G) * f
    return a


def _cut(rc, a, keep=0.5):
    return max(rc * (1 - a * 1024 / 2**11), rc * keep)


def test_rate_after_k_cnps_follows_alpha_ewma():
    """CNPs at 10, 20, 30 us (rpg_gd 11, min_dec_fac 50, dce_tcp_rtt 1 us): the first cut
    uses initial_alpha_value, each later one the alpha after one 'CNP' period and nine
    idle ones."""
    sim, qp = _qp(rpg_time_reset=1_000_000, rpg_byte_reset=0)
    line = qp.line_bps
    rc, a = line, A0
    expect = []
    for k in range(3):
        if k:
            a = _alpha(a, [1] + [0] * 9)
        rc = _cut(rc, a)
        expect.append((rc, a))
    for k, t in enumerate((10, 20, 30)):
        _cnp(sim, qp, t)
        assert qp.cc.rate == pytest.approx(expect[k][0], rel=1e-12)
        assert qp.cc.alpha == pytest.approx(expect[k][1], rel=1e-12)
        assert qp.cc.rt == line  # no increase in between: the target stays
    assert expect[2][0] < expect[1][0] < expect[0][0] < line


def test_at_most_one_cut_per_rate_reduce_monitor_period():
    """CNPs at 10, 11, 12, 13.9 us: one cut at 10, the rest give one cut at 14 (10 + 4),
    with alpha after four 'CNP' periods; CNPs at 15 and 16: one cut at 18."""
    sim, qp = _qp(rpg_time_reset=1_000_000, rpg_byte_reset=0)
    r1 = _cut(qp.line_bps, A0)
    for t in (10, 11, 12, 13.9):
        _cnp(sim, qp, t)
        assert qp.cc.rate == pytest.approx(r1, rel=1e-12)
        assert qp.cc.last_cut == 10 * US
    assert qp.cc.pending
    sim.run(until_ns=14_001)
    a = _alpha(A0, [1, 1, 1, 1])
    r2 = _cut(r1, a)
    assert qp.cc.last_cut == 14 * US and not qp.cc.pending
    assert qp.cc.rate == pytest.approx(r2, rel=1e-12)
    for t in (15, 16):
        _cnp(sim, qp, t)
        assert qp.cc.rate == pytest.approx(r2, rel=1e-12)
    sim.run(until_ns=18_001)
    a = _alpha(a, [0, 1, 1, 0])  # period 14: the cut, no CNP; 15, 16: CNPs; 17 idle
    assert qp.cc.last_cut == 18 * US
    assert qp.cc.rate == pytest.approx(_cut(r2, a), rel=1e-12)


def test_rate_to_set_on_first_cnp_sets_current_and_target_rate():
    """rate_to_set_on_first_cnp = 20000 Mbit/s: the first CNP sets rc = rt = 20 Gbit/s
    (no cut); a CNP 1 us later cuts at the monitor period's end (14 us) from there."""
    sim, qp = _qp(rpg_time_reset=1_000_000, rpg_byte_reset=0, rate_to_set_on_first_cnp=20000)
    _cnp(sim, qp, 10)
    assert qp.cc.rate == qp.cc.rt == 20e9
    _cnp(sim, qp, 11)
    assert qp.cc.rate == 20e9
    sim.run(until_ns=14_001)
    a = _alpha(A0, [1, 1, 0, 0])
    assert qp.cc.rate == pytest.approx(_cut(20e9, a), rel=1e-12)
    assert qp.cc.rt == 20e9


def _timer_trajectory(rt, rc, n, F, byte_counter):
    """rc and rt after each of n timer events; the byte counter never fires (huge) or is
    off (the timer's count drives both stage conditions)."""
    out = []
    for k in range(n):
        T, BC = k, (k if not byte_counter else 0)
        if max(T, BC) < F:
            pass
        elif min(T, BC) > F:
            rt += (min(T, BC) - F) * HAI
        else:
            rt += AI
        rc = (rt + rc) / 2
        out.append((rc, rt))
    return out


@pytest.mark.parametrize("byte_reset", [2**31, 0], ids=["huge-byte-reset", "byte-counter-off"])
def test_recovery_after_n_timer_periods_and_the_stage_boundaries(byte_reset):
    """rpg_threshold 3, timer 10 us, rc = rt = 20 Gbit/s set by the first CNP at 10 us, a
    cut at 15 us; then the timer fires at 25, 35, ...: three fast-recovery steps (rt
    kept, rc halfway up), then additive increase; with the byte counter off the timer's
    count alone decides: one additive step, then hyper steps of 1, 2, 3 x rpg_hai_rate."""
    sim, qp = _qp(rpg_time_reset=10, rpg_byte_reset=byte_reset, rpg_threshold=3,
                  rate_to_set_on_first_cnp=20000)
    _cnp(sim, qp, 10)
    _cnp(sim, qp, 15)
    rc0 = _cut(20e9, _alpha(A0, [1, 0, 0, 0, 0]))
    assert qp.cc.rate == pytest.approx(rc0, rel=1e-12)
    traj = _timer_trajectory(20e9, rc0, 7, 3, byte_counter=byte_reset > 0)
    for k, (rc, rt) in enumerate(traj):
        sim.run(until_ns=(15 + 10 * (k + 1) + 5) * 1000)
        assert qp.cc.t_stage == k + 1
        assert qp.cc.rt == pytest.approx(rt, rel=1e-12), k
        assert qp.cc.rate == pytest.approx(rc, rel=1e-12), k
    rts = [rt for _, rt in traj]
    assert rts[:3] == [20e9] * 3  # fast recovery: the target stays
    assert rts[3] == pytest.approx(20e9 + AI)  # the 4th event: additive
    if byte_reset == 0:
        assert rts[6] == pytest.approx(20e9 + AI + 6 * HAI)  # hyper: +1, +2, +3 x HAI
    else:
        assert rts[6] == pytest.approx(20e9 + 4 * AI)  # hyper needs both clocks past F


def test_recovery_by_the_byte_counter():
    """Timer out of reach, rpg_byte_reset 4000 B (4 payloads), rpg_threshold 2: after the
    cut at 15 us, rc is at every moment the trajectory's value after n byte-counter
    events, n = payload bytes sent since the cut // 4000 (two fast-recovery steps, then
    additive: hyper needs the timer's count past F too)."""
    sim, qp = _qp(rpg_time_reset=1_000_000, rpg_byte_reset=4000, rpg_threshold=2,
                  rate_to_set_on_first_cnp=20000)
    _cnp(sim, qp, 10)
    _cnp(sim, qp, 15)
    base = qp.high
    rc, rt = _cut(20e9, _alpha(A0, [1, 0, 0, 0, 0])), 20e9
    traj = [(rc, rt)]
    for k in range(200):
        if k >= 2:
            rt += AI
        rc = (rt + rc) / 2
        traj.append((rc, rt))
    seen = set()
    for t in range(16, 60):
        sim.run(until_ns=t * 1000)
        n = qp.cc.bc_stage
        assert n == (qp.high - base) // 4000
        assert qp.cc.rate == pytest.approx(traj[n][0], rel=1e-12)
        assert qp.cc.rt == pytest.approx(traj[n][1], rel=1e-12)
        seen.add(n)
    assert max(seen) >= 10


def test_clamp_tgt_rate():
    """Two cuts in a row (15 us and 19.5 us, no increase in between): the second sets
    rt = rc only with clamp_tgt_rate."""
    for clamp in (False, True):
        sim, qp = _qp(rpg_time_reset=10, rpg_byte_reset=2**31,
                      rate_to_set_on_first_cnp=20000, clamp_tgt_rate=clamp)
        _cnp(sim, qp, 10)
        _cnp(sim, qp, 15)
        rc1 = qp.cc.rate
        assert rc1 == pytest.approx(_cut(20e9, _alpha(A0, [1, 0, 0, 0, 0])), rel=1e-12)
        _cnp(sim, qp, 19.5)
        assert qp.cc.rt == (rc1 if clamp else 20e9)
        a = _alpha(_alpha(A0, [1, 0, 0, 0, 0]), [1, 0, 0, 0])
        assert qp.cc.rate == pytest.approx(_cut(rc1, a), rel=1e-12)


def test_clamp_tgt_rate_after_time_inc():
    """A timer increase (fast recovery at 25 us) and a CNP at 27 us: the cut sets
    rt = rc only with clamp_tgt_rate_after_time_inc; after a byte-counter increase it
    does so either way."""
    for ati in (False, True):
        sim, qp = _qp(rpg_time_reset=10, rpg_byte_reset=2**31,
                      rate_to_set_on_first_cnp=20000, clamp_tgt_rate_after_time_inc=ati)
        _cnp(sim, qp, 10)
        _cnp(sim, qp, 15)
        rc1 = _cut(20e9, _alpha(A0, [1, 0, 0, 0, 0]))
        sim.run(until_ns=26_000)
        rc2 = (20e9 + rc1) / 2
        assert qp.cc.t_stage == 1 and qp.cc.rate == pytest.approx(rc2, rel=1e-12)
        _cnp(sim, qp, 27)
        assert qp.cc.rt == (pytest.approx(rc2, rel=1e-12) if ati else 20e9)
        sim, qp = _qp(rpg_time_reset=1_000_000, rpg_byte_reset=4000,
                      rate_to_set_on_first_cnp=20000, clamp_tgt_rate_after_time_inc=ati)
        _cnp(sim, qp, 10)
        _cnp(sim, qp, 15)
        sim.run(until_ns=20_500)
        assert qp.cc.bc_stage > 0
        before = qp.cc.rate
        assert before > rc1
        qp.cc.on_cnp(20_500 * 1000)
        assert qp.cc.rt == before


def _marking_incast(gap_us):
    cfg = config(cc={"algorithm": "dcqcn", "dcqcn": {"min_time_between_cnps": gap_us}},
                 ecn={"kmin_bytes": 1000, "kmax_bytes": 2000, "pmax": 1.0})
    sim, qps, _ = incast(cfg, n=2, size=300_000)
    sim.run()
    return sim, qps


def test_one_cnp_per_qp_per_min_time_between_cnps():
    """Two senders into one 100G port, every packet over 2 KB of queue marked. With
    min_time_between_cnps 0 the receiver answers every marked packet (CNPs = marks);
    with 4 us a QP gets at most one CNP per 4 us of its life, and fewer than its marks."""
    sim, qps = _marking_incast(0)
    c = sim.counters()
    assert c["qps_done"] == 2 and c["ecn_marks"] > 20
    assert c["cnps"] == c["ecn_marks"]
    sim, qps = _marking_incast(4)
    c = sim.counters()
    assert c["qps_done"] == 2 and c["ecn_marks"] > 20
    for qp in qps:
        life_us = (qp.done_ps - qp.start_ps) / US
        assert 1 <= qp.cnps <= math.floor(life_us / 4) + 1
    assert c["cnps"] < c["ecn_marks"]


def test_deploy_dcqcn_maps_every_nvidia_parameter():
    """deploy.dcqcn (the NIC's sysfs integers) -> packet.cc.dcqcn: the first-CNP rate in
    Mbit/s, the clamp flags as booleans, rpg_byte_reset 0 (off) accepted; a scenario's
    own value wins."""
    from aifabric.sim.packet.config import (
        PacketConfig,
        deployed_packet_settings,
        effective_packet_config,
    )
    from aifabric.spec.deploy import Deploy

    dep = Deploy.model_validate({"dcqcn": {"rate_to_set_on_first_cnp": 25000,
                                           "clamp_tgt_rate": 1,
                                           "clamp_tgt_rate_after_time_inc": 0,
                                           "rpg_byte_reset": 0}})
    d = deployed_packet_settings(dep)["cc"]["dcqcn"]
    assert d["rate_to_set_on_first_cnp"] == 25000
    assert d["clamp_tgt_rate"] is True and d["clamp_tgt_rate_after_time_inc"] is False
    eff = effective_packet_config(PacketConfig(), dep).cc.dcqcn
    assert (eff.rate_to_set_on_first_cnp, eff.clamp_tgt_rate,
            eff.clamp_tgt_rate_after_time_inc, eff.rpg_byte_reset) == (25000, True, False, 0)
    own = effective_packet_config(PacketConfig.model_validate(
        {"cc": {"dcqcn": {"rate_to_set_on_first_cnp": 0}}}), dep).cc.dcqcn
    assert own.rate_to_set_on_first_cnp == 0 and own.clamp_tgt_rate is True
    default = effective_packet_config(PacketConfig(), Deploy()).cc.dcqcn
    assert default.clamp_tgt_rate_after_time_inc is True  # NVIDIA's default: 1


def test_bad_dcqcn_settings_are_one_line_each():
    """A negative first-CNP rate or a non-boolean clamp flag: a SpecError naming the
    field, no traceback."""
    from aifabric.errors import SpecError
    from aifabric.sim.packet.config import packet_config_from_dict

    with pytest.raises(SpecError) as e:
        packet_config_from_dict({"cc": {"dcqcn": {"rate_to_set_on_first_cnp": -1,
                                                  "clamp_tgt_rate_after_time_inc": "maybe"}}})
    text = str(e.value)
    assert "rate_to_set_on_first_cnp" in text and "clamp_tgt_rate_after_time_inc" in text


def test_a_cut_at_the_end_of_the_period_makes_the_scheduled_one_stale():
    """A CNP inside the monitor period schedules a cut at its end; a CNP arriving exactly
    then cuts at once, and the scheduled cut must not cut a second time at the same
    instant (at most one cut per rate_reduce_monitor_period)."""
    from tests.sim.packet.nets import config, incast

    us = 1_000_000
    cfg = config(cc={"algorithm": "dcqcn",
                     "dcqcn": {"rpg_time_reset": 1_000_000, "rpg_byte_reset": 0}},
                 ecn={"enabled": False}, nic={"mtu_payload_bytes": 1000})
    sim, qps, _ = incast(cfg, n=1, size=10**9)
    qp = qps[0]
    sim.run(until_ns=10_000)
    qp.cc.on_cnp(10 * us)  # cuts at once
    sim.run(until_ns=12_000)
    qp.cc.on_cnp(12 * us)  # inside the 4 us period: a cut scheduled for 14 us
    assert qp.cc.pending
    sim.run(until_ns=13_999)
    qp.cc.on_cnp(14 * us)  # at the period's end, ahead of the scheduled cut: cuts now
    once = qp.cc.rate
    assert not qp.cc.pending
    sim.run(until_ns=14_000)  # the scheduled cut's time: nothing more
    assert qp.cc.rate == once and qp.cc.last_cut == 14 * us
