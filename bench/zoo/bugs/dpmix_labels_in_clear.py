"""DPMix releasing its mixtures' label means without noise.

(planted: the detection-power table's label bug of DPMix, ``scripts/detection_power.py --bugs labels``.) σ_y = 0 while
the accountant certifies the label channel's noise. A record's label moves every noiseless label mean it is mixed into:
no finite ε.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``mix_release`` (as the mechanism calls it) draws σ_y = 0."""
    import mechanisms.dpmix.mechanism as dpmix

    original = dpmix.mix_release  # type: ignore[attr-defined]

    def mix_release(x, y_onehot, *, sigma, sigma_y=None, **kwargs):  # type: ignore[no-untyped-def]
        return original(x, y_onehot, sigma=sigma, sigma_y=0.0, **kwargs)

    dpmix.mix_release = mix_release  # type: ignore[attr-defined]


BUG = register_bug(Bug(
    name="dpmix-labels-in-clear", mechanism="dpmix", summary="the mixtures' label means carry no noise",
    source="planted (the detection-power table's labels bug)", documented=False,
    changes="mechanisms/dpmix/mechanism.py mix_release: σ_y = 0", claims="DPMix's ε at σ, σ_y, ℓ, T", apply=apply,
    true_epsilon=unbounded, true_epsilon_text="unbounded"))
