"""The reference systems: six published ways of training on private data.

Each with its own settings and published figures, rerun by ``python -m bench reproduce PRESET`` (``--all``). Accuracies
are in percent.
"""

from __future__ import annotations

import math
from typing import Any

from bench.reproduce.presets import CHANCE, Curve, Preset, Row, spec_dict

# The sources (and the records they are compared with) quote add/remove ε: their presets keep that relation.
FAST = {"accountant": "prv", "grad_sample_mode": "bk", "relation": "add-remove"}


DPSGD_CNN = Preset(
    "dpsgd-cnn", "DP-SGD with Opacus on a small CNN", "mnist", rows=(
        Row("non-private", "non-private, SGD lr 0.05, batch 64, 10 epochs", "baseline",
            spec_dict("cnn-small", 10, 64, 0.05), published=98.8),
        Row("dpsgd", "DP-SGD, σ = 1.1, C = 1.0, SGD lr 0.05, batch 64, 10 epochs", "dpsgd",
            spec_dict("cnn-small", 10, 64, 0.05, noise_multiplier=1.1, max_grad_norm=1.0, **FAST), published=93.4,
            claimed_privacy="σ = 1.1 (δ = 1e-5) with shuffled fixed-size batches; Opacus' accountant assumes "
                            "Poisson sampling, so its ε does not certify that run",
            note="σ = 1.1, the middle of the source's 1.0–1.2; we sample batches by Poisson sampling (q = 1/938, "
                 "expected batch 63.97), which the corrected ε certifies"),
    ), note="all 60,000 training images; the 10,000 test images are also the LOSS attack's non-members")


_RN_EPS = (1.0, 5.0, 10.0)


DPSGD_RESNET18 = Preset(
    "dpsgd-resnet18", "DP-SGD with Opacus, make_private_with_epsilon, ResNet-18", "mnist", rows=tuple(
        Row(f"eps{e:g}", f"ResNet-18 (GroupNorm), ε = {e:g}, 5 epochs, batch 256, SGD lr 1.0", "dpsgd",
            spec_dict("resnet18-gn", 5, 256, 1.0, max_grad_norm=1.0, model_kwargs={"stem": "imagenet"}, **FAST),
            target_epsilon=e, claimed_privacy=f"ε = {e:g} (δ = 1e-5, Opacus make_private_with_epsilon)",
            note="batch size, optimiser and C are not given by the source: ours")
        for e in _RN_EPS),
    curves=(Curve("accuracy_vs_epsilon", "ε", tuple(f"eps{e:g}" for e in _RN_EPS), _RN_EPS, claim="increasing",
                  claim_text="accuracy rises with ε", log_x=True),),
    n_train=10_000, n_test=2_000, seeds=(0,),
    note="10,000 training / 2,000 test images; 10,000 other training images are the LOSS attack's non-members")


_DPMIX_SPEC = spec_dict("cnn-dpmix", 50, 128, 1e-4, "adam", mixture_degree=256, num_samples=10_000,
                    lr_halving_epochs=10, validation_split=0.1, accountant="closed_form")


DPMIX = Preset(
    "dpmix", "DPMix, random mixing (Lee, Kim, Lee, Suh, ISIT 2019)", "mnist", rows=(
        Row("source-sigma", "ℓ = 256, T = 10,000, σ calibrated by the source's formula (1/n for ℓ/n) to ε = 15",
            "dpmix", _DPMIX_SPEC, target_epsilon=15.0, published=68.35,
            claimed_privacy="ε = 15 (δ = 1/n, closed form evaluated with 1/n where Lee et al. have ℓ/n)",
            note="σ from the source's formula; corrected ε: the same σ under the closed form with ℓ/n",
            source_sigma=True),
        Row("correct-sigma", "ℓ = 256, T = 10,000, σ calibrated correctly (ℓ/n) to ε = 15", "dpmix", _DPMIX_SPEC,
            target_epsilon=15.0, published=68.35, claimed_privacy="ε = 15 (δ = 1/n, closed form with 1/n)",
            note="what a valid ε = 15 buys with the source's pipeline"),
    ), delta=None, note="all 60,000 training images (n = 60,000, δ = 1/n); Adam 1e-4 halved every 10 epochs, "
                        "50 epochs, last 10 % of the release held out as validation, pixels clipped to [0, 1], "
                        "soft labels, KL loss")


