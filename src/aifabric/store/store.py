"""The results store: Parquet files of summary rows and tables, queried with DuckDB.

Layout under the store's root (hive-style ``sweep=<name>`` folders; docs/results.md)::

    runs/sweep=<name>/<run_id>.<status>.parquet      one summary row per run (the commit)
    runs/sweep=<name>/part-<gen>-<digest>.parquet    many rows, after a compaction
    tables/<table>/sweep=<name>/<run_id>.parquet     a run's table (collectives, links, ...)
    tables/<table>/sweep=<name>/part-<gen>-<digest>.parquet
    timings/sweep=<name>/<run_id>.<status>.parquet   wall times: apart from the rows
    timings/sweep=<name>/part-<gen>-<digest>.parquet

**Atomic per run**: every file of a run is written under a temporary name in its target
folder (``.<name>.aifabric-tmp-<pid>@<host>-*``, never matched by ``*.parquet``) and
fsynced; then the tables and timing are renamed into place and the summary row LAST. The
row is the commit mark: readers see a run's tables only when its row is there, so a crash
anywhere before the row's rename leaves nothing visible, and a later write of the same run
replaces what the crash left.

**No duplicates**: a run_id already stored ``ok`` in a sweep is never written again
(:meth:`Store.write_run` is then a no-op); a ``failed`` row is superseded by a later
``ok`` one. The ``runs`` view shows one row per (sweep, run_id): the ``ok`` one if there
is one, else the newest ``failed`` one: a per-run file before a compacted one, and among
compacted files the one of the highest generation ``<gen>`` (a counter in the name, one
more than the highest in the folder at each compaction: no clock, no mtime). So a reader
between a compaction's two steps (merged file written, merged-in files not yet removed)
sees each run once, and the same file wins for every reader. Tables and timings are
picked by the same rule.

**Compaction cost**: the compactions that ``write_run`` starts by itself merge in a
binary-counter pattern (generation ``g`` merges the new per-run files with the parts of
generations ``g - lowbit(g) < gen < g``), so a sweep of ``n`` runs rewrites each row about
``log2(n / compact_every)`` times, not ``n / compact_every`` times; :meth:`Store.compact`
merges everything into one file.

**Damaged files** (a truncated copy, a full disk, a bad sector): a file that is no
readable Parquet is moved to ``quarantine/`` (same relative path, with a
``.note.json`` saying why and when; never deleted), one warning line names it, and the
store goes on without its rows: a query, a compaction or :meth:`Store.run_ids` (so a
resumed sweep runs the lost points again) sets such a file aside the first time it trips
on it. :meth:`Store.verify` checks every file (``aifabric results verify``).

**Deterministic bytes**: a row holds no timestamps, its columns are in a fixed order and
the Parquet writer's options are fixed, so the same row gives the same file bytes
whichever process or machine wrote it (wall times go to ``timings``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aifabric.errors import Problem, SpecError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["CORE", "DEFAULT_SQL", "QUARANTINE", "STATUSES", "Store", "check_name", "need_data",
           "results", "store_root"]

#: the core columns of every summary row, in this order, with their Arrow types
CORE = {"run_id": "string", "sweep": "string", "point": "int64", "overrides": "string",
        "sim": "string", "seed": "int64", "status": "string", "error": "string"}
STATUSES = ("ok", "failed")
#: view names a table cannot take
RESERVED = ("runs", "timings")
#: af.results() without SQL
DEFAULT_SQL = "SELECT * FROM runs ORDER BY sweep, point, run_id"
#: test hook: with this set to N > 0, write_run kills its own process (SIGKILL) after N
#: renames of a run's files (tables first, then the timing; the summary row is renamed
#: last), to prove that a crash between files leaves no row
CRASH_HOOK = "AIFABRIC_STORE_TEST_KILL_AFTER"

_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")
_COLUMN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*\Z")
#: a run_id: its files are ``<run_id>.<status>.parquet``, so no dots
_RUN_ID = re.compile(r"[A-Za-z0-9_-]+\Z")
_TMP = ".aifabric-tmp-"
#: a compacted file: ``part-<generation>-<digest>.parquet`` (an older ``part-<digest>``:
#: generation 0)
_PART = re.compile(r"part-(\d+)-[0-9a-f]+\.parquet\Z")
#: SQL: the key that picks the file a run's rows come from when several files hold it,
#: highest first: a per-run file (the newest write), then parts by generation (names
#: zero-padded, so text order is generation order), then unnumbered parts
_PICK = ("(CASE WHEN regexp_matches(_file, '/part-[0-9]+-[0-9a-f]+[.]parquet$') THEN '1' "
         "WHEN regexp_matches(_file, '/part-[^/]*$') THEN '0' ELSE '2' END || _file)")
#: Parquet writer options, fixed: the same table gives the same bytes
_PARQUET = {"compression": "zstd", "compression_level": 3, "use_dictionary": True,
            "write_statistics": True, "version": "2.6", "data_page_version": "1.0",
            "store_schema": True}
_INSTALL = "pip install 'aifabric[data]'"
#: the folders a query may read (docs/results.md: Queries read the store only)
_DATA_DIRS = ("runs", "tables", "timings")
#: where damaged files go (never deleted), under the store's root
QUARANTINE = "quarantine"
_MAGIC = b"PAR1"
#: DuckDB errors of the query itself (never a damaged file): no scan of the store for them
_QUERY_ERRORS = ("ParserException", "SyntaxException", "BinderException",
                 "CatalogException", "ConversionException", "PermissionException",
                 "OutOfRangeException", "TypeMismatchException", "InvalidTypeException",
                 "NotImplementedException", "OutOfMemoryException", "InterruptException",
                 "ConstraintException", "DependencyException", "TransactionException")
#: DuckDB statement types a query may be (SELECT covers WITH, DESCRIBE, SHOW, SUMMARIZE)
_QUERY_KINDS = ("SELECT", "EXPLAIN")


def need_data() -> None:
    """Refuse, in one line naming the extra, when pandas, pyarrow or duckdb is missing."""
    missing = []
    for mod in ("pandas", "pyarrow", "duckdb"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise SpecError(Problem("store", f"the results store needs {', '.join(missing)}, "
                                f"which are an extra; allowed: {_INSTALL}"))


def check_name(value: Any, field: str) -> str:
    """A sweep, table or run name that becomes a file or folder name: ``[A-Za-z0-9_.-]``,
    not empty, not ``.`` or ``..`` (nor containing ``..``)."""
    if not isinstance(value, str) or not _NAME.match(value) or ".." in value \
            or value.startswith("."):
        shown = repr(value) if isinstance(value, str) else type(value).__name__
        raise SpecError(Problem(field, f"{shown} is not a valid name; allowed: letters, "
                                "digits, '_', '-', '.' (not leading, no '..'), not empty"))
    return value


def store_root(store: str | os.PathLike[str] | None) -> Path:
    """The store folder: ``store``, else ``$AIFABRIC_STORE``, else ``./results``."""
    if store is None or os.fspath(store) == "":
        store = os.environ.get("AIFABRIC_STORE") or "results"
    return Path(store)


def _py(v: Any, key: str) -> Any:
    """A row value as a plain Python scalar (NaN as None)."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)) and getattr(v, "ndim", 0) == 0:
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise SpecError(Problem(f"row.{key}", f"a {type(v).__name__} is not a column value; "
                            "allowed: int, float, str, bool or None (JSON text for "
                            "structures)"))


