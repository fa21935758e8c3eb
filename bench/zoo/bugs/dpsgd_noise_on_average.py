"""DP-SGD adding its noise to the average gradient while the accountant assumes the sum.

Source: TensorFlow Privacy issue #153 (the amplification-by-iteration tutorial added noise of scale
``noise_multiplier`` to the *average* gradient, ``num_microbatches=1``, rather than to the sum), and the same error in
jax_privacy's ``jax_api_example`` (issue #383, PR #395: noise calibrated to the sum's sensitivity added to
``grads / batch_size``). Here ``noisy_step`` draws N(0, (σC/B)²) on the clipped sum, B the expected batch size:
noise σC on the mean, a B-fold smaller noise multiplier than the accountant's σ.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import dpsgd_epsilon


def apply() -> None:
    """``noisy_step`` draws σ/B."""
    import mechanisms.dpsgd.fast as fast

    original = fast.noisy_step

    def noisy_step(optimizer, sums, *, noise_multiplier, expected_batch_size, **kwargs):  # type: ignore[no-untyped-def]
        return original(optimizer, sums, noise_multiplier=noise_multiplier / expected_batch_size,
                        expected_batch_size=expected_batch_size, **kwargs)

    fast.noisy_step = noisy_step


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε(σ/B, q, T); None where σ/B is too small for the PLD accountant to finish (then far above certified)."""
    return dpsgd_epsilon(params, sigma=float(params["noise_multiplier"]) / int(params["expected_batch_size"]))


BUG = register_bug(Bug(
    name="dpsgd-noise-on-average", mechanism="dpsgd",
    summary="noise σC is added to the average gradient, not to the sum: σ/B effective",
    source="TensorFlow Privacy issue #153; jax_privacy issue #383 / PR #395", documented=True,
    changes="mechanisms/dpsgd/fast.py noisy_step: N(0, (σC/B)²) on the clipped sum",
    claims="ε of σ at the run's q and T", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ/B, q, T)"))
