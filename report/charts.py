"""The report's charts: matplotlib figures saved as SVG text, for inlining in the HTML.

Figures are made with :class:`matplotlib.figure.Figure` directly (no pyplot, no GUI backend, no
global state); text stays text in the SVG (``svg.fonttype: none``), so the file stays small and the
browser draws it. Text is plain text: names, reasons and annotations come from the input, so
mathtext and TeX are off (``"$^$"`` is three characters, not a formula that fails to parse) and
control characters are escaped (:func:`plain`); matplotlib's warnings (a glyph missing from the
font) and log lines are silenced while a chart is made, so nothing reaches stderr.

At scale the charts aggregate: up to PER_NODE_LIMIT nodes one bar per node,
beyond that one distribution per node pool (a box from the 25th to the 75th percentile, whiskers
at the 5th and 95th, the median and the mean), and the GPU device map as one image per pool.
"""

from __future__ import annotations

import functools
import io
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator, PercentFormatter
from matplotlib.typing import RcKeyType

from kubeplace.kube.text import printable
from kubeplace.models.problem import IntArray
from kubeplace.report.load import ClusterLoad, FloatArray
from kubeplace.solver.run import Event

PER_NODE_LIMIT = 48
"""Up to this many nodes, a bar per node; beyond, a distribution per pool."""
BEFORE, AFTER, BOUND = "#9aa5b1", "#1f6fb2", "#c0392b"
DEVICE_COLOURS = LinearSegmentedColormap.from_list("device", ["#eef1f4", "#f5b041", "#1f3a93"])
"""A free device is pale, a fragment (partly used) amber to blue, a full device dark blue."""
WIDTH = 9.0
RC: dict[RcKeyType, Any] = {"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                            "axes.spines.right": False, "font.family": ["DejaVu Sans", "sans-serif"],
                            "text.usetex": False, "text.parse_math": False}
P = ParamSpec("P")
R = TypeVar("R")


def plain(text: str) -> str:
    """Text from the input as a chart shows it: control characters and bidi overrides escaped
    (``p\\x1b[2J``) as on the terminal, line by line; ``$`` stays itself (mathtext is off in RC)."""
    return "\n".join(printable(line) for line in text.split("\n"))


@contextmanager
def _quiet() -> Iterator[None]:
    """matplotlib's settings (RC), with its warnings and log lines kept off stderr (the one
    global state touched: the ``matplotlib`` logger's level, restored after)."""
    logger = logging.getLogger("matplotlib")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), mpl.rc_context(RC):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _chart(make: Callable[P, R]) -> Callable[P, R]:
    """A public chart function, made in :func:`_quiet`."""

    @functools.wraps(make)
    def quietly(*args: P.args, **kwargs: P.kwargs) -> R:
        with _quiet():
            return make(*args, **kwargs)

    return quietly


def svg(fig: Figure) -> str:
    """The figure as SVG text without its XML prologue (ready to inline in HTML)."""
    for artist in fig.findobj(Text):  # titles, legends, annotations (tick labels are given plain)
        artist.set_text(plain(artist.get_text()))
    out = io.StringIO()
    with mpl.rc_context(RC):
        fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = out.getvalue()
    return text[text.index("<svg"):]


def figure(height: float) -> Figure:
    with mpl.rc_context(RC):
        return Figure(figsize=(WIDTH, height), layout="constrained")


def percent_axis(ax: Axes, top: float) -> None:
    ax.set_xlim(0, max(1.0, top * 1.05))
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.grid(axis="x", color="#dde3e8", linewidth=0.6)
    ax.set_axisbelow(True)


@_chart
def utilisation_chart(load: ClusterLoad, r: int) -> str:
    """Requested / allocatable of resource ``r`` on each node, before and after."""
    if load.capacity.shape[0] <= PER_NODE_LIMIT:
        return svg(_per_node(load, r))
    return svg(_per_pool(load, r))


