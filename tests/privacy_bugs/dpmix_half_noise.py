"""DPMix with its noise halved: mixtures get σ/2 while the accountant certifies σ."""

import mechanisms.dpmix.mechanism as dpmix

_original = dpmix.mix_release


def mix_release(x, y_onehot, *, sigma, sigma_y=None, **kwargs):
    return _original(x, y_onehot, sigma=sigma / 2, sigma_y=None if sigma_y is None else sigma_y / 2, **kwargs)


dpmix.mix_release = mix_release
