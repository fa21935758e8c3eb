"""The Verdict section (the first screen): per dataset the headline, the verdict table, the Pareto figure, the notes
and the legend (``reports.verdict.table``, ``reports.verdict.notes``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from bench.results import Results
from reports.common import finished
from reports.figures import by_dataset, slug
from reports.section import (
    SECTIONS,
    Block,
    Figures,
    Group,
    Heading,
    Items,
    ReportSection,
    Section,
    Table,
    Text,
    drawn,
)
from reports.verdict.notes import verdict_headline, verdict_notes
from reports.verdict.plots import pareto_figure
from reports.verdict.table import VERDICT_HEADERS, leakage_axis, verdict_tables

VERDICT_LEGEND = (
    "TPR at 0.1% FPR: the membership attack with the highest TPR there, its 95% Clopper-Pearson interval "
    "(chance 0.1%; the interval is not corrected for picking the best attack: the notes above say what survives "
    "the correction). Audit ε_LB: the tightest valid bound of the model's audits (one-run canaries or multi-run), "
    "95% on its own, with its audit, threat model, design and method (see Audit); heuristic bounds never appear here."
)
HTML_LEGEND = (
    "TPR at 0.1% FPR: the membership attack with the highest TPR there, with its 95% Clopper-Pearson interval "
    "(chance: 0.1%); the intervals are per attack, not corrected for picking the best of several (the notes above "
    "say what survives the correction).\nAudit ε_LB: the tightest valid bound of the model's audits (one-run canaries "
    "or multi-run), 95% on its own, with its audit, threat model, design and method; only the Bonferroni-corrected "
    "run-level check decides a privacy bug (see Audit). Heuristic bounds never appear here.\nSamples/s: training "
    "examples per second, wall clock, on the run's device."
)


def _row_css(row: dict[str, Any]) -> str:
    """The HTML class of a verdict row: failed, privacy bug, degenerate (greyed), failed attack (on the frontier or
    not), frontier."""
    if row.get("failed"):
        return "failed"
    if row.get("bug"):
        return "bug"
    if row.get("degenerate"):  # greyed: learned nothing
        return "degenerate attack-failed" if row.get("attack_failed") else "degenerate"
    if row.get("attack_failed"):
        return "attack-failed frontier" if row.get("frontier") else "attack-failed"
    return "frontier" if row.get("frontier") else ""


@SECTIONS.register()
class Verdict(ReportSection):
    name = "verdict"
    order = 10

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``pareto_<dataset>``: every dataset's privacy-utility Pareto frontier (``reports.verdict.plots``)."""
        return {f"pareto_{slug(dataset)}": pareto_figure(rs, leakage_axis(rs))
                for dataset, rs in by_dataset(finished(results)).items()}

    def alt(self, stem: str) -> str:
        """``pareto_<dataset>``'s alt text: the frontier's axes and line."""
        dataset = stem.removeprefix("pareto_")
        return (f"Privacy-utility Pareto frontier on {dataset}: test accuracy against the strongest membership "
                "attack's TPR at 0.1% FPR, or at the lowest FPR measurable on every model (the AUC where none is; the "
                "y-axis says which), every model labelled with its target ε; the line joins the models no other model "
                "beats on both")

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """One headline, table, figure and notes per dataset; HTML says "No results yet." when there is none."""
        notes, headline = verdict_notes(results), verdict_headline(results)
        blocks: list[Block] = []
        for v in verdict_tables(results):
            dataset = v["dataset"]
            table = Table(VERDICT_HEADERS, [row["cells"] for row in v["rows"]], css="verdict-table",
                          caption=f"{dataset}: every model's utility, strongest membership attack, and tightest "
                                  "valid audit bound next to its accountant's ε",
                          row_css=[_row_css(row) for row in v["rows"]])  # fmt: skip
            pareto = Figures(drawn(plots, [f"pareto_{slug(dataset)}"]), blank_if_empty=True)
            blocks += [Heading(f"Verdict: {dataset}", level=2), Items(headline.get(dataset, []), "headline", "bold"),
                       Group("verdict", [table, pareto]), Items(notes.get(dataset, []), "notes"),
                       Text(f"Pareto-optimal: no other model has both higher test accuracy and lower leakage "
                            f"({v['axis'].description}). " + VERDICT_LEGEND, only="markdown"),
                       Text(f"Pareto-optimal (shaded): no other model has both higher test accuracy and lower "
                            f"leakage, measured as {v['axis'].description}.\n" + HTML_LEGEND, "note", only="html")]
        if not blocks:
            blocks = [Heading("Verdict", level=2, only="html"), Text("No results yet.", only="html")]
        return Section("verdict", "", blocks, nav=[("verdict", "Verdict")])
