"""Tests for attacks.analysis.statistics.metrics against hand-computed cases and independent implementations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binomtest, mannwhitneyu
from sklearn.metrics import roc_curve

from attacks.analysis.statistics.metrics import membership_metrics


def _pair_count_auc(scores, labels) -> float:
    """AUC by brute force: P(member score > non-member score) + ½ P(tie)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y == 1]
    neg = [s for s, y in zip(scores, labels, strict=True) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_perfect_attack():
    m = membership_metrics([4, 3, 2, 1], [1, 1, 0, 0])
    assert m["auc"] == pytest.approx(1.0)
    assert m["advantage"] == pytest.approx(1.0)
    assert m["balanced_accuracy"] == pytest.approx(1.0)


def test_inverted_attack_has_zero_auc_and_no_advantage():
    m = membership_metrics([1, 2, 3, 4], [1, 1, 0, 0])
    assert m["auc"] == pytest.approx(0.0)
    # "score >= t means member": the best threshold is t = +inf (nobody is a member).
    assert m["advantage"] == pytest.approx(0.0)
    assert m["balanced_accuracy"] == pytest.approx(0.5)


def test_mixed_case_with_ties_by_hand():
    scores = [0.9, 0.8, 0.8, 0.5, 0.3, 0.3]
    labels = [1, 1, 0, 1, 0, 0]
    m = membership_metrics(scores, labels)
    # members {0.9, 0.8, 0.5} vs non-members {0.8, 0.3, 0.3}: 3 + 2.5 + 2 = 7.5 winning pairs of 9.
    assert _pair_count_auc(scores, labels) == pytest.approx(7.5 / 9)
    assert m["auc"] == pytest.approx(7.5 / 9)
    # thresholds: >=0.9 (1/3, 0), >=0.8 (2/3, 1/3), >=0.5 (1, 1/3), >=0.3 (1, 1).
    assert m["advantage"] == pytest.approx(2 / 3)
    assert m["balanced_accuracy"] == pytest.approx((1 + 1 - 1 / 3) / 2)


def test_auc_equals_mann_whitney_u_on_random_data():
    rng = np.random.default_rng(0)
    members = np.round(rng.normal(0.3, 1.0, 700), 1)  # rounding creates many ties
    non_members = np.round(rng.normal(0.0, 1.0, 900), 1)
    scores = np.concatenate([members, non_members])
    labels = np.concatenate([np.ones(700, int), np.zeros(900, int)])
    u = mannwhitneyu(members, non_members, alternative="two-sided").statistic
    assert membership_metrics(scores, labels)["auc"] == pytest.approx(u / (700 * 900), abs=1e-12)


def _constructed_case():
    # 1000 non-members with distinct scores 0..999; 200 members placed between known non-member scores.
    non_members = np.arange(1000, dtype=float)
    members = np.concatenate(
        [
            2000.0 + np.arange(30),  # above every non-member: 0 false positives
            np.full(50, 995.5),  # 4 non-members (996..999) score higher
            np.full(40, 985.5),  # 14 non-members (986..999) score higher
            -1.0 - np.arange(80),  # below every non-member
        ]
    )
    scores = np.concatenate([members, non_members])
    labels = np.concatenate([np.ones(200, int), np.zeros(1000, int)])
    return scores, labels


def test_tpr_at_fpr_known_counts():
    scores, labels = _constructed_case()
    m = membership_metrics(scores, labels, fpr_levels=(0.01, 0.02, 0.5))
    at1, at2 = m["tpr_at_fpr"]["0.01"], m["tpr_at_fpr"]["0.02"]
    # FPR <= 1 %: at most 10 false positives -> threshold 995.5 -> 30 + 50 members found.
    assert at1["measurable"] and at1["fpr"] == 0.01
    assert at1["tpr"] == pytest.approx(80 / 200)
    # FPR <= 2 %: at most 20 false positives -> threshold 985.5 -> 120 members found.
    assert at2["tpr"] == pytest.approx(120 / 200)
    assert m["tpr_at_fpr"]["0.5"]["tpr"] == pytest.approx(120 / 200)
    exact = binomtest(80, 200).proportion_ci(confidence_level=0.95, method="exact")
    assert (at1["lower"], at1["upper"]) == pytest.approx((exact.low, exact.high), rel=1e-9)
    assert at1["lower"] < at1["tpr"] < at1["upper"]


def test_measurable_flag_at_the_10_over_n_boundary():
    rng = np.random.default_rng(1)
    for n_neg, expected in [(1000, True), (999, False)]:
        scores = rng.normal(size=n_neg + 100)
        labels = np.r_[np.ones(100, int), np.zeros(n_neg, int)]
        entry = membership_metrics(scores, labels, fpr_levels=(0.01,))["tpr_at_fpr"]["0.01"]
        assert entry["measurable"] is expected
        if not expected:
            assert entry["tpr"] is None and entry["lower"] is None and entry["upper"] is None
    m = membership_metrics(rng.normal(size=20_000), np.r_[np.ones(10_000, int), np.zeros(10_000, int)])
    assert [m["tpr_at_fpr"][k]["measurable"] for k in ("0.01", "0.001", "0.0001")] == [True, True, False]


def test_roc_downsampling_keeps_monotonicity_endpoints_and_log_spacing():
    rng = np.random.default_rng(2)
    labels = np.r_[np.ones(20_000, int), np.zeros(20_000, int)]
    scores = rng.normal(size=40_000) + 0.5 * labels
    roc = membership_metrics(scores, labels, max_roc_points=100)["roc"]
    fpr, tpr = np.array(roc["fpr"]), np.array(roc["tpr"])
    assert 50 <= fpr.size <= 100
    assert (fpr[0], tpr[0]) == (0.0, 0.0) and (fpr[-1], tpr[-1]) == (1.0, 1.0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    # every kept point is a point of the full ROC curve
    full_fpr, full_tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    full = set(zip(full_fpr.tolist(), full_tpr.tolist(), strict=True))
    assert all(p in full for p in zip(fpr.tolist(), tpr.tolist(), strict=True))
    # log spacing: each decade of FPR from 1e-4 up keeps a fair share of the points
    for lo in (1e-4, 1e-3, 1e-2, 1e-1):
        assert np.sum((fpr > lo) & (fpr <= 10 * lo)) >= 8
    small = membership_metrics([3, 2, 1, 0], [1, 0, 1, 0])["roc"]
    assert len(small["fpr"]) == 5  # short curves are returned whole


@pytest.mark.parametrize(
    ("scores", "labels", "match"),
    [
        ([1, 2, 3], [1, 0], "shape"),
        ([[1, 2]], [[1, 0]], "shape"),
        ([1, 2, 3], [1, 0, 2], "labels"),
        ([1, 2, 3], [1, 1, 1], "non-members"),
        ([1, 2, 3], [0, 0, 0], "members"),
        ([1, math.nan, 3], [1, 0, 1], "NaN"),
    ],
)
def test_bad_input_raises_one_line_value_error(scores, labels, match):
    with pytest.raises(ValueError, match=match) as info:
        membership_metrics(scores, labels)
    assert "\n" not in str(info.value)


def test_infinite_scores_are_ordered_not_rejected():
    m = membership_metrics([np.inf, 5.0, -np.inf, 1.0], [1, 1, 0, 0])
    assert m["auc"] == pytest.approx(1.0)


def test_infinite_scores_never_tie_with_huge_finite_ones():
    # members {+inf, -1e16}, non-members {1e16, 0, -inf}: +inf beats all three, -1e16 beats -inf: AUC 4/6. A finite
    # stand-in max + 1 = 1e16 + 1 == 1e16 in float64 would tie +inf with 1e16 (AUC 3.5/6).
    m = membership_metrics([np.inf, 1e16, 0.0, -1e16, -np.inf], [1, 0, 0, 1, 0])
    assert m["auc"] == pytest.approx(4 / 6)
