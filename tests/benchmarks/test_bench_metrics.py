"""pytest-benchmark timing of membership_metrics on one million scores (disabled by default)."""

from __future__ import annotations

import numpy as np

from attacks.analysis.statistics.metrics import membership_metrics


def test_bench_membership_metrics_1e6(benchmark):
    rng = np.random.default_rng(0)
    labels = (rng.random(1_000_000) < 0.5).astype(np.int64)
    scores = rng.normal(size=labels.size) + 0.2 * labels
    result = benchmark(membership_metrics, scores, labels)
    assert 0.5 < result["auc"] < 0.65
    assert len(result["roc"]["fpr"]) <= 400
    assert all(entry["measurable"] for entry in result["tpr_at_fpr"].values())
