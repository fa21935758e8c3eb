"""The crafted black-box audit's analysis on the ideal mechanism (docs/audits.md, "The final model alone").

The ideal mechanism of the design: R runs, fair coins, scores N(0, 1) when the canary is out and N(μ, 1) when it is
in, μ = the certified μ of DP-SGD at q = 1 (√T/σ, add/remove) for the target ε at δ = 1e-5. Each draw goes through

- the audit's own analysis (``attacks.analysis.membership_audit`` with the crafted design: its valid
  ``epsilon_lb``, Clopper-Pearson over the fixed thresholds) and its μ_LB (``attacks.analysis.audits.crafted``: not
  μ-GDP for any μ below it), against the ideal mechanism's limit (``attacks.analysis.statistics.limits.gaussian_limit``:
  the best single threshold fixed in advance at the expected counts);
- the anchor's estimator (Annamalai & De Cristofaro 2024, ``attacks.analysis.statistics.anchor``: threshold picked on
  the same scores, one-sided Clopper-Pearson at 95 %, μ-GDP);
- the run-level check of a run holding this one audit (``attacks.analysis.privacy_bugs.check``: the valid analysis and
  the certified curve G_μ at 95 % together): the share of draws it flags is the family's false-alarm rate.

Usage (from the repository root; about 1 CPU-minute per 100 draws of R = 2,000)::

    python -m scripts.crafted_audit_ideal [--draws 200] [--grid 1:10000,2:4000,4:2000,10:2000,10:200]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import brentq

from attacks.analysis import membership_audit
from attacks.analysis.privacy_bugs.check import privacy_bugs
from attacks.analysis.statistics.anchor import anchor_epsilon, ideal_scores
from attacks.analysis.statistics.fdp import gdp_epsilon
from attacks.analysis.statistics.gaussian import gdp_fit_mu
from attacks.analysis.statistics.limits import gaussian_limit
from attacks.analysis.statistics.thresholds import threshold_counts
from bench.core.design import AuditDesign
from bench.results import AttackRecord, Audit, Metrics, PrivacyRecord, Roc, RunResult, Timings

DELTA = 1e-5


def certified_mu(epsilon: float) -> float:
    """μ with ε(μ-GDP, δ = 1e-5) = ``epsilon``."""
    return float(brentq(lambda m: gdp_epsilon(m, DELTA) - epsilon, 1e-3, 20.0))


def _run(audit: Audit, privacy: PrivacyRecord) -> RunResult:
    """A run holding this one audit, for the run-level check (3 analyses and the certified curve: M = 4)."""
    record = AttackRecord(attack="multi-run-crafted", n_members=0, n_non_members=0,
                          metrics=Metrics(auc=0.5, balanced_accuracy=0.5, advantage=0.0, tpr_at_fpr={}),
                          roc=Roc(fpr=[0.0, 1.0], tpr=[0.0, 1.0]), audit=audit)
    return RunResult(dataset="ideal", mechanism="dpsgd", seed=0, target_epsilon=1.0, model="linear", spec={},
                     status="ok", privacy=privacy, attacks={"multi-run-crafted": record}, timings=Timings(train_s=0.0))


def one(epsilon: float, runs: int, draws: int, seed: int = 0) -> dict[str, float]:
    """The ideal mechanism at ``epsilon`` through the audit, the anchor and the run-level check."""
    mu = certified_mu(epsilon)
    design = AuditDesign("multi-run", "black-box-crafted", size=runs, relation="add-remove", gaussian=True,
                         certified_mu=mu)
    rng = np.random.default_rng(seed)
    ours, theirs, mus, alarms = [], [], [], 0
    privacy = PrivacyRecord(epsilon=epsilon, delta=DELTA, accountant="ideal", guarantee="central-dp",
                            relation="add-remove", profile=[[epsilon, DELTA]])
    for _ in range(draws):
        scores, coins = ideal_scores(mu, runs, rng)
        block = membership_audit(scores, coins, delta=DELTA, design=design, profile=privacy.profile)
        ours.append(block["epsilon_lb"])
        mus.append(gdp_fit_mu(threshold_counts(scores, coins), confidence=0.95) / mu)
        theirs.append(anchor_epsilon(scores, coins, delta=DELTA)["epsilon"])
        alarms += bool(privacy_bugs([_run(Audit(**block, design=design), privacy)])[0])
    o, t = np.array(ours) / epsilon, np.array(theirs) / epsilon
    return {"epsilon": epsilon, "mu": mu, "runs": runs, "draws": draws, "ours_median": float(np.median(o)),
            "ours_p10": float(np.quantile(o, 0.1)), "anchor_median": float(np.median(t)),
            "anchor_max": float(t.max()), "anchor_above": float((t > 1).mean()), "alarms": alarms,
            "mu_lb_median": float(np.median(mus)), "limit": gaussian_limit(mu, runs // 2, runs - runs // 2,
                                                                            delta=DELTA) / epsilon}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--grid", default="1:10000,2:4000,4:2000,10:2000,10:200",
                        help="ε:R pairs, comma-separated")
    args = parser.parse_args()
    print("| ε | μ | R | ideal ε_LB / ε, median (10th percentile) | limit / ε | μ_LB / μ, median "
          "| anchor's estimate / ε, median (max) | anchor > ε | run-level false alarms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for item in args.grid.split(","):
        eps, runs = item.split(":")
        r = one(float(eps), int(runs), args.draws)
        print(f"| {r['epsilon']:g} | {r['mu']:.3f} | {r['runs']:,} | {r['ours_median']:.3f} ({r['ours_p10']:.3f}) | "
              f"{r['limit']:.3f} | {r['mu_lb_median']:.3f} | "
              f"{r['anchor_median']:.3f} ({r['anchor_max']:.3f}) | {100 * r['anchor_above']:.0f} % | "
              f"{r['alarms']} of {r['draws']} |", flush=True)


if __name__ == "__main__":
    main()
