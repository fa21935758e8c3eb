"""Figure helpers shared by ``reports.plots`` and ``reports.sections.verdict.plots``.

Matplotlib's object API with an explicit Agg canvas on every figure (no pyplot, no global backend switch, nothing left
open), so plots run headless and inside other programs alike; hollow markers and dotted lines for mechanisms without a
guarantee; the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), which readers with any common
colour-vision deficiency tell apart; labels written beside the lines instead of a legend (``direct_labels``); PNGs saved
with a 256-colour palette (a plot has few colours: a third of the bytes, no visible change).
"""

from __future__ import annotations

import io
import math
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from bench.core.io import atomic_write_bytes
from bench.results import RunResult
from reports.common import has_guarantee


def slug(name: Any) -> str:
    """A file-name-safe stem part for a dataset, mechanism or attack name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip("-") or "unnamed"


def figure(n_panels: int, *, ncols: int = 3, size: tuple[float, float] = (5.2, 3.8)) -> tuple[Figure, list[Axes]]:
    """A figure with ``n_panels`` axes on a grid of at most ``ncols`` columns (spare cells hidden)."""
    ncols = max(1, min(ncols, n_panels))
    nrows = math.ceil(n_panels / ncols)
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def image_grid(nrows: int, ncols: int, *, cell: tuple[float, float], left: float, top: float = 0.6,
               bottom: float = 0.1) -> tuple[Figure, list[list[Axes]]]:
    """A figure of ``nrows`` × ``ncols`` image cells, each ``cell`` inches (width, height).

    With ``left`` inches for the row labels and ``top`` / ``bottom`` inches of margin; ticks off. Fixed margins instead
    of matplotlib's constrained layout, which measured every cell's tick labels twice per save: the report's image grids
    (hundreds of cells in a smoke run) took most of the time ``make_plots`` spent.
    """
    width, height = cell[0] * ncols + left + 0.15, cell[1] * nrows + top + bottom
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=left / width, right=1 - 0.15 / width, top=1 - top / height, bottom=bottom / height,
                        wspace=0.08, hspace=0.3)
    axes = fig.subplots(nrows, ncols, squeeze=False, subplot_kw={"xticks": [], "yticks": []})
    return fig, [list(row) for row in axes]


DPI = 110
# Okabe & Ito (2008): blue, vermillion, bluish green, orange, reddish purple, sky blue, yellow, black; yellow last
# but one (weak on white), black last (the frontier and the diagonals are black).
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


def save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as a palette PNG to ``path`` atomically.

    Write ``fig`` as a PNG to ``path`` atomically (``bench.core.io.atomic_write_bytes``: its temporary file, its
    mode), reduced to a 256-colour palette (Pillow's median cut, no dithering). Raises OSError (unwritable folder,
    full disk; the previous file stays).
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    buf.seek(0)
    with Image.open(buf) as image:
        small = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return atomic_write_bytes(path, out.getvalue())


def colors(runs: list[RunResult]) -> dict[str, str]:
    """One Okabe–Ito colour per mechanism (``OKABE_ITO``), in sorted order of the names."""
    mechs = sorted({r.mechanism for r in runs})
    return {m: OKABE_ITO[i % len(OKABE_ITO)] for i, m in enumerate(mechs)}


def direct_labels(ax: Axes, labels: list[tuple[float, str, str]], *, fontsize: float = 7) -> None:
    """Write each ``(y, text, colour)`` in the right margin of ``ax`` at height ``y`` (data units).

    Nudged apart so that no two overlap: the labels a legend would hold, beside the lines they name (the figure's
    constrained layout makes room for them).
    """
    if not labels:
        return
    lo, hi = ax.get_ylim()
    log = ax.get_yscale() == "log"

    def frac(y: float) -> float:  # the label's height as a fraction of the axes
        if log:
            return (math.log10(max(y, 1e-300)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        return (y - lo) / (hi - lo) if hi != lo else 0.5

    gap = 0.055 * fontsize / 7 * max(1, sum(text.count("\n") + 1 for _, text, _ in labels) / len(labels))
    placed: list[float] = []
    for y, _, _ in sorted(labels, key=lambda item: frac(item[0])):
        f = min(max(frac(y), 0.0), 1.0)
        f = max(f, placed[-1] + gap) if placed else f
        placed.append(f)
    shift = max(0.0, placed[-1] - 1.0)  # keep the top one inside the axes' height
    for f, (_, text, color) in zip(placed, sorted(labels, key=lambda item: frac(item[0])), strict=True):
        ax.annotate(text, (1.0, f - shift), xycoords="axes fraction", xytext=(4, 0), textcoords="offset points",
                    va="center", ha="left", fontsize=fontsize, color=color, annotation_clip=False)


def by_dataset(runs: list[RunResult]) -> dict[str, list[RunResult]]:
    """``runs`` grouped by dataset, in document order."""
    groups: dict[str, list[RunResult]] = defaultdict(list)
    for r in runs:
        groups[r.dataset].append(r)
    return groups


def epsilon_x(r: RunResult) -> tuple[float | None, bool]:
    """(x position, has guarantee): the achieved ε, else the target or claimed ε (no guarantee)."""
    p, guaranteed = r.privacy, has_guarantee(r.privacy)
    if p is not None and guaranteed:
        x = p.epsilon
    else:
        x = r.target_epsilon or (p.claimed_epsilon if p else None)
    return (float(x), guaranteed) if x is not None and 0 < float(x) < math.inf else (None, guaranteed)


def _panel(ax: Axes, rs: list[RunResult], y_of: Callable[[RunResult], float | None], palette: dict[str, str]
           ) -> list[tuple[float, str, str]]:
    """One dataset's lines: one per mechanism (mean over seeds at each ε), a flat line for a mechanism without ε.

    And a dashed flat line at each model trained with privacy off (the baseline, each mechanism's ε = ∞ point, in the
    mechanism's colour). Returns the direct labels of the lines (``direct_labels``).
    """
    points: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    flat: dict[str, list[float]] = defaultdict(list)
    off: dict[str, list[float]] = defaultdict(list)
    guaranteed: dict[str, bool] = {}
    for r in rs:
        y = y_of(r)
        if y is None:
            continue
        if r.privacy is not None and r.privacy.off:
            off[r.mechanism].append(y)
            continue
        x, guaranteed[r.mechanism] = epsilon_x(r)
        (points[r.mechanism][x] if x is not None else flat[r.mechanism]).append(y)
    labels = []
    for mech, ys in sorted(off.items()):
        ax.axhline(float(np.mean(ys)), color=palette[mech], ls="--", lw=1.1)
        labels.append((float(np.mean(ys)), "baseline (privacy off)" if mech == "baseline" else f"{mech} ε = ∞",
                       palette[mech]))
    for mech, by_x in sorted(points.items()):
        xs = sorted(by_x)
        ys = [float(np.mean(by_x[x])) for x in xs]
        face = palette[mech] if guaranteed[mech] else "none"
        ax.plot(xs, ys, marker="o", color=palette[mech], mfc=face, ls="-" if guaranteed[mech] else ":")
        labels.append((ys[-1], mech if guaranteed[mech] else f"{mech} (no guarantee)", palette[mech]))
    for mech, ys in sorted(flat.items()):
        if mech not in points:
            ax.axhline(float(np.mean(ys)), color=palette[mech], ls="--")
            labels.append((float(np.mean(ys)), f"{mech} (no ε)", palette[mech]))
    return labels


def versus_epsilon(runs: list[RunResult], y_of: Callable[[RunResult], float | None], ylabel: str,
                   chance: float | None) -> Figure | None:
    """One panel per dataset, one line per mechanism (mean over seeds) of ``y_of`` against ε.

    Each labelled at its right end (``direct_labels``); ``None`` when there are no points.
    """

    def has_point(r: RunResult) -> bool:
        return epsilon_x(r)[0] is not None and y_of(r) is not None

    datasets = {d: rs for d, rs in by_dataset(runs).items() if any(has_point(r) for r in rs)}
    if not datasets:
        return None
    palette = colors(runs)
    fig, axes = figure(len(datasets), size=(5.0, 3.3))
    for ax, (dataset, rs) in zip(axes, datasets.items(), strict=True):
        labels = _panel(ax, rs, y_of, palette)
        if chance is not None:
            ax.axhline(chance, color="0.45", ls=":", lw=1)
            labels.append((chance, "chance", "0.35"))
        ax.set(xscale="log", xlabel="ε (unitless, log scale; achieved, hollow: target or claimed, no guarantee)",
               ylabel=ylabel, title=dataset)
        ax.xaxis.label.set_fontsize(8)
        ax.grid(True, which="both", alpha=0.3)
        direct_labels(ax, labels)
    return fig
