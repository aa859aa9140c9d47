"""PNG plots of one result: link utilization CDF per tier, the collectives' timeline,
the two-port imbalance histogram and the utilization of each tier over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aifabric.sim.results import SimResult

__all__ = ["COINCIDE", "TIMELINE_ROWS", "binned_mean", "collective_timeline",
           "tier_util_timeline", "timeline_rows", "two_port_imbalance", "util_cdf",
           "write_packet_comparison", "write_plots"]

#: rows of the collective timeline; more collectives than this share rows (aggregated)
TIMELINE_ROWS = 40


#: two tiers' utilization CDFs closer than this everywhere (utilization, under 3 px on
#: the plot's axis) are drawn as one line whose legend entry names both
COINCIDE = 0.005


def _plt():
    from aifabric.sim.plotting import pyplot

    return pyplot()


def write_packet_comparison(results: list[SimResult], folder: Path,
                            names: list[str] | None = None) -> list[str]:
    """``comparison_packet.png`` for packet runs side by side: FCT slowdown p50/p99/max
    per run, and what it cost (retransmitted MB, packets out of order %, the spread of
    bytes over the fabric's links); nothing unless every result is a packet run."""
    if len(results) < 2 or not all("packet" in r.summary for r in results):
        return []
    from aifabric.report.markdown import packet_metrics

    plt = _plt()
    names = names or [r.scenario for r in results]
    pm = [packet_metrics(r) for r in results]
    x = np.arange(len(results))
    fig, axs = plt.subplots(1, 4, figsize=(13, 3.8))
    w = 0.27
    for i, (k, lab) in enumerate((("slowdown_p50", "p50"), ("slowdown_p99", "p99"),
                                  ("slowdown_max", "max"))):
        axs[0].bar(x + (i - 1) * w, [m[k] for m in pm], w, label=lab)
    axs[0].set_title("FCT slowdown")
    axs[0].legend(fontsize=7)
    for ax, k, scale, title in ((axs[1], "retx_bytes", 1e-6, "retransmitted (MB)"),
                                (axs[2], "ooo_share", 100.0, "out of order (%)"),
                                (axs[3], "load_cv", 1.0, "fabric link load CV")):
        ax.bar(x, [m[k] * scale for m in pm], 0.6)
        ax.set_title(title)
    for ax in axs:
        ax.set_xticks(x, names, rotation=30, ha="right", fontsize=7)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(folder / "comparison_packet.png", dpi=110)
    plt.close(fig)
    return ["comparison_packet.png"]


def write_plots(r: SimResult, folder: Path) -> list[str]:
    """Write the plots of ``r`` into ``folder``; returns the file names."""
    plt = _plt()
    out = []
    # 1. utilization CDF per tier
    fig, ax = plt.subplots(figsize=(8.5, 4.2), layout="constrained")
    util_cdf(r, ax)
    fig.savefig(folder / "link_util_cdf.png", dpi=110)
    plt.close(fig)
    out.append("link_util_cdf.png")
    # 2. timeline of every collective (aggregated into rows when there are many)
    info_rows = len(timeline_rows(r.tables["collectives"])[1])
    fig, ax = plt.subplots(figsize=(10, max(3.2, 0.22 * info_rows + 1.8)), layout="constrained")
    collective_timeline(r, ax)
    fig.savefig(folder / "collective_timeline.png", dpi=110)
    plt.close(fig)
    out.append("collective_timeline.png")
    # 3. two-port imbalance
    ratios = r.meta.get("two_port_ratios")
    if ratios is not None and any(len(v) for v in ratios.values()):
        fig, ax = plt.subplots(figsize=(8.5, 4.2), layout="constrained")
        two_port_imbalance(r, ratios, ax)
        fig.savefig(folder / "two_port_imbalance.png", dpi=110)
        plt.close(fig)
        out.append("two_port_imbalance.png")
    # 4. utilization per tier over time
    tl = r.tables["timeline"]
    cols = [k for k in tl if k.endswith("_util")]
    if len(tl["start_ns"]) and cols:
        fig = tier_util_timeline(r, plt)
        fig.savefig(folder / "tier_util_timeline.png", dpi=110)
        plt.close(fig)
        out.append("tier_util_timeline.png")
    if r.sim == "packet":
        from aifabric.sim.packet.results import write_packet_plots

        out += write_packet_plots(r, folder)
    return out


def util_cdf(r: SimResult, ax) -> list[list[str]]:
    """The CDF of the links' mean utilization, a line per tier; tiers whose CDFs coincide
    (within :data:`COINCIDE`) share one line and one legend entry naming them all.
    Returns the tiers of each line drawn."""
    from aifabric.sim.plotting import legend_outside, series_style, wrapped_title

    links = r.tables["links"]
    grid = np.linspace(0.0, 1.0, 201)
    tiers = sorted(set(links["tier"].tolist()))
    util = {t: np.sort(links["mean_util"][links["tier"] == t]) for t in tiers}
    curve = {t: np.quantile(util[t], grid) for t in tiers if len(util[t])}
    lines: list[list[str]] = []
    for t in curve:  # a dozen tiers at most
        for g in lines:
            if np.abs(curve[g[0]] - curve[t]).max() <= COINCIDE:
                g.append(t)
                break
        else:
            lines.append([t])
    top = 1.0
    for i, g in enumerate(lines):
        u = util[g[0]]
        q = np.linspace(0, 1, min(len(u), 400))  # the CDF at <= 400 quantiles
        label = " = ".join(g) + " (" + " / ".join(f"{len(util[t])}" for t in g) + ")"
        ax.step(np.quantile(u, q), q, where="post", label=label, lw=1.5, **series_style(i))
        top = max(top, float(u[-1]))
    ax.set_xlabel("mean utilization over the run (links that carried traffic)")
    ax.set_ylabel("fraction of links")
    ax.set_xlim(0, top * 1.02)
    ax.grid(alpha=0.3)
    legend_outside(ax, title="tier (links);\n'=': same curve")
    wrapped_title(ax, f"{r.scenario}: link utilization CDF per tier")
    return lines


def two_port_imbalance(r: SimResult, ratios: dict[str, np.ndarray], ax,
                       top: float = 4.0) -> None:
    """Side-by-side bars per direction (never stacked over each other) of how many NICs
    have each busier/other port ratio, on a log scale with every count written on its bar,
    so that a handful of NICs with one port idle is as visible as the thousand balanced."""
    from matplotlib.ticker import FuncFormatter

    from aifabric.sim.plotting import MIN_FONT_PT, legend_outside, series_style, wrapped_title

    edges = np.append(np.linspace(1.0, top, 13), np.inf)  # 0.25 wide; the last: >= top
    centres = np.append((edges[:-2] + edges[1:-1]) / 2, top + 0.25)
    keys = [k for k, v in ratios.items() if len(v)]
    width = 0.25 * 0.8 / max(len(keys), 1)
    hi = 1
    for i, k in enumerate(keys):
        v = np.asarray(ratios[k], dtype=float)
        counts = np.histogram(np.where(np.isnan(v), top, v), bins=edges)[0]
        counts[-1] += int((v >= edges[-2]).sum() - counts[-1])  # inf lands in the last bin
        nz = counts > 0
        x = centres + (i - (len(keys) - 1) / 2) * width
        style = series_style(i)
        ax.bar(x[nz], counts[nz], width=width, color=style["color"], edgecolor="black",
               linewidth=0.4, label=f"{'send' if k == 'up' else 'receive'} ({len(v):,} NICs)")
        for xi, c in zip(x[nz], counts[nz], strict=True):  # a dozen bars at most
            ax.text(xi, c * 1.15, f"{c:,}", ha="center", va="bottom", fontsize=MIN_FONT_PT,
                    rotation=90)
        hi = max(hi, int(counts.max()))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))  # no $math$
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_ylim(0.7, hi * 12)
    ticks = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, top + 0.25]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks[:-1]] + [f">= {top:g}\n(one port idle)"])
    ax.set_xlim(0.85, top + 0.45)
    ax.set_xlabel("busier port / other port (bars 0.25 wide)")
    ax.set_ylabel("NICs (log scale)")
    ax.grid(alpha=0.3, axis="y")
    legend_outside(ax)
    wrapped_title(ax, f"{r.scenario}: two-port imbalance of dual-port NICs")


