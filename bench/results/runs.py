"""One model's record in results.json: its privacy, utility, attacks (metrics, ROC, audit) and reconstructions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bench.results.base import Model
from bench.results.membership import AttackRecord
from bench.results.outcomes import TestOutcomes
from bench.results.privacy import PrivacyRecord


class Utility(Model):
    """A model's utility: test accuracy, mean test cross-entropy and accuracy on the members.

    Test accuracy (fraction), mean test cross-entropy (nats), accuracy on the members (fraction) and, for a model
    trained with privacy off, on the validation split (fraction).
    """

    test_accuracy: float
    """Accuracy on the test split (fraction)."""
    test_loss: float | None
    """Mean cross-entropy on the test split (nats); null when it could not be computed."""
    train_accuracy: float
    """Accuracy on the training members (fraction)."""
    validation_accuracy: float | None = None
    """Accuracy on the validation split (fraction): training images of the data set that no target trains on (the
    first ≤ 5,000 of the attacker's population, else of the non-members), never the test set; measured for models
    trained with privacy off, which the non-private ceiling is chosen among (``Results.ceiling``); null otherwise."""
    test_outcomes: TestOutcomes | None = None
    """Which test records were classified correctly (packed bits), for paired comparisons of runs; null in runs
    written before it was recorded."""


class Images(Model):
    """Reconstructions or release examples as 8-bit grey images.

    ``images`` (one list of H·W values in 0..255 each), ``shape`` [H, W], and the class (or record label) of each;
    ``metrics`` the attack's scores (docs/results-schema.md lists them per attack); ``kind`` the release's kind for
    release examples.
    """

    attack: str | None = None
    """The inversion or release attack that produced the images; null for release examples."""
    kind: str | None = None
    """The release's kind for release examples (e.g. ``dpmix``); null for reconstructions."""
    shape: list[int]
    """``[H, W]`` (or ``[C, H, W]``) of each image."""
    images: list[list[int]]
    """One flat list of 8-bit values (0..255) per image, row-major."""
    labels: list[int]
    """The class (or record label) of each image."""
    metrics: dict[str, Any] = Field(default_factory=dict)
    """The attack's scores, free-form (keys by attack: "``inversion`` metric keys" below)."""


class EpochRecord(Model):
    """One epoch of a model's training (``bench.core.epochs.EpochRecorder``).

    Losses in nats, accuracies as fractions; null where the loop could not measure it (e.g. training accuracy of the
    fast DP-SGD step, test values of a model trained without a probe set).
    """

    epoch: int
    """The epoch (1-based)."""
    train_loss: float | None
    """Mean training loss over the epoch's batches (the same number as ``RunResult.history``)."""
    train_accuracy: float | None
    """Running accuracy over the epoch's batches (weights change during the epoch); soft labels: their argmax."""
    test_loss: float | None = None
    """Cross-entropy of the released model on the probe set (the first ≤ 2,000 test images) after the epoch."""
    test_accuracy: float | None = None
    """Accuracy of the released model on the probe set after the epoch."""
    epsilon: float | None = None
    """DP-SGD: ε spent after this epoch (δ, accountant and relation of ``RunResult.privacy``); null otherwise."""


class FeatureMaps(Model):
    """What a CNN's first two convolutions see (``bench.core.features.conv_feature_maps``).

    The outputs of its first and second ``Conv2d`` (before activation), read by forward hooks on the model's own layers,
    on one fixed test image, and the first convolution's learnt filters; at most ``max_channels`` channels per layer.
    Values are floats (4 significant digits), each array row-major.
    """

    image: list[float]
    """The test image fed to the model, ``[C, H, W]`` flattened, pixels in [0, 1]."""
    image_shape: list[int]
    """``[C, H, W]`` of ``image``."""
    label: int
    """The image's class."""
    layers: list[str]
    """Module names (``named_modules``) of the two convolutions, in forward order."""
    maps: list[list[float]]
    """Per layer, its output ``[channels, h, w]`` flattened."""
    map_shapes: list[list[int]]
    """Per layer, ``[channels, h, w]`` of ``maps``."""
    filters: list[float]
    """The first convolution's weights ``[out, in, kh, kw]`` flattened."""
    filter_shape: list[int]
    """``[out, in, kh, kw]`` of ``filters``."""


class Timings(Model):
    """Seconds spent on the model (training as recorded when it was trained, also when loaded from the cache).

    Training throughput (samples/s), and whether the model came from the cache.
    """

    train_s: float
    """Training wall-clock seconds (as recorded when the model was trained, also when loaded from the cache)."""
    samples_per_s: float | None = None
    """Training throughput (samples/s, wall clock); null when unknown."""
    eval_s: float | None = None
    """Seconds spent evaluating utility; null when unknown."""
    attack_s: float | None = None
    """Seconds spent attacking the model; null when unknown."""
    attacks: dict[str, float] = Field(default_factory=dict)
    """Seconds per attack (an audit's own training runs included; a model found in the cache costs its load)."""
    cached: bool = False
    """True when the model came from the model cache."""


class Degenerate(Model):
    """A model that learned nothing (``bench.runner.degenerate``).

    Its test accuracy is no better than the best constant prediction's, or it predicts one class for every test record.
    Its attack results are kept but are not evidence of privacy: the reports grey its row, print ``text``, and leave it
    off the Pareto frontier and out of the verdict's "no attack beats chance".
    """

    reason: str
    """``constant`` (one class predicted for every test record) or ``at-chance`` (test accuracy's 95 %
    Clopper-Pearson interval reaches the best constant prediction's accuracy, or lies below it)."""
    cause: str | None = None
    """``noise``: a private model whose mechanism's ε = ∞ point (same recipe, privacy off, same seed) is not
    degenerate, so the mechanism's noise is why; ``recipe``: a model trained with privacy off (the baseline, an ε = ∞
    point), or a private one whose ε = ∞ point is degenerate too; null: no ε = ∞ point to tell."""
    text: str
    """The one line the reports and the run print, e.g. "collapsed: predicts class 1 for every test record (test
    accuracy 11.4 %, the best constant prediction 11.4 %)"."""
    test_accuracy: float
    """Test accuracy (fraction)."""
    lower: float
    """95 % Clopper-Pearson lower end of the test accuracy (fraction)."""
    upper: float
    """95 % Clopper-Pearson upper end of the test accuracy (fraction)."""
    chance_accuracy: float
    """Accuracy of the best constant prediction on the test set (the share of its most frequent class; fraction)."""
    chance_class: int
    """That most frequent test class."""
    predicted_classes: int
    """How many distinct classes the model predicts on the test set."""


class RunResult(Model):
    """One model: a mechanism at a target ε (null: no target) for one seed, and what was measured of it.

    Its privacy, utility, attacks and reconstructions. ``status`` "failed" with a one-line ``error`` when training
    failed; ``attack_errors`` names each attack that failed on an otherwise finished model (a failed part of the cell).
    ``preset`` / ``row``: set by ``bench reproduce``.
    """

    dataset: str
    """Dataset name (e.g. ``mnist``)."""
    mechanism: str
    """Mechanism name (e.g. ``dpsgd``)."""
    seed: int
    """Seed of the data split, initialisation, sampling and noise."""
    target_epsilon: float | None
    """The target ε the mechanism was calibrated to; null for the baseline and mechanisms without a target."""
    off_point: bool = False
    """True for the mechanism's ε = ∞ point: its recipe with privacy turned off (``target_epsilon`` is null: strict
    JSON has no infinity; the reports show the target as ∞)."""
    model: str
    """The model architecture (e.g. ``cnn-small``)."""
    spec: dict[str, Any]
    """The training spec as run (model, epochs, batch_size, lr, optimizer, momentum, params), free-form."""
    status: str = "ok"
    """``ok`` or ``failed``."""
    error: str | None = None
    """One-line reason when ``status`` is ``failed``; null otherwise."""
    cache_key: str | None = None
    """The model-cache key (content hash of everything that determines the model); null without a cache."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The mechanism's parameters as run (e.g. noise_multiplier, sample_rate), free-form."""
    privacy: PrivacyRecord | None = None
    """What the mechanism spent; null for a failed cell."""
    utility: Utility | None = None
    """Test accuracy and loss; null for a failed cell."""
    attacks: dict[str, AttackRecord] = Field(default_factory=dict)
    """Membership attacks and audits by attack name."""
    attack_errors: dict[str, str] = Field(default_factory=dict)
    """Attack name -> one-line reason, for each attack that failed on this finished model; every report shows them."""
    attack_tracebacks: dict[str, str] = Field(default_factory=dict)
    """Attack name -> the full Python traceback of its failure (where to look; the reports show the one line)."""
    inversion: dict[str, Images] = Field(default_factory=dict)
    """Inversion and release attacks (what an attacker sees of the data) by attack name."""
    release: Images | None = None
    """Example records of the released data set (DPMix, local noise); null for a mechanism without a release."""
    timings: Timings
    """Seconds and throughput."""
    history: list[float | None] = Field(default_factory=list)
    """Training loss per epoch (null where not finite)."""
    epochs: list[EpochRecord] = Field(default_factory=list)
    """Per-epoch training and test loss and accuracy (and DP-SGD's ε so far) of the loop that gave ``history``; empty
    for a model trained without records (a vectorised ensemble, an older cache entry)."""
    feature_maps: FeatureMaps | None = None
    """A CNN's first two convolutions' feature maps and first-layer filters on one fixed test image; null for a
    model without convolutions."""
    degenerate: Degenerate | None = None
    """Set when the model learned nothing (``Degenerate``); null for a model that learned, or a failed cell."""
    split_hash: str | None = None
    """SHA-256 of the index set of the target's training records (``bench.core.data.ArrayDataset.split_hash``);
    re-checked when its cached model or a resumed run is reused."""
    training_splits: dict[str, list[str]] = Field(default_factory=dict)
    """Attack name -> the ``split_hash`` of every model it trained or reused (shadows, references, canary and audit
    runs), in the order asked, each model once."""
    preset: str | None = None
    """The ``bench reproduce`` preset that ran this model; null otherwise."""
    row: str | None = None
    """The preset's row key (several rows may share one mechanism); null outside a reproduction."""

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return self.status == "ok"