def _arrow_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    return "string"


def _tmp_prefix(target: Path) -> str:
    from aifabric.outputs import temp_prefix

    return temp_prefix(target)


class Store:
    """A results store in the folder ``root`` (created on the first write). The sweeps it
    holds compact themselves once ``compact_every`` per-run row files have piled up."""

    def __init__(self, root: str | os.PathLike[str], *, compact_every: int = 128):
        self.root = Path(root)
        #: write_run compacts a sweep once it holds this many per-run row files (0: never;
        #: queries over many single-row files are slow: docs/results.md)
        self.compact_every = compact_every
        self._cleaned: set[Path] = set()  # folders cleared of dead runs' temporaries
        self._parts: dict[Path, tuple[Any, dict[str, set[str]]]] = {}  # see _part_ids
        self._sound: dict[Path, Any] = {}  # per-run files whose ends and footer were fine
        #: the files this object moved to quarantine: dicts of file, moved_to, reason
        self.quarantined: list[dict[str, str]] = []
        #: called with one line for each file set aside (default: the line on stderr)
        self.warn = _warn_line

    # ------------------------------------------------------------------ paths
    def _runs_dir(self, sweep: str) -> Path:
        return self.root / "runs" / f"sweep={sweep}"

    def _table_dir(self, table: str, sweep: str) -> Path:
        return self.root / "tables" / table / f"sweep={sweep}"

    def _timings_dir(self, sweep: str) -> Path:
        return self.root / "timings" / f"sweep={sweep}"

    def sweeps(self) -> list[str]:
        """The sweeps that have a runs folder, sorted."""
        base = self.root / "runs"
        if not base.is_dir():
            return []
        return sorted(p.name[6:] for p in base.iterdir()
                      if p.is_dir() and p.name.startswith("sweep="))

    def table_names(self) -> list[str]:
        """The names of the tables stored (one view each), sorted."""
        base = self.root / "tables"
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir() and _NAME.match(p.name))

    # ------------------------------------------------------------------ writing
    def _row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The row checked, core columns first (typed), the others sorted by name."""
        for key in ("run_id", "sweep", "status"):
            if key not in row:
                raise SpecError(Problem(f"row.{key}", "missing; allowed: a row with run_id, "
                                        "sweep and status (ok or failed)"))
        rid = row["run_id"]
        if not isinstance(rid, str) or not _RUN_ID.match(rid) or rid.startswith("part-"):
            shown = repr(rid) if isinstance(rid, str) else type(rid).__name__
            raise SpecError(Problem("row.run_id", f"{shown} is not a run id; allowed: "
                                    "letters, digits, '_' and '-', not starting with 'part-' "
                                    "(the merged files' names; a content hash)"))
        check_name(row["sweep"], "row.sweep")
        if row["status"] not in STATUSES:
            raise SpecError(Problem("row.status", f"{row['status']!r} is not a status; "
                                    f"allowed: {', '.join(STATUSES)}"))
        out: dict[str, Any] = {}
        for key in CORE:
            v = _py(row.get(key), key)
            want = CORE[key]
            ok = v is None or (want == "string" and isinstance(v, str)) or (
                want == "int64" and isinstance(v, int) and not isinstance(v, bool))
            if not ok:
                raise SpecError(Problem(f"row.{key}", f"{v!r} is a {type(v).__name__}; "
                                        f"allowed: {'text' if want == 'string' else 'an integer'}"
                                        " or None"))
            out[key] = v
        lowered = {k.lower() for k in CORE}
        for key in sorted(k for k in row if k not in CORE):
            if not isinstance(key, str) or not _COLUMN.match(key):
                raise SpecError(Problem(f"row.{key}", "not a column name; allowed: letters, "
                                        "digits, '_' and '.' (a letter or digit first)"))
            if key.lower() in lowered:
                raise SpecError(Problem(f"row.{key}", "differs only in case from another "
                                        "column (DuckDB folds case); allowed: distinct names"))
            lowered.add(key.lower())
            out[key] = _py(row[key], key)
        return out

    def _row_table(self, row: dict[str, Any]) -> pa.Table:
        import pyarrow as pa

        fields = [pa.field(k, pa.type_for_alias(CORE[k]) if k in CORE else
                           pa.type_for_alias(_arrow_type(v))) for k, v in row.items()]
        try:
            return pa.Table.from_pylist([row], schema=pa.schema(fields))
        except (pa.ArrowException, OverflowError) as e:  # an integer past 64 bits
            raise SpecError(Problem("row", f"cannot be stored ({' '.join(str(e).split())}); "
                                    "allowed: integers within 64 bits, floats, text, "
                                    "booleans")) from None

    def _arrow(self, name: str, data: Any, run_id: str, sweep: str) -> pa.Table:
        """A run's table as Arrow with ``run_id`` and ``sweep`` first."""
        import numpy as np
        import pyarrow as pa

        field = f"tables.{name}"
        try:
            if isinstance(data, pa.Table):
                t = data
            elif hasattr(data, "to_dict") and hasattr(data, "columns"):  # a DataFrame
                t = pa.Table.from_pandas(data, preserve_index=False)
            elif isinstance(data, Mapping):
                cols = {}
                for k, v in data.items():
                    a = np.asarray(v)
                    cols[str(k)] = pa.array(a.tolist() if a.dtype == object else a)
                t = pa.table(cols)
            else:
                raise TypeError(f"a {type(data).__name__}")
        except (TypeError, ValueError, pa.ArrowException) as e:
            msg = " ".join(str(e).split())
            raise SpecError(Problem(field, f"cannot be stored ({msg}); allowed: a pandas "
                                    "DataFrame, a pyarrow Table or a mapping of equal-length "
                                    "columns of numbers, text or booleans")) from None
        for col in t.column_names:
            if col in ("run_id", "sweep") or not _COLUMN.match(col):
                raise SpecError(Problem(f"{field}.{col}", "not a column name here; allowed: "
                                        "letters, digits, '_' and '.', not run_id or sweep "
                                        "(the store adds them)"))
        n = t.num_rows
        t = t.replace_schema_metadata(None)
        t = t.add_column(0, "sweep", pa.array([sweep] * n, pa.string()))
        return t.add_column(0, "run_id", pa.array([run_id] * n, pa.string()))

    def _stored_ok(self, sweep: str, run_id: str) -> bool:
        """Whether ``run_id`` has an ok row in ``sweep`` (its own file or a compacted one)."""
        d = self._runs_dir(sweep)
        if (d / f"{run_id}.ok.parquet").exists():
            return True
        return any(run_id in ids for ids in (self._part_ids(p, "ok")
                                              for p in sorted(d.glob("part-*.parquet"))))

    def _part_ids(self, path: Path, status: str) -> set[str]:
        """The run_ids of a compacted file with ``status`` (cached while the file is the
        same: a part file is never rewritten in place, only replaced); a damaged file is
        set aside (none)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        key = _stat(path)
        cached = self._parts.get(path)
        if cached is None or cached[0] != key:
            try:
                t = pq.read_table(path, columns=["run_id", "status"])
            except FileNotFoundError:  # compacted away meanwhile
                return set()
            except (OSError, ValueError, pa.ArrowException) as e:  # a damaged file
                reason = _damage(path, data=True) or _one_line(str(e))
                self._set_aside(path, reason)
                return set()
            by: dict[str, set[str]] = {s: set() for s in STATUSES}
            for rid, st in zip(t["run_id"].to_pylist(), t["status"].to_pylist(),
                               strict=True):
                by.setdefault(st, set()).add(rid)
            if len(self._parts) > 64:
                self._parts.clear()
            self._parts[path] = cached = (key, by)
        return cached[1].get(status, set())

    def write_run(self, row: Mapping[str, Any], tables: Mapping[str, Any] | None = None, *,
                  timing: Mapping[str, Any] | None = None) -> None:
        """Store one run atomically: its summary row, its tables, its timing.

        ``row`` needs ``run_id``, ``sweep`` and ``status`` (``ok`` or ``failed``); usual:
        ``point``, ``overrides`` (JSON text), ``sim``, ``seed``, ``error``, and the figures of
        :func:`~aifabric.store.summary_row`. ``tables``: name -> DataFrame, Arrow table or
        mapping of numpy arrays (stored with ``run_id`` and ``sweep`` columns; only with
        status ok: a failed run has no results). ``timing``: wall times and where it ran,
        kept in ``timings``, apart from the row. A run_id already stored ok in this sweep
        is a no-op. Bad input is a :class:`SpecError` before anything is written.
        """
        need_data()
        r = self._row(row)
        run_id, sweep, status = r["run_id"], r["sweep"], r["status"]
        tables = dict(tables or {})
        if tables and status != "ok":
            raise SpecError(Problem("tables", "a failed run has no tables; allowed: tables "
                                    "with status ok only"))
        for name in tables:
            check_name(name, "tables")
            if name in RESERVED:
                raise SpecError(Problem("tables", f"{name!r} is the name of a view of every "
                                        "store; allowed: another table name"))
        timing_row = None
        if timing is not None:
            timing_row = {"run_id": run_id, "sweep": sweep, "status": status}
            for k in sorted(timing):
                if k in timing_row:
                    continue
                if not isinstance(k, str) or not _COLUMN.match(k):
                    raise SpecError(Problem(f"timing.{k}", "not a column name; allowed: "
                                            "letters, digits, '_' and '.'"))
                v = _py(timing[k], k) if not isinstance(timing[k], (dict, list)) \
                    else json.dumps(timing[k], sort_keys=True)
                timing_row[k] = v
        if self._stored_ok(sweep, run_id):
            return
        row_table = self._row_table(r)
        # every file to temporaries first; a conversion failure removes what was written
        staged: list[tuple[Path, Path]] = []
        try:
            for name in sorted(tables):
                t = self._arrow(name, tables[name], run_id, sweep)
                staged.append(self._stage(self._table_dir(name, sweep)
                                          / f"{run_id}.parquet", t))
            if timing_row is not None:
                staged.append(self._stage(self._timings_dir(sweep)
                                          / f"{run_id}.{status}.parquet",
                                          self._row_table(timing_row)))
            staged.append(self._stage(self._runs_dir(sweep) / f"{run_id}.{status}.parquet",
                                      row_table))
        except BaseException:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise
        if status == "ok":  # tables a crashed earlier attempt left (no row): not ours
            for old in self.table_names():
                stale = self._table_dir(old, sweep) / f"{run_id}.parquet"
                if old not in tables:
                    stale.unlink(missing_ok=True)
        kill_after = int(os.environ.get(CRASH_HOOK, "0") or 0)
        from aifabric.interrupts import deferred

        try:
            with deferred():  # a Ctrl-C waits for the renames: a run is stored whole
                for i, (tmp, target) in enumerate(staged):
                    if kill_after and i == kill_after:
                        os.kill(os.getpid(), signal.SIGKILL)
                    if i == len(staged) - 1:  # the tables' renames durable before the commit
                        for d in sorted({t.parent for _, t in staged[:-1]}):
                            _fsync_dir(d)
                    os.replace(tmp, target)  # the summary row is the last: the commit
                _fsync_dir(staged[-1][1].parent)
        except OSError as e:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise SpecError(Problem("store", f"cannot write in {self.root}: "
                                    f"{e.strerror or e}; allowed: a folder you can write "
                                    "to")) from None
        except BaseException:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise
        if status == "ok":  # superseded: the ok row wins anyway, this only tidies
            (self._runs_dir(sweep) / f"{run_id}.failed.parquet").unlink(missing_ok=True)
        self._maybe_compact(sweep)

    def _stage(self, target: Path, table: pa.Table) -> tuple[Path, Path]:
        """``table`` written and fsynced under a temporary name beside ``target``."""
        import pyarrow.parquet as pq

        from aifabric.outputs import clean_stale

        if not target.parent.is_dir():
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise SpecError(Problem("store", f"cannot create {target.parent}: "
                                        f"{e.strerror}; allowed: a folder you can write "
                                        "to")) from None
        if target.parent not in self._cleaned:  # once per folder: a scan of 10,000 files
            clean_stale(target.parent)
            self._cleaned.add(target.parent)
        try:
            fd, name = tempfile.mkstemp(prefix=_tmp_prefix(target), dir=target.parent)
        except OSError as e:
            raise SpecError(Problem("store", f"cannot write in {target.parent}: "
                                    f"{e.strerror}; allowed: a folder you can write to")) \
                from None
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as fh:
                pq.write_table(table, fh, **_PARQUET)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as e:  # a full disk, a quota
            tmp.unlink(missing_ok=True)
            raise SpecError(Problem("store", f"cannot write in {target.parent}: "
                                    f"{e.strerror or e}; allowed: a folder with room, you "
                                    "can write to")) from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp, target

    # ------------------------------------------------------------------ reading
    def run_ids(self, sweep: str | None = None, status: str | None = "ok") -> set[str]:
        """The run_ids stored (in ``sweep``, or any), whose current status is ``status``
        (``ok`` by default; None: any). Read from the files' names and the compacted
        files' ``run_id``/``status`` columns: no DuckDB."""
        need_data()
        if sweep is not None:
            check_name(sweep, "sweep")
        if status is not None and status not in STATUSES:
            raise SpecError(Problem("status", f"{status!r} is not a status; allowed: "
                                    f"{', '.join(STATUSES)} or None"))
        out: set[str] = set()
        for sw in [sweep] if sweep is not None else self.sweeps():
            ok, failed = set(), set()
            d = self._runs_dir(sw)
            if not d.is_dir():
                continue
            for p in d.iterdir():
                n = p.name
                if n.startswith("part-") and n.endswith(".parquet"):
                    ok |= self._part_ids(p, "ok")
                    failed |= self._part_ids(p, "failed")
                elif n.startswith(".") or not n.endswith((".ok.parquet", ".failed.parquet")):
                    continue
                elif (why := self._checked_damage(p)) is not None:
                    self._set_aside(p, why)  # its run counts as not stored
                elif n.endswith(".ok.parquet"):
                    ok.add(n[:-11])
                else:
                    failed.add(n[:-15])
            failed -= ok
            out |= ok if status == "ok" else failed if status == "failed" else ok | failed
        return out

    def _checked_damage(self, p: Path) -> str | None:
        """:func:`_damage` of a file's ends and footer, once per file while it is the same
        (a run's file is written once, under a temporary name)."""
        key = _stat(p)
        if key is not None and self._sound.get(p) == key:
            return None
        why = _damage(p)
        if why is None:
            if len(self._sound) > 1_000_000:
                self._sound.clear()
            self._sound[p] = key
        return why

    def _glob(self, *parts: str) -> str:
        return _sql_str(str(self.root.resolve().joinpath(*parts)))

    def connect(self) -> Any:
        """An in-memory DuckDB connection with the store's views: ``runs`` (one row per
        run), ``timings``, and one per table name, each showing committed runs only."""
        need_data()
        import duckdb

        runs_dir = self.root / "runs"
        if not runs_dir.is_dir() or not any(runs_dir.glob("sweep=*/*.parquet")):
            what = "does not exist" if not self.root.exists() else "holds no runs"
            raise SpecError(Problem("store", f"{self.root} {what}; allowed: a results store "
                                    "written by aifabric sweep or Store.write_run (--store "
                                    "DIR, or AIFABRIC_STORE)"))
        con = duckdb.connect(":memory:")
        opts = "union_by_name = true, hive_partitioning = false, filename = '_file'"
        con.execute(f"""
            CREATE VIEW runs AS
            SELECT * EXCLUDE (_file) FROM read_parquet({self._glob('runs', 'sweep=*',
                                                                    '*.parquet')}, {opts})
            QUALIFY row_number() OVER (
                PARTITION BY sweep, run_id ORDER BY (status = 'ok') DESC, {_PICK} DESC) = 1""")
        timings = list(self.root.glob("timings/sweep=*/*.parquet"))
        if timings:
            src = f"read_parquet({self._glob('timings', 'sweep=*', '*.parquet')}, {opts})"
            con.execute(f"""
                CREATE VIEW timings AS
                SELECT * EXCLUDE (_file) FROM {src}
                QUALIFY {_PICK} = max({_PICK}) OVER (PARTITION BY sweep, run_id, status)
                    AND (sweep, run_id) IN (SELECT (sweep, run_id) FROM runs)""")
        else:
            con.execute("CREATE VIEW timings AS SELECT NULL::VARCHAR AS run_id, "
                        "NULL::VARCHAR AS sweep, NULL::VARCHAR AS status, "
                        "NULL::DOUBLE AS wall_s WHERE false")
        for name in self.table_names():
            if not any(self.root.glob(f"tables/{name}/sweep=*/*.parquet")):
                continue
            src = f"read_parquet({self._glob('tables', name, 'sweep=*', '*.parquet')}, {opts})"
            con.execute(f"""
                CREATE VIEW "{name}" AS
                WITH t AS (SELECT * FROM {src}),
                     pick AS (SELECT sweep, run_id, max({_PICK}) AS k FROM t GROUP BY ALL)
                SELECT * EXCLUDE (_file) FROM t
                WHERE (sweep, run_id, {_PICK}) IN (SELECT (sweep, run_id, k) FROM pick)
                  AND (sweep, run_id) IN
                      (SELECT (sweep, run_id) FROM runs WHERE status = 'ok')""")
        self._lock_down(con)
        return con

    def _lock_down(self, con: Any) -> None:
        """The connection reads the store's data folders only: no other file, no writes
        outside memory, no extension installed or loaded, settings locked (a query cannot
        undo this)."""
        root = self.root.resolve()
        dirs = ", ".join(_sql_str(str(root / d) + os.sep) for d in _DATA_DIRS)
        con.execute(f"SET allowed_directories = [{dirs}]")
        for setting in ("enable_external_access", "autoinstall_known_extensions",
                        "autoload_known_extensions", "allow_community_extensions"):
            con.execute(f"SET {setting} = false")
        con.execute("SET lock_configuration = true")

    def query(self, sql: str) -> pd.DataFrame:
        """Run ``sql`` (DuckDB's dialect: one read-only statement) over the views ``runs``,
        ``timings`` and one per table; a pandas DataFrame. DuckDB's refusal is a one-line
        :class:`SpecError` at field ``sql``. A file that a concurrent compaction removed
        between DuckDB listing and reading it: the query runs again (bounded). A damaged
        file: set aside (module doc), and the query runs again without it."""
        import duckdb

        if not isinstance(sql, str) or not sql.strip():
            _empty_sql()
        _check_read_only(sql)
        vanished = 0
        scanned = False
        while True:  # each pass sets a file aside or ends: the store's files are finite
            con = None
            try:
                con = self.connect()
                return con.sql(sql).df()
            except duckdb.PermissionException as e:
                raise SpecError(Problem("sql", f"{_one_line(str(e))}; allowed: the views "
                                        "runs, timings and the tables: queries read the "
                                        "store only")) from None
            except duckdb.Error as e:
                if self._set_aside_named(str(e)):
                    continue
                if isinstance(e, duckdb.IOException) and "No such file" in str(e) \
                        and vanished < 2:
                    vanished += 1
                    continue
                if not scanned and type(e).__name__ not in _QUERY_ERRORS:
                    scanned = True  # a damaged file DuckDB does not name: look for it
                    if self.verify(quarantine=True):
                        continue
                raise SpecError(Problem("sql", _one_line(str(e)))) from None
            finally:
                if con is not None:
                    con.close()

    # ------------------------------------------------------------------ damaged files
    def data_files(self) -> list[Path]:
        """Every Parquet file of the store's runs, tables and timings, sorted."""
        out: list[Path] = []
        for sub in _DATA_DIRS:
            base = self.root / sub
            if base.is_dir():
                pattern = "*/sweep=*/*.parquet" if sub == "tables" else "sweep=*/*.parquet"
                out += [p for p in base.glob(pattern)
                        if not p.name.startswith(".") and _TMP not in p.name]
        return sorted(out)

    def verify(self, *, quarantine: bool = False) -> list[dict[str, str]]:
        """Check every file of the store: its magic bytes and footer length, its footer
        (schema and metadata, read by pyarrow), then its data (read by DuckDB, all files
        at once, halved until the damaged ones are found). Returns one dict per damaged
        file (``file``, relative to the root, and ``reason``; ``moved_to`` when
        ``quarantine`` moved it there, with a note)."""
        need_data()
        files = self.data_files()
        bad: dict[Path, str] = {}
        for p in files:
            why = _damage(p)
            if why is not None:
                bad[p] = why
        for p, why in _unreadable([p for p in files if p not in bad]):
            bad[p] = why
        out = []
        for p in sorted(bad):
            rec = {"file": self._rel(p), "reason": bad[p]}
            if quarantine:
                moved = self._set_aside(p, bad[p])
                if moved is None:
                    continue  # gone meanwhile (compacted, or set aside by another process)
                rec["moved_to"] = moved
            out.append(rec)
        return out

    def _rel(self, p: Path) -> str:
        """``p`` (under the root as given, or resolved) relative to the root."""
        for base in (self.root, self.root.resolve()):
            if p.is_relative_to(base):
                return p.relative_to(base).as_posix()
        raise AssertionError(f"{p} is not in the store {self.root}")  # pragma: no cover

    def _set_aside_named(self, msg: str) -> bool:
        """Set aside the store files a DuckDB message names, if damaged; whether any was."""
        root = self.root.resolve()
        found = False
        for name in dict.fromkeys(re.findall(r"'([^']+[.]parquet)'", msg)):
            p = Path(name)
            if not p.is_absolute() or "*" in name or not p.is_relative_to(root) \
                    or p.relative_to(root).parts[0] not in _DATA_DIRS:
                continue
            why = _damage(p, data=True)
            if why is not None and self._set_aside(p, why) is not None:
                found = True
        return found

    def _set_aside(self, p: Path, reason: str) -> str | None:
        """Move the damaged file ``p`` to ``quarantine/`` (same relative path; a number
        added when the name is taken) with a note of why and when, and say so in one line;
        the path it went to, relative to the root (None: ``p`` was gone already)."""
        rel = self._rel(p)
        dest = self.root / QUARANTINE / rel
        n = 0
        while dest.exists() or dest.with_name(dest.name + ".note.json").exists():
            n += 1
            dest = self.root / QUARANTINE / f"{rel}.{n}"
        note = {"file": rel, "reason": reason, "size_bytes": _size(p),
                "quarantined_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "by": "aifabric (the results store): the file is no readable Parquet; its "
                      "rows are left out of every query"}
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            (dest.parent / (dest.name + ".note.json")).write_text(
                json.dumps(note, indent=1) + "\n", encoding="utf-8")
            try:
                os.replace(p, dest)
            except FileNotFoundError:  # set aside by another process, or compacted away
                (dest.parent / (dest.name + ".note.json")).unlink(missing_ok=True)
                return None
            _fsync_dir(dest.parent)
            _fsync_dir(p.parent)
        except OSError as e:
            raise SpecError(Problem("store", f"{p} is damaged ({reason}) and cannot be moved "
                                    f"to {self.root / QUARANTINE}: {e.strerror or e}; "
                                    "allowed: a store you can write to (or move the file "
                                    "away yourself)")) from None
        self._parts.pop(p, None)
        moved = dest.relative_to(self.root).as_posix()
        self.quarantined.append({"file": rel, "moved_to": moved, "reason": reason})
        self.warn(f"warning: store: {self.root / rel} is damaged ({reason}); moved to "
                  f"{self.root / moved}, its rows left out")
        return moved

    # ------------------------------------------------------------------ compaction
    def compact(self, sweep: str | None = None) -> dict[str, int]:
        """Merge each partition's per-run files into one ``part-<digest>.parquet`` (rows
        de-duplicated as the ``runs`` view does: the ok row of a run, else its newest failed
        row); returns how many files were merged in and how many runs the compacted sweeps
        hold. Atomic per partition: the merged file is written (temporary name, fsync,
        rename) before the merged-in files are removed, and the views de-duplicate
        meanwhile. Tables and timings are merged only for runs whose row is committed (a
        run being written is left alone). One compaction at a time per store (a lock file,
        ``.compact.lock``; this call waits for another one to end)."""
        need_data()
        sweeps = [check_name(sweep, "sweep")] if sweep is not None else self.sweeps()
        if sweep is not None and not self._runs_dir(sweep).is_dir():
            raise SpecError(Problem("sweep", f"no sweep {sweep!r} in {self.root}; allowed: "
                                    f"{', '.join(self.sweeps()) or 'none (an empty store)'}"))
        merged = rows = 0
        with _Lock(self.root / ".compact.lock", wait=True):
            for sw in sweeps:
                m, n = self._compact_sweep(sw, full=True)
                merged, rows = merged + m, rows + n
        return {"files_merged": merged, "rows": rows}

    def _maybe_compact(self, sweep: str) -> None:
        """Compact ``sweep`` once it holds :attr:`compact_every` per-run row files, unless
        another compaction is running (then a later write does it). Counted in the folder
        at every write (a scan of at most about ``compact_every`` + log2 names), not per
        Store object: a store opened anew for each run compacts too."""
        if not self.compact_every:
            return
        with os.scandir(self._runs_dir(sweep)) as it:
            per_run = sum(e.name.endswith(".parquet") and not e.name.startswith(("part-", "."))
                          for e in it)
        if per_run < self.compact_every:
            return
        lock = _Lock(self.root / ".compact.lock", wait=False)
        if lock.acquire():
            try:
                self._compact_sweep(sweep, full=False)
            finally:
                lock.release()

    def _compact_sweep(self, sw: str, *, full: bool) -> tuple[int, int]:
        """Merge a sweep's files: all of them (``full``), else the per-run files and the
        parts of the generations the binary counter says (module doc); returns the files
        merged in and the rows of the merged runs file."""
        d = self._runs_dir(sw)
        every = _parquet_files(d)
        gens = [_gen(p) for p in every if p.name.startswith("part-")]
        gen = max(gens, default=0) + 1
        low = -1 if full else gen - (gen & -gen)  # merge parts of generations (low, gen)
        files = _select(every, low)
        if not any(not p.name.startswith("part-") for p in files) and (len(files) < 2
                                                                       or not full):
            files = []  # nothing new for the rows: only the tables may need merging
            if not full or not every:
                return 0, 0
        runs = self._read(files or every, f"""
            SELECT * EXCLUDE (_file, file_row_number) FROM {{src}}
            QUALIFY row_number() OVER (
                PARTITION BY run_id ORDER BY (status = 'ok') DESC, {_PICK} DESC) = 1
            ORDER BY run_id""")
        runs = _order_row_columns(runs)
        merged = self._replace_partition(d, files, runs, gen) if files else 0
        ids = runs["run_id"].to_pylist()
        ok = [r for r, s in zip(ids, runs["status"].to_pylist(), strict=True) if s == "ok"]
        for name in self.table_names():
            td = self._table_dir(name, sw)
            if td.is_dir():
                merged += self._compact_keyed(td, ok, "run_id", gen, low)
        td = self._timings_dir(sw)
        if td.is_dir():
            merged += self._compact_keyed(td, ids, "run_id, status", gen, low)
        return merged, runs.num_rows

    def _replace_partition(self, d: Path, files: list[Path], table: pa.Table,
                           gen: int) -> int:
        """Write ``table`` as the part file of generation ``gen``, then remove ``files``
        (those unchanged since they were listed); returns how many were removed."""
        stats = {p: _stat(p) for p in files}
        digest = hashlib.sha256()
        for rid in table["run_id"].to_pylist():
            digest.update(rid.encode() + b"\n")
        target = d / f"part-{gen:06d}-{digest.hexdigest()[:16]}.parquet"
        tmp, _ = self._stage(target, table)
        try:
            os.replace(tmp, target)
            _fsync_dir(d)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        n = 0
        for p in files:
            if p != target and stats[p] is not None and _stat(p) == stats[p]:
                p.unlink(missing_ok=True)  # not rewritten since listed
                n += 1
        return n

    def _compact_keyed(self, d: Path, committed: list[str], key: str, gen: int,
                       low: int) -> int:
        """Merge the files of a tables/timings partition that belong to the merged runs
        (``committed``) and the parts of generations (``low``, ``gen``); each run's rows
        come from one file (the rule of the views), in their order."""
        keep = set(committed)
        files = [p for p in _select(_parquet_files(d), low) if p.name.startswith("part-")
                 or p.name.split(".")[0] in keep]
        if not files or (len(files) == 1 and files[0].name.startswith("part-")):
            return 0
        table = self._read(files, f"""
            SELECT * EXCLUDE (_file, file_row_number) FROM {{src}}
            WHERE run_id IN (SELECT unnest($ids))
            QUALIFY {_PICK} = max({_PICK}) OVER (PARTITION BY {key})
            ORDER BY run_id, _file, file_row_number""", ids=sorted(keep))
        return self._replace_partition(d, files, table.replace_schema_metadata(None), gen)


    def _read(self, files: list[Path], sql: str, **params: Any) -> pa.Table:
        """``sql`` over the Parquet ``files`` (``{src}``: their union by column name, with
        ``_file`` and ``file_row_number``) as an Arrow table, read by DuckDB (a few times
        faster than pyarrow on many small files); a file removed meanwhile is skipped, a
        damaged one set aside (module doc)."""
        import duckdb

        vanished = 0
        while True:  # each pass ends, or drops a file that vanished or was set aside
            files = [p for p in files if p.exists()]
            src = ("read_parquet($files, union_by_name = true, hive_partitioning = false, "
                   "filename = '_file', file_row_number = true)")
            con = duckdb.connect(":memory:")
            try:
                rel = con.sql(sql.format(src=src),
                              params={"files": [str(p) for p in files], **params})
                return (rel.to_arrow_table() if hasattr(rel, "to_arrow_table")
                        else rel.fetch_arrow_table())
            except duckdb.IOException as e:
                if "No such file" in str(e) and vanished < 5:  # bounded: listed, then gone
                    vanished += 1
                    continue
                if not self._set_aside_bad(files, str(e)):
                    raise SpecError(Problem("store", f"cannot compact: "
                                            f"{_one_line(str(e))}")) from None
            except duckdb.Error as e:
                if not self._set_aside_bad(files, str(e)):
                    raise SpecError(Problem("store", f"cannot compact: "
                                            f"{_one_line(str(e))}")) from None
            finally:
                con.close()

    def _set_aside_bad(self, files: list[Path], msg: str) -> bool:
        """After a failed read of ``files``: set aside the damaged ones (those the message
        names, else any found by a check of them all); whether any was."""
        if self._set_aside_named(msg):
            return True
        found = False
        bad = {p: why for p in files if (why := _damage(p)) is not None}
        bad.update(_unreadable([p for p in files if p not in bad]))
        for p in sorted(bad):
            found |= self._set_aside(p, bad[p]) is not None
        return found


