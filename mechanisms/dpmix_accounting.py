"""DPMix's accountant: the closed form of Lee et al. (evaluated exactly) and Google ``dp_accounting``'s RDP.

Pure maths, no torch. ε is unitless, δ is a probability. References:

- DPMix: Lee, Kim, Lee, Suh, ISIT 2019, Thm. 1 — Rényi-DP amplification by sampling without replacement
  (Wang, Balle, Kasiviswanathan, AISTATS 2019, Thm. 9/27) of a Gaussian mechanism on a mean of ℓ records.

Precision strategy for the DPMix closed form: B(k) = Σ_i (-1)^i C(k,i) e^{i(i-1)c/2}, c = Δ²/ℓ², is
summed exactly in integer fixed point. Every even k has B(k) ≥ k!/(k/2)! (c/2)^{k/2} (expanding
e^{c m(m-1)/2} in falling factorials gives a series of non-negative terms) and, when the top term
dominates, B(k) ≥ e^{k(k-1)c/2} − Σ_{i<k} C(k,i) e^{i(i-1)c/2}. The scale 2^s of the fixed point is
chosen from the better of these bounds so that the total rounding error is below 2^-64·B(k); the
result is then checked a posteriori (and recomputed finer if the check ever failed). When the
top term beats the rest by e^45 or more, log B(k) equals its log to within e^-45 and is used directly.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
from scipy.special import gammaln, logsumexp

from mechanisms.accounting import require

MAX_ORDER = 256
"""Largest Rényi order α of the closed form (all integers 2..MAX_ORDER are tried, as ``dp_accounting``
evaluates the exact WBK19 bound only up to 256). A bound at any α is valid, so stopping there only
costs tightness when ε is tiny (ε ≥ log(1/δ)/255)."""

_GUARD_BITS = 64
_LN2 = math.log(2.0)


@functools.lru_cache(maxsize=512)
def _log_b_table(c: float, kmax: int) -> tuple[float, ...]:
    """log B(k) for k = 0, 2, 4, ..., kmax (index k // 2), exact to ~2^-64 relative; c = Δ²/ℓ² > 0."""
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
        lb = gammaln(k + 1) - gammaln(k / 2 + 1) + (k / 2) * math.log(c / 2)
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


def _check_dpmix(sigma, sigma_y, mixture_degree, num_samples, num_records, d_x, d_y, delta) -> None:
    for name, val in (("sigma", sigma), ("sigma_y", sigma_y)):
        require(math.isfinite(val) and val > 0, f"{name} must be a finite number > 0, got {val!r}")
    for name, val in (("mixture_degree", mixture_degree), ("num_samples", num_samples),
                      ("num_records", num_records)):  # fmt: skip
        require(float(val).is_integer(), f"{name} must be an integer, got {val!r}")
    require(num_records >= 1, f"num_records must be >= 1, got {num_records!r}")
    require(1 <= mixture_degree <= num_records, f"mixture_degree must be in [1, {num_records}], got {mixture_degree!r}")
    require(num_samples >= 1, f"num_samples must be >= 1, got {num_samples!r}")
    require(d_x >= 1 and d_y >= 1, f"d_x and d_y must be >= 1, got d_x={d_x!r}, d_y={d_y!r}")
    require(0 < delta < 1, f"delta must be in (0, 1), got {delta!r}")


def _dpmix_closed_form(c: float, q: float, num_samples: int, delta: float) -> float:
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


def dpmix_epsilon(
    *,
    sigma: float,
    mixture_degree: int,
    num_samples: int,
    num_records: int,
    d_x: int,
    d_y: int,
    delta: float,
    method: str = "closed_form",
    sigma_y: float | None = None,
    sample_rate: float | None = None,
) -> float:
    """ε of a DPMix release (Lee, Kim, Lee, Suh, ISIT 2019, Thm. 1).

    Each of T released samples is the mean of ℓ distinct records (features in [0,1]^d_x, labels in
    [0,1]^d_y) plus N(0, σ_x²) on the features and N(0, σ_y²) on the label; Δ² = d_x/σ_x² + d_y/σ_y².

    Args:
        sigma: σ_x, noise standard deviation on the features (> 0).
        mixture_degree: ℓ, records averaged per sample (1 ≤ ℓ ≤ n).
        num_samples: T, samples released (≥ 1).
        num_records: n, size of the private dataset.
        d_x: feature dimension; d_y: label dimension (both ≥ 1).
        delta: target δ, a probability in (0, 1).
        method: ``"closed_form"`` — the paper's bound, min over integer α ∈ [2, MAX_ORDER] of
            T·ε'(α) + log(1/δ)/(α−1), evaluated exactly (see module docstring); or ``"dp_accounting"`` —
            Google's RDP accountant (WBK19 Thm. 27, REPLACE_ONE, noise multiplier ℓ/Δ, its default
            orders plus 64..120), whose per-order bound and RDP→DP conversion are both tighter.
        sigma_y: σ_y, noise on the one-hot label; defaults to ``sigma``.
        sample_rate: the rate q in the closed form, default ℓ/n (the correct one). Only for showing what a
            source's formula gave: one source used 1/n, which understates ε.

    Returns:
        ε (unitless), or ``inf`` when no finite bound exists.

    Raises:
        ValueError: unknown method or an argument outside its range.
    """
    sigma_y = sigma if sigma_y is None else sigma_y
    _check_dpmix(sigma, sigma_y, mixture_degree, num_samples, num_records, d_x, d_y, delta)
    delta_sq = d_x / sigma**2 + d_y / sigma_y**2
    if method == "closed_form":
        q = mixture_degree / num_records if sample_rate is None else sample_rate
        require(0 < q <= 1, f"sample_rate must be in (0, 1], got {q!r}")
        return _dpmix_closed_form(delta_sq / mixture_degree**2, q, int(num_samples), delta)
    if method == "dp_accounting":
        require(sample_rate is None, "sample_rate is a closed-form option only")
        return _dp_accounting_epsilon(mixture_degree / math.sqrt(delta_sq), mixture_degree, int(num_samples),
                                      num_records, delta)
    raise ValueError(f"method must be 'closed_form' or 'dp_accounting', got {method!r}")


def _dp_accounting_epsilon(noise_multiplier: float, ell: int, t: int, n: int, delta: float) -> float:
    """Google ``dp_accounting``'s RDP ε of T self-composed draws of ℓ of n records without replacement, each a
    Gaussian mechanism with noise multiplier ℓ/Δ (WBK19 Thm. 27, REPLACE_ONE; its default orders plus 64..120)."""
    from dp_accounting import dp_event, rdp
    from dp_accounting.privacy_accountant import NeighboringRelation

    event = dp_event.SampledWithoutReplacementDpEvent(source_dataset_size=n, sample_size=ell,
                                                      event=dp_event.GaussianDpEvent(noise_multiplier))
    accountant = rdp.RdpAccountant(list(rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS) + list(range(64, 128, 8)),
                                   neighboring_relation=NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_event.SelfComposedDpEvent(event, t))
    eps = float(accountant.get_epsilon(delta))
    return eps if math.isfinite(eps) else float("inf")


def dpmix_sigma(
    *,
    target_epsilon: float,
    mixture_degree: int,
    num_samples: int,
    num_records: int,
    d_x: int,
    d_y: int,
    delta: float,
    method: str = "closed_form",
    sigma_max: float = 1e4,
    tol: float = 1e-3,
    sample_rate: float | None = None,
    sigma_y_scale: float = 1.0,
) -> float:
    """Smallest σ = σ_x (with σ_y = ``sigma_y_scale``·σ_x) whose DPMix ε (Lee et al., ISIT 2019) is ≤
    ``target_epsilon``.

    Bisection on log σ (ε decreases in σ) to relative tolerance ``tol``; the upper end of the final
    bracket is returned, so ``dpmix_epsilon(sigma=result, ...) <= target_epsilon`` always holds.

    Args:
        target_epsilon: ε to reach (unitless, > 0).
        mixture_degree, num_samples, num_records, d_x, d_y, delta, method, sample_rate: as in
            :func:`dpmix_epsilon`.
        sigma_y_scale: σ_y / σ_x, the label noise relative to the feature noise (> 0; 1: the source's equal
            noise). The feature-label cross-moments a learner estimates are noisiest where σ_x·σ_y is largest; at
            a fixed Δ² = d_x/σ_x² + d_y/σ_y² that product is smallest at σ_y/σ_x = √(d_y/d_x).
        sigma_max: largest σ considered.
        tol: relative tolerance on σ.

    Returns:
        σ, the noise standard deviation (in feature units, features in [0, 1]).

    Raises:
        ValueError: invalid arguments, or even ``sigma_max`` does not reach the target.
    """
    require(target_epsilon > 0, f"target_epsilon must be > 0, got {target_epsilon!r}")
    require(sigma_max > 0 and tol > 0, f"sigma_max and tol must be > 0, got {sigma_max!r}, {tol!r}")
    require(math.isfinite(sigma_y_scale) and sigma_y_scale > 0, f"sigma_y_scale must be > 0, got {sigma_y_scale!r}")
    kw = dict(mixture_degree=mixture_degree, num_samples=num_samples, num_records=num_records,
              d_x=d_x, d_y=d_y, delta=delta, method=method, sample_rate=sample_rate)  # fmt: skip

    def eps(s: float) -> float:
        return dpmix_epsilon(sigma=s, sigma_y=s * sigma_y_scale, **kw)

    reached = eps(sigma_max)
    if reached > target_epsilon:
        raise ValueError(
            f"target_epsilon={target_epsilon!r} is not reachable: sigma_max={sigma_max!r} gives ε={reached:.6g}"
        )
    hi, lo = sigma_max, sigma_max / 10
    while eps(lo) <= target_epsilon:
        hi, lo = lo, lo / 10
        if lo < 1e-12:
            return hi
    while hi / lo - 1 > tol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if eps(mid) <= target_epsilon else (mid, hi)
    return hi


