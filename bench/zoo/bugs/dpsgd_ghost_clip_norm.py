"""DP-SGD whose fast clipping path ignores ``max_grad_norm`` and clips at 1.

Source: Opacus PR #664 ("Fixed the clipping operation in fast gradient clipping with Privacy Engine", commit
f2a591ae): before it, ``PrivacyEngine._prepare_model`` built the ghost-clipping ``GradSampleModuleFastGradientClipping``
without the user's ``max_grad_norm``, so per-sample gradients were clipped at that class's default 1 while the
optimizer drew noise σ·C for the user's C. privbench's DP-SGD does not use Opacus' ghost clipping: the closest
equivalent is its own clip factor, which this bug makes clip at 1 whatever C is. With C < 1 (the default profile's
C = 0.1) the sensitivity is 1 against noise σC: the true noise multiplier is σ·C; with C ≥ 1 it is at least σ.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import dpsgd_epsilon

DEFAULT_NORM = 1.0
"""``GradSampleModuleFastGradientClipping``'s default ``max_grad_norm`` before PR #664."""


def apply() -> None:
    """``clip_factors`` (clippers and gradient canaries) clips at 1 instead of C."""
    import torch

    import mechanisms.dpsgd.canaries as canaries
    import mechanisms.dpsgd.clipping as clipping

    original = clipping.clip_factors

    def clip_factors(sq_norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
        return original(sq_norms, DEFAULT_NORM)

    clipping.clip_factors = clip_factors
    canaries.clip_factors = clip_factors  # type: ignore[attr-defined]


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε(σ·C/1, q, T): noise σC against sensitivity 1."""
    sigma = float(params["noise_multiplier"]) * float(params["max_grad_norm"]) / DEFAULT_NORM
    return dpsgd_epsilon(params, sigma=sigma)


BUG = register_bug(Bug(
    name="dpsgd-ghost-clip-norm", mechanism="dpsgd",
    summary="the fast clipping path clips at 1, not at max_grad_norm C, while the noise is σC",
    source="Opacus PR #664 (commit f2a591ae)", documented=True,
    changes="mechanisms/dpsgd/clipping.py clip_factors (and canaries.clip_factors): min(1, 1/‖g‖) instead of "
            "min(1, C/‖g‖)", claims="ε of σ at q and T for sensitivity C", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ·C, q, T) (worse than certified only for C < 1)"))
