"""The Markdown report (GitHub flavour): metadata, main and per-attack tables, plots, privacy notes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def _cell(text: Any) -> str:
    """Text safe inside one Markdown table cell (no pipes, no line breaks)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(headers: list[str] | tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(results: dict[str, Any], plots: dict[str, Path]) -> str:
    """Render the whole report as GitHub Markdown.

    Args:
        results: the whole results.json document.
        plots: ``{stem: path}`` from ``reports.plots.make_plots``; images are linked by file name,
            so the report must sit in the same directory as the PNGs.

    Returns:
        The Markdown text (ends with a newline).
    """
    versions = results.get("versions") or {}
    status = results.get("status", "unknown")
    out = [f"# privbench report: {results.get('run_id', 'unnamed run')}", ""]
    if status != "complete":
        out += [f"> **Run status: {status}.** Some cells may be missing; the tables show what finished.", ""]
    out += [
        f"- **Run id:** `{results.get('run_id')}`",
        f"- **Status:** {status}",
        f"- **Created:** {results.get('created', 'unknown')}",
        f"- **Device:** {results.get('device', 'unknown')}",
        f"- **Git hash:** `{results.get('git_hash') or 'not in a git checkout'}`",
        "- **Versions:** " + (", ".join(f"{k} {v}" for k, v in versions.items()) or "unknown"),
        "",
        "## Setup",
        "",
        _cell(setup_note(results)),
        "",
    ]
    rows = summary_rows(results)
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        out += [f"## Results: {dataset}", ""]
        out += _table(TERMINAL_HEADERS, [row_cells(r) for r in rows if r["dataset"] == dataset])
        out += [
            "",
            "Attack AUC and TPR are those of the strongest attack (highest AUC) on each model; the TPR "
            "carries a 95% Clopper-Pearson interval.",
            "",
        ]
    headers, arows = attack_rows(results)
    if arows:
        out += ["## Membership attacks", ""] + _table(headers, arows) + [""]
    bug_lines = privacy_bug_lines(results)
    if bug_lines:
        out += ["## Privacy bugs", ""] + [f"> **{_cell(line)}**" for line in bug_lines] + [""]
    eheaders, erows, _ = empirical_rows(results)
    if erows:
        out += ["## Empirical privacy", ""] + _table(eheaders, erows) + ["", _cell(audit_note(results)), ""]
    recon = reconstruction_rows(results)
    if recon:
        out += ["## Reconstruction", ""] + _table(RECONSTRUCTION_HEADERS, recon) + ["", _cell(RECONSTRUCTION_NOTE), ""]
        for name, path in plots.items():
            if name.startswith("inversion_"):
                out += [f"![{plot_alt(name)}]({Path(path).name})", ""]
    other = {name: path for name, path in plots.items() if not name.startswith("inversion_")}
    if other:
        out += ["## Plots", ""]
        for name, path in other.items():
            out += [f"![{plot_alt(name)}]({Path(path).name})", ""]
    out += ["## Privacy notes", ""] + [f"- {_cell(note)}" for note in privacy_notes(results)]
    out += [
        "- Every ε above is the accountant's upper bound for the stated δ; a mechanism marked "
        "\"no guarantee\" has none, whatever ε its source claimed.",
        "- A TPR at an FPR below 10 / (number of non-members) cannot be measured and is shown as "
        "\"not measurable\".",
        "",
    ]
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        out += ["## Failed cells", ""]
        for r in failed:
            target = "no target ε" if r["target_epsilon"] is None else f"target ε {r['target_epsilon']:g}"
            out.append(f"- {r['dataset']} / {r['mechanism']} ({target}, seed {r['seed']}): "
                       f"{_cell(r.get('error') or 'unknown error')}")  # fmt: skip
        out.append("")
    return "\n".join(out)