def binned_mean(start: np.ndarray, end: np.ndarray, value: np.ndarray,
                edges: np.ndarray) -> np.ndarray:
    """The mean over each bin (``edges``) of the sum of boxes ``value[k]`` on
    [``start[k]``, ``end[k]``): exact (the integral of the step function, not samples of
    it, which alias when the steps are shorter than a bin); overlapping boxes add up."""
    pts = np.concatenate([start, end])
    order = np.argsort(pts, kind="stable")
    tp = pts[order]
    slope = np.cumsum(np.concatenate([value, -value])[order])  # slope after each point
    integral = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(tp))])
    at = np.interp(edges, tp, integral)
    return np.diff(at) / np.diff(edges)


def tier_util_timeline(r: SimResult, plt, bins: int = 300):
    """Two panels (links up, links down), a line per tier: each tier's utilization
    averaged over each of ``bins`` time bins. Returns the figure."""
    from aifabric.sim.plotting import legend_outside, series_style, wrapped_title

    tl = r.tables["timeline"]
    cols = [k for k in tl if k.endswith("_util")]
    t0 = np.asarray(tl["start_ns"], dtype=float)
    t1 = np.asarray(tl["end_ns"], dtype=float)
    edges = np.linspace(t0.min(), max(t1.max(), t0.min() + 1.0), bins + 1)
    mid = (edges[:-1] + edges[1:]) / 2
    panels: dict[str, list[str]] = {}
    base: list[str] = []
    for k in cols:
        name = k.removesuffix("_util")
        tier, _, d = name.rpartition("_")
        if d not in ("up", "down"):
            tier, d = name, ""
        panels.setdefault(d, []).append(k)
        if tier not in base:
            base.append(tier)
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.4 * len(panels) + 1.2),
                             sharex=True, squeeze=False, layout="constrained")
    top = 1.0
    for ax, (d, ks) in zip(axes[:, 0], panels.items(), strict=True):
        for k in ks:
            tier = k.removesuffix("_util").removesuffix("_" + d) if d else \
                k.removesuffix("_util")
            y = binned_mean(t0, t1, np.asarray(tl[k], dtype=float), edges)
            top = max(top, float(y.max()))
            ax.plot(mid / 1e6, y, lw=1.2, label=tier, **series_style(base.index(tier)))
        ax.set_ylabel(f"utilization, links {d}" if d else "utilization")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylim(0, top * 1.05)
    axes[-1, 0].set_xlabel(f"time (ms); each point: the mean over 1/{bins} of the run")
    legend_outside(axes[0, 0], title="tier")
    wrapped_title(axes[0, 0], f"{r.scenario}: utilization per tier over time (links that "
                  "carried traffic; top: direction up, bottom: down)")
    return fig


