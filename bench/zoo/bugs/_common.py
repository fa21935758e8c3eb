"""Shared pieces of the zoo's bugs (not a bug: the catalogue skips modules whose name starts with ``_``)."""

from __future__ import annotations

import math
from typing import Any

from attacks.conformance.accountants.subsampled_gaussian import PLD_SMALLEST_SIGMA as SMALLEST_SIGMA

# Below SMALLEST_SIGMA dp_accounting's PLD of many steps takes minutes and gigabytes: a bug's true ε is then left
# unknown (None) rather than computed.


def scale_dpsgd_noise(factor: float, *, minus: float = 0.0) -> None:
    """Make DP-SGD's ``noisy_step`` draw (factor·σ − minus)·C while every caller, and the accountant, keeps σ."""
    import mechanisms.dpsgd.fast as fast

    original = fast.noisy_step

    def noisy_step(optimizer, sums, *, noise_multiplier, **kwargs):  # type: ignore[no-untyped-def]
        return original(optimizer, sums, noise_multiplier=max(noise_multiplier * factor - minus, 0.0), **kwargs)

    fast.noisy_step = noisy_step


def dpsgd_epsilon(params: dict[str, Any], *, sigma: float | None = None, sample_rate: float | None = None,
                  steps: int | None = None, relation: str | None = None) -> float | None:
    """ε at the run's δ of the Poisson-subsampled Gaussian with the run's recorded σ, q and steps.

    Each replaced where given (``attacks.conformance.accountants.subsampled_gaussian.poisson_gaussian_epsilon``,
    dp_accounting PLD); ∞ for σ = 0; None for 0 < σ < ``SMALLEST_SIGMA`` (too costly). ``relation``: the run's
    (``params['relation']``, else replace-one).
    """
    from attacks.conformance.accountants.subsampled_gaussian import poisson_gaussian_epsilon

    s = float(params["noise_multiplier"]) if sigma is None else sigma
    q = float(params["sample_rate"]) if sample_rate is None else sample_rate
    if s <= 0:
        return math.inf
    if s < SMALLEST_SIGMA:
        return None
    return poisson_gaussian_epsilon(noise_multiplier=s,
                                    sample_rate=min(q, 1.0), steps=int(params["steps"] if steps is None else steps),
                                    delta=float(params["delta"]),
                                    relation=relation or str(params.get("relation", "replace-one")))


def unbounded(params: dict[str, Any], certified: float) -> float:
    """The true ε of a bug that leaves some record's influence unnoised: ∞."""
    return math.inf


def non_private_step(model: Any, x: Any, y: Any, *, optimizer: str = "sgd", lr: float = 0.1) -> None:
    """One ordinary optimizer step (no clipping, no noise) on the cross-entropy of every record ``x``.

    ``y`` (the members), over all of ``model``'s parameters: the "fix-up" step a user adds outside the private loop.
    Opacus' per-sample state is dropped before and after, as ``DPOptimizer.zero_grad`` does, so the loop goes on.
    """
    import torch
    import torch.nn.functional as F

    params = list(model.parameters())

    def clear() -> None:
        for p in params:
            p.grad, p.grad_sample = None, None

    clear()
    opt = torch.optim.Adam(params, lr=lr) if optimizer == "adam" else torch.optim.SGD(params, lr=lr)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    clear()
