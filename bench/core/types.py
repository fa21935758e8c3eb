"""Core types shared by mechanisms, attacks and the runner: what was trained, on what settings, and what privacy
it spent. Frozen where they are values; ``TrainedModel`` holds a live module."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SerializeAsAny

from bench.core.params import NoParams, Params

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

GUARANTEES = ("none", "central-dp", "local-dp", "dp-release")
RELATIONS = ("add-remove", "replace-one", "replace-one-same-class")


@dataclass(frozen=True)
class RelationEpsilon:
    """The same guarantee stated under another neighbouring relation (e.g. DP-SGD's add/remove ε, the figure papers
    quote, beside the replace-one ε its budget is matched on).

    Attributes:
        relation: one of ``RELATIONS``. epsilon: ε (unitless) at the guarantee's δ. accountant: what certified it.
        profile: ``((ε, δ), ...)`` under ``relation`` (empty when unknown).
    """

    relation: str
    epsilon: float
    accountant: str
    profile: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "profile", tuple((float(e), float(d)) for e, d in self.profile))
        if self.relation not in RELATIONS:
            raise ValueError(f"relation {self.relation!r} not in {RELATIONS}")


@dataclass(frozen=True)
class PrivacySpent:
    """The privacy a mechanism actually spent, as certified by a named accountant.

    Attributes:
        epsilon: ε (unitless), or ``None`` when there is no formal guarantee.
        delta: δ (a probability), or ``None`` when there is no formal guarantee.
        accountant: the accountant that produced ``epsilon`` (e.g. ``"opacus-prv"``,
            ``"dpmix-closed-form"``, ``"analytic-gaussian"``), ``"none"`` for no guarantee.
        guarantee: one of ``"none"``, ``"central-dp"``, ``"local-dp"``, ``"dp-release"``.
        claimed_epsilon: the ε a source system *claimed* for the same noise, where it differs
            from what holds (e.g. weight noise "std = sensitivity/ε"); shown beside, never instead.
        note: free text shown in reports (e.g. why δ is weak).
        relation: the neighbouring relation the ε holds for (``RELATIONS``): ``"add-remove"`` (one record added
            or removed), ``"replace-one"`` (one record replaced by any other) or ``"replace-one-same-class"``;
            ``None`` without a guarantee.
        off: privacy turned off (a non-private baseline, or a mechanism's recipe at its ε = ∞ point): ε is ∞, and
            ``epsilon`` stays ``None`` with ``guarantee`` ``"none"`` (strict JSON has no infinity); printed
            "ε = ∞ (privacy off)", never "no guarantee".
        profile: the accountant's privacy profile ``((ε, δ), ...)``: (ε, δ)-DP at each point under ``relation``
            (audits test the whole certified curve); empty when unknown or without a guarantee.
        other_relations: the same guarantee under other neighbouring relations (``RelationEpsilon``), same δ.

    Raises:
        ValueError: unknown guarantee or relation, or an ε without δ, accountant and relation.
    """

    epsilon: float | None
    delta: float | None
    accountant: str
    guarantee: str
    claimed_epsilon: float | None = None
    note: str = ""
    relation: str | None = None
    profile: tuple[tuple[float, float], ...] = ()
    other_relations: tuple[RelationEpsilon, ...] = ()
    off: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "profile", tuple((float(e), float(d)) for e, d in self.profile))
        object.__setattr__(self, "other_relations", tuple(
            o if isinstance(o, RelationEpsilon) else RelationEpsilon(**o) for o in self.other_relations))
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"guarantee {self.guarantee!r} not in {GUARANTEES}")
        if self.off and (self.guarantee != "none" or self.claimed_epsilon is not None):
            raise ValueError("privacy turned off (ε = ∞) has guarantee 'none' and no claimed epsilon")
        if self.guarantee == "none":
            if self.epsilon is not None:
                raise ValueError("a mechanism with no guarantee cannot report an epsilon")
        elif self.epsilon is None or self.delta is None or self.accountant in ("", "none"):
            raise ValueError("a formal guarantee needs epsilon, delta and an accountant name")
        elif self.relation not in RELATIONS:
            raise ValueError(f"a formal guarantee needs its neighbouring relation in {RELATIONS}, "
                             f"got {self.relation!r}")

    def under(self, relation: str | None) -> PrivacySpent | None:
        """This guarantee stated under ``relation`` (ε, accountant and profile of that relation; no other relations),
        or None when it has none for that relation (or no guarantee at all)."""
        if self.epsilon is None or relation is None:
            return None
        if relation == self.relation:
            return self
        for o in self.other_relations:
            if o.relation == relation:
                return replace(self, epsilon=o.epsilon, accountant=o.accountant, relation=o.relation,
                               profile=o.profile, other_relations=())
        return None

    @classmethod
    def no_guarantee(cls, *, claimed_epsilon: float | None = None, note: str = "") -> PrivacySpent:
        return cls(None, None, "none", "none", claimed_epsilon=claimed_epsilon, note=note)

    @classmethod
    def privacy_off(cls, *, note: str = "") -> PrivacySpent:
        """A model trained with privacy turned off: ε = ∞ (``off``), no accountant, no neighbouring relation."""
        return cls(None, None, "none", "none", note=note, off=True)

    def describe(self) -> str:
        """Human-readable ε with its δ, accountant and neighbouring relation, "ε = ∞ (privacy off)" or "no
        guarantee"."""
        if self.off:
            return "ε = ∞ (privacy off)"
        if self.epsilon is None:
            return "no guarantee"
        eps = "∞" if math.isinf(self.epsilon) else f"{self.epsilon:.3g}"
        other = "".join(f"; {o.relation}: ε = {o.epsilon:.3g}, {o.accountant}" for o in self.other_relations)
        return f"ε = {eps} (δ = {self.delta:.0e}, {self.accountant}, {self.relation}{other})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TrainSpec(Params):
    """Everything that determines how a model is trained, apart from the data and privacy.

    Attributes:
        model: registered model name (``bench.core.models.MODELS``).
        epochs: passes over the training data (or over the release for data-release mechanisms), >= 1.
        batch_size: (expected) batch size, >= 1; for DP-SGD the Poisson sample rate is q = 1/ceil(n / batch_size).
        lr: learning rate, > 0.
        optimizer: ``"sgd"`` or ``"adam"``.
        momentum: SGD momentum, >= 0.
        params: the mechanism's own settings, an instance of its ``Params`` (e.g. ``max_grad_norm``).
    """

    model: str
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    optimizer: Literal["sgd", "adam"] = "sgd"
    momentum: float = Field(0.0, ge=0)
    params: SerializeAsAny[Params] = NoParams()

    def to_dict(self) -> dict[str, Any]:
        """JSON form, every default of the mechanism's settings filled in (cache keys, results.json)."""
        return self.to_json()


@dataclass
class Release:
    """A synthetic or perturbed data release, kept for attacks and report examples.

    Attributes:
        x: released features, shape ``(T, C, H, W)``, float32.
        y: released labels, ``(T,)`` int64 class indices or ``(T, K)`` float soft labels.
        kind: what was released (e.g. ``"dpmix"``, ``"local-gaussian"``); release attacks match on it.
        params: mechanism parameters needed to attack it (σ, ℓ, norm scaling, ...).
        display: how report examples map ``x`` to pixels: ``"clip"`` to [0, 1], or ``"minmax"`` per image
            (for releases on another scale, e.g. noisy unit-norm images).
    """

    x: torch.Tensor
    y: torch.Tensor
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    display: str = "clip"


@dataclass
class TrainedModel:
    """The outcome of ``Mechanism.fit``.

    Attributes:
        model: classifier taking raw images ``(N, C, H, W)`` in [0, 1] and returning logits ``(N, K)``;
            any preprocessing (e.g. L2 normalisation) is part of the module.
        privacy: what was spent and who certified it.
        params: the mechanism's resolved parameters (σ, noise multiplier, q, ℓ, T, ...), JSON-able.
        release: the released data for data-release mechanisms, else ``None``.
        train_seconds: wall time of training (s).
        samples_per_s: training throughput in samples per second (examples processed / train time).
        history: per-epoch training loss.
        epochs: per-epoch records of the loop that produced ``history`` (``bench.core.training.EpochRecorder``):
            ``{"epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy"}``; empty when not recorded.
        audit: an audit run's observations (e.g. white-box canary scores and inclusion coins), JSON-able; else None.
    """

    model: nn.Module
    privacy: PrivacySpent
    params: dict[str, Any] = field(default_factory=dict)
    release: Release | None = None
    train_seconds: float = 0.0
    samples_per_s: float = 0.0
    history: list[float] = field(default_factory=list)
    audit: dict[str, Any] | None = None
    epochs: list[dict[str, Any]] = field(default_factory=list)