_PC_ELLS = (32, 64, 128, 256, 512)
_PC_PUBLISHED = {32: 77.5, 64: 77.6, 128: 79.3, 256: 78.7, 512: 78.6}
_PC_SIGMAS = (0.2, 0.5, 0.7, 1.0, 2.0, 3.0)
_PC_TS = (60, 120, 300, 600, 1200)


def _pc(ell: int, sigma: float, t_c: int) -> dict[str, Any]:
    return spec_dict("cnn-dpmix", 10, 128, 1e-3, "adam", mixture_degree=ell, samples_per_class=t_c, sigma=sigma,
                 reuse_subset=True)


_PC_CLAIM = "see corrected ε (Lee et al.'s ℓ/n bound, void: one ℓ-subset per class is reused)"
_pc_rows = {(ell, 0.7, 1200): Row(f"ell{ell}", f"per-class mix, ℓ = {ell}, σ = 0.7, T = 12,000", "dpmix-per-class",
                                  _pc(ell, 0.7, 1200), published=_PC_PUBLISHED[ell], claimed_privacy=_PC_CLAIM)
            for ell in _PC_ELLS}
for _s in _PC_SIGMAS:
    _pc_rows.setdefault((128, _s, 1200), Row(f"sigma{_s:g}", f"ℓ = 128, σ = {_s:g}, T = 12,000", "dpmix-per-class",
                                             _pc(128, _s, 1200)))
for _t in _PC_TS:
    _pc_rows.setdefault((128, 0.7, _t), Row(f"t{_t}", f"ℓ = 128, σ = 0.7, T = {10 * _t:,}", "dpmix-per-class",
                                            _pc(128, 0.7, _t)))


def _pc_key(ell: int, sigma: float, t_c: int) -> str:
    return _pc_rows[(ell, sigma, t_c)].key


DPMIX_PER_CLASS = Preset(
    "dpmix-per-class", "DPMix variant: per-class mixing, hard labels", "mnist", rows=tuple(_pc_rows.values()),
    curves=(
        Curve("accuracy_vs_ell", "mixture degree ℓ", tuple(_pc_key(e, 0.7, 1200) for e in _PC_ELLS), _PC_ELLS,
              claim="peak", claim_text="a sweet spot in ℓ", log_x=True),
        Curve("accuracy_vs_sigma", "noise σ", tuple(_pc_key(128, s, 1200) for s in _PC_SIGMAS), _PC_SIGMAS),
        Curve("accuracy_vs_T", "released samples T", tuple(_pc_key(128, 0.7, t) for t in _PC_TS),
              tuple(10.0 * t for t in _PC_TS), claim="increasing", claim_text="accuracy grows with T", log_x=True),
    ),
    seeds=tuple(range(10)),
    note="all 60,000 training images (n_c ≈ 6,000 per class); one release per seed (the source: 10 per setting); "
         "learner: the DPMix CNN, Adam 1e-3, 10 epochs, batch 128 (the source's learner settings are not given)")


_LOCAL_EPS = (150.0, 2000.0, 3000.0, 5000.0, 200000.0)


_IIC = {cal: spec_dict("mlp", 10, 250, 1e-2, "adam", calibration="classic" if cal == "source" else "analytic",
                       labels="public", learner="iic", match_size=1000) for cal in ("source", "analytic")}


