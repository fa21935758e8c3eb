"""Reports drawn from a ``bench.results.Results`` alone: terminal tables, Markdown, HTML, CSV and PNG plots.

Reports never import torch, the mechanisms or the runner: everything they show is in the results document
(read with ``bench.results.read``), so a report can be redrawn without retraining (``privbench report <run-dir>``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from bench.core.io import atomic_write_text
from bench.results import Results
from reports.common import format_privacy, format_tpr
from reports.figures import slug
from reports.html import render_html
from reports.markdown import render_markdown
from reports.plots import make_plots
from reports.sections.curves.table import curves_csv
from reports.tables import SUMMARY_COLUMNS, summary_rows
from reports.terminal import render_terminal

__all__ = [
    "format_privacy", "format_tpr", "make_plots", "render_html", "render_markdown", "render_terminal",
    "summary_csv", "summary_rows", "write_reports",
]  # fmt: skip


def summary_csv(results: Results) -> str:
    """The main table (``summary_rows``) as CSV text with a ``SUMMARY_COLUMNS`` header."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(SUMMARY_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in summary_rows(results):
        writer.writerow({k: "" if row[k] is None else row[k] for k in SUMMARY_COLUMNS})
    return buf.getvalue()


def write_reports(results: Results, out_dir: Path) -> dict[str, Path]:
    """Draw the plots and write ``report.md``, ``report.html`` and ``summary.csv`` into ``out_dir``.

    Every file is written atomically (temporary file in ``out_dir``, then ``os.replace``).

    Args:
        results: the whole results document (``bench.results.read`` reads one from results.json).
        out_dir: the run directory (created if missing).

    Returns:
        ``{"markdown": path, "html": path, "csv": path}``, every plot as ``{stem: path}`` and the CSV of every
        training-curve figure as ``{"curves_<dataset>_csv": path}`` (``curves_<dataset>.csv``).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = make_plots(results, out_dir)
    written = {
        "markdown": atomic_write_text(out_dir / "report.md", render_markdown(results, plots)),
        "html": atomic_write_text(out_dir / "report.html", render_html(results, plots)),
        "csv": atomic_write_text(out_dir / "summary.csv", summary_csv(results)),
    }
    for name in plots:  # the numbers of every training-curve figure, beside it
        if name.startswith("curves_"):
            dataset = next(d for d in dict.fromkeys(r.dataset for r in results.results) if f"curves_{slug(d)}" == name)
            written[f"{name}_csv"] = atomic_write_text(out_dir / f"{name}.csv", curves_csv(results, dataset))
    return {**written, **plots}
