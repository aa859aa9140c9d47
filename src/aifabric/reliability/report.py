"""Writing a goodput result: CSV tables, one JSON summary, plots — all at once into a
folder (:func:`aifabric.outputs.atomic_folder`), so a failure leaves nothing partial."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.reliability.model import GoodputResult

__all__ = ["MARKER", "jsonable", "write_goodput"]

#: the file that marks a goodput output folder (a previous one may be replaced)
MARKER = {"marker": "goodput.json", "what": "a previous goodput output"}


def jsonable(x: Any) -> Any:
    """Plain JSON: numpy scalars as numbers, NaN and infinities as null."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def _csv(cols: dict[str, list[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(cols))
    w.writerows(zip(*cols.values(), strict=True))
    return buf.getvalue()


def _ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks between ``lo`` and ``hi`` (minutes), at least two."""
    cand = [m * 10.0**e for e in range(-3, 6) for m in (1, 2, 5)]
    inside = [c for c in cand if lo <= c <= hi]
    return inside if len(inside) >= 2 else [round(lo, 3), round(hi, 3)]


def _plots(res: GoodputResult, tmp: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # user text: no $math$
    matplotlib.rcParams["svg.hashsalt"] = "aifabric"
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from aifabric.sim.plotting import legend_outside

    s = res.summary
    names = []
    sw = s["sweep"]
    if sw:
        x = np.array([p["interval_s"] for p in sw["points"]]) / 60
        fig, ax = plt.subplots(figsize=(8.4, 3.6), layout="constrained")
        ax.plot(x, [p["ettr_mean"] for p in sw["points"]], "o-", ms=3, color="#4477aa",
                label="mean ETTR")
        ax.fill_between(x, [p["ettr_p5"] for p in sw["points"]],
                        [p["ettr_p95"] for p in sw["points"]], color="#4477aa", alpha=0.2,
                        label="p5-p95 of trials")
        ax.axvline(sw["optimum_interval_s"] / 60, color="#228833", ls="--",
                   label=f"optimum {sw['optimum_interval_s'] / 60:.3g} min")
        if sw["young_interval_s"]:
            ax.axvline(sw["young_interval_s"] / 60, color="#cc6677", ls=":",
                       label=f"Young sqrt(2 delta M) {sw['young_interval_s'] / 60:.3g} min")
        ax.set_xscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")  # no $math$ tick labels (parse_math off)
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_xticks(_ticks(x.min(), x.max()))
        ax.set_xlabel(f"checkpoint interval of level {sw['level']} (min)")
        ax.set_ylabel("effective training time ratio")
        ax.set_title(f"{res.scenario}: checkpoint interval sweep", fontsize=10)
        legend_outside(ax)
        fig.savefig(tmp / "sweep.png", dpi=110)
        plt.close(fig)
        names.append("sweep.png")
    lost = s["time_lost_hours"]
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    ax.barh(list(lost), list(lost.values()), color="#ee6677")
    ax.set_xlabel(f"hours lost per {s['horizon_days']:g}-day run (mean of trials)")
    ax.set_title(f"{res.scenario}: time lost by cause", fontsize=10)
    fig.tight_layout()
    fig.savefig(tmp / "time_lost.png", dpi=110)
    plt.close(fig)
    names.append("time_lost.png")
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    ax.hist(res.engine.ettr[0], bins=40, color="#4477aa")
    ax.set_xlabel("effective training time ratio of one trial")
    ax.set_ylabel("trials")
    ax.set_title(f"{res.scenario}: ETTR over {s['trials']:,} trials", fontsize=10)
    fig.tight_layout()
    fig.savefig(tmp / "ettr_hist.png", dpi=110)
    plt.close(fig)
    names.append("ettr_hist.png")
    return names


def write_goodput(res: GoodputResult, out: Path) -> list[str]:
    """Write ``goodput.json``, one CSV per table and the plots into ``out``; returns the
    file names."""
    from aifabric.outputs import atomic_folder

    names = []
    with atomic_folder(out, option="--out", **MARKER) as tmp:
        for name, cols in res.tables.items():
            (tmp / f"{name}.csv").write_text(_csv(cols), encoding="utf-8")
            names.append(f"{name}.csv")
        names += _plots(res, tmp)
        (tmp / "goodput.json").write_text(json.dumps(jsonable(res.summary), indent=2) + "\n",
                                          encoding="utf-8")
        names.append("goodput.json")
    return names
