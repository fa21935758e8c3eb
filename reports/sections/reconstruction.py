"""The Reconstruction section: model inversion and attacks on released data (``reports.reconstruction``)."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.reconstruction import RECONSTRUCTION_HEADERS, RECONSTRUCTION_NOTE, reconstruction_rows
from reports.section import SECTIONS, Figures, ReportSection, Section, Table, Text, images


@SECTIONS.register()
class Reconstruction(ReportSection):
    name = "reconstruction"
    order = 80

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where a reconstruction attack ran."""
        rows = reconstruction_rows(results)
        if not rows:
            return None
        table = Table(RECONSTRUCTION_HEADERS, rows,
                      caption="What an attacker sees of the data: model inversion and attacks on released data")
        return Section("reconstruction", "Reconstruction",
                       [table, Text(RECONSTRUCTION_NOTE, "note"), Figures(images(plots, "reconstruction"))],
                       nav=[("reconstruction", "Reconstruction")])
