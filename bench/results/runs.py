"""One model's record in results.json: its privacy, utility, attacks (metrics, ROC, audit) and reconstructions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bench.results.base import Model
from bench.results.privacy import Privacy


class Utility(Model):
    """Test accuracy (fraction), mean test cross-entropy (nats) and accuracy on the members (fraction)."""

    test_accuracy: float
    """Accuracy on the test split (fraction)."""
    test_loss: float | None
    """Mean cross-entropy on the test split (nats); null when it could not be computed."""
    train_accuracy: float
    """Accuracy on the training members (fraction)."""


class TprAtFpr(Model):
    """TPR at one FPR level with its 95 % Clopper-Pearson interval; all null and ``measurable`` false when the
    level is below 10 / n_non_members."""

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
    """Membership metrics from one ROC (``attacks.metrics.membership_metrics``): AUC, balanced accuracy,
    membership advantage (max TPR − FPR), and TPR at each FPR level (keys: the levels as strings)."""

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


class Design(Model):
    """How the scored records' membership was decided (``attacks.base.AuditDesign``): ``kind`` heuristic |
    one-run | multi-run, ``threat_model`` black-box | white-box, ``size`` (m canaries or runs; the scored records
    of a heuristic), the neighbouring ``relation`` it tests, and each canary's ``inclusion`` probability."""

    kind: str = "heuristic"
    """``heuristic`` (a single model's natural members), ``one-run`` (canaries with independent random inclusion) or
    ``multi-run`` (repeated runs)."""
    threat_model: str = "black-box"
    """``black-box`` (the final model or the release only) or ``white-box`` (every intermediate update seen)."""
    size: int = 0
    """Number of canaries (one-run) or runs (multi-run); the number of scored records for a heuristic."""
    relation: str | None = None
    """The neighbouring relation the design tests (to be compared only with an ε of the same relation); null when
    unstated."""
    inclusion: float = 0.5
    """Probability that each canary was included in training."""
    gaussian: bool = False
    """True when the scores are Gaussian by construction (Gaussian noise read through a linear score): Gaussian
    analyses are then valid bounds when a normality test does not reject."""


class OneRun(Model):
    """The one-run audit's counts (Steinke, Nasr, Jagielski 2023): m canaries and, per guessing rule fixed in advance
    (the top ``k_plus`` guessed included, the bottom ``k_minus`` excluded), the guesses r and correct guesses v."""

    m: int
    """Number of canaries."""
    guesses: list[list[int]]
    """One ``[k_plus, k_minus, r, v]`` per guessing rule: top ``k_plus`` guessed in, bottom ``k_minus`` guessed out,
    ``r`` guesses, ``v`` correct."""


class Bound(Model):
    """One analysis of an attack's scores: its ε lower bound at ``Audit.confidence`` and whether it holds for any
    mechanism (non-parametric) or only under ``assumption``."""

    method: str
    """``clopper-pearson`` (Jagielski et al. 2020), ``one-run`` (Steinke et al. 2023), ``f-dp`` (Mahloujifar et al.
    2024, (ε, δ) curves), ``f-dp-gaussian`` (the same against μ-GDP curves), ``gaussian-pair`` (Agrawal et al.
    2026) or ``gdp-fit`` (Nasr et al. 2023)."""
    epsilon_lb: float
    """The ε lower bound at ``Audit.delta`` and ``Audit.confidence``."""
    parametric: bool
    """True when the bound needs ``assumption`` beyond the design."""
    assumption: str | None = None
    """What a parametric bound assumes; null for a non-parametric one."""
    valid: bool
    """True when the bound holds at ``Audit.confidence`` under the design alone: a non-parametric bound of a
    one-run or multi-run design, or a Gaussian one on scores Gaussian by construction whose normality test does not
    reject at 1 %. Only valid bounds may decide a privacy bug."""
    fit: dict[str, Any] | None = None
    """The fitted parameters (Gaussian pair: ``n_in``, ``mean_in``, ``sd_in``, ``n_out``, ``mean_out``, ``sd_out``
    and ``normality_p``, the smaller normality-test p-value of the two groups)."""


