"""The "Audit" section, first of the evidence.

Per model, the accountant's ε next to the tightest valid ε lower bound per threat model (white-box, hidden-state where
one ran, black-box) with its audit, design, method and confidence, the ratio ε_LB / ε, the largest estimate whose
assumption stands its test (labelled "estimate (assumes …)": never a bound), and the run-level verdict (privacy bug,
refuted claim, or not refuted); and the details: every analysis of every audit. Reads ``reports.bounds`` (which bounds
are evidence) and the ``privacy_bugs`` / ``refuted_claims`` of the run-level check.
"""

from __future__ import annotations

from attacks.analysis import METHODS, NORMALITY_LEVEL
from bench.results import Results, RunResult
from reports.bounds import (
    BUG_MARK,
    REFUTED_MARK,
    THREAT_MODELS,
    AuditBound,
    audit_bounds_of,
    bug_audit,
    bug_value,
    bugs_for,
    design_text,
    family,
    family_text,
    percent,
    ratio_text,
    refuted_for,
    tightest_text,
    tightest_valid,
    value_text,
)
from reports.common import DASH, format_privacy, has_guarantee, is_failed, model_label, target_of, target_text
from reports.estimates import assumption_text, plausible_bounds

DETAIL_HEADERS = ("mechanism", "target ε", "audit", "threat model", "design", "method", "ε_LB", "confidence",
                  "evidence", "assumption")  # fmt: skip


def _several(results: Results) -> tuple[bool, bool]:
    ok = [r for r in results.results if not is_failed(r)]
    return len({r.dataset for r in ok}) > 1, len({r.seed for r in ok}) > 1


def _model(r: RunResult, seeds: bool) -> str:
    return model_label(r) + (f" (seed {r.seed})" if seeds else "")


OPTIONAL_THREAT_MODELS = ("hidden-state", "black-box-crafted")  # a column only where an audit of it ran


def threat_models(results: Results) -> tuple[str, ...]:
    """The Audit table's threat models: white-box and black-box, and the optional ones where an audit of them ran."""
    ran = {b.threat_model for r in results.results if not is_failed(r) for b in audit_bounds_of(r)}
    return tuple(tm for tm in THREAT_MODELS if tm not in OPTIONAL_THREAT_MODELS or tm in ran)


def audit_headers(results: Results) -> list[str]:
    """The Audit table's headers (``dataset`` first only when the run has several)."""
    datasets, _ = _several(results)
    heads = ["mechanism", "target ε", "accountant ε (δ, accountant, relation)"]
    for tm in threat_models(results):
        heads += [f"{tm} ε_LB (audit: design, method, confidence)", f"{tm} ε_LB / ε"]
    heads += ["estimate (assumes Gaussian scores; not a bound)", "run-level check"]
    return (["dataset"] if datasets else []) + heads


def _privacy_cell(r: RunResult) -> str:
    """The model's ε, and the audit run's where an audit ran in one with a different certified ε."""
    text = format_privacy(r.privacy)
    runs = dict.fromkeys(format_privacy(a.audited_privacy) for a in r.attacks.values() if a.audited_privacy)
    others = [t for t in runs if t != text]
    return text + "".join(f"; audit run: {t}" for t in others)


def _plausible_cell(r: RunResult) -> str:
    best, rejected = plausible_bounds(r)
    if best is not None:
        return f"estimate {best.text()}; assumes {assumption_text(best)}"
    if rejected is not None:
        return f"assumption rejected (normality p = {rejected:.2g} < {NORMALITY_LEVEL:g})"
    return DASH


