"""Every plot aifabric writes, rendered by the command that writes it and at the size it
is saved, is checked as a reader would look at it: every piece of text (title, axis
labels, tick labels, legend, annotations) lies inside the figure, no two texts of an
axes overlap, no text is smaller than the minimum, a legend never covers data, bars of
different series never overlap, and every series has its own style. Writing the same
plots twice gives the same bytes."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests._require import require_importorskip

plt = require_importorskip("matplotlib.pyplot", "matplotlib")
from matplotlib.colors import to_rgba, to_rgba_array  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from aifabric.sim.plotting import MIN_FONT_PT  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCN = ROOT / "examples" / "scenarios"


def _inside(bb, outer, tol: float = 1.0) -> bool:
    return (bb.x0 >= outer.x0 - tol and bb.y0 >= outer.y0 - tol and bb.x1 <= outer.x1 + tol
            and bb.y1 <= outer.y1 + tol)


def _overlap(a, b, tol: float = 1.0) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tol) and (min(a.y1, b.y1) - max(a.y0, b.y0) > tol)


def _texts(ax) -> list:
    out = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label,
           *ax.texts]
    for axis in (ax.xaxis, ax.yaxis):  # the tick labels drawn: those inside the view
        lo, hi = sorted(axis.get_view_interval())
        for minor in (False, True):
            locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
            labels = axis.get_ticklabels(minor=minor)
            out += [t for loc, t in zip(locs, labels, strict=False)
                    if lo - 1e-9 * abs(hi - lo) <= loc <= hi + 1e-9 * abs(hi - lo)]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def _data_boxes(ax, r) -> list:
    """Display-space boxes of what an axes shows: each point of a line, each bar, each
    broken-bar rectangle."""
    boxes = []
    for ln in ax.lines:
        xy = ln.get_xydata()
        if len(xy):
            pts = ln.get_transform().transform(np.asarray(xy, dtype=float))
            boxes += [("point", p) for p in pts if np.isfinite(p).all()]
    for p in ax.patches:
        if isinstance(p, Rectangle):
            boxes.append(("box", p.get_window_extent(r)))
    for col in ax.collections:
        tr = col.get_transform()
        boxes += [("box", path.get_extents(tr)) for path in col.get_paths()]
    return boxes


def _colour(h, *getters: str):
    """The first visible colour a legend handle shows (face, line, edge)."""
    for g in getters:
        if not hasattr(h, g):
            continue
        rgba = to_rgba_array(getattr(h, g)())
        rgba = rgba[rgba[:, 3] > 0]
        if len(rgba):
            return tuple(np.round(rgba[0], 4))
    return None


def _style(h) -> tuple:
    """What tells a series apart: colour, line style, marker, hatch."""
    if isinstance(h, Line2D):
        return ("line", to_rgba(h.get_color()), h.get_linestyle(), h.get_marker())
    return (type(h).__name__, _colour(h, "get_facecolor", "get_color", "get_edgecolor"),
            getattr(h, "get_hatch", lambda: None)())


def problems(fig, name: str) -> list[str]:
    """What a reader would misread in ``fig``; empty when nothing."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    fb = fig.bbox
    out = []
    for k, ax in enumerate(fig.axes):
        where = f"{name} axes {k}"
        texts = _texts(ax)
        for t in texts:
            bb = t.get_window_extent(r)
            if not _inside(bb, fb):
                out.append(f"{where}: text {t.get_text()!r} is cut off by the figure's edge")
            if t.get_fontsize() < MIN_FONT_PT - 1e-9:
                out.append(f"{where}: text {t.get_text()!r} is {t.get_fontsize():g} pt "
                           f"(< {MIN_FONT_PT:g})")
        for a, b in itertools.combinations(texts, 2):
            if _overlap(a.get_window_extent(r), b.get_window_extent(r)):
                out.append(f"{where}: texts {a.get_text()!r} and {b.get_text()!r} overlap")
        leg = ax.get_legend()
        if leg is not None:
            lb = leg.get_window_extent(r)
            if not _inside(lb, fb):
                out.append(f"{where}: the legend is cut off by the figure's edge")
            for t in leg.get_texts():
                if t.get_fontsize() < MIN_FONT_PT - 1e-9:
                    out.append(f"{where}: legend text {t.get_text()!r} is "
                               f"{t.get_fontsize():g} pt")
            for kind, d in _data_boxes(ax, r):
                hit = (lb.x0 < d[0] < lb.x1 and lb.y0 < d[1] < lb.y1) if kind == "point" \
                    else _overlap(lb, d)
                if hit:
                    out.append(f"{where}: the legend covers data")
                    break
            styles = [_style(h) for h in leg.legend_handles]
            if len(set(styles)) != len(styles):
                out.append(f"{where}: two legend entries look alike: {styles}")
        labelled = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
        styles = [_style(ln) for ln in labelled]
        if len(set(styles)) != len(styles):
            out.append(f"{where}: two series share colour, line style and marker")
        boxes = [(p.get_label(), p.get_window_extent(r)) for p in ax.patches
                 if isinstance(p, Rectangle)]
        for (la, a), (lb_, b) in itertools.combinations(boxes, 2):
            if _overlap(a, b):
                out.append(f"{where}: two bars overlap ({la!r}, {lb_!r})")
                break
    return out


