"""The Released data section: example records of what DPMix and local noise publish (``reports.plots``)."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.section import SECTIONS, Figures, ReportSection, Section, Text, images


@SECTIONS.register()
class Releases(ReportSection):
    name = "releases"
    order = 70

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where a release was plotted."""
        figures = images(plots, "releases")
        if not figures:
            return None
        note = Text("What DPMix and local noise publish: example records of each release, one row per ε.", "note",
                    only="html")
        return Section("releases", "Released data", [note, Figures(figures, grid=True)], nav=[("releases", "Releases")])
