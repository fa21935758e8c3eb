"""Empirical privacy: ε lower bounds from an attack's scores, by the design that decided who was a member.

``membership_audit`` runs every analysis the design allows (``METHODS``) on one attack's scores; ``audit_bounds``
recomputes the valid ones from a stored audit. Every analysis is one of two kinds of evidence, never mixed: **valid**
(assumption-free, at its confidence for any mechanism: Clopper-Pearson over fixed thresholds, Jagielski et al. 2020;
the one-run test, Steinke, Nasr, Jagielski 2023; f-DP against (ε, δ) curves, Mahloujifar, Melis, Chaudhuri 2024) gives
"ε ≥" and may decide exit 3; an **estimate** rests on a distributional assumption and never decides. Designs
(``bench.core.design.AuditDesign``): ``heuristic``, ``one-run``, ``multi-run``. The statistics are in
``attacks.analysis.statistics``, the exit-3 rule in ``attacks.analysis.privacy_bugs``. Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attacks.analysis.audits.guess_plan import two_sided_rule
from attacks.analysis.privacy_bugs.evidence import (
    ESTIMATES,
    GAUSSIAN_METHODS,
    METHODS,
    NORMALITY_LEVEL,
    estimates,
    evidence,
    family,
    gaussian_valid,
)
from attacks.analysis.statistics.channels import composed_bound, image_summary, label_counts
from attacks.analysis.statistics.curve import certified_tradeoff, curve_rejected
from attacks.analysis.statistics.fdp import fdp_epsilon, fdp_gdp_epsilon, gdp_epsilon, profile_rejected, rejects
from attacks.analysis.statistics.gaussian import gaussian_pair_epsilon, gdp_fit_epsilon, pair_bound, pair_epsilon
from attacks.analysis.statistics.gaussian_llr import llr_fit, llr_gdp_bound
from attacks.analysis.statistics.one_run import (
    GUESS_FRACTIONS,
    best_one_run_epsilon,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)
from attacks.analysis.statistics.thresholds import (
    THRESHOLD_POINTS,
    best_epsilon,
    epsilon_lower_bound,
    order_statistic_indices,
    threshold_counts,
)
from bench.core.design import AuditDesign
from bench.results.membership import Audit

__all__ = ["ESTIMATES", "GAUSSIAN_METHODS", "GUESS_FRACTIONS", "METHODS", "NORMALITY_LEVEL", "THRESHOLD_POINTS",
           "audit_bounds", "best_epsilon", "best_one_run_epsilon", "composed_bound", "epsilon_lower_bound",
           "estimates", "evidence", "family", "fdp_epsilon", "fdp_gdp_epsilon", "gaussian_pair_epsilon",
           "gaussian_valid", "gdp_epsilon", "gdp_fit_epsilon", "label_counts", "membership_audit", "one_run_epsilon",
           "one_run_guesses", "one_run_p_value", "order_statistic_indices", "pair_bound", "pair_epsilon",
           "profile_rejected", "rejects", "threshold_counts"]

def _bound(method: str, value: float, kind: str, computable: bool = True, **extra: Any) -> dict[str, Any]:
    ev = evidence(method, kind)
    return {"method": method, "epsilon_lb": float(value), "parametric": METHODS[method][1] is not None,
            "assumption": METHODS[method][1], "valid": ev == "valid" and computable, "evidence": ev, **extra}


def _pair(design: AuditDesign, scores: ArrayLike, labels: ArrayLike, *, delta: float, confidence: float
          ) -> dict[str, Any] | None:
    """The Gaussian pair's fit where the design reads canary-aligned signals.

    (white-box, multi-run, or Gaussian by construction.) None elsewhere or with fewer than 3 scores a side.
    """
    if design.kind == "heuristic":
        return None
    if not (design.threat_model in ("white-box", "hidden-state") or design.kind == "multi-run" or design.gaussian):
        return None
    try:
        return gaussian_pair_epsilon(scores, labels, delta=delta, confidence=confidence)
    except ValueError:
        return None


def _compute(method: str, counts: list[list[int]], one_run: tuple[int, list[list[int]]] | None,
             fit: dict[str, Any] | None, *, delta: float, confidence: float) -> float:
    """One analysis' ε lower bound from the stored counts, one-run guesses or Gaussian fit.

    Raises ValueError when the analysis' input (its fit, or the one-run guesses) is missing.
    """
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
    """Every analysis the design allows, as bound records.

    The valid ones (``family``), each at 1 − (1 − confidence)/k for the k of them (Bonferroni, fixed before the scores
    are seen: the tightest holds at ``confidence``), then the estimates (``estimates``), each at ``confidence`` under
    its assumption; and the valid ones' per-analysis confidence. An estimate that cannot be computed (a Gaussian fit on
    too few scores) is recorded as 0.
    """
    if design.kind == "heuristic":
        value = best_epsilon(counts, delta=delta, confidence=confidence)
        return [_bound("clopper-pearson", value, design.kind)], confidence
    members, guesses = family(design), estimates(design)
    each = 1.0 - (1.0 - confidence) / max(1, len(members))
    fits: dict[str, dict[str, Any] | None] = {}
    if design.label_weight is not None and label_outcomes is not None:  # the image channel alone: u = s − w·o
        scores = np.asarray(scores, np.float64) - design.label_weight * np.asarray(label_outcomes, np.float64)
    pair = _pair(design, scores, labels, delta=delta, confidence=confidence) if "gaussian-pair" in guesses else None
    if "gaussian-pair" in guesses:
        fits["gaussian-pair"] = None if pair is None else {k: v for k, v in pair.items() if k != "epsilon_lb"}
    if "gaussian-llr" in guesses:
        try:
            fits["gaussian-llr"] = llr_fit(scores, labels, design.llr_model)
        except ValueError:
            fits["gaussian-llr"] = None
    if "gaussian-composed" in guesses:
        fits["gaussian-composed"] = None if pair is None or label_outcomes is None else {
            "image": image_summary(scores, labels), "label": label_counts(label_outcomes, labels),
            "normality_p": pair["normality_p"]}
    bounds = []
    for m, level in [(m, each) for m in members] + [(m, confidence) for m in guesses]:
        fit = fits.get(m)
        computable = m not in fits or fit is not None
        value = _compute(m, counts, one_run, fit, delta=delta, confidence=level) if computable else 0.0
        bounds.append(_bound(m, value, design.kind, computable, **({"fit": fit} if m in fits else {})))
    return bounds, each


def membership_audit(scores: ArrayLike, labels: ArrayLike, *, delta: float, design: AuditDesign | None = None,
                     profile: Sequence[Sequence[float]] | None = None, confidence: float = 0.95,
                     label_outcomes: ArrayLike | None = None) -> dict[str, Any]:
    """The audit of one attack's scores, as stored in results.json.

    Args:
        scores: ``(N,)`` scores (larger: "member").
        labels: ``(N,)`` membership labels (1: member / canary included).
        delta: δ of the guarantee tested (the mechanism's, or the run's without a guarantee).
        design: how the labels were decided (None: heuristic, black-box); a one-run design's ``guess_fraction``
            (fixed before the scores) replaces the 12 guessing rules by its single two-sided rule.
        profile: the accountant's ``[[ε, δ], ...]``, tested whole (one-run) or at each threshold (multi-run).
        confidence: coverage of ``epsilon_lb``: each of the k valid analyses of the design's ``family`` at
            1 − (1 − confidence)/k (``method_confidence``); each estimate at ``confidence`` under its assumption.
        label_outcomes: ``(N,)`` in {−1, 0, 1} for a design with a ``"label"`` channel: canary i's released label is
            its pair's first (1), second (−1) or neither (0); with the image scores it gives the ``gaussian-composed``
            estimate. With a ``label_weight`` w the scores are s = u + w·o and the estimates read u = s − w·o.

    Returns:
        A ``bench.results.Audit`` block without its ``design``; ``epsilon_lb`` / ``method``: the tightest valid bound
        (a heuristic design: its heuristic bound, marked not valid), never an estimate.

    Raises:
        ValueError: invalid scores or labels (``attacks.analysis.statistics.metrics.validate_scores``).
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
    candidates = [b for b in block["bounds"] if b["valid"]] \
        or [b for b in block["bounds"] if b["evidence"] != "estimate"] or block["bounds"]
    best = max(candidates, key=lambda b: b["epsilon_lb"])
    block["epsilon_lb"], block["method"] = best["epsilon_lb"], best["method"]
    return block


def audit_bounds(audit: Audit, *, confidence: float) -> dict[str, float]:
    """Method ↦ valid ε_LB of a stored ``Audit`` from its counts, guesses and fits; ValueError: an input missing."""
    one_run = None if audit.one_run is None else (audit.one_run.m, audit.one_run.guesses)
    return {b.method: _compute(b.method, audit.counts, one_run, b.fit, delta=audit.delta, confidence=confidence)
            for b in audit.bounds if b.valid}
