"""The compare page's figure, per dataset of BASE (the first two).

The Pareto frontiers of BASE and each NEW run overlaid (test accuracy against the strongest attack's leakage, on one
axis for both: ``reports.sections.verdict.table``), and test accuracy against target ε per mechanism; BASE dashed with
hollow markers, NEW solid. Embedded as a data URI.
"""

from __future__ import annotations

import base64
import io
from collections import defaultdict

from matplotlib.figure import Figure

from bench.results import Results
from reports.compare.model import Comparison
from reports.figures import OKABE_ITO
from reports.sections.verdict.table import leakage_axis, pareto_optimal

MAX_PANELS = 2


def _curves(doc: Results, dataset: str) -> dict[str, list[tuple[float, float]]]:
    """Mechanism -> ``(target ε, test accuracy %)`` sorted by ε, mean over seeds (privacy-on models only)."""
    points: dict[tuple[str, float], list[float]] = defaultdict(list)
    for r in doc.results:
        if r.ok and r.dataset == dataset and r.utility is not None and r.target_epsilon is not None:
            points[(r.mechanism, r.target_epsilon)].append(100 * r.utility.test_accuracy)
    curves: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (mech, eps), values in sorted(points.items()):
        curves[mech].append((eps, sum(values) / len(values)))
    return curves


def _frontiers(ax, dataset: str, docs: list[tuple[str, Results]]) -> None:
    """Each run's models of ``dataset`` (accuracy %, leakage) and its Pareto frontier, on one leakage axis."""
    runs = [[r for r in doc.results if r.ok and r.dataset == dataset and r.utility is not None] for _, doc in docs]
    axis = leakage_axis([r for rs in runs for r in rs])
    for j, ((label, _), rs) in enumerate(zip(docs, runs, strict=True)):
        points = [(100 * r.utility.test_accuracy, leak[0], r.degenerate is None) for r in rs
                  if r.utility is not None and (leak := axis.value(r)) is not None]
        if not points:
            continue
        front = pareto_optimal([(x, y) if ok else None for x, y, ok in points])
        xy = sorted((x, y) for (x, y, _), on in zip(points, front, strict=True) if on)
        style = dict(color="0.45", ls="--", mfc="none") if j == 0 else dict(color=OKABE_ITO[(j - 1) % 8], ls="-")
        ax.plot([p[0] for p in points], [p[1] for p in points], "o", ms=3.5, alpha=0.6, color=style["color"],
                mfc=style.get("mfc", style["color"]))
        ax.plot([p[0] for p in xy], [p[1] for p in xy], marker="o", ms=4, lw=1.4, label=label, **style)
    ax.set_xlabel("test accuracy (%)")
    ax.set_ylabel(axis.label, fontsize=7)
    ax.set_title(f"{dataset}: Pareto frontiers (better: right and low)", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # no model with a measured leakage: an empty panel, no legend
        ax.legend(fontsize=6.5, loc="upper left")


def overlay_figure(comparison: Comparison) -> list[dict[str, str]]:
    """The figure as ``[{"src": data URI, "alt": text}]``; empty when no model has a target ε.

    Args:
        comparison: the comparison.
    """
    datasets = list(dict.fromkeys(r.dataset for r in comparison.base.results))[:MAX_PANELS]
    panels = [(d, _curves(comparison.base, d), [(run.label, _curves(run.doc, d)) for run in comparison.runs])
              for d in datasets]
    panels = [p for p in panels if p[1] or any(c for _, c in p[2])]
    if not panels:
        return []
    fig = Figure(figsize=(9.2, 3.0 * len(panels)), layout="constrained")
    grid = fig.subplots(len(panels), 2, squeeze=False)
    docs = [(f"BASE {comparison.base_label}", comparison.base)] + [(run.label, run.doc) for run in comparison.runs]
    for (left, ax), (dataset, base, news) in zip(grid, panels, strict=True):
        _frontiers(left, dataset, docs)
        mechs = sorted(set(base) | {m for _, c in news for m in c})
        for i, mech in enumerate(mechs):
            color = OKABE_ITO[i % len(OKABE_ITO)]
            if base.get(mech):
                xs, ys = zip(*base[mech], strict=True)
                ax.plot(xs, ys, "--o", color=color, mfc="none", lw=1.2, ms=4, label=f"{mech} (BASE)")
            for j, (_, curves) in enumerate(news):
                if curves.get(mech):
                    xs, ys = zip(*curves[mech], strict=True)
                    ax.plot(xs, ys, "-", marker="os^v"[j % 4], color=color, lw=1.6, ms=4,
                            label=mech if j == 0 else None)
        ax.set_xscale("log")
        eps = sorted({x for c in [base, *(c for _, c in news)] for pts in c.values() for x, _ in pts})
        ax.set_xticks(eps, [f"{x:g}" for x in eps])  # the run's own ε values, not 2×10⁰ 3×10⁰ …
        ax.minorticks_off()
        ax.set_xlabel("target ε")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(dataset, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncols=2, loc="lower right")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    src = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    alt = ("Left: the Pareto frontiers of test accuracy against leakage, BASE dashed grey, "
           f"{', '.join(run.label for run in comparison.runs)} solid. Right: test accuracy against target ε per "
           "mechanism, BASE dashed with hollow markers, NEW solid")
    return [{"src": src, "alt": alt}]
