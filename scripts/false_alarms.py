"""False alarms of correct mechanisms whose scores break the Gaussian assumptions.

Issue 53; docs/audits.md, "Valid bounds and estimates".

Each case is a mechanism that is exactly DP at its certified ε (δ = 1e-5, add/remove), simulated in NumPy; each draw
goes through the code a ``bench`` run uses: the scores as an attack returns them (``MembershipScores``, the design the
audit uses) through ``bench.runner.cells.membership_record`` (``attacks.analysis.membership_audit`` with the
certified profile), one ``RunResult`` holding that record, and ``attacks.analysis.privacy_bugs.check.privacy_bugs``.
Counted per
case: the draws with a privacy bug (exit 3), the draws whose valid ε_LB exceeds the certified ε (must be none), and
for each estimate the draws where it reads above the certified ε (why estimates never decide).

- ``clipped``: the crafted design (multi-run, black-box-crafted, Gaussian by construction, ``certified_mu``). R runs
  of T adaptive Gaussian steps θ_t = θ_{t−1} + b·c_t + N(0, σ²), the canary's contribution c_t = clip((κ − θ_{t−1})/w,
  0, 1) a function of the past output (a clipped gradient that stops pushing once θ reaches κ): each step has
  sensitivity 1, so the release is exactly μ-GDP, μ = √T/σ (Dong, Roth, Su 2022, adaptive composition). Score θ_T in
  noise units. The included scores have a smaller spread than the excluded ones.
- ``heavy-tails``: the same design; the score sinh(a·(b·μ + Z)), a monotone post-processing of the Gaussian
  mechanism at μ (μ-GDP), heavy-tailed on both sides.
- ``randomized-response``: a multi-run black-box design, scores b XOR flip, the flip with probability 1/(1 + e^ε):
  ε-DP exactly, its profile δ(ε') = p − e^ε'·(1 − p), p = e^ε/(1 + e^ε).
- ``white-box``: the one-run white-box design of DP-SGD's Dirac canaries (``llr_model``, a planned guessing rule):
  m canaries with fair coins in one run of T Poisson-sampled steps at rate q and noise σ, each sampled included canary
  adding c_t = clip((κ − S_{t−1})/w, 0, 1) ≤ 1 (its own score so far, a function of the past output), scored by the
  summed log-likelihood ratios at the certified σ and q; certified ε by dp_accounting's PLD (pessimistic: an upper
  bound on the exact ε). Its record carries the exact conformance test of the included scores
  (``attacks.conformance.hypothesis_tests.canary_scores``), as DP-SGD's white-box audit does.

Usage (from the repository root; about 1 CPU-minute per 200 draws of each case)::

    python -m scripts.false_alarms [--draws 200] [--cases clipped,heavy-tails,randomized-response,white-box]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq

from attacks.analysis.audits.guess_plan import planned_guess_fraction
from attacks.analysis.privacy_bugs.check import privacy_bugs
from attacks.analysis.statistics.fdp import gdp_delta, gdp_epsilon
from attacks.analysis.statistics.gaussian_llr_ideal import exact_llr_moments
from attacks.base.outputs import MembershipScores
from attacks.conformance.hypothesis_tests.canary_scores import canary_score_test
from bench.core.design import AuditDesign
from bench.core.privacy import PrivacySpent
from bench.results import RunResult, Timings
from bench.runner.cells import membership_record, privacy_record
from mechanisms.accounting.gaussian import PROFILE_DELTAS, dpsgd_profile, pld_epsilon

DELTA = 1e-5
Simulate = Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray, dict[str, Any] | None]]


@dataclass
class Case:
    """One correct mechanism: its design, its certified privacy and a draw of its scores."""

    name: str
    what: str
    design: AuditDesign
    privacy: PrivacySpent
    simulate: Simulate = field(repr=False)


def certified_mu(epsilon: float) -> float:
    """μ with ε(μ-GDP, δ = 1e-5) = ``epsilon``."""
    return float(brentq(lambda m: gdp_epsilon(m, DELTA) - epsilon, 1e-3, 20.0))


def _gdp_privacy(mu: float) -> PrivacySpent:
    grid = np.linspace(0.0, 2.0 * gdp_epsilon(mu, DELTA), 25)
    profile = tuple(sorted({(float(e), float(gdp_delta(mu, e))) for e in grid} | {(gdp_epsilon(mu, DELTA), DELTA)},
                           key=lambda p: p[1]))
    return PrivacySpent(epsilon=gdp_epsilon(mu, DELTA), delta=DELTA, accountant="closed-form (μ-GDP)",
                        guarantee="central-dp", relation="add-remove", profile=profile)


def _coins(rng: np.random.Generator, n: int) -> np.ndarray:
    return (rng.random(n) < 0.5).astype(np.int64)


def clipped(epsilon: float, runs: int, steps: int = 50, kappa: float = 0.8, width: float = 1.0) -> Case:
    """``clipped`` (module docstring): κ in units of θ_T's noise sd, w in contribution units."""
    mu = certified_mu(epsilon)
    sigma = math.sqrt(steps) / mu
    total = sigma * math.sqrt(steps)

    def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, None]:
        b = _coins(rng, runs)
        theta = np.zeros(runs)
        for _ in range(steps):
            theta += b * np.clip((kappa * total - theta) / width, 0.0, 1.0) + sigma * rng.standard_normal(runs)
        return theta / total, b, None

    design = AuditDesign("multi-run", "black-box-crafted", size=runs, relation="add-remove", gaussian=True,
                         certified_mu=mu)
    return Case("clipped", f"adaptive clipped steps, T = {steps}, μ = {mu:.3f}, R = {runs:,}", design,
                _gdp_privacy(mu), simulate)


