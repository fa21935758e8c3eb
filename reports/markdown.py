"""The Markdown report (GitHub flavour): the verdict per dataset, the evidence (tables and plots), provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports.empirical import audit_note, empirical_rows, privacy_bug_lines
from reports.plots import plot_alt, plot_section, slug
from reports.provenance import PROVENANCE_HEADERS, provenance_rows, run_facts
from reports.reproduction import REPRODUCTION_HEADERS, reproduction_commands, reproduction_rows
from reports.tables import (
    RECONSTRUCTION_HEADERS,
    RECONSTRUCTION_NOTE,
    attack_rows,
    privacy_notes,
    reconstruction_rows,
    setup_note,
    summary_rows,
)
from reports.verdict import VERDICT_HEADERS, verdict_headline, verdict_notes, verdict_tables


def _cell(text: Any) -> str:
    """Text safe inside one Markdown table cell (no pipes, no line breaks)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(headers: list[str] | tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _images(plots: dict[str, Path], section: str) -> list[str]:
    out = []
    for name, path in plots.items():
        if plot_section(name) == section:
            out += [f"![{plot_alt(name)}]({Path(path).name})", ""]
    return out


def render_markdown(results: dict[str, Any], plots: dict[str, Path]) -> str:
    """Render the whole report as GitHub Markdown, in the order of the HTML page: verdict first, then the
    evidence, then the provenance.

    Args:
        results: the whole results.json document.
        plots: ``{stem: path}`` from ``reports.plots.make_plots``; images are linked by file name,
            so the report must sit in the same directory as the PNGs.

    Returns:
        The Markdown text (ends with a newline).
    """
    status = results.get("status", "unknown")
    out = [f"# privbench report: {results.get('run_id', 'unnamed run')}", ""]
    if status != "complete":
        out += [f"> **Run status: {status}.** Some cells may be missing; the tables show what finished.", ""]
    bug_lines = privacy_bug_lines(results)
    if bug_lines:
        out += ["## Privacy bugs", ""] + [f"> **{_cell(line)}**" for line in bug_lines] + [""]
    notes, headline = verdict_notes(results), verdict_headline(results)
    for v in verdict_tables(results):
        out += [f"## Verdict: {v['dataset']}", ""]
        for line in headline.get(v["dataset"], []):
            out += [f"**{_cell(line)}**", ""]
        out += _table(VERDICT_HEADERS, [row["cells"] for row in v["rows"]]) + [""]
        out += [f"![{plot_alt(name)}]({Path(path).name})" for name, path in plots.items()
                if name == f"pareto_{slug(v['dataset'])}"] + [""]  # fmt: skip
        out += [f"- {_cell(note)}" for note in notes.get(v["dataset"], [])] + [""]
        out += [f"Pareto-optimal: no other model has both higher test accuracy and lower leakage "
                f"({v['axis'].description}). "
                "TPR at 0.1% FPR: the attack with the highest TPR there, its 95% Clopper-Pearson interval "
                "(chance 0.1%; not corrected for picking the best attack). "
                "Empirical ε lower bound: the largest over all audits, 95% confidence.", ""]  # fmt: skip
    tradeoff = _images(plots, "tradeoff")
    if tradeoff:
        out += ["## Privacy vs utility", ""] + tradeoff
    eheaders, erows, _ = empirical_rows(results)
    audit_images = _images(plots, "audit")
    if erows or audit_images:
        out += ["## Empirical privacy", ""]
    if erows:
        out += _table(eheaders, erows) + ["", _cell(audit_note(results)), ""]
    out += audit_images
    headers, arows = attack_rows(results)
    if arows:
        out += ["## Membership attacks", ""] + _table(headers, arows) + [""]
    for section, title in (("throughput", "Throughput"), ("releases", "Released data")):
        images = _images(plots, section)
        out += [f"## {title}", ""] + images if images else []
    recon = reconstruction_rows(results)
    if recon:
        out += ["## Reconstruction", ""] + _table(RECONSTRUCTION_HEADERS, recon) + ["", _cell(RECONSTRUCTION_NOTE), ""]
        out += _images(plots, "reconstruction")
    repro = reproduction_rows(results)
    if repro:
        out += ["## Reproduction", ""] + _table(REPRODUCTION_HEADERS, repro) + [""]
        out += _images(plots, "reproduction")
        out += [f"- `{command}`" for command in reproduction_commands(results)] + [""]
    out += ["## Setup and guarantees", "", _cell(setup_note(results)), ""]
    out += [f"- {_cell(note)}" for note in privacy_notes(results)]
    out += [
        "- Every ε above is the accountant's upper bound for the stated δ; a mechanism marked "
        "\"no guarantee\" has none, whatever ε its source claimed.",
        "- A TPR at an FPR below 10 / (number of non-members) cannot be measured and is shown as "
        "\"not measurable\".",
        "",
    ]
    failed = [r for r in summary_rows(results) if r["status"] != "ok"]
    if failed:
        out += ["## Failed cells", ""]
        for r in failed:
            target = "no target ε" if r["target_epsilon"] is None else f"target ε {r['target_epsilon']:g}"
            out.append(f"- {r['dataset']} / {r['mechanism']} ({target}, seed {r['seed']}): "
                       f"{_cell(r.get('error') or 'unknown error')}")  # fmt: skip
        out.append("")
    out += ["## Provenance", ""] + [f"- **{key}:** {_cell(value)}" for key, value in run_facts(results)] + [""]
    out += _table(PROVENANCE_HEADERS, provenance_rows(results)) + [""]
    config = json.dumps(results.get("config") or {}, indent=2, sort_keys=True, default=str)
    out += ["<details><summary>Resolved configuration</summary>", "", "```json", config, "```", "", "</details>", ""]
    return "\n".join(out)
