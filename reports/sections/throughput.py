"""The Throughput section: the samples/s plot, the run's wall time and where the time went (``reports.phases``)."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.phases import PHASE_HEADERS, PHASE_NOTE, phase_rows, run_lines
from reports.section import SECTIONS, Figures, Items, ReportSection, Section, Table, Text, images


@SECTIONS.register()
class Throughput(ReportSection):
    name = "throughput"
    order = 60

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always."""
        return Section("throughput", "Throughput", [
            Figures(images(plots, "throughput")), Items(run_lines(results), style="paragraphs"),
            Table(PHASE_HEADERS, phase_rows(results), caption="Where the time went: seconds per phase of every model"),
            Text(PHASE_NOTE, "note"),
        ], nav=[("throughput", "Throughput")])  # fmt: skip