def heavy_tails(epsilon: float, runs: int, a: float = 1.5) -> Case:
    """``heavy-tails`` (module docstring)."""
    mu = certified_mu(epsilon)

    def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, None]:
        b = _coins(rng, runs)
        return np.sinh(a * (b * mu + rng.standard_normal(runs))), b, None

    design = AuditDesign("multi-run", "black-box-crafted", size=runs, relation="add-remove", gaussian=True,
                         certified_mu=mu)
    return Case("heavy-tails", f"sinh({a:g}·N(b·μ, 1)), μ = {mu:.3f}, R = {runs:,}", design, _gdp_privacy(mu),
                simulate)


def randomized_response(epsilon: float, runs: int) -> Case:
    """``randomized-response`` (module docstring)."""
    p = math.exp(epsilon) / (1.0 + math.exp(epsilon))

    def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, None]:
        b = _coins(rng, runs)
        return np.where(rng.random(runs) < p, b, 1 - b).astype(np.float64), b, None

    profile = tuple((math.log((p - d) / (1 - p)), d) for d in sorted({*PROFILE_DELTAS, DELTA}) if d < 2 * p - 1)
    privacy = PrivacySpent(epsilon=epsilon, delta=DELTA, accountant="closed-form (randomized response)",
                           guarantee="central-dp", relation="add-remove", profile=profile)
    design = AuditDesign("multi-run", "black-box", size=runs, relation="add-remove")
    return Case("randomized-response", f"ε = {epsilon:g}, scores in {{0, 1}}, R = {runs:,}", design, privacy,
                simulate)


def white_box(canaries: int, sigma: float = 4.35976, sample_rate: float = 1 / 3, steps: int = 120,
              kappa: float = 1.0, width: float = 0.2) -> Case:
    """``white-box`` (module docstring).

    The default profile's DP-SGD (q = 1/3, T = 120, σ at replace-one ε = 8); κ in units of the excluded score's sd above
    its mean, w in score units.
    """
    q, s2 = sample_rate, sigma**2
    moments = exact_llr_moments(sigma=sigma, sample_rate=q, steps=steps)
    target = moments["mean_out"] + kappa * math.sqrt(moments["var_out"])

    def ell(x: np.ndarray) -> np.ndarray:
        return np.logaddexp(math.log1p(-q), math.log(q) + (2 * x - 1) / (2 * s2))

    def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        b = _coins(rng, canaries)
        score = np.zeros(canaries)
        for _ in range(steps):
            c = np.clip((target - score) / width, 0.0, 1.0) * (b * (rng.random(canaries) < q))
            score += ell(c + sigma * rng.standard_normal(canaries))
        test = canary_score_test(score[b == 1], sigma=sigma, sample_rate=q, steps=steps)
        return score, b, {"tests": [test], "measured_epsilon": None}

    epsilon = pld_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA, relation="add-remove")
    privacy = PrivacySpent(epsilon=epsilon, delta=DELTA, accountant="dp_accounting-pld", guarantee="central-dp",
                           relation="add-remove", profile=dpsgd_profile(noise_multiplier=sigma, sample_rate=q,
                                                                        steps=steps, delta=DELTA))
    fraction = planned_guess_fraction(sigma=sigma, sample_rate=q, steps=steps, m=canaries, delta=DELTA)
    design = AuditDesign("one-run", "white-box", size=canaries, relation="add-remove", guess_fraction=fraction,
                         llr_model=(sigma, q, steps))
    return Case("white-box", f"Dirac canaries, c_t ≤ 1 from the past, q = {q:.3g}, T = {steps}, σ = {sigma:g}, "
                f"m = {canaries:,}", design, privacy, simulate)


