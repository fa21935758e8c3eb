"""Membership-inference metrics, all read off one ROC curve: the only ROC/AUC/TPR@FPR code in the suite.

Conventions: ``scores`` are ``(N,)`` floats where larger means "member"; ``labels`` are ``(N,)`` in
{0, 1} with 1 for members. An example is predicted "member" when its score is >= a threshold, and
every metric is a maximum (or a read-out) over all thresholds of that one rule.

References:
    Yeom, Giacomelli, Fredrikson, Jha (2018), "Privacy risk in machine learning: analyzing the
    connection to overfitting" (CSF) -- membership advantage = TPR - FPR.
    Carlini, Chien, Nasr, Song, Terzis, Tramèr (2022), "Membership inference attacks from first
    principles" (IEEE S&P), §IV -- report TPR at low FPR on a log-log ROC, not only AUC.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import auc as _area_under_curve
from sklearn.metrics import roc_curve

from attacks.analysis.statistics.confidence import clopper_pearson

_MIN_EVENTS = 10  # an FPR level below MIN_EVENTS / n_non_members is "not measurable"


def validate_scores(scores: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """Check and convert attack scores and membership labels.

    Scores with ±inf are replaced by their dense ranks (the order and every tie kept exactly: a finite stand-in such
    as max + 1 would tie with finite scores at or above 2⁵³).

    Args:
        scores: ``(N,)`` numeric (or boolean) scores, higher meaning "member".
        labels: ``(N,)`` in {0, 1}, 1 for a member.

    Returns:
        ``(scores float64 (N,), labels int8 (N,))``.

    Raises:
        ValueError: shapes that are not both ``(N,)``, non-numeric scores, NaN, labels outside {0, 1} or a single
            class.
    """
    s = np.asarray(scores)
    y = np.asarray(labels)
    if s.ndim != 1 or y.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"scores and labels must both have shape (N,), got {s.shape} and {y.shape}")
    if not np.issubdtype(s.dtype, np.number) and s.dtype != np.bool_:
        raise ValueError(f"scores must be numeric, got dtype {s.dtype}")
    s = s.astype(np.float64)
    if np.isnan(s).any():
        raise ValueError(f"scores contain {int(np.isnan(s).sum())} NaN value(s)")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels must be in {{0, 1}}, got values {np.unique(y)[:5].tolist()}")
    y = y.astype(np.int8)
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.size:
        raise ValueError(f"need both members and non-members, got {n_pos} members of {y.size}")
    if np.isinf(s).any():  # the ROC depends only on the order: dense ranks keep it, ties and ±inf included
        s = rankdata(s, method="dense").astype(np.float64)
    return s, y


def _downsample_roc(fpr: np.ndarray, tpr: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``max_points`` ROC points, log-spaced in FPR, always with both end points.

    For each grid value g the kept point is the last one with FPR <= g, i.e. the upper-left corner of
    the ROC staircase there, so the curve is exact at every kept FPR and stays monotone.
    """
    if fpr.size <= max_points:
        return fpr, tpr
    keep = [0, int(np.searchsorted(fpr, 0.0, side="right")) - 1, fpr.size - 1]
    smallest = float(fpr[fpr > 0].min())
    grid = np.logspace(math.log10(smallest), 0.0, max_points - len(keep))
    keep.extend((np.searchsorted(fpr, grid, side="right") - 1).tolist())
    idx = np.unique(np.clip(keep, 0, fpr.size - 1))
    return fpr[idx], tpr[idx]


def membership_metrics(scores: Any, labels: Any, *, fpr_levels: Sequence[float] = (0.01, 0.001, 0.0001),
                       confidence: float = 0.95, max_roc_points: int = 400) -> dict[str, Any]:
    """All membership-inference metrics of one attack, from one ROC curve (scikit-learn's ``roc_curve``).

    Args:
        scores: ``(N,)`` float, larger means "member"; ±inf are allowed (only the order matters).
        labels: ``(N,)`` in {0, 1}, 1 for members.
        fpr_levels: FPR levels f at which to report the TPR (Carlini et al. 2022, §IV).
        confidence: coverage of the two-sided Clopper-Pearson interval on each TPR.
        max_roc_points: at most this many ROC points are returned for plotting (>= 4).

    Returns:
        A JSON-able dict: ``auc`` (equal to the Mann-Whitney U statistic / (n1·n0), ties counted ½);
        ``balanced_accuracy`` = max over thresholds of (TPR + 1 − FPR) / 2; ``advantage`` = max over
        thresholds of TPR − FPR (Yeom et al. 2018; 0 for an attack no better than "nobody is a
        member"); ``tpr_at_fpr`` = ``{str(f): {"fpr": f, "tpr", "lower", "upper", "measurable"}}``
        where ``tpr`` is the largest TPR among ROC points with FPR <= f and ``lower``/``upper`` its
        Clopper-Pearson interval from the count of members at or above that threshold -- all three
        ``None`` and ``measurable`` False when f < 10 / n_non_members; and ``roc`` =
        ``{"fpr": [...], "tpr": [...]}``, non-decreasing, from (0, 0) to (1, 1), log-spaced in FPR.

    Raises:
        ValueError: shapes differ or are not ``(N,)``, NaN scores, labels outside {0, 1}, no members
            or no non-members, a level outside (0, 1], or ``max_roc_points`` < 4.
    """
    s, y = validate_scores(scores, labels)
    if max_roc_points < 4:
        raise ValueError(f"max_roc_points must be >= 4, got {max_roc_points}")
    bad = [f for f in fpr_levels if not 0.0 < float(f) <= 1.0]
    if bad:
        raise ValueError(f"fpr_levels must lie in (0, 1], got {bad}")
    n_pos = int(y.sum())
    n_neg = int(y.size - n_pos)

    # drop_intermediate=False: every threshold is kept, so "largest TPR with FPR <= f" is exact.
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    fp_counts = np.rint(fpr * n_neg).astype(np.int64)
    tp_counts = np.rint(tpr * n_pos).astype(np.int64)

    tpr_at: dict[str, dict[str, Any]] = {}
    for level in fpr_levels:
        f = float(level)
        entry: dict[str, Any] = {"fpr": f, "tpr": None, "lower": None, "upper": None, "measurable": False}
        if f * n_neg >= _MIN_EVENTS * (1.0 - 1e-9):
            allowed = fp_counts <= math.floor(f * n_neg * (1.0 + 1e-12))
            k = int(tp_counts[allowed].max())  # (0, 0) is always allowed
            lower, upper = clopper_pearson(k, n_pos, confidence=confidence)
            entry.update(tpr=k / n_pos, lower=lower, upper=upper, measurable=True)
        tpr_at[str(level)] = entry

    roc_fpr, roc_tpr = _downsample_roc(fpr, tpr, max_roc_points)
    return {
        "auc": float(_area_under_curve(fpr, tpr)),
        "balanced_accuracy": float(np.max(tpr + 1.0 - fpr) / 2.0),
        "advantage": float(np.max(tpr - fpr)),
        "tpr_at_fpr": tpr_at,
        "roc": {"fpr": roc_fpr.tolist(), "tpr": roc_tpr.tolist()},
    }
