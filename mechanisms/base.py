"""The mechanism base class: a way of training on private data, declared in one module.

A mechanism is a subclass of ``Mechanism`` with its typed settings (``Params``), its training recipe per profile
(``recipes``) and ``fit``; registering it is one line (``MECHANISMS.add_lazy`` in ``mechanisms/__init__.py``, or
``MECHANISMS.add(Class)`` in a plug-in module loaded with ``--plugins``). The runner, the cache, the
reports and the presets need no edit: they read what the class declares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from bench.core.params import Params

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

    from bench.core.data import ArrayDataset
    from bench.core.training import EpochCallback
    from bench.core.types import TrainedModel, TrainSpec


class ModelParams(Params):
    """Settings of a mechanism that trains ``spec.model``.

    Attributes:
        model_kwargs: keyword arguments of the model factory (checked against its signature, e.g.
            ``{"activation": "tanh"}`` for ``cnn-small``).
    """

    model_kwargs: dict[str, Any] = Field(default_factory=dict)


class Mechanism:
    """A way of training on private data (subclass it; one module per mechanism).

    Class attributes:
        name: the registered name. guarantee: ``"none"``, ``"central-dp"``, ``"local-dp"`` or ``"dp-release"``.
        needs_epsilon: the grid trains it at every target ε (else once, with no target).
        reference_epsilons: ε values of the source system, added to the grid unless ``--no-reference-epsilons``.
        Params: its settings (``spec.params`` is an instance; unknown keys and bad values are config errors).
        recipes: training settings per profile name (``TrainSpec`` fields; ``params`` as a mapping), used where
            the configuration gives none. A profile without a recipe needs ``training.<name>`` in the config.
        audits: the audit runs ``fit`` accepts through its ``audit`` argument (e.g. ``"gradient-canaries"``:
            white-box gradient canaries, ``mechanisms.dpsgd.canaries``; ``"initial-model"``: training from the
            auditor's θ_0, ``InitialModel``); a mechanism with none takes no such argument.
        off_point: what its recipe is with privacy turned off, in words (e.g. "no clipping, no noise"): ``fit`` at
            target ε = ``math.inf`` trains it (its ε = ∞ point, the recipe's own non-private ceiling). Empty: the
            mechanism has no such point. Only mechanisms with ``needs_epsilon`` get an ε = ∞ cell in a run (not the
            baseline: it trains without privacy already, and its ``off_point`` is what its subclasses inherit).
        recipe_candidates: per profile name, the other recipes ``--tune-recipes`` chooses among besides the
            profile's own (``bench.runner.tuning``): candidate name -> the ``TrainSpec`` fields it changes
            (``params`` merged key by key, as ``training:`` in a config file). Empty: the recipe is never re-chosen.
        tune_over_grid: ``--tune-recipes`` scores each candidate by its mean validation accuracy over the run's whole
            ε grid (one model per ε; for a mechanism whose models train in seconds), instead of at the grid's middle ε.

    ``fit`` must be deterministic given ``seed`` on CPU.
    """

    name: ClassVar[str] = ""
    guarantee: ClassVar[str] = "none"
    needs_epsilon: ClassVar[bool] = True
    reference_epsilons: ClassVar[tuple[float, ...]] = ()
    Params: ClassVar[type[Params]] = ModelParams
    recipes: ClassVar[dict[str, dict[str, Any]]] = {}
    audits: ClassVar[frozenset[str]] = frozenset()
    off_point: ClassVar[str] = ""
    recipe_candidates: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {}
    tune_over_grid: ClassVar[bool] = False

    @classmethod
    def spec(cls, *, params: dict[str, Any] | None = None, **fields: Any) -> TrainSpec:
        """A ``TrainSpec`` of ``fields`` (model, epochs, ...) with ``params`` parsed by ``Params`` (None: defaults).

        Raises ``bench.core.errors.ConfigError`` on an unknown key or a bad value.
        """
        from bench.core.params import parse
        from bench.core.types import TrainSpec

        return TrainSpec(**fields, params=parse(cls.Params, params, f"{cls.name or cls.__name__}.params"))

    def check(self, spec: TrainSpec, *, n_members: int) -> None:
        """Checks across settings that their types cannot express (e.g. ℓ <= n); the base class checks nothing.

        Args:
            spec: the training settings.
            n_members: the number of members the run trains on.

        Raises:
            ValueError: in a subclass, one line naming the setting as ``params.<key> = value``.
        """

    def build(self, input_shape: tuple[int, ...], num_classes: int, spec: TrainSpec) -> nn.Module:
        """The untrained ``spec.model`` ``fit`` returns: ``(N, *input_shape)`` to logits ``(N, num_classes)``."""
        from bench.core.models import build_model

        return build_model(spec.model, input_shape, num_classes, **getattr(spec.params, "model_kwargs", {}))

    def epsilon_by_epoch(self, params: dict[str, Any], spec: TrainSpec, *, delta: float) -> list[float] | None:
        """ε per epoch at ``delta`` from ``fit``'s recorded ``params``, or None where privacy is not spent by epoch."""
        return None

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float, seed: int,
            device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        """Train on ``train`` so that the result is (target ε, δ)-DP where the mechanism gives a guarantee.

        Args:
            train: the members, images ``(N, C, H, W)`` in [0, 1] and labels ``(N,)``.
            spec: the training settings (``spec.params`` an instance of ``Params``).
            target_epsilon: ε to calibrate to (unitless, > 0), or None for no target; ``math.inf``: the same recipe with
                privacy turned off (``off_point``; see ``fit_privacy_off``).
            delta: δ (a probability).
            seed: seeds every random draw.
            device: where to train.
            on_epoch: progress callback.

        Returns:
            The ``TrainedModel``: the model, its ``PrivacySpent`` (ε with δ, accountant and relation), its training
            throughput in samples/s and history.

        Raises:
            ValueError: if the target cannot be met (e.g. ε <= 0).
            bench.core.training.TrainingDiverged: a NaN or infinite loss.
        """
        raise NotImplementedError

    def fit_privacy_off(self, train: ArrayDataset, spec: TrainSpec, *, delta: float, seed: int, device: torch.device,
                        on_epoch: EpochCallback | None = None, **extra: Any) -> TrainedModel:
        """``fit`` at target ε = ``math.inf`` (``off_point``), its privacy stated ε = ∞ (``PrivacySpent.privacy_off``).

        Arguments as ``fit``'s (``extra``: its other keywords). Raises ValueError when ``off_point`` is empty.
        """
        from bench.core.types import PrivacySpent

        if not self.off_point:
            raise ValueError(f"{self.name or type(self).__name__} has no ε = ∞ point (privacy cannot be turned off)")
        trained = self.fit(train, spec, target_epsilon=math.inf, delta=delta, seed=seed, device=device,
                           on_epoch=on_epoch, **extra)
        trained.privacy = PrivacySpent.privacy_off(note=f"{self.name} with privacy turned off: {self.off_point}")
        return trained


class Weights:
    """A model's weights, known by the SHA-256 digest of their names, shapes, dtypes and bytes.

    An audit request that carries them (``InitialModel``) enters the model cache's key by that digest (``str``), never
    by their repr.

    Args:
        state: a state dict (name -> tensor; copied to CPU).
    """

    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        import hashlib

        self.state = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in state.items()}
        h = hashlib.sha256()
        for k in sorted(self.state):
            v = self.state[k]
            h.update(f"{k}:{tuple(v.shape)}:{v.dtype};".encode())
            h.update(v.numpy().tobytes())
        self.digest = h.hexdigest()

    def __str__(self) -> str:
        return f"Weights(sha256={self.digest})"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Weights) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __deepcopy__(self, memo: dict) -> Weights:  # immutable by convention: ``dataclasses.asdict`` need not copy it
        return self


@dataclass(frozen=True)
class InitialModel:
    """An audit run's request for a mechanism that declares ``"initial-model"`` in its ``audits``.

    (``Mechanism.fit``'s ``audit``.) Train from the auditor's θ_0 (``weights``: a state dict of the model ``build``
    makes) instead of the mechanism's own initialisation (the black-box audits with an auditor-chosen initial model,
    Annamalai & De Cristofaro 2024; ``attacks.canaries.crafted``). ``public_size``: where the mechanism derives its
    sampling rate, steps and expected batch from a record count (DP-SGD), the count fixed by the auditor before any
    inclusion coin (as ``mechanisms.dpsgd.canary_placement.GradientCanaries.public_size``); None: the training set's
    size.

    The hook for a plug-in: declare ``audits = frozenset({"initial-model"})`` and, in ``fit(..., audit=None)``, after
    building the model, ``model.load_state_dict(audit.weights.state)`` when ``audit`` is an ``InitialModel``
    (``examples/opacus_plugin.py`` does).
    """

    weights: Weights
    public_size: int | None = None

    def __post_init__(self) -> None:
        if self.public_size is not None and self.public_size < 1:
            raise ValueError(f"the public size must be >= 1, got {self.public_size}")
