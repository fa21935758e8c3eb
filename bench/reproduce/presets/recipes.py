"""Our recipes ("beat the records"), chosen without looking at the test set.

Tramèr & Boneh's tanh CNN with an EMA of the weights and their ScatterNet + linear for DP-SGD, the moment-based
class-mean learner for DPMix, and the candidate presets they were chosen among on a validation split. Accuracies are in
percent.
"""

from __future__ import annotations

import math

from bench.reproduce.presets import Preset, Row, spec_dict
from bench.reproduce.presets.sources import FAST

# Pixel standardisation (x − 0.5)/0.5, i.e. [0, 1] -> [−1, 1]: constants that do not depend on any data. The
# familiar MNIST 0.1307 / 0.3081 (Fashion 0.2860 / 0.3530) are the private training set's own mean / std, which a
# private model may not use without spending privacy on them.
PUBLIC_STANDARDIZE = [0.5, 0.5]
_BEST_CNN = {"activation": "tanh", "standardize": PUBLIC_STANDARDIZE}
_BEST = dict(max_grad_norm=0.1, ema_decay=0.999, model_kwargs=_BEST_CNN, **FAST)


def _scatternet_row(batch_size: int, lr: float, *, published: float, target: float, note: str) -> Row:
    """DP-SGD on ScatterNet + linear (Tramèr & Boneh 2021 §3) at ε = 3, δ = 1e-5: C = 0.1, momentum 0.9, 40 epochs."""
    return Row("scatternet-eps3", f"ScatterNet (J = 2, L = 8) + GroupNorm(27) + linear, batch {batch_size}, C = 0.1, "
                                  f"SGD lr {lr:g} momentum 0.9, 40 epochs, ε = 3", "dpsgd",
               spec_dict("scatternet-linear", 40, batch_size, lr, momentum=0.9, max_grad_norm=0.1, **FAST),
               target_epsilon=3.0, published=published, target=target, note=note,
               claimed_privacy="ε = 3 (δ = 1e-5; Tramèr & Boneh 2021, ScatterNet + linear)")


DPSGD_BEST = Preset(
    "dpsgd-best", "ours: Tramèr & Boneh's tanh CNN + EMA of the weights, and their ScatterNet + linear; Poisson "
                  "sampling", "mnist", rows=(
        Row("eps3", "tanh CNN, batch 1024, C = 0.1, SGD lr 1.0 momentum 0.9, 60 epochs, EMA 0.999, ε = 3", "dpsgd",
            spec_dict("cnn-small", 60, 1024, 1.0, momentum=0.9, **_BEST), target_epsilon=3.0, published=98.1,
            target=98.2, claimed_privacy="ε = 3 (δ = 1e-5; record: Tramèr & Boneh 2021, end-to-end CNN)",
            note="batch 1024 / 60 epochs / lr 1.0 chosen over Tramèr & Boneh's batch 512 / 40 epochs / lr 0.5 on a "
                 "validation split of the training set (5,000 images held out, seed 1234): 97.80 % vs 97.66 %"),
        Row("eps1", "tanh CNN, batch 512, C = 0.1, SGD lr 0.5 momentum 0.9, 40 epochs, EMA 0.999, ε = 1", "dpsgd",
            spec_dict("cnn-small", 40, 512, 0.5, momentum=0.9, **_BEST), target_epsilon=1.0, published=94.63,
            target=97.0,
            claimed_privacy="ε = 1.16 (δ = 1e-5; record: Opacus MNIST example)"),
        _scatternet_row(4096, 8.0, published=98.7, target=98.2,
                        note="Tramèr & Boneh's published ScatterNet + linear batch / lr, GroupNorm instead of their "
                             "privately estimated BatchNorm (no privacy spent on feature statistics); chosen over "
                             "batch 8192 / lr 16 on the validation split: 98.62 % vs 98.46 %. Handcrafted features, "
                             "not end-to-end: the end-to-end record is the eps3 row's"),
    ), seeds=(0,), note="all 60,000 training images; hyper-parameters: Tramèr & Boneh's published ones (public), "
                        "or chosen among them on a validation split (row notes); EMA decay fixed in advance; the "
                        "test set is not used to choose anything")


_BEST_FASHION = _BEST  # the same data-independent constants


DPSGD_BEST_FASHION = Preset(
    "dpsgd-best-fashion", "ours: the dpsgd-best recipes on Fashion-MNIST", "fashion-mnist", rows=(
        Row("eps3", "tanh CNN, batch 1024, C = 0.1, SGD lr 1.0 momentum 0.9, 60 epochs, EMA 0.999, ε = 3", "dpsgd",
            spec_dict("cnn-small", 60, 1024, 1.0, momentum=0.9, **_BEST_FASHION), target_epsilon=3.0, published=86.0,
            target=87.0,
            claimed_privacy="ε = 3 (δ = 1e-5; record: Tramèr & Boneh 2021, end-to-end CNN)",
            note="the MNIST eps3 recipe, chosen again on a Fashion-MNIST validation split (5,000 training images "
                 "held out, seed 1234) over batch 512 / 40 epochs / lr 0.5: 84.96 % vs 84.48 %"),
        _scatternet_row(8192, 16.0, published=89.7, target=87.0,
                        note="Tramèr & Boneh's published Fashion-MNIST ScatterNet + linear setting; chosen over batch "
                             "4096 / lr 8 on the validation split: 89.28 % vs 89.22 %. Handcrafted features, not "
                             "end-to-end"),
    ), seeds=(0,), note="all 60,000 training images; the MNIST recipes")


