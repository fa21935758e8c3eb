"""The Setup and guarantees section.

The setup, what every ε means, and the failed cells and attacks (``reports.tables``).
"""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup

from bench.results import Results
from reports.common import one_line, target_text
from reports.section import SECTIONS, Block, Heading, Items, ReportSection, Section, Text
from reports.tables import failed_attack_lines, privacy_notes, setup_note, summary_rows

ALWAYS = [
    "Every ε above is the accountant's upper bound for the stated δ and neighbouring relation; a mechanism marked "
    "\"no guarantee\" has none, whatever ε its source claimed.",
    "A TPR at an FPR below 10 / (number of non-members) cannot be measured and is shown as \"not measurable\".",
]


def _failed_cells(results: Results) -> list[Block]:
    """Each failed cell with its reason (Markdown: a section of its own; HTML: a sub-heading of this one)."""
    failed = [r for r in summary_rows(results) if r["status"] != "ok"]
    if not failed:
        return []
    md, html = [], []
    for r in failed:
        target = "no target ε" if r["target_epsilon"] is None else f"target ε {target_text(r['target_epsilon'])}"
        md.append(f"{r['dataset']} / {r['mechanism']} ({target}, seed {r['seed']}): {r['error'] or 'unknown error'}")
        html.append(Markup("<strong>{}</strong>: {}").format(f"{r['dataset']} / {r['mechanism']} (seed {r['seed']})",
                                                              one_line(r["error"])))
    return [Heading("Failed cells", anchor="failed-cells", md_level=2), Items(md, only="markdown"),
            Items(html, only="html")]


@SECTIONS.register()
class Setup(ReportSection):
    """The Setup and guarantees section."""

    name = "setup"
    order = 120

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always; the failures only where something failed."""
        blocks: list[Block] = [Text(setup_note(results)), Items([*privacy_notes(results), *ALWAYS])]
        blocks += _failed_cells(results)
        attacks = failed_attack_lines(results)
        nav = [("setup", "Setup and guarantees")]
        if attacks:
            blocks += [Heading("Failed attacks", anchor="failed-attacks", css="bug", md_level=2),
                       Items(attacks, "bug")]
            nav.append(("failed-attacks", "Failed attacks"))
        return Section("setup", "Setup and guarantees", blocks, nav=nav)
