"""The white-box DP-SGD canary audit against a simulation of the ideal mechanism.

The white-box DP-SGD canary audit (``canary-whitebox``) against a simulation of the ideal mechanism through the
same analysis, at the same size, so the code-vs-ideal gap and the analysis' own gap to the accountant are known.
Run from the repository root::

    python -m scripts.dpsgd_audit_ideal [--canaries 38707] [--seeds 5] [--results A/results.json B/results.json ...]
                                     [--pool-draws 150 [--pool-epsilons 1,3,8]]

For each ε of the default profile (1, 3, 8; δ = 1e-5; DP-SGD's default recipe on 10,000 members + 500 public: q = 1/3,
T = 120, σ at replace-one ε by the PLD accountant), it prints:

1. How far the CLT is from exact: μ-GDP's ε of the exact moments of a canary's summed log-likelihood ratio
   (``attacks.analysis.statistics.gaussian_llr_ideal.exact_llr_moments``) against the exact add/remove PLD ε of the same
   T steps, at the default σ's and at the σ × 0.75 and σ × 0.5 bugs. Below 1: the Gaussian analysis errs low.
2. The ideal mechanism (``simulate_llr_scores``: exact Poisson sampling and N(0, σ²) noise, scored at a σ̂ measured
   as the code measures it, on 992 canary-free coordinates over T steps) through ``membership_audit`` with the
   white-box design the audit declares (its rule planned in advance): ε_LB / ε of the tightest valid bound and of
   the strict one-run bound (Steinke et al.), over ``--seeds`` seeds; and three runs' canaries pooled
   (``pool_llr_fits``) at 95 %, as results.json's ``audit.pooled`` states them. ε is the add/remove ε the run holds
   its audit to (DP-SGD's stated one: Opacus' PRV accountant, which adds its ``eps_error`` 0.01; dp_accounting's
   PLD ε of the same run is printed beside: 2 % lower at ε = 1).
3. With ``--results``: the code's ``canary-whitebox`` bounds from ``bench run`` results (one per seed), each and
   pooled across the files' runs of one ε; each run's mean gap (included − excluded score) against the exact one at
   its σ̂, in standard errors (its luck), and its included canaries' sd against the exact one.
4. The final-model (hidden-state) design's ceiling at ε = 10 by simulation (``final_model``; plain SGD; built as
   ``canary-final``, compared with its ideal at the recipe's momentum by ``scripts/dpsgd_final_audit_ideal.py``).
5. With ``--pool-draws R``: the spread of three runs pooled, over R independent ideal runs per ε (every disjoint
   triple and 3,000 random ones): median, 5–95 %, and how often it falls below issue 28's 0.85·ε.

Measured (2026-11-27, 2-core CPU; ``--results`` from ``PRIVBENCH_DATA=... python -m bench run --mechanisms dpsgd
--epsilons 1,3,8 --seeds 0,1,2 --attacks canary``; ε_LB / add-remove ε (opacus-prv); one run's bounds at the
design's per-analysis level 1 − 0.05/3, pooled ones at 95 %):

- CLT vs exact: 0.995 / 0.986 / 0.957 at the default σ of ε = 1 / 3 / 8, 0.990 / 0.965 / 0.885 at σ × 0.5: the
  Gaussian analysis errs low everywhere on this grid.
- ideal, m = 38,707, 5 seeds, median (min–max): ε = 1: 0.784 (0.726–0.811), three runs pooled 0.879
  (0.864–0.893); ε = 3: 0.896 (0.871–0.904), pooled 0.935 (0.930–0.941); ε = 8: 0.908 (0.897–0.910), pooled 0.929
  (0.927–0.932). The strict one-run bound (Steinke et al., one rule planned in advance): 0.36 / 0.55 / 0.53.
- code, seeds 0, 1, 2 (every bound ``gaussian-llr``, every shape test passed): ε = 1: 0.791, 0.743, 0.627;
  ε = 3: 0.898, 0.880, 0.840; ε = 8: 0.909, 0.902, 0.890; pooled 0.824 / 0.917 / 0.924 (``audit.pooled``).
- why the code's pooled 0.824 at ε = 1 is below the ideal's median: luck, not a loss. Each run's mean gap against
  the exact one at its σ̂ is +0.34, −0.35, −1.90 standard errors (seeds 0, 1, 2; −1.11 pooled), and the same at
  ε = 3 and 8 (+0.44 / +0.65, −0.34 / −0.30, −1.87 / −1.79): the seeds' draws (coins, sampling, standard normal
  noise) are shared across ε, so the nine cells are three draws, and seed 2 is the unlucky one. The sds are not:
  included canaries' sd / exact 1.008, 1.003, 0.998. Nothing else differs from the ideal: m, q, T and the claimed σ
  are the simulation's; σ̂ is within 0.4 % of σ (its spread, 0.2 %, costs the score's μ < 0.01 %:
  ``tests/attacks/analysis/statistics/test_gaussian_llr.py``); every shape test passed (p 0.25–0.83; the Cornish-Fisher
  normalisation enters only the test, never the bound); the pool adds sums and sums of squares (equal-size runs of
  equal variance: the inverse-variance weights). Two comparison artefacts made the gap look larger than it was: the
  earlier script divided the ideal by PLD's ε (2.1 % below the run's opacus-prv ε at ε = 1) and gave its pooled
  bound at 1 − 0.05/3 (0.874) where ``audit.pooled`` is at 95 % (0.879 with both fixed, σ̂ as the code's).
- three runs pooled, 150 ideal runs per ε (``--pool-draws 150``; each cell of ``--results`` as above): median 0.883 /
  0.939 / 0.933, 5–95 % 0.804–0.965 / 0.910–0.970 / 0.920–0.947 at ε = 1 / 3 / 8; below 0.85 in 24.8 % of random
  triples at ε = 1 (11 of 50 disjoint ones; 14.7 % against PLD's ε), 0.7 % at ε = 3 and 8 (the pools a shape test
  voided). The code's 0.824 is the ideal's 13th percentile (pooled gap −1.11 SE, Φ(−1.11) = 0.13). The normal
  approximation from the exact moments agrees (27 % below 0.85 with three runs) and gives 15 % with four runs and 4 %
  with six at ε = 1: issue 28's "three runs pooled ≥ 0.85·ε" is met at ε = 3 and 8 but at ε = 1 by three runs in three
  draws of four only; six runs meet it in 96 %. Measured: seeds 3, 4, 5 at ε = 1 (``bench run
  ... --epsilons 1 --seeds 3,4,5``) 0.815, 0.839, 0.803, mean gaps +0.60, +0.86, +0.43 SE, pooled 0.925
  (``audit.pooled``); ``--results`` with both runs' files pools the six seeds 0–5 to 0.903 (gap −0.01 SE). Requiring
  every run's shape test to pass (the rule before ``combined_shape_p``) voided 1.9 % of the pools at ε = 3 and 8 (one
  run of 150 rejected at 1 %); Fisher's combination voids 0.6–0.7 %. The pooled 95 % bound passes the opacus-prv ε in
  0.9 % of correct triples at ε = 1 (the largest 1.065·ε; the μ-GDP ε of the exact moments is 0.975·ε there), 0.1 % at
  ε = 3, never at ε = 8: the run-level check holds it at 1 − 0.05/k (``attacks.analysis.privacy_bugs.check``).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np

from attacks.analysis import NORMALITY_LEVEL, family, membership_audit
from attacks.analysis.audits.guess_plan import planned_guess_fraction
from attacks.analysis.statistics.fdp import gdp_epsilon
from attacks.analysis.statistics.gaussian_llr import (
    llr_fit,
    llr_gdp_bound,
    llr_valid,
    pool_llr_fits,
)
from attacks.analysis.statistics.gaussian_llr_ideal import exact_llr_moments, simulate_llr_scores
from bench.core.design import AuditDesign
from mechanisms.accounting.gaussian import pld_epsilon, pld_noise_multiplier
from mechanisms.accounting.opacus_accountants import opacus_epsilon

DELTA, Q, T = 1e-5, 1 / 3, 120
DESIGN = AuditDesign(kind="one-run", threat_model="white-box", relation="add-remove")
REFERENCES = 992  # the default model's canary-free coordinates in its weight tensor (2.5 % of 39,690): σ̂'s sample
POOLED_LEVEL = 0.95  # results.json's audit.pooled states its bound at 95 % (one comparison of the run-level check)
TARGET = 0.85  # issue 28's target for three runs pooled


def sigma_at(epsilon: float) -> float:
    """The default recipe's σ at replace-one ε (what ``bench run`` trains)."""
    return pld_noise_multiplier(target_epsilon=epsilon, delta=DELTA, sample_rate=Q, steps=T, relation="replace-one")


