"""Empirical privacy: ε lower bounds from an attack's scores, by the design that decided who was a member.

Every bound names its method, whether it is valid for any mechanism (non-parametric) or only under an assumption
(parametric), and its confidence. Designs (``attacks.base.AuditDesign``):

- ``heuristic``: one model's natural members. The Clopper-Pearson bound over thresholds (Jagielski et al. 2020)
  treats the outcomes as independent, which DP does not give: shown, never a privacy-bug verdict.
- ``one-run``: m canaries included independently with probability ½ in one run. Non-parametric: the one-run
  bound (Steinke, Nasr, Jagielski 2023) and the f-DP analysis against (ε, δ) curves (Mahloujifar, Melis,
  Chaudhuri 2024); with the accountant's privacy profile, the test of that whole certified curve. Parametric:
  the f-DP analysis against Gaussian (μ-GDP) curves, and for white-box scores the Gaussian pair (Agrawal et al.
  2026).
- ``multi-run``: m independent runs (or independently released canaries). Non-parametric: Clopper-Pearson over
  thresholds (Jagielski et al. 2020). Parametric: the GDP fit (Nasr et al. 2023) and the Gaussian pair.

A bound is *valid* when it holds at its confidence under the design alone: the non-parametric ones, and the
Gaussian ones when the design's scores are Gaussian by construction (``AuditDesign.gaussian``: the mechanism's
Gaussian noise read through a linear score) and a normality test does not reject. The tightest valid bound is the
audit's ``epsilon_lb``; only valid bounds of one-run and multi-run designs may decide a privacy bug. A parametric
bound whose assumption is only plausible (white-box DP-SGD's canary signals are sums over many steps) is shown with
its assumption and normality p-value. Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attacks.audit.fdp import fdp_epsilon, fdp_gdp_epsilon, gdp_epsilon, profile_rejected, rejects
from attacks.audit.gaussian import gaussian_pair_epsilon, gdp_fit_epsilon, pair_bound, pair_epsilon
from attacks.audit.one_run import (
    GUESS_FRACTIONS,
    best_one_run_epsilon,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)
from attacks.audit.thresholds import (
    THRESHOLD_POINTS,
    best_epsilon,
    epsilon_lower_bound,
    order_statistic_indices,
    threshold_counts,
)

__all__ = ["GAUSSIAN_METHODS", "GUESS_FRACTIONS", "METHODS", "NORMALITY_LEVEL", "THRESHOLD_POINTS", "audit_bounds",
           "best_epsilon", "best_one_run_epsilon", "epsilon_lower_bound", "fdp_epsilon", "fdp_gdp_epsilon",
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
}
GAUSSIAN_METHODS = ("f-dp-gaussian", "gaussian-pair", "gdp-fit")
NORMALITY_LEVEL = 0.01  # a Gaussian bound on scores Gaussian by construction counts only if normality is not rejected


def _bound(method: str, value: float, valid: bool, **extra: Any) -> dict[str, Any]:
    return {"method": method, "epsilon_lb": float(value), "parametric": METHODS[method][1] is not None,
            "assumption": METHODS[method][1], "valid": bool(valid), **extra}


def _pair(design: dict[str, Any], scores: Any, labels: Any, *, delta: float, confidence: float
          ) -> dict[str, Any] | None:
    """The Gaussian pair's fit where the design reads canary-aligned signals (white-box, multi-run, or Gaussian by
    construction); None elsewhere or with fewer than 3 scores a side."""
    if design.get("kind", "heuristic") == "heuristic":
        return None
    if not (design.get("threat_model") == "white-box" or design.get("kind") == "multi-run" or design.get("gaussian")):
        return None
    try:
        return gaussian_pair_epsilon(scores, labels, delta=delta, confidence=confidence)
    except ValueError:
        return None


def gaussian_valid(design: dict[str, Any], normality_p: float | None) -> bool:
    """Whether Gaussian analyses are valid bounds under ``design``: scores Gaussian by construction
    (``design["gaussian"]``), a one-run or multi-run design, and a normality test that does not reject at
    ``NORMALITY_LEVEL``."""
    return bool(design.get("gaussian")) and design.get("kind") in ("one-run", "multi-run") \
        and normality_p is not None and normality_p >= NORMALITY_LEVEL


def _compute(method: str, counts: list, one_run: dict[str, Any] | None, fit: dict[str, Any] | None, *,
             delta: float, confidence: float) -> float:
    """One analysis' ε lower bound from the stored counts, one-run guesses or Gaussian fit."""
    if method == "clopper-pearson":
        return best_epsilon(counts, delta=delta, confidence=confidence)
    if method == "gdp-fit":
        return gdp_fit_epsilon(counts, delta=delta, confidence=confidence)
    if method == "gaussian-pair":
        return pair_bound(fit, delta=delta, confidence=confidence)
    m, rules = one_run["m"], one_run["guesses"]
    one_run_methods = {"one-run": best_one_run_epsilon, "f-dp": fdp_epsilon, "f-dp-gaussian": fdp_gdp_epsilon}
    return one_run_methods[method](m, rules, delta=delta, confidence=confidence)


