"""DPMix's accountants (Lee, Kim, Lee, Suh, ISIT 2019).

The tight PLD accountant (default), Google ``dp_accounting``'s RDP, and the paper's closed form
(``mechanisms.accounting.dpmix_closed_form``), all under replace-one.

Pure maths, no torch. ε is unitless, δ is a probability.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Literal

from mechanisms.accounting.dpmix_closed_form import closed_form_epsilon
from mechanisms.accounting.gaussian import privacy_profile, require
from mechanisms.accounting.search import solve_log

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

LabelForm = Literal["distribution", "box", "none"]
Method = Literal["pld", "dp_accounting", "closed_form"]
ACCOUNTANT_NAMES: dict[str, str] = {"pld": "dpmix-pld", "closed_form": "dpmix-closed-form",
                                    "dp_accounting": "dp-accounting-rdp"}
"""The accountant each ``method`` names in results (``PrivacySpent.accountant``)."""

PLD_INTERVAL = 1e-4
"""The PLD's discretisation interval is PLD_INTERVAL·max(1, c), c = Δ²/ℓ² the squared whitened shift of one release:
one release's privacy losses span about c, so the grid keeps about 1/PLD_INTERVAL points per unit of c. At ℓ = 16,
n = 10,000, T = 20,000 this is within 0.1 % of a grid ten times finer at every σ (ε from 0.4 to 85) and takes under
0.4 s; a fixed 1e-4 grid would take minutes and gigabytes where ε is in the thousands."""
PLD_MAX_C = 5e6
"""Above this c (noise under 1/2,236 of the sensitivity) the grid would pass e^500 per step: ε is reported as ∞."""


def label_sensitivity(label_form: LabelForm, d_y: int) -> float:
    """Δ_y ≥ 0, the L2 distance two records' label rows can be apart, for ``d_y`` ≥ 1 label coordinates.

    ``distribution`` (rows summing to 1): √2 (0 for one class); ``box`` (rows in [0, 1]^d_y, Lee et al.): √d_y;
    ``none`` (no label released): 0. Raises ValueError on another form.
    """
    if label_form == "distribution":
        return math.sqrt(2.0) if d_y >= 2 else 0.0
    if label_form == "box":
        return math.sqrt(d_y)
    if label_form == "none":
        return 0.0
    raise ValueError(f"label_form must be 'distribution', 'box' or 'none', got {label_form!r}")


def _check(sigma: float, sigma_y: float, mixture_degree: int, num_samples: int, num_records: int, d_x: int, d_y: int,
           delta: float) -> None:
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


def dpmix_epsilon(
    *,
    sigma: float,
    mixture_degree: int,
    num_samples: int,
    num_records: int,
    d_x: int,
    d_y: int,
    delta: float,
    method: Method = "pld",
    sigma_y: float | None = None,
    sample_rate: float | None = None,
    label_form: LabelForm = "distribution",
) -> float:
    """ε (unitless; ``inf`` when no finite bound exists) of a DPMix release under replace-one.

    T released samples, each the mean of ℓ distinct records plus N(0, σ_x²) on the features and N(0, σ_y²) on the label.
    ``method``: ``pld`` (tightest), ``dp_accounting`` (RDP; Wang, Balle, Kasiviswanathan 2019) or ``closed_form`` (Lee
    et al.'s Thm. 1). ``sample_rate`` (closed form only) replays a source's q (one used 1/n, understating ε).

    Args:
        sigma: σ_x, noise std on the features (> 0; features in [0, 1]).
        mixture_degree: ℓ, records averaged per sample (1 ≤ ℓ ≤ n).
        num_samples: T, samples released (≥ 1).
        num_records: n, size of the private dataset.
        d_x: feature dimension.
        d_y: label dimension.
        delta: δ in (0, 1).
        method: the accountant.
        sigma_y: σ_y; defaults to ``sigma``.
        sample_rate: q of the closed form, default ℓ/n.
        label_form: see :func:`label_sensitivity`.

    Raises:
        ValueError: unknown method or label form, or an argument outside its range.
    """
    sigma_y = sigma if sigma_y is None else sigma_y
    _check(sigma, sigma_y, mixture_degree, num_samples, num_records, d_x, d_y, delta)
    delta_sq = d_x / sigma**2 + label_sensitivity(label_form, d_y) ** 2 / sigma_y**2
    if method not in ACCOUNTANT_NAMES:
        raise ValueError(f"method must be one of {sorted(ACCOUNTANT_NAMES)}, got {method!r}")
    require(sample_rate is None or method == "closed_form", "sample_rate is a closed-form option only")
    q, t, c = mixture_degree / num_records, int(num_samples), delta_sq / mixture_degree**2
    if method == "closed_form":
        q = q if sample_rate is None else sample_rate
        require(0 < q <= 1, f"sample_rate must be in (0, 1], got {q!r}")
        return closed_form_epsilon(c, q, t, delta)
    if method == "dp_accounting":
        return _rdp_epsilon(1 / math.sqrt(c), mixture_degree, t, num_records, delta)
    return dpmix_pld_epsilon(c, q, t, delta)


@functools.lru_cache(maxsize=1024)
def dpmix_pld_epsilon(c: float, q: float, num_samples: int, delta: float) -> float:
    """ε at ``delta`` (replace-one; ``inf`` when c > ``PLD_MAX_C``) of :func:`dpmix_pld`, memoised."""
    composed = dpmix_pld(c, q, num_samples)
    return float("inf") if composed is None else float(composed.get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=256)
def dpmix_pld(c: float, q: float, num_samples: int) -> PrivacyLossDistribution | None:
    """dp_accounting's PLD of T DPMix releases (c = Δ²/ℓ², q = ℓ/n), memoised; None when c > ``PLD_MAX_C`` (ε = ∞).

    The T-fold composition of the dominating pair (module docstring), pessimistic, grid ``PLD_INTERVAL·max(1, c)``.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld

    if c > PLD_MAX_C:
        return None
    one = pld.from_gaussian_mechanism(1 / math.sqrt(c), sensitivity=1.0, sampling_prob=q,
                                      value_discretization_interval=PLD_INTERVAL * max(1.0, c))
    return one.self_compose(num_samples)


def _rdp_epsilon(noise_multiplier: float, ell: int, t: int, n: int, delta: float) -> float:
    """Google ``dp_accounting``'s RDP ε of T self-composed draws of ℓ of n records without replacement.

    Each a Gaussian mechanism with noise multiplier ℓ/Δ (WBK19 Thm. 27, REPLACE_ONE; its default orders plus 64..120).
    """
    from dp_accounting import dp_event, rdp
    from dp_accounting.privacy_accountant import NeighboringRelation

    event = dp_event.SampledWithoutReplacementDpEvent(source_dataset_size=n, sample_size=ell,
                                                      event=dp_event.GaussianDpEvent(noise_multiplier))
    accountant = rdp.RdpAccountant(list(rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS) + list(range(64, 128, 8)),
                                   neighboring_relation=NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_event.SelfComposedDpEvent(event, t))
    eps = float(accountant.get_epsilon(delta))
    return eps if math.isfinite(eps) else float("inf")


def dpmix_profile(*, sigma: float, delta: float, **kw: Any) -> tuple[tuple[float, float], ...]:
    """DPMix's ``privacy_profile`` by :func:`dpmix_epsilon` (``kw``: its other arguments; replace-one)."""
    return privacy_profile(lambda d: dpmix_epsilon(sigma=sigma, delta=d, **kw), delta)


@functools.lru_cache(maxsize=256)
def dpmix_sigma(
    *,
    target_epsilon: float,
    mixture_degree: int,
    num_samples: int,
    num_records: int,
    d_x: int,
    d_y: int,
    delta: float,
    method: Method = "pld",
    sigma_max: float = 1e4,
    tol: float = 1e-3,
    sample_rate: float | None = None,
    sigma_y_scale: float = 1.0,
    label_form: LabelForm = "distribution",
) -> float:
    """Smallest σ = σ_x (σ_y = ``sigma_y_scale``·σ_x) whose DPMix ε is ≤ ``target_epsilon``, memoised. ε falls in σ.

    A bracket down from the closed form's σ, then Brent's method on log ε to relative ``tol``; the σ returned (feature
    units) always meets the target. Other arguments as in :func:`dpmix_epsilon`.

    Args:
        target_epsilon: ε to reach (> 0).
        mixture_degree: ℓ.
        num_samples: T.
        num_records: n.
        d_x: feature dimension.
        d_y: label dimension.
        delta: δ in (0, 1).
        method: the accountant.
        sample_rate: q of the closed form.
        label_form: see :func:`label_sensitivity`.
        sigma_y_scale: σ_y / σ_x (> 0; 1: the source's equal noise).
        sigma_max: largest σ considered.
        tol: relative tolerance on σ.

    Raises:
        ValueError: invalid arguments, or even ``sigma_max`` does not reach the target.
    """
    require(target_epsilon > 0, f"target_epsilon must be > 0, got {target_epsilon!r}")
    require(sigma_max > 0 and tol > 0, f"sigma_max and tol must be > 0, got {sigma_max!r}, {tol!r}")
    require(math.isfinite(sigma_y_scale) and sigma_y_scale > 0, f"sigma_y_scale must be > 0, got {sigma_y_scale!r}")
    kw: dict[str, Any] = dict(mixture_degree=mixture_degree, num_samples=num_samples, num_records=num_records, d_x=d_x,
                              d_y=d_y, delta=delta, method=method, sample_rate=sample_rate, label_form=label_form)

    def eps(s: float) -> float:
        return dpmix_epsilon(sigma=s, sigma_y=s * sigma_y_scale, **kw)

    hi = sigma_max
    if method != "closed_form":  # the closed form's σ (20 ms an ε) meets the target under a tighter accountant too
        hi = min(sigma_max, dpmix_sigma(**{**kw, "method": "closed_form", "sample_rate": None},
                                        target_epsilon=target_epsilon, sigma_max=sigma_max, tol=tol,
                                        sigma_y_scale=sigma_y_scale))
    reached = eps(hi)
    if reached > target_epsilon:
        raise ValueError(
            f"target_epsilon={target_epsilon!r} is not reachable: sigma_max={sigma_max!r} gives ε={reached:.6g}"
        )
    lo = hi / 4
    while eps(lo) <= target_epsilon:
        hi, lo = lo, lo / 4
        if lo < 1e-12:
            return hi
    return solve_log(eps, target_epsilon, lo, hi, tol)
