"""The Membership attacks section: every attack and audit on every model (``reports.tables``) and the ROC panels."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import finished
from reports.figures import by_dataset, slug
from reports.plots import roc_figure
from reports.section import SECTIONS, Figures, ReportSection, Section, Table, Text, drawn
from reports.tables import attack_rows


def _rocs(results: Results) -> dict[str, list[RunResult]]:
    """``{"roc_<dataset>": the dataset's finished runs}``, in document order."""
    return {f"roc_{slug(dataset)}": rs for dataset, rs in by_dataset(finished(results)).items()}


@SECTIONS.register()
class Attacks(ReportSection):
    name = "attacks"
    order = 50

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``roc_<dataset>``: the log-log ROC panels of every model's attacks and audits (``reports.plots``)."""
        return {name: roc_figure(rs) for name, rs in _rocs(results).items()}

    def alt(self, stem: str) -> str:
        """``roc_<dataset>``'s alt text: panels, line styles and the DP bound."""
        return (f"Log-log ROC curves on {stem.removeprefix('roc_')}, one panel per mechanism and ε: membership "
                "attacks on natural members (solid) and canary audits (dashed, labelled with threat model and design: "
                "one-run with m canaries, multi-run with R runs), with the bound TPR <= e^ε·FPR + δ")

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always in HTML ("No membership attack ran." without rows); in Markdown with rows or plots."""
        headers, rows = attack_rows(results)
        figures = drawn(plots, _rocs(results))
        table = (Table(headers, rows, caption="Every attack and audit on every model (TPR intervals: 95% each, not "
                                              "corrected for multiplicity)") if rows  # fmt: skip
                 else Text("No membership attack ran.", only="html"))
        return Section("attacks", "Membership attacks", [table, Figures(figures, grid=True)],
                       nav=[("attacks", "Membership attacks")], only="" if rows or figures else "html")
