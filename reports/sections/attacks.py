"""The Membership attacks section.

The strongest attack's ROC on every model of each mechanism, a one-line reading (whether any attack beats chance after
the Bonferroni correction: ``reports.sections.verdict.notes``), and folded: the ROC panels of every attack and audit,
every attack and audit on every model (``reports.tables``), and the membership attacks' heuristic ε lower bounds, which
assume independent outcomes and never decide a verdict (``reports.empirical``).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results, RunResult
from reports.common import finished
from reports.empirical import heuristic_note, heuristic_rows
from reports.figures import by_dataset, slug
from reports.plots import roc_figure, roc_summary_figure
from reports.section import SECTIONS, Block, Details, Figures, ReportSection, Section, Table, Text, drawn
from reports.sections.verdict.notes import leak_reading
from reports.tables import attack_rows


def _rocs(results: Results, prefix: str) -> dict[str, list[RunResult]]:
    """``{"<prefix>_<dataset>": the dataset's finished runs}``, in document order."""
    return {f"{prefix}_{slug(dataset)}": rs for dataset, rs in by_dataset(finished(results)).items()}


@SECTIONS.register()
class Attacks(ReportSection):
    """The Membership attacks section."""

    name = "attacks"
    order = 30

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``roc_strongest_<dataset>`` (strongest attack's ROC per model), ``roc_<dataset>`` (every attack's)."""
        return {**{name: roc_summary_figure(rs) for name, rs in _rocs(results, "roc_strongest").items()},
                **{name: roc_figure(rs) for name, rs in _rocs(results, "roc").items()}}

    def alt(self, stem: str) -> str:
        """The two ROC figures' alt text: panels, line styles and the DP bound."""
        if stem.startswith("roc_strongest_"):
            return (f"Log-log ROC curves on {stem.removeprefix('roc_strongest_')}, one panel per mechanism: the "
                    "strongest membership attack (highest TPR at 0.1% FPR) on each of its models, one colour per "
                    "target ε, against the chance diagonal")
        return (f"Log-log ROC curves on {stem.removeprefix('roc_')}, one panel per mechanism and ε: membership "
                "attacks on natural members (solid) and canary audits (dashed, labelled with threat model and design: "
                "one-run with m canaries, multi-run with R runs), with the bound TPR <= e^ε·FPR + δ")

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always in HTML ("No membership attack ran." without rows); in Markdown with rows or plots."""
        headers, rows = attack_rows(results)
        summary, grids = drawn(plots, _rocs(results, "roc_strongest")), drawn(plots, _rocs(results, "roc"))
        blocks: list[Block] = [Figures(summary)]
        if rows:
            blocks.append(Text(leak_reading(results), "reading"))
        if grids:
            blocks.append(Details("ROC panels of every attack and audit on every model", [Figures(grids)]))
        blocks.append(Details("Every attack and audit on every model", [Table(
            headers, rows, caption="Every attack and audit on every model (TPR intervals: 95% each, not corrected "
                                   "for multiplicity)")]) if rows  # fmt: skip
                      else Text("No membership attack ran.", only="html"))
        h_headers, h_rows = heuristic_rows(results)
        if h_rows:
            blocks.append(Details("Heuristic ε lower bounds (assume independent outcomes; never a verdict)", [
                Table(h_headers, h_rows, caption="Heuristic (assumes independent outcomes): the membership attacks' "
                                                 "bounds on natural members, never a verdict"),
                Text(heuristic_note(), "note")], anchor="heuristic"))  # fmt: skip
        return Section("attacks", "Membership attacks", blocks, nav=[("attacks", "Membership attacks")],
                       only="" if rows or summary or grids else "html")
