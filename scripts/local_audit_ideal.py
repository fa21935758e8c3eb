"""The local-canary audit on the mechanism's own code against a simulation of the ideal mechanism.

Through the same analysis, so that the gap between the two (the code's) and between the ideal and the accountant (the
audit's) is.
known. Run from the repository root::

    python -m scripts.local_audit_ideal [--canaries 20000] [--seeds 5]

For each ε of the default profile (1, 3, 8; δ = 1e-5; MNIST's 784 pixels and 10 classes; the default recipe's
label share 0.5), it prints ε_LB / ε of the audit's valid bound (its family: Clopper-Pearson, one-run, f-DP, on the
joint score s = u + w·o of ``attacks.canaries.local.label_weight``) over ``--seeds`` seeds: "code" runs
``LocalCanaryAudit`` through ``LocalGaussian.release`` exactly as ``bench`` does; "ideal" draws N(±1, σ²) image
scores and k-ary randomized-response labels with numpy at the accountant's σ and ε_label and scores them the same way;
"limit" is the best single threshold fixed in advance, Clopper-Pearson at the audit's confidence, on the ideal's
expected counts (``attacks.analysis.statistics.limits``). Measured: docs/audits.md, "The default main job".
"""

from __future__ import annotations

import argparse
import logging
from types import SimpleNamespace

import numpy as np
import torch

from attacks.analysis import membership_audit
from attacks.canaries.local import LocalCanaryAudit, ReleaseCanaryParams, ideal_limit
from bench.core.data import ArrayDataset
from bench.core.design import AuditDesign
from mechanisms.accounting.gaussian import local_record_sigma, randomized_response_keep
from mechanisms.local.mechanism import LocalGaussian

DELTA, K, SHAPE, SHARE = 1e-5, 10, (1, 28, 28), 0.5
DESIGN = AuditDesign(kind="multi-run", threat_model="black-box", gaussian=True, relation="replace-one",
                     channels=("image", "label"), one_release=True)


def code(epsilon: float, m: int, seed: int) -> dict:
    """ε_LB of the audit on the mechanism's release (``bench``'s code path)."""
    mech = LocalGaussian()
    spec = mech.spec(**{**LocalGaussian.recipes["default"], "params": {"label_share": SHARE, "learner": "class-means"}})
    members = ArrayDataset(torch.rand(4, *SHAPE), torch.arange(4) % K, K, "mnist")

    def release(data, *, seed):
        return mech.release(data, spec, target_epsilon=epsilon, delta=DELTA, seed=seed)
    ctx = SimpleNamespace(split=SimpleNamespace(members=members), seed=seed,
                          train_like_target=SimpleNamespace(release=release))
    res = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=m)).score(ctx)
    return membership_audit(res.scores, res.labels, delta=DELTA, design=res.design, label_outcomes=res.label_outcomes)


def ideal(epsilon: float, m: int, seed: int) -> dict:
    """ε_LB of the same analysis on the ideal mechanism, simulated at the accountant's σ and ε_label."""
    sigma, label_eps = local_record_sigma(target_epsilon=epsilon, delta=DELTA, label_share=SHARE, num_classes=K)
    keep = randomized_response_keep(label_eps, K)
    rng = np.random.default_rng(1000 + seed)
    coins = (rng.random(m) < 0.5).astype(int)
    held = 2 * coins - 1
    scores = held + rng.normal(0, sigma, m)
    outcomes = np.where(rng.random(m) < keep, held, np.where(rng.integers(1, K, m) == 1, -held, 0))
    w = sigma**2 * label_eps / 2
    return membership_audit(scores + w * outcomes, coins, delta=DELTA, label_outcomes=outcomes,
                            design=DESIGN.model_copy(update={"label_weight": w}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # dp_accounting's notice on optimistic Gaussian PLDs
    print(f"m = {args.canaries}, {args.seeds} seeds: ε_LB / ε, median (min–max)")
    for epsilon in (1.0, 3.0, 8.0):
        for name, fn in (("code", code), ("ideal", ideal)):
            blocks = [fn(epsilon, args.canaries, s) for s in range(args.seeds)]
            r = np.array([b["epsilon_lb"] / epsilon for b in blocks])
            methods = sorted({b["method"] for b in blocks})
            print(f"ε = {epsilon:g}  {name:5s}  {np.median(r):.3f} ({r.min():.3f}–{r.max():.3f}), "
                  f"by {', '.join(methods)}")
        sigma, label_eps = local_record_sigma(target_epsilon=epsilon, delta=DELTA, label_share=SHARE, num_classes=K)
        half = np.repeat([0, 1], args.canaries // 2)
        limit = ideal_limit({"sigma": sigma, "label_epsilon": label_eps}, sigma**2 * label_eps / 2, half, K, DELTA)
        print(f"ε = {epsilon:g}  limit  {limit / epsilon:.3f} (the best threshold fixed in advance, "
              f"Clopper-Pearson 95%)")


if __name__ == "__main__":
    main()