class _Lock:
    """An exclusive ``flock`` on a file (one compaction at a time on this host)."""

    def __init__(self, path: Path, *, wait: bool):
        self.path, self.wait, self.fd = path, wait, -1

    def acquire(self) -> bool:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(self.fd)
            self.fd = -1
            return False
        return True

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the lock
            self.fd = -1

    def __enter__(self) -> _Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ---------------------------------------------------------------------- helpers
def _umask() -> int:
    from aifabric.outputs import umask

    return umask()


def _warn_line(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _size(p: Path) -> int | None:
    try:
        return p.stat().st_size
    except OSError:
        return None


def _damage(p: Path, *, footer: bool = True, data: bool = False) -> str | None:
    """Why ``p`` is no readable Parquet file, or None (fine, or gone): its size and magic
    bytes (``PAR1`` at both ends) and footer length, then (``footer``) its footer parsed
    by pyarrow (schema, row groups, the Arrow schema), then (``data``) every value read by
    DuckDB. The first check opens the file and reads 12 bytes: about 20 us a file; the
    footer about 0.15 ms (docs/results.md)."""
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 12:
                return f"{size} bytes: too small to be a Parquet file (truncated?)"
            head = fh.read(4)
            fh.seek(-8, os.SEEK_END)
            tail = fh.read(8)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    if head != _MAGIC:
        return "no Parquet magic bytes at its start"
    if tail[4:] != _MAGIC:
        return "no Parquet magic bytes at its end (truncated?)"
    if int.from_bytes(tail[:4], "little") + 12 > size:
        return "its footer length runs past the file's start (truncated?)"
    if footer:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(p)
            pf.schema_arrow  # noqa: B018 - parses the Arrow schema kept in the footer
            pf.close()
        except FileNotFoundError:
            return None
        except (pa.ArrowException, OSError, ValueError) as e:
            return f"unreadable footer: {_one_line(str(e))}"
    if data:
        bad = _unreadable([p])
        if bad:
            return bad[0][1]
    return None


def _unreadable(files: list[Path]) -> list[tuple[Path, str]]:
    """The files among ``files`` whose data DuckDB cannot read (every column of every
    row decoded), with DuckDB's reason: one read of them all, halved while it fails (so
    about 2 log2(n) reads per damaged file, one read when none is)."""
    import duckdb

    if not files:
        return []
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        out: list[tuple[Path, str]] = []
        todo = [files]
        while todo:
            part = todo.pop()
            try:
                # hash: every value decoded (count() may answer from the footer's statistics)
                con.execute("SELECT bit_xor(hash(COLUMNS(*))) FROM read_parquet($files, "
                            "union_by_name = true, hive_partitioning = false)",
                            {"files": [str(p) for p in part]}).fetchall()
                continue
            except duckdb.Error as e:
                if len(part) == 1:
                    if part[0].exists():
                        out.append((part[0], f"unreadable data: {_one_line(str(e))}"))
                    continue
            half = len(part) // 2
            todo += [part[half:], part[:half]]
        return sorted(out)
    finally:
        con.close()


def _order_row_columns(t: pa.Table) -> pa.Table:
    """Summary rows: the core columns first, the others sorted by name; no metadata."""
    names = t.column_names
    rest = sorted(c for c in names if c not in CORE)
    return t.select([c for c in CORE if c in names] + rest).replace_schema_metadata(None)


def _gen(p: Path) -> int:
    """A part file's generation (0: an unnumbered one)."""
    m = _PART.match(p.name)
    return int(m.group(1)) if m else 0


def _select(files: list[Path], low: int) -> list[Path]:
    """The per-run files and the parts of generation above ``low`` (-1: every part)."""
    return [p for p in files if not p.name.startswith("part-") or _gen(p) > low]


def _parquet_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.endswith(".parquet")
                  and not p.name.startswith(".") and _TMP not in p.name)


