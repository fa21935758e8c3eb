"""A membership attack's record in results.json: its metrics, ROC and audit (design, bounds, one-run counts)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from bench.core.design import AuditDesign
from bench.results.base import Model
from bench.results.conformance import Conformance
from bench.results.privacy import PrivacyRecord


class TprAtFpr(Model):
    """TPR at one FPR level with its 95 % Clopper-Pearson interval.

    All null and ``measurable`` false when the level is below 10 / n_non_members.
    """

    fpr: float
    """The FPR level (fraction)."""
    tpr: float | None
    """TPR at that FPR (fraction); null when not measurable."""
    lower: float | None
    """Lower end of the 95 % Clopper-Pearson interval of ``tpr``; null when not measurable."""
    upper: float | None
    """Upper end of the 95 % Clopper-Pearson interval of ``tpr``; null when not measurable."""
    measurable: bool
    """False when the level is below 10 / n_non_members (reports print "not measurable")."""


class Metrics(Model):
    """Membership metrics from one ROC (``attacks.analysis.statistics.metrics.membership_metrics``).

    AUC, balanced accuracy, membership advantage (max TPR − FPR), and TPR at each FPR level (keys: the levels as
    strings).
    """

    auc: float
    """Area under the ROC curve."""
    balanced_accuracy: float
    """Best balanced accuracy over thresholds."""
    advantage: float
    """Membership advantage: max over thresholds of TPR − FPR."""
    tpr_at_fpr: dict[str, TprAtFpr]
    """TPR at each FPR level, keyed by the level as a string (``"0.001"``)."""


class Roc(Model):
    """At most ~400 ROC points, non-decreasing from (0, 0) to (1, 1), log-spaced in FPR (for log-log plots)."""

    fpr: list[float]
    """False-positive rates, non-decreasing from 0 to 1."""
    tpr: list[float]
    """True-positive rates at each ``fpr``."""


Design = AuditDesign
"""How the scored records' membership was decided: the attack's own ``bench.core.design.AuditDesign``, stored as is."""


class OneRun(Model):
    """The one-run audit's counts (Steinke, Nasr, Jagielski 2023).

    m canaries and, per guessing rule fixed in advance (the top ``k_plus`` guessed included, the bottom ``k_minus``
    excluded), the guesses r and correct guesses v.
    """

    m: int
    """Number of canaries."""
    guesses: list[list[int]]
    """One ``[k_plus, k_minus, r, v]`` per guessing rule: top ``k_plus`` guessed in, bottom ``k_minus`` guessed out,
    ``r`` guesses, ``v`` correct."""


class Bound(Model):
    """One analysis of an attack's scores.

    Its ε lower bound at ``Audit.confidence`` and whether it holds for any mechanism (non-parametric) or only under
    ``assumption``.
    """

    method: str
    """``clopper-pearson`` (Jagielski et al. 2020), ``one-run`` (Steinke et al. 2023), ``f-dp`` (Mahloujifar et al.
    2024, (ε, δ) curves), ``f-dp-gaussian`` (the same against μ-GDP curves), ``gaussian-pair`` (Agrawal et al.
    2026), ``gdp-fit`` (Nasr et al. 2023), ``gaussian-composed`` or ``gaussian-llr`` (μ-GDP of white-box canaries'
    summed log-likelihood ratios, ``attacks.analysis.statistics.gaussian_llr``)."""
    epsilon_lb: float
    """The ε lower bound at ``Audit.delta`` and ``Audit.confidence``."""
    parametric: bool
    """True when the bound needs ``assumption`` beyond the design."""
    assumption: str | None = None
    """What a parametric bound assumes; null for a non-parametric one."""
    valid: bool
    """True when the bound holds at ``Audit.confidence`` for any mechanism: an assumption-free analysis of a one-run
    or multi-run design. Only valid bounds are "ε ≥" and may decide a privacy bug; a parametric bound is never valid
    (enforced on reading: a file from a version that called Gaussian bounds valid reads them as estimates)."""
    evidence: str = ""
    """``valid`` (assumption-free), ``estimate`` (rests on ``assumption``: shown, never "ε ≥", never a privacy bug)
    or ``heuristic`` (a heuristic design's bound); derived from ``parametric`` and ``valid`` when absent."""
    fit: dict[str, Any] | None = None
    """The fitted parameters (Gaussian pair: ``n_in``, ``mean_in``, ``sd_in``, ``n_out``, ``mean_out``, ``sd_out``
    and ``normality_p``, the smaller normality-test p-value of the two groups; ``gaussian-llr``: the same sizes,
    means and sds, ``shape_excluded_p`` and ``shape_included_p``, the shape tests of each group's scores, ``shape_p``,
    the two as one (Bonferroni), and ``shape_test``)."""


    @model_validator(mode="after")
    def _one_rule(self) -> Bound:
        if self.parametric:  # an estimate is never a bound, whatever an older file says
            object.__setattr__(self, "valid", False)
        if not self.evidence:
            object.__setattr__(self, "evidence", "estimate" if self.parametric else "valid" if self.valid
                               else "heuristic")
        return self


class Audit(Model):
    """The empirical privacy of one attack (``attacks.analysis``).

    Every analysis its design allows (``bounds``), the tightest valid one (``epsilon_lb``, ``method``), and, for a
    one-run design, the guessing counts and whether the accountant's whole certified trade-off curve is rejected. A
    heuristic design's bound assumes independent outcomes that DP does not give: it is shown, never a privacy-bug
    verdict.
    """

    delta: float
    """δ of the guarantee tested: the mechanism's, or the run's δ for a mechanism without a guarantee."""
    confidence: float
    """Coverage of ``epsilon_lb`` (0.95): the tightest valid one of the k analyses of the design's family, each made
    at ``method_confidence``."""
    method_confidence: float
    """Each bound's own coverage, 1 − (1 − ``confidence``)/k for the k analyses of the design's family, fixed by
    the design before any score is seen (``attacks.analysis.family``; Bonferroni), each family-wise over its thresholds
    or guessing rules."""
    counts: list[list[int]]
    """``[tp, fn, fp, tn]`` at each threshold of the family (see "Audit counts" below)."""
    epsilon_lb: float
    """The tightest valid ε lower bound at ``confidence`` (a heuristic design: its heuristic bound)."""
    method: str = "clopper-pearson"
    """The method of ``epsilon_lb``."""
    bounds: list[Bound] = Field(default_factory=list)
    """Every analysis of the scores the design allows."""
    design: AuditDesign = Field(default_factory=AuditDesign)
    """What the bounds may claim: the audit's design, threat model, size and relation."""
    one_run: OneRun | None = None
    """The one-run canary audit's guessing counts; null for any other design."""
    profile_rejected: bool | None = None
    """One-run and multi-run designs with an accountant's profile (or a certified μ): whether the audit rejects the
    whole certified trade-off curve at ``confidence``; null otherwise."""


class AttackRecord(Model):
    """One membership attack on one model.

    How many members / non-members (or canaries in / out) it scored, its metrics, ROC and audit, and ``extra`` facts the
    attack recorded (e.g. shadow models trained).
    """

    attack: str
    """The attack's registered name."""
    n_members: int
    """Members (or canaries in) scored."""
    n_non_members: int
    """Non-members (or canaries out) scored."""
    metrics: Metrics
    """Membership metrics of the scores."""
    roc: Roc
    """The ROC curve, downsampled for log-log plots."""
    audit: Audit
    """The empirical ε lower bound of this attack."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Free-form facts the attack recorded (e.g. shadow models trained)."""
    conformance: Conformance | None = None
    """The audit run's conformance tests to its certified mechanism and the ε its measured parameters imply
    (``attacks.conformance.hypothesis_tests``); null where the attack measures none."""
    audited_privacy: PrivacyRecord | None = None
    """The certified privacy of the run the audit observed when it is not the model itself (an audit run on the
    members plus canaries, calibrated to the same target ε): the audit is compared with it. Null: the model's."""

    def held_to(self, model_privacy: PrivacyRecord | None) -> PrivacyRecord | None:
        """The privacy this audit's bounds are held to.

        The one rule the run-level bug check (``attacks/analysis/privacy_bugs/check.py``) and the reports
        (``reports/bounds.py``) share.

        Args:
            model_privacy: the privacy of the model the attack ran on; used when the audit had no run of its own.

        Returns:
            The audited run's privacy (else ``model_privacy``): with a guarantee, stated under the neighbouring
            relation the audit's design tests (``PrivacyRecord.under``: DP-SGD states add/remove beside replace-one),
            None where it states no ε for that relation; without a guarantee, the record when a source claimed an ε (a
            refuted claim, never a bug), else None.
        """
        p = self.audited_privacy or model_privacy
        if p is None:
            return None
        if p.has_guarantee:
            return p.under(self.audit.design.relation)
        return p if p.claimed_epsilon is not None else None