def _dpmix_best_row(key: str, description: str, accountant: str, note: str) -> Row:
    """dpmix-best's release and learner at ε = 15 under ``accountant``.

    (ℓ = 128, T = 120,000, class means from the moments.)
    """
    return Row(key, description, "dpmix",
               spec_dict("linear", 1, 256, 1.0, mixture_degree=128, num_samples=120_000, accountant=accountant,
                         learner="class-means", sigma_y_scale=math.sqrt(10 / 784)),
               target_epsilon=15.0, published=68.35, target=80.0,
               claimed_privacy="ε = 15 (δ = 1/n; the DPMix record's claim)", note=note)


DPMIX_BEST = Preset(
    "dpmix-best", "ours: DPMix on the privacy-accuracy frontier at ε = 15 (closed form, δ = 1/n)", "mnist", rows=(
        _dpmix_best_row(
            "eps15", "ℓ = 128, T = 120,000, σ_y/σ_x = √(d_y/d_x), σ calibrated (closed form, ℓ/n) to ε = 15; "
                     "learner: nearest class mean estimated from the release's moments", "closed_form",
            "chosen without data: ℓ, T and σ_y/σ_x maximise the signal-to-noise ratio of the release's "
            "feature-label cross-moments, √T / (ℓ·√((1/(4ℓ) + σ_x²)(1/(4ℓ) + σ_y²))) with σ from the accountant, "
            "over ℓ ∈ {32 … 1,024}, T ∈ {10,000 … 120,000}, σ_y/σ_x ∈ {1, 1/3, √(d_y/d_x)}; mixing keeps "
            "linear statistics exactly, so a linear rule learnt from mixtures transfers to single images"),
        _dpmix_best_row(
            "eps15-pld", "the same release and learner, σ calibrated to ε = 15 by DPMix's tight accountant (PLD of "
                         "the dominating pair, label sensitivity √2)", "pld",
            "what exact accounting buys at the same ε: less noise for the same guarantee"),
    ), delta=None, seeds=(0, 1, 2), note="all 60,000 training images")


def _candidate(key: str, model: str, epochs: int, batch: int, lr: float, ema: float | None, standardize: list[float]
               ) -> Row:
    """A DP-SGD recipe at ε = 3 (C = 0.1, SGD momentum 0.9) scored on the validation split."""
    kwargs = {"activation": "tanh", "standardize": standardize} if model == "cnn-small" else {}
    params = dict(max_grad_norm=0.1, model_kwargs=kwargs, **FAST, **({"ema_decay": ema} if ema else {}))
    return Row(key, f"{model}, {epochs} epochs, batch {batch}, SGD lr {lr:g} momentum 0.9, C = 0.1"
                    + (f", EMA {ema:g}" if ema else "") + ", ε = 3", "dpsgd",
               spec_dict(model, epochs, batch, lr, momentum=0.9, **params), target_epsilon=3.0)


def _candidates(standardize: list[float]) -> tuple[Row, ...]:
    """Tramèr & Boneh's end-to-end recipe (A) and a longer, larger-batch one (B).

    Their ScatterNet + linear settings for MNIST (S1) and Fashion-MNIST (S2), without EMA (≈ 300 steps: a 0.999 average
    would still weigh the initial weights).
    """
    return (_candidate("A", "cnn-small", 40, 512, 0.5, 0.999, standardize),
            _candidate("B", "cnn-small", 60, 1024, 1.0, 0.999, standardize),
            _candidate("S1", "scatternet-linear", 40, 4096, 8.0, None, standardize),
            _candidate("S2", "scatternet-linear", 40, 8192, 16.0, None, standardize))


_CHOICE_NOTE = ("the recipes the dpsgd-best presets chose among, scored on 5,000 training images held out (seed "
                "1234); the test set chooses nothing. Tuning on held-out training images still uses private data (a "
                "strict accounting would add the selection's own cost; Papernot & Steinke 2022)")


DPSGD_BEST_CANDIDATES = Preset(
    "dpsgd-best-candidates", "ours: choosing dpsgd-best's recipes on a validation split", "mnist",
    rows=_candidates(PUBLIC_STANDARDIZE), seeds=(0,), validation=True, note=_CHOICE_NOTE)


DPSGD_BEST_FASHION_CANDIDATES = Preset(
    "dpsgd-best-fashion-candidates", "ours: choosing dpsgd-best-fashion's recipes on a validation split",
    "fashion-mnist", rows=_candidates(PUBLIC_STANDARDIZE), seeds=(0,), validation=True, note=_CHOICE_NOTE)
