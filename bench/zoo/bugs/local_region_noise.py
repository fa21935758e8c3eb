"""Local Gaussian noise at 0.8·σ in one region of the image while the accountant certifies σ everywhere.

(the top-left cell of a 4 × 4 grid of its pixels; planted, issue 38.) The canaries' scores barely move (a sixteenth of
their pixels); the per-region noise test of the audit run's conformance catches it. A record whose unit norm lies in
that region meets only 0.8·σ.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._release import local_epsilon

FACTOR = 0.8


def apply() -> None:
    """``perturb`` draws 0.8·σ in the top-left (h/4 × w/4) pixels, σ elsewhere."""
    import torch

    import mechanisms.local.mechanism as local

    original = local.perturb

    def perturb(x, *, sigma, generator):  # type: ignore[no-untyped-def]
        out = original(x, sigma=sigma, generator=generator)
        unit = local.L2Normalize()(x)
        h, w = x.shape[-2], x.shape[-1]
        factor = torch.ones(x.shape[1:], dtype=out.dtype)
        factor[..., : max(1, h // 4), : max(1, w // 4)] = FACTOR
        return unit + (out - unit) * factor

    local.perturb = perturb


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The record's ε with image noise 0.8σ (the worst record: its unit norm in the region) and the label channel."""
    return local_epsilon(params, sigma=FACTOR * float(params["sigma"]))


BUG = register_bug(Bug(
    name="local-region-noise", mechanism="local-gaussian", summary="one region of the image gets 0.8 × the noise",
    source="planted (issue 38: 0.8σ in the top-left cell of a 4 × 4 grid)", documented=False,
    changes="mechanisms/local/mechanism.py perturb: N(0, (0.8σ)²) in the top-left h/4 × w/4 pixels",
    claims="ε of σ at sensitivity 2 (+ label)", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(0.8σ) ∘ label channel"))
