"""The tests ``privbench compare`` makes of each difference between two runs, all from SciPy.

McNemar's exact test on paired per-example test outcomes (else Fisher's exact test on the two accuracies), Fisher's
exact test on two TPRs at one FPR, a z-test of two AUCs with Hanley & McNeil's (1982) standard errors, and Holm's
step-down correction over every comparison made.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def mcnemar_exact(before: np.ndarray, after: np.ndarray) -> tuple[float, int, int]:
    """McNemar's exact test (1947) of paired correctness ``(n,)`` on the same test records, in the same order.

    Returns ``(p, b, c)``: the two-sided binomial p-value of the discordant pairs at 1/2 (1 without any), b right
    before and wrong after, c wrong before and right after. ValueError if the arrays differ in length.
    """
    if before.shape != after.shape:
        raise ValueError(f"paired outcomes of {before.shape} and {after.shape} records")
    b = int(np.sum(before & ~after))
    c = int(np.sum(~before & after))
    if b + c == 0:
        return 1.0, b, c
    return float(stats.binomtest(b, b + c, 0.5).pvalue), b, c


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test of two independent proportions ``k1/n1`` and ``k2/n2`` (n ≥ 1)."""
    table = [[k1, n1 - k1], [k2, n2 - k2]]
    return float(stats.fisher_exact(table).pvalue)


def auc_z_test(auc1: float, n_pos1: int, n_neg1: int, auc2: float, n_pos2: int, n_neg2: int) -> float:
    """Two-sided p-value of a z-test of two independent AUCs, each with Hanley & McNeil's (1982) standard error.

    ``n_pos``/``n_neg``: members and non-members scored; p = 1 where the AUCs are equal or no error is estimable.
    """
    var = _hanley_mcneil_var(auc1, n_pos1, n_neg1) + _hanley_mcneil_var(auc2, n_pos2, n_neg2)
    if auc1 == auc2 or not var > 0:
        return 1.0
    return float(2 * stats.norm.sf(abs(auc1 - auc2) / math.sqrt(var)))


def _hanley_mcneil_var(auc: float, n_pos: int, n_neg: int) -> float:
    if n_pos < 1 or n_neg < 1:
        return math.inf
    a = min(max(auc, 1e-6), 1 - 1e-6)  # the variance vanishes at 0 and 1: keep a floor
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    return (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)


def holm(p_values: list[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values, in ``p_values``' order: each below α iff Holm rejects it at level α.

    (SciPy has no Holm correction and statsmodels is not a dependency.)
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [1.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def seed_test(before: list[float], after: list[float]) -> tuple[float, str] | None:
    """``(p, test)``: whether a metric measured once per seed moved beyond its seed-to-seed variation, or None.

    Welch's t-test with at least two seeds on each side; with one seed on one side, the t prediction test of that value
    against the other side's seeds (n − 1 degrees of freedom); None with one seed on each side. Two sides without any
    variation: p = 1 when equal, 0 when not.
    """
    if min(len(before), len(after)) < 1 or max(len(before), len(after)) < 2:
        return None
    if len(set(before)) == 1 and len(set(after)) == 1:
        return (1.0 if before[0] == after[0] else 0.0), "no seed-to-seed variation"
    if len(before) >= 2 and len(after) >= 2:
        p = stats.ttest_ind(before, after, equal_var=False).pvalue
        return float(p) if math.isfinite(p) else 1.0, f"Welch t over seeds, {len(before)} vs {len(after)}"
    many, one = (before, after[0]) if len(before) >= 2 else (after, before[0])
    n, mean, sd = len(many), float(np.mean(many)), float(np.std(many, ddof=1))
    if sd == 0:
        return (1.0 if one == mean else 0.0), "no seed-to-seed variation"
    t = (one - mean) / (sd * math.sqrt(1 + 1 / n))
    return float(2 * stats.t.sf(abs(t), n - 1)), f"t prediction test over {n} seeds"
