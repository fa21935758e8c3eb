"""ART 1.20's learned black-box membership-inference attack as a zoo auditor.

(PyPI ``adversarial-robustness-toolbox==1.20.1``.)
``art.attacks.inference.membership_inference.MembershipInferenceBlackBox`` (Shokri et al. 2017, "Membership inference
attacks against machine learning models", S&P, the learned attack model over the target's outputs) on the scores of
privbench's black-box canary audits.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import numpy as np

from bench.zoo.api import AuditorInput, Verdict, register_auditor
from bench.zoo.auditors._anchors import BLACK_BOX, BLACK_BOX_ATTACKS, AnchorAuditor, canaries, one_run_bound

ATTACK_MODEL = "lr"


def _no_queries(x: np.ndarray) -> np.ndarray:
    raise RuntimeError("the zoo gives ART the saved canary scores; no model is queried")


def decisions(scores: np.ndarray, labels: np.ndarray, calibration: np.ndarray, audit: np.ndarray) -> np.ndarray:
    """ART's membership decisions (0/1) on the ``audit`` canaries, its attack trained on the ``calibration`` ones."""
    from art.attacks.inference.membership_inference import MembershipInferenceBlackBox
    from art.estimators.classification import BlackBoxClassifier

    x = scores.reshape(-1, 1).astype(np.float32)
    target = BlackBoxClassifier(_no_queries, input_shape=(1,), nb_classes=2)
    attack = MembershipInferenceBlackBox(target, input_type="prediction", attack_model_type=ATTACK_MODEL)
    included = labels == 1
    attack.fit(pred=x[calibration & included], test_pred=x[calibration & ~included])
    inferred: np.ndarray = np.asarray(attack.infer(None, pred=x[audit]), np.float64)
    guesses: np.ndarray = np.rint(inferred.ravel()).astype(np.int64)
    return guesses


def judge(inp: AuditorInput) -> Verdict:
    """ART's decisions on the audit half, read by privbench's one-run bound against the certified ε."""
    c = canaries(inp, BLACK_BOX)
    calibration, audit = c.halves()
    guess = decisions(c.scores, c.labels, calibration, audit)
    r = int(audit.sum())
    v = int((guess == c.labels[audit]).sum())
    return c.verdict(one_run_bound(r, r, v, delta=c.delta),
                     f"ART MembershipInferenceBlackBox ({ATTACK_MODEL}): {v}/{r} correct → privbench one-run ε_lb")


register_auditor(AnchorAuditor(
    name="art-blackbox", threat_model="black-box", source="ART 1.20 MembershipInferenceBlackBox",
    mechanisms=("dpsgd", "opacus-example", "dpmix", "local-gaussian"),
    attacks=BLACK_BOX_ATTACKS, judge=judge, requires="art",
    description="ART's learned black-box MIA (lr attack model) trained on half the black-box canaries, deciding the "
                "other half; no verdict of its own: privbench reads its decisions as a one-run ε lower bound "
                "(Steinke et al. 2023, 95 %) against the certified ε"))
