"""Local Gaussian noise at 0.8·σ in one region of the image (the top-left cell of a 4 × 4 grid of its pixels) while
the accountant certifies σ everywhere: the canaries' scores barely move (a sixteenth of their pixels), the
per-region noise test of the audit run's conformance catches it."""

import torch

import mechanisms.local.mechanism as local

_original = local.perturb


def perturb(x, *, sigma, generator):
    out = _original(x, sigma=sigma, generator=generator)
    unit = local.L2Normalize()(x)
    h, w = x.shape[-2], x.shape[-1]
    factor = torch.ones(x.shape[1:], dtype=out.dtype)
    factor[..., : max(1, h // 4), : max(1, w // 4)] = 0.8
    return unit + (out - unit) * factor


local.perturb = perturb
