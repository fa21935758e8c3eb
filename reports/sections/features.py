"""The What the convolutions see section: first-layer feature maps compared across mechanisms
(``reports.feature_maps``); always shown, saying so when no model is a CNN."""

from __future__ import annotations

from pathlib import Path

from bench.results import Results
from reports.feature_maps import FEATURES_NOTE, features_text
from reports.section import SECTIONS, Figures, Items, ReportSection, Section, Text, images


@SECTIONS.register()
class Features(ReportSection):
    name = "features"
    order = 100

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always."""
        return Section("features", "What the convolutions see", [
            Figures(images(plots, "features")), Items(features_text(results)), Text(FEATURES_NOTE, "note"),
        ], nav=[("features", "What the convolutions see")])  # fmt: skip
