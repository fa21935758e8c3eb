"""Issue 4 closing numbers on real MNIST (run from the repository root):

    PRIVBENCH_DATA=../shared/data .venv/bin/python experiments/inversion_release.py [miface] [dpmix] [local]

miface: MI-Face attack accuracy on the default-profile baseline and DP-SGD (ε = 1, 8) models, seed 0
        (trained through the harness and its model cache), with the default profile's attack settings
        (zeros start, 10 reconstructions) and 10 restarts per class from zeros + U[0, 0.1] jitter (100).
dpmix:  DPMix release-membership AUC at the reference settings (ℓ = 256, T = 10,000, ε = 15, δ = 1/n,
        closed-form accountant) for n = 10,000 members (the default profile's split) and n = 60,000
        (all of MNIST's training set; non-members and the attacker's population from the test set).
local:  local-noise linkage accuracy (and Wiener reconstruction SSIM) at ε ∈ {8, 150, 2000},
        δ = 1e-5, replace-one sensitivity 2, n = 10,000 members, 10,000 queries among 20,000 candidates.
Results are printed and written to $PRIVBENCH_OUT/results.json (default results/inversion-release/).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

torch.set_num_threads(1)

from attacks import ATTACKS  # noqa: E402
from bench.core.data import ArrayDataset, MembershipSplit, load_dataset, make_split  # noqa: E402
from bench.core.types import PrivacySpent, Release  # noqa: E402
from bench.runner.config import build_config  # noqa: E402
from bench.runner.harness import Harness  # noqa: E402
from mechanisms.accounting import dpmix_epsilon, dpmix_sigma, gaussian_sigma  # noqa: E402
from mechanisms.base import TrainedModel  # noqa: E402
from mechanisms.dpmix import mix_release  # noqa: E402
from mechanisms.local_noise import SENSITIVITY, perturb  # noqa: E402

CPU = torch.device("cpu")
ROOT = Path(os.environ.get("PRIVBENCH_DATA", "../shared/data"))
OUT_DIR = Path(os.environ.get("PRIVBENCH_OUT", "results/inversion-release"))
CACHE = str(OUT_DIR / "cache")
OUT = OUT_DIR / "results.json"
SEED = 0


def _split(cfg) -> MembershipSplit:
    pool, test = load_dataset("mnist", ROOT)
    return make_split(pool, test, n_members=cfg.n_members, n_non_members=cfg.n_non_members,
                      n_population=cfg.n_population, n_test=cfg.n_test, seed=SEED)


def miface(results: dict) -> None:
    cfg = build_config({}, {"profile": "default", "data_root": str(ROOT), "device": "cpu", "cache_dir": CACHE})
    split, harness = _split(cfg), Harness(cfg)
    settings = {
        "default-profile": cfg.attack_params["miface"],
        "jitter0.1-10-restarts": {**cfg.attack_params["miface"], "jitter": 0.1, "restarts": 10},
    }
    for mech, eps in (("baseline", None), ("dpsgd", 1.0), ("dpsgd", 8.0)):
        trained, cached, _ = harness.train(mech, split.members, target_epsilon=eps, seed=SEED)
        for label, params in settings.items():
            t0 = time.perf_counter()
            res = ATTACKS.get("miface")(max_per_side=cfg.max_attack_examples, **params).run(
                trained, split, seed=SEED, device=CPU, train_like_target=None)
            m = res.metrics
            key = f"miface/{mech}{'' if eps is None else f'-eps{eps:g}'}/{label}"
            results[key] = {k: m[k] for k in ("attack_accuracy", "attack_accuracy_lower", "attack_accuracy_upper",
                                              "n_reconstructions", "eval_classifier_test_accuracy",
                                              "ssim_class_mean", "closer_to_member", "member_mse_ratio",
                                              "target_confidence")}
            results[key].update(privacy=trained.privacy.describe(), seconds=time.perf_counter() - t0)
            print(key, json.dumps(results[key]), flush=True)


def _dpmix_target(members: ArrayDataset, *, ell: int, t: int, eps: float) -> TrainedModel:
    n = len(members)
    acc = dict(mixture_degree=ell, num_samples=t, num_records=n, d_x=784, d_y=10, delta=1 / n)
    sigma = dpmix_sigma(target_epsilon=eps, **acc)
    achieved = dpmix_epsilon(sigma=sigma, **acc)
    rx, ry, _ = mix_release(members.x.flatten(1), F.one_hot(members.y, 10).float(), mixture_degree=ell,
                            num_samples=t, sigma=sigma, generator=torch.Generator().manual_seed(SEED))
    release = Release(rx.view(t, 1, 28, 28), ry, "dpmix", {"sigma": sigma, "mixture_degree": ell, "num_samples": t})
    privacy = PrivacySpent(achieved, 1 / n, "dpmix-closed-form", "dp-release")
    return TrainedModel(None, privacy, params={"num_records": n, "sigma": sigma}, release=release)


def dpmix(results: dict) -> None:
    pool, test = load_dataset("mnist", ROOT)
    splits = {10_000: make_split(pool, test, n_members=10_000, n_non_members=10_000, n_population=10_000,
                                 n_test=5_000, seed=SEED)}
    perm = torch.randperm(len(test), generator=torch.Generator().manual_seed(SEED))
    splits[60_000] = MembershipSplit(members=pool, non_members=test.subset(perm[:5000]),
                                     population=test.subset(perm[5000:]), test=test.subset(perm[5000:]), seed=SEED)
    # Control for n = 60,000, where non-members come from MNIST's test set: a release of 55,000 training
    # images, scored on 5,000 *other* training images (labelled 1, never mixed) vs the 5,000 test images.
    # An AUC off 0.5 here would be train/test shift, not membership.
    held = torch.randperm(len(pool), generator=torch.Generator().manual_seed(SEED + 1))
    control = MembershipSplit(members=pool.subset(held[55_000:]), non_members=splits[60_000].non_members,
                              population=splits[60_000].population, test=splits[60_000].test, seed=SEED)
    control_target = _dpmix_target(pool.subset(held[:55_000]), ell=256, t=10_000, eps=15.0)
    for name in ("dpmix-mia-lr", "dpmix-mia-corr"):
        res = ATTACKS.get(name)(max_per_side=5000).run(control_target, control, seed=SEED, device=CPU)
        results[f"{name}/n60000-shift-control"] = {"auc": res.metrics["auc"]}
        print(f"{name}/n60000-shift-control", res.metrics["auc"], flush=True)
    for n, split in splits.items():
        target = _dpmix_target(split.members, ell=256, t=10_000, eps=15.0)
        for name in ("dpmix-mia-lr", "dpmix-mia-corr"):
            t0 = time.perf_counter()
            res = ATTACKS.get(name)(max_per_side=5000).run(target, split, seed=SEED, device=CPU)
            m = res.metrics
            key = f"{name}/n{n}"
            results[key] = {"auc": m["auc"], "advantage": m["advantage"], "tpr_at_1%_fpr": m["tpr_at_fpr"]["0.01"],
                            "tpr_at_0.1%_fpr": m["tpr_at_fpr"]["0.001"], "n_per_side": int(res.labels.sum()),
                            "sigma": target.params["sigma"], "privacy": target.privacy.describe(),
                            "auc_null_sd": math.sqrt((2 * 5000 + 1) / (12 * 5000 * 5000)),
                            "seconds": time.perf_counter() - t0}
            print(key, json.dumps(results[key]), flush=True)
        t0 = time.perf_counter()
        res = ATTACKS.get("dpmix-reconstruct")(max_per_side=5000).run(target, split, seed=SEED, device=CPU)
        results[f"dpmix-reconstruct/n{n}"] = {**res.metrics, "seconds": time.perf_counter() - t0}
        print(f"dpmix-reconstruct/n{n}", json.dumps(results[f"dpmix-reconstruct/n{n}"]), flush=True)


def local(results: dict) -> None:
    pool, test = load_dataset("mnist", ROOT)
    split = make_split(pool, test, n_members=10_000, n_non_members=10_000, n_population=10_000, n_test=5_000,
                       seed=SEED)
    for eps in (8.0, 150.0, 2000.0):
        sigma = gaussian_sigma(epsilon=eps, delta=1e-5, sensitivity=SENSITIVITY)
        noisy = perturb(split.members.x, sigma=sigma, generator=torch.Generator().manual_seed(SEED))
        target = TrainedModel(None, PrivacySpent(eps, 1e-5, "analytic-gaussian", "local-dp"),
                              release=Release(noisy, split.members.y, "local-gaussian",
                                              {"sigma": sigma, "sensitivity": SENSITIVITY}))
        for use_labels in (True, False):
            t0 = time.perf_counter()
            m = ATTACKS.get("local-linkage")(max_per_side=None, use_labels=use_labels).run(
                target, split, seed=SEED, device=CPU).metrics
            key = f"local-linkage/eps{eps:g}/{'labels' if use_labels else 'no-labels'}"
            results[key] = {**m, "seconds": time.perf_counter() - t0}
            print(key, json.dumps(results[key]), flush=True)
        m = ATTACKS.get("local-reconstruct")(max_images=2000).run(target, split, seed=SEED, device=CPU).metrics
        results[f"local-reconstruct/eps{eps:g}"] = m
        print(f"local-reconstruct/eps{eps:g}", json.dumps(m), flush=True)


if __name__ == "__main__":
    parts = sys.argv[1:] or ["miface", "dpmix", "local"]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    for part in parts:
        {"miface": miface, "dpmix": dpmix, "local": local}[part](results)
        OUT.write_text(json.dumps(results, indent=1, default=str))
