"""Empirical privacy: ε lower bounds from membership attacks, the one-run canary audit, and the run-level
check that no lower bound exceeds an accountant's ε. Pure NumPy / SciPy (no torch): reports and the
run-level check recompute every bound from the counts stored in results.json.

Conventions: scores ``(N,)`` with larger meaning "member", labels ``(N,)`` in {0, 1} (1: member / canary
included). ``confidence`` is the probability that the reported bound holds (family-wise where a family
of thresholds or guesses is searched).

References:
    Jagielski, Ullman, Oprea (2020), "Auditing differentially private machine learning: how private is
    private SGD?" (NeurIPS) -- ε_LB = ln((TPR_lower − δ) / FPR_upper) from Clopper-Pearson bounds.
    Steinke, Nasr, Jagielski (2023), "Privacy auditing with one (1) training run" (NeurIPS), Thm 3.1 and
    its approximate-DP p-value (§5, Algorithm 2 of the paper's appendix code).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import binom

from attacks.metrics import clopper_pearson, validate_scores

THRESHOLD_POINTS = 12  # order-statistic indices per direction (0 and 11 log-spaced counts up to n / 2)
GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)  # one-run audit: k = fraction · m top (and bottom) guesses


def _check_probability(name: str, value: float, *, closed_low: bool) -> float:
    v = float(value)
    ok = (0.0 <= v < 1.0) if closed_low else (0.0 < v < 1.0)
    if not ok:
        raise ValueError(f"{name} must be in {'[0, 1)' if closed_low else '(0, 1)'}, got {value!r}")
    return v


def epsilon_lower_bound(true_positives: int, false_negatives: int, false_positives: int, true_negatives: int,
                        *, delta: float = 0.0, confidence: float = 0.95) -> float:
    """ε lower bound of one membership test with a fixed threshold (Jagielski et al. 2020).

    Any (ε, δ)-DP mechanism has TPR <= e^ε·FPR + δ and TNR <= e^ε·FNR + δ. With one-sided Clopper-Pearson
    bounds TPR_lower and FPR_upper, each at level 1 − (1 − confidence)/2 so that both hold jointly with
    probability >= ``confidence`` (union bound), ε_LB = max(ln((TPR_lower − δ)/FPR_upper),
    ln((TNR_lower − δ)/FNR_upper)), where TNR_lower = 1 − FPR_upper and FNR_upper = 1 − TPR_lower (the
    Clopper-Pearson interval is symmetric), so both directions rest on the same two bounds.

    Args:
        true_positives, false_negatives: members called member / non-member (at least one member).
        false_positives, true_negatives: non-members called member / non-member (at least one).
        delta: the δ of the guarantee tested, in [0, 1).
        confidence: joint coverage of the two bounds, in (0, 1).

    Returns:
        ε_LB >= 0 (nats); 0 when neither direction gives a positive bound.

    Raises:
        ValueError: negative or non-integer counts, no members or no non-members, δ or confidence out of range.
    """
    counts = (true_positives, false_negatives, false_positives, true_negatives)
    if any(float(c) != int(c) or int(c) < 0 for c in counts):
        raise ValueError(f"counts must be integers >= 0, got {counts}")
    tp, fn, fp, tn = (int(c) for c in counts)
    if tp + fn < 1 or fp + tn < 1:
        raise ValueError(f"need at least one member and one non-member, got tp+fn={tp + fn}, fp+tn={fp + tn}")
    delta = _check_probability("delta", delta, closed_low=True)
    confidence = _check_probability("confidence", confidence, closed_low=False)
    each = 1.0 - (1.0 - confidence) / 2.0
    tpr_lower = clopper_pearson(tp, tp + fn, confidence=each, sided="lower")[0]
    fpr_upper = clopper_pearson(fp, fp + tn, confidence=each, sided="upper")[1]
    best = 0.0
    if tpr_lower - delta > 0.0:
        best = max(best, math.log((tpr_lower - delta) / fpr_upper))
    tnr_lower, fnr_upper = 1.0 - fpr_upper, 1.0 - tpr_lower
    if tnr_lower - delta > 0.0:
        best = max(best, math.log((tnr_lower - delta) / fnr_upper))
    return best


def order_statistic_indices(n: int, points: int = THRESHOLD_POINTS) -> list[int]:
    """The fixed family of order-statistic indices j (0 and log-spaced counts up to n // 2) at which
    thresholds are placed; it depends on n only, never on the scores."""
    top = max(1, n // 2)
    return sorted({0, *np.unique(np.round(np.geomspace(1, top, max(1, points - 1)))).astype(int).tolist()})


def threshold_counts(scores: Any, labels: Any, *, points: int = THRESHOLD_POINTS) -> list[list[int]]:
    """``[tp, fn, fp, tn]`` at a family of thresholds chosen from one side's scores only.

    Direction "high score = member": the threshold is the (j+1)-th highest non-member score and an
    example is called a member when its score is strictly above it, so at most j non-members are; the
    stored ``fp`` is j (the true FPR at that order statistic is Beta(j + 1, n0 − j) distributed, which is
    what the Clopper-Pearson upper bound at count j inverts; ties only make the observed count smaller,
    so using j is conservative). ``tp`` counts members above it: given the threshold, a binomial count.
    Direction "low score = non-member" is the mirror image with the (j+1)-th lowest member score
    (``fn`` = j, ``tn`` = non-members strictly below it). Because no threshold looks at the side whose
    rate gets the binomial bound, a Bonferroni correction over the family makes the best of them valid.

    Returns:
        ``2 · len(order_statistic_indices)`` rows ``[tp, fn, fp, tn]`` (duplicates kept: the family size
        must not depend on the data).
    """
    s, y = validate_scores(scores, labels)
    pos, neg = np.sort(s[y == 1]), np.sort(s[y == 0])
    n1, n0 = pos.size, neg.size
    rows = []
    for j in order_statistic_indices(n0, points):
        t = neg[n0 - 1 - j] if j < n0 else -np.inf  # (j+1)-th highest non-member score
        tp = int(n1 - np.searchsorted(pos, t, side="right"))
        rows.append([tp, n1 - tp, min(j, n0), n0 - min(j, n0)])
    for j in order_statistic_indices(n1, points):
        t = pos[j] if j < n1 else np.inf  # (j+1)-th lowest member score
        tn = int(np.searchsorted(neg, t, side="left"))
        rows.append([n1 - min(j, n1), min(j, n1), n0 - tn, tn])
    return rows


def best_epsilon(counts: Sequence[Sequence[int]], *, delta: float, confidence: float = 0.95) -> float:
    """Best ε_LB over a family of thresholds, each tested at confidence 1 − (1 − confidence)/len(counts)
    (Bonferroni), so the maximum holds with probability >= ``confidence``. 0.0 for an empty family."""
    if not counts:
        return 0.0
    each = 1.0 - (1.0 - confidence) / len(counts)
    return max(epsilon_lower_bound(*c, delta=delta, confidence=each) for c in counts)


def one_run_p_value(m: int, r: int, v: int, *, epsilon: float, delta: float = 0.0) -> float:
    """P[at least v of r guesses correct] for an (ε, δ)-DP mechanism with m canaries, each included
    independently with probability ½ (Steinke, Nasr, Jagielski 2023): the Binomial(r, e^ε/(1+e^ε)) tail
    plus 2·m·δ·max_{i=1..v} P[v − i <= Binomial(r, q) < v] / i."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got m={m}, r={r}, v={v}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(binom.sf(v - 1, r, q))
    if delta <= 0.0 or v == 0:
        return min(tail, 1.0)
    below = binom.pmf(np.arange(v - 1, -1, -1), r, q)  # pmf(v-1), pmf(v-2), ..., pmf(0)
    worst = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2.0 * m * delta * worst, 1.0)


