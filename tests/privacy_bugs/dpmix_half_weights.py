"""DPMix whose release is not the mean of the subset it records (issue 45's held-back bug): each mixture averages the
first half of its recorded ℓ-subset, every one of those records at weight 2/ℓ and the other half at 0, while
``mix_release`` returns (and the accountant assumes) the whole subset at 1/ℓ. The release's residual against the
recorded mean is more noise than certified, which the one-sided noise tests passed; the mean weight is still 1/ℓ; the
records that enter count twice. Caught by the spread of the recorded records' weights (``weight_spread_test``)."""

import mechanisms.dpmix.mechanism as dpmix
import mechanisms.dpmix.mixing as mixing

_original = dpmix.mix_release


def mix_release(x, y_onehot, *, sigma, sigma_y=None, **kwargs):
    rx, ry, idx = _original(x, y_onehot, sigma=sigma, sigma_y=sigma_y, **kwargs)
    blocks = [x.float(), y_onehot.float()]
    half = idx[:, : max(1, idx.shape[1] // 2)]
    shift = mixing.mean_of_rows(blocks, half) - mixing.mean_of_rows(blocks, idx)  # mean of half − mean of all
    return rx + shift[:, : x.shape[1]], ry + shift[:, x.shape[1]:], idx


dpmix.mix_release = mix_release