@pytest.fixture
def saved(monkeypatch):
    """Every figure saved while the test runs, checked as it is saved: {file name:
    problems}."""
    seen: dict[str, list[str]] = {}
    real = Figure.savefig

    def check(self, fname, *a, **kw):
        name = Path(str(fname)).name
        seen[name] = problems(self, name)
        return real(self, fname, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", check)
    return seen


def _assert_readable(seen: dict[str, list[str]], expect: set[str]) -> None:
    assert expect <= set(seen), f"plots not written: {expect - set(seen)}"
    bad = {k: v for k, v in seen.items() if v}
    assert not bad, "\n".join(p for v in bad.values() for p in v)


def test_flow_plots_are_readable(cli, tmp_path, saved):
    """The single-plane 4-job run: every tier up and down, 53+ NICs with one port idle
    beside a thousand balanced ones, jobs whose bars a corner legend covered."""
    r = cli("simulate", SCN / "hpn-4jobs-single-plane.yaml", "--out", tmp_path / "a")
    assert r.code == 0, r.err
    _assert_readable(saved, {"link_util_cdf.png", "collective_timeline.png",
                             "two_port_imbalance.png", "tier_util_timeline.png"})


def test_aggregated_timeline_and_analytic_plots_are_readable(cli, tmp_path, saved):
    r = cli("simulate", SCN / "gpt-hpn.yaml", "--sim", "analytic", "--out", tmp_path / "a")
    assert r.code == 0, r.err
    _assert_readable(saved, {"link_util_cdf.png", "collective_timeline.png",
                             "tier_util_timeline.png"})


def test_packet_plots_are_readable(cli, tmp_path, saved):
    r = cli("simulate", SCN / "permutation-packet.yaml", "--out", tmp_path / "a")
    assert r.code == 0, r.err
    _assert_readable(saved, {"packet_queues.png", "packet_rates.png"})


def test_goodput_and_route_plots_are_readable(cli, tmp_path, saved):
    r = cli("goodput", SCN / "goodput-hpn.yaml", "--trials", "200", "--out", tmp_path / "g")
    assert r.code == 0, r.err
    r = cli("route", SCN / "hpn-polarization.yaml", "--out", tmp_path / "r")
    assert r.code == 0, r.err
    _assert_readable(saved, {"sweep.png", "time_lost.png", "ettr_hist.png"})
    assert any(k.endswith(".png") for k in saved if k not in
               {"sweep.png", "time_lost.png", "ettr_hist.png"}), "route wrote no plot"


def test_sweep_report_plots_are_readable(cli, tmp_path, saved):
    require_importorskip("duckdb")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "styles", "scenario": str(ROOT / "tests" / "sweep" / "small.yaml"),
        "grid": {"collectives.0.size_bytes": ["1MiB", "4MiB"],
                 "collectives.0.seed": list(range(12))},
        "figures": ["makespan_ns"]}), encoding="utf-8")
    r = cli("sweep", "run", sweep, "--store", tmp_path / "st", "--jobs", "1")
    assert r.code == 0, r.err
    r = cli("sweep", "report", "--store", tmp_path / "st", "--out", tmp_path / "rep")
    assert r.code == 0, r.err
    pngs = [k for k in saved if k.endswith(".png")]
    assert pngs
    _assert_readable(saved, set(pngs))


def test_coinciding_cdfs_share_one_legend_entry(cli, tmp_path):
    """A tier pair whose CDFs coincide is one line naming both; any two lines drawn
    differ visibly; every tier is in the legend exactly once."""
    from aifabric.cli.simulate import load_and_run
    from aifabric.report.plots import COINCIDE, util_cdf

    res = load_and_run(SCN / "hpn-dual-plane.yaml", "flow")
    fig, ax = plt.subplots()
    groups = util_cdf(res, ax)
    plt.close(fig)
    tiers = sorted(set(res.tables["links"]["tier"].tolist()))
    assert sorted(t for g in groups for t in g) == tiers
    assert any(len(g) > 1 for g in groups)  # dual-plane: up and down carry the same load
    grid = np.linspace(0, 1, 201)
    util = res.tables["links"]["mean_util"]
    curve = [np.quantile(util[res.tables["links"]["tier"] == g[0]], grid) for g in groups]
    for a, b in itertools.combinations(curve, 2):
        assert np.abs(a - b).max() > COINCIDE
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for g in groups:
        assert any(all(t in lab for t in g) for lab in labels)


def test_binned_mean_is_the_exact_integral():
    from aifabric.report.plots import binned_mean

    start = np.array([0.0, 1.0, 2.5])
    end = np.array([2.0, 3.0, 2.75])
    val = np.array([0.5, 0.25, 1.0])
    edges = np.array([0.0, 1.0, 2.0, 4.0])
    got = binned_mean(start, end, val, edges)
    # bin [0,1): 0.5; [1,2): 0.5 + 0.25; [2,4): (0.25 * 1 + 1.0 * 0.25) / 2
    assert np.allclose(got, [0.5, 0.75, 0.25])


def test_plots_are_deterministic(tmp_path):
    from aifabric.cli.simulate import load_and_run
    from aifabric.report.plots import write_plots

    res = load_and_run(SCN / "hpn-4jobs-single-plane.yaml", "flow")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    names = write_plots(res, a)
    assert names == write_plots(res, b)
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n


def test_series_styles_are_distinct_for_forty_series():
    from aifabric.sim.plotting import series_style

    keys = {(to_rgba(s["color"]), s["linestyle"], s.get("marker"))
            for s in map(series_style, range(60))}
    assert len(keys) == 60
