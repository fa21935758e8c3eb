"""Empirical privacy: ε lower bounds from an attack's scores, by the design that decided who was a member.

Every bound names its method, whether it is valid for any mechanism (non-parametric) or only under an assumption
(parametric), and its confidence. Designs (``bench.core.design.AuditDesign``):

- ``heuristic``: one model's natural members. The Clopper-Pearson bound over thresholds (Jagielski et al. 2020)
  treats the outcomes as independent, which DP does not give: shown, never a privacy-bug verdict.
- ``one-run``: m canaries included independently with probability ½ in one run. Non-parametric: the one-run
  bound (Steinke, Nasr, Jagielski 2023) and the f-DP analysis against (ε, δ) curves (Mahloujifar, Melis,
  Chaudhuri 2024); with the accountant's privacy profile, the test of that whole certified curve. Parametric:
  the f-DP analysis against Gaussian (μ-GDP) curves, and for white-box scores the Gaussian pair (Agrawal et al.
  2026).
- ``multi-run``: m independent runs (or independently released canaries). Non-parametric: Clopper-Pearson over
  thresholds (Jagielski et al. 2020). Parametric: the GDP fit (Nasr et al. 2023) and the Gaussian pair; where the
  design reads a record's label as a channel of its own, the Gaussian pair composed with it (``channels``).

A bound is *valid* when it holds at its confidence under the design alone: the non-parametric ones, and the
Gaussian ones when the design's scores are Gaussian by construction (``AuditDesign.gaussian``: the mechanism's
Gaussian noise read through a linear score) and a normality test does not reject. The tightest valid bound is the
audit's ``epsilon_lb``; only valid bounds of one-run and multi-run designs may decide a privacy bug. A parametric
bound whose assumption is only plausible (white-box DP-SGD's canary signals are sums over many steps) is shown with
its assumption and normality p-value. The Bonferroni family of an audit (``family``) is fixed by its design before
any score is seen: a Gaussian analysis the design allows counts in the divisor whether or not its normality test
later passes. Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attacks.analysis.channels import composed_bound, image_summary, label_counts
from attacks.analysis.curve import certified_tradeoff, curve_rejected
from attacks.analysis.fdp import fdp_epsilon, fdp_gdp_epsilon, gdp_epsilon, profile_rejected, rejects
from attacks.analysis.gaussian import gaussian_pair_epsilon, gdp_fit_epsilon, pair_bound, pair_epsilon
from attacks.analysis.gaussian_llr import llr_fit, llr_gdp_bound, llr_valid
from attacks.analysis.guess_plan import two_sided_rule
from attacks.analysis.one_run import (
    GUESS_FRACTIONS,
    best_one_run_epsilon,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)
from attacks.analysis.thresholds import (
    THRESHOLD_POINTS,
    best_epsilon,
    epsilon_lower_bound,
    order_statistic_indices,
    threshold_counts,
)
from bench.core.design import AuditDesign
from bench.results.membership import Audit

__all__ = ["GAUSSIAN_METHODS", "GUESS_FRACTIONS", "METHODS", "NORMALITY_LEVEL", "THRESHOLD_POINTS", "audit_bounds",
           "best_epsilon", "best_one_run_epsilon", "composed_bound", "epsilon_lower_bound", "family", "fdp_epsilon",
           "fdp_gdp_epsilon", "label_counts",
           "gaussian_pair_epsilon", "gaussian_valid", "gdp_epsilon", "gdp_fit_epsilon", "membership_audit",
           "one_run_epsilon", "one_run_guesses", "one_run_p_value", "order_statistic_indices", "pair_bound",
           "pair_epsilon", "profile_rejected", "rejects", "threshold_counts"]

METHODS = {  # method -> (what it is, the assumption it needs beyond the design; None: non-parametric)
    "clopper-pearson": ("Clopper-Pearson over a fixed family of thresholds (Jagielski et al. 2020)", None),
    "one-run": ("one-run binomial test (Steinke, Nasr, Jagielski 2023)", None),
    "f-dp": ("f-DP one-run analysis against (ε, δ) curves (Mahloujifar, Melis, Chaudhuri 2024)", None),
    "f-dp-gaussian": ("f-DP one-run analysis against μ-GDP curves (Mahloujifar et al. 2024)",
                      "the mechanism's trade-off curve is Gaussian"),
    "gaussian-pair": ("Gaussian pair of canary scores (Agrawal et al. 2026)",
                      "scores Gaussian and independent across canaries"),
    "gdp-fit": ("GDP fit over thresholds (Nasr et al. 2023)", "the mechanism's trade-off curve is Gaussian"),
    "gaussian-llr": ("μ-GDP analysis of white-box canaries' summed log-likelihood ratios (Dong, Roth, Su 2022; "
                     "Nasr et al. 2023 Dirac canaries; attacks.analysis.gaussian_llr)",
                     "each canary's summed log-likelihood ratio Gaussian (a CLT over T steps), tested on the excluded "
                     "canaries' scores"),
    "gaussian-composed": ("the image channel's Gaussian bound composed with the label channel's Clopper-Pearson pair "
                          "by PLD (attacks.analysis.channels)",
                          "image scores Gaussian, the two channels' noise independent, canaries independent"),
}
GAUSSIAN_METHODS = ("f-dp-gaussian", "gaussian-pair", "gdp-fit", "gaussian-composed", "gaussian-llr")
NORMALITY_LEVEL = 0.01  # a Gaussian bound on scores Gaussian by construction counts only if normality is not rejected


def _bound(method: str, value: float, valid: bool, **extra: Any) -> dict[str, Any]:
    return {"method": method, "epsilon_lb": float(value), "parametric": METHODS[method][1] is not None,
            "assumption": METHODS[method][1], "valid": bool(valid), **extra}


def _pair(design: AuditDesign, scores: ArrayLike, labels: ArrayLike, *, delta: float, confidence: float
          ) -> dict[str, Any] | None:
    """The Gaussian pair's fit where the design reads canary-aligned signals (white-box, multi-run, or Gaussian by
    construction); None elsewhere or with fewer than 3 scores a side."""
    if design.kind == "heuristic":
        return None
    if not (design.threat_model in ("white-box", "hidden-state") or design.kind == "multi-run" or design.gaussian):
        return None
    try:
        return gaussian_pair_epsilon(scores, labels, delta=delta, confidence=confidence)
    except ValueError:
        return None


def gaussian_valid(design: AuditDesign, normality_p: float | None) -> bool:
    """Whether Gaussian analyses are valid bounds under ``design``.

    Args:
        design: the audit's design.
        normality_p: the normality test's p-value, or None.

    Returns:
        True for scores Gaussian by construction (``design.gaussian``), a one-run or multi-run design, and a
        normality test that does not reject at ``NORMALITY_LEVEL``."""
    return design.gaussian and design.kind in ("one-run", "multi-run") \
        and normality_p is not None and normality_p >= NORMALITY_LEVEL


def family(design: AuditDesign) -> tuple[str, ...]:
    """The analyses that may decide anything under ``design``, fixed by the design alone before any score is seen:
    the Bonferroni family of the audit (its divisor k) and of the run-level check (``attacks.analysis.verdict``).

    Non-parametric analyses of a one-run or multi-run design always belong; the Gaussian ones (and, where the design
    reads a record's label as its own channel, their composition with it) belong exactly when the scores are
    Gaussian by construction (``design.gaussian``), whether or not the normality test later passes: a bound
    whose test rejects is counted and not used, so the family-wise level stays at most 1 − confidence. A heuristic
    design has no family (its bound never decides). A white-box one-run design (DP-SGD's Dirac canaries: independent
    trials by construction, scored by summed log-likelihood ratios) adds ``gaussian-llr``, valid when the excluded
    canaries' scores pass its shape test (``attacks.analysis.gaussian_llr.llr_fit``); counted either way. A hidden-state
    one-run design (the same canaries scored from θ_T − θ_0, a sum of the canary's noisy updates) adds it too: the
    μ-GDP analysis of the sums, its shape test a plain normality test of the excluded canaries' scores. A multi-run
    design whose slots went through one release call (``design.one_release``) adds ``one-run`` and ``f-dp``: valid
    whatever the dependence between its slots, where the multi-run analyses assume them independent.

    Args:
        design: the audit's design.

    Returns:
        The analyses' method names (empty for a heuristic design)."""
    kind = design.kind
    if kind not in ("one-run", "multi-run"):
        return ()
    base: tuple[str, ...] = ("clopper-pearson",) if kind == "multi-run" else ("one-run", "f-dp")
    if kind == "multi-run" and design.one_release:  # slots of one release: independence not by construction
        base += ("one-run", "f-dp")
    if kind == "one-run" and design.threat_model in ("white-box", "hidden-state"):
        base += ("gaussian-llr",)
    if not design.gaussian:
        return base
    gauss = ("gdp-fit", "gaussian-pair") if kind == "multi-run" else ("f-dp-gaussian", "gaussian-pair")
    return base + gauss + (("gaussian-composed",) if "label" in design.channels else ())


def _compute(method: str, counts: list[list[int]], one_run: tuple[int, list[list[int]]] | None,
             fit: dict[str, Any] | None, *, delta: float, confidence: float) -> float:
    """One analysis' ε lower bound from the stored counts, one-run guesses or Gaussian fit. Raises ValueError when
    the analysis' input (its fit, or the one-run guesses) is missing."""
    if method == "clopper-pearson":
        return best_epsilon(counts, delta=delta, confidence=confidence)
    if method == "gdp-fit":
        return gdp_fit_epsilon(counts, delta=delta, confidence=confidence)
    fit_bounds = {"gaussian-pair": pair_bound, "gaussian-composed": composed_bound, "gaussian-llr": llr_gdp_bound}
    if method in fit_bounds:
        if fit is None:
            raise ValueError(f"the {method} analysis needs its fit, got none")
        return fit_bounds[method](fit, delta=delta, confidence=confidence)
    if one_run is None:
        raise ValueError(f"the {method} analysis needs the one-run guesses, got none")
    m, rules = one_run
    one_run_methods = {"one-run": best_one_run_epsilon, "f-dp": fdp_epsilon, "f-dp-gaussian": fdp_gdp_epsilon}
    return one_run_methods[method](m, rules, delta=delta, confidence=confidence)


def _analyses(design: AuditDesign, scores: ArrayLike, labels: ArrayLike, counts: list[list[int]],
              one_run: tuple[int, list[list[int]]] | None, *, delta: float, confidence: float,
              label_outcomes: ArrayLike | None = None) -> tuple[list[dict[str, Any]], float]:
    """Every analysis the design allows, as bound records (``valid``: a lower bound under the design alone), each
    at 1 − (1 − confidence)/k for the k analyses of the design's ``family`` (Bonferroni, fixed before the scores are
    seen: the tightest valid bound holds at ``confidence``); and that per-analysis confidence. A family member that
    cannot be computed (a Gaussian fit on too few scores) is recorded as 0, not valid."""
    kind = design.kind
    if kind == "heuristic":
        return [_bound("clopper-pearson", best_epsilon(counts, delta=delta, confidence=confidence), False)], confidence
    members = family(design)
    pair = _pair(design, scores, labels, delta=delta, confidence=confidence)
    gaussian = gaussian_valid(design, pair["normality_p"] if pair else None)
    methods = ["clopper-pearson", "gdp-fit"] if kind == "multi-run" else ["one-run", "f-dp", "f-dp-gaussian"]
    if kind == "multi-run" and design.one_release:
        methods += ["one-run", "f-dp"]
    fits: dict[str, dict[str, Any] | None] = {}
    if pair is not None or "gaussian-pair" in members:
        methods.append("gaussian-pair")
        fits["gaussian-pair"] = None if pair is None else {k: v for k, v in pair.items() if k != "epsilon_lb"}
    if "gaussian-llr" in members:
        methods.append("gaussian-llr")
        try:
            fits["gaussian-llr"] = llr_fit(scores, labels, design.llr_model)
        except ValueError:
            fits["gaussian-llr"] = None
    if "gaussian-composed" in members:
        methods.append("gaussian-composed")
        fits["gaussian-composed"] = None if pair is None or label_outcomes is None else {
            "image": image_summary(scores, labels), "label": label_counts(label_outcomes, labels),
            "normality_p": pair["normality_p"]}
    each = 1.0 - (1.0 - confidence) / max(1, len(members))
    bounds = []
    for m in methods:
        fit = fits.get(m)
        computable = m not in fits or fit is not None
        valid = m in members and computable and (METHODS[m][1] is None or gaussian)
        if m == "gaussian-llr":
            valid = m in members and llr_valid(fit, NORMALITY_LEVEL)
        value = _compute(m, counts, one_run, fit, delta=delta, confidence=each) if computable else 0.0
        bounds.append(_bound(m, value, valid, **({"fit": fit} if m in fits else {})))
    return bounds, each


def membership_audit(scores: ArrayLike, labels: ArrayLike, *, delta: float, design: AuditDesign | None = None,
                     profile: Sequence[Sequence[float]] | None = None, confidence: float = 0.95,
                     label_outcomes: ArrayLike | None = None) -> dict[str, Any]:
    """The audit of one attack's scores, as stored in results.json.

    Args:
        scores, labels: ``(N,)`` scores (larger: "member") and membership labels (1: member / canary included).
        delta: δ of the guarantee tested (the mechanism's, or the run's without a guarantee).
        design: how the labels were decided (``bench.core.design.AuditDesign``); None: heuristic, black-box. A
            one-run design's ``guess_fraction`` (fixed before the scores) replaces the 12 guessing rules by its
            single two-sided rule.
        profile: the accountant's certified ``[[ε, δ], ...]``: one-run designs test the whole curve
            (``attacks.analysis.fdp.profile_rejected``), multi-run designs test it at every threshold of their fixed
            family (``attacks.analysis.curve``; G_μ itself where the design names ``certified_mu``).
        confidence: coverage of the audit's ``epsilon_lb``: each of the k analyses of the design's ``family`` is
            made at 1 − (1 − confidence)/k (``method_confidence``), each family-wise over its thresholds or guessing
            rules.
        label_outcomes: ``(N,)`` in {−1, 0, 1}, for a design whose ``channels`` hold ``"label"``: canary i's
            released label is its pair's first label (1; the first record is present where ``labels[i]`` is 1),
            its second (−1) or neither (0); with the scores (the image channel) it gives the
            ``gaussian-composed`` bound (``attacks.analysis.channels``).

    Returns:
        The stored audit block, a ``bench.results.Audit`` without its ``design`` (``Audit(**block, design=design)``):
        ``{"delta", "confidence", "method_confidence", "counts", "bounds", "epsilon_lb", "method"}`` plus, for
        one-run designs, ``"one_run": {"m", "guesses"}`` and, given a profile, ``"profile_rejected"`` (one-run and
        multi-run designs).
        ``epsilon_lb`` / ``method``: the tightest valid bound (a heuristic design: its heuristic bound, marked not
        valid).

    Raises:
        ValueError: invalid scores or labels (``attacks.analysis.metrics.validate_scores``).
    """
    design = design or AuditDesign()
    counts = threshold_counts(scores, labels)
    block: dict[str, Any] = {"delta": float(delta), "confidence": confidence, "counts": counts}
    one_run: tuple[int, list[list[int]]] | None = None
    if design.kind == "multi-run" and profile:  # the certified curve at every threshold of the fixed family
        tradeoff = certified_tradeoff(design.certified_mu, profile)
        block["profile_rejected"] = tradeoff is not None and curve_rejected(counts, tradeoff, confidence=confidence)
    if design.kind == "one-run" or design.one_release:
        planned = design.guess_fraction
        guesses = one_run_guesses(scores, labels) if planned is None else [two_sided_rule(scores, labels, planned)]
        one_run = (int(np.asarray(labels).size), guesses)
        block["one_run"] = {"m": one_run[0], "guesses": guesses}
        if profile:
            block["profile_rejected"] = profile_rejected(*one_run, profile, confidence=confidence)
    block["bounds"], block["method_confidence"] = _analyses(design, scores, labels, counts, one_run,
                                                            delta=delta, confidence=confidence,
                                                            label_outcomes=label_outcomes)
    candidates = [b for b in block["bounds"] if b["valid"]] or block["bounds"]
    best = max(candidates, key=lambda b: b["epsilon_lb"])
    block["epsilon_lb"], block["method"] = best["epsilon_lb"], best["method"]
    return block


def audit_bounds(audit: Audit, *, confidence: float) -> dict[str, float]:
    """The valid bounds of a stored audit recomputed from its counts, one-run guesses and fits.

    Args:
        audit: a stored ``bench.results.Audit``.
        confidence: each bound's confidence level.

    Returns:
        method -> ε lower bound (unitless); empty for a heuristic design, whose bound is not valid.

    Raises:
        ValueError: a valid bound whose input (its fit, or the one-run guesses) is missing from ``audit``."""
    one_run = None if audit.one_run is None else (audit.one_run.m, audit.one_run.guesses)
    return {b.method: _compute(b.method, audit.counts, one_run, b.fit, delta=audit.delta, confidence=confidence)
            for b in audit.bounds if b.valid}
