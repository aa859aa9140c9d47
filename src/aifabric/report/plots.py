"""PNG plots of one result: link utilization CDF per tier, the collectives' timeline,
the two-port imbalance histogram and the utilization of each tier over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aifabric.sim.results import SimResult

__all__ = ["write_plots"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    # 2. timeline of collectives (the first 60 by start)
    c = r.tables["collectives"]
    order = np.argsort(c["start_ns"], kind="stable")[:40]
    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.2 * len(order) + 1.2)))
    ops = sorted(set(c["op"].tolist()))
    colors = {op: plt.cm.tab10(i % 10) for i, op in enumerate(ops)}
    for y, i in enumerate(order):
        if not np.isfinite(c["end_ns"][i] - c["start_ns"][i]):
            continue  # never finished (a deadlock, a run cut at until_ms): no bar
        ax.barh(y, (c["end_ns"][i] - c["start_ns"][i]) / 1e6, left=c["start_ns"][i] / 1e6,
                color=colors[c["op"][i]], height=0.8)
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([str(c["collective"][i])[:40] for i in order], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[o]) for o in ops]
    ax.legend(handles, ops, fontsize=7)
    ax.set_title(f"{r.scenario}: collectives over time"
                 + (f" (first 40 of {len(c['start_ns'])})" if len(c["start_ns"]) > 40 else ""))
    fig.subplots_adjust(left=0.38, right=0.97, top=0.9, bottom=0.13)
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