def _per_node(load: ClusterLoad, r: int) -> Figure:
    has = load.capacity[:, r] > 0
    order = sorted(np.nonzero(has)[0].tolist(), key=lambda i: (load.pools[i], load.nodes[i]))
    before, after = load.utilisation(r, False)[order], load.utilisation(r, True)[order]
    fig = figure(0.8 + 0.24 * len(order))
    with mpl.rc_context(RC):
        ax = fig.add_subplot()
        y = np.arange(len(order))
        ax.barh(y - 0.2, before, height=0.38, color=BEFORE, label="before")
        ax.barh(y + 0.2, after, height=0.38, color=AFTER, label="after")
        ax.set_yticks(y, [plain(f"{load.nodes[i]}  [{load.pools[i]}]") for i in order])
        ax.invert_yaxis()
        percent_axis(ax, float(np.nanmax(np.concatenate([before, after, [0.0]]))))
        ax.set_xlabel(f"{load.resources[r]} requested / allocatable")
        fig.legend(loc="outside upper right", ncols=2, frameon=False)
    return fig


def _per_pool(load: ClusterLoad, r: int) -> Figure:
    pools = [p for p in load.pool_names() if (load.capacity[np.array(load.pools) == p, r] > 0).any()]
    members = np.array(load.pools)
    fig = figure(0.9 + 0.55 * len(pools))
    with mpl.rc_context(RC):
        ax = fig.add_subplot()
        top = 0.0
        for k, pool in enumerate(pools):
            rows = (members == pool) & (load.capacity[:, r] > 0)
            for offset, after, colour in ((-0.18, False, BEFORE), (0.18, True, AFTER)):
                values = load.utilisation(r, after)[rows]
                top = max(top, float(np.percentile(values, 95)))
                _box(ax, values, k + offset, colour)
        ax.set_yticks(np.arange(len(pools)), [f"{plain(p)}\n{(members == p).sum()} nodes" for p in pools])
        ax.set_ylim(len(pools) - 0.5, -0.5)
        percent_axis(ax, top)
        ax.set_xlabel(f"{load.resources[r]} requested / allocatable per node (box: 25-75%, whiskers: 5-95%, "
                      "| median, o mean)")
        ax.plot([], [], color=BEFORE, linewidth=6, label="before")
        ax.plot([], [], color=AFTER, linewidth=6, label="after")
        fig.legend(loc="outside upper right", ncols=2, frameon=False)
    return fig


def _box(ax: Axes, values: FloatArray, y: float, colour: str) -> None:
    parts = ax.boxplot(values, positions=[y], orientation="horizontal", widths=0.3, whis=(5, 95),
                       showfliers=False, showmeans=True, patch_artist=True,
                       meanprops={"marker": "o", "markerfacecolor": "white", "markeredgecolor": "black",
                                  "markersize": 4},
                       medianprops={"color": "black"})
    for box in parts["boxes"]:
        box.set_facecolor(colour)
        box.set_edgecolor(colour)


@_chart
def device_chart(load: ClusterLoad) -> str | None:
    """Each GPU device's used share, before and after, one image row per GPU node and one
    column per device, per pool; None when no node has devices."""
    gpu = ~np.all(np.isnan(load.devices_after), axis=1) if load.devices_after.shape[1] else np.zeros(0, bool)
    if not gpu.any():
        return None
    members = np.array(load.pools)
    pools = [p for p in load.pool_names() if (gpu & (members == p)).any()]
    heights = [min(max(0.18 * int((gpu & (members == p)).sum()), 0.9), 5.0) for p in pools]
    fig = figure(0.9 + sum(heights) + 0.35 * len(pools))
    with mpl.rc_context(RC):
        grid = fig.add_gridspec(len(pools), 2, height_ratios=heights)
        image = None
        for k, pool in enumerate(pools):
            rows = _device_rows(load, np.nonzero(gpu & (members == pool))[0])
            width = int(np.max(np.sum(~np.isnan(load.devices_after[rows]), axis=1)))
            for column, (shares, when) in enumerate(((load.devices_before, "before"), (load.devices_after, "after"))):
                ax = fig.add_subplot(grid[k, column])
                image = ax.imshow(shares[rows, :width], aspect="auto", interpolation="nearest", cmap=DEVICE_COLOURS,
                                  vmin=0, vmax=1)
                ax.set_title(f"{pool}: {when}", fontsize=9, loc="left")
                ax.set_xticks(range(width))
                if len(rows) <= PER_NODE_LIMIT:
                    ax.set_yticks(range(len(rows)), [plain(load.nodes[i]) for i in rows] if column == 0 else [])
                else:
                    ax.set_yticks([])
                    ax.set_ylabel(f"{len(rows)} nodes" if column == 0 else "")
                ax.set_xlabel("device" if k == len(pools) - 1 else "")
        if image is not None:
            bar = fig.colorbar(image, ax=fig.axes, shrink=0.6, label="used share of the device")
            bar.ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    return svg(fig)


