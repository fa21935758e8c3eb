"""The self-contained HTML report: Jinja2 (autoescape on), inline CSS, PNGs embedded as data URIs.

The first screen answers "which mechanism should I ship?": per dataset the verdict table, the privacy-utility
Pareto frontier and plain-language notes (``reports.verdict``, ``reports.verdict_notes``); the evidence follows,
then the failures, and a collapsed section holds the exact configuration, seeds, versions and git hash
(``reports.provenance``).
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from bench.results import Results
from reports.audit import DETAIL_HEADERS, DETECTION_NOTE, audit_detail_rows, audit_note, audit_rows, detection_rows
from reports.common import one_line
from reports.curves import CURVES_NOTE, curves_csv
from reports.empirical import bug_lines, heuristic_note, heuristic_rows, refuted_claim_lines
from reports.feature_maps import FEATURES_NOTE, features_text
from reports.phases import PHASE_HEADERS, PHASE_NOTE, phase_rows, run_lines
from reports.plots import SECTION_NAMES, plot_alt, plot_section, slug
from reports.provenance import PROVENANCE_HEADERS, provenance_rows, run_facts
from reports.reconstruction import RECONSTRUCTION_HEADERS, RECONSTRUCTION_NOTE, reconstruction_rows
from reports.reproduction import REPRODUCTION_HEADERS, reproduction_commands, reproduction_rows
from reports.tables import attack_rows, failed_attack_lines, privacy_notes, setup_note, summary_rows
from reports.verdict import VERDICT_HEADERS, verdict_tables
from reports.verdict_notes import verdict_headline, verdict_notes

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
    return {"alt": plot_alt(name), "src": data_uri(path), "name": name}


def _verdicts(results: Results, sections: dict[str, list[dict[str, str]]]) -> list[dict[str, Any]]:
    notes, headline = verdict_notes(results), verdict_headline(results)
    return [
        {"dataset": t["dataset"], "axis": t["axis"].description, "rows": t["rows"],
         "notes": notes.get(t["dataset"], []), "headline": headline.get(t["dataset"], []),
         "pareto": [i for i in sections["verdict"] if i["name"] == f"pareto_{slug(t['dataset'])}"]}
        for t in verdict_tables(results)
    ]  # fmt: skip


def _evidence(results: Results) -> dict[str, Any]:
    """The tables of the evidence sections (audit, heuristic bounds, attacks, reconstruction, reproduction)."""
    attack_headers, attack_table = attack_rows(results)
    audit_headers, audit_table, audit_flags = audit_rows(results)
    power_headers, power_rows = detection_rows(results)
    heuristic_headers, heuristic_table = heuristic_rows(results)
    return {
        "attack_headers": attack_headers,
        "attack_rows": attack_table,
        "audit_headers": audit_headers,
        "audit_rows": [{"cells": c, "flag": f} for c, f in zip(audit_table, audit_flags, strict=True)],
        "audit_note": audit_note(results),
        "audit_detail_headers": list(DETAIL_HEADERS),
        "audit_detail_rows": audit_detail_rows(results),
        "detection_headers": power_headers,
        "detection_rows": power_rows,
        "detection_note": DETECTION_NOTE,
        "heuristic_headers": heuristic_headers,
        "heuristic_rows": heuristic_table,
        "heuristic_note": heuristic_note(),
        "reconstruction_headers": list(RECONSTRUCTION_HEADERS),
        "reconstruction_rows": reconstruction_rows(results),
        "reconstruction_note": RECONSTRUCTION_NOTE,
        "reproduction_headers": list(REPRODUCTION_HEADERS),
        "reproduction_rows": reproduction_rows(results),
        "reproduction_commands": reproduction_commands(results),
        "curves_note": CURVES_NOTE,
        "features_lines": features_text(results),
        "features_note": FEATURES_NOTE,
        "phase_headers": list(PHASE_HEADERS),
        "phase_rows": phase_rows(results),
        "phase_note": PHASE_NOTE,
        "run_lines": run_lines(results),
    }


def _curve_links(results: Results, plots: dict[str, Path]) -> list[dict[str, str]]:
    """The numbers of every training-curve figure as a download inside the page (a ``data:`` link, so the report stays
    one self-contained file), named as the CSV written beside it."""
    links = []
    for dataset in dict.fromkeys(r.dataset for r in results.results):
        name = f"curves_{slug(dataset)}"
        if name in plots:
            data = base64.b64encode(curves_csv(results, dataset).encode()).decode()
            links.append({"name": f"{name}.csv", "href": f"data:text/csv;base64,{data}"})
    return links


def html_context(results: Results, plots: dict[str, Path]) -> dict[str, Any]:
    """Everything the template shows, as plain strings and lists (the template holds no logic)."""
    rows = summary_rows(results)
    sections: dict[str, list[dict[str, str]]] = defaultdict(list)
    for name, path in plots.items():
        sections[plot_section(name)].append(_image(name, path))
    failed = [{"where": f"{r['dataset']} / {r['mechanism']} (seed {r['seed']})", "error": one_line(r["error"])}
              for r in rows if r["status"] != "ok"]  # fmt: skip
    cfg = results.config
    datasets = ", ".join(dict.fromkeys(str(r["dataset"]) for r in rows)) or str(cfg.get("dataset", "no dataset"))
    commit = (results.git_hash or "unknown")[:10]
    return {
        "run_id": results.run_id,
        "status": results.status,
        "lede": f"{datasets} · profile {cfg.get('profile', 'unknown')} · {len(rows)} models · "
                f"{results.created} · {results.device or 'unknown'} · git {commit}",
        "facts": run_facts(results),
        "setup": setup_note(results),
        "verdict_headers": list(VERDICT_HEADERS),
        "verdicts": _verdicts(results, sections),
        "privacy_bugs": bug_lines(results),
        "refuted_claims": refuted_claim_lines(results),
        "images": {name: sections[name] for name in SECTION_NAMES},
        "curves_csv": _curve_links(results, plots),
        **_evidence(results),
        "provenance_headers": list(PROVENANCE_HEADERS),
        "provenance_rows": provenance_rows(results),
        "notes": privacy_notes(results),
        "failed": failed,
        "failed_attacks": failed_attack_lines(results),
        "config_json": json.dumps(cfg, indent=2, sort_keys=True, default=str),
    }


def render_html(results: Results, plots: dict[str, Path]) -> str:
    """Render the whole report as one self-contained HTML page.

    Args:
        results: the whole results document; every string from it is HTML-escaped.
        plots: ``{stem: path}`` from ``reports.plots.make_plots``; the PNGs are embedded as base64.

    Returns:
        The HTML document as text.

    Raises:
        jinja2.TemplateError: if the packaged template is missing or broken.
        OSError: if a plot file cannot be read.
    """
    return _environment().get_template(TEMPLATE).render(**html_context(results, plots))
