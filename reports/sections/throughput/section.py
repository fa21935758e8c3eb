"""The Throughput section: the samples/s plot and its reading, the run's wall time, and folded.

Where the time went (``reports.sections.throughput.timings``).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import finished, model_label, target_of
from reports.section import SECTIONS, Details, Figures, Items, ReportSection, Section, Table, Text, drawn
from reports.sections.audit.notes import at_target
from reports.sections.throughput.timings import TIMING_HEADERS, TIMING_NOTE, run_lines, timing_rows
from reports.sections.verdict.plots import throughput_figure


@SECTIONS.register()
class Throughput(ReportSection):
    """The Throughput section."""

    name = "throughput"
    order = 60

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``throughput``: training samples per second of every model (``reports.sections.verdict.plots``)."""
        return {"throughput": throughput_figure(finished(results))}

    def alt(self, stem: str) -> str:
        """``throughput``'s alt text."""
        if stem != "throughput":
            return super().alt(stem)
        return "Training throughput in samples per second of every model, log scale"

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always."""
        return Section("throughput", "Throughput", [
            Figures(drawn(plots, ["throughput"]), css="narrow"), Text(throughput_reading(results), "reading"),
            Items(run_lines(results), style="paragraphs"),
            Details("Where the time went: seconds per phase of every model", [
                Table(TIMING_HEADERS, timing_rows(results), caption="Where the time went: seconds per phase of every "
                                                                    "model"),
                Text(TIMING_NOTE, "note")]),
        ], nav=[("throughput", "Throughput")])  # fmt: skip


def throughput_reading(results: Results) -> str:
    """One line: the fastest and the slowest training of the run, in samples per second (wall clock)."""
    timed = [r for r in finished(results) if r.timings.samples_per_s]
    if not timed:
        return "No model recorded its training throughput."
    fast = max(timed, key=lambda r: r.timings.samples_per_s or 0.0)
    slow = min(timed, key=lambda r: r.timings.samples_per_s or 0.0)

    def name(r: RunResult) -> str:
        return model_label(r) + at_target(target_of(r))

    return (f"Training throughput from {slow.timings.samples_per_s:,.0f} samples/s ({name(slow)}) to "
            f"{fast.timings.samples_per_s:,.0f} samples/s ({name(fast)}), wall clock"
            + (f", device {results.device}." if results.device else "."))
