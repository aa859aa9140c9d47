"""ECN/WRED marking in the packet simulator: where it is decided (``packet.switch.ecn_mark``:
enqueue or dequeue) and with which profile (``packet.ecn.by_speed``: each switch port
its own speed's Kmin/Kmax/Pmax).

The marks are checked against a hand-computable FIFO: one sender at line rate with no
congestion control into a slower egress port. Frames arrive every ``t_in`` and leave
every ``t_out`` (store and forward, integer picoseconds as the simulator computes a
serialization); with Kmin = Kmax = K a frame is marked exactly when its queue (the bytes
waiting, not the frame on the wire) is above K: at enqueue the frames ahead of it, at
dequeue the frames that arrived behind it.
"""

from __future__ import annotations

import json

import pytest

from aifabric.errors import SpecError
from aifabric.sim.packet.config import (
    PacketConfig,
    deployed_packet_settings,
    effective_packet_config,
    packet_config_from_dict,
)
from aifabric.sim.packet.sim import Topology
from aifabric.spec.deploy import Deploy

PAY = 1000  # payload per frame (ns-3's RDMA simulator's default)
HDR, OVH = 62, 20  # header bytes, preamble + inter-frame gap (the NIC defaults)
FRAME = PAY + HDR  # bytes a frame holds in a queue
N = 60  # frames of the flow


def ser_ps(gbps: float) -> int:
    """One frame's serialization, as the simulator rounds it."""
    return int((FRAME + OVH) * 8000.0 / gbps + 0.5)


def fifo(in_gbps: float, out_gbps: float, k: int) -> dict[str, list[int]]:
    """N back-to-back frames from a NIC of ``in_gbps`` (1 us link) into a switch egress
    port of ``out_gbps`` with Kmin = Kmax = k: per frame its arrival at the switch and
    when it leaves the queue for the wire (ps), and whether it is marked at enqueue (more
    than k bytes waiting ahead of it) and at dequeue (more than k bytes behind it)."""
    t_in, t_out = ser_ps(in_gbps), ser_ps(out_gbps)
    arrive = [(i + 1) * t_in + 1_000_000 for i in range(N)]
    start = list(arrive)
    for i in range(1, N):
        start[i] = max(arrive[i], start[i - 1] + t_out)
    assert not set(start[1:]) & set(arrive), "a tie: the event order would decide"
    ahead = [sum(start[j] > arrive[i] for j in range(i)) * FRAME for i in range(N)]
    behind = [sum(arrive[j] < start[i] for j in range(i + 1, N)) * FRAME for i in range(N)]
    return {"arrive": arrive, "start": start, "enq": [int(q > k) for q in ahead],
            "deq": [int(q > k) for q in behind]}


def fifo_marks(in_gbps: float, out_gbps: float, k: int) -> tuple[int, int]:
    """(enqueue marks, dequeue marks) of the whole flow (see :func:`fifo`)."""
    f = fifo(in_gbps, out_gbps, k)
    return sum(f["enq"]), sum(f["deq"])


def two_bottlenecks(packet: dict, until_ps: int | None = None):
    """h0 -> s -> h1 over a 30 Gbit/s port and h2 -> s -> h3 over a 35 Gbit/s port, hosts
    at 100 Gbit/s; one flow of N frames on each; no congestion control, no PFC. Returns
    the run (finished, or stopped at ``until_ps``) and the two bottleneck arcs."""
    t = Topology()
    s = t.switch("s")
    h = [t.host(f"h{i}") for i in range(4)]
    t.link(h[0], s, 100, 1000)
    t.link(h[2], s, 100, 1000)
    l30 = t.link(s, h[1], 30, 1000)
    l35 = t.link(s, h[3], 35, 1000)
    cfg = PacketConfig.model_validate({
        "cc": {"algorithm": "none"}, "pfc": {"enabled": False},
        "nic": {"mtu_payload_bytes": PAY, "header_bytes": HDR, "wire_overhead_bytes": OVH},
        **packet})
    sim = t.sim(cfg)
    sim.add_flow(t.route(h[0], s, h[1]), N * PAY)
    sim.add_flow(t.route(h[2], s, h[3]), N * PAY)
    if until_ps is not None:
        sim.run(until_ns=until_ps / 1000)
        return sim, 2 * l30, 2 * l35
    sim.run()
    assert sim.counters()["qps_done"] == 2 and sim.counters()["drops"] == 0
    return sim, 2 * l30, 2 * l35


def _marks(sim, arc: int) -> int:
    return sim.net.ports[arc].ecn_marks


