"""The results store: every run's summary row and tables in Parquet, queried with DuckDB.

>>> from aifabric.store import Store, summary_row          # doctest: +SKIP
>>> st = Store("results")                                   # doctest: +SKIP
>>> st.write_run({"run_id": h, "sweep": "seeds", "status": "ok", **summary_row(s)})
>>> st.query("SELECT sweep, count(*) FROM runs GROUP BY sweep")   # doctest: +SKIP

Layout, atomicity and the de-duplication rule: :mod:`aifabric.store.store` and
docs/results.md. pandas, pyarrow and duckdb (the ``data`` extra) are imported when a
store is used, not by ``import aifabric.store``.
"""

from __future__ import annotations

from aifabric.store.figures import summary_row
from aifabric.store.store import (
    CORE,
    DEFAULT_SQL,
    QUARANTINE,
    STATUSES,
    Store,
    check_name,
    results,
    store_root,
)

__all__ = ["CORE", "DEFAULT_SQL", "QUARANTINE", "STATUSES", "Store", "check_name", "results",
           "store_root", "summary_row"]
