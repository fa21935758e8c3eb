"""The Audit section, the privacy-bug and refuted-claim lines, the heuristic table, the tightness plot and the ROC
panels, from typed ``Results`` checked by the runner's own run-level check (``attacks.analysis.privacy_bugs.check``)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console

from reports import write_reports
from reports.bounds import BUG_MARK, REFUTED_MARK
from reports.common import num
from reports.empirical import bug_lines, heuristic_rows, privacy_bug_lines, refuted_claim_lines
from reports.markdown import render_markdown
from reports.plots import roc_figure
from reports.sections.audit.plots import tightness_figure, tightness_points
from reports.sections.audit.table import audit_rows
from reports.sections.verdict.notes import verdict_headline, verdict_notes
from reports.sections.verdict.table import verdict_tables
from reports.tables import summary_rows
from reports.terminal import render_terminal

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EPS_RE = re.compile(r"(claimed )?ε = ([0-9][0-9.e+-]*)")
WITH_DELTA = re.compile(r" \(δ = [0-9.e+-]+, (opacus-prv|dpmix-closed-form), (add/remove|replace-one)\)")


@pytest.fixture(scope="module")
def doc(build):
    """A baseline (a heuristic attack only); DP-SGD at target ε 0.5 whose white-box one-run canaries (m = 2000,
    trained in an audit run certified at ε 0.5) separate at 3σ — a privacy bug — and whose heuristic loss attack
    separates as well (never a bug); DPMix (replace-one) audited only by add/remove input canaries (not comparable);
    weight noise whose claimed ε 1 a multi-run audit (R = 1000, Gaussian by construction) refutes."""
    rng = np.random.default_rng(1)
    dp = {"accountant": "opacus-prv", "guarantee": "central-dp", "relation": "add-remove"}
    audit_run = build.privacy(0.5, 1e-5, **dp, profile=[[0.5, 1e-5], [1.0, 1e-7]])
    runs = [
        build.run("baseline", None, build.privacy(), 0.9, {"loss": build.attack("loss", rng, 2000, 1.0)}),
        build.run("dpsgd", 0.5, build.privacy(0.52, 1e-5, **dp), 0.9, {
            "loss": build.attack("loss", rng, 2000, 3.0),
            "canary-whitebox": build.canary("canary-whitebox", rng, 2000, 3.0, audited=audit_run,
                                            profile=audit_run["profile"])}),
        build.run("dpmix", 4.0, build.privacy(4.0, 1e-5, "dpmix-closed-form", "dp-release", relation="replace-one"),
                  0.5, {"canary": build.canary("canary", rng, 400, 2.0, threat_model="black-box")}),
        build.run("weight-noise", 1.0, build.privacy(claimed=1.0), 0.9, {
            "weight-canary": build.canary("weight-canary", rng, 1000, 4.0, threat_model="black-box",
                                          kind="multi-run", gaussian=True)}),
    ]  # fmt: skip
    return build.checked(runs)


def _valid(doc, mechanism, attack):
    r = next(r for r in doc.results if r.mechanism == mechanism)
    return [b for b in r.attacks[attack].audit.bounds if b.valid]


def test_the_run_level_check_counts_what_the_design_allows(doc):
    """DP-SGD's white-box one-run canaries: one-run and f-dp (assumption-free) and the certified-curve test = 3
    comparisons (the μ-GDP analysis of their log-likelihood ratios, gaussian-llr, is an estimate: none);
    DPMix's add/remove canaries are not compared with a replace-one ε; weight noise's multi-run audit compares its
    clopper-pearson bound with the claimed ε, and only it: its gdp-fit and gaussian-pair are estimates, even on
    scores Gaussian by construction whose normality test passes."""
    weight = next(r for r in doc.results if r.mechanism == "weight-noise").attacks["weight-canary"].audit.bounds
    pair = next(b for b in weight if b.method == "gaussian-pair")
    assert pair.fit["normality_p"] >= 0.01 and not pair.valid and pair.evidence == "estimate"
    assert [b.method for b in _valid(doc, "weight-noise", "weight-canary")] == ["clopper-pearson"]
    assert {b.method for b in _valid(doc, "dpsgd", "canary-whitebox")} == {"one-run", "f-dp"}
    assert doc.audit.comparisons == 3 + 1
    assert [(b.mechanism, b.attack) for b in doc.privacy_bugs] == [("dpsgd", "canary-whitebox")]
    assert [(b.mechanism, b.attack) for b in doc.refuted_claims] == [("weight-noise", "weight-canary")]


def test_privacy_bug_line_names_audit_design_accountant_and_correction(doc):
    [line] = bug_lines(doc)
    assert privacy_bug_lines(doc) == [line, *refuted_claim_lines(doc)]  # what bench prints: bugs, then claims
    m = re.fullmatch(r"PRIVACY BUG: dpsgd \(target ε 0\.5, seed 0\): canary-whitebox \(white-box, one-run, m = 2000, "
                     r"(one-run|f-dp)\) ε_LB ([0-9.]+) exceeds the accountant's ε = 0\.5 "
                     r"\(δ = 1e-05, opacus-prv, add/remove\), at 98\.75% \(Bonferroni over 4 comparisons\)", line)
    assert m, line
    assert float(m.group(2)) > 0.5  # compared with the audit run's ε 0.5, not the model's 0.52
    md = render_markdown(doc, {})
    assert md.index("## Privacy bugs") < md.index("## Verdict: mnist") < md.index("## Audit")
    assert f"> **{line}**" in md
    assert privacy_bug_lines(doc.model_copy(update={"privacy_bugs": [], "refuted_claims": []})) == []


def test_a_rejected_certified_curve_is_a_privacy_bug_line(doc):
    """The one-run test of the accountant's whole (ε, δ) curve has no ε_LB: its line says what it rejects."""
    curve = doc.privacy_bugs[0].model_copy(update={"method": "certified-curve", "lower_bound": None})
    [line] = bug_lines(doc.model_copy(update={"privacy_bugs": [curve]}))
    assert line == ("PRIVACY BUG: dpsgd (target ε 0.5, seed 0): canary-whitebox (white-box, one-run, m = 2000) rejects "
                    "the accountant's whole certified (ε, δ) curve, of which ε = 0.5 (δ = 1e-05, opacus-prv, "
                    "add/remove) is one point, at 98.75% (Bonferroni over 4 comparisons)")
    _, rows, flags = audit_rows(doc.model_copy(update={"privacy_bugs": [curve]}))
    assert flags[1] == "bug" and rows[1][-1] == (
        f"{BUG_MARK}: canary-whitebox (white-box, one-run, m = 2000) rejects the accountant's whole certified (ε, δ) "
        "curve at 98.75% (Bonferroni over 4 comparisons)")


