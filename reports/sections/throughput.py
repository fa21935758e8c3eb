"""The Throughput section: the samples/s plot, the run's wall time and where the time went (``reports.phases``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results
from reports.common import finished
from reports.phases import PHASE_HEADERS, PHASE_NOTE, phase_rows, run_lines
from reports.section import SECTIONS, Figures, Items, ReportSection, Section, Table, Text, drawn
from reports.verdict.plots import throughput_figure


@SECTIONS.register()
class Throughput(ReportSection):
    name = "throughput"
    order = 60

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``throughput``: training samples per second of every model (``reports.verdict.plots``)."""
        return {"throughput": throughput_figure(finished(results))}

    def alt(self, stem: str) -> str:
        """``throughput``'s alt text."""
        if stem != "throughput":
            return super().alt(stem)
        return "Training throughput in samples per second of every model, log scale"

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always."""
        return Section("throughput", "Throughput", [
            Figures(drawn(plots, ["throughput"])), Items(run_lines(results), style="paragraphs"),
            Table(PHASE_HEADERS, phase_rows(results), caption="Where the time went: seconds per phase of every model"),
            Text(PHASE_NOTE, "note"),
        ], nav=[("throughput", "Throughput")])  # fmt: skip
