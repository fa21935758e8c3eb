"""The Reproduction section: published vs reproduced vs corrected, per reference system (``reports.reproduction``)."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.reproduction import REPRODUCTION_HEADERS, reproduction_commands, reproduction_rows
from reports.section import SECTIONS, Block, Figures, Items, ReportSection, Section, Table, Text, images

RULE = ("A reproduction within 1.5 points of the published accuracy counts as reproduced. \"Privacy that holds\" is "
        "the ε of the model as trained under correct accounting (Poisson sampling for DP-SGD, the analytic Gaussian "
        "mechanism for input noise, ℓ/n for DPMix), whatever the source claimed.")


@SECTIONS.register()
class Reproduction(ReportSection):
    name = "reproduction"
    order = 110

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where ``bench reproduce`` wrote rows."""
        rows = reproduction_rows(results)
        if not rows:
            return None
        commands = reproduction_commands(results)
        blocks: list[Block] = [
            Table(REPRODUCTION_HEADERS, rows, caption="Published vs reproduced vs corrected, per reference system"),
            Text(RULE, "note", only="html"), Figures(images(plots, "reproduction")),
        ]
        if commands:
            blocks.append(Text("Produced by:", "note", only="html"))
        blocks.append(Items(commands, code=True, only="" if commands else "markdown"))
        return Section("reproduction", "Reproduction", blocks, nav=[("reproduction", "Reproduction")])
