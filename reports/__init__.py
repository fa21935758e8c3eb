"""Reports drawn from ``results.json`` alone: terminal tables, Markdown, HTML, CSV and PNG plots.

Reports never import torch: everything they show is in the results document, so a report can be
redrawn without retraining (``privbench report <run-dir>``).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from bench.core.io import atomic_write_text
from reports.html import render_html
from reports.markdown import render_markdown
from reports.plots import make_plots
from reports.tables import SUMMARY_COLUMNS, format_privacy, format_tpr, render_terminal, summary_rows

SCHEMA_VERSION = 1

__all__ = [
    "SCHEMA_VERSION", "format_privacy", "format_tpr", "load_results", "make_plots", "render_html",
    "render_markdown", "render_terminal", "summary_rows", "write_reports",
]  # fmt: skip


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a results.json document and check its schema version.

    Args:
        path: the results.json file.

    Returns:
        The document as a dict.

    Raises:
        ValueError: not JSON, not a JSON object, or ``schema_version`` other than 1 (one-line message).
        OSError: the file cannot be read.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    return doc


def summary_csv(results: dict[str, Any]) -> str:
    """The main table (``summary_rows``) as CSV text with a ``SUMMARY_COLUMNS`` header."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(SUMMARY_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in summary_rows(results):
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in SUMMARY_COLUMNS})
    return buf.getvalue()


def write_reports(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Draw the plots and write ``report.md``, ``report.html`` and ``summary.csv`` into ``out_dir``.

    Every file is written atomically (temporary file in ``out_dir``, then ``os.replace``).

    Args:
        results: the whole results.json document (see ``load_results``).
        out_dir: the run directory (created if missing).

    Returns:
        ``{"markdown": path, "html": path, "csv": path}`` plus every plot as ``{stem: path}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = make_plots(results, out_dir)
    written = {
        "markdown": atomic_write_text(out_dir / "report.md", render_markdown(results, plots)),
        "html": atomic_write_text(out_dir / "report.html", render_html(results, plots)),
        "csv": atomic_write_text(out_dir / "summary.csv", summary_csv(results)),
    }
    return {**written, **plots}
