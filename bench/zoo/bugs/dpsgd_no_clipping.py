"""DP-SGD with clipping removed (planted).

Every per-sample gradient keeps its norm while the noise σC and the accountant assume norm ≤ C, so one record moves the
sum without bound.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``clip_factors`` returns 1 for every record (in the clippers and in the gradient canaries)."""
    import torch

    import mechanisms.dpsgd.canaries as canaries
    import mechanisms.dpsgd.clipping as clipping

    def clip_factors(sq_norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
        return torch.ones_like(sq_norms)

    clipping.clip_factors = clip_factors
    canaries.clip_factors = clip_factors  # type: ignore[attr-defined]


BUG = register_bug(Bug(
    name="dpsgd-no-clipping", mechanism="dpsgd", summary="per-sample gradients are not clipped",
    source="planted (clipping removed)", documented=False,
    changes="mechanisms/dpsgd/clipping.py clip_factors (and canaries.clip_factors): 1 instead of min(1, C/‖g‖)",
    claims="ε of σ at the run's q and T, sensitivity C", apply=apply, true_epsilon=unbounded,
    true_epsilon_text="unbounded"))
