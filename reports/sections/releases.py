"""The Released data section: example records of what DPMix and local noise publish (``reports.plots``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import finished
from reports.figures import by_dataset, slug
from reports.plots import release_figure
from reports.section import SECTIONS, Figures, ReportSection, Section, Text, drawn


def _releases(results: Results) -> dict[str, list[RunResult]]:
    """``{"release_<dataset>_<mechanism>": that mechanism's finished runs on the dataset}``, in document order."""
    return {f"release_{slug(dataset)}_{slug(mech)}": [r for r in rs if r.mechanism == mech]
            for dataset, rs in by_dataset(finished(results)).items() for mech in dict.fromkeys(r.mechanism for r in rs)}


@SECTIONS.register()
class Releases(ReportSection):
    """The Released data section."""

    name = "releases"
    order = 50

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``release_<dataset>_<mechanism>``: the release examples of each mechanism, one row per ε."""
        return {name: release_figure(rs) for name, rs in _releases(results).items()}

    def alt(self, stem: str) -> str:
        """``release_<dataset>_<mechanism>``'s alt text."""
        return f"Example images released by {stem.removeprefix('release_').replace('_', ' / ', 1)}, one row per ε"

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """Only where a release was plotted."""
        figures = drawn(plots, _releases(results))
        if not figures:
            return None
        note = Text("What DPMix and local noise publish: example records of each release, one row per ε.", "note",
                    only="html")
        return Section("releases", "Released data", [note, Figures(figures, grid=True)], nav=[("releases", "Releases")])
