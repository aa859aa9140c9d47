"""PNG plots of one result: link utilization CDF per tier, the collectives' timeline,
the two-port imbalance histogram and the utilization of each tier over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aifabric.sim.results import SimResult

__all__ = ["TIMELINE_ROWS", "collective_timeline", "timeline_rows",
           "write_packet_comparison", "write_plots"]

#: rows of the collective timeline; more collectives than this share rows (aggregated)
TIMELINE_ROWS = 40


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # user text: no $math$
    import matplotlib.pyplot as plt

    return plt


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
    links = r.tables["links"]
    # 1. utilization CDF per tier
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for tier in sorted(set(links["tier"].tolist())):
        u = np.sort(links["mean_util"][links["tier"] == tier])
        q = np.linspace(0, 1, min(len(u), 400))  # the CDF at <= 400 quantiles
        ax.step(np.quantile(u, q), q, where="post", label=f"{tier} ({len(u)})")
    ax.set_xlabel("mean utilization over the run (links that carried traffic)")
    ax.set_ylabel("fraction of links")
    ax.set_xlim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"{r.scenario}: link utilization CDF per tier")
    fig.subplots_adjust(left=0.1, right=0.97, top=0.9, bottom=0.13)
    fig.savefig(folder / "link_util_cdf.png", dpi=110)
    plt.close(fig)
    out.append("link_util_cdf.png")
    # 2. timeline of every collective (aggregated into rows when there are many)
    fig, ax = plt.subplots(figsize=(9, 3.0))
    info = collective_timeline(r, ax)
    fig.set_size_inches(9, max(3.2, 0.2 * info["rows"] + 1.6))
    fig.tight_layout()
    fig.savefig(folder / "collective_timeline.png", dpi=110)
    plt.close(fig)
    out.append("collective_timeline.png")
    # 3. two-port imbalance
    ratios = r.meta.get("two_port_ratios")
    if ratios is not None and any(len(v) for v in ratios.values()):
        fig, ax = plt.subplots(figsize=(7, 4))
        top = 4.0
        bins = np.linspace(1, top + 0.25, 22)
        for k, v in ratios.items():
            if len(v):
                ax.hist(np.minimum(v, top + 0.1), bins=bins, alpha=0.6,
                        label=f"{'send' if k == 'up' else 'receive'} ({len(v)} NICs)")
        ax.set_xlabel(f"busier port / other port (>= {top:g}: one port idle or worse)")
        ax.set_ylabel("NICs")
        ax.legend(fontsize=8)
        ax.set_title(f"{r.scenario}: two-port imbalance of dual-port NICs")
        fig.subplots_adjust(left=0.1, right=0.97, top=0.9, bottom=0.13)
        fig.savefig(folder / "two_port_imbalance.png", dpi=110)
        plt.close(fig)
        out.append("two_port_imbalance.png")
    # 4. utilization per tier over time
    tl = r.tables["timeline"]
    cols = [k for k in tl if k.endswith("_util")]
    if len(tl["start_ns"]) and cols:
        fig, ax = plt.subplots(figsize=(8, 4))
        t0, t1 = tl["start_ns"], tl["end_ns"]
        mid = np.linspace(t0[0], t1[-1], 601)  # sample the step function at 600 times
        mid = (mid[:-1] + mid[1:]) / 2
        at = np.clip(np.searchsorted(t0, mid, side="right") - 1, 0, len(t0) - 1)
        on = mid < t1[at]
        for k in cols:
            ax.plot(mid / 1e6, np.where(on, tl[k][at], 0.0), label=k.removesuffix("_util"),
                    lw=1)
        ax.set_xlabel("time (ms)")
        ax.set_ylabel("utilization (links that carried traffic)")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7, ncol=2)
        ax.set_title(f"{r.scenario}: utilization per tier over time")
        fig.subplots_adjust(left=0.1, right=0.97, top=0.9, bottom=0.13)
        fig.savefig(folder / "tier_util_timeline.png", dpi=110)
        plt.close(fig)
        out.append("tier_util_timeline.png")
    if r.sim == "packet":
        from aifabric.sim.packet.results import write_packet_plots

        out += write_packet_plots(r, folder)
    return out


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

    c = r.tables["collectives"]
    n = len(c["collective"])
    row, labels, what = timeline_rows(c)
    ops = sorted(set(c["op"].tolist()))
    colors = {o: plt.cm.tab10(i % 10) for i, o in enumerate(ops)}
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
    ax.set_yticklabels(labels, fontsize=6)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("time (ms)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[o]) for o in ops]
    names = list(ops)
    if open_.any():
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", hatch="//",
                                     edgecolor="black"))
        names.append("unfinished")
    if handles:
        ax.legend(handles, names, fontsize=7)
    title = f"{r.scenario}: all {n:,} collective{'s' if n != 1 else ''} over time"
    if what:
        title += f"\naggregated: a row per {what} (xN: collectives in the row)"
    never = int((~started).sum())
    if never:
        title += f"; {never} never started (no bar)"
    ax.set_title(title, fontsize=9)
    return {"rows": len(labels), "aggregated_by": what, "drawn": int(started.sum()),
            "collectives": n}
