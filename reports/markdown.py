"""The Markdown report (GitHub flavour).

The title and notices, then every registered section (``reports.section.SECTIONS``: the verdict per dataset, the
evidence, the failures and the provenance) drawn block by block, from a ``bench.results.Results``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import reports.sections  # noqa: F401  (registers the built-in sections)
from bench.results import Results
from reports.empirical import bug_lines, refuted_claim_lines
from reports.section import (
    Badges,
    Block,
    Code,
    Details,
    Facts,
    Figures,
    Heading,
    Items,
    Section,
    Table,
    Text,
    registered_sections,
)
from reports.tables import failed_attack_lines


def _cell(text: Any) -> str:
    """Text safe inside one Markdown table cell (no pipes, no line breaks)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(headers: list[str] | tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _head(results: Results) -> list[str]:
    """Title, run status, privacy bugs and the failed-attack notice."""
    out = [f"# privbench report: {results.run_id}", ""]
    if results.status != "complete":
        out += [f"> **Run status: {results.status}.** Some cells may be missing; the tables show what finished.", ""]
    bugs = bug_lines(results)
    if bugs:
        out += ["## Privacy bugs", ""] + [f"> **{_cell(line)}**" for line in bugs] + [""]
    refuted = refuted_claim_lines(results)
    if refuted:
        out += [f"> **{len(refuted)} claimed ε value(s) refuted by valid audits** (mechanisms without a guarantee: "
                "not privacy bugs); see Audit.", ""]
    failed = failed_attack_lines(results)
    if failed:
        out += [f"> **{len(failed)} attack(s) failed on finished models; see Failed attacks.**", ""]
    return out


def _items(block: Items) -> list[str]:
    if block.style == "bold":
        return [line for text in block.lines for line in (f"**{_cell(text)}**", "")]
    return [f"- `{text}`" if block.code else f"- {_cell(text)}" for text in block.lines] + [""]


def _block(block: Block, plots: dict[str, Path]) -> list[str]:
    """One block as Markdown lines, ending with a blank line (``reports.section`` says how each kind is drawn)."""
    if isinstance(block, Text):
        return [_cell(block.text), ""]
    if isinstance(block, Items):
        return _items(block)
    if isinstance(block, Table):
        rows = [list(row) for row in block.rows]
        for row, mark in zip(rows, block.marks, strict=False):
            row[0] = mark + row[0]
        return _table(list(block.headers), rows) + [""]
    if isinstance(block, Figures):
        lines = [line for name in block.names if name in plots
                 for line in (f"![{block.alt[name]}]({Path(plots[name]).name})", "")]  # fmt: skip
        return lines or ([""] if block.blank_if_empty else [])
    if isinstance(block, Heading):
        return ["#" * (block.md_level or block.level) + " " + block.text, ""]
    if isinstance(block, Facts):
        return [f"- **{key}:** {_cell(value)}" for key, value in block.pairs] + [""]
    if isinstance(block, Code):
        return [f"```{block.language}", block.text, "```", ""]
    if isinstance(block, Badges):
        return [" · ".join(f"**{b.number}** {b.label}" for b in block.items), ""]  # GitHub's anchors are not ours
    inner = [line for child in block.blocks for line in _block(child, plots)]
    if isinstance(block, Details):
        return [f"<details><summary>{block.summary}</summary>", "", *inner, "</details>", ""]
    return inner  # a Group: its blocks in turn


def render_section(section: Section, plots: dict[str, Path]) -> list[str]:
    """One section as Markdown lines: ``## title`` (where it has one), then its blocks."""
    out = [f"## {section.title}", ""] if section.title else []
    return out + [line for block in section.blocks for line in _block(block, plots)]


def render_markdown(results: Results, plots: dict[str, Path]) -> str:
    """The whole report as GitHub Markdown, in the HTML page's order (ends with a newline).

    ``plots``: ``{stem: path}`` of ``make_plots``, linked by file name (the report sits beside the PNGs).
    """
    out = _head(results)
    for section in registered_sections(results, plots, "markdown"):
        out += render_section(section, plots)
    return "\n".join(out)
