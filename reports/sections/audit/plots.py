"""The audits' tightness plot.

Per model and threat model, the tightest valid ε lower bound against the ε it is held to (the accountant's ε of the
audited run, or the claimed ε of a mechanism without a guarantee), with the diagonal ε_LB = ε, and above a final-model
audit's bound a bar at the run's last-iterate heuristic ε (Steinke et al. 2025: not a bound). Heuristic bounds are never
plotted; neither are bounds of a neighbouring relation other than the ε's. Same conventions as ``reports.figures``
(object API, explicit Agg canvas).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from bench.results import PrivacyBug, RunResult
from reports.bounds import THREAT_MODELS, AuditBound, design_text, same_model, tightest_valid
from reports.common import has_guarantee
from reports.figures import by_dataset, colors, figure
from reports.last_iterate import FINAL_MODEL_THREATS

MARKERS = {"white-box": "^", "hidden-state": "s", "black-box": "o", "black-box-crafted": "D"}
LINTHRESH = 0.1  # the y-axis is linear below this (bounds of 0 are common), logarithmic above


def tightness_points(runs: list[RunResult]) -> list[AuditBound]:
    """The plot's bounds: per model and threat model, the tightest valid bound compared with an ε > 0."""
    found = [tightest_valid(r, tm) for r in runs for tm in THREAT_MODELS]
    return [b for b in found if b is not None and b.reference is not None and b.reference > 0]


def heuristic_of(b: AuditBound) -> float | None:
    """The last-iterate heuristic ε (not a bound) of a final-model audit's bound, in the relation it is held to.

    None for other threat models or without one.
    """
    c = b.compared
    if b.threat_model not in FINAL_MODEL_THREATS or c is None:
        return None
    h = c.heuristic(b.design.relation)
    return None if h is None else float(h.epsilon)


def _flagged(b: AuditBound, flagged: list[PrivacyBug]) -> bool:
    return any(same_model(f, b.result) and f.attack == b.attack for f in flagged)


def _panel(ax: Axes, points: list[AuditBound], palette: dict[str, str], flagged: list[PrivacyBug]) -> None:
    for b in points:
        x, y, color = float(b.reference or 0.0), b.value, palette[b.result.mechanism]
        guaranteed = has_guarantee(b.privacy)
        ax.scatter([x], [y], marker=MARKERS.get(b.threat_model, "s"), s=46, color=color,
                   facecolors=color if guaranteed else "white", linewidths=1.3, zorder=3)
        if _flagged(b, flagged):
            ax.scatter([x], [y], marker="o", s=190, facecolors="none", edgecolors="red", linewidths=1.6, zorder=4)
        if b.capped:
            ax.annotate("≥ (cap)", (x, y), xytext=(5, -3), textcoords="offset points", fontsize=6, color="0.3")
        h = heuristic_of(b)
        if h is not None:  # the final model's last-iterate heuristic: not a bound, drawn as a bar above its audit
            ax.scatter([x], [h], marker="_", s=160, color=color, linewidths=2.0, zorder=2)
    xs = [float(b.reference or 0.0) for b in points]
    lo, hi = min(xs) / 2, max(max(xs), max(b.value for b in points)) * 2
    grid = np.logspace(math.log10(lo), math.log10(hi), 200)
    ax.plot(grid, grid, color="k", ls="--", lw=1, zorder=1)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=LINTHRESH)
    ax.set(xlim=(lo, hi), ylim=(0, hi), xlabel="ε of the audited run (accountant's; hollow: claimed, no guarantee)",
           ylabel="tightest valid ε lower bound (95%)")
    ax.grid(True, which="both", alpha=0.3)


def _legend(ax: Axes, points: list[AuditBound], palette: dict[str, str], flagged: bool) -> None:
    """Mechanisms (colour), threat models (marker), the hollow and ringed markers, the diagonal and the designs.

    Outside the axes on the right.
    """
    handles = [Line2D([], [], color=palette[m], marker="s", ls="", label=m)
               for m in sorted({b.result.mechanism for b in points})]
    handles += [Line2D([], [], color="0.3", marker=MARKERS[tm], ls="", label=tm)
                for tm in THREAT_MODELS if any(b.threat_model == tm for b in points)]
    if any(not has_guarantee(b.privacy) for b in points):
        handles.append(Line2D([], [], color="0.3", marker="o", mfc="white", ls="",
                              label="hollow: no guarantee, plotted at its claimed ε"))
    if flagged:
        handles.append(Line2D([], [], color="red", marker="o", mfc="none", ms=10, ls="",
                              label="privacy bug / refuted claim (run-level check)"))
    if any(heuristic_of(b) is not None for b in points):
        handles.append(Line2D([], [], color="0.3", marker="_", ms=10, mew=2, ls="",
                              label="bar: last-iterate heuristic ε\n(Steinke et al. 2025): not a bound;\n"
                                    "final-model audits only"))
    handles.append(Line2D([], [], color="k", ls="--", label="ε_LB = ε (significantly above:\nthe ε does not hold)"))
    designs = sorted({f"{b.threat_model}, {design_text(b.design)}" for b in points})
    handles.append(Line2D([], [], ls="", label="designs:\n" + "\n".join(designs) + "\nheuristic bounds not shown"))
    ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def tightness_figure(runs: list[RunResult], flagged: list[PrivacyBug] | None = None) -> Figure | None:
    """One panel per dataset: each model's tightest valid ε lower bound against its ε.

    One panel per dataset: the tightest valid ε lower bound of every model per threat model (marker) and
    mechanism (colour) against the ε it is held to, with the diagonal; models with a privacy bug or a refuted claim
    (``flagged``) ringed in red. ``None`` when no valid bound is compared with an ε.
    """
    flagged = flagged or []
    groups = {d: pts for d, rs in by_dataset(runs).items() if (pts := tightness_points(rs))}
    if not groups:
        return None
    palette = colors(runs)
    fig, axes = figure(len(groups), ncols=1, size=(8.2, 4.8))
    for ax, (dataset, points) in zip(axes, groups.items(), strict=True):
        _panel(ax, points, palette, flagged)
        _legend(ax, points, palette, any(_flagged(b, flagged) for b in points))
        ax.set_title(f"{dataset}: audit tightness (valid bounds only, 95% each)", fontsize=9)
    return fig