def timeline_rows(c: dict[str, np.ndarray], max_rows: int = TIMELINE_ROWS
                  ) -> tuple[np.ndarray, list[str], str]:
    """The timeline row of each collective, the row labels and what one row holds.

    Up to ``max_rows`` collectives: a row each (``""``). More: the collectives share rows,
    by the finest grouping that fits: job, operation and group size; then job and
    operation; then operation. Rows are ordered by their first start."""
    n = len(c["collective"])
    job = c["job"].astype(str)
    op = c["op"].astype(str)
    gpus = c["gpus"].astype(str)
    sep = np.full(n, " ", dtype=object)
    levels = [("", None),
              ("job, operation and group size",
               job.astype(object) + sep + op + " (" + gpus.astype(object) + " GPUs)"),
              ("job and operation", job.astype(object) + sep + op),
              ("operation", op.astype(object))]
    for what, key in levels:
        if key is None:
            if n > max_rows:
                continue
            key = np.arange(n).astype(str)
        uniq, row = np.unique(np.asarray(key, dtype=str), return_inverse=True)
        if len(uniq) <= max_rows or what == "operation":
            break
    start = np.where(np.isfinite(c["start_ns"]), c["start_ns"], np.inf)
    first = np.full(len(uniq), np.inf)
    np.minimum.at(first, row, start)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq))
    row = rank[row]
    count = np.bincount(row, minlength=len(uniq))
    labels = []
    for k in order:  # one label per row: a few dozen
        j = int(np.flatnonzero(row == rank[k])[0])
        if not what:
            labels.append(str(c["collective"][j])[:48])
        else:
            labels.append(f"{uniq[k].strip()[:40]} x{count[rank[k]]}")
    return row, labels, what


def collective_timeline(r: SimResult, ax) -> dict[str, object]:
    """Draw every collective of ``r`` as a bar from its start to its end on ``ax`` (rows
    from :func:`timeline_rows`; one that never finished runs to the end of the run,
    hatched); returns the rows, what a row holds and the counts drawn."""
    import matplotlib.pyplot as plt

    from aifabric.sim.plotting import MIN_FONT_PT, legend_outside, series_style, wrapped_title

    c = r.tables["collectives"]
    n = len(c["collective"])
    row, labels, what = timeline_rows(c)
    ops = sorted(set(c["op"].tolist()))
    colors = {o: series_style(i)["color"] for i, o in enumerate(ops)}
    st, en = c["start_ns"] / 1e6, c["end_ns"] / 1e6
    started = np.isfinite(st)
    done = started & np.isfinite(en)
    open_ = started & ~done
    end_run = r.makespan_ns / 1e6
    for o in ops:  # one collection per operation and state: a handful
        for sel, hatch in ((done & (c["op"] == o), None), (open_ & (c["op"] == o), "//")):
            idx = np.flatnonzero(sel)
            for y in np.unique(row[idx]):  # rows of this op
                k = idx[row[idx] == y]
                right = en[k] if hatch is None else np.full(len(k), end_run)
                ax.broken_barh(list(zip(st[k], np.maximum(right - st[k], 0.0),
                                        strict=True)),
                               (y - 0.4, 0.8), facecolors=colors[o], hatch=hatch,
                               edgecolor="black" if hatch else "none", linewidth=0.3)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=MIN_FONT_PT)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("time (ms)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[o]) for o in ops]
    names = list(ops)
    if open_.any():
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", hatch="//",
                                     edgecolor="black"))
        names.append("unfinished")
    if handles:
        legend_outside(ax, handles, names)
    title = f"{r.scenario}: all {n:,} collective{'s' if n != 1 else ''} over time"
    if what:
        title += f"\naggregated: a row per {what} (xN: collectives in the row)"
    never = int((~started).sum())
    if never:
        title += f"; {never} never started (no bar)"
    wrapped_title(ax, title)
    return {"rows": len(labels), "aggregated_by": what, "drawn": int(started.sum()),
            "collectives": n}