def test_refuted_claim_is_shown_and_is_not_a_privacy_bug(doc, tmp_path):
    [line] = refuted_claim_lines(doc)
    assert line.startswith(f"{REFUTED_MARK}: weight-noise (target ε 1, seed 0), no guarantee: weight-canary "
                           "(black-box, multi-run, R = 1000, ")
    assert "exceeds the claimed ε 1 " in line and "not a privacy bug" in line and "Bonferroni over 4" in line
    assert "clopper-pearson" in line  # refuted by the valid bound, not by the Gaussian estimates
    assert all("weight-noise" not in bug for bug in bug_lines(doc)) and privacy_bug_lines(doc)[-1] == line
    headers, rows, flags = audit_rows(doc)
    weight = rows[3]
    assert flags == ["", "bug", "", "refuted"] and weight[-1].startswith(f"{REFUTED_MARK}: weight-canary")
    md = render_markdown(doc, {})
    audit = md.split("## Audit", 1)[1].split("\n## ", 1)[0]
    assert "**1 claimed ε value(s) refuted by valid audits**" in md and f"- {line}" in audit
    assert any(h.startswith("Refuted by the audits") for h in verdict_headline(doc)["mnist"])
    html = write_reports(doc, tmp_path)["html"].read_text()
    assert '<tr class="refuted">' in html and '<tr class="bug">' in html and '<ul class="refuted">' in html


