"""The conformance code's own accountants against the mechanisms' (issue 45).

On every built-in mechanism's grid at the ``ci`` and ``default`` profiles' sizes: what the declared-ε test's tolerance
(``attacks.conformance.hypothesis_tests.epsilon.DECLARED_TOLERANCE``, 1e-3) rests on.

1. **How far the pessimistic PLD overstates ε** on those grids: the conformance code's PLD (DPMix's dominating pair,
   ``attacks.conformance.accountants.mixing_pair``; DP-SGD's Poisson-subsampled Gaussian,
   ``attacks.conformance.accountants.subsampled_gaussian``) on its own grid against a grid five (DPMix) or ten (DP-SGD)
   times finer. A correct accountant, however tight, certifies at least the exact ε, so it can fall at most that far
   below the declared ε.
2. **The declared ε against the certified ε of the correct mechanisms**: each mechanism calibrated to each target ε by
   its own accountant (``mechanisms.accounting``), its certified ε, and the ε the conformance code gives its declared
   parameters; the declared-ε test fires where the ratio exceeds 1 + 1e-3.

Run: ``python -m scripts.accountant_check`` (67 CPU-s).

Measured (2026-11-29, issue 45's branch): the pessimism is at most 1.8e-4 (DPMix at default size, ε = 1: 1.81e-4;
DP-SGD at default size, ε = 1: 1.50e-4; below 2.4e-5 at ci size for DPMix). Declared / certified: DP-SGD under
replace-one 1.0000000 at every ε and size (the same dp_accounting computation), under add/remove 0.980–0.998 of Opacus'
PRV and 0.909–0.921 of its RDP (both certify above the PLD); DPMix 1.0000000 everywhere (pld); local noise
0.99991–1.0000000 (the exact composition against dp_accounting's pessimistic PLD, or against the basic composition
where that is smaller: equal to it at ε = 150 and 2,000; labels public 1.0000000). The declared-ε test never fires on
these grids; the largest ratio is 1.0000000 against its threshold 1.001.
"""

from __future__ import annotations

import logging
import math
import sys

from attacks.conformance.accountants.analytic_gaussian import local_epsilon
from attacks.conformance.accountants.mixing_pair import GRID, mixing_epsilon, mixing_shift
from attacks.conformance.accountants.subsampled_gaussian import poisson_gaussian_epsilon
from attacks.conformance.hypothesis_tests.epsilon import DECLARED_TOLERANCE

DELTA = 1e-5
DPMIX = {"ci": dict(ell=4, t=2000, n=500, d_x=64), "default": dict(ell=16, t=10_000, n=10_000, d_x=784)}
DPSGD = {"ci": (1 / 7, 105), "default": (1 / 3, 120)}  # the audit runs' q and T (public n: members + canaries / 2)
GRIDS = {"dpsgd": (1.0, 2.0, 3.0, 8.0), "dpmix": (1.0, 2.0, 3.0, 8.0, 15.0),
         "local": (1.0, 2.0, 3.0, 8.0, 150.0, 2000.0)}


def _dpsgd_fine(sigma: float, q: float, t: int) -> float:
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=1e-4,
                                      neighboring_relation=NeighboringRelation.REPLACE_ONE)
    return float(one.self_compose(t).get_epsilon_for_delta(DELTA))


def dpsgd_rows() -> list[tuple[str, ...]]:
    from mechanisms.accounting.gaussian import pld_epsilon, pld_noise_multiplier
    from mechanisms.accounting.opacus_accountants import opacus_epsilon

    rows = []
    for size, (q, t) in DPSGD.items():
        for eps in GRIDS["dpsgd"]:
            sigma = pld_noise_multiplier(target_epsilon=eps, delta=DELTA, sample_rate=q, steps=t,
                                         relation="replace-one")
            ours = poisson_gaussian_epsilon(noise_multiplier=sigma, sample_rate=q, steps=t, delta=DELTA,
                                            relation="replace-one")
            certified = pld_epsilon(noise_multiplier=sigma, sample_rate=q, steps=t, delta=DELTA, relation="replace-one")
            ours_ar = poisson_gaussian_epsilon(noise_multiplier=sigma, sample_rate=q, steps=t, delta=DELTA,
                                               relation="add-remove")
            prv = opacus_epsilon(((sigma, q, t),), delta=DELTA, accountant="prv")
            rdp = opacus_epsilon(((sigma, q, t),), delta=DELTA, accountant="rdp")
            rows.append(("dp-sgd", size, f"{eps:g}", f"{ours / _dpsgd_fine(sigma, q, t) - 1:.2e}",
                         f"{ours / certified:.7f} (replace-one); {ours_ar / prv:.4f} (prv), {ours_ar / rdp:.4f} (rdp)"))
    return rows


def dpmix_rows() -> list[tuple[str, ...]]:
    from mechanisms.accounting.dpmix import dpmix_epsilon, dpmix_sigma

    rows = []
    for size, s in DPMIX.items():
        scale = math.sqrt(2 / s["d_x"])
        kw = dict(mixture_degree=s["ell"], num_samples=s["t"], num_records=s["n"], d_x=s["d_x"], d_y=10, delta=DELTA)
        for eps in GRIDS["dpmix"]:
            sigma = dpmix_sigma(target_epsilon=eps, sigma_y_scale=scale, **kw)
            certified = dpmix_epsilon(sigma=sigma, sigma_y=scale * sigma, **kw)
            c = mixing_shift(sigma_x=sigma, sigma_y=scale * sigma, d_x=s["d_x"], weight=1 / s["ell"])
            ours = mixing_epsilon(shift_sq=c, rate=s["ell"] / s["n"], releases=s["t"], delta=DELTA)
            fine = mixing_epsilon(shift_sq=c, rate=s["ell"] / s["n"], releases=s["t"], delta=DELTA, grid=GRID / 5)
            rows.append(("dpmix", size, f"{eps:g}", f"{ours / fine - 1:.2e}", f"{ours / certified:.7f}"))
    return rows


def local_rows() -> list[tuple[str, ...]]:
    from mechanisms.accounting.gaussian import (
        gaussian_epsilon,
        gaussian_sigma,
        local_record_epsilon,
        local_record_sigma,
    )

    rows = []
    for share in (0.25, 0.5, None):
        for eps in GRIDS["local"]:
            if share is None:
                sigma, label = gaussian_sigma(epsilon=eps, delta=DELTA, sensitivity=2.0), None
                certified = gaussian_epsilon(sigma=sigma, delta=DELTA, sensitivity=2.0)
            else:
                sigma, label = local_record_sigma(target_epsilon=eps, delta=DELTA, label_share=share, num_classes=10)
                certified = local_record_epsilon(sigma=sigma, delta=DELTA, label_epsilon=label, num_classes=10)
            ours = local_epsilon(sigma=sigma, sensitivity=2.0, delta=DELTA, label_epsilon=label, num_classes=10)
            rows.append(("local", f"label share {share}" if share else "labels public", f"{eps:g}", "exact",
                         f"{ours / certified:.7f}"))
    return rows


def main() -> int:
    logging.disable(logging.WARNING)
    rows = [*dpsgd_rows(), *dpmix_rows(), *local_rows()]
    print("| mechanism | size | target ε | pessimism of the conformance PLD | declared / certified |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for row in rows:
        print("| " + " | ".join(row) + " |")
        worst = max(worst, *(float(part.split()[0]) for part in row[4].split("; ")[0:1]))
    print(f"largest declared / certified (first accountant of each row): {worst:.7f}; fires above "
          f"{1 + DECLARED_TOLERANCE}")
    return 0 if worst <= 1 + DECLARED_TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
