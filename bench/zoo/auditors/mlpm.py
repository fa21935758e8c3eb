"""ML Privacy Meter's LOSS attack as a zoo auditor, scored as the package on PyPI scores it.

``privacy-meter==1.0.1``, import ``privacy_meter``; Murakonda, Shokri 2020, "ML Privacy Meter", and the population
attack of Ye et al. 2022, "Enhanced membership inference attacks against machine learning models", CCS.

What exists: privacy-meter 1.0.1 is the last release on PyPI and predates RMIA (Zarifzadeh et al. 2024) and the
one-run audit: both are in ML Privacy Meter 2, which is on GitHub only. So there is no "RMIA as ML Privacy Meter scores
it" row (privbench's own ``rmia`` attack is privbench's, not theirs), and what this row runs is 1.0.1's
``privacy_meter.metric.PopulationMetric`` — the LOSS attack with thresholds from a reference population — on the
final model's loss of privbench's black-box input canaries (record ``canary``: its score is the negated loss, so
ML Privacy Meter's loss signal is minus the score).

How: a random half of the canaries is the calibration half; its excluded canaries are the reference population (the
records known not to be trained on), and the other half is audited. The signals go in as ML Privacy Meter's own
signal cache (``logs_dirname``: ``PopulationMetric_target_member.npz`` etc., which ``prepare_metric`` loads instead of
querying a model), and ``run_metric()`` thresholds them as the package does: ``linear_itp_threshold_func`` (the
default of 1.0.1's ``privacy_meter.audit``) at its default 100 FPR tolerances (``default_quantile``), "member" when the
loss is below the threshold, its counts in a ``CombinedMetricResult``. The package imports TensorFlow and Opacus
at import without declaring them (``privacy_meter.model``); the row needs both.

ML Privacy Meter 1.0.1 gives no verdict and no ε. The zoo's reading is privbench's, named here: at each of its 100
operating points, its "member" decisions (tp + fp guesses, tp correct, abstaining on the rest) give a one-run ε
lower bound (Steinke, Nasr, Jagielski 2023; ``attacks.analysis.one_run``) at 1 − 0.05/100 (Bonferroni over the points);
the largest is its value, caught when it exceeds the certified (add/remove) ε.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from bench.zoo.api import AuditorInput, Verdict, register_auditor
from bench.zoo.auditors._anchors import CONFIDENCE, AnchorAuditor, canaries, one_run_bound

RECORDS = ("canary",)


def operating_points(loss: np.ndarray, labels: np.ndarray, calibration: np.ndarray,
                     audit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ML Privacy Meter's ``(tp, fp)`` on the ``audit`` canaries at each of its FPR tolerances.

    Its thresholds from the losses of the excluded ``calibration`` canaries.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # privacy_meter imports TensorFlow: no start-up chatter
    from privacy_meter.hypothesis_test import linear_itp_threshold_func
    from privacy_meter.information_source import InformationSource
    from privacy_meter.metric import PopulationMetric

    included = labels == 1
    with tempfile.TemporaryDirectory(prefix="privbench-mlpm-") as logs:
        for source, mask in (("target_member", audit & included), ("target_non_member", audit & ~included),
                             ("reference", calibration & ~included)):
            np.savez(f"{logs}/PopulationMetric_{source}", [loss[mask]])
        nothing = InformationSource(models=[], datasets=[])  # signals come from the cache: no model, no data set
        metric = PopulationMetric(nothing, nothing, signals=[], hypothesis_test_func=linear_itp_threshold_func,
                                  logs_dirname=logs)
        metric.prepare_metric()
        [result] = metric.run_metric()
    return np.asarray(result.tp, np.int64), np.asarray(result.fp, np.int64)


def judge(inp: AuditorInput) -> Verdict:
    """The best of ML Privacy Meter's operating points, read by privbench's one-run bound, against the certified ε."""
    c = canaries(inp, RECORDS)
    calibration, audit = c.halves()
    tp, fp = operating_points(-c.scores, c.labels, calibration, audit)
    each = 1.0 - (1.0 - CONFIDENCE) / len(tp)
    m = int(audit.sum())
    seen: dict[tuple[int, int], float] = {}
    for t, f in zip(tp.tolist(), fp.tolist(), strict=True):
        if (t + f, t) not in seen:
            seen[(t + f, t)] = one_run_bound(m, t + f, t, delta=c.delta, confidence=each)
    (r, v), best = max(seen.items(), key=lambda kv: kv[1])
    return c.verdict(best, f"ML Privacy Meter PopulationMetric (LOSS, {len(tp)} FPR tolerances): best {v}/{r} "
                           "correct → privbench one-run ε_lb")


register_auditor(AnchorAuditor(
    name="mlpm-loss", threat_model="black-box", source="privacy-meter 1.0.1 PopulationMetric",
    mechanisms=("dpsgd", "opacus-example"), attacks=("canary",), judge=judge, requires="privacy_meter",
    also_requires=("tensorflow", "opacus"),
    description="ML Privacy Meter 1.0.1's population LOSS attack on half the black-box canaries (thresholds from the "
                "other half's excluded ones); no verdict of its own: privbench reads its 100 operating points as "
                "one-run ε lower bounds (Steinke et al. 2023, 95 % with Bonferroni) against the certified ε"))
