"""Limits of a simulation that the command line, the API and sweeps share (a light module:
the CLI's help reads it before anything heavy is imported)."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_EVENTS", "events_text"]

#: the most events a packet run may be estimated at before it is refused (``--max-events``,
#: ``af.simulate(max_events=...)``, sweeps): about 2-3 minutes of the compiled loop at
#: ~1.3 M events/s
DEFAULT_MAX_EVENTS = 200_000_000


def events_text(n: float) -> str:
    """An event count as the command line's help writes it: ``2e8``."""
    text = f"{float(n):.3g}"
    mantissa, e, exp = text.partition("e")
    return f"{mantissa}e{int(exp)}" if e else text