def add_remove(sigma: float) -> float:
    """The add/remove ε at δ the run holds the audit to.

    DP-SGD's stated add/remove ε, Opacus' PRV accountant (its default ``eps_error`` 0.01 included;
    ``mechanisms.dpsgd.mechanism``).
    """
    return opacus_epsilon(((sigma, Q, T),), delta=DELTA, accountant="prv")


def add_remove_pld(sigma: float) -> float:
    """dp_accounting's PLD add/remove ε at δ of the same run (tighter than the PRV figure by about 0.01)."""
    return pld_epsilon(noise_multiplier=sigma, sample_rate=Q, steps=T, delta=DELTA, relation="add-remove")


def sigma_hat(sigma: float, rng: np.random.Generator) -> float:
    """σ̂ as the code measures it.

    The root mean square of ``REFERENCES`` canary-free coordinates over T steps of N(0, σ²) noise (σ·√(χ²_k/k), k =
    REFERENCES·T).
    """
    k = REFERENCES * T
    return sigma * float(np.sqrt(rng.chisquare(k) / k))


def ideal(sigma: float, m: int, seed: int, level: float, audit: bool = True) -> tuple[dict | None, dict]:
    """The audit block (None unless ``audit``) and ``llr_fit`` of the ideal mechanism's m canaries (seeded).

    Scored at a σ̂ measured as the code measures it.
    """
    rng = np.random.default_rng(seed)
    s_hat = sigma_hat(sigma, rng)
    scores, coins = simulate_llr_scores(sigma=sigma, sample_rate=Q, steps=T, m=m, rng=rng, score_sigma=s_hat)
    fit = llr_fit(scores, coins, (s_hat, Q, T))
    if not audit:
        return None, fit
    f = planned_guess_fraction(sigma=sigma, sample_rate=Q, steps=T, m=m, delta=DELTA, confidence=level)
    design = DESIGN.model_copy(update={"guess_fraction": f, "llr_model": (s_hat, Q, T)})
    return membership_audit(scores, coins, delta=DELTA, design=design), fit


