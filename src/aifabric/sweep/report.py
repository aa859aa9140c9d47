"""``aifabric sweep report``: the tables and plots of a stored sweep.

From the rows of one sweep in a results store it writes, into one folder (atomically):

* ``rows.csv``: every row (ok and failed), by point;
* ``points.csv``: per combination of the swept fields, each figure's mean, std, min,
  max and n over the repetitions (seeds);
* ``by-<field>.csv``: per swept field, each figure grouped by that field's values alone
  (the other swept fields and the seeds pooled);
* ``<figure>--<field>.png``: the figure against the field, one line per combination of
  the other swept fields (up to :data:`MAX_SERIES`), the mean with its std as error bars
  and the min..max range as a band;
* ``report.md`` linking them, with the failed points and their errors.

Statistics are pandas' (std: the sample standard deviation, n - 1; empty for n = 1).
Same rows -> byte-identical files (sorted rows and columns, PNGs without a timestamp).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.sweep.model import DEFAULT_FIGURES, NAME_RE

__all__ = ["MAX_SERIES", "STATS", "load_rows", "stats_by", "write_report"]

#: lines per plot; more combinations of the other swept fields: the field alone (pooled)
MAX_SERIES = 8
#: the statistics of every table, in column order
STATS = ("mean", "std", "min", "max", "n")
#: failed points listed in report.md (all are in rows.csv)
FAILED_SHOWN = 20


def _sweep_names(store: Any) -> list[str]:
    df = store.query("SELECT DISTINCT sweep FROM runs ORDER BY sweep")
    return [str(x) for x in df["sweep"]]


def load_rows(root: str | os.PathLike[str], sweep: str | None = None
              ) -> tuple[str, Any, dict[str, Any]]:
    """``(sweep name, its rows as a DataFrame ordered by point, its definition)`` from the
    store at ``root``; ``sweep`` may be left out when the store holds one sweep."""
    from aifabric.sweep.runner import definition_path, open_store

    if not Path(root).is_dir():
        raise SpecError(Problem("--store", f"{root} is not a folder; allowed: the results "
                                "store of a sweep (its --store)"))
    store = open_store(root)
    names = _sweep_names(store)
    if sweep is None:
        if not names:
            raise SpecError(Problem("--store", f"{root} holds no sweep rows; allowed: the "
                                    "results store of a sweep that ran"))
        if len(names) > 1:
            raise SpecError(Problem("--sweep", f"{root} holds {len(names)} sweeps "
                                    f"({', '.join(names)}); allowed: --sweep NAME"))
        sweep = names[0]
    elif not NAME_RE.fullmatch(sweep) or sweep not in names:
        raise SpecError(Problem("--sweep", f"no sweep {sweep!r} in {root}; allowed: "
                                f"{', '.join(names) or 'none stored'}"))
    df = store.query(f"SELECT * FROM runs WHERE sweep = '{sweep}'")  # a checked name
    from aifabric.sweep.runner import CORE

    params = sorted(c for c in df.columns if c.startswith("param."))
    rest = sorted(c for c in df.columns if c not in CORE and c not in params)
    df = df[[c for c in CORE if c in df.columns] + params + rest]
    df = df.sort_values(["point", "run_id"], kind="stable").reset_index(drop=True)
    path = definition_path(root, sweep)
    try:
        definition = json.loads(path.read_text())
    except (OSError, ValueError):  # rows written by hand or by an older sweep
        definition = {"fields": [c[6:] for c in params], "repeat_fields": [],
                      "figures": None}
    return sweep, df, definition


def _numeric(df: Any, col: str) -> bool:
    import pandas as pd

    return col in df.columns and (pd.api.types.is_numeric_dtype(df[col])
                                  or pd.api.types.is_bool_dtype(df[col]))


def stats_by(df: Any, keys: list[str], figures: list[str]) -> Any:
    """Long table: ``keys..., figure, mean, std, min, max, n`` of the ok rows of ``df``
    grouped by ``keys`` (the values of the ``param.<field>`` columns)."""
    import pandas as pd

    ok = df[df["status"] == "ok"]
    cols = [f"param.{k}" for k in keys]
    parts = []
    for fig in figures:
        vals = pd.to_numeric(ok[fig], errors="coerce").astype("float64")
        frame = ok[cols].assign(_v=vals.to_numpy())
        if cols:
            g = frame.groupby(cols, sort=True, dropna=False)["_v"]
            agg = g.agg(["mean", "std", "min", "max", "count"]).reset_index()
        else:
            v = frame["_v"]
            agg = pd.DataFrame({"mean": [v.mean()], "std": [v.std()], "min": [v.min()],
                                "max": [v.max()], "count": [v.count()]})
        agg = agg.rename(columns={"count": "n", **dict(zip(cols, keys, strict=True))})
        agg.insert(len(keys), "figure", fig)
        parts.append(agg)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=[*keys, "figure", *STATS])
    out["n"] = out["n"].astype("int64")
    return out[[*keys, "figure", *STATS]]


def _figures(df: Any, definition: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(figures to report, notes on asked figures that cannot be)."""
    asked = definition.get("figures")
    notes = []
    if asked:
        figs = [f for f in asked if _numeric(df, f)]
        notes = [f"figure {f}: " + ("not a number" if f in df.columns else "no such column "
                                    "in the rows") for f in asked if f not in figs]
    else:
        figs = [f for f in DEFAULT_FIGURES if _numeric(df, f) and df[f].notna().any()]
    return figs, notes


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _plot(stats: Any, field: str, others: list[str], figure: str, path: Path,
          title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = stats[stats["figure"] == figure]
    xs = sorted(set(data[field].tolist()), key=lambda v: (not _is_num(v), str(type(v)), v))
    numeric = all(_is_num(v) for v in xs)
    series = (data.groupby(others, sort=True, dropna=False) if others
              else [((), data)])
    series = list(series)
    from aifabric.sim.plotting import legend_outside, series_style, wrapped_title

    fig, ax = plt.subplots(figsize=(9, 4.2), layout="constrained")
    width = 0.6 / max(len(series), 1)
    for k, (key, grp) in enumerate(series):
        grp = grp.set_index(field).reindex(xs)
        if numeric:
            x = [float(v) for v in xs]
        else:
            x = [i + (k - (len(series) - 1) / 2) * width for i in range(len(xs))]
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{o}={v}" for o, v in zip(others, key, strict=True)) or None
        y = grp["mean"].to_numpy(dtype=float)
        err = grp["std"].fillna(0).to_numpy(dtype=float)
        style = series_style(k)
        color = style["color"]
        marker = "os^D"[(k // 10) % 4]  # with line style: distinct for 40 series
        ax.errorbar(x, y, yerr=err, marker=marker, capsize=3, label=label, color=color,
                    linestyle=style["linestyle"] if numeric else "none")
        lo, hi = grp["min"].to_numpy(dtype=float), grp["max"].to_numpy(dtype=float)
        if numeric and len(x) > 1:
            ax.fill_between(x, lo, hi, color=color, alpha=0.15, linewidth=0)
        else:
            ax.vlines(x, lo, hi, color=color, alpha=0.35, linewidth=6)
    if not numeric:
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_xlim(-0.6, len(xs) - 0.4)
    elif xs and min(xs) > 0 and max(xs) / min(xs) > 100:
        ax.set_xscale("log")
    ax.set_xlabel(field)
    ax.set_ylabel(figure)
    wrapped_title(ax, title)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        legend_outside(ax)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def _md_table(df: Any) -> str:
    cols = list(df.columns)

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.6g}"
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |"
              for row in df.itertuples(index=False)]
    return "\n".join(lines)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def write_report(root: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                 sweep: str | None = None) -> Path:
    """Write the report of sweep ``sweep`` (the only one when None) of the store at
    ``root`` into ``out`` (default ``<root>/reports/<sweep>``); returns report.md."""
    from aifabric.outputs import REPORT, atomic_folder, check_target

    name, df, definition = load_rows(root, sweep)
    target = Path(out) if out is not None else Path(root) / "reports" / name
    if out is None:
        target.parent.mkdir(exist_ok=True)
    check_target(target, option="--out", folder=True, **REPORT)
    repeat = list(definition.get("repeat_fields") or [])
    fields = [f for f in definition.get("fields") or [] if f"param.{f}" in df.columns]
    figures, notes = _figures(df, definition)
    n_ok = int((df["status"] == "ok").sum())
    failed = df[df["status"] != "ok"]
    with atomic_folder(target, option="--out", **REPORT) as tmp:
        df.to_csv(tmp / "rows.csv", index=False)
        md = [f"# Sweep {name}", ""]
        if definition.get("description"):
            md += [definition["description"], ""]
        md += [f"{len(df):,} points stored: {n_ok:,} ok, {len(failed):,} failed "
               f"(of {definition.get('points', len(df)):,} in the sweep). Swept: "
               f"{', '.join(fields) or 'nothing'}; repetitions over "
               f"{', '.join(repeat) or 'nothing'}. Every row: [rows.csv](rows.csv).", ""]
        md += [f"- {n}" for n in notes] + ([""] if notes else [])
        if fields and figures:
            pts = stats_by(df, fields, figures)
            pts.to_csv(tmp / "points.csv", index=False)
            md += ["Per point (combination of the swept fields), over the repetitions: "
                   "[points.csv](points.csv).", ""]
            for field in fields:
                stem = f"by-{_safe(field)}"
                by = stats_by(df, [field], figures)
                by.to_csv(tmp / f"{stem}.csv", index=False)
                md += [f"## {field}", "", f"Each figure by {field} alone (other fields and "
                       f"seeds pooled): [{stem}.csv]({stem}.csv)", "", _md_table(by), ""]
                others = [f for f in fields if f != field]
                combos = pts[others].drop_duplicates().shape[0] if others else 1
                src, use = (pts, others) if combos <= MAX_SERIES else (by, [])
                pooled = [*repeat, *(o for o in others if o not in use)]
                spread = (f"mean, std bars, min..max band over {', '.join(pooled)}"
                          if pooled else "one run per point")
                for fig in figures:
                    png = f"{_safe(fig)}--{_safe(field)}.png"
                    _plot(src, field, use, fig, tmp / png, f"{name}: {fig} ({spread})")
                    md += [f"![{fig} against {field}]({png})", ""]
        elif not figures:
            md += ["No numeric figure to report.", ""]
        if len(failed):
            md += ["## Failed points", "", _md_table(
                failed[["point", "overrides", "error"]].head(FAILED_SHOWN)), ""]
            if len(failed) > FAILED_SHOWN:
                md += [f"{FAILED_SHOWN} of {len(failed):,} failed points shown; all in "
                       "rows.csv", ""]
        (tmp / "report.md").write_text("\n".join(md))
    return target / "report.md"
