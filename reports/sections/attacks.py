"""The Membership attacks section: every attack and audit on every model (``reports.tables``) and the ROC panels."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.section import SECTIONS, Figures, ReportSection, Section, Table, Text, images
from reports.tables import attack_rows


@SECTIONS.register()
class Attacks(ReportSection):
    name = "attacks"
    order = 50

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always in HTML ("No membership attack ran." without rows); in Markdown with rows or plots."""
        headers, rows = attack_rows(results)
        figures = images(plots, "attacks")
        table = (Table(headers, rows, caption="Every attack and audit on every model (TPR intervals: 95% each, not "
                                              "corrected for multiplicity)") if rows  # fmt: skip
                 else Text("No membership attack ran.", only="html"))
        return Section("attacks", "Membership attacks", [table, Figures(figures, grid=True)],
                       nav=[("attacks", "Membership attacks")], only="" if rows or figures else "html")