def _stat(p: Path) -> tuple[int, int, int] | None:
    try:
        s = p.stat()
    except FileNotFoundError:
        return None
    return (s.st_ino, s.st_size, s.st_mtime_ns)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - systems without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _one_line(msg: str) -> str:
    """DuckDB's message on one line: its first paragraph, whitespace collapsed."""
    head = msg.strip().split("\n\n")[0]
    return " ".join(head.split()) or "DuckDB refused the query"


def _check_read_only(sql: str) -> None:
    """One statement, a query (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN): no COPY,
    INSTALL, LOAD, ATTACH, EXPORT, SET, PRAGMA, CALL nor any statement that changes
    something (the connection refuses files outside the store as well)."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        stmts = con.extract_statements(sql)
    except duckdb.Error as e:
        raise SpecError(Problem("sql", _one_line(str(e)))) from None
    finally:
        con.close()
    if not stmts:
        _empty_sql()
    if len(stmts) > 1:
        raise SpecError(Problem("sql", f"{len(stmts)} statements; allowed: one query (a "
                                "SELECT over runs, timings or a table)"))
    kind = stmts[0].type.name
    if kind not in _QUERY_KINDS:
        raise SpecError(Problem("sql", f"a {kind} statement is refused: queries read the "
                                "store only, install and load nothing and write nothing "
                                "(results query --format csv or json, redirected, writes "
                                "the rows); allowed: SELECT, WITH, DESCRIBE, SHOW, "
                                "SUMMARIZE, EXPLAIN"))


def _empty_sql() -> Any:
    raise SpecError(Problem("sql", "empty query; allowed: a SELECT over runs, timings or a "
                            "table (SELECT * FROM runs)"))


def results(sql: str | None = None, *, store: str | os.PathLike[str] | None = "results"
            ) -> pd.DataFrame:
    """``af.results()``: a query over the store (default ``./results``; None: the
    ``AIFABRIC_STORE`` variable, else ``./results``) as a pandas DataFrame; without SQL,
    every run (``SELECT * FROM runs ORDER BY sweep, point, run_id``)."""
    return Store(store_root(store)).query(DEFAULT_SQL if sql is None else sql)
