"""The compare page's figure: test accuracy against target ε per mechanism, BASE dashed and each NEW run solid, one
panel per dataset of BASE (the first four), embedded as a data URI."""

from __future__ import annotations

import base64
import io
from collections import defaultdict

from matplotlib.figure import Figure

from bench.results import Results
from reports.compare.model import Comparison
from reports.figures import OKABE_ITO

MAX_PANELS = 4


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
    fig = Figure(figsize=(4.6 * len(panels), 3.0), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (dataset, base, news) in zip(axes, panels, strict=True):
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
        ax.set_xlabel("target ε")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(dataset, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncols=2, loc="lower right")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    src = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    alt = ("Test accuracy against target ε per mechanism: BASE dashed with hollow markers, "
           f"{', '.join(run.label for run in comparison.runs)} solid")
    return [{"src": src, "alt": alt}]
