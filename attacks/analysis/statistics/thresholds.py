"""ε lower bounds from a membership test at a family of thresholds (Jagielski, Ullman, Oprea 2020).

Valid for independent trials (repeated training runs, or canaries released independently); on one model's natural
members the outcomes are not independent and the bound is only a heuristic. Scores ``(N,)``, larger meaning "member";
labels ``(N,)`` in {0, 1} (1: member / canary included); ``confidence``: the probability that the reported bound
holds (family-wise over the thresholds or guesses searched). Jagielski, Ullman, Oprea (NeurIPS 2020): ε_LB =
ln((TPR_lower − δ) / FPR_upper) from Clopper-Pearson bounds; Steinke, Nasr, Jagielski (NeurIPS 2023), Thm 3.1 and its
approximate-DP p-value (§5, Algorithm 2 of the paper's appendix code). Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from attacks.analysis.statistics.confidence import clopper_pearson
from attacks.analysis.statistics.metrics import validate_scores

THRESHOLD_POINTS = 12  # order-statistic indices per direction (0 and 11 log-spaced counts up to n / 2)


def _check_probability(name: str, value: float, *, closed_low: bool) -> float:
    v = float(value)
    ok = (0.0 <= v < 1.0) if closed_low else (0.0 < v < 1.0)
    if not ok:
        raise ValueError(f"{name} must be in {'[0, 1)' if closed_low else '(0, 1)'}, got {value!r}")
    return v


def epsilon_lower_bound(true_positives: int, false_negatives: int, false_positives: int, true_negatives: int,
                        *, delta: float = 0.0, confidence: float = 0.95) -> float:
    """ε lower bound of one membership test with a fixed threshold (Jagielski et al. 2020), from its confusion counts.

    Any (ε, δ)-DP mechanism has TPR <= e^ε·FPR + δ and TNR <= e^ε·FNR + δ. With one-sided Clopper-Pearson bounds
    TPR_lower and FPR_upper, each at 1 − (1 − confidence)/2 (jointly at ``confidence``), ε_LB = max(ln((TPR_lower −
    δ)/FPR_upper), ln((TNR_lower − δ)/FNR_upper)) >= 0, where TNR_lower = 1 − FPR_upper and FNR_upper = 1 − TPR_lower
    (the interval is symmetric), so both directions rest on the same two bounds.

    Raises:
        ValueError: negative or non-integer counts, no members or no non-members, δ outside [0, 1) or confidence
            outside (0, 1).
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
    """The sorted order-statistic indices of the thresholds: 0 and ``points`` − 1 log-spaced counts up to n // 2."""
    top = max(1, n // 2)
    return sorted({0, *np.unique(np.round(np.geomspace(1, top, max(1, points - 1)))).astype(int).tolist()})


def threshold_counts(scores: ArrayLike, labels: ArrayLike, *, points: int = THRESHOLD_POINTS) -> list[list[int]]:
    """``[tp, fn, fp, tn]`` at a family of thresholds chosen from one side's scores only (Jagielski et al. 2020).

    "High score = member": the threshold is the (j+1)-th highest non-member score, and a score strictly above it is
    called a member, so at most j non-members are; ``fp`` is j (the true FPR there is Beta(j + 1, n0 − j), which the
    Clopper-Pearson bound at count j inverts; ties only lower the count, so j is conservative). ``tp`` counts members
    above it: given the threshold, a binomial count. "Low score = non-member" mirrors it with the (j+1)-th lowest member
    score. No threshold looks at the side whose rate gets the binomial bound, so Bonferroni over the family makes the
    best valid. 2 · ``len(order_statistic_indices)`` rows, duplicates kept (the family size may not depend on the data).

    Raises:
        ValueError: invalid scores or labels (``validate_scores``).
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
    """Best ε_LB over a family of ``[tp, fn, fp, tn]`` rows, each at 1 − (1 − confidence)/rows (Bonferroni), or 0."""
    if not counts:
        return 0.0
    each = 1.0 - (1.0 - confidence) / len(counts)
    return max(epsilon_lower_bound(*c, delta=delta, confidence=each) for c in counts)