def pooled_ratio(fits: list[dict], eps: float, confidence: float = POOLED_LEVEL) -> float:
    """The pooled μ-GDP bound of ``fits`` / ε (0 when a shape test rejected: the pool decides nothing)."""
    pooled = pool_llr_fits(fits)
    return llr_gdp_bound(pooled, delta=DELTA, confidence=confidence) / eps if llr_valid(pooled, NORMALITY_LEVEL) \
        else 0.0


def _summary(r: np.ndarray) -> str:
    return f"{np.median(r):.3f} ({r.min():.3f}–{r.max():.3f})"


def gap_z(fit: dict, sigma: float, score_sigma: float) -> float:
    """How many standard errors the fit's mean gap lies from the exact one of the ideal mechanism at σ scored at σ̂.

    (``exact_llr_moments``.) The run's luck in its canaries' coins, sampling and noise.
    """
    mom = exact_llr_moments(sigma=sigma, sample_rate=Q, steps=T, score_sigma=score_sigma)
    se = np.sqrt(mom["var_in"] / fit["n_in"] + mom["var_out"] / fit["n_out"])
    return float((fit["mean_in"] - fit["mean_out"] - mom["mean_in"] + mom["mean_out"]) / se)


def code_rows(paths: list[str]) -> None:
    """The code's white-box bounds from results files, per run and pooled per ε.

    Each run's mean gap against the exact one (in standard errors) and its included canaries' sd against the exact one.
    """
    by_eps: dict[float, list] = {}
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for r in doc["results"]:
            rec = r["attacks"].get("canary-whitebox")
            if rec is None:
                continue
            audited = rec.get("audited_privacy") or r["privacy"]
            eps = audited["epsilon"] if audited["relation"] == "add-remove" else next(
                o["epsilon"] for o in audited["other_relations"] if o["relation"] == "add-remove")
            fit = next(b["fit"] for b in rec["audit"]["bounds"] if b["method"] == "gaussian-llr")
            strict = next(b["epsilon_lb"] for b in rec["audit"]["bounds"] if b["method"] == "one-run")
            extra = rec["extra"]
            s_hat = extra["sigma_hat"]  # all references' σ̂ (the default model: 992 of its 993 in the weights)
            z = gap_z(fit, extra["claimed_sigma"], s_hat)
            mom = exact_llr_moments(sigma=extra["claimed_sigma"], sample_rate=Q, steps=T, score_sigma=s_hat)
            by_eps.setdefault(r["target_epsilon"], []).append((eps, fit, z))
            audit = rec["audit"]
            print(f"   ε = {r['target_epsilon']:g} seed {r['seed']}: add/remove ε {eps:.3f}, ε_LB "
                  f"{audit['epsilon_lb']:.3f} ({audit['method']}) = {audit['epsilon_lb'] / eps:.3f}·ε; one-run "
                  f"{strict / eps:.3f}·ε; m = {audit['design']['size']}; σ̂/σ {s_hat / extra['claimed_sigma']:.4f}; "
                  f"mean gap {z:+.2f} SE from exact; sd_in / exact {fit['sd_in'] / np.sqrt(mom['var_in']):.4f}")
    level = 1 - 0.05 / len(family(DESIGN))
    for target, rows in sorted(by_eps.items()):
        if len(rows) > 1:
            fits, eps = [fit for _, fit, _ in rows], rows[0][0]
            print(f"   ε = {target:g} pooled over {len(rows)} runs: {pooled_ratio(fits, eps):.3f}·ε at 95 % "
                  f"({pooled_ratio(fits, eps, level):.3f} at {level:.4f}; 0 means a shape test rejected); mean gap "
                  f"{sum(z for _, _, z in rows) / np.sqrt(len(rows)):+.2f} SE from exact")


