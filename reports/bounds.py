"""Audit bounds as every report shows them.

Which ε lower bounds are evidence, what each one names (threat model, design with m canaries or R runs, method,
confidence), which accountant's ε it is compared with, and the run-level Bonferroni family that alone decides a privacy
bug.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attacks.analysis import audit_bounds
from attacks.analysis.statistics.fdp import EPSILON_CAP
from bench.results import AttackRecord, Bound, Design, PrivacyBug, PrivacyRecord, Results, RunResult
from reports.common import DASH, has_guarantee, is_audit, num, relation_text

HEURISTIC = "heuristic (assumes independent outcomes)"
THREAT_MODELS = ("white-box", "hidden-state", "black-box", "black-box-crafted")
BUG_MARK = "PRIVACY BUG"
REFUTED_MARK = "CLAIM REFUTED"


def percent(confidence: float) -> str:
    """A confidence as printed: ``0.95 -> "95%"``, ``0.99902 -> "99.9%"``."""
    return f"{100 * confidence:.4g}%"


def design_text(design: Design) -> str:
    """``"one-run, m = 2000"``, ``"multi-run, R = 4000"`` (as in ``PrivacyBug.design``), or the heuristic label."""
    if design.kind == "one-run":
        return f"one-run, m = {design.size}"
    if design.kind == "multi-run":
        return f"multi-run, R = {design.size}"
    return HEURISTIC


def value_text(value: float) -> str:
    """An ε lower bound as printed: three significant digits, ``"≥ 100 (cap)"`` at the audits' cap (still a bound)."""
    return f"≥ {num(EPSILON_CAP)} (cap)" if value >= EPSILON_CAP * (1 - 1e-9) else num(value)


def reference_epsilon(privacy: PrivacyRecord | None) -> float | None:
    """The ε a bound is held to: the accountant's, else the ε a source claimed (no guarantee), else None."""
    if privacy is None:
        return None
    return privacy.epsilon if has_guarantee(privacy) else privacy.claimed_epsilon


@dataclass(frozen=True)
class AuditBound:
    """One analysis (``bound``) of one audit (``attack``, ``record``) of a model (``result``)."""

    result: RunResult
    attack: str
    record: AttackRecord
    bound: Bound

    @property
    def design(self) -> Design:
        """The audit's design."""
        return self.record.audit.design

    @property
    def threat_model(self) -> str:
        """The design's threat model."""
        return self.design.threat_model

    @property
    def value(self) -> float:
        """The bound ε_LB."""
        return float(self.bound.epsilon_lb)

    @property
    def capped(self) -> bool:
        """Whether the bound sits at the cap ``EPSILON_CAP``."""
        return self.value >= EPSILON_CAP * (1 - 1e-9)

    @property
    def privacy(self) -> PrivacyRecord | None:
        """The privacy the bound is compared with: the audit run's, else the model's own."""
        return self.record.audited_privacy or self.result.privacy

    @property
    def compared(self) -> PrivacyRecord | None:
        """The privacy this bound is held to, by the rule the run-level check uses (``AttackRecord.held_to``)."""
        return self.record.held_to(self.result.privacy)

    @property
    def comparable(self) -> bool:
        """Whether the run-level check compares this bound (to an accountant's ε of its relation, or a claimed ε)."""
        return self.compared is not None

    @property
    def reference(self) -> float | None:
        """The ε this bound is held to (None when it is not comparable)."""
        return reference_epsilon(self.compared)

    def reference_text(self) -> str:
        """What the ratio divides by, in words.

        ``"the accountant's add/remove ε 2.1 (opacus-prv)"``, ``"the claimed ε 10"``; empty when the bound is not
        comparable.
        """
        c = self.compared
        if c is None or self.reference is None:
            return ""
        if not has_guarantee(c):
            return f"the claimed ε {num(self.reference)}"
        return f"the accountant's {relation_text(c.relation)} ε {num(self.reference)} ({c.accountant})"

    @property
    def ratio(self) -> float | None:
        """ε_LB / ε for a comparable bound with a positive ε; None otherwise."""
        ref = self.reference
        return None if ref is None or ref <= 0 else self.value / ref

    @property
    def headline_ratio(self) -> float | None:
        """ε_LB / the headline ε where the bound is held to another relation's ε (DP-SGD's canaries), else None."""
        p, c = self.privacy, self.compared
        if c is None or p is None or not has_guarantee(p) or p.epsilon is None or p.epsilon <= 0:
            return None
        return None if c.relation == p.relation else self.value / p.epsilon

    @property
    def confidence(self) -> float:
        """The audit's ``confidence`` for its tightest valid bound or an estimate, else ``method_confidence``."""
        audit = self.record.audit
        tightest = self.bound.valid and math.isclose(self.value, audit.epsilon_lb, rel_tol=1e-12, abs_tol=1e-15)
        return audit.confidence if tightest or self.bound.evidence == "estimate" else audit.method_confidence

    def label(self) -> str:
        """``"canary-whitebox: white-box, one-run, m = 2000, f-dp, 95%"``."""
        return (f"{self.attack}: {self.threat_model}, {design_text(self.design)}, {self.bound.method}, "
                f"{percent(self.confidence)}")

    def text(self) -> str:
        """``"1.52 (canary-whitebox: white-box, one-run, m = 2000, f-dp, 95%)"``."""
        return f"{value_text(self.value)} ({self.label()})"

    def mismatch(self) -> str:
        """Why a valid bound is not compared with the model's ε (empty when it is)."""
        p = self.privacy
        if self.comparable:
            return ""
        if p is None or reference_epsilon(p) is None:
            return "no ε to compare with"
        return (f"the audit tests {relation_text(self.design.relation) or 'an unstated relation'}, the ε is for "
                f"{relation_text(p.relation) or 'an unstated relation'}")

    def at_confidence(self, confidence: float) -> float | None:
        """The bound recomputed at ``confidence`` (``attacks.analysis.audit_bounds``); None for an invalid bound."""
        return audit_bounds(self.record.audit, confidence=confidence).get(self.bound.method)


