"""A summary row as a sweep writes it, for the store's tests."""

from __future__ import annotations

import json
from typing import Any


def row(run_id: str, sweep: str = "s1", status: str = "ok", **figures: Any) -> dict[str, Any]:
    """Core columns (``point`` and ``seed`` from the digits of ``run_id``) plus ``figures``."""
    digits = "".join(c for c in run_id if c.isdigit())
    point = int(digits) if digits else 0
    return {"run_id": run_id, "sweep": sweep, "point": point,
            "overrides": json.dumps({"seed": point}, sort_keys=True), "sim": "flow",
            "seed": point, "status": status,
            "error": "boom" if status == "failed" else None, **figures}
