"""What every plot aifabric writes shares: a headless pyplot, a distinct style per series,
legends outside the data, titles that fit the figure and a legible minimum font size.

A reader must never take one series for another: up to 10 series differ by colour
(tab10); beyond that the colours repeat with another line style, so every (colour, line
style) pair is unique for up to 40 series. Legends sit right of the axes, where they
cannot cover data. Text is at least :data:`MIN_FONT_PT` points.
"""

from __future__ import annotations

import textwrap
from typing import Any

__all__ = ["LINESTYLES", "MIN_FONT_PT", "legend_outside", "pyplot", "series_style",
           "wrapped_title"]

#: the smallest font any plot uses (points; 8 pt is 12 px at the 110 dpi plots are saved at)
MIN_FONT_PT = 8.0

#: line styles that tell apart series sharing a colour (10 colours each)
LINESTYLES = ("-", "--", ":", "-.")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, with $math$ parsing off (user text)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # user text: no $math$
    import matplotlib.pyplot as plt

    return plt


def series_style(i: int) -> dict[str, Any]:
    """The style of series ``i``: a tab10 colour; a new line style every 10 series (and a
    marker past 40), so no two series of a plot look alike."""
    from matplotlib import colormaps

    style: dict[str, Any] = {"color": colormaps["tab10"](i % 10),
                             "linestyle": LINESTYLES[(i // 10) % len(LINESTYLES)]}
    if i >= 10 * len(LINESTYLES):
        style["marker"] = "os^vD<>"[(i // 40) % 7]
        style["markevery"] = 0.1
        style["markersize"] = 3
    return style


def legend_outside(ax: Any, *args: Any, title: str | None = None, ncol: int = 1,
                   **kw: Any) -> Any:
    """The legend of ``ax`` right of its axes (never over the data), at a legible size."""
    return ax.legend(*args, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                     fontsize=MIN_FONT_PT, title=title, title_fontsize=MIN_FONT_PT,
                     ncol=ncol, **kw)


def wrapped_title(ax: Any, text: str, fontsize: float = 10.0) -> None:
    """Set the title of ``ax``, each line wrapped to the width of its figure so that a
    long scenario name is never clipped."""
    width_pt = ax.figure.get_figwidth() * 72 * 0.95
    chars = max(20, int(width_pt / (0.6 * fontsize)))
    lines = [w for line in text.split("\n") for w in (textwrap.wrap(line, chars) or [""])]
    ax.set_title("\n".join(lines), fontsize=fontsize)