def audit_bounds_of(r: RunResult) -> list[AuditBound]:
    """Every analysis of every audit (one-run or multi-run design) of one model, valid or not."""
    return [AuditBound(r, name, a, b) for name, a in sorted(r.attacks.items()) if is_audit(a) for b in a.audit.bounds]


def valid_bounds(r: RunResult, threat_model: str | None = None) -> list[AuditBound]:
    """The valid bounds of one model's audits (of ``threat_model`` only, when given)."""
    return [b for b in audit_bounds_of(r) if b.bound.valid and threat_model in (None, b.threat_model)]


def tightest(bounds: list[AuditBound]) -> AuditBound | None:
    """The largest of ``bounds``, preferring those compared with the model's ε (then the larger ratio)."""
    if not bounds:
        return None
    return max(bounds, key=lambda b: (b.comparable, b.value, b.ratio or 0.0))


def tightest_valid(r: RunResult, threat_model: str | None = None) -> AuditBound | None:
    """The tightest valid bound of one model (per threat model when given); see ``tightest``."""
    return tightest(valid_bounds(r, threat_model))


def tightest_text(r: RunResult, threat_model: str | None = None) -> str | None:
    """``tightest_valid``'s text, saying so when it is the largest of several audits' bounds.

    Each audit's bound holds at its own confidence; their maximum is not corrected here: the run-level check is.
    """
    valid = valid_bounds(r, threat_model)
    best = tightest(valid)
    if best is None:
        return None
    audits = {b.attack for b in valid if b.comparable == best.comparable}
    return best.text() + (f"; the largest of {len(audits)} audits" if len(audits) > 1 else "") \
        + limit_text(best) + curve_text(valid)


def limit_text(bound: AuditBound) -> str:
    """The bound against the ideal mechanism's limit at its audit's size (``attacks.analysis.statistics.limits``).

    ``"; 0.94 of the ideal mechanism's limit at this size (4.31: the best threshold fixed in advance)"`` for a
    multi-run design, ``"(…: the ideal mechanism through the same analysis)"`` for a one-run design; empty where the
    audit recorded none.
    """
    limit = bound.record.extra.get("ideal_limit")
    if not isinstance(limit, (int, float)) or limit <= 0:
        return ""
    how = "the ideal mechanism through the same analysis" if bound.record.audit.design.kind == "one-run" \
        else "the best threshold fixed in advance"
    return f"; {bound.value / limit:.2f} of the ideal mechanism's limit at this size ({limit:.3g}: {how})"


