"""Write result tables, the Markdown report and the plots into a folder, atomically: all
files are built in a temporary folder that is renamed into place at the end, so a failure
never leaves a half-written report (:func:`aifabric.outputs.atomic_folder`)."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.sim.results import SimResult

__all__ = ["FLOAT_FORMAT", "check_table_format", "write_report", "write_table",
           "write_tables"]


#: how :func:`write_table` writes a float column to CSV by default (simulation tables)
FLOAT_FORMAT = "%.10g"

#: rows :func:`write_table` converts and writes at a time (CSV)
CSV_CHUNK_ROWS = 32_768


def check_table_format(fmt: str, option: str = "--format") -> None:
    """csv, or parquet when pyarrow is installed; one line otherwise."""
    if fmt not in ("csv", "parquet"):
        raise SpecError(Problem(option, f"unknown format {fmt!r}; allowed: csv, parquet"))
    if fmt == "parquet":
        _pyarrow(option)


def _pyarrow(option: str = "--format") -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SpecError(Problem(option, "parquet needs pyarrow, which is an extra: "
                                "pip install -e '.[parquet]' (or pip install "
                                "'aifabric[parquet]'); allowed without it: csv")) from e
    return pa, pq


def write_table(path: Path, table: dict[str, np.ndarray], fmt: str = "csv", *,
                float_format: str | None = FLOAT_FORMAT) -> None:
    """One table (column name -> numpy array) as a CSV or Parquet file. In CSV a float
    column is written with ``float_format`` (``%``-style; None: Python's shortest repr,
    as ``route --out``'s tables are); other columns as Python writes their values."""
    if fmt == "parquet":
        pa, pq = _pyarrow()
        arrays = {k: (pa.array(v.tolist()) if v.dtype == object else pa.array(v))
                  for k, v in table.items()}
        pq.write_table(pa.table(arrays), path)
        return
    cols = list(table)
    n = len(table[cols[0]]) if cols else 0
    if any(len(table[c]) != n for c in cols):
        raise ValueError(f"{path.name}: columns of unequal length")
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        # streamed, CSV_CHUNK_ROWS rows at a time: the rows as Python objects (several
        # times the arrays' size: 0.5 M rows x 12 columns held ~120 MB) exist for one
        # chunk, not the whole table
        for i in range(0, n, CSV_CHUNK_ROWS):
            conv = []
            for c in cols:
                v = table[c][i:i + CSV_CHUNK_ROWS]
                if float_format is not None and v.dtype.kind == "f":
                    conv.append(np.char.mod(float_format, v).tolist())
                else:
                    conv.append(v.tolist())
            w.writerows(zip(*conv, strict=True))


def write_tables(result: SimResult, folder: Path, fmt: str = "csv") -> list[str]:
    """One file per table (``collectives``, ``jobs``, ``transfers``, ``links``,
    ``timeline``); returns the file names."""
    out = []
    for name, table in result.tables.items():
        p = folder / f"{name}.{fmt}"
        write_table(p, table, fmt)
        out.append(p.name)
    return out


def write_report(results: list[SimResult], out: Path, *, fmt: str = "csv",
                 title: str | None = None, preamble: str = "", option: str = "--out",
                 groups: list[tuple[str, list[int]]] | None = None) -> Path:
    """Write tables, plots and ``report.md`` for one or several results into ``out``.

    One result: everything in ``out``. Several (compare, demo): one sub-folder per
    scenario and a report comparing them (``groups``: which results are runs of one
    experiment, see :func:`render_markdown`). Text files a result carries in
    ``meta["files"]`` (``run.json``: what the run was made from) go beside its tables.
    The folder is written atomically (see
    :mod:`aifabric.outputs`); ``out`` must be new, empty or a previous report.
    """
    from aifabric.outputs import REPORT, atomic_folder
    from aifabric.report.markdown import render_markdown
    from aifabric.report.plots import write_packet_comparison, write_plots

    if fmt not in ("csv", "parquet"):
        raise SpecError(Problem("--format", f"unknown format {fmt!r}; allowed: csv, parquet"))
    out = Path(out)
    with atomic_folder(out, option=option, **REPORT) as tmp:
        figs: dict[str, list[str]] = {}
        files: dict[str, list[str]] = {}
        names = _unique_names([r.scenario for r in results])
        for r, name in zip(results, names, strict=True):
            sub = tmp if len(results) == 1 else tmp / name
            sub.mkdir(exist_ok=True)
            prefix = "" if len(results) == 1 else f"{name}/"
            files[name] = [prefix + x for x in write_tables(r, sub, fmt)]
            for fname, text in sorted(r.meta.get("files", {}).items()):  # e.g. run.json
                (sub / fname).write_text(text, encoding="utf-8")
            figs[name] = [prefix + x for x in write_plots(r, sub)]
        comp = write_packet_comparison(results, tmp, names) \
            if len(results) > 1 and groups is None else []
        md = render_markdown(results, names=names, figures=figs, files=files, title=title,
                             preamble=preamble, groups=groups, comparison_figures=comp)
        (tmp / "report.md").write_text(md, encoding="utf-8")
    return out / "report.md"


def _unique_names(names: list[str]) -> list[str]:
    """A folder name per scenario: letters, digits, ``-_.``; any run of other characters
    one ``-`` (``DCN+ spread`` -> ``DCN-spread``), none at either end; unique."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", n)
        safe = re.sub(r"-{2,}", "-", safe).strip("-.") or "scenario"
        k = seen.get(safe, 0)
        name = safe if not k else f"{safe}-{k + 1}"
        while name in out:  # "a b", "a b", "a-b-2": the third is not the second's name
            k += 1
            name = f"{safe}-{k + 1}"
        seen[safe] = k + 1
        out.append(name)
    return out