def below_target(sigma: float, eps: float, m: int, runs: int) -> float:
    """P(R runs pooled fall below ``TARGET``·ε) by the normal approximation.

    The pooled bound at the exact moments with the mean gap z standard errors off, z ~ N(0, 1) (the sds' own error is a
    tenth of the gap's and left out); the z where the bound crosses the target by bisection.
    """
    from scipy.stats import norm

    mom = exact_llr_moments(sigma=sigma, sample_rate=Q, steps=T)
    n = m * runs / 2
    se = np.sqrt((mom["var_in"] + mom["var_out"]) / n)

    def ratio(z: float) -> float:
        fit = {"n_in": int(n), "n_out": int(n), "mean_in": mom["mean_in"] + z * se, "mean_out": mom["mean_out"],
               "sd_in": np.sqrt(mom["var_in"]), "sd_out": np.sqrt(mom["var_out"])}
        return llr_gdp_bound(fit, delta=DELTA, confidence=POOLED_LEVEL) / eps

    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(mid) < TARGET else (lo, mid)
    return float(norm.cdf(lo))


def pool_draws(draws: int, m: int, epsilons: tuple[float, ...]) -> dict[float, np.ndarray]:
    """The pooled bound's spread over draws of three runs.

    ``draws`` independent ideal runs per ε (σ̂ measured as the code does), pooled in every disjoint triple and in 3,000
    random triples (each of three distinct runs). Returns ``{ε: the random triples' pooled ε_LB / ε}``.
    """
    print(f"5. three ideal runs pooled (95 %, as audit.pooled): {draws} runs per ε, m = {m}")
    out = {}
    for epsilon in epsilons:
        sigma = sigma_at(epsilon)
        eps = add_remove(sigma)
        fits = [ideal(sigma, m, 1000 + s, 0.95, audit=False)[1] for s in range(draws)]
        single = np.array([pooled_ratio([f], eps, 1 - 0.05 / len(family(DESIGN))) for f in fits])
        disjoint = np.array([pooled_ratio(fits[i:i + 3], eps) for i in range(0, draws - 2, 3)])
        rng = np.random.default_rng(7)
        triples = [rng.choice(draws, 3, replace=False) for _ in range(3000)]
        pooled = np.array([pooled_ratio([fits[j] for j in t], eps) for t in triples])
        q5, q50, q95 = np.quantile(pooled, [0.05, 0.5, 0.95])
        approx = " / ".join(f"{below_target(sigma, eps, m, r):.1%}" for r in (3, 4, 6))
        print(f"   ε = {epsilon:g} (add/remove {eps:.4f}, opacus-prv): one run's gaussian-llr bound (at the audit's "
              f"level) median {np.median(single):.3f}; "
              f"three pooled median {q50:.3f}, 5–95 % {q5:.3f}–{q95:.3f}, below {TARGET}: "
              f"{np.mean(pooled < TARGET):.1%} of random triples, {int(np.sum(disjoint < TARGET))} of "
              f"{disjoint.size} disjoint ones; against PLD's {add_remove_pld(sigma):.4f}: median "
              f"{q50 * eps / add_remove_pld(sigma):.3f}, below {TARGET}: "
              f"{np.mean(pooled * eps / add_remove_pld(sigma) < TARGET):.1%}; normal approximation: below "
              f"{TARGET} with 3 / 4 / 6 runs pooled {approx}; above ε (the pool's false alarm at 95 %, before the "
              f"run-level Bonferroni): {np.mean(pooled > 1):.1%}, the largest {pooled.max():.3f}; pools a shape test "
              f"voided: {np.mean(pooled == 0):.1%}")
        out[epsilon] = pooled
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=38_707)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--results", nargs="*", default=[])
    parser.add_argument("--pool-draws", type=int, default=0,
                        help="also the spread of three runs pooled over this many ideal runs per ε (section 5)")
    parser.add_argument("--pool-epsilons", default="1,3,8", help="the ε of section 5, comma-separated")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    level = 1 - 0.05 / len(family(DESIGN))
    print("1. CLT vs exact: μ-GDP ε of the exact moments / exact PLD ε (add/remove), q = 1/3, T = 120")
    for epsilon in (1.0, 3.0, 8.0):
        for scale in (1.0, 0.75, 0.5):
            sigma = scale * sigma_at(epsilon)
            mom = exact_llr_moments(sigma=sigma, sample_rate=Q, steps=T)
            exact = add_remove_pld(sigma)
            print(f"   ε = {epsilon:g}, σ × {scale:g} = {sigma:.3f}: μ = {mom['mu']:.4f}, Gaussian ε "
                  f"{gdp_epsilon(mom['mu'], DELTA):.4f}, exact ε {exact:.4f}, ratio "
                  f"{gdp_epsilon(mom['mu'], DELTA) / exact:.3f}")
    print(f"2. ideal mechanism, m = {args.canaries}, {args.seeds} seeds: ε_LB / add-remove ε (opacus-prv, as the "
          "run states it), median (min–max)")
    for epsilon in (1.0, 3.0, 8.0):
        sigma = sigma_at(epsilon)
        eps = add_remove(sigma)
        runs = [ideal(sigma, args.canaries, s, level) for s in range(args.seeds)]
        best = np.array([b["epsilon_lb"] / eps for b, _ in runs])
        strict = np.array([next(x["epsilon_lb"] for x in b["bounds"] if x["method"] == "one-run") / eps
                           for b, _ in runs])
        invalid = sum(b["method"] != "gaussian-llr" for b, _ in runs)
        pooled = np.array([pooled_ratio([runs[(s + j) % len(runs)][1] for j in range(3)], eps)
                           for s in range(len(runs))])
        print(f"   ε = {epsilon:g} (add/remove {eps:.4f}; PLD {add_remove_pld(sigma):.4f}): tightest valid "
              f"{_summary(best)} (normality rejected in {invalid} of {len(runs)}); strict one-run {_summary(strict)}; "
              f"three runs pooled (95 %) {_summary(pooled)}")
    if args.results:
        print("3. the code (bench run results)")
        code_rows(args.results)
    final_model(args.canaries, args.seeds, level)
    if args.pool_draws:
        pool_draws(args.pool_draws, args.canaries, tuple(float(e) for e in args.pool_epsilons.split(",")))


