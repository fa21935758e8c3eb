"""The self-contained HTML report: Jinja2 (autoescape on), inline CSS, PNGs embedded as data URIs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from reports.empirical import audit_note, empirical_rows, privacy_bug_lines
from reports.plots import plot_alt
from reports.tables import (
    RECONSTRUCTION_HEADERS,
    RECONSTRUCTION_NOTE,
    TERMINAL_HEADERS,
    attack_rows,
    privacy_notes,
    reconstruction_rows,
    row_cells,
    setup_note,
    summary_rows,
)

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE = "report.html.j2"


def _environment() -> Environment:
    """Jinja2 environment with autoescaping on for every template (``.j2`` names included)."""
    return Environment(
        loader=FileSystemLoader(TEMPLATE_DIR),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def data_uri(path: Path) -> str:
    """``data:image/png;base64,...`` for a PNG file, so the report is one self-contained file."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def html_context(results: dict[str, Any], plots: dict[str, Path]) -> dict[str, Any]:
    """Everything the template shows, as plain strings and lists (the template holds no logic)."""
    rows = summary_rows(results)
    tables = [
        {
            "dataset": str(dataset),
            "rows": [
                {"cells": row_cells(r), "failed": r["status"] != "ok"} for r in rows if r["dataset"] == dataset
            ],
        }
        for dataset in dict.fromkeys(r["dataset"] for r in rows)
    ]
    attack_headers, attack_table = attack_rows(results)
    empirical_headers, empirical_table, empirical_bugs = empirical_rows(results)
    failed = [
        {
            "where": f"{r['dataset']} / {r['mechanism']} (seed {r['seed']})",
            "error": r.get("error") or "unknown error",
        }
        for r in rows
        if r["status"] != "ok"
    ]
    return {
        "run_id": str(results.get("run_id", "unnamed run")),
        "status": str(results.get("status", "unknown")),
        "meta": [
            ("Created", results.get("created", "unknown")),
            ("Device", results.get("device", "unknown")),
            ("Git hash", results.get("git_hash") or "not in a git checkout"),
        ],
        "git_hash": str(results.get("git_hash") or "not in a git checkout"),
        "versions": [(str(k), str(v)) for k, v in (results.get("versions") or {}).items()],
        "setup": setup_note(results),
        "headers": list(TERMINAL_HEADERS),
        "tables": tables,
        "attack_headers": attack_headers,
        "attack_rows": attack_table,
        "empirical_headers": empirical_headers,
        "empirical_rows": [{"cells": c, "bug": b} for c, b in zip(empirical_table, empirical_bugs, strict=True)],
        "audit_note": audit_note(results),
        "privacy_bugs": privacy_bug_lines(results),
        "images": [{"alt": plot_alt(n), "src": data_uri(p), "name": n} for n, p in plots.items()
                   if not n.startswith("inversion_")],
        "reconstruction_headers": list(RECONSTRUCTION_HEADERS),
        "reconstruction_rows": reconstruction_rows(results),
        "reconstruction_note": RECONSTRUCTION_NOTE,
        "reconstruction_images": [{"alt": plot_alt(n), "src": data_uri(p), "name": n} for n, p in plots.items()
                                  if n.startswith("inversion_")],
        "notes": privacy_notes(results),
        "failed": failed,
        "config_json": json.dumps(results.get("config") or {}, indent=2, sort_keys=True, default=str),
    }


def render_html(results: dict[str, Any], plots: dict[str, Path]) -> str:
    """Render the whole report as one self-contained HTML page.

    Args:
        results: the whole results.json document; every string from it is HTML-escaped.
        plots: ``{stem: path}`` from ``reports.plots.make_plots``; the PNGs are embedded as base64.

    Returns:
        The HTML document as text.

    Raises:
        jinja2.TemplateError: if the packaged template is missing or broken.
        OSError: if a plot file cannot be read.
    """
    return _environment().get_template(TEMPLATE).render(**html_context(results, plots))