def one_run_epsilon(m: int, r: int, v: int, *, delta: float = 0.0, confidence: float = 0.95) -> float:
    """The largest ε whose one-run p-value is still below 1 − ``confidence`` (bisection; 0 if none)."""
    alpha = 1.0 - _check_probability("confidence", confidence, closed_low=False)
    if r == 0 or one_run_p_value(m, r, v, epsilon=0.0, delta=delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(m, r, v, epsilon=hi, delta=delta) < alpha and hi < 100.0:
        lo, hi = hi, 2.0 * hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, r, v, epsilon=mid, delta=delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_guesses(scores: Any, included: Any, *, fractions: Sequence[float] = GUESS_FRACTIONS) -> list[list[int]]:
    """``[k_plus, k_minus, r, v]`` for each guessing rule of the one-run audit: the k_plus highest scores
    guessed "included", the k_minus lowest "excluded", the rest abstain; r = k_plus + k_minus guesses,
    v correct. Rules: k = fraction · m for each fraction, both one-sided (k_minus = 0) and two-sided."""
    s, y = validate_scores(scores, included)
    m = s.size
    order = np.argsort(-s, kind="stable")
    ranked = y[order]
    rows = []
    for f in fractions:
        k = max(1, min(m // 2, int(round(f * m))))
        for k_minus in (0, k):
            v = int(ranked[:k].sum()) + int((ranked[m - k_minus:] == 0).sum())
            rows.append([k, k_minus, k + k_minus, v])
    return rows


def best_one_run_epsilon(m: int, guesses: Sequence[Sequence[int]], *, delta: float,
                         confidence: float = 0.95) -> float:
    """Best ε̂ over the guessing rules, each at confidence 1 − (1 − confidence)/len(guesses) (Bonferroni)."""
    if not guesses:
        return 0.0
    each = 1.0 - (1.0 - confidence) / len(guesses)
    return max(one_run_epsilon(m, r, v, delta=delta, confidence=each) for _, _, r, v in guesses)


def membership_audit(scores: Any, labels: Any, *, delta: float, confidence: float = 0.95,
                     one_run: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``audit`` block stored with every membership attack in results.json.

    Args:
        scores, labels: the attack's ``(N,)`` scores and membership labels.
        delta: δ of the guarantee tested (the mechanism's, or the run's δ where there is none).
        confidence: coverage of each reported bound (family-wise over its thresholds / guesses).
        one_run: ``{"m": m, "guesses": [[k_plus, k_minus, r, v], ...]}`` for a canary run whose labels
            are independent fair coins (``attacks.canary``); ``None`` otherwise.

    Returns:
        ``{"delta", "confidence", "counts": [[tp, fn, fp, tn], ...], "epsilon_lb"}`` plus, for a canary
        run, ``"one_run": {"m", "guesses", "epsilon_hat"}``. Every bound can be recomputed at another
        confidence from the stored counts (``audit_bounds``).
    """
    counts = threshold_counts(scores, labels)
    block: dict[str, Any] = {"delta": float(delta), "confidence": confidence, "counts": counts,
                             "epsilon_lb": best_epsilon(counts, delta=delta, confidence=confidence)}
    if one_run is not None:
        block["one_run"] = {**one_run, "epsilon_hat": best_one_run_epsilon(
            one_run["m"], one_run["guesses"], delta=delta, confidence=confidence)}
    return block


def audit_bounds(block: dict[str, Any], *, confidence: float) -> dict[str, float]:
    """Recompute a stored audit block's bounds at ``confidence``: ``{"epsilon_lb": x}`` and, for a
    canary run, ``"epsilon_hat"``."""
    out = {"epsilon_lb": best_epsilon(block.get("counts") or [], delta=block["delta"], confidence=confidence)}
    if block.get("one_run"):
        o = block["one_run"]
        out["epsilon_hat"] = best_one_run_epsilon(o["m"], o["guesses"], delta=block["delta"], confidence=confidence)
    return out


def privacy_bugs(results: Sequence[dict[str, Any]], *, confidence: float = 0.95) -> tuple[list[dict[str, Any]], int]:
    """Compare every empirical lower bound with the accountant's ε of every cell that claims a guarantee.

    Every (cell, attack, bound) is one comparison; each bound is recomputed at confidence
    1 − (1 − ``confidence``)/M for M comparisons (Bonferroni over the run), so the chance that any flag
    is a false alarm is at most 1 − ``confidence``.

    Args:
        results: the ``RunResult`` dicts of a results document.

    Returns:
        (bugs, M): one dict per lower bound above its accountant's ε — ``mechanism``, ``target_epsilon``,
        ``seed``, ``attack``, ``bound`` (``"epsilon_lb"`` or ``"epsilon_hat"``), ``lower_bound``,
        ``epsilon``, ``delta``, ``accountant``, ``confidence`` (the corrected one) -- and M.
    """
    items = []
    for r in results:
        p = r.get("privacy") or {}
        if r.get("status", "ok") != "ok" or p.get("guarantee", "none") == "none" or p.get("epsilon") is None:
            continue
        for name, a in sorted((r.get("attacks") or {}).items()):
            block = a.get("audit")
            if block:
                items += [(r, name, block, kind) for kind in ("epsilon_lb", "epsilon_hat")
                          if kind == "epsilon_lb" or block.get("one_run")]
    if not items:
        return [], 0
    corrected = 1.0 - (1.0 - confidence) / len(items)
    bugs = []
    for r, name, block, kind in items:
        p = r["privacy"]
        value = audit_bounds(block, confidence=corrected)[kind]
        if value > float(p["epsilon"]) * (1.0 + 1e-9):
            bugs.append({"mechanism": r.get("mechanism"), "target_epsilon": r.get("target_epsilon"),
                         "seed": r.get("seed"), "attack": name, "bound": kind, "lower_bound": value,
                         "epsilon": p["epsilon"], "delta": p.get("delta"), "accountant": p.get("accountant"),
                         "confidence": corrected})
    return bugs, len(items)