@pytest.mark.parametrize("k", [5 * FRAME + 1, 15 * FRAME + 1])
@pytest.mark.parametrize("mark", ["enqueue", "dequeue"])
def test_enqueue_and_dequeue_marks_follow_the_fifo(k, mark):
    """Enqueue marking judges the queue ahead of each frame when it arrives, dequeue
    marking the queue it leaves behind when it leaves: the marks made by a time in the
    middle of the drain, and by the end, are those of the FIFO computed by hand. They
    differ mid-way (the frames that arrive last are marked on arrival, the frames
    that leave first are marked on leaving)."""
    f = fifo(100, 30, k)
    at, when = ("enq", "arrive") if mark == "enqueue" else ("deq", "start")
    mid = f["start"][N // 2] + ser_ps(30) // 2
    want_mid = sum(m for m, t in zip(f[at], f[when], strict=True) if t <= mid)
    other = ("deq", "start") if mark == "enqueue" else ("enq", "arrive")
    assert want_mid != sum(m for m, t in zip(f[other[0]], f[other[1]], strict=True)
                           if t <= mid)
    sim, a30, _ = two_bottlenecks({"ecn": {"kmin_bytes": k, "kmax_bytes": k},
                                   "switch": {"ecn_mark": mark}}, until_ps=mid)
    assert _marks(sim, a30) == want_mid
    sim.run()
    assert sim.counters()["qps_done"] == 2
    assert _marks(sim, a30) == sum(f[at]) > 0


def test_enqueue_is_the_default_marking_point():
    """No ``switch:`` section: marks as at enqueue."""
    k = 10 * FRAME + 1
    sim, a30, _ = two_bottlenecks({"ecn": {"kmin_bytes": k, "kmax_bytes": k}})
    assert _marks(sim, a30) == fifo_marks(100, 30, k)[0]
    assert PacketConfig().switch.ecn_mark == "enqueue"


def test_an_uncongested_port_never_marks_in_either_mode():
    """A frame that finds the port idle goes straight onto the wire (the fast path): with
    K = 0 it sees no queue ahead, and it leaves none behind when no frame arrived while
    it was the one in flight (equal speeds): no mark at all."""
    for mark in ("enqueue", "dequeue"):
        t = Topology()
        s, a, b = t.switch("s"), t.host("a"), t.host("b")
        t.link(a, s, 100, 1000)
        out = t.link(s, b, 100, 1000)
        cfg = PacketConfig.model_validate({
            "cc": {"algorithm": "none"}, "ecn": {"kmin_bytes": 0, "kmax_bytes": 0},
            "switch": {"ecn_mark": mark}})
        sim = t.sim(cfg)
        sim.add_flow(t.route(a, s, b), 1_000_000)
        sim.run()
        assert sim.counters()["qps_done"] == 1
        assert _marks(sim, 2 * out) == 0, mark


@pytest.mark.parametrize("mark", ["enqueue", "dequeue"])
def test_each_port_marks_at_its_own_speeds_thresholds(mark):
    """``by_speed``: the 30 Gbit/s port marks at its K, the 35 Gbit/s port at its own; the
    single profile (Kmin = Kmax = 0: every queued frame would be marked) is not used."""
    k30, k35 = 5 * FRAME + 1, 20 * FRAME + 1
    by = {30: {"kmin_bytes": k30, "kmax_bytes": k30},
          35: {"kmin_bytes": k35, "kmax_bytes": k35},
          100: {"kmin_bytes": 0, "kmax_bytes": 0}}
    sim, a30, a35 = two_bottlenecks({"ecn": {"kmin_bytes": 0, "kmax_bytes": 0,
                                             "by_speed": by},
                                     "switch": {"ecn_mark": mark}})
    i = 0 if mark == "enqueue" else 1
    assert _marks(sim, a30) == fifo_marks(100, 30, k30)[i]
    assert _marks(sim, a35) == fifo_marks(100, 35, k35)[i]
    assert fifo_marks(100, 35, k35)[i] != fifo_marks(100, 35, k30)[i]  # the K matters


def test_a_profile_probability_between_kmin_and_kmax():
    """Between Kmin and Kmax a frame is marked with probability Pmax x (q - Kmin) /
    (Kmax - Kmin): Pmax = 0 marks only from Kmax on; the port's own Pmax is used."""
    k = 10 * FRAME + 1
    by = {30: {"kmin_bytes": 0, "kmax_bytes": k, "pmax": 0.0},
          35: {"kmin_bytes": 0, "kmax_bytes": k, "pmax": 0.0},
          100: {}}
    sim, a30, _ = two_bottlenecks({"ecn": {"by_speed": by}})
    # marked from Kmax on: q >= k, i.e. q > k - 1
    assert _marks(sim, a30) == fifo_marks(100, 30, k - 1)[0]


def test_a_map_missing_a_speed_of_the_run_is_one_problem():
    """by_speed without the 35 Gbit/s of a switch port: SpecError naming packet.ecn.by_speed,
    the missing speed and the speeds present."""
    by = {30: {}, 100: {}}
    with pytest.raises(SpecError) as exc:
        two_bottlenecks({"ecn": {"by_speed": by}})
    (p,) = exc.value.problems
    assert p.path == "packet.ecn.by_speed"
    assert "35 Gbit/s" in p.message and "has: 30, 100" in p.message


@pytest.mark.parametrize(("data", "where", "text"), [
    ({"switch": {"ecn_mark": "egress"}}, "packet.switch.ecn_mark", "'enqueue' or 'dequeue'"),
    ({"ecn": {"by_speed": {0: {}}}}, "packet.ecn.by_speed.0", "greater than or equal to 1"),
    ({"ecn": {"by_speed": {100: {"kmin_bytes": 5, "kmax_bytes": 1}}}},
     "packet.ecn.by_speed.100", "kmin_bytes <= kmax_bytes"),
    ({"ecn": {"by_speed": {100: {"pmax": 2}}}}, "packet.ecn.by_speed.100.pmax", "0..1"),
])
def test_bad_marking_settings_are_one_problem_each(data, where, text):
    """An unknown marking point, a speed of 0, Kmin above Kmax or Pmax above 1 in a
    profile: one problem naming the field and what is allowed."""
    with pytest.raises(SpecError) as exc:
        packet_config_from_dict(data)
    (p,) = exc.value.problems
    assert p.path == where and text in p.message, p


def test_the_deployed_wred_map_is_what_the_scenario_simulates():
    """deploy.qos.wred by speed -> packet.ecn.by_speed (percent -> probability); a
    scenario's own single profile replaces the map, its own map replaces it whole."""
    dep = Deploy.model_validate({"qos": {"wred": {
        100: {"min_threshold_bytes": 100_000, "max_threshold_bytes": 400_000,
              "max_mark_percent": 20},
        400: {"min_threshold_bytes": 400_000, "max_threshold_bytes": 1_600_000,
              "max_mark_percent": 10}}}})
    ecn = deployed_packet_settings(dep)["ecn"]
    assert ecn["by_speed"] == {100: {"kmin_bytes": 100_000, "kmax_bytes": 400_000,
                                     "pmax": 0.2},
                               400: {"kmin_bytes": 400_000, "kmax_bytes": 1_600_000,
                                     "pmax": 0.1}}
    eff = effective_packet_config(PacketConfig(), dep)
    assert eff.ecn.for_speed(400).kmax_bytes == 1_600_000 and eff.ecn.for_speed(200) is None
    own = effective_packet_config(PacketConfig.model_validate(
        {"ecn": {"kmin_bytes": 1000, "kmax_bytes": 2000}}), dep)
    assert own.ecn.by_speed == {} and own.ecn.for_speed(400).kmin_bytes == 1000
    mine = effective_packet_config(PacketConfig.model_validate(
        {"ecn": {"by_speed": {200: {"kmin_bytes": 7, "kmax_bytes": 9}}}}), dep)
    assert set(mine.ecn.by_speed) == {200}
    single = Deploy.model_validate({"qos": {"wred": {"min_threshold_bytes": 1000,
                                                     "max_threshold_bytes": 5000}}})
    ecn1 = deployed_packet_settings(single)["ecn"]
    assert ecn1["by_speed"] == {} and (ecn1["kmin_bytes"], ecn1["kmax_bytes"]) == (1000, 5000)


FT = """name: s
spec:
  name: ft4
  hosts: {{count: 16, gpus_per_host: 1, nics_per_host: 1, port_gbps: 100}}
  switch_models:
    k4: {{ports: 4, port_gbps: 100}}
  topology: {{family: fat_tree, k: 4, switch: {{model: k4}}, rail_optimized: false}}
  deploy: {{qos: {{wred: {wred}}}}}
routing: {{policy: ecmp, seed_mode: per_switch}}
sim: packet
traffic:
  - {{pattern: incast, senders: "1:9", to: host-s00-h000-gpu0, size_bytes: 1000000}}
"""


def test_a_scenario_simulates_the_deployed_wred_map(cli, tmp_path):
    """``deploy.qos.wred`` by speed is what ``aifabric simulate`` marks with: a low
    100 Gbit/s Kmax marks more than a high one; a map without 100 Gbit/s (the fabric's
    only speed) is exit 2 with one line naming packet.ecn.by_speed, nothing written."""
    marks = []
    for kmax in (20_000, 2_000_000):
        s = tmp_path / f"s{kmax}.yaml"
        s.write_text(FT.format(wred="{100: {min_threshold_bytes: 10000, max_threshold_bytes: "
                               f"{kmax}, max_mark_percent: 20}}}}"))
        r = cli("simulate", s, "--json")
        assert r.code == 0, r.err
        marks.append(json.loads(r.out)["packet"]["ecn_marks"])
    assert marks[0] > marks[1] > 0
    s = tmp_path / "s.yaml"
    s.write_text(FT.format(wred="{400: {min_threshold_bytes: 1000, max_threshold_bytes: "
                           "2000}}"))
    out = tmp_path / "rep"
    r = cli("simulate", s, "--out", out)
    assert r.code == 2
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and "packet.ecn.by_speed" in lines[0] and "100 Gbit/s" in lines[0]
    assert "s.yaml" in lines[0] and not out.exists()