def _analyses(design: dict[str, Any], scores: Any, labels: Any, counts: list, one_run: dict[str, Any] | None, *,
              delta: float, confidence: float) -> tuple[list[dict[str, Any]], float]:
    """Every analysis the design allows, as bound records (``valid``: a lower bound under the design alone), each
    at 1 − (1 − confidence)/k for the k valid ones (Bonferroni: the tightest valid bound holds at ``confidence``);
    and that per-analysis confidence."""
    kind = design.get("kind", "heuristic")
    if kind == "heuristic":
        return [_bound("clopper-pearson", best_epsilon(counts, delta=delta, confidence=confidence), False)], confidence
    pair = _pair(design, scores, labels, delta=delta, confidence=confidence)
    gaussian = gaussian_valid(design, pair["normality_p"] if pair else None)
    methods = [("clopper-pearson", True), ("gdp-fit", gaussian)] if kind == "multi-run" else \
        [("one-run", True), ("f-dp", True), ("f-dp-gaussian", gaussian)]
    fit = None
    if pair is not None:
        pair.pop("epsilon_lb")
        fit = pair
        methods.append(("gaussian-pair", gaussian))
    each = 1.0 - (1.0 - confidence) / max(1, sum(valid for _, valid in methods))
    bounds = [_bound(m, _compute(m, counts, one_run, fit, delta=delta, confidence=each), valid,
                     **({"fit": fit} if m == "gaussian-pair" else {})) for m, valid in methods]
    return bounds, each


def membership_audit(scores: Any, labels: Any, *, delta: float, design: dict[str, Any] | None = None,
                     profile: Sequence[Sequence[float]] | None = None, confidence: float = 0.95) -> dict[str, Any]:
    """The audit of one attack's scores, as stored in results.json.

    Args:
        scores, labels: ``(N,)`` scores (larger: "member") and membership labels (1: member / canary included).
        delta: δ of the guarantee tested (the mechanism's, or the run's without a guarantee).
        design: ``{"kind", "threat_model", "gaussian", ...}`` (``attacks.base.AuditDesign``); None: heuristic,
            black-box.
        profile: the accountant's certified ``[[ε, δ], ...]`` (one-run designs test the whole curve).
        confidence: coverage of the audit's ``epsilon_lb``: each of its k valid analyses is made at
            1 − (1 − confidence)/k (``method_confidence``), each family-wise over its thresholds or guessing rules.

    Returns:
        ``{"delta", "confidence", "method_confidence", "counts", "bounds", "epsilon_lb", "method"}`` plus, for
        one-run designs,
        ``"one_run": {"m", "guesses"}`` and, given a profile, ``"profile_rejected"``. ``epsilon_lb`` / ``method``:
        the tightest valid bound (a heuristic design: its heuristic bound, marked not valid).

    Raises:
        ValueError: invalid scores or labels (``attacks.metrics.validate_scores``).
    """
    design = design or {}
    counts = threshold_counts(scores, labels)
    block: dict[str, Any] = {"delta": float(delta), "confidence": confidence, "counts": counts}
    if design.get("kind") == "one-run":
        block["one_run"] = {"m": int(len(labels)), "guesses": one_run_guesses(scores, labels)}
        if profile:
            block["profile_rejected"] = profile_rejected(block["one_run"]["m"], block["one_run"]["guesses"],
                                                         profile, confidence=confidence)
    block["bounds"], block["method_confidence"] = _analyses(design, scores, labels, counts, block.get("one_run"),
                                                            delta=delta, confidence=confidence)
    candidates = [b for b in block["bounds"] if b["valid"]] or block["bounds"]
    best = max(candidates, key=lambda b: b["epsilon_lb"])
    block["epsilon_lb"], block["method"] = best["epsilon_lb"], best["method"]
    return block


def audit_bounds(block: dict[str, Any], *, confidence: float) -> dict[str, float]:
    """The valid bounds of a stored audit block (an ``Audit``'s ``model_dump()``) recomputed, each at
    ``confidence`` (method -> ε; empty for a heuristic design)."""
    delta, counts, one_run = block["delta"], block.get("counts") or [], block.get("one_run")
    return {b["method"]: _compute(b["method"], counts, one_run, b.get("fit"), delta=delta, confidence=confidence)
            for b in block.get("bounds") or [] if b["valid"]}
