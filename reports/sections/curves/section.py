"""The Training curves section: accuracy and loss per epoch, and their numbers as CSV (``.table``)."""

from __future__ import annotations

import base64
from pathlib import Path

from markupsafe import Markup
from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import finished
from reports.figures import by_dataset, slug
from reports.section import SECTIONS, Figures, ReportSection, Section, Text, drawn
from reports.sections.curves.table import CURVES_NOTE, curves_csv, curves_figure


def _curves(results: Results) -> dict[str, list[RunResult]]:
    """``{"curves_<dataset>": the dataset's finished runs}``, in document order."""
    return {f"curves_{slug(dataset)}": rs for dataset, rs in by_dataset(finished(results)).items()}


def curve_links(results: Results, plots: dict[str, Path]) -> Markup:
    """HTML links to the numbers of every training-curve figure inside the page, named as the CSV written beside it.

    (``data:`` links, so the report stays one self-contained file.) Every part escaped.
    """
    links = []
    for dataset in dict.fromkeys(r.dataset for r in results.results):
        name = f"curves_{slug(dataset)}"
        if name in plots:
            data = base64.b64encode(curves_csv(results, dataset).encode()).decode()
            links.append(Markup('<a href="{}" download="{}">{}</a>').format(f"data:text/csv;base64,{data}",
                                                                            f"{name}.csv", f"{name}.csv"))
    return Markup("Numbers: ") + Markup(", ").join(links) + " (also written beside this report)."


@SECTIONS.register()
class Curves(ReportSection):
    """The Training curves section."""

    name = "curves"
    order = 70

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``curves_<dataset>``: accuracy and loss against epoch of every model of each dataset (``.table``)."""
        return {name: curves_figure(rs) for name, rs in _curves(results).items()}

    def alt(self, stem: str) -> str:
        """``curves_<dataset>``'s alt text: columns, line styles and colours."""
        return (f"Training curves on {stem.removeprefix('curves_')}: one column per mechanism, accuracy (%) and "
                "cross-entropy against epoch (solid: test, on the first 2,000 test images at most; dashed: train), "
                "one colour per target ε; DP-SGD's test accuracy also against the ε spent so far")

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where training curves were plotted."""
        figures = drawn(plots, _curves(results))
        if not figures:
            return None
        csvs = ", ".join(f"[{Path(plots[n]).stem}.csv]({Path(plots[n]).stem}.csv)" for n in figures)
        return Section("curves", "Training curves", [
            Text(CURVES_NOTE, "note", only="html"), Figures(figures, grid=True),
            Text(f"{CURVES_NOTE} Numbers: {csvs}.", only="markdown"),
            Text(curve_links(results, plots), "note", only="html"),
        ], nav=[("curves", "Training curves")])  # fmt: skip