def _check_cell(results: Results, r: RunResult, bounds: list[AuditBound]) -> tuple[str, str]:
    """The run-level verdict of one model and its flag (``"bug"``, ``"refuted"`` or ``""``)."""
    bugs, refuted = bugs_for(results, r), refuted_for(results, r)
    m, conf = family(results)
    if bugs:
        return "; ".join(f"{BUG_MARK}: {bug_audit(b)} {bug_value(b)} at {percent(b.confidence)}" for b in bugs) \
            + f" ({family_text(results)})", "bug"
    if refuted:
        return "; ".join(f"{REFUTED_MARK}: {bug_audit(b)} {bug_value(b)} at {percent(b.confidence)}" for b in refuted) \
            + f" ({family_text(results)}; no guarantee, so not a privacy bug)", "refuted"
    compared = [b for b in bounds if b.comparable]
    if compared and m:
        return (f"not refuted: none of {len(compared)} comparable valid bound(s) exceeds ε at {percent(conf)} "
                f"({family_text(results)})"), ""
    if compared:
        return "not checked (the run did not complete)", ""
    if not has_guarantee(r.privacy) and (r.privacy is None or r.privacy.claimed_epsilon is None):
        return "no ε to test", ""
    return ("not audited (no canary audit ran)" if not bounds else f"no comparable audit ({bounds[0].mismatch()})"), ""


def _bound_cells(r: RunResult, threat_model: str) -> list[str]:
    b = tightest_valid(r, threat_model)
    return ["no audit", DASH] if b is None else [tightest_text(r, threat_model) or DASH, ratio_text(b)]


