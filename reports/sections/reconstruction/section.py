"""The Reconstruction section: model inversion and attacks on released data (``.table``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import finished
from reports.figures import by_dataset, slug
from reports.plots import inversion_grid
from reports.section import SECTIONS, Block, Details, Figures, ReportSection, Section, Table, Text, drawn
from reports.sections.reconstruction.table import RECONSTRUCTION_HEADERS, RECONSTRUCTION_NOTE, reconstruction_rows


def _grids(results: Results) -> dict[str, tuple[list[RunResult], str]]:
    """The inversion figures to draw, one per dataset and attack, in document order.

    ``{"inversion_<dataset>_<attack>": (the dataset's finished runs, attack)}`` for every attack with an
    ``inversion`` block, in document order.
    """
    return {f"inversion_{slug(dataset)}_{slug(attack)}": (rs, attack)
            for dataset, rs in by_dataset(finished(results)).items()
            for attack in dict.fromkeys(a for r in rs for a in r.inversion)}


@SECTIONS.register()
class Reconstruction(ReportSection):
    """The Reconstruction section."""

    name = "reconstruction"
    order = 55

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``inversion_<dataset>_<attack>``: each reconstruction attack's grid, a row per model, a column per class."""
        return {name: inversion_grid(rs, attack) for name, (rs, attack) in _grids(results).items()}

    def alt(self, stem: str) -> str:
        """``inversion_<dataset>_<attack>``'s alt text."""
        dataset, _, attack = stem.removeprefix("inversion_").partition("_")
        return (f"Reconstructions by the {attack} attack on {dataset}: one row per mechanism and ε, one column per "
                "class")

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where a reconstruction attack ran."""
        rows = reconstruction_rows(results)
        if not rows:
            return None
        table = Table(RECONSTRUCTION_HEADERS, rows,
                      caption="What an attacker sees of the data: model inversion and attacks on released data")
        found = _grids(results)  # the grid with the fewest models first: the section opens with it, the rest fold
        grids = sorted(drawn(plots, found), key=lambda name: sum(found[name][1] in r.inversion for r in found[name][0]))
        attacks = list(dict.fromkeys(row[3] for row in rows))
        reading = (f"What an attacker sees of the data: {len(attacks)} reconstruction attack(s) "
                   f"({', '.join(attacks)}), {len(rows)} result(s); the smallest grid above, the others and every "
                   "score folded below.")
        blocks: list[Block] = [Figures(grids[:1], css="narrow"), Text(reading, "reading")]
        if grids[1:]:
            others = Details(f"The other reconstruction grids ({len(grids) - 1})", [Figures(grids[1:], grid=True)])
            blocks.append(others)
        blocks.append(Details("Every reconstruction score", [table, Text(RECONSTRUCTION_NOTE, "note")]))
        return Section("reconstruction", "Reconstruction", blocks, nav=[("reconstruction", "Reconstruction")])
