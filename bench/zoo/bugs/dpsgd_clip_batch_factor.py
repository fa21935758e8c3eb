"""DP-SGD whose sensitivity is off by a factor of the batch size.

Source: Tramèr, Terzis, Steinke, Song, Jagielski, Carlini, "Debugging Differential Privacy: A Case Study for
Privacy Auditing" (2022, arXiv 2202.12219): the open-source Backpropagation Clipping implementation claimed
(0.21, 1e-5)-DP; their audit showed ε > 2.79, and the cause was each layer's gradient sensitivity computed a factor
of the batch size too small, so too little noise was added. privbench's DP-SGD has no backpropagation clipping: the
closest equivalent is a clip bound B·C (B the batch's record count) under noise calibrated for C, i.e. a
sensitivity B times the one the accountant uses (unlike ``dpsgd-noise-on-average``, the noise itself is right).
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import dpsgd_epsilon


def apply() -> None:
    """``clip_factors`` (clippers and gradient canaries) clips at B·C, B = the number of records clipped together."""
    import torch

    import mechanisms.dpsgd.canaries as canaries
    import mechanisms.dpsgd.clipping as clipping

    original = clipping.clip_factors

    def clip_factors(sq_norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
        return original(sq_norms, max_grad_norm * max(len(sq_norms), 1))

    clipping.clip_factors = clip_factors
    canaries.clip_factors = clip_factors  # type: ignore[attr-defined]


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """About ε(σ/B, q, T) at the expected batch B (a batch's size varies); None where too costly to compute."""
    return dpsgd_epsilon(params, sigma=float(params["noise_multiplier"]) / int(params["expected_batch_size"]))


BUG = register_bug(Bug(
    name="dpsgd-clip-batch-factor", mechanism="dpsgd",
    summary="per-sample gradients clipped at B·C while the noise is calibrated for C",
    source="Tramèr et al. 2022, arXiv 2202.12219 (Backpropagation Clipping: claimed ε = 0.21, audited ε > 2.79)",
    documented=True,
    changes="mechanisms/dpsgd/clipping.py clip_factors (and canaries.clip_factors): min(1, B·C/‖g‖)",
    claims="ε of σ at q and T for sensitivity C", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="≈ ε(σ/B, q, T)"))
