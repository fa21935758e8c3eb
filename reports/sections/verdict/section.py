"""The Verdict section, the first screen.

The run's answer in one sentence and its status badges (``reports.sections.verdict.answer``), then per dataset the
compact table beside the Pareto figure (``reports.sections.verdict.compact``), the key to its ε columns and the
headline; folded below them, the verdict table with every number's whole provenance (``reports.sections.verdict.table``)
and the notes per mechanism (``reports.sections.verdict.notes``).
"""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup
from matplotlib.figure import Figure

from bench.results import Results
from reports.common import MAIN_LEVEL, finished, level_label
from reports.figures import by_dataset, slug
from reports.last_iterate import GAP_SENTENCE, LAST_ITERATE_HEADERS, last_iterate_rows
from reports.section import (
    SECTIONS,
    Badges,
    Block,
    Details,
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
from reports.sections.verdict.answer import answer, badges
from reports.sections.verdict.compact import CompactTable, compact_tables
from reports.sections.verdict.notes import verdict_headline, verdict_notes
from reports.sections.verdict.plots import pareto_figure
from reports.sections.verdict.table import VERDICT_HEADERS, leakage_axis, row_css, verdict_tables

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


@SECTIONS.register()
class Verdict(ReportSection):
    """The Verdict section, the first screen."""

    name = "verdict"
    order = 10

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``pareto_<dataset>``: every dataset's privacy-utility Pareto frontier (``.plots``)."""
        return {f"pareto_{slug(dataset)}": pareto_figure(rs, leakage_axis(rs))
                for dataset, rs in by_dataset(finished(results)).items()}

    def alt(self, stem: str) -> str:
        """``pareto_<dataset>``'s alt text: the frontier's axes and line."""
        dataset = stem.removeprefix("pareto_")
        return (f"Privacy-utility Pareto frontier on {dataset}: test accuracy against the strongest membership "
                "attack's TPR at 0.1% FPR, or at the lowest FPR measurable on every model (the AUC where none is; the "
                "y-axis says which), with its 95% interval; one colour per mechanism (hollow: no guarantee; grey "
                "cross: degenerate), each mechanism named once, the models on the frontier labelled with their "
                "target ε; the line joins the models no other model beats on both")

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """The answer and the badges, then per dataset the compact table beside the Pareto figure.

        The key to its ε columns, the headline, and folded: the verdict table (every number's provenance) and the notes
        per mechanism. HTML says "No results yet." when there is nothing.
        """
        notes, headline = verdict_notes(results), verdict_headline(results)
        blocks: list[Block] = [Text(answer(results), "answer"), Badges(badges(results))]
        several = len(results.datasets) > 1 or len({r.dataset for r in results.results}) > 1
        for v, compact in zip(verdict_tables(results), compact_tables(results), strict=True):
            dataset, key = v["dataset"], slug(v["dataset"])
            full = Table(VERDICT_HEADERS, [row["cells"] for row in v["rows"]], css="verdict-table",
                         caption=f"{dataset}: every model's utility, strongest membership attack, and tightest "
                                 "valid audit bound next to its accountant's ε",
                         row_css=[row_css(row) for row in v["rows"]],
                         row_ids=[f"full-{key}-{i}" for i in range(len(v["rows"]))])  # fmt: skip
            pareto = Figures(drawn(plots, [f"pareto_{key}"]), blank_if_empty=True)
            blocks += [Heading(f"Verdict: {dataset}", level=2, only="" if several else "markdown"),
                       Group("first-screen", [*compact_blocks(compact, key), pareto]),
                       Text(compact_legend(compact, with_keys=False), "note key", only="html"),
                       Text(compact_legend(compact, with_keys=True), only="markdown"),
                       Group("reading", [Items(headline.get(dataset, []), "headline", "bold")],
                             anchor=f"reading-{key}"),
                       Details("The verdict table: every number with its δ, accountant, relation, audit, threat "
                               "model, design, method and confidence", [
                                   full, Text(f"Pareto-optimal: no other model has both higher test accuracy and "
                                              f"lower leakage ({v['axis'].description}). " + VERDICT_LEGEND,
                                              only="markdown"),
                                   Text(f"Pareto-optimal (shaded): no other model has both higher test accuracy "
                                        f"and lower leakage, measured as {v['axis'].description}.\n" + HTML_LEGEND,
                                        "note", only="html")], anchor=f"full-{key}"),
                       *_last_iterate_blocks(results, dataset, key),
                       Details("Notes per mechanism", [Items(notes.get(dataset, []), "notes")])]
        if not results.results:
            blocks = [Heading("Verdict", level=2, only="html"), Text("No results yet.", only="html")]
        return Section("verdict", "", blocks, nav=[("verdict", "Verdict")])


def _last_iterate_blocks(results: Results, dataset: str, key: str) -> list[Block]:
    """Folded: the DP-SGD models' accountant ε.

    Last-iterate heuristic ε and final-model audit bound side by side (``reports.last_iterate``) with the sentence
    saying what the gap means; nothing without a heuristic ε.
    """
    rows = last_iterate_rows(results, dataset)
    if not rows:
        return []
    return [Details("What the final model alone can leak: the accountant's ε, the last-iterate heuristic (not a "
                    "bound) and the final-model audit side by side", [
                        Table(LAST_ITERATE_HEADERS, rows, css="last-iterate-table",
                              caption=f"{dataset}: each model's three numbers, of one run (the audit run's where "
                                      "the final-model audit trained its own)"),
                        Text(GAP_SENTENCE, "note")], anchor=f"last-iterate-{key}")]


def compact_blocks(table: CompactTable, key: str) -> list[Block]:
    """The compact table twice: HTML and Markdown.

    The compact table twice: HTML (each mechanism a link to its row of the folded verdict table, each cell's
    provenance its title, each row an anchor) and Markdown (plain cells).
    """
    keys = f" ε keys: {'; '.join(table.keys)}." if table.keys else ""
    caption = (f"{table.dataset}: one row per mechanism × target ε.{keys} Shaded: Pareto-optimal; greyed: "
               "degenerate; a mechanism's name opens its every number's provenance (or hover a cell).")
    links = [[_name_link(row[0], f"full-{key}-{i}"), *row[1:]] for i, row in enumerate(table.rows)]
    return [Table(table.headers, links, caption=caption, css="compact-table", row_css=table.row_css,
                  row_ids=[f"row-{key}-{i}" for i in range(len(table.rows))], titles=table.titles, only="html"),
            Table(table.headers, table.rows, only="markdown")]


def _name_link(name: str, anchor: str) -> Markup:
    """A compact row's mechanism as a link to its verdict-table row, a degenerate mark after it (free to wrap)."""
    mark = " (degenerate)"
    if name.endswith(mark):
        return Markup('<a href="#{}">{}</a> <span class="mark">{}</span>').format(anchor, name[: -len(mark)],
                                                                                  mark.strip())
    return Markup('<a href="#{}">{}</a>').format(anchor, name)


def compact_legend(table: CompactTable, *, with_keys: bool) -> str:
    """How to read the compact table in one paragraph, led by the key to its ε columns.

    ``with_keys``: the HTML table has it in its caption.
    """
    keys = "; ".join(table.keys) if with_keys else ""
    axis = table.axis
    if axis.level is None:
        leak = f" The leakage column is the strongest attack's AUC: {axis.reason}."
    elif axis.level != MAIN_LEVEL:
        leak = (f" TPR at {level_label(MAIN_LEVEL)} FPR is not measurable on every model (too few non-members): the "
                f"leakage column reads {level_label(axis.level)} FPR, the lowest level measurable on every model.")
    else:
        leak = ""
    return (f"ε keys: {keys}. " if keys else "") + COMPACT_LEGEND + leak


COMPACT_LEGEND = (
    "ε: the accountant's upper bound for that δ and relation (\"no guarantee (claimed x)\": no formal guarantee, x "
    "the ε a source claimed, not a guarantee; \"∞ (off)\": trained with privacy off). Audit ε_LB / ε: the tightest "
    "valid bound of any audit (95% on its own; its audit, threat model, design and method in the cell's title and "
    "the verdict table) against the ε it is held to. Cost of privacy: test-accuracy points lost against the "
    "mechanism's ε = ∞ point. Conformance: the audit run's tests of the certified mechanism that passed (their "
    "number), or the one the run-level check refuted."
)