def curve_text(bounds: list[AuditBound]) -> str:
    """The curve-level tightness of audits whose certificate is a μ-GDP curve (the crafted audit at q = 1).

    ``"; μ_LB / μ = 0.87 (not μ-GDP for any μ < 2.1, 95%)"``, valid for any mechanism (exact Clopper-Pearson points);
    empty where no audit recorded a μ_LB against a certified μ.
    """
    out = []
    for name in sorted({b.attack for b in bounds}):
        extra = next(b.record.extra for b in bounds if b.attack == name)
        mu_lb, mu = extra.get("gdp_mu_lb"), extra.get("certified_mu")
        if isinstance(mu_lb, (int, float)) and isinstance(mu, (int, float)) and mu > 0:
            out.append(f"; μ_LB / μ = {mu_lb / mu:.3g} (not μ-GDP for any μ < {mu_lb:.3g}, 95%; certified μ "
                       f"{mu:.3g})")
    return "".join(out)


def family(results: Results) -> tuple[int, float]:
    """``(M, confidence)`` of the run-level check.

    M comparisons, each at 1 − (1 − confidence) / M (Bonferroni); ``(0, 0.95)`` before the run completed.
    """
    if results.audit is None or results.audit.comparisons <= 0:
        return 0, 0.95
    m = results.audit.comparisons
    return m, 1.0 - (1.0 - results.audit.confidence) / m


def family_text(results: Results) -> str:
    """``"Bonferroni over 51 comparisons"`` (or ``"Bonferroni over the run"`` without a run-level record)."""
    m, _ = family(results)
    return f"Bonferroni over {m} comparison{'s' if m != 1 else ''}" if m else "Bonferroni over the run"


def same_model(b: PrivacyBug, r: RunResult) -> bool:
    """Whether a privacy bug (or refuted claim) was found on model ``r``."""
    return (b.dataset, b.mechanism, b.target_epsilon, b.seed, b.row) == \
        (r.dataset, r.mechanism, r.target_epsilon, r.seed, r.row)


def bugs_for(results: Results, r: RunResult) -> list[PrivacyBug]:
    """The run-level privacy bugs of one model."""
    return [b for b in results.privacy_bugs if same_model(b, r)]


def refuted_for(results: Results, r: RunResult) -> list[PrivacyBug]:
    """The refuted claims of one model (no guarantee: a valid bound above the ε its source claimed)."""
    return [b for b in results.refuted_claims if same_model(b, r)]


def conformance_text(b: PrivacyBug) -> str:
    """A refuted test in words: ``"noise σ, tensor 2 of 2 measured 0.00 against 27.3 certified (p = 1e-30)"``."""
    measured = DASH if b.measured is None else f"{b.measured:.4g}"
    certified = DASH if b.certified is None else f"{b.certified:.4g}"
    return f"{b.test} measured {measured} against {certified} certified (p = {b.p_value:.2g})"


def bug_audit(b: PrivacyBug) -> str:
    """The audit of a privacy bug or refuted claim: ``"canary-whitebox (white-box, one-run, m = 2000, f-dp)"``."""
    method = "" if b.method == "certified-curve" else f", {b.method}"
    return f"{b.attack} ({b.threat_model}, {b.design}{method})"


def bug_value(b: PrivacyBug) -> str:
    """What refutes the ε: ``"ε_LB 3.41 > ε"`` (``"> claimed ε 1"`` for a refuted claim).

    Or the rejection of the accountant's whole certified (ε, δ) curve.
    """
    if b.method == "conformance":
        return f"inconsistent with the certified mechanism: {conformance_text(b)}"
    if b.method == "sampling_test":
        return "refutes the Poisson sampling the accountant assumes"
    if b.lower_bound is None:
        return "rejects the accountant's whole certified (ε, δ) curve"
    return f"ε_LB {value_text(b.lower_bound)} > " + ("ε" if b.accountant is not None else f"claimed ε {b.epsilon:g}")


def ratio_text(b: AuditBound | None) -> str:
    """``"0.38"``, or why there is no ratio.

    (``"≥ 25"`` at the cap; ``"45.7 (claimed ε)"`` for a claim; ``"0.81 (add/remove ε); 0.38 (replace-one ε)"`` where
    the design's relation is not the one of the model's headline ε: against both.)
    """
    if b is None:
        return DASH
    ratio = b.ratio
    if ratio is None:
        return f"{DASH} ({b.mismatch()})" if b.mismatch() else DASH
    text = ("≥ " if b.capped else "") + num(ratio)
    if not has_guarantee(b.privacy):
        return f"{text} (claimed ε)"
    relation = b.compared.relation if b.compared is not None else None
    if relation == b.privacy.relation:
        return text
    headline = b.headline_ratio
    other = "" if headline is None else f"; {num(headline)} ({relation_text(b.privacy.relation)} ε)"
    return f"{text} ({relation_text(relation)} ε){other}"
