"""DPMix's closed-form accountant (Lee et al. 2019, Thm. 1), evaluated exactly.

``mechanisms.accounting.dpmix`` is the public API that chooses between it, Google ``dp_accounting``'s RDP and the tight
PLD accountant.

Pure maths, no torch. ε is unitless, δ is a probability. References:

- DPMix: Lee, Kim, Lee, Suh, ISIT 2019, Thm. 1 — Rényi-DP amplification by sampling without replacement
  (Wang, Balle, Kasiviswanathan, AISTATS 2019, Thm. 9/27) of a Gaussian mechanism on a mean of ℓ records.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
from scipy.special import gammaln, logsumexp

MAX_ORDER = 256
"""Largest Rényi order α of the closed form (all integers 2..MAX_ORDER are tried, as ``dp_accounting``
evaluates the exact WBK19 bound only up to 256). A bound at any α is valid, so stopping there only
costs tightness when ε is tiny (ε ≥ log(1/δ)/255)."""

_GUARD_BITS = 64
_LN2 = math.log(2.0)


@functools.lru_cache(maxsize=512)
def _log_b_table(c: float, kmax: int) -> tuple[float, ...]:
    """Log B(k) for k = 0, 2, 4, ..., kmax (index k // 2), exact to ~2^-64 relative; c = Δ²/ℓ² > 0."""
    i = np.arange(kmax + 1, dtype=float)
    log_e = i * (i - 1) / 2 * c  # log of e^{i(i-1)c/2}
    out = [0.0] * (kmax // 2 + 1)
    s_of: dict[int, int] = {}
    for k in range(2, kmax + 1, 2):
        log_c = gammaln(k + 1) - gammaln(i[: k + 1] + 1) - gammaln(k - i[: k + 1] + 1)
        gap = float(logsumexp(log_c[:k] + log_e[:k]) - log_e[k])  # log(rest / top term)
        if gap < -45.0:
            out[k // 2] = float(log_e[k])  # |log B − log top| ≤ e^gap < 3e-20
            continue
        lb = float(gammaln(k + 1) - gammaln(k / 2 + 1) + (k / 2) * math.log(c / 2))
        if gap < -1e-3:
            lb = max(lb, float(log_e[k]) + math.log(-math.expm1(gap)))
        s_of[k] = math.floor(lb / _LN2) - _GUARD_BITS - k - 8
    while s_of:
        top = max(s_of)
        # E_i by e^{c}-recurrence: relative error ≤ i²·2^{5-P} ≤ 2^{21-P}; need abs error ≤ 2^{s_k}.
        need = max(float(log_e[j]) / _LN2 - min(s for k, s in s_of.items() if k >= j) for j in range(top + 1))
        with mpmath.workprec(int(need) + 48):
            rho, power, e_vals = mpmath.exp(mpmath.mpf(c)), mpmath.mpf(1), [mpmath.mpf(1)]
            for _ in range(1, top + 1):
                e_vals.append(e_vals[-1] * power)
                power *= rho
        parts = [e._mpf_ for e in e_vals]  # (sign, mantissa, exponent, bitcount)
        failed: dict[int, int] = {}
        for k, s in s_of.items():
            total, binom = 0, 1
            for j in range(k + 1):
                _, man, exp, _ = parts[j]
                val = man << (exp - s) if exp >= s else man >> (s - exp)
                total += -binom * val if j % 2 else binom * val
                binom = binom * (k - j) // (j + 1)
            if total < 1 << (_GUARD_BITS + k + 1):  # error ≤ 2^{k+1} units: not yet 2^-64 relative
                failed[k] = s - _GUARD_BITS - max(total.bit_length(), 1)
            else:
                out[k // 2] = math.log(total) + s * _LN2
        s_of = failed
    return tuple(out)


def closed_form_epsilon(c: float, q: float, num_samples: int, delta: float) -> float:
    """Lee et al.'s ε (ISIT 2019, Thm. 1) at δ for T = ``num_samples`` releases.

    Each a Gaussian mechanism of whitened sensitivity Δ/ℓ (``c`` = Δ²/ℓ² ≥ 0) on ℓ records drawn without replacement at
    rate ``q`` = ℓ/n: min over integer α ∈ [2, MAX_ORDER] of T·ε'(α) + log(1/δ)/(α − 1), ε'(α) by ``_log_b_table``.

    Args:
        c: Δ²/ℓ², the squared whitened sensitivity of one release's mean (≥ 0).
        q: the sampling rate ℓ/n in (0, 1].
        num_samples: T, the number of releases.
        delta: δ, a probability in (0, 1).

    Returns:
        ε (unitless, replace-one); ``inf`` when no finite bound exists.
    """
    orders = np.arange(2, MAX_ORDER + 1, dtype=float)
    log_tail = math.log(1 / delta) / (orders - 1)
    if c == 0.0:
        return float(log_tail.min())
    log_b = np.array(_log_b_table(c, MAX_ORDER))
    j = np.arange(3, MAX_ORDER + 1)
    log_bb = 0.5 * (log_b[j // 2] + log_b[(j + 1) // 2])  # ½ log(B(2⌊j/2⌋) B(2⌈j/2⌉))
    a, jj = orders[:, None], j[None, :].astype(float)
    with np.errstate(invalid="ignore"):
        terms = jj * math.log(q) + gammaln(a + 1) - gammaln(jj + 1) - gammaln(a - jj + 1) + log_bb
    terms = np.where(jj <= a, terms, -np.inf)
    log_g = logsumexp(terms, axis=1)
    log_e2m1 = c + math.log(-math.expm1(-c))  # log(e^c − 1)
    second = 2 * math.log(q) + gammaln(orders + 1) - gammaln(orders - 1) - math.log(2)
    second = second + min(math.log(4) + log_e2m1, math.log(2) + c)
    log_a = logsumexp(np.stack([np.zeros_like(orders), second, math.log(4) + log_g]), axis=0)
    eps = num_samples * log_a / (orders - 1) + log_tail
    best = float(np.nanmin(eps))
    return best if math.isfinite(best) else float("inf")