class Audit(Model):
    """The empirical privacy of one attack (``attacks.audit``): every analysis its design allows (``bounds``), the
    tightest valid one (``epsilon_lb``, ``method``), and, for a one-run design, the guessing counts and whether
    the accountant's whole certified trade-off curve is rejected. A heuristic design's bound assumes independent
    outcomes that DP does not give: it is shown, never a privacy-bug verdict."""

    delta: float
    """δ of the guarantee tested: the mechanism's, or the run's δ for a mechanism without a guarantee."""
    confidence: float
    """Coverage of ``epsilon_lb`` (0.95): the tightest of the k valid analyses, each made at
    ``method_confidence``."""
    method_confidence: float
    """Each bound's own coverage, 1 − (1 − ``confidence``)/k for the design's k valid analyses (Bonferroni), each
    family-wise over its thresholds or guessing rules."""
    counts: list[list[int]]
    """``[tp, fn, fp, tn]`` at each threshold of the family (see "Audit counts" below)."""
    epsilon_lb: float
    """The tightest valid ε lower bound at ``confidence`` (a heuristic design: its heuristic bound)."""
    method: str = "clopper-pearson"
    """The method of ``epsilon_lb``."""
    bounds: list[Bound] = Field(default_factory=list)
    """Every analysis of the scores the design allows."""
    design: Design = Field(default_factory=Design)
    """What the bounds may claim: the audit's design, threat model, size and relation."""
    one_run: OneRun | None = None
    """The one-run canary audit's guessing counts; null for any other design."""
    profile_rejected: bool | None = None
    """One-run designs with an accountant's profile: whether the audit rejects the whole certified trade-off curve
    at ``confidence``; null otherwise."""


class AttackRecord(Model):
    """One membership attack on one model: how many members / non-members (or canaries in / out) it scored,
    its metrics, ROC and audit, and ``extra`` facts the attack recorded (e.g. shadow models trained)."""

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
    audited_privacy: Privacy | None = None
    """The certified privacy of the run the audit observed when it is not the model itself (an audit run on the
    members plus canaries, calibrated to the same target ε): the audit is compared with it. Null: the model's."""


class Images(Model):
    """Reconstructions or release examples as 8-bit grey images: ``images`` (one list of H·W values in 0..255
    each), ``shape`` [H, W], and the class (or record label) of each; ``metrics`` the attack's scores
    (docs/results-schema.md lists them per attack); ``kind`` the release's kind for release examples."""

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
    """One epoch of a model's training (``bench.core.training.EpochRecorder``): losses in nats, accuracies as
    fractions; null where the loop could not measure it (e.g. training accuracy of the fast DP-SGD step, test values
    of a model trained without a probe set)."""

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
    """What a CNN's first two convolutions see (``bench.core.features.conv_feature_maps``): the outputs of its
    first and second ``Conv2d`` (before activation), read by forward hooks on the model's own layers, on one fixed
    test image, and the first convolution's learnt filters; at most ``max_channels`` channels per layer. Values
    are floats (4 significant digits), each array row-major."""

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
    """Seconds spent on the model (training as recorded when it was trained, also when loaded from the cache),
    training throughput (samples/s), and whether the model came from the cache."""

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


class RunResult(Model):
    """One model: a mechanism at a target ε (null: no target) for one seed, its privacy, utility, attacks and
    reconstructions. ``status`` "failed" with a one-line ``error`` when training failed; ``attack_errors`` names
    each attack that failed on an otherwise finished model (a failed part of the cell). ``preset`` / ``row``:
    set by ``bench reproduce``."""

    dataset: str
    """Dataset name (e.g. ``mnist``)."""
    mechanism: str
    """Mechanism name (e.g. ``dpsgd``)."""
    seed: int
    """Seed of the data split, initialisation, sampling and noise."""
    target_epsilon: float | None
    """The target ε the mechanism was calibrated to; null for the baseline and mechanisms without a target."""
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
    privacy: Privacy | None = None
    """What the mechanism spent; null for a failed cell."""
    utility: Utility | None = None
    """Test accuracy and loss; null for a failed cell."""
    attacks: dict[str, AttackRecord] = Field(default_factory=dict)
    """Membership attacks and audits by attack name."""
    attack_errors: dict[str, str] = Field(default_factory=dict)
    """Attack name -> one-line reason, for each attack that failed on this finished model; every report shows them."""
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
    preset: str | None = None
    """The ``bench reproduce`` preset that ran this model; null otherwise."""
    row: str | None = None
    """The preset's row key (several rows may share one mechanism); null outside a reproduction."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"