LOCAL_GAUSSIAN = Preset(
    "local-gaussian", "local DP by input perturbation (Gaussian noise on unit-norm images)", "mnist", rows=tuple(
        Row(f"eps{e:g}", f"source's σ for ε = {e:g} (classic formula, sensitivity 1, δ = 1/784²); our CNN learner",
            "local-gaussian", spec_dict("cnn-small", 5, 64, 0.02, momentum=0.9, calibration="classic", labels="public"),
            target_epsilon=e, published=CHANCE if e <= 2000 else None,
            claimed_privacy=f"ε = {e:g} (δ = 1/784², classic Gaussian σ with sensitivity 1)",
            note=("source: learning fails (read: chance accuracy). At the source's σ the noise per pixel "
                  f"({math.sqrt(2 * math.log(1.25 * 784**2)) / e:.2g}) is at most the size of a unit-norm image's "
                  "mean pixel (≈ 0.036): a CNN on 60,000 such images learns, so the failure was the source's "
                  "learner's, not privacy's") if e <= 2000 else "")
        for e in _LOCAL_EPS) + tuple(
        Row(f"iic-{cal}-eps{e:g}", f"IIC (unsupervised) on the release, {what} for ε = {e:g}, δ = 1/784²; "
            "clusters mapped to classes on 1,000 released labels", "local-gaussian", _IIC[cal],
            target_epsilon=e, published=CHANCE if e <= 2000 else None,
            claimed_privacy=f"ε = {e:g} (δ = 1/784², classic Gaussian σ with sensitivity 1)" if cal == "source"
            else None,
            note=("source: IIC fails at ε ≤ 2,000 (read: chance clustering accuracy); " if e <= 2000 else "")
            + "clustering accuracy = test accuracy after Hungarian matching of clusters to classes on the first "
              "1,000 released records with their (public) labels")
        for cal, what in (("source", "the source's σ (classic formula, sensitivity 1)"),
                          ("analytic", "the analytic Gaussian σ (Balle & Wang 2018, sensitivity 2)"))
        for e in _LOCAL_EPS),
    curves=(Curve("accuracy_vs_claimed_epsilon", "the source's claimed ε", tuple(f"eps{e:g}" for e in _LOCAL_EPS),
                  _LOCAL_EPS, log_x=True),
            Curve("iic_accuracy_vs_epsilon_source_sigma", "the source's claimed ε (IIC, source's σ)",
                  tuple(f"iic-source-eps{e:g}" for e in _LOCAL_EPS), _LOCAL_EPS, log_x=True),
            Curve("iic_accuracy_vs_epsilon_analytic_sigma", "ε (IIC, analytic σ, image only: labels public)",
                  tuple(f"iic-analytic-eps{e:g}" for e in _LOCAL_EPS), _LOCAL_EPS, log_x=True)),
    delta=1 / 784**2,
    note="all 60,000 training images, noised once; learner: cnn-small (SGD lr 0.02, momentum 0.9, batch 64, "
         "5 epochs) in place of the source's; IIC rows (Ji, Henriques & Vedaldi 2019; the source's learner): "
         "an MLP 784→128→10 as the clustering head (one head, K = 10), Adam 1e-2, batch 250, 10 epochs, pairs by "
         "random affine maps, no labels in training (cnn-small collapsed or stayed near chance on clean MNIST in "
         "development; the MLP reached 36 % on 10,000 clean images)")


WEIGHT_NOISE = Preset(
    "weight-noise", "output perturbation of an autoencoder (noise on its weights)", "mnist", rows=(
        Row("clean", "autoencoder 784→64→784 + dense classifier, no weight noise", "weight-noise",
            spec_dict("mlp", 10, 64, 0.05, momentum=0.9, ae_epochs=10, ae_lr=1e-3, code=64, weight_noise_std=0.0),
            published=93.6),
        Row("noisy", "the same with N(0, 0.1²) on every autoencoder weight and bias", "weight-noise",
            spec_dict("mlp", 10, 64, 0.05, momentum=0.9, ae_epochs=10, ae_lr=1e-3, code=64), target_epsilon=10.0,
            published=76.27, claimed_privacy="ε = 10 (\"std = sensitivity/ε\", no accountant)",
            note="classifier trained on the noisy autoencoder's reconstructions, as the source describes: it adapts "
                 "to the noise, so the noise costs little accuracy"),
        Row("noisy-after", "the clean-trained classifier, then N(0, 0.1²) on the autoencoder's weights", "weight-noise",
            spec_dict("mlp", 10, 64, 0.05, momentum=0.9, ae_epochs=10, ae_lr=1e-3, code=64,
                      classifier_before_noise=True),
            target_epsilon=10.0, published=76.27, claimed_privacy="ε = 10 (\"std = sensitivity/ε\", no accountant)",
            note="our reading of 'clean vs after noise': one classifier, measured before and after the noise"),
    ), note="all 60,000 training images; the source's epochs and classifier width are not given: autoencoder 10 "
            "epochs Adam 1e-3, classifier 784→128→10, SGD lr 0.05 momentum 0.9, 10 epochs")
