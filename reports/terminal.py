"""The terminal report (rich).

The run's answer in one sentence, the compact table per dataset (``reports.sections.verdict.compact``) with the key to
its ε columns, DP-SGD's accountant ε beside its last-iterate heuristic (not a bound) and final-model audit
(``reports.last_iterate``), and the attacks that failed. The privacy-bug and refuted-claim lines are
``reports.empirical.privacy_bug_lines``, which ``bench`` prints in red after the reports; the audit table, the heuristic
bounds and every other number are in report.md / report.html.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from bench.results import Results
from reports.last_iterate import GAP_SENTENCE, LAST_ITERATE_HEADERS, last_iterate_rows
from reports.sections.verdict.answer import answer
from reports.sections.verdict.compact import CompactTable, compact_tables
from reports.sections.verdict.section import compact_legend
from reports.tables import failed_attack_lines

RIGHT = (1, 2, 4, 8)  # target ε, ε, cost, samples/s: numbers, right-aligned
STYLES = {"failed": "red", "bug": "bold red", "degenerate": "dim"}


def _table(compact: CompactTable) -> Table:
    """One dataset's compact table as a rich table whose cells fold on narrow terminals, never truncate."""
    table = Table(title=Text(compact.dataset), header_style="bold", title_justify="left")
    for i, header in enumerate(compact.headers):
        table.add_column(header, justify="right" if i in RIGHT else "left", overflow="fold")
    for cells, css in zip(compact.rows, compact.row_css, strict=True):
        texts = [Text(c) for c in cells]
        if "attack-failed" in css:
            texts[5].stylize("bold red")
        style = next((s for name, s in STYLES.items() if name in css.split()), None)
        table.add_row(*texts, style=style)
    return table


def render_terminal(results: Results, console: Console | None = None) -> None:
    """Print the answer, the compact table of every dataset with its key and legend, and the failed attacks.

    Args:
        results: the whole results document.
        console: where to print; a new ``rich.console.Console`` when ``None``.
    """
    console = console or Console()
    console.print(f"[bold]privbench[/bold] run {escape(results.run_id)} — status: {escape(results.status)}")
    tables = compact_tables(results)
    if not tables:
        console.print("no results yet")
        return
    console.print(Text(answer(results), style="bold"))
    for compact in tables:
        console.print(_table(compact))
        console.print(Text(compact_legend(compact, with_keys=True), style="dim"))
        final = last_iterate_rows(results, compact.dataset)
        if final:
            table = Table(title=Text(f"{compact.dataset}: what the final model alone can leak"), header_style="bold",
                          title_justify="left")
            for header in LAST_ITERATE_HEADERS:
                table.add_column(header, overflow="fold")
            for row in final:
                table.add_row(*(Text(c) for c in row))
            console.print(table)
            console.print(Text(GAP_SENTENCE, style="dim"))
    failed = failed_attack_lines(results)
    if failed:
        console.print(Text("Failed attacks:", style="bold red"))
        for line in failed:
            console.print(Text(f"  {line}", style="red"))