def _device_rows(load: ClusterLoad, rows: IntArray) -> IntArray:
    """A pool's GPU nodes by name when each gets a labelled row, else the busiest (after) first."""
    if len(rows) <= PER_NODE_LIMIT:
        return rows[np.argsort([load.nodes[i] for i in rows], kind="stable")]
    used = np.nansum(load.devices_after[rows], axis=1)
    return rows[np.lexsort((np.array([load.nodes[i] for i in rows]), -used))]


@_chart
def reasons_chart(counts: Sequence[tuple[str, int]]) -> str | None:
    """Pods not placed, per reason (a pod counts under every reason its message gives)."""
    if not counts:
        return None
    fig = figure(0.8 + 0.3 * len(counts))
    with mpl.rc_context(RC):
        ax = fig.add_subplot()
        y = np.arange(len(counts))
        ax.barh(y, [c for _, c in counts], color=BOUND)
        ax.set_yticks(y, [_short(plain(reason)) for reason, _ in counts])
        ax.invert_yaxis()
        ax.set_xlabel("pods not placed whose message gives the reason")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for k, (_, c) in enumerate(counts):
            ax.annotate(str(c), (c, k), xytext=(3, 0), textcoords="offset points", va="center")
    return svg(fig)


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


DRAWABLE_WEIGHT = 1 << 1000
"""Placed weights up to here are drawn; past it (priorities in many weight stages, exact in
Python integers) they leave a float's range."""


def _drawable(events: Sequence[Event]) -> bool:
    return all(e.placed_weight < DRAWABLE_WEIGHT and (e.bound or 0) < DRAWABLE_WEIGHT for e in events)


@_chart
def progress_chart(events: Sequence[Event]) -> str | None:
    """The incumbent over time, with the bound where the solver has one: a plan's placed weight
    and objective, a rebalance's objective and moves."""
    if not events:
        return None
    seconds = [e.seconds for e in events]
    fig = figure(4.2)
    with mpl.rc_context(RC):
        top, bottom = fig.subplots(2, 1, sharex=True)
        if events[0].moves is None and not _drawable(events):
            top.step(seconds, [e.pods_placed for e in events], where="post", color=AFTER, marker="o",
                     markersize=3, label="incumbent: pods placed (the placed weight is past what a chart draws)")
            top.set_ylabel("pods placed")
        elif events[0].moves is None:
            top.step(seconds, [e.placed_weight for e in events], where="post", color=AFTER, marker="o",
                     markersize=3, label="incumbent: placed weight")
            bounded = [(e.seconds, e.bound) for e in events if e.bound is not None]
            if bounded:
                top.step(*zip(*bounded, strict=True), where="post", color=BOUND, linestyle="--",
                         label="bound on the placed weight")
            top.set_ylabel("placed weight (higher is better)")
        else:
            top.step(seconds, [e.moves or 0 for e in events], where="post", color=AFTER, marker="o", markersize=3,
                     label="pods moved")
            top.set_ylabel("pods moved")
        top.legend(loc="lower right", frameon=False)
        bottom.step(seconds, [e.objective for e in events], where="post", color="#117a65", marker="o", markersize=3,
                    label="objective (lower is better)")
        for k, e in enumerate(events):  # where the step changes (and the last), not every improvement
            if k == 0 or e.step != events[k - 1].step or k == len(events) - 1:
                bottom.annotate(e.step, (e.seconds, e.objective), xytext=(2, 4), textcoords="offset points",
                                fontsize=7)
        for ax in (top, bottom):
            ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        bottom.set_ylabel("objective")
        bottom.set_xlabel("seconds since the solve started")
        bottom.set_xlim(left=0)
        bottom.legend(loc="upper right", frameon=False)
    return svg(fig)
