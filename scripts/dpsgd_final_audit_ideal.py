"""The final-model DP-SGD canary audit (``canary-final``) against a simulation of the ideal mechanism.

The hidden-state audit and the ideal mechanism go through the same analysis, at the same size. Run from the
repository root::

    python -m scripts.dpsgd_final_audit_ideal [--seeds 5] [--results RUN/results.json ...]

The ideal mechanism: m Dirac gradient canaries, each included by a fair coin, Poisson-sampled at q at each of T steps
(adding one clipped norm when sampled), N(0, σ²) noise per step, and nothing else at their coordinates; the final
model's score Σ_t (a_t/ā)·x_t with the recipe's momentum weights a_t = Σ_{s≥t} μ^{s−t}
(``mechanisms.dpsgd.canaries.CanaryTracker.final_scores``). Its scores go through ``attacks.analysis.membership_audit``
with the hidden-state one-run design the audit declares (one-run, f-DP and μ-GDP analyses, Bonferroni over the
three); ε_LB / ε is against the accountant's add/remove ε (the relation the design tests). ``other records`` adds a
Gaussian part of sd k × the noise's sd to every score (the other records' gradients at the canaries' coordinates, as
``members_sd`` / ``noise_sd`` measures them in a run).

Without ``--results``: the default profile's DP-SGD at target ε = 10 (replace-one, δ = 1e-5; q = 1/3, T = 120,
momentum 0.9, m = 38,707). With ``--results``: each run's own σ, q, T, momentum, m and measured members' share, and
the code's bound beside the ideal's.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np

from attacks.analysis import membership_audit
from bench.core.design import AuditDesign
from mechanisms.accounting.gaussian import pld_epsilon, pld_noise_multiplier

DELTA = 1e-5
DESIGN = AuditDesign(kind="one-run", threat_model="hidden-state", relation="add-remove")


def simulate(*, sigma: float, q: float, steps: int, momentum: float, m: int, other: float,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The ideal mechanism's final-model scores ``(m,)`` and coins ``(m,)``; ``other``.

    The other records' part, as a multiple of the noise's sd.
    """
    a = np.ones(steps) if momentum == 0 else (1 - momentum ** (steps - np.arange(steps))) / (1 - momentum)
    w = a / a.mean()
    noise_sd = sigma * np.sqrt(np.sum(w**2))
    coins = (rng.random(m) < 0.5).astype(np.int64)
    signal = np.empty(m)
    block = max(1, 2_000_000 // steps)
    for s in range(0, m, block):
        signal[s:s + block] = w @ (rng.random((steps, min(block, m - s))) < q)
    scores = signal * coins + rng.normal(0, noise_sd, m) + rng.normal(0, other * noise_sd, m)
    return scores, coins


def ideal_ratio(*, sigma, q, steps, momentum, m, other, eps, seeds) -> list[float]:
    """ε_LB / ε of the ideal mechanism through ``membership_audit``, one per seed."""
    out = []
    for seed in range(seeds):
        scores, coins = simulate(sigma=sigma, q=q, steps=steps, momentum=momentum, m=m, other=other,
                                 rng=np.random.default_rng(700 + seed))
        out.append(membership_audit(scores, coins, delta=DELTA, design=DESIGN)["epsilon_lb"] / eps)
    return out


def _row(label: str, r: list[float]) -> str:
    return f"   {label}: median {np.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--results", nargs="*", default=[])
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    runs = []
    for path in args.results:
        for r in json.loads(Path(path).read_text())["results"]:
            rec = r["attacks"].get("canary-final")
            if rec is None or "audit" not in rec:
                continue
            x, audited = rec["extra"], rec.get("audited_privacy") or r["privacy"]
            eps = audited["epsilon"] if audited["relation"] == "add-remove" else next(
                o["epsilon"] for o in audited["other_relations"] if o["relation"] == "add-remove")
            runs.append((f"{path} ε = {r['target_epsilon']:g} seed {r['seed']}", float(x["claimed_sigma"]),
                         float(x["sample_rate"]), int(x["steps"]), float(x["momentum"]), rec["audit"]["design"]["size"],
                         float(x["members_sd"]) / float(x["noise_sd"]), eps, rec["audit"]))
    if not runs:
        q, steps = 1 / 3, 120
        sigma = pld_noise_multiplier(target_epsilon=10.0, delta=DELTA, sample_rate=q, steps=steps,
                                     relation="replace-one")
        eps = pld_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA, relation="add-remove")
        runs.append(("default profile, ε = 10 (no results given)", sigma, q, steps, 0.9, 38_707, 0.0, eps, None))
    for label, sigma, q, steps, mu, m, share, eps, audit in runs:
        print(f"{label}: σ = {sigma:.4f}, q = {q:.4f}, T = {steps}, momentum {mu:g}, m = {m}, add/remove ε "
              f"{eps:.3f}, other records' sd / noise sd {share:.3f}")
        if audit is not None:
            print(f"   code: ε_LB {audit['epsilon_lb']:.3f} ({audit['method']}) = {audit['epsilon_lb'] / eps:.3f}·ε")
        kw = dict(sigma=sigma, q=q, steps=steps, momentum=mu, m=m, eps=eps, seeds=args.seeds)
        print(_row("ideal, nothing else at the canaries' coordinates", ideal_ratio(other=0.0, **kw)))
        if share > 0:
            print(_row(f"ideal with the measured other records' part ({share:.3f} × noise sd)",
                       ideal_ratio(other=share, **kw)))
        for k in (0.5, 1.0):
            print(_row(f"ideal with other records' part {k:g} × noise sd", ideal_ratio(other=k, **kw)))


if __name__ == "__main__":
    main()