def draw(case: Case, rng: np.random.Generator) -> dict[str, Any]:
    """One draw of ``case`` through the runner's record and the run-level check.

    Args:
        case: the mechanism and its design.
        rng: the random generator.

    Returns:
        ``{"bug": bool, "epsilon_lb": float, "estimates": {method: ε estimate}}``.
    """
    scores, coins, conformance = case.simulate(rng)
    res = MembershipScores(scores=scores, labels=coins, design=case.design, conformance=conformance)
    record = membership_record("canary", res, privacy=case.privacy, delta=DELTA)
    result = RunResult(dataset="simulated", mechanism=case.name, seed=0, target_epsilon=case.privacy.epsilon,
                       model="none", spec={}, status="ok", privacy=privacy_record(case.privacy, False),
                       attacks={"canary": record}, timings=Timings(train_s=0.0))
    bugs, _, _ = privacy_bugs([result])
    return {"bug": bool(bugs), "methods": sorted({b.method for b in bugs}), "epsilon_lb": record.audit.epsilon_lb,
            "estimates": {b.method: b.epsilon_lb for b in record.audit.bounds if b.evidence == "estimate"}}


def measure(case: Case, draws: int, seed: int = 0) -> dict[str, Any]:
    """``draws`` draws of ``case``: exit-3 and valid-above-ε counts, each estimate's above-ε count and median ratio.

    Args:
        case: the mechanism and its design.
        draws: the number of draws.
        seed: the simulation's seed.

    Returns:
        ``{"case", "what", "epsilon", "draws", "bugs", "bug_methods", "valid_above", "valid_median",
        "estimates": {method: (above, median ε / ε)}}``.
    """
    rng = np.random.default_rng(seed)
    eps = float(case.privacy.epsilon or 0.0)
    out = [draw(case, rng) for _ in range(draws)]
    methods = sorted({m for o in out for m in o["estimates"]})
    return {"case": case.name, "what": case.what, "epsilon": eps, "draws": draws,
            "bugs": sum(o["bug"] for o in out), "bug_methods": sorted({m for o in out for m in o["methods"]}),
            "valid_above": sum(o["epsilon_lb"] > eps * (1 + 1e-9) for o in out),
            "valid_median": float(np.median([o["epsilon_lb"] for o in out])) / eps,
            "estimates": {m: (sum(o["estimates"].get(m, 0.0) > eps for o in out),
                              float(np.median([o["estimates"].get(m, 0.0) for o in out])) / eps) for m in methods}}


CASES: dict[str, Callable[[argparse.Namespace], Case]] = {
    "clipped": lambda a: clipped(a.epsilon, a.runs),
    "heavy-tails": lambda a: heavy_tails(a.epsilon, a.runs),
    "randomized-response": lambda a: randomized_response(1.0, a.runs),
    "white-box": lambda a: white_box(a.canaries),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--epsilon", type=float, default=10.0, help="certified ε of the μ-GDP cases (δ = 1e-5)")
    parser.add_argument("--runs", type=int, default=2000, help="R of the multi-run cases")
    parser.add_argument("--canaries", type=int, default=4000, help="m of the white-box case")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = [c for c in args.cases.split(",") if c]
    bad = [c for c in names if c not in CASES]
    if bad:
        parser.exit(2, f"false_alarms: unknown case {bad[0]!r} in --cases; allowed: {', '.join(CASES)}\n")
    if args.draws < 1:
        parser.exit(2, f"false_alarms: --draws {args.draws}; allowed: an integer >= 1\n")
    print("| case | mechanism | certified ε (δ = 1e-5) | draws | exit 3 | valid ε_LB > ε | valid ε_LB / ε, median "
          "| estimates > ε: draws (median estimate / ε) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        r = measure(CASES[name](args), args.draws, args.seed)
        est = "; ".join(f"{m} {n} ({ratio:.2f})" for m, (n, ratio) in r["estimates"].items())
        bugs = f"{r['bugs']}" + (f" ({', '.join(r['bug_methods'])})" if r["bugs"] else "")
        print(f"| {r['case']} | {r['what']} | {r['epsilon']:.3g} | {r['draws']} | {bugs} | {r['valid_above']} | "
              f"{r['valid_median']:.2f} | {est} |", flush=True)


if __name__ == "__main__":
    main()