def final_model(m: int, seeds: int, level: float, epsilon: float = 10.0) -> None:
    """4.

    The final-model (hidden-state) ceiling at target ε (``canary-final``): with θ₀ public, plain SGD and the other
    records' gradients exactly 0 at the canaries' coordinates (the best case), canary i's coordinate of θ_T − θ₀ is
    −lr·C·Σ_t x_t, so its score is the sum Σ_t x_t, N(0, Tσ²) plus Binomial(T, q) when included; ``extra`` adds the
    other records' run-to-run variation there, as a multiple of the noise's sd √T·σ. Through the same μ-GDP analysis
    (its shape test as plain normality: the sum is not a log-likelihood ratio).
    """
    sigma = sigma_at(epsilon)
    eps = add_remove_pld(sigma)
    print(f"4. final model (hidden state), ε = {epsilon:g} (σ = {sigma:.3f}, add/remove {eps:.3f}), m = {m}: "
          f"ε_LB / ε, median over {seeds} seeds")
    for extra in (0.0, 0.5, 1.0):
        ratios = []
        for seed in range(seeds):
            rng = np.random.default_rng(500 + seed)
            coins = (rng.random(m) < 0.5).astype(int)
            scores = rng.binomial(T, Q, m) * coins + rng.normal(0, np.sqrt(T) * sigma * np.sqrt(1 + extra**2), m)
            fit = llr_fit(scores, coins)
            ratios.append(llr_gdp_bound(fit, delta=DELTA, confidence=level) / eps if llr_valid(fit, NORMALITY_LEVEL)
                          else 0.0)
        print(f"   other records' variation {extra:g} × the noise's sd: {np.median(ratios):.3f}")


if __name__ == "__main__":
    main()
