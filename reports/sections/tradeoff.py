"""The Privacy vs utility section: accuracy, attack AUC and attack TPR against ε (``reports.plots``)."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.section import SECTIONS, Figures, ReportSection, Section, images


@SECTIONS.register()
class Tradeoff(ReportSection):
    name = "tradeoff"
    order = 30

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always in HTML; in Markdown only with plots."""
        figures = images(plots, "tradeoff")
        return Section("tradeoff", "Privacy vs utility", [Figures(figures, grid=True)],
                       nav=[("tradeoff", "Privacy vs utility")], only="" if figures else "html")
