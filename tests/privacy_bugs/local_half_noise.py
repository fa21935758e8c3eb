"""Local Gaussian noise halved: each record gets σ/2 while the accountant certifies σ."""

import mechanisms.local.mechanism as local

_original = local.perturb


def perturb(x, *, sigma, generator):
    return _original(x, sigma=sigma / 2, generator=generator)


local.perturb = perturb
