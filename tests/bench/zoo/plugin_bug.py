"""A researcher's own bug, as one module (``privbench zoo run --plugins tests.bench.zoo.plugin_bug``): DP-SGD that draws
its noise at 0.9·σ in every parameter tensor while its accountant keeps σ (a σ read from a stale config)."""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``noisy_step`` draws 0.9·σ; every caller, and the accountant, keeps σ."""
    import mechanisms.dpsgd.fast as fast

    original = fast.noisy_step

    def noisy_step(optimizer, sums, *, noise_multiplier, **kwargs):  # type: ignore[no-untyped-def]
        return original(optimizer, sums, noise_multiplier=0.9 * noise_multiplier, **kwargs)

    fast.noisy_step = noisy_step


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The ε of 0.9·σ at the run's q and T under the run's relation (dp_accounting's PLD)."""
    from attacks.conformance.hypothesis_tests import poisson_gaussian_epsilon

    return poisson_gaussian_epsilon(noise_multiplier=0.9 * params["noise_multiplier"],
                                    sample_rate=params["sample_rate"], steps=int(params["steps"]),
                                    delta=params["delta"], relation=params.get("relation", "replace-one"))


BUG = register_bug(Bug(
    name="test-stale-sigma", mechanism="dpsgd", summary="the noise is drawn at 0.9·σ (a stale σ)",
    source="planted (a test's own plug-in)", documented=False,
    changes="mechanisms/dpsgd/fast.py noisy_step: N(0, (0.9σC)²)", claims="ε of σ at the run's q and T",
    apply=apply, true_epsilon=true_epsilon, true_epsilon_text="ε(0.9σ, q, T)"))