def test_audit_rows_compare_each_threat_model_with_the_audited_runs_epsilon(doc):
    headers, rows, _ = audit_rows(doc)
    assert headers[:3] == ["mechanism", "target ε", "accountant ε (δ, accountant, relation)"]
    assert headers[3].startswith("white-box ε_LB") and headers[5].startswith("black-box ε_LB")
    base, dpsgd, dpmix, weight = rows
    assert base[3] == "no audit" and base[-1] == "no ε to test"
    # DP-SGD: the audit ran in its own run (ε 0.5); the ratio is to that ε
    assert dpsgd[2] == ("ε = 0.52 (δ = 1e-05, opacus-prv, add/remove); "
                        "audit run: ε = 0.5 (δ = 1e-05, opacus-prv, add/remove)")
    best = max(_valid(doc, "dpsgd", "canary-whitebox"), key=lambda b: b.epsilon_lb)
    assert dpsgd[3] == f"{num(best.epsilon_lb)} (canary-whitebox: white-box, one-run, m = 2000, {best.method}, 95%)"
    assert dpsgd[4] == num(best.epsilon_lb / 0.5) and dpsgd[5] == "no audit"
    assert dpsgd[-1].startswith(f"{BUG_MARK}: canary-whitebox (white-box, one-run, m = 2000, ")
    # DPMix: the add/remove canaries are shown but not compared with the replace-one ε
    assert dpmix[5].startswith("") and "(canary: black-box, one-run, m = 400, " in dpmix[5]
    assert dpmix[6] == "— (the audit tests add/remove, the ε is for replace-one)"
    assert dpmix[-1] == "no comparable audit (the audit tests add/remove, the ε is for replace-one)"
    assert weight[6].endswith("(claimed ε)")


def test_ratios_are_to_the_epsilon_of_the_audits_own_relation(build, tmp_path):
    """DP-SGD as the suite trains it: replace-one ε 1 (its headline) with its add/remove ε 0.62 beside. Its canaries
    test add/remove, so every ratio (audit table, notes, CSV) divides by 0.62 and says so, never "not compared"."""
    rng = np.random.default_rng(5)
    dp = {**build.privacy(1.0, 1e-5, "dp_accounting-pld", "central-dp", relation="replace-one"),
          "other_relations": [{"relation": "add-remove", "epsilon": 0.62, "accountant": "opacus-prv"}]}
    doc = build.checked([build.run("dpsgd", 1.0, dp, 0.9, {
        "canary-whitebox": build.canary("canary-whitebox", rng, 2000, 0.3)})])
    best = max(_valid(doc, "dpsgd", "canary-whitebox"), key=lambda b: b.epsilon_lb)
    assert doc.audit.comparisons == 2  # one-run and f-dp (gaussian-llr is an estimate), against the add/remove ε
    _, (row,), _ = audit_rows(doc)
    assert row[4] == f"{num(best.epsilon_lb / 0.62)} (add/remove ε); {num(best.epsilon_lb / 1.0)} (replace-one ε)"
    (summary,) = summary_rows(doc)
    assert summary["epsilon_lb_ratio"] == pytest.approx(best.epsilon_lb / 0.62)
    assert summary["epsilon_lb_ratio_headline"] == pytest.approx(best.epsilon_lb / 1.0)  # against both relations
    assert (summary["epsilon_lb_reference"], summary["epsilon_lb_relation"]) == (0.62, "add-remove")
    md = render_markdown(doc, {})
    assert "not compared" not in md and "the accountant's add/remove ε 0.62 (opacus-prv)" in md


