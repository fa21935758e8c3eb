"""Power and level of the ``opacus-canary`` conformance family (``attacks.conformance.opacus``), simulated.

The observer's statistics drawn under the ideal mechanism (Poisson sampling at q, Gaussian noise σ·C in every tensor, T
steps, every step accounted) with one parameter off, each run's k + 4 tests and the measured-ε p-value read at the
Bonferroni level 0.05/M. The observer's statistics are exactly these laws under those mechanisms (χ² sums of the
reference noise, binomial rows and participation counts), so this is the tests' power on a real run of that size.

Sizes: ``ci`` (digits, 500 members + 500 canary records, batch 100: q = 0.1, 15 epochs: T = 150, the digits MLP's
4 tensors, ε = 2) and ``default`` (MNIST, 10,000 members + 500 canary records, the example's batch 100 and 15 epochs:
q = 1/105, T = 1,575, the MNIST MLP, ε = 1). Run: ``python -m scripts.opacus_conformance_power [runs]``. The declared-ε
test (issue 45: PRV's lower estimate of the loop's declared σ, q and observed T against the reported ε) is exact and
below the reported ε of a correct loop (PRV's lower against its upper estimate): one more comparison, no false alarm.
"""

from __future__ import annotations

import sys

import numpy as np
from opacus.accountants.utils import get_noise_multiplier
from scipy import stats

from attacks.canaries.opacus.observer import references
from attacks.conformance.hypothesis_tests import smallest_p
from attacks.conformance.opacus import SIGMA_STAR_MARGIN, opacus_tests, prv_sigma_for_epsilon

DELTA, M, RECORDS = 1e-5, 16, 500  # M: the run's family (8 conformance + measured ε + the canaries' analyses)
SIZES = {"ci": (1000, 100, 15, [8192, 128, 1280, 10], 2.0), "default": (10500, 100, 15, [100352, 128, 1280, 10], 1.0)}


def scenario(rng, n, q, steps, sizes, sigma, *, noise=1.0, one_tensor=None, rate=1.0, fifth_double=False,
             accounted=None, certified_steps=None, star=None):
    """One simulated run; (family flagged, {test quantity: rejected})."""
    true_q = q * rate
    if fifth_double:  # a fifth of the records at twice the rate of the rest, the same mean
        base = true_q / (0.8 + 0.4)
        rates = np.where(np.arange(RECORDS) < RECORDS // 5, 2 * base, base)
        hits = rng.binomial(steps, rates)
    else:
        hits = rng.binomial(steps, true_q, RECORDS)
    refs = references(sizes)
    tensors = []
    for k, r in enumerate(refs):
        f = noise if one_tensor is None or k == one_tensor else 1.0
        tensors.append({"shape": [sizes[k]], "n": r * steps,
                        "sum_squares": float((f * sigma) ** 2 * rng.chisquare(r * steps))})
    wb = {"claimed_sigma": sigma, "steps": steps, "sample_rate": q,
          "history": [[sigma, q, accounted if accounted is not None else steps]], "hits": hits.tolist(),
          "records_total": n, "batch_rows": int(rng.binomial(n * steps, true_q)), "largest_clip": 1.0,
          "clip_bound": 1.0, "noise_by_tensor": tensors}
    tests = opacus_tests(wb)
    ss, obs = sum(t["sum_squares"] for t in tensors), sum(t["n"] for t in tensors)
    p_eps = float(stats.chi2.cdf(ss / star**2, obs))
    level = 0.05 / M
    rejected = {t["name"]: t["p_value"] < level for t in tests}
    rejected["measured ε"] = p_eps < level
    return min(smallest_p(tests), p_eps) < level, rejected


def main(runs: int = 1000) -> None:
    for size, (n, batch, epochs, sizes, eps) in SIZES.items():
        q, steps = batch / n, epochs * -(-n // batch)
        sigma = get_noise_multiplier(target_epsilon=eps, target_delta=DELTA, sample_rate=q, steps=steps,
                                     accountant="prv")
        from attacks.conformance.opacus import prv_epsilon
        certified = prv_epsilon(sigma, q, steps, DELTA, which="upper")
        star = prv_sigma_for_epsilon(certified, q, steps, DELTA, guess=sigma) * (1 - SIGMA_STAR_MARGIN)
        # T + one epoch, the accountant's history complete but the certified ε that of E epochs: σ* at the observed T
        t1 = steps + -(-n // batch)
        star_t1 = prv_sigma_for_epsilon(certified, q, t1, DELTA, guess=sigma) * (1 - SIGMA_STAR_MARGIN)
        print(f"## {size}: n = {n}, q = {q:.4g}, T = {steps}, σ = {sigma:.4g}, certified ε = {certified:.4g}, "
              f"M = {M}, {runs} runs")
        cases = {"ideal (false alarms)": {}, "σ × 0.95": {"noise": 0.95}, "q × 1.05": {"rate": 1.05},
                 "σ × 0.8 in the smallest tensor": {"noise": 0.8, "one_tensor": 3},
                 "a fifth of the records at twice the rate": {"fifth_double": True},
                 "T + one epoch, not in the accountant's history": {"accounted": steps - (t1 - steps), "star": star},
                 "T + one epoch, certified ε of E epochs": {"star": star_t1, "steps": t1}}
        rng = np.random.default_rng(0)
        for name, kw in cases.items():
            kw = {"star": star, **kw}
            st = kw.pop("steps", steps)
            flags, per = 0, {}
            for _ in range(runs):
                flag, rej = scenario(rng, n, q, st, sizes, sigma, **kw)
                flags += flag
                for k, v in rej.items():
                    per[k] = per.get(k, 0) + v
            best = max(per, key=per.get)
            print(f"- {name}: family flags {flags / runs:.3f}; most powerful: {best} ({per[best] / runs:.3f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
