"""Presets: the six reference systems (docs/guides/presets.md) with their own settings and published figures.

And our tuned recipes (``dpsgd-best``, ``dpmix-best``). Defined here, in one place, and checked by ``validate_presets``
with the same rules as ``bench.config.run`` (``python -m bench reproduce PRESET`` runs them; ``bench.reproduce``).

A preset is a list of ``Row`` s: one training setting each (mechanism, full TrainSpec, target ε). A row with a
``published`` figure becomes one "published vs reproduced vs corrected" line of results.json's ``reproduction``;
rows without one are points of a ``Curve`` (accuracy against σ, T, ε, ...). Accuracies are in percent.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from bench.core.errors import ConfigError
from bench.core.registry import Registry

CHANCE = 10.0  # % test accuracy of a 10-class guess: the source's "learning fails"
VALIDATION_SIZE = 5_000  # images of the training set held out to choose recipes (``Preset.validation``)
VALIDATION_SEED = 1234


@dataclass(frozen=True)
class Row:
    """One training setting of a preset.

    Attributes:
        key: unique within the preset.
        setting: what it is, as the table shows it.
        mechanism: registered name.
        training: the full TrainSpec of the mechanism (``model``, ``epochs``, ``batch_size``, ``lr``,
            ``optimizer``, ``momentum``, ``params``).
        target_epsilon: ε the mechanism calibrates to (None: none).
        published: the source's figure (% test accuracy), or None (the row is only a curve point).
        claimed_privacy: the source's privacy claim as text, or None.
        note: why the setting is what it is (e.g. what the source left unspecified).
        source_sigma: DPMix only: σ from the source's formula for ``target_epsilon`` (1/n where Lee et al.
            have ℓ/n), passed as the fixed ``sigma``; the reported ε is then what that σ really buys.
        target: our recipes only: the accuracy (%) we set out to reach; ``published`` is then the record to
            beat, and the row's status says whether the target was met instead of whether it reproduced.
    """

    key: str
    setting: str
    mechanism: str
    training: dict[str, Any]
    target_epsilon: float | None = None
    published: float | None = None
    claimed_privacy: str | None = None
    note: str = ""
    source_sigma: bool = False
    target: float | None = None


@dataclass(frozen=True)
class Curve:
    """Accuracy against one varied setting.

    The rows ``keys`` at ``x``; ``claim`` (``"increasing"`` or ``"peak"``, see ``bench.reproduce.rows.curve_entry``) is
    checked and becomes a reproduction row when the source claimed the trend; None when the curve is only plotted.
    """

    name: str
    x_label: str
    keys: tuple[str, ...]
    x: tuple[float, ...]
    claim: str | None = None
    claim_text: str = ""
    log_x: bool = False


@dataclass(frozen=True)
class Preset:
    """A reference system (or our recipe) and everything needed to rerun it.

    Attributes:
        name: preset name.
        source: the system it reproduces.
        dataset: registered dataset.
        rows: the training settings, see ``Row``.
        curves: accuracy against one varied setting, see ``Curve``.
        n_train: images trained on (None: the whole official training set).
        n_test: images tested on (None: the whole official test set, which then doubles as the membership
            attacks' non-members).
        delta: δ, or None for 1/n_train (the source's δ = 1/n).
        seeds: default seeds (the source's repeats).
        attacks: membership attacks run on every model.
        validation: choose recipes without the test set: every row trains on the training set minus
            ``VALIDATION_SIZE`` images held out by a fixed permutation (seed ``VALIDATION_SEED``) and is scored on
            those only (they are also the attacks' non-members); the test set is never loaded into a result.
    """

    name: str
    source: str
    dataset: str
    rows: tuple[Row, ...]
    curves: tuple[Curve, ...] = ()
    n_train: int | None = None
    n_test: int | None = None
    delta: float | None = 1e-5
    seeds: tuple[int, ...] = (0, 1, 2)
    attacks: tuple[str, ...] = ("loss",)
    note: str = ""
    validation: bool = False


def spec_dict(model: str, epochs: int, batch_size: int, lr: float, optimizer: str = "sgd", momentum: float = 0.0,
          **params: Any) -> dict[str, Any]:
    """A recipe's settings as the dict a preset row holds (mechanism parameters under ``params``)."""
    return {"model": model, "epochs": epochs, "batch_size": batch_size, "lr": lr, "optimizer": optimizer,
            "momentum": momentum, "params": params}


PRESETS: Registry = Registry("preset")
"""Presets by name; each is a module-level ``Preset`` in ``sources`` (the reference systems) or ``recipes`` (ours),
registered here in one line and imported on first use."""
for _name, _target in (
    ("dpsgd-cnn", "sources:DPSGD_CNN"), ("dpsgd-resnet18", "sources:DPSGD_RESNET18"), ("dpmix", "sources:DPMIX"),
    ("dpmix-per-class", "sources:DPMIX_PER_CLASS"), ("local-gaussian", "sources:LOCAL_GAUSSIAN"),
    ("weight-noise", "sources:WEIGHT_NOISE"), ("dpsgd-best", "recipes:DPSGD_BEST"),
    ("dpsgd-best-fashion", "recipes:DPSGD_BEST_FASHION"), ("dpsgd-best-candidates", "recipes:DPSGD_BEST_CANDIDATES"),
    ("dpsgd-best-fashion-candidates", "recipes:DPSGD_BEST_FASHION_CANDIDATES"), ("dpmix-best", "recipes:DPMIX_BEST"),
):
    PRESETS.add_lazy(_name, f"bench.reproduce.presets.{_target}")
REFERENCE_PRESETS = ("dpsgd-cnn", "dpsgd-resnet18", "dpmix", "dpmix-per-class", "local-gaussian", "weight-noise")
"""The six reference systems (``bench reproduce --all``)."""


def quick(preset: Preset) -> Preset:
    """A seconds-long version for tests and smoke runs.

    1,000 training / 500 test images, 1 epoch, small releases and mixture degrees. Every row then says it was cut.
    """
    rows = []
    for r in preset.rows:
        t = copy.deepcopy(r.training)
        t["epochs"] = 1
        p = t["params"]
        for key, cap in (("ae_epochs", 1), ("num_samples", 400), ("samples_per_class", 40), ("mixture_degree", 16)):
            if key in p:
                p[key] = min(p[key], cap)
        rows.append(replace(r, training=t))
    return replace(preset, rows=tuple(rows), n_train=1_000, n_test=500, note="")


def cap_epochs(preset: Preset, epochs: int) -> Preset:
    """``preset`` with every row trained for at most ``epochs`` epochs (autoencoder epochs too), to fit a budget.

    The reproduction rows then say so.
    """
    rows = []
    for r in preset.rows:
        t = copy.deepcopy(r.training)
        t["epochs"] = min(t["epochs"], epochs)
        if "ae_epochs" in t["params"]:
            t["params"]["ae_epochs"] = min(t["params"]["ae_epochs"], epochs)
        rows.append(replace(r, training=t))
    return replace(preset, rows=tuple(rows))


def validate_presets() -> None:
    """Check every preset (``validate_preset``); ConfigError on the first bad one."""
    for name in PRESETS.names():
        validate_preset(PRESETS.get(name))


def validate_preset(p: Preset) -> None:
    """Check one preset with ``bench.config.run``'s rules.

    Registered mechanism, complete TrainSpec with known params and valid values, attacks known, keys unique, curves
    naming existing rows. Raises ConfigError naming the preset, row and value.
    """
    from attacks import ATTACKS
    from bench.config.validation import training_spec
    from bench.core.catalog import DATASETS
    from mechanisms import MECHANISMS

    where = f"preset {p.name}"
    if p.dataset not in DATASETS:
        raise ConfigError(f"{where}: dataset {p.dataset!r} is not known")
    for a in p.attacks:
        if a not in ATTACKS:
            raise ConfigError(f"{where}: attack {a!r} is not known")
    keys = [r.key for r in p.rows]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{where}: row keys are not unique")
    for r in p.rows:
        if r.mechanism not in MECHANISMS:
            raise ConfigError(f"{where}.{r.key}: mechanism {r.mechanism!r} is not known")
        if set(r.training) != {"model", "epochs", "batch_size", "lr", "optimizer", "momentum", "params"}:
            raise ConfigError(f"{where}.{r.key}: training must give every TrainSpec field")
        training_spec(r.mechanism, r.training, n_members=p.n_train or 60_000, where=f"{where}.{r.key}")
    for c in p.curves:
        if len(c.keys) != len(c.x) or set(c.keys) - set(keys):
            raise ConfigError(f"{where}: curve {c.name} must name existing rows, one x each")
    if not p.seeds:
        raise ConfigError(f"{where}: no seeds")
