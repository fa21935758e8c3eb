"""How an audit decided who was a member, defined once.

Attacks construct an ``AuditDesign``, the audit maths (``attacks.analysis``) reads it, and results.json stores it as is
(``bench.results.Audit.design``). Frozen, validated on construction. No torch import (the results contract and the pure
audit maths import this module).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from bench.core.privacy import by_position

__all__ = ["DESIGNS", "THREAT_MODELS", "AuditDesign"]

THREAT_MODELS = ("black-box", "white-box", "hidden-state", "black-box-crafted")
DESIGNS = ("heuristic", "one-run", "multi-run")
_POSITIONAL = ("kind", "threat_model", "size", "relation", "inclusion", "gaussian", "channels", "guess_fraction",
               "llr_model", "one_release", "certified_mu", "label_weight")


class AuditDesign(BaseModel):
    """How the scored records' membership was decided.

    Which fixes what an ε lower bound from the scores may claim (Jagielski et al. 2020; Steinke, Nasr, Jagielski 2023):
    ``kind`` heuristic | one-run | multi-run, ``threat_model`` black-box | white-box | hidden-state, ``size`` (m
    canaries or runs; the scored records of a heuristic), the neighbouring ``relation`` it tests, and each canary's
    ``inclusion`` probability.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="null", use_attribute_docstrings=True)

    kind: str = "heuristic"
    """``heuristic`` (a single model's natural members), ``one-run`` (canaries with independent random inclusion) or
    ``multi-run`` (repeated runs)."""
    threat_model: str = "black-box"
    """``black-box`` (the final model or the release only), ``white-box`` (every intermediate update seen),
    ``hidden-state`` (the final weights θ_T and the public initialisation θ_0 only) or ``black-box-crafted`` (the
    final model's outputs only, trained from an initial model θ_0 and with a canary the auditor chose: Annamalai &
    De Cristofaro 2024)."""
    size: int = 0
    """Number of canaries (one-run) or runs (multi-run); the number of scored records for a heuristic."""
    relation: str | None = None
    """The neighbouring relation the design tests (to be compared only with an ε of the same relation); null when
    unstated."""
    inclusion: float = 0.5
    """Probability that each canary was included in training."""
    gaussian: bool = False
    """True when the scores are Gaussian by construction (Gaussian noise read through a linear score): the design
    then computes the Gaussian estimates (``attacks.analysis.estimates``) beside its valid bounds; they stay
    estimates."""
    guess_fraction: float | None = None
    """A one-run design's single two-sided guessing rule, fixed in advance from the mechanism's public parameters
    (``attacks.analysis.audits.guess_plan``; white-box DP-SGD); null: the fixed family of 12 rules."""
    llr_model: tuple[float, float, int] | None = None
    """White-box DP-SGD canaries: the run's ``[σ̂, q, T]``, the model their ``gaussian-llr`` analysis tests the
    excluded canaries' score shape against; null elsewhere."""
    channels: tuple[str, ...] = ()
    """The channels of a record the design reads separately (``["image", "label"]``: the local canary pairs differ in
    both, and the ``gaussian-composed`` bound composes the two); empty when the scores read the whole record."""
    one_release: bool = False
    """A multi-run design whose m slots went through one call of the mechanism's release (``local-canary``): their
    independence is the mechanism's promise, not the design's, so the one-run analyses, valid under any dependence
    between slots (Steinke, Nasr, Jagielski 2023; Mahloujifar et al. 2024), join its family."""
    certified_mu: float | None = None
    """A multi-run design whose certified mechanism's trade-off curve is exactly Gaussian: its μ (DP-SGD at q = 1 for T
    steps at noise multiplier σ, add/remove: √T/σ). The certified-curve test then tests G_μ itself (exact) instead
    of the accountant's (ε, δ) profile (conservative; ``attacks.analysis.statistics.curve``); null elsewhere."""
    label_weight: float | None = None
    """A two-channel design (``channels`` image and label) whose scores are s = u + w·o: the image score u plus w times
    the label outcome o in {−1, 0, 1}, with w fixed from the mechanism's stated σ and ε_label before any canary is
    released (σ²·ε_label/2: s is then the certified pair's likelihood ratio, Neyman–Pearson's best test statistic), so
    the valid analyses read both channels at once; the Gaussian estimates read u = s − w·o. Null: the scores read one
    channel."""

    def __init__(self, *args: object, **data: object) -> None:
        """Build a design from keywords or positional fields.

        Keywords, or positionally in the order ``(kind, threat_model, size, relation, inclusion, gaussian,
        channels, guess_fraction, llr_model, one_release, certified_mu, label_weight)``.

        Args:
            args: the fields in that order, by position (a prefix of them).
            data: the fields by keyword (see the attributes; ``size`` in canaries or runs, ``inclusion`` a
                probability).

        Raises:
            pydantic.ValidationError (a ValueError): ``kind`` not in ``DESIGNS`` or ``threat_model`` not in
                ``THREAT_MODELS``, or a value of the wrong type.
            TypeError: more positional arguments than fields, or a field given twice.
        """
        super().__init__(**by_position(type(self).__name__, _POSITIONAL, args, data))

    @model_validator(mode="after")
    def _known(self) -> AuditDesign:
        if self.kind not in DESIGNS or self.threat_model not in THREAT_MODELS:
            raise ValueError(f"design kind must be in {DESIGNS} and threat model in {THREAT_MODELS}, got "
                             f"{self.kind!r}, {self.threat_model!r}")
        return self
