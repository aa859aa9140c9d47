"""The event list: integer time, deterministic ties, no time travel."""

from __future__ import annotations

import pytest

from aifabric.sim.packet.engine import EventList


def test_events_run_in_time_then_scheduling_order():
    """Same-time events run in the order they were scheduled (the tie-break counter)."""
    ev = EventList()
    seen: list[str] = []
    for name, t in (("c", 7), ("a", 3), ("b", 7), ("d", 7)):
        ev.at(t, seen.append, name)
    ev.run()
    assert seen == ["a", "c", "b", "d"]
    assert ev.now == 7 and ev.count == 4


def test_an_event_in_the_past_is_refused():
    """Scheduling before now is a bug in the caller."""
    ev = EventList()
    ev.at(10, lambda _: ev.at(5, print))
    with pytest.raises(ValueError, match="in the past"):
        ev.run()


def test_run_stops_at_until_and_resumes():
    """run(until) leaves later events pending; a second run processes them."""
    ev = EventList()
    seen: list[int] = []
    for t in (1, 5, 9):
        ev.at(t, seen.append, t)
    ev.run(until_ps=6)
    assert seen == [1, 5] and ev.now == 6
    ev.run()
    assert seen == [1, 5, 9]
