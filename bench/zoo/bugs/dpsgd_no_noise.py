"""DP-SGD with its noise removed (planted: ``tests/privacy_bugs/dpsgd_no_noise.py``): ``noisy_step`` adds nothing to
the clipped sum while the accountant certifies σ; a clipped but noiseless sum has no finite ε."""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import scale_dpsgd_noise, unbounded


def apply() -> None:
    """``noisy_step`` draws σ = 0."""
    scale_dpsgd_noise(0.0)


BUG = register_bug(Bug(
    name="dpsgd-no-noise", mechanism="dpsgd", summary="no noise at all on the clipped gradient sum",
    source="planted (tests/privacy_bugs/dpsgd_no_noise.py)", documented=False,
    changes="mechanisms/dpsgd/fast.py noisy_step: σ = 0", claims="ε of σ at the run's q and T", apply=apply,
    true_epsilon=unbounded, true_epsilon_text="unbounded"))