def test_the_largest_of_several_audits_says_so(build):
    """A model with black-box and white-box canaries: the verdict's single ε_LB is a maximum over both audits."""
    rng = np.random.default_rng(4)
    dp = build.privacy(4.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    doc = build.checked([build.run("dpsgd", 4.0, dp, 0.9, {
        "canary": build.canary("canary", rng, 400, 0.0, threat_model="black-box"),
        "canary-whitebox": build.canary("canary-whitebox", rng, 2000, 1.0)})])
    (table,) = verdict_tables(doc)
    cell = table["rows"][0]["cells"][4]
    assert cell.startswith(f"{num(doc.results[0].attacks['canary-whitebox'].audit.epsilon_lb)} (canary-whitebox: ")
    assert cell.endswith("95%); the largest of 2 audits")
    _, (row,), _ = audit_rows(doc)
    assert "largest of" not in row[3] + row[5]  # one audit per threat model


def test_parametric_column_names_assumption_and_normality(build):
    """White-box canaries: the largest estimate whose assumption stands its test (the Gaussian pair's normality
    test, ``gaussian-llr``'s shape test of the excluded canaries) is shown as an estimate with its assumption, at the
    audit's 95 %; where every tested assumption is rejected (skewed scores), "assumption rejected"."""
    rng = np.random.default_rng(2)
    dp = build.privacy(4.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    runs = [build.run("dpsgd", 4.0, dp, 0.9, {"canary-whitebox": build.canary("canary-whitebox", rng, 2000, 0.5)}),
            build.run("dpsgd", 8.0, dp, 0.9, {"canary-whitebox": build.canary("canary-whitebox", rng, 2000, 0.5,
                                                                              dist="exponential")})]
    doc = build.checked(runs)
    p_normal, p_skewed = (next(b.fit["normality_p"] for b in r.attacks["canary-whitebox"].audit.bounds
                               if b.method == "gaussian-pair") for r in doc.results)
    assert p_normal >= 0.01 > p_skewed
    tested = [(b, b.fit.get("normality_p", b.fit.get("shape_p", b.fit.get("shape_excluded_p"))))
              for b in doc.results[0].attacks["canary-whitebox"].audit.bounds if b.evidence == "estimate" and b.fit]
    best, p_best = max(((b, p) for b, p in tested if p >= 0.01), key=lambda bp: bp[0].epsilon_lb)
    _, (normal, skewed), _ = audit_rows(doc)
    # an estimate is made at the audit's 95 % (the two valid analyses, one-run and f-dp, share the 95 % at 97.5 %
    # each; an estimate takes no share), and never called a bound
    assert normal[7].startswith(f"estimate {num(best.epsilon_lb)} (canary-whitebox: white-box, one-run, m = 2000, "
                                f"{best.method}, 95%); assumes ")
    assert normal[7].endswith(f"(plausible: normality p = {p_best:.2g}, level 0.01)")
    rejected = [p for b, p in ((b, b.fit.get("normality_p", b.fit.get("shape_p", b.fit.get("shape_excluded_p"))))
                               for b in doc.results[1].attacks["canary-whitebox"].audit.bounds
                               if b.evidence == "estimate" and b.fit) if p < 0.01]
    assert skewed[7] == f"assumption rejected (normality p = {min(rejected):.2g} < 0.01)"  # every test rejects


def test_audit_section_names_delta_accountant_relation_beside_every_epsilon(doc, tmp_path):
    """The Audits and conformance section follows the membership attacks (whose folded details hold the heuristic
    bounds), every ε in it with its δ, accountant and relation; the terminal's compact table marks the privacy bug
    and the refuted claim in its audit column."""
    md = render_markdown(doc, {})
    order = ["## Membership attacks", "Heuristic ε lower bounds", "## Audits and conformance"]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    audit = md.split("## Audits and conformance", 1)[1].split("\n## ", 1)[0]
    found = [m for m in EPS_RE.finditer(audit) if not m.group(1)]
    assert [m.group(2) for m in found] == ["0.52", "0.5", "4"]  # the model, its audit run, DPMix
    for m in found:
        assert WITH_DELTA.match(audit[m.end():m.end() + 60]), audit[m.start():m.end() + 60]
    html = write_reports(doc, tmp_path)["html"].read_text()
    assert html.index('<section id="tradeoff">') < html.index('<section id="attacks">') \
        < html.index('id="heuristic"') < html.index('<section id="audit">')
    console = Console(record=True, width=300, file=io.StringIO())
    render_terminal(doc, console=console)
    text = console.export_text()
    assert "PRIVACY BUG" in next(line for line in text.splitlines() if "│ dpsgd" in line)
    assert REFUTED_MARK in next(line for line in text.splitlines() if "│ weight-noise" in line)


def test_a_heuristic_bound_is_never_a_finding(build):
    """DP-SGD at ε 0.5 whose membership attack separates members at 3σ: its heuristic bound is far above 0.5, yet
    without an audit nothing calls it leakage or a bug."""
    rng = np.random.default_rng(3)
    dp = build.privacy(0.5, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    doc = build.checked([build.run("dpsgd", 0.5, dp, 0.9, {"loss": build.attack("loss", rng, 2000, 3.0)})])
    heuristic = doc.results[0].attacks["loss"].audit
    assert heuristic.epsilon_lb > 1.0 and not any(b.valid for b in heuristic.bounds)
    assert doc.privacy_bugs == [] and doc.audit.comparisons == 0
    headers, rows = heuristic_rows(doc)
    assert headers[-1] == "ε_LB loss (heuristic)" and rows[0][-1] == num(heuristic.epsilon_lb)
    (row,) = summary_rows(doc)
    assert row["epsilon_lb"] is None and row["epsilon_lb_attack"] is None
    (table,) = verdict_tables(doc)
    assert table["rows"][0]["cells"][4] == "no audit" and not table["rows"][0]["bug"]
    words = " ".join(verdict_headline(doc)["mnist"] + verdict_notes(doc)["mnist"])
    assert BUG_MARK not in words and num(heuristic.epsilon_lb) not in words
    assert "heuristic (they assume independent outcomes) and are evidence neither of leakage nor of a bug" in words
    md = render_markdown(doc, {})
    assert md.count(num(heuristic.epsilon_lb)) == 1  # the heuristic table's cell, nowhere else


def test_tightness_plot_shows_valid_compared_bounds_only(doc, tmp_path):
    points = tightness_points(doc.results)
    assert [(b.result.mechanism, b.threat_model, b.reference) for b in points] == [
        ("dpsgd", "white-box", 0.5), ("weight-noise", "black-box", 1.0)]
    fig = tightness_figure(doc.results, [*doc.privacy_bugs, *doc.refuted_claims])
    (ax,) = [a for a in fig.axes if a.get_visible()]
    ys = sorted(float(y) for c in ax.collections for _, y in c.get_offsets())
    heuristic = doc.results[1].attacks["loss"].audit.epsilon_lb
    assert heuristic not in ys and {round(b.value, 9) for b in points} <= {round(y, 9) for y in ys}
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("ε_LB = ε" in t for t in texts) and any("one-run, m = 2000" in t for t in texts)
    assert any("claimed ε" in t for t in texts) and ax.get_xscale() == "log"
    paths = write_reports(doc, tmp_path)
    assert paths["audit_tightness"].read_bytes()[:8] == PNG_MAGIC


def test_roc_panels_draw_canary_audits_dashed_with_their_design(doc):
    fig = roc_figure(doc.results)
    axes = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    lines = {line.get_label(): line for line in axes["dpsgd, target ε = 0.5"].get_lines()}
    canary = next(lbl for lbl in lines if lbl.startswith("canary-whitebox"))
    assert canary.startswith("canary-whitebox (white-box, one-run, m = 2000; AUC ")
    assert lines[canary].get_linestyle() == "--"
    loss = next(lbl for lbl in lines if lbl.startswith("loss"))
    assert lines[loss].get_linestyle() == "-"
    weight = [line.get_label() for line in axes["weight-noise, target ε = 1"].get_lines()]
    assert any(lbl.startswith("weight-canary (black-box, multi-run, R = 1000;") for lbl in weight)
    assert any("claimed" in lbl for lbl in weight)
