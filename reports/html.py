"""The self-contained HTML report: Jinja2 (autoescape on), inline CSS, PNGs embedded as data URIs.

The first screen answers "which mechanism should I ship?": the answer in one sentence, the status badges, and per
dataset the compact table beside the privacy-utility Pareto frontier (``reports.sections.verdict.section``); the verdict
table with every number's provenance is folded under it. One section per question follows, each opening with its figure
and a one-line reading, its long tables folded; a collapsed section holds the exact configuration, seeds, versions and
git hash (``reports.sections.provenance.section``).
Every section is a ``reports.section.Section`` from the registry, drawn by one generic template macro.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

import reports.sections  # noqa: F401  (registers the built-in sections)
from bench.results import Results
from reports.empirical import bug_lines, refuted_claim_lines
from reports.section import registered_sections
from reports.tables import failed_attack_lines, summary_rows

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


def _image(name: str, path: Path) -> dict[str, str]:
    return {"src": data_uri(path), "name": name}


def html_context(results: Results, plots: dict[str, Path]) -> dict[str, Any]:
    """Everything the template shows.

    The header's facts and notices, every registered section (``sections``, each drawn by the template's one generic
    ``section`` macro) and every plot as ``{stem: {src, name}}`` (its alt text is in the ``Figures`` block that shows
    it).
    """
    rows = summary_rows(results)
    cfg = results.config
    datasets = ", ".join(dict.fromkeys(str(r["dataset"]) for r in rows)) or str(cfg.get("dataset", "no dataset"))
    commit = (results.git_hash or "unknown")[:10]
    return {
        "run_id": results.run_id,
        "status": results.status,
        "lede": f"{datasets} · profile {cfg.get('profile', 'unknown')} · {len(rows)} models · "
                f"{results.created} · {results.device or 'unknown'} · git {commit}",
        "privacy_bugs": bug_lines(results),
        "refuted_claims": refuted_claim_lines(results),
        "failed_attacks": failed_attack_lines(results),
        "sections": registered_sections(results, plots, "html"),
        "images": {name: _image(name, path) for name, path in plots.items()},
    }


def render_html(results: Results, plots: dict[str, Path]) -> str:
    """The whole report as one self-contained HTML page: strings escaped, ``plots`` embedded (OSError if unreadable)."""
    return _environment().get_template(TEMPLATE).render(**html_context(results, plots))
