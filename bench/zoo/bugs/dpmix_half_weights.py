"""DPMix whose release is not the mean of the subset it records (planted; issue 45's held-back bug).

Each mixture averages the first half of its recorded ℓ-subset, every one of those records at weight 2/ℓ and the other
half at 0, while ``mix_release`` returns (and the accountant assumes) the whole subset at 1/ℓ. The release's residual
against the recorded mean is more noise than certified, which the one-sided noise tests pass; the mean weight is still
1/ℓ; the records that enter count twice. Caught by the spread of the recorded records' weights (``weight_spread_test``).
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``mix_release`` (as the mechanism calls it) shifts each release by mean(first half) − mean(subset)."""
    import mechanisms.dpmix.mechanism as dpmix
    import mechanisms.dpmix.mixing as mixing

    original = dpmix.mix_release  # type: ignore[attr-defined]

    def mix_release(x, y_onehot, *, sigma, sigma_y=None, **kwargs):  # type: ignore[no-untyped-def]
        rx, ry, idx = original(x, y_onehot, sigma=sigma, sigma_y=sigma_y, **kwargs)
        blocks = [x.float(), y_onehot.float()]
        half = idx[:, : max(1, idx.shape[1] // 2)]
        shift = mixing.mean_of_rows(blocks, half) - mixing.mean_of_rows(blocks, idx)  # mean of half − mean of all
        return rx + shift[:, : x.shape[1]], ry + shift[:, x.shape[1]:], idx

    dpmix.mix_release = mix_release  # type: ignore[attr-defined]


BUG = register_bug(Bug(
    name="dpmix-half-weights", mechanism="dpmix",
    summary="each release averages half its recorded subset, at twice the weight",
    source="planted (issue 45: a release that is not the mean of its recorded subset)", documented=False,
    changes="mechanisms/dpmix/mechanism.py mix_release: mean of the first ℓ/2 recorded records, each at 2/ℓ",
    claims="DPMix's ε at σ, σ_y, ℓ, T (every record at 1/ℓ)", apply=apply, true_epsilon=None,
    true_epsilon_text="unknown"))
