"""Speed of the results store (issue 17: a query over 10,000 rows under 1 s).

Writes ``--runs`` runs (default 10,000) as a sweep does: one :meth:`Store.write_run` per
run, each with a summary row of real figures (:func:`summary_row` of a flow run's summary,
the numbers varied per run), a one-row ``collectives`` table and a timing. Then times
queries over every row (a GROUP BY with aggregates, a filter, a join with the table) in
three states: the store as a sweep leaves it (auto-compaction every 128 runs, the default),
every run in its own files (auto-compaction off: the worst case), and after
``compact()``. Each phase runs in a fresh process pinned to one
core (``_harness.run_isolated``), so the query times include the start of DuckDB and the
creation of the views, as ``af.results()`` in a fresh notebook pays them. Prints the
measured times against the 1 s limit.

    python benchmarks/bench_store.py [--runs 10000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import run_isolated

LIMIT_S = 1.0
ROOT = Path(__file__).resolve().parents[1]

#: the queries timed: an aggregate over every row by group, and a filter
QUERIES = {
    "group by": 'SELECT "routing.policy" AS policy, seed % 4 AS s, count(*) AS n, '
                'avg(makespan_ns) AS mean, quantile_cont("coll.0.busbw_gb_per_s", 0.99) '
                'AS p99, max("tier.access_up.max_peak_util") AS peak FROM runs '
                "WHERE status = 'ok' GROUP BY ALL ORDER BY ALL",
    "filter": "SELECT run_id, point, makespan_ns FROM runs WHERE makespan_ns > 8.5e6 "
              "AND finished ORDER BY makespan_ns DESC LIMIT 20",
    "join table": "SELECT r.point, c.time_ns FROM runs r JOIN collectives c USING "
                  "(sweep, run_id) WHERE r.point % 100 = 0",
}


def _summary() -> dict:
    """A real flow run's summary (the small fat-tree example, simulated once)."""
    from aifabric.cli.simulate import load_and_run

    return load_and_run(ROOT / "examples/scenarios/fat-tree-polarization.yaml", "flow").summary


def _write(store: str, runs: int, summary: dict, compact_every: int) -> dict:
    import numpy as np

    from aifabric.store import Store, summary_row

    st = Store(store, compact_every=compact_every)
    base = summary_row(summary)
    rng = np.random.default_rng(0)
    jitter = rng.uniform(0.9, 1.1, size=runs)
    t0 = time.perf_counter()
    for i in range(runs):
        row = {k: (v * jitter[i] if isinstance(v, float) else v) for k, v in base.items()}
        row["routing.policy"] = ("ecmp", "source_port", "spray")[i % 3]
        over = json.dumps({"routing.seed": i}, sort_keys=True)
        st.write_run({"run_id": f"r{i:06d}", "sweep": "bench", "point": i,
                      "overrides": over, "sim": "flow", "seed": i, "status": "ok", **row},
                     {"collectives": {"collective": np.array(["allreduce"], dtype=object),
                                      "time_ns": np.array([row["makespan_ns"]])}},
                     timing={"wall_s": 0.01, "executor": "bench"})
    return {"write_s": time.perf_counter() - t0}


def _compact(store: str) -> dict:
    from aifabric.store import Store

    t0 = time.perf_counter()
    out = Store(store).compact()
    return {"compact_s": time.perf_counter() - t0, **out}


def _query(store: str, repeat: int) -> dict:
    t0 = time.perf_counter()
    from aifabric.store import Store

    st = Store(store)
    out: dict = {"import_s": time.perf_counter() - t0}
    for name, sql in QUERIES.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            df = st.query(sql)
            times.append(time.perf_counter() - t0)
        out[name] = {"first_s": times[0], "best_s": min(times), "rows_out": len(df)}
    out["rows"] = int(st.query("SELECT count(*) AS n FROM runs")["n"][0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="keep the store in this folder")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench-store-"))
    store = str(work / "results")
    if Path(store).exists():
        shutil.rmtree(store)
    summary = _summary()
    fails = 0
    for state, every in (("as a sweep leaves it (auto-compaction every 128)", 128),
                         ("per-run files only (auto-compaction off)", 0), ("compacted", None)):
        if every is not None:
            if Path(store).exists():
                shutil.rmtree(store)
            w = run_isolated(_write, store, a.runs, summary, every)
            print(f"write: {a.runs:,} runs in {w['write_s']:.1f} s = "
                  f"{w['write_s'] / a.runs * 1e3:.2f} ms per run (row + 1 table + timing, "
                  f"compact_every={every}; peak {w['peak_mb']:.0f} MB)")
        else:
            c = run_isolated(_compact, store)
            print(f"compact: {c['files_merged']:,} files merged in {c['compact_s']:.2f} s; "
                  f"{c['rows']:,} rows")
        q = run_isolated(_query, store, a.repeat if every != 0 else 1)  # the slow case once
        print(f"query, {state}: {q['rows']:,} rows (import {q['import_s']:.2f} s, not "
              "counted)")
        for name in QUERIES:
            r = q[name]
            ok = r["first_s"] < LIMIT_S
            fails += not ok and every != 0  # the worst case is reported, not required
            print(f"  {name:<10} first {r['first_s']:.3f} s, best of "
                  f"{a.repeat if every != 0 else 1} "
                  f"{r['best_s']:.3f} s vs limit {LIMIT_S:.0f} s: "
                  f"{'ok' if ok else 'SLOWER than the limit'} ({r['rows_out']} rows out)")
    if a.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
