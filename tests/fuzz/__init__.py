"""Property-based (hypothesis) tests: generated specs and scenarios, valid and broken, over
every topology family and every simulator.

The properties are the project's promises: bad input raises :class:`SpecError` (one
line per problem) and the CLI turns it into exit 2; nothing else escapes; a fabric that
builds satisfies the plan invariants; a simulation that runs gives finite, consistent
figures. The examples are the same on every run (the ``ci`` profile of
``tests/conftest.py``: derandomized, no example database). To explore further:

    HYPOTHESIS_PROFILE=explore AIFABRIC_FUZZ_SCALE=10 python -m pytest tests/fuzz

A failure prints the smallest example it found and ``@reproduce_failure`` to replay it.
"""

from __future__ import annotations

import os


def examples(n: int) -> int:
    """``n`` examples, times ``$AIFABRIC_FUZZ_SCALE`` (default 1)."""
    return max(1, round(n * float(os.environ.get("AIFABRIC_FUZZ_SCALE", "1"))))
