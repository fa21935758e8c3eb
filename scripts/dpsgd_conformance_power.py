"""Power and level of DP-SGD's conformance tests.

Power and level of DP-SGD's conformance tests (``attacks.conformance.dpsgd``) at the ``ci`` and ``default``
profiles' audit-run sizes, under the ideal mechanism and the issue-38 targets (σ × 0.95 and q × 1.05 overall, one
tensor at σ × 0.8, a fifth of the records at twice the rate of the rest, T + one epoch), each test at the
per-comparison level 0.05/M of a run's Bonferroni family of M comparisons. Exact where the test's law is known
(χ² noise tests, binomial rate test, the step count); simulated for the dispersion test and the whole family's false
alarms. Also the "ε from measured parameters" at the null's median observations against the certified ε. The
declared-ε test (issue 45: the run's declared σ, q, T by the conformance code's own accountant against the certified
ε) is exact and equals the certified ε under the correct accountant (scripts/accountant_check.py): it adds one
comparison to M and nothing to the false alarms simulated here.

Run: ``python -m scripts.dpsgd_conformance_power [runs]`` (about a minute on one core at 500 runs).

Sizes (the audit run's; ``gradient_canaries: all``, 2.5 % of each tensor kept as references, at least one; a
tensor's noise test reads its references and its excluded canaries, about half of the rest):
ci: digits, MLP 64-1024-10 (tensors 65,536 / 1,024 / 10,240 / 10 coordinates: 1,638 / 26 / 256 / 1 references),
n = 700 records (500 members + 200), batch 100: q = 1/7, T = 105, ε = 2 (replace-one). default: MNIST, ScatterNet +
linear (39,690 / 10: 992 / 1 references), n = 10,500, batch 4,096: q = 1/3, T = 120, ε = 1.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy import stats

from attacks.conformance.accountants.subsampled_gaussian import sigma_for_epsilon
from attacks.conformance.hypothesis_tests.epsilon import dpsgd_measured_epsilon
from attacks.conformance.hypothesis_tests.noise import independence_test, shape_test
from attacks.conformance.hypothesis_tests.sampling import dispersion_test

SIZES = {"ci": ((65_536, 1_024, 10_240, 10), (1638, 26, 256, 1)), "default": ((39_690, 10), (992, 1))}


def _noise_coordinates(profile: str) -> tuple[int, ...]:
    """Per tensor, the coordinates holding noise alone.

    Its references and (the floor of the expected number of) its excluded canaries, half of the rest.
    """
    sizes, refs = SIZES[profile]
    return tuple(r + (s - r) // 2 for s, r in zip(sizes, refs, strict=True))


PROFILES = {"ci": {"refs": _noise_coordinates("ci"), "n": 700, "q": 1 / 7, "T": 105, "eps": 2.0, "k": 155},
            "default": {"refs": _noise_coordinates("default"), "n": 10_500, "q": 1 / 3, "T": 120, "eps": 1.0,
                        "k": 65}}
DELTA = 1e-5
FAMILIES = (19, 100)  # ci with --mechanisms dpsgd --attacks canary: 19 comparisons; 100: a whole profile's run


def noise_power(n: int, factor: float, alpha: float) -> float:
    """P(reject) of the one-sided χ² test on n observations when the noise sd is factor × the certified one."""
    return float(stats.chi2.cdf(stats.chi2.ppf(alpha, n) / factor**2, n))


def rate_power(trials: int, q: float, factor: float, alpha: float) -> float:
    """P(reject) of the exact one-sided binomial test when the rate is factor·q."""
    crit = int(stats.binom.isf(alpha, trials, q)) + 1  # smallest count whose sf(count − 1) <= α
    while stats.binom.sf(crit - 2, trials, q) <= alpha:
        crit -= 1
    return float(stats.binom.sf(crit - 1, trials, factor * q))


def uneven_power(p: dict, alpha: float, runs: int, rng: np.random.Generator) -> float:
    """Simulated P(reject) of the dispersion test with a fifth of the records at twice the rate of the rest (mean q)."""
    n, q, steps = p["n"], p["q"], p["T"]
    rate = np.full(n, q / 1.2)
    rate[: n // 5] *= 2
    hits = [dispersion_test("d", rng.binomial(steps, rate), steps, q)["p_value"] < alpha for _ in range(runs)]
    return float(np.mean(hits))


def family_false_alarms(p: dict, alpha: float, runs: int, rng: np.random.Generator) -> float:
    """The share of null runs in which any of the K + 7 tests rejects at α.

    Noise and rate tests exact: drawn from their laws; the clip and step tests never reject a correct run.
    """
    n, q, steps, k = p["n"], p["q"], p["T"], p["k"]
    bad = 0
    for _ in range(runs):
        ps = [float(stats.chi2.cdf(rng.chisquare(r * steps), r * steps)) for r in p["refs"]]
        x = rng.standard_normal((steps, k))
        counts = rng.binomial(steps, q, n)
        ps += [independence_test("i", x)["p_value"], shape_test("s", x)["p_value"],
               dispersion_test("d", counts, steps, q)["p_value"],
               float(stats.binom.sf(counts.sum() - 1, n * steps, q))]
        bad += min(ps) < alpha
    return bad / runs


def measured_ratio(p: dict) -> tuple[float, float]:
    """(ε from measured parameters / certified ε, σ) at the null's median observations.

    Σx² = median of σ²·χ²_N over every noise observation, participations = n·T·q.
    """
    sigma = sigma_for_epsilon(p["eps"], sample_rate=p["q"], steps=p["T"], delta=DELTA, relation="replace-one",
                              guess=3.0)
    obs = sum(p["refs"]) * p["T"]
    m = dpsgd_measured_epsilon(sum_squares=sigma**2 * float(stats.chi2.median(obs)), n=obs,
                               rate_counts=(round(p["n"] * p["T"] * p["q"]), p["n"] * p["T"]), sample_rate=p["q"],
                               steps=p["T"], certified=p["eps"], delta=DELTA, relation="replace-one",
                               claimed_sigma=sigma)
    return m["epsilon"] / p["eps"], sigma


def main(runs: int) -> None:
    rng = np.random.default_rng(0)
    for name, p in PROFILES.items():
        ratio, sigma = measured_ratio(p)
        print(f"{name}: σ = {sigma:.3f}, q = {p['q']:.4f}, T = {p['T']}, n = {p['n']}; ε from measured parameters at "
              f"the null's median = {ratio:.4f} × certified")
        for m in FAMILIES:
            a = 0.05 / m
            steps, refs = p["T"], p["refs"]
            overall = 1 - math.prod(1 - noise_power(r * steps, 0.95, a) for r in refs)
            one = [round(noise_power(r * steps, 0.8, a), 3) for r in refs]
            print(f"  M = {m} (α = {a:.2e}): σ × 0.95 overall {overall:.3f}; q × 1.05 "
                  f"{rate_power(p['n'] * steps, p['q'], 1.05, a):.3f}; one tensor at σ × 0.8, by tensor {one}; "
                  f"a fifth at 2× the rate {uneven_power(p, a, runs, rng):.3f} ({runs} runs); T + one epoch 1 (exact); "
                  f"false alarms of the K + 7 tests {family_false_alarms(p, a, runs, rng):.4f} "
                  f"(Bonferroni share {(len(refs) + 4) * a:.4f}: K noise, independence, shape, rate, dispersion)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
