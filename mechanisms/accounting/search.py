"""The one numeric search the accountants share.

The noise σ at which a mechanism's ε falls to a target (DPMix's calibration, ``accounting.dpmix.dpmix_sigma``; local
noise's, ``accounting.gaussian.local_record_sigma``).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def solve_log(eps: Callable[[float], float], target: float, lo: float, hi: float, tol: float) -> float:
    """The σ in [lo, hi] (ε(lo) > target ≥ ε(hi), ε falling in σ) where ε crosses ``target``, to relative ``tol``.

    Brent's method on log ε against log σ (smooth there, so a handful of evaluations, each an accountant's ε of up to a
    second), then the smallest step up of ``tol`` at which ε ≤ target holds, so the returned σ always meets the target.

    Args:
        eps: σ -> ε (unitless) of one accountant, falling in σ.
        target: the target ε (> 0).
        lo: the bracket's lower end (> 0), with ε(lo) > target.
        hi: the bracket's upper end, with target ≥ ε(hi).
        tol: the relative tolerance on σ.

    Returns:
        The σ found: ε(σ) ≤ target, and σ within a factor 1 + ``tol`` or so of the crossing (at most ``hi``).

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
