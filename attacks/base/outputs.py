"""What attacks produce: membership scores (with the design that decided who is a member) or reconstructions.

Attacks compute no metrics: the runner applies ``attacks.analysis.statistics.metrics`` and ``attacks.analysis`` to every
attack's scores in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.core.design import AuditDesign

if TYPE_CHECKING:  # pragma: no cover
    from bench.core.types import PrivacySpent


@dataclass
class MembershipScores:
    """What a membership attack returns.

    Attributes:
        scores: ``(N,)`` float, larger means "member" (±inf allowed; NaN is not).
        labels: ``(N,)`` int in {0, 1}, 1 for members (or canaries included).
        design: how ``labels`` were decided (the audit reads it).
        extra: JSON-able facts the attack wants recorded (e.g. how many shadows it trained).
        privacy: the certified privacy of the run that produced the scores, when it is not the target (an audit run
            on the members plus canaries): audits are compared with it.
        label_outcomes: ``(N,)`` int in {−1, 0, 1} for a design whose ``channels`` hold ``"label"``: the release
            labelled canary i with its pair's first label (1; the first record is present where ``labels`` is 1),
            its second (−1) or another (0).
        conformance: the audit run's conformance tests to its certified mechanism, ``{"tests": [...],
            "measured_epsilon": {...} | None}`` (``attacks.conformance.hypothesis_tests``;
            ``bench.results.Conformance``'s fields); None where the attack measures none.
    """

    scores: np.ndarray
    labels: np.ndarray
    design: AuditDesign = field(default_factory=AuditDesign)
    extra: dict[str, Any] = field(default_factory=dict)  # free-form JSON, recorded as it is
    privacy: PrivacySpent | None = None
    label_outcomes: np.ndarray | None = None
    conformance: dict[str, Any] | None = None


@dataclass
class Reconstruction:
    """What a reconstruction (inversion or release) attack returns.

    Attributes:
        images: ``(K, H, W)`` float in [0, 1], one reconstruction per class (or per target record).
        labels: ``(K,)`` int, the class (or record label) each image reconstructs.
        metrics: JSON-able scores (attack accuracy, SSIM / MSE to class means, ...).
    """

    images: np.ndarray
    labels: np.ndarray
    metrics: dict[str, Any] = field(default_factory=dict)  # free-form JSON, recorded as it is
