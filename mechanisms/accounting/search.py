"""The one numeric search the accountants share.

The noise σ at which a mechanism's ε falls to a target (DPMix's calibration, ``accounting.dpmix.dpmix_sigma``; local
noise's, ``accounting.gaussian.local_record_sigma``).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def solve_log(eps: Callable[[float], float], target: float, lo: float, hi: float, tol: float) -> float:
    """The σ in [lo, hi] (ε(lo) > target ≥ ε(hi), ε falling in σ) where ε crosses ``target``, to relative ``tol``.

    Brent's method on log ε against log σ, then the smallest step up of ``tol`` where ε ≤ target, so the σ returned
    (at most ``hi``) always meets the target. ``eps``: σ -> ε of one accountant.

    Raises:
        ValueError: ε − target has the same sign at both ends of the bracket (SciPy's ``brentq``).
    """
    from scipy.optimize import brentq

    def gap(u: float) -> float:
        return math.log(min(max(eps(math.exp(u)), 1e-300), 1e300)) - math.log(target)

    root = math.exp(brentq(gap, math.log(lo), math.log(hi), xtol=tol / 4))
    sigma = min(root * (1 + tol / 2), hi)
    while eps(sigma) > target:
        sigma = min(sigma * (1 + tol), hi)
    return sigma
