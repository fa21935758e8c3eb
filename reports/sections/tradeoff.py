"""The Privacy vs utility section.

Test accuracy, attack AUC and attack TPR against ε (``reports.figures.versus_epsilon``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import mean

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import MAIN_LEVEL, finished, has_guarantee, model_label, strongest_at_level, strongest_attack
from reports.figures import versus_epsilon
from reports.section import SECTIONS, Figures, ReportSection, Section, Text, drawn

STEMS = ("accuracy_vs_epsilon", "attack_auc_vs_epsilon", "attack_tpr_vs_epsilon")


def _accuracy(r: RunResult) -> float | None:
    return None if r.utility is None else 100.0 * r.utility.test_accuracy


def _auc(r: RunResult) -> float | None:
    best = strongest_attack(r)
    return best[1].metrics.auc if best else None


def _tpr_percent(r: RunResult) -> float | None:
    found = strongest_at_level(r, MAIN_LEVEL)
    return None if found is None or found[1].tpr is None else 100.0 * found[1].tpr


@SECTIONS.register()
class Tradeoff(ReportSection):
    """The Privacy vs utility section."""

    name = "tradeoff"
    order = 20

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``STEMS``: test accuracy, the strongest attack's AUC and its TPR at 0.1% FPR against ε.

        One panel per dataset and one line per mechanism.
        """
        runs = finished(results)
        return dict(zip(STEMS, (
            versus_epsilon(runs, _accuracy, "test accuracy (%)", None),
            versus_epsilon(runs, _auc, "AUC of the strongest attack", 0.5),
            versus_epsilon(runs, _tpr_percent, "TPR at 0.1% FPR of the strongest attack (%)", 100.0 * MAIN_LEVEL),
        ), strict=True))  # fmt: skip

    def alt(self, stem: str) -> str:
        """The three ε plots' alt text; ``ReportSection.alt`` says what alt text is for."""
        return {
            "accuracy_vs_epsilon": ("Test accuracy against ε for every mechanism; dashed lines: the models trained "
                                    "with privacy off, each mechanism's ε = ∞ point in its colour and the baseline"),
            "attack_auc_vs_epsilon": "AUC of the strongest membership attack against ε for every mechanism",
            "attack_tpr_vs_epsilon": ("TPR at 0.1% FPR of the strongest membership attack against ε; dotted line: "
                                      "chance (per-model maxima, not corrected for multiplicity)"),
        }.get(stem) or super().alt(stem)

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always in HTML; in Markdown only with plots."""
        figures = drawn(plots, STEMS)
        reading = tradeoff_reading(results)
        return Section("tradeoff", "Privacy vs utility",
                       [Figures(figures, grid=True), *([Text(reading, "reading")] if reading else [])],
                       nav=[("tradeoff", "Privacy vs utility")], only="" if figures else "html")


def tradeoff_reading(results: Results) -> str:
    """One line: each guaranteed mechanism's test accuracy (mean over seeds) at its smallest and its largest target ε.

    Per dataset; empty where no mechanism ran at two target ε.
    """
    acc: dict[tuple[str, str], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in finished(results):
        if has_guarantee(r.privacy) and r.target_epsilon is not None and r.utility is not None:
            acc[(r.dataset, model_label(r))][r.target_epsilon].append(100.0 * r.utility.test_accuracy)
    several = len({d for d, _ in acc}) > 1
    parts = []
    for (dataset, mech), by_t in acc.items():
        if len(by_t) > 1:
            lo, hi = min(by_t), max(by_t)
            parts.append(f"{mech}{f' on {dataset}' if several else ''} {mean(by_t[lo]):.1f}% at target ε {lo:g} → "
                         f"{mean(by_t[hi]):.1f}% at {hi:g}")
    return ("Test accuracy from the smallest to the largest target ε: " + "; ".join(parts) + ".") if parts else ""
