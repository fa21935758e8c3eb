"""Conformance tests: is the mechanism that ran the one its ε certifies?

Each test measures one quantity the accountant assumes and tests H0 "this run is the certified mechanism" with a
p-value that is exact, or whose level under H0 is shown by simulation (``validity``); each is one comparison of the
run's Bonferroni family (``attacks.analysis.privacy_bugs.check``), fixed by the design before any data. None is an
"ε ≥" statement. One-sided where ε is monotone in the quantity (the direction that raises ε), two-sided where no
direction is safe. This module holds what every test shares (``conformance_record``, ``VALIDITY``, the family's
smallest p-value); one module per kind: ``noise``, ``sampling``, ``epsilon``, ``mixing``, ``release``,
``canary_scores``, ``continuity``. Pure NumPy / SciPy (and ``dp_accounting`` for the ε); no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from attacks.conformance.accountants.subsampled_gaussian import (
    PLD_SMALLEST_SIGMA,
    poisson_gaussian_epsilon,
    sigma_for_epsilon,
)

# re-exported: the conformance code's DP-SGD accountant (the zoo's planted bugs import it from here)
__all__ = ["PLD_SMALLEST_SIGMA", "VALIDITY", "conformance_record", "poisson_gaussian_epsilon", "sigma_for_epsilon",
           "smallest_p"]

VALIDITY = {
    "exact": "exact under H0",
    "simulated": "asymptotic; its level under H0 shown by simulation "
                 "(tests/attacks/conformance/hypothesis_tests/test_conformance.py)",
}


def conformance_record(name: str, quantity: str, *, certified: float | None, measured: float | None, n: int,
                p_value: float, alternative: str, validity: str, statistic: float | None = None,
                **detail: Any) -> dict[str, Any]:
    """One conformance test's record: ``bench.results.ConformanceTest``'s fields, ``detail`` and ``deciding`` True.

    ``p_value`` under H0 "this run is the certified mechanism"; ``certified`` / ``measured`` None: none.

    Raises:
        ValueError: an unknown ``alternative`` or ``validity`` (``VALIDITY``), or a p-value outside [0, 1].
    """
    if alternative not in ("less", "greater", "two-sided") or validity not in VALIDITY:
        raise ValueError(f"conformance test {name!r}: alternative {alternative!r} or validity {validity!r} unknown")
    if not 0.0 <= p_value <= 1.0 or math.isnan(p_value):
        raise ValueError(f"conformance test {name!r}: p-value {p_value!r} outside [0, 1]")
    return {"name": name, "quantity": quantity, "certified": certified, "measured": measured, "n": int(n),
            "statistic": statistic, "p_value": float(p_value), "alternative": alternative, "validity": validity,
            "detail": detail, "deciding": True}


def smallest_p(tests: Sequence[dict[str, Any]]) -> float:
    """The smallest p-value of the records with ``deciding`` true (absent: true), 1 without any."""
    return min((float(t["p_value"]) for t in tests if t.get("deciding", True)), default=1.0)
