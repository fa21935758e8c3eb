"""The Reproduction section: published vs reproduced vs corrected, per reference system (``.table``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import ReproductionCurve, Results
from reports.figures import slug
from reports.plots import reproduction_figure
from reports.section import SECTIONS, Block, Figures, Items, ReportSection, Section, Table, Text, drawn
from reports.sections.reproduction.table import REPRODUCTION_HEADERS, reproduction_commands, reproduction_rows

RULE = ("A reproduction within 1.5 points of the published accuracy counts as reproduced. \"Privacy that holds\" is "
        "the ε of the model as trained under correct accounting (Poisson sampling for DP-SGD, the analytic Gaussian "
        "mechanism for input noise, ℓ/n for DPMix), whatever the source claimed.")


def _curves(results: Results) -> dict[str, ReproductionCurve]:
    """``{"reproduction_<preset>_<curve>": curve}`` for every ``reproduction_curves`` entry, in document order."""
    return {f"reproduction_{slug(c.preset)}_{slug(c.name)}": c for c in results.reproduction_curves or []}


@SECTIONS.register()
class Reproduction(ReportSection):
    """The Reproduction section."""

    name = "reproduction"
    order = 110

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``reproduction_<preset>_<curve>``: each ``bench reproduce`` curve, the source's figures as crosses."""
        return {name: reproduction_figure(curve) for name, curve in _curves(results).items()}

    def alt(self, stem: str) -> str:
        """``reproduction_<preset>_<curve>``'s alt text."""
        return (f"Reproduction curve {stem.removeprefix('reproduction_').replace('_', ' ')}: test accuracy (mean ± "
                "std over seeds) against the varied setting; crosses: the source's published figures")

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where ``bench reproduce`` wrote rows."""
        rows = reproduction_rows(results)
        if not rows:
            return None
        commands = reproduction_commands(results)
        blocks: list[Block] = [
            Table(REPRODUCTION_HEADERS, rows, caption="Published vs reproduced vs corrected, per reference system"),
            Text(RULE, "note", only="html"), Figures(drawn(plots, _curves(results))),
        ]
        if commands:
            blocks.append(Text("Produced by:", "note", only="html"))
        blocks.append(Items(commands, code=True, only="" if commands else "markdown"))
        return Section("reproduction", "Reproduction", blocks, nav=[("reproduction", "Reproduction")])
