"""The Heuristic ε lower bounds section: the membership attacks' bounds on natural members, which assume independent
outcomes and never decide a verdict (``reports.empirical``)."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.empirical import heuristic_note, heuristic_rows
from reports.section import SECTIONS, ReportSection, Section, Table, Text


@SECTIONS.register()
class Heuristic(ReportSection):
    name = "heuristic"
    order = 40

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where a membership attack gave a heuristic bound."""
        headers, rows = heuristic_rows(results)
        if not rows:
            return None
        table = Table(headers, rows, caption="Heuristic (assumes independent outcomes): the membership attacks' "
                                             "bounds on natural members, never a verdict")  # fmt: skip
        return Section("heuristic", "Heuristic ε lower bounds (assume independent outcomes)",
                       [table, Text(heuristic_note(), "note")], nav=[("heuristic", "Heuristic bounds")])
