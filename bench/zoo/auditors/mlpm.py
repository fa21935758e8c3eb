"""ML Privacy Meter's LOSS attack as a zoo auditor, scored as the package on PyPI scores it.

``privacy-meter==1.0.1``, import ``privacy_meter``; Murakonda, Shokri 2020, "ML Privacy Meter", and the population
attack of Ye et al. 2022, "Enhanced membership inference attacks against machine learning models", CCS.

Design notes: docs/design-notes.md.
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
