"""jax-privacy 2.0.0's auditing estimators as zoo auditors.

(PyPI ``jax-privacy==2.0.0``, module ``jax_privacy.auditing``.) ``CanaryScoreAuditor(in_canary_scores,
out_canary_scores)`` on the scores of privbench's canary audits, then its own ε lower bound at significance 0.05 with
its default threshold choice (``Bonferroni()`` over every threshold):.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from bench.zoo.api import AuditorInput, Verdict, register_auditor
from bench.zoo.auditors._anchors import (
    BLACK_BOX,
    BLACK_BOX_ATTACKS,
    CONFIDENCE,
    WHITE_BOX,
    WHITE_BOX_ATTACKS,
    AnchorAuditor,
    canaries,
)

ESTIMATORS = {"one-run": "epsilon_one_run", "one-run-fdp": "epsilon_one_run_fdp"}
_PAPERS = {"one-run": "Steinke et al. 2023", "one-run-fdp": "Mahloujifar et al. 2024"}


def estimate(method: str, scores: np.ndarray, labels: np.ndarray, *, delta: float) -> float:
    """jax-privacy's ``CanaryScoreAuditor.<method>`` on the canary scores.

    jax-privacy's ``CanaryScoreAuditor.<method>`` at significance 1 − ``CONFIDENCE`` on ``scores`` (larger:
    included) split by ``labels`` (1: included).
    """
    from jax_privacy.auditing import CanaryScoreAuditor

    auditor = CanaryScoreAuditor(scores[labels == 1], scores[labels == 0])
    return float(getattr(auditor, method)(significance=1.0 - CONFIDENCE, delta=delta))


def judge_with(method: str, records: tuple[str, ...], inp: AuditorInput) -> Verdict:
    """The verdict of ``CanaryScoreAuditor.<method>`` on the first of ``records`` this run saved."""
    c = canaries(inp, records)
    return c.verdict(estimate(method, c.scores, c.labels, delta=c.delta), f"jax-privacy {method}")


for _key, _method in ESTIMATORS.items():
    for _threat, _records, _attacks, _mechs in (
            ("white-box", WHITE_BOX, WHITE_BOX_ATTACKS, tuple(WHITE_BOX_ATTACKS)),
            ("black-box", BLACK_BOX, BLACK_BOX_ATTACKS, tuple(BLACK_BOX_ATTACKS))):
        register_auditor(AnchorAuditor(
            name=f"jax-privacy-{_key}-{_threat}", threat_model=_threat, source="jax-privacy 2.0 auditing",
            mechanisms=_mechs, attacks=_attacks, judge=partial(judge_with, _method, _records), requires="jax_privacy",
            description=f"jax-privacy's CanaryScoreAuditor.{_method} ({_PAPERS[_key]}) on privbench's {_threat} "
                        "canary scores, 95 %; caught: its ε lower bound > the certified ε"))
