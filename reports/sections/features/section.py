"""The What the convolutions see section.

First-layer feature maps compared across mechanisms (``reports.sections.features.feature_maps``); always shown, saying
so when no model is a CNN.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import finished
from reports.figures import by_dataset, slug
from reports.section import SECTIONS, Figures, Items, ReportSection, Section, Text, drawn
from reports.sections.features.feature_maps import FEATURES_NOTE, features_figure, features_text


def _cnns(results: Results) -> dict[str, list[RunResult]]:
    """``{"features_<dataset>": the dataset's finished runs}`` for every dataset with feature maps (a CNN).

    In document order.
    """
    return {f"features_{slug(dataset)}": rs for dataset, rs in by_dataset(finished(results)).items()
            if any(r.feature_maps is not None for r in rs)}


@SECTIONS.register()
class Features(ReportSection):
    """The What the convolutions see section."""

    name = "features"
    order = 80

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``features_<dataset>``: first-layer filters and feature maps per model (``.feature_maps``)."""
        return {name: features_figure(rs) for name, rs in _cnns(results).items()}

    def alt(self, stem: str) -> str:
        """``features_<dataset>``'s alt text: what each row and column shows."""
        return (f"What the convolutions see on {stem.removeprefix('features_')}: per model (baseline first, then each "
                "private model at one ε) the test image, first-layer filters and the first two convolutions' feature "
                "maps, private channels matched to the baseline's")

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always."""
        return Section("features", "What the convolutions see", [
            Figures(drawn(plots, _cnns(results))), Items(features_text(results)), Text(FEATURES_NOTE, "note"),
        ], nav=[("features", "What the convolutions see")])  # fmt: skip
