"""PFC storms as SONiC's PFC watchdog sees them: a queue (port, priority) paused
continuously for the detection time (``pfc.watchdog_ms``, 200 ms by default, taken from
the spec's ``deploy.qos.pfc_watchdog.detection_ms``) is a storm; shorter pauses are no
alarm, they are reported as what they are: paused time and pause ratio per queue."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aifabric.errors import SpecError
from aifabric.sim.packet.config import effective_packet_config, packet_config_from_dict
from aifabric.spec.models import Spec
from tests.sim.packet.nets import config, incast

EX = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


def test_short_pauses_for_most_of_the_run_are_no_storm_but_a_pause_ratio():
    """An incast without CC keeps its senders paused ~60% of the run, in pauses of
    tens of microseconds: no alarm (it was a "PFC storm" before), and each paused queue
    is reported with its paused time, pause ratio and longest pause."""
    sim, _, _ = incast(config(cc={"algorithm": "none"}), n=4, size=1_500_000)
    sim.run()
    assert sim.alarms() == []
    p = sim.pauses()
    assert len(p["port"]) == 4  # the four senders' NIC ports
    assert set(p["port"]) == {f"h{i} -> s" for i in range(4)}
    now = sim.ev.now / 1e3
    assert np.allclose(p["pause_ratio"], p["paused_ns"] / now)
    assert (p["pause_ratio"] > 0.5).all()  # paused for most of the run ...
    assert (p["longest_pause_ns"] < 1e5).all()  # ... in pauses far below 200 ms
    assert (p["longest_pause_ns"] <= p["paused_ns"]).all()
    assert (np.diff(p["paused_ns"]) <= 0).all()  # the most paused first
    # the same paused time as the counters' total
    assert p["paused_ns"].sum() == pytest.approx(sim.counters()["pause_ns"])


def test_a_queue_paused_past_a_small_detection_time_is_a_watchdog_storm():
    """With a 10 us detection time the same incast's pauses (up to ~27 us) are storms:
    one alarm per queue whose longest continuous pause reached it, and only those."""
    wd = 0.01
    sim, _, _ = incast(config(cc={"algorithm": "none"}, pfc={"watchdog_ms": wd}), n=4,
                       size=1_500_000)
    sim.run()
    alarms = sim.alarms()
    p = sim.pauses()
    over = p["longest_pause_ns"] >= wd * 1e6
    assert len(alarms) == int(over.sum()) > 0
    for line, port, tc in zip(alarms, p["port"][over], p["tc"][over], strict=True):
        assert line.startswith(f"PFC watchdog: storm on {port} TC{tc}: paused continuously")
        assert "detection time 0.01 ms" in line


def test_the_detection_time_is_configurable_and_defaults_to_the_deployed_watchdog():
    """The detection time decides: a longer one than the longest pause raises nothing.
    A scenario without ``packet.pfc.watchdog_ms`` takes the spec's deployed PFC watchdog
    (``deploy.qos.pfc_watchdog.detection_ms``); the scenario's own setting overrides it."""
    sim, _, _ = incast(config(cc={"algorithm": "none"}), n=4, size=1_500_000)
    sim.run()
    longest = sim.pauses()["longest_pause_ns"].max() / 1e6
    for wd, storms in ((longest * 0.99, True), (longest * 1.01, False)):
        s, _, _ = incast(config(cc={"algorithm": "none"}, pfc={"watchdog_ms": wd}), n=4,
                         size=1_500_000)
        s.run()
        assert any(a.startswith("PFC watchdog") for a in s.alarms()) is storms
    spec = Spec.model_validate({"topology": {"family": "clos"},
                                "deploy": {"qos": {"pfc_watchdog": {"detection_ms": 400}}}})
    none = packet_config_from_dict({})
    assert effective_packet_config(none, spec.deploy).pfc.watchdog_ms == 400
    own = packet_config_from_dict({"pfc": {"watchdog_ms": 0.05}})
    assert effective_packet_config(own, spec.deploy).pfc.watchdog_ms == 0.05


def test_storm_fraction_is_refused_with_what_replaced_it():
    with pytest.raises(SpecError) as err:
        packet_config_from_dict({"pfc": {"storm_fraction": 0.5}}, file="s.yaml")
    (p,) = err.value.problems
    assert p.path == "packet.pfc" and "watchdog_ms" in p.message


def test_the_deadlock_example_raises_the_deadlock_and_no_storm(cli, tmp_path):
    """The bounce-path deadlock: the deadlock alarm stays; its 60 us pauses are no storm
    (they were two "PFC storm" alarms); ``packet_pauses.csv`` and the summary carry the
    pause ratio of every paused queue."""
    out = tmp_path / "rep"
    r = cli("simulate", EX / "deadlock-bounce.yaml", "--json", "--out", out)
    s = json.loads(r.out)
    pk = s["packet"]
    assert len(pk["alarms"]) == 1 and pk["alarms"][0].startswith("PFC deadlock")
    assert not any("storm" in a for a in pk["alarms"])
    assert pk["paused_queues"] >= 4 and pk["pauses"][0]["pause_ratio"] > 0.5
    assert pk["pauses"][0]["longest_pause_ns"] < 200e6
    rows = (out / "packet_pauses.csv").read_text().splitlines()
    assert rows[0].split(",")[:3] == ["port", "tc", "paused_ns"]
    assert len(rows) - 1 == pk["paused_queues"]
