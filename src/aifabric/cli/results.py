"""``aifabric results query|list|compact|verify``: the results store from the command line.

The store (``--store DIR``, else ``$AIFABRIC_STORE``, else ``./results``) holds one summary
row per run and each run's tables, written by ``aifabric sweep`` (or
:meth:`aifabric.store.Store.write_run`); see docs/results.md. Bad SQL, a missing store or a
bad name is one line and exit 2. A damaged file is set aside (moved to ``quarantine/``, one
warning line) and the command goes on without it.
"""

from __future__ import annotations

import contextlib
import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from aifabric.cli._common import STORE_HELP, console

app = typer.Typer(name="results", help="Query the results store of sweeps and runs with SQL "
                  "(DuckDB), list its sweeps, compact and verify its files.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode="markdown")

STORE_OPT = typer.Option(None, "--store", metavar="DIR", help=STORE_HELP)
#: rows a console table shows without --limit
TABLE_ROWS = 50


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _store(store: Path | None) -> Any:
    from aifabric.store import Store, store_root
    from aifabric.store.store import need_data

    need_data()
    return Store(store_root(store))


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _plain(v: Any) -> Any:
    """A JSON value: numpy scalars as Python, NaN/inf/NA as null, timestamps as text."""
    if getattr(v, "ndim", 0) and hasattr(v, "tolist"):  # a LIST column: a numpy array
        return [_plain(x) for x in v.tolist()]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        with contextlib.suppress(ValueError, AttributeError):
            v = v.item()
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None  # JSON has no NaN nor infinity
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:  # pragma: no cover - the store needs pandas
        pass
    if isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


@app.command("query")
def query_cmd(
    sql: str = typer.Argument(..., metavar="SQL", help="a DuckDB query over the views "
                              "runs, timings and one per stored table (collectives, links, "
                              "...)"),
    store: Path | None = STORE_OPT,
    fmt: Format = typer.Option(Format.table, "--format", help="table (the console), csv or "
                               "json (every row, on stdout)"),
    limit: int | None = typer.Option(None, "--limit", min=0, help=f"rows to print (default: "
                                     f"{TABLE_ROWS} in a table, all in csv and json)"),
) -> None:
    """Run a SQL query (DuckDB) over the results store and print the rows.

    Views: `runs` (one summary row per run: run_id, sweep, point, overrides, sim, seed,
    status, error and the figures), `timings` (wall times), one per stored table. Example:
    `aifabric results query "SELECT sweep, avg(makespan_ns) FROM runs GROUP BY sweep"`."""
    df = _store(store).query(sql)
    total = len(df)
    n = total if limit is None and fmt is not Format.table else min(
        total, TABLE_ROWS if limit is None else limit)
    shown = df.head(n)
    if fmt is Format.csv:
        typer.echo(shown.to_csv(index=False), nl=False)
    elif fmt is Format.json:
        rows = [{str(k): _plain(v) for k, v in r.items()}
                for r in shown.to_dict(orient="records")]
        typer.echo(json.dumps(rows, indent=1, allow_nan=False))
    else:
        from rich.table import Table

        t = Table(*[str(c) for c in df.columns])
        for r in shown.itertuples(index=False):
            t.add_row(*[_cell(v) for v in r])
        console.print(t)
    if n < total:
        msg = f"{n:,} of {total:,} rows shown; all with --limit {total}"
        if fmt is Format.table:
            console.print(msg)
        else:
            from aifabric.cli._common import err_console

            err_console.print(msg)


@app.command("list")
def list_cmd(store: Path | None = STORE_OPT) -> None:
    """The sweeps in the store: runs ok and failed, and the tables stored."""
    from rich.table import Table

    st = _store(store)
    df = st.query("SELECT sweep, count(*) FILTER (status = 'ok') AS ok, "
                  "count(*) FILTER (status = 'failed') AS failed FROM runs "
                  "GROUP BY sweep ORDER BY sweep")
    t = Table("sweep", "runs ok", "failed", title=f"results store {st.root}",
              title_justify="left")
    for r in df.itertuples(index=False):
        t.add_row(str(r.sweep), f"{int(r.ok):,}", f"{int(r.failed):,}")
    console.print(t)
    names = st.table_names()
    console.print(f"tables: {', '.join(names) if names else 'none'} (and the views runs, "
                  "timings)")


@app.command("compact")
def compact_cmd(
    store: Path | None = STORE_OPT,
    sweep: str | None = typer.Option(None, "--sweep", metavar="NAME",
                                     help="only this sweep (default: all)"),
) -> None:
    """Merge each sweep's per-run files into one file per folder (faster queries).

    Safe while a sweep writes to the store: runs still being written are left for later,
    and queries see every run once throughout."""
    from aifabric.store import check_name

    if sweep is not None:
        check_name(sweep, "--sweep")
    st = _store(store)
    if not st.sweeps():
        st.connect()  # the one message of an empty or missing store
    out = st.compact(sweep)
    console.print(f"compacted {st.root}: {out['files_merged']:,} files merged; "
                  f"{out['rows']:,} runs")


@app.command("verify")
def verify_cmd(
    store: Path | None = STORE_OPT,
    quarantine: bool = typer.Option(False, "--quarantine", help="move the damaged files to "
                                    "quarantine/ in the store, with a note of why and when "
                                    "(never deleted)"),
) -> None:
    """Check every file of the store (magic bytes, footer, schema, every value) and list
    the damaged ones; exit 1 when there is one, 0 when none.

    Queries, list, compact and sweep set a damaged file aside by themselves when they
    trip on it; verify finds them all at once (about 1 s per 10,000 run files)."""
    from aifabric.errors import Problem, SpecError
    from aifabric.store import QUARANTINE

    st = _store(store)
    if not st.root.is_dir():
        what = "does not exist" if not st.root.exists() else "is not a folder"
        raise SpecError(Problem("store", f"{st.root} {what}; allowed: a results store "
                                "written by aifabric sweep or Store.write_run (--store DIR, "
                                "or AIFABRIC_STORE)"))
    st.warn = lambda line: None  # the listing below says it
    n = len(st.data_files())
    bad = st.verify(quarantine=quarantine)
    for rec in bad:
        moved = f"; moved to {rec['moved_to']}" if "moved_to" in rec else ""
        console.print(f"damaged: {rec['file']}: {rec['reason']}{moved}", markup=False,
                      highlight=False, soft_wrap=True)
    held = sum(1 for p in (st.root / QUARANTINE).rglob("*")
               if p.is_file() and not p.name.endswith(".note.json"))
    summary = f"{st.root}: {n:,} files checked, {len(bad):,} damaged"
    if bad and not quarantine:
        summary += " (aifabric results verify --quarantine moves them to quarantine/)"
    if held:
        summary += f"; {held:,} in {QUARANTINE}/"
    console.print(summary, markup=False, highlight=False, soft_wrap=True)
    if bad:
        raise typer.Exit(1)
