"""Issue 47's layers, one test per section it reshaped, against the constructed documents of conftest.py: the compact
table's cells (each number recomputed here from the document, never read back from the code's output) and what each
section folds; the answer and the badges; the audit and conformance columns picking up an audit and a test no code
names; the terminal's compact table."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from scipy.stats import beta

from attacks.conformance.hypothesis_tests.noise import noise_test
from reports.empirical import heuristic_rows
from reports.section import Badges, Details, Figures, Group, Table, Text
from reports.sections.attacks import Attacks
from reports.sections.audit.conformance import CONFORMANCE_HEADERS, conformance_cell, conformance_rows
from reports.sections.audit.section import Audit
from reports.sections.audit.table import audit_rows
from reports.sections.reconstruction.section import Reconstruction
from reports.sections.throughput.section import Throughput
from reports.sections.tradeoff import tradeoff_reading
from reports.sections.verdict.answer import answer, badges
from reports.sections.verdict.compact import KEY_MARKS, compact_tables
from reports.sections.verdict.section import Verdict
from reports.sections.verdict.table import VERDICT_HEADERS, verdict_tables
from reports.tables import attack_rows, summary_rows
from reports.terminal import render_terminal

PLOT = Path("unused.png")  # sections only name the plots they are given


def _interval(text: str) -> tuple[float, float, float]:
    """``"90.0 [88.6, 91.3]"`` -> (90.0, 88.6, 91.3)."""
    value, lower, upper = (float(x) for x in re.findall(r"[0-9.]+", text)[:3])
    return value, lower, upper


def _blocks(blocks, kind):
    return [b for b in blocks if isinstance(b, kind)]


def test_the_compact_table_holds_the_numbers_and_keys_every_epsilon(mnist_results):
    (table,) = compact_tables(mnist_results)
    rows = {" ".join(row[:2]): row for row in table.rows}
    assert list(rows) == ["baseline —", "dpsgd 1", "dpsgd 8", "dpmix 15", "weight-noise 10", "local-gaussian 1"]
    # the ε columns differ in provenance row to row: each ε carries a key that the legend spells out
    keys = dict(line.split(" ", 1) for line in table.keys)
    assert set(keys) <= set(KEY_MARKS)
    dp, mix = (next(k for k, v in keys.items() if v == text) for text in (
        "δ = 1e-05, opacus-prv, add/remove", "δ = 1e-04 (weak δ ≥ 1/n), dpmix-closed-form, replace-one"))
    assert (rows["dpsgd 1"][2], rows["dpsgd 8"][2], rows["dpmix 15"][2]) == (f"0.99{dp}", f"7.93{dp}", f"14.7{mix}")
    assert rows["weight-noise 10"][2] == "no guarantee (claimed 10)" and rows["baseline —"][2] == "no guarantee"
    # test accuracy with its 95% Clopper-Pearson interval over the fixture's 2,000 test images
    k, n = 1800, 2000
    assert _interval(rows["dpsgd 1"][3]) == pytest.approx(
        (90.0, 100 * beta.ppf(0.025, k, n - k + 1), 100 * beta.ppf(0.975, k + 1, n - k)), abs=0.051)
    # 0.1% FPR is not measurable with 2,000 non-members: the column reads 1%, the lowest level measurable on all
    assert table.headers[5] == "TPR @ 1% FPR, % [95% CI]" and table.axis.level == 0.01
    entry = mnist_results.results[1].attacks["loss"].metrics.tpr_at_fpr["0.01"]
    assert _interval(rows["dpsgd 1"][5]) == pytest.approx(
        (100 * entry.tpr, 100 * entry.lower, 100 * entry.upper), abs=0.051)
    assert rows["dpsgd 8"][5].endswith("; attack failed: lira")
    # the tightest valid bound of any audit, against the ε of the audit run (0.98, the same provenance as 0.99)
    canary = mnist_results.results[1].attacks["canary-whitebox"].audit
    best = max(b.epsilon_lb for b in canary.bounds if b.valid)
    assert rows["dpsgd 1"][6] == f"{best:.3g}\u00a0/\u00a00.98{dp}"
    weight = max(b.epsilon_lb for b in mnist_results.results[4].attacks["weight-canary"].audit.bounds if b.valid)
    assert rows["weight-noise 10"][6] == f"{weight:.3g}\u00a0/ claimed\u00a010"
    assert rows["baseline —"][6] == "no audit" and rows["baseline —"][7] == "—"  # no audit, no conformance test
    assert rows["local-gaussian 1"][2].startswith("failed: RuntimeError: CUDA out of memory")
    assert rows["local-gaussian 1"][3:] == ["—"] * 6
    assert rows["dpsgd 1"][8] == "4,100"
    # every cell's whole provenance is its title: the ε's is the verdict table's forty words
    assert table.titles[1][2] == summary_rows(mnist_results)[1]["privacy"] == (
        "ε = 0.99 (δ = 1e-05, opacus-prv, add/remove)")
    assert "canary-whitebox: white-box, one-run, m = 2000" in table.titles[1][6]
    assert table.row_css[0] == "frontier" and table.row_css[5] == "failed"


def test_the_verdict_section_opens_with_the_answer_and_folds_the_verdict_table(mnist_results):
    section = Verdict().build(mnist_results, {"pareto_mnist": PLOT})
    answer_text, status = section.blocks[:2]
    assert isinstance(answer_text, Text) and answer_text.css == "answer" and answer_text.text == answer(mnist_results)
    assert isinstance(status, Badges)
    (first,) = [b for b in _blocks(section.blocks, Group) if b.css == "first-screen"]
    html_table, md_table, pareto = first.blocks
    assert html_table.only == "html" and md_table.only == "markdown" and list(pareto.names) == ["pareto_mnist"]
    (table,) = compact_tables(mnist_results)
    assert [list(r) for r in md_table.rows] == table.rows and html_table.titles == table.titles
    # each mechanism links to its row of the folded verdict table, which holds every verdict cell
    (full,) = [b for b in _blocks(section.blocks, Details) if b.anchor == "full-mnist"]
    (verdict,) = verdict_tables(mnist_results)
    assert list(full.blocks[0].headers) == list(VERDICT_HEADERS)
    assert [list(r) for r in full.blocks[0].rows] == [row["cells"] for row in verdict["rows"]]
    assert full.blocks[0].row_ids[3] == "full-mnist-3" and 'href="#full-mnist-3">dpmix</a>' in html_table.rows[3][0]
    notes = [b for b in _blocks(section.blocks, Details) if b.summary == "Notes per mechanism"]
    assert notes and notes[0].blocks[0].lines[0].startswith("At target ε 1 under add/remove")


def test_the_answer_and_the_badges(mnist_results, build):
    # no target ε has two guaranteed mechanisms (local noise at ε 1 failed): each target's best is named; 6
    # comparisons: DP-SGD's white-box canaries (one-run, f-dp, its certified curve) 3, DPMix's (one-run, f-dp) 2,
    # weight noise's multi-run audit (Clopper-Pearson: its Gaussian analyses are estimates) 1
    assert answer(mnist_results) == (
        "With a formal guarantee, the most accurate is dpsgd at target ε 1, 8 and dpmix at target ε 15 (68.0–95.0% "
        "test accuracy); no privacy bug was found (Bonferroni over 6 comparisons); no model is degenerate.")
    got = {b.label: (b.count, b.anchor, b.tone) for b in badges(mnist_results)}
    assert got == {"privacy bugs": (0, "audit", "good"), "refuted claims": (0, "audit", "good"),
                   "degenerate models": (0, "verdict", "good"), "failed cell": (1, "failed-cells", "bad"),
                   "failed attack": (1, "failed-attacks", "bad")}
    # before the run-level check ran, no count of privacy bugs is claimed
    dp = build.privacy(2.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    partial = build.results([build.run("dpsgd", 2.0, dp, 0.9, {}), build.run("dpmix", 2.0, dp, 0.7, {})])
    bug = badges(partial)[0]
    assert bug.count is None and bug.number == "—" and "not checked" in bug.label
    assert "the privacy-bug check has not run" in answer(partial) and "dpsgd is the most accurate" in answer(partial)


def _conformance(sigma: float, extra: list[dict] | None = None) -> dict:
    rng = np.random.default_rng(0)
    x = rng.normal(0, sigma, 20_000)
    tests = [noise_test(f"noise σ, tensor {k} of 2", float((x**2).sum()), x.size, 2.0) for k in (1, 2)]
    return {"tests": tests + (extra or []), "measured_epsilon": {
        "epsilon": 1.96, "certified": 2.0, "delta": 1e-5, "relation": "add-remove",
        "accountant": "dp_accounting-pld", "confidence": 0.95, "parameters": {"noise_multiplier": 2.01}}}


def test_audit_and_conformance_columns_pick_up_an_audit_and_a_test_no_code_names(build):
    """A new audit (its own attack name, a black-box one-run design) and a new conformance test appear in the compact
    table and the folded conformance table as they are in results.json; a rejected test fails the column."""
    rng = np.random.default_rng(5)
    dp = build.privacy(2.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    novel = {"name": "initial-model drift", "quantity": "noise shape", "certified": 0.0, "measured": 0.1, "n": 500,
             "p_value": 0.3, "alternative": "two-sided", "validity": "simulated", "deciding": False}
    runs = [build.run("dpsgd", 2.0, dp, 0.9, {
        "canary-whitebox": {**build.canary("canary-whitebox", rng, 400, 0.0), "conformance": _conformance(2.0)},
        "initial-model-audit": {**build.canary("initial-model-audit", rng, 1000, 1.5, threat_model="black-box"),
                                "conformance": {"tests": [novel]}}}),
        build.run("dpsgd", 3.0, dp, 0.9, {"canary-whitebox": {**build.canary("canary-whitebox", rng, 400, 0.0),
                                                               "conformance": _conformance(1.9)}})]
    doc = build.checked(runs)
    (table,) = compact_tables(doc)
    cell, title = conformance_cell(doc, doc.results[0])
    assert cell == table.rows[0][7] == "passed (3)"  # two noise tests and the measured ε; the new test decides nothing
    assert "initial-model-audit: initial-model drift: measured 0.1 vs certified 0, p = 0.3 (shown, not deciding)" \
        in title
    novel_bound = max(b.epsilon_lb for b in doc.results[0].attacks["initial-model-audit"].audit.bounds if b.valid)
    assert table.rows[0][6].startswith(f"{novel_bound:.3g}\u00a0/\u00a02")
    assert "initial-model-audit: black-box, one-run, m = 1000" in table.titles[0][6]
    (bug,) = doc.privacy_bugs  # σ × 0.95: a noise test rejects
    assert table.rows[1][7] == f"FAILED: {bug.test}" and table.row_css[1] == "bug"
    rows = conformance_rows(doc)
    assert len(CONFORMANCE_HEADERS) == len(rows[0])
    assert [r[2:4] for r in rows if r[1] == "2"] == [
        ["canary-whitebox", "noise σ, tensor 1 of 2"], ["canary-whitebox", "noise σ, tensor 2 of 2"],
        ["initial-model-audit", "initial-model drift"], ["canary-whitebox", "ε from measured parameters"]]
    measured = next(r for r in rows if r[3] == "ε from measured parameters")
    assert measured[4] == "ε certified 2 · from measured parameters ≥ 1.96 (add/remove, dp_accounting-pld, 95%)"
    section = Audit().build(doc, {"audit_tightness": PLOT})
    assert section.title == "Audits and conformance" and list(section.blocks[0].names) == ["audit_tightness"]
    (folded,) = [b for b in _blocks(section.blocks, Details) if b.anchor == "conformance"]
    assert [list(r) for r in folded.blocks[0].rows] == rows


def test_the_audit_section_reads_first_and_folds_its_tables(mnist_results):
    section = Audit().build(mnist_results, {"audit_tightness": PLOT})
    figure, reading = section.blocks[:2]
    assert isinstance(figure, Figures) and figure.css == "narrow"
    assert reading.css == "reading" and reading.text.startswith("Audits (valid bounds only): the tightest against")
    folded = {b.summary.split(":")[0]: b for b in _blocks(section.blocks, Details)}
    headers, rows, _ = audit_rows(mnist_results)
    assert [list(r) for r in folded["Audit table"].blocks[0].rows] == rows
    assert "Every analysis of every audit" in folded and "Conformance" not in folded  # the fixture measured none


def test_the_attacks_section_opens_with_the_strongest_attacks_and_folds_the_rest(mnist_results):
    section = Attacks().build(mnist_results, {"roc_strongest_mnist": PLOT, "roc_mnist": PLOT})
    figure, reading = section.blocks[:2]
    assert list(figure.names) == ["roc_strongest_mnist"]
    assert reading.text.startswith("Membership attacks beat chance on: baseline (loss")
    grid, attacks, heuristic = _blocks(section.blocks, Details)
    assert list(grid.blocks[0].names) == ["roc_mnist"]
    assert [list(r) for r in attacks.blocks[0].rows] == attack_rows(mnist_results)[1]
    assert heuristic.anchor == "heuristic" and [list(r) for r in heuristic.blocks[0].rows] == heuristic_rows(
        mnist_results)[1]
    fig = Attacks().figures(mnist_results)["roc_strongest_mnist"]
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_visible())
    assert titles == ["baseline", "dpmix", "dpsgd", "weight-noise"]  # one panel per mechanism that was attacked


def test_tradeoff_throughput_and_reconstruction_readings(mnist_results, build):
    assert tradeoff_reading(mnist_results) == ("Test accuracy from the smallest to the largest target ε: dpsgd 90.0% "
                                               "at target ε 1 → 95.0% at 8.")
    doc = mnist_results.model_copy(deep=True)
    doc.results[1].timings.samples_per_s, doc.results[3].timings.samples_per_s = 900.0, 52_000.0
    section = Throughput().build(doc, {"throughput": PLOT})
    assert section.blocks[1].text == ("Training throughput from 900 samples/s (dpsgd at target ε 1) to 52,000 "
                                      "samples/s (dpmix at target ε 15), wall clock, device cpu.")
    (phases,) = _blocks(section.blocks, Details)
    assert isinstance(phases.blocks[0], Table) and len(phases.blocks[0].rows) == len(doc.results)
    images = {"attack": "miface", "shape": [8, 8], "images": [[0] * 64] * 2, "labels": [0, 1], "metrics": {}}
    none = build.privacy()
    runs = [build.run("baseline", None, none, 0.9, {}, inversion={"miface": images, "other": {**images,
                                                                                             "attack": "other"}}),
            build.run("weight-noise", 1.0, none, 0.9, {}, inversion={"miface": images})]
    plots = {"inversion_mnist_miface": PLOT, "inversion_mnist_other": PLOT}
    section = Reconstruction().build(build.results(runs), plots)
    assert list(section.blocks[0].names) == ["inversion_mnist_other"]  # the grid of the fewest models opens the section
    others, scores = _blocks(section.blocks, Details)
    assert list(others.blocks[0].names) == ["inversion_mnist_miface"] and len(scores.blocks[0].rows) == 3


def test_the_terminal_prints_the_answer_and_the_compact_table(mnist_results):
    console = Console(record=True, width=200, file=io.StringIO())
    render_terminal(mnist_results, console=console)
    text = console.export_text()
    assert text.splitlines()[1] == answer(mnist_results)[: len(text.splitlines()[1])]
    header = next(line for line in text.splitlines() if "mechanism" in line and "samples/s" in line)
    assert "audit ε_LB / ε" in header and "conformance (tests)" in header
    assert sum(line.startswith("│ ") for line in text.splitlines()) >= len(mnist_results.results)
    assert "ε keys: " in " ".join(text.split()) and "Audit table" not in text  # the compact table alone
