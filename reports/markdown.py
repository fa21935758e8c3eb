"""The Markdown report (GitHub flavour): the verdict per dataset, the evidence (tables and plots), the failures and
the provenance, from a ``bench.results.Results``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.results import Results
from reports.audit import DETAIL_HEADERS, DETECTION_NOTE, audit_detail_rows, audit_note, audit_rows, detection_rows
from reports.bounds import BUG_MARK, REFUTED_MARK
from reports.common import target_text
from reports.curves import CURVES_NOTE
from reports.empirical import bug_lines, heuristic_note, heuristic_rows, refuted_claim_lines
from reports.feature_maps import FEATURES_NOTE, features_text
from reports.phases import PHASE_HEADERS, PHASE_NOTE, phase_rows, run_lines
from reports.plots import plot_alt, plot_section, slug
from reports.provenance import PROVENANCE_HEADERS, provenance_rows, run_facts
from reports.reconstruction import RECONSTRUCTION_HEADERS, RECONSTRUCTION_NOTE, reconstruction_rows
from reports.reproduction import REPRODUCTION_HEADERS, reproduction_commands, reproduction_rows
from reports.tables import attack_rows, failed_attack_lines, privacy_notes, setup_note, summary_rows
from reports.verdict import VERDICT_HEADERS, verdict_tables
from reports.verdict_notes import verdict_headline, verdict_notes

VERDICT_LEGEND = (
    "TPR at 0.1% FPR: the membership attack with the highest TPR there, its 95% Clopper-Pearson interval "
    "(chance 0.1%; the interval is not corrected for picking the best attack: the notes above say what survives "
    "the correction). Audit ε_LB: the tightest valid bound of the model's audits (one-run canaries or multi-run), "
    "95% on its own, with its audit, threat model, design and method (see Audit); heuristic bounds never appear here."
)


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


def _verdicts(results: Results, plots: dict[str, Path]) -> list[str]:
    out: list[str] = []
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
                f"({v['axis'].description}). " + VERDICT_LEGEND, ""]
    return out


def _audit(results: Results, plots: dict[str, Path]) -> list[str]:
    """The Audit section (first of the evidence): the table, its note, the tightness plot and the details."""
    headers, rows, flags = audit_rows(results)
    images = _images(plots, "audit")
    power_headers, power_rows = detection_rows(results)
    if not rows and not images and not power_rows:
        return []
    out = ["## Audit", ""] + [f"- {_cell(line)}" for line in refuted_claim_lines(results)]
    out += [""] if out[-1] else []
    if rows:
        marks = {"bug": f"**{BUG_MARK}** ", "refuted": f"**{REFUTED_MARK}** "}
        out += _table(headers, [[marks.get(f, "") + row[0], *row[1:]] for row, f in zip(rows, flags, strict=True)])
        out += ["", _cell(audit_note(results)), ""]
    out += images
    if power_rows:
        out += ["### What this run could have caught", ""] + _table(power_headers, power_rows)
        out += ["", _cell(DETECTION_NOTE), ""]
    details = audit_detail_rows(results)
    if details:
        out += ["<details><summary>Every analysis of every audit</summary>", ""]
        out += _table(DETAIL_HEADERS, details) + ["", "</details>", ""]
    return out


def _evidence(results: Results, plots: dict[str, Path]) -> list[str]:
    """Audit, Privacy vs utility, Heuristic bounds, Membership attacks, Throughput, Released data, Reconstruction,
    Training curves, What the convolutions see (always, saying so when no model is a CNN) and Reproduction (each
    other only where it has something to show)."""
    out = _audit(results, plots)
    tradeoff = _images(plots, "tradeoff")
    out += ["## Privacy vs utility", ""] + tradeoff if tradeoff else []
    hheaders, hrows = heuristic_rows(results)
    if hrows:
        out += ["## Heuristic ε lower bounds (assume independent outcomes)", ""] + _table(hheaders, hrows)
        out += ["", _cell(heuristic_note()), ""]
    headers, arows = attack_rows(results)
    if arows:
        out += ["## Membership attacks", ""] + _table(headers, arows) + [""]
    out += _images(plots, "attacks")
    out += ["## Throughput", ""] + _images(plots, "throughput") + [f"- {_cell(line)}" for line in run_lines(results)]
    out += [""] + _table(PHASE_HEADERS, phase_rows(results)) + ["", _cell(PHASE_NOTE), ""]
    releases = _images(plots, "releases")
    out += ["## Released data", ""] + releases if releases else []
    recon = reconstruction_rows(results)
    if recon:
        out += ["## Reconstruction", ""] + _table(RECONSTRUCTION_HEADERS, recon) + ["", _cell(RECONSTRUCTION_NOTE), ""]
        out += _images(plots, "reconstruction")
    curves = _images(plots, "curves")
    if curves:
        csvs = [f"[{Path(p).stem}.csv]({Path(p).stem}.csv)" for n, p in plots.items() if plot_section(n) == "curves"]
        out += ["## Training curves", ""] + curves + [_cell(CURVES_NOTE) + " Numbers: " + ", ".join(csvs) + ".", ""]
    out += ["## What the convolutions see", ""] + _images(plots, "features")
    out += [f"- {_cell(line)}" for line in features_text(results)] + ["", _cell(FEATURES_NOTE), ""]
    repro = reproduction_rows(results)
    if repro:
        out += ["## Reproduction", ""] + _table(REPRODUCTION_HEADERS, repro) + [""]
        out += _images(plots, "reproduction")
        out += [f"- `{command}`" for command in reproduction_commands(results)] + [""]
    return out


def _failures(results: Results) -> list[str]:
    """The Failed cells and Failed attacks sections (each only where something failed)."""
    out: list[str] = []
    failed = [r for r in summary_rows(results) if r["status"] != "ok"]
    if failed:
        out += ["## Failed cells", ""]
        for r in failed:
            target = "no target ε" if r["target_epsilon"] is None else f"target ε {target_text(r['target_epsilon'])}"
            out.append(f"- {r['dataset']} / {r['mechanism']} ({target}, seed {r['seed']}): "
                       f"{_cell(r['error'] or 'unknown error')}")  # fmt: skip
        out.append("")
    attacks = failed_attack_lines(results)
    if attacks:
        out += ["## Failed attacks", ""] + [f"- {_cell(line)}" for line in attacks] + [""]
    return out


def _setup_and_provenance(results: Results) -> list[str]:
    out = ["## Setup and guarantees", "", _cell(setup_note(results)), ""]
    out += [f"- {_cell(note)}" for note in privacy_notes(results)]
    out += [
        "- Every ε above is the accountant's upper bound for the stated δ and neighbouring relation; a mechanism "
        "marked \"no guarantee\" has none, whatever ε its source claimed.",
        "- A TPR at an FPR below 10 / (number of non-members) cannot be measured and is shown as "
        "\"not measurable\".",
        "",
    ]
    out += _failures(results)
    out += ["## Provenance", ""] + [f"- **{key}:** {_cell(value)}" for key, value in run_facts(results)] + [""]
    out += _table(PROVENANCE_HEADERS, provenance_rows(results)) + [""]
    config = json.dumps(results.config, indent=2, sort_keys=True, default=str)
    return out + ["<details><summary>Resolved configuration</summary>", "", "```json", config, "```", "",
                  "</details>", ""]


def render_markdown(results: Results, plots: dict[str, Path]) -> str:
    """Render the whole report as GitHub Markdown, in the order of the HTML page: verdict first, then the
    evidence, then the failures and the provenance.

    Args:
        results: the whole results document.
        plots: ``{stem: path}`` from ``reports.plots.make_plots``; images are linked by file name,
            so the report must sit in the same directory as the PNGs.

    Returns:
        The Markdown text (ends with a newline).
    """
    out = _head(results) + _verdicts(results, plots) + _evidence(results, plots) + _setup_and_provenance(results)
    return "\n".join(out)
