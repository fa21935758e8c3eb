"""report-compare.md and report-compare.html.

The comparison in the report's style (Jinja2, autoescape on, one self-contained file). The first screen answers "what
changed": the verdict, the regressions ``--fail-on`` fails on, the table of significant changes and test accuracy
against ε of both runs overlaid; then one table per NEW run with every matched cell, and every comparison made, folded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from bench.core.io import atomic_write_text
from reports.compare.figure import overlay_figure
from reports.compare.model import ALPHA, Change, Comparison
from reports.compare.summary import CELL_HEADERS, CHANGE_HEADERS, cell_row, change_row, direction, unmatched_lines
from reports.compare.summary import verdict as verdict_text

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates"
METHOD = ("Cells are matched by dataset, mechanism, target ε and seed. Test accuracy: McNemar's exact test on the "
          "per-example outcomes both runs kept on the same test set (Fisher's exact test on the two accuracies "
          "where they did not); TPR at each fixed FPR: Fisher's exact test on the members found; AUC: a z-test with "
          "Hanley & McNeil's standard errors; Holm's correction over every test made, family-wise α = "
          f"{ALPHA:g}. A changed ε (δ, accountant, relation), a new privacy bug, a model that became degenerate or "
          "failed are exact differences, always reported. The tightest valid audit bound is shown, not tested (each "
          "bound holds at its own confidence). Throughput: samples/s NEW / BASE, each normalised by its own run's "
          "reference of the same dataset and seed (the mechanism's ε = ∞ point: the same model without privacy; "
          "else the non-private baseline; the raw ratio where a run has none), one measurement per run, no test.")


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATE_DIR), undefined=StrictUndefined, trim_blocks=True,
                      autoescape=lambda name: str(name).endswith(".html.j2"),  # the .md page is not HTML
                      lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["md"] = lambda text: " ".join(str(text).split()).replace("|", "\\|")
    return env


def page_context(comparison: Comparison, failing: list[Change] | None) -> dict[str, Any]:
    """Everything both templates show."""
    significant = comparison.significant()
    every = sorted(comparison.changes(), key=lambda c: (c.run, c.cell, c.metric))
    notes = [f"{run.label}: setting changed: {s}" for run in comparison.runs for s in run.run_settings]
    notes += [line for run in comparison.runs for line in unmatched_lines(run)]
    notes += [f"{run.label}: {cell.key.label()}: settings changed: {'; '.join(cell.settings)}"
              for run in comparison.runs for cell in run.cells if cell.settings]
    news = ", ".join(run.label for run in comparison.runs)
    base = comparison.base
    worse = any(c.worse is True for c in significant)
    return {
        "base": comparison.base_label, "news": news,
        "lede": f"BASE {base.run_id} ({base.created}, git {(base.git_hash or 'unknown')[:10]}) · "
                + " · ".join(f"NEW {r.doc.run_id} ({r.doc.created}, git {(r.doc.git_hash or 'unknown')[:10]})"
                             for r in comparison.runs),
        "answer": verdict_text(comparison, failing), "tone": "bad" if worse else "good" if not significant else "",
        "failing": [c.line() for c in failing or []],
        "alpha": f"{ALPHA:g}", "change_headers": CHANGE_HEADERS, "cell_headers": CELL_HEADERS,
        "significant": [change_row(c) for c in significant], "significant_css": [direction(c) for c in significant],
        "every": [change_row(c) for c in every], "every_css": [direction(c) if c.significant else "" for c in every],
        "notes": notes, "tests": comparison.tests, "method": METHOD,
        "runs": [{"label": run.label, "rows": [cell_row(base, run, cell) for cell in run.cells]}
                 for run in comparison.runs],
    }


def write_pages(comparison: Comparison, failing: list[Change] | None, folder: Path) -> dict[str, Path]:
    """Write report-compare.md and report-compare.html into the existing ``folder``, each atomically.

    ``failing``: the regressions the ``--fail-on`` rules fail on (None: no rules). Returns ``{"markdown", "html"}``
    paths; OSError if a page cannot be written.
    """
    env, context = _environment(), page_context(comparison, failing)
    md = folder / "report-compare.md"
    atomic_write_text(md, env.get_template("compare.md.j2").render(**context))
    figure = overlay_figure(comparison)
    html = folder / "report-compare.html"
    atomic_write_text(html, env.get_template("compare.html.j2").render(**context, figures=figure))
    return {"markdown": md, "html": html}
