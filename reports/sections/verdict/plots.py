"""The verdict's Pareto frontier and the training throughput figure, drawn by the Verdict and Throughput sections.

``reports.sections.verdict.section``, ``reports.sections.throughput.section``; the audits' tightness plot is
``reports.sections.audit.plots``. Same conventions as ``reports.plots`` (``reports.figures``: object API, explicit Agg
canvas; hollow markers and dotted lines for mechanisms without a guarantee).
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.results import RunResult
from reports.common import has_guarantee
from reports.figures import by_dataset, colors, epsilon_x, figure
from reports.sections.verdict.table import LeakageAxis, pareto_optimal


def _filled(r: RunResult) -> bool:
    """Whether a model's marker is filled: a guarantee, or privacy off (the baseline, an ε = ∞ point)."""
    return has_guarantee(r.privacy) or r.target_epsilon is None or r.off_point


def _point_label(r: RunResult) -> str:
    if r.off_point:
        return "ε = ∞"
    target = r.target_epsilon
    if target is None:
        return ""
    return f"{target:g}" if has_guarantee(r.privacy) else f"claimed {target:g}"


def pareto_figure(rs: list[RunResult], axis: LeakageAxis) -> Figure | None:
    """Test accuracy against the strongest attack's leakage for every model of one dataset.

    Test accuracy (x, %) against the strongest attack's leakage (y: TPR at ``axis.level`` FPR in % with its
    95 % Clopper-Pearson interval, or AUC) for every model of one dataset, one Okabe–Ito colour per mechanism
    (hollow: no guarantee), the Pareto frontier (no other model has higher accuracy and lower leakage) joined by a
    line; labelled directly, without a legend: each mechanism's name once, the target ε of the models on the
    frontier. A degenerate model (``bench.results.Degenerate``: it learned nothing) is a grey cross, labelled, and
    never on the frontier: its low leakage is not evidence of privacy.
    """
    points = []
    for r in rs:
        leak = axis.value(r)
        if r.utility is not None and leak is not None:
            points.append((r, 100.0 * r.utility.test_accuracy, leak))
    if not points:
        return None
    fig, (ax,) = figure(1, size=(4.6, 3.5))
    front = pareto_optimal([None if r.degenerate else (x, leak[0]) for r, x, leak in points])
    _draw_points(ax, points, front, colors(rs))
    xy = sorted((x, leak[0]) for (_, x, leak), on in zip(points, front, strict=True) if on)
    ax.plot([p[0] for p in xy], [p[1] for p in xy], color="k", lw=1.2, alpha=0.7)
    chance = 0.5 if axis.level is None else 100.0 * axis.level
    ax.axhline(chance, color="0.45", ls=":", lw=1)
    ax.annotate("chance", (0.0, chance), xycoords=("axes fraction", "data"), xytext=(3, 2),
                textcoords="offset points", fontsize=6.5, color="0.35")
    if xy:
        ax.annotate("Pareto frontier", xy[0], xytext=(4, -9), textcoords="offset points", fontsize=6.5, color="k")
    ax.set(xlabel="test accuracy (%)", ylabel=axis.label,
           title=f"{rs[0].dataset}: privacy vs utility (better: right and low)")
    ax.title.set_fontsize(9)
    ax.yaxis.label.set_fontsize(7.5)
    if axis.reason:
        ax.text(0.99, 0.01, axis.reason, transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5, color="0.35")
    ax.grid(True, alpha=0.3)
    return fig


def _draw_points(ax: Axes, points: list[tuple[RunResult, float, tuple[float, float | None, float | None, str]]],
                 front: list[bool | None], palette: dict[str, str]) -> None:
    """Each model's point with its interval, and its direct label.

    The mechanism's name at its point of the smallest target ε (the points spread out there), the target ε on the
    frontier, a degenerate model in grey.
    """
    xs = [x for _, x, _ in points]
    middle = (min(xs) + max(xs)) / 2
    named: dict[str, int] = {}
    for r, _, _ in sorted(points, key=lambda p: (p[0].off_point, p[0].target_epsilon or 0.0)):
        if r.degenerate is None:
            named.setdefault(r.mechanism, id(r))
    for (r, x, (y, lo, hi, _)), on in zip(points, front, strict=True):
        yerr = None if lo is None or hi is None else [[y - lo], [hi - y]]
        right = x > middle  # labels point inwards, never off the axes
        place = {"xytext": (-4 if right else 4, 3), "textcoords": "offset points", "ha": "right" if right else "left"}
        if r.degenerate is not None:  # learned nothing: drawn grey, never on the frontier
            ax.errorbar(x, y, yerr=yerr, fmt="x", ms=6, color="0.55", capsize=2, elinewidth=0.8)
            ax.annotate(f"{r.mechanism} {_point_label(r)} (degenerate)".strip(), (x, y), fontsize=6,
                        color="0.4", **{**place, "xytext": (place["xytext"][0], -9)})
            continue
        color = palette[r.mechanism]
        ax.errorbar(x, y, yerr=yerr, fmt="o", ms=4.5, color=color, capsize=2, elinewidth=0.8,
                    mfc=color if _filled(r) else "white")
        first = named.get(r.mechanism) == id(r)
        text = _point_label(r).replace("ε = ∞", "∞") if on or first else ""
        if first:
            text = f"{r.mechanism}{'' if _filled(r) else ' (no guarantee)'} {text}".strip()
        if text:
            ax.annotate(text, (x, y), fontsize=7 if first else 6.5, color=color,
                        fontweight="bold" if first else "normal", **place)


def throughput_figure(runs: list[RunResult]) -> Figure | None:
    """Training samples per second of every model (log scale), one horizontal bar per mechanism and target ε.

    One panel per dataset; hatched bars are cached models (their original training's timing).
    """
    timed = [r for r in runs if r.timings.samples_per_s]
    if not timed:
        return None
    groups = by_dataset(timed)
    palette = colors(timed)
    height = 0.17 * max(len(rs) for rs in groups.values()) + 1.1
    fig, axes = figure(len(groups), ncols=2, size=(6.0, height))
    for ax, (dataset, rs) in zip(axes, groups.items(), strict=True):
        rs = sorted(rs, key=lambda r: (r.mechanism, epsilon_x(r)[0] or 0.0, r.seed))
        values = [float(r.timings.samples_per_s or 0.0) for r in rs]
        bars = ax.barh(range(len(rs)), values, color=[palette[r.mechanism] for r in rs], hatch=None,
                       edgecolor="white")
        for bar, r, v in zip(bars, rs, values, strict=True):
            if r.timings.cached:
                bar.set_hatch("//")
            ax.annotate(f"{v:,.0f}", (v, bar.get_y() + bar.get_height() / 2), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=6)
        ax.set_yticks(range(len(rs)), [f"{r.mechanism} {_point_label(r)}".strip() for r in rs], fontsize=6.5)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlim(right=max(values) * 4)
        ax.set(xlabel="training samples / s (log scale)", title=f"{dataset}: training throughput")
        ax.grid(True, axis="x", which="both", alpha=0.3)
    return fig