def audit_rows(results: Results) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, text rows and a per-row flag (``"bug"``, ``"refuted"`` or ``""``) of the Audit table.

    One row per successful model.
    """
    datasets, seeds = _several(results)
    rows, flags, columns = [], [], threat_models(results)
    for r in results.results:
        if is_failed(r):
            continue
        cells = [r.dataset] if datasets else []
        cells += [_model(r, seeds), target_text(target_of(r)), _privacy_cell(r)]
        for tm in columns:
            cells += _bound_cells(r, tm)
        check, flag = _check_cell(results, r, [b for b in audit_bounds_of(r) if b.bound.valid])
        rows.append(cells + [_plausible_cell(r), check])
        flags.append(flag)
    return audit_headers(results), rows, flags


def audit_detail_rows(results: Results) -> list[list[str]]:
    """``DETAIL_HEADERS`` rows: every analysis of every audit at its own confidence.

    ``DETAIL_HEADERS`` rows: every analysis of every audit at its own confidence (the k analyses of an audit's
    design-fixed family at 1 − 0.05/k each, so that the largest valid one holds at 95 %), and the one-run test of the
    accountant's whole certified (ε, δ) curve where one was made.
    """
    _, seeds = _several(results)
    rows = []
    for r in results.results:
        if is_failed(r):
            continue
        head = [_model(r, seeds), target_text(target_of(r))]
        for b in audit_bounds_of(r):
            rows.append(head + [b.attack, b.threat_model, design_text(b.design), b.bound.method, value_text(b.value),
                                percent(b.record.audit.method_confidence if b.bound.valid
                                        else b.record.audit.confidence), b.bound.evidence, assumption_text(b)])
        for name, a in sorted(r.attacks.items()):
            if a.audit.profile_rejected is not None:
                verdict = "rejected" if a.audit.profile_rejected else "not rejected"
                rows.append(head + [name, a.audit.design.threat_model, design_text(a.audit.design),
                                    "certified-curve test", f"curve {verdict}", percent(a.audit.confidence),
                                    "valid", "none (non-parametric)"])
    return rows


def audit_note(results: Results) -> str:
    """How to read the Audit table.

    The designs, the validity rule, the run-level Bonferroni check, and the methods that appear in the run.
    """
    m, conf = family(results)
    methods = sorted({b.bound.method for r in results.results if r.ok for b in audit_bounds_of(r)})
    text = (
        "ε_LB: the tightest valid lower bound per threat model, at 95% (an audit's largest valid analysis; the k "
        "assumption-free analyses its design allows, fixed before any score is seen, are each made at 1 − 0.05/k). "
        "Valid means it holds for any mechanism, whatever its scores' distribution: one-run audits (m canaries, each "
        "included independently with probability ½ in one training run) and multi-run audits (R independent runs or "
        "independently released canaries) analysed by Clopper-Pearson, the one-run test or f-DP against (ε, δ) "
        "curves. An audit in a separate audit run (canaries trained beside "
        "the members, calibrated to the same target ε) is compared with that run's ε, and only with an ε of the "
        "neighbouring relation it tests. ")
    if m:
        text += (f"Only the run-level check decides a privacy bug: it makes {m} comparisons — each valid bound and "
                 "certified-curve test against its ε, each conformance test (exact or conservative under the "
                 f"certified mechanism) — at {percent(conf)} ({family_text(results)}, family-wise 95%). ")
    text += ("An estimate (a Gaussian pair, a GDP fit's ε, the μ-GDP analysis of summed log-likelihood ratios) rests "
             f"on an assumption about the scores: shown with it and its test's p-value (level {NORMALITY_LEVEL:g}), "
             "never an \"ε ≥\" and never a verdict — a correct mechanism whose scores break the assumption reads above "
             "its ε through it. The membership attacks' bounds on natural members are heuristic (they assume "
             "independent outcomes) and appear only in the heuristic table.")
    if methods:
        text += " Methods: " + "; ".join(f"{name}: {METHODS[name][0]}" for name in methods if name in METHODS) + "."
    return text


DETECTION_NOTE = (
    "What this run could have caught: each cell is one earlier run of this profile with the bug injected into the "
    "mechanism's own code while its accountant still certified the target ε (σ × F: the noise drawn at F times the "
    "certified σ; labels in the clear: the label channel released without its noise), with only that mechanism's "
    "audit and target ε, so the run's Bonferroni family was that cell's (this run's, over all its cells, divides "
    "the 5% by more comparisons and may miss a bug measured here as caught near the edge). caught: exit status 3; "
    "missed: exit 0 (none: the correct mechanism, a control, passed or raised a false alarm); the number is that "
    "run's tightest valid ε_LB; —: not run (weaker than a bug already missed, "
    "or not measured); \"M = k\": re-judged as one cell of a main job of k comparisons (scripts/detection_power.py "
    "--judge-at), the verdict this run gives where its M is k or fewer. A missed bug is one this run's audits cannot "
    "be relied on to find. Commands and data: "
    "scripts/detection_power.py, bench/zoo/data/detection_power.json.")


def detection_rows(results: Results) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the detection-power table of the run's profile (``results.audit.detection_power``).

    One row per mechanism and target ε, one column per measured bug; empty when nothing was measured.
    """
    measured = results.audit.detection_power if results.audit is not None else []
    if not measured:
        return [], []
    bugs = list(dict.fromkeys(d.bug for d in sorted(measured, key=lambda d: (d.bug == "none",
                                                                             d.bug == "labels in the clear", d.bug))))
    cells: dict[tuple[str, float], dict[str, str]] = {}
    commits: dict[tuple[str, float], set[str]] = {}
    for d in measured:
        bound = DASH if d.epsilon_lb is None else f"{d.epsilon_lb:.3g}"
        verdict = ("false alarm" if d.caught else "passed") if d.bug == "none" else "caught" if d.caught else "missed"
        judged = "" if d.comparisons is None else f", M = {d.comparisons}"
        cells.setdefault((d.mechanism, d.epsilon), {})[d.bug] = f"{verdict} ({bound}{judged})"
        commits.setdefault((d.mechanism, d.epsilon), set()).add(d.commit)
    headers = ["mechanism", "target ε", *bugs, "measured at"]
    rows = [[mech, f"{eps:g}", *(got.get(b, DASH) for b in bugs), ", ".join(sorted(commits[(mech, eps)]))]
            for (mech, eps), got in sorted(cells.items())]
    return headers, rows
