"""The example Opacus loop whose noise-multiplier search overshoots the target ε, while the target is reported.

Source: Opacus issue #346 ("The Sigma binary search is not conservative and can overshoot target_epsilon"): the
bisection of ``get_noise_multiplier`` stopped when its interval was narrower than 0.01 and returned a σ anywhere within
0.005 of the σ that meets the target, so up to 0.005 below it (the issue's example over-spent ε by 0.5); PR #348 made
it return a σ whose ε is below the target. The mutant restores the non-conservative search at its worst case (σ 0.005
below the conservative σ) and, as a user trusting ``make_private_with_epsilon``'s docstring did, the loop reports the
target ε instead of asking the accountant.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug

OVERSHOOT = 0.005
"""Half of the pre-PR #348 search's σ precision (0.01)."""


def apply() -> None:
    """``opacus.privacy_engine.get_noise_multiplier`` returns σ − 0.005; ``train_with_opacus`` returns the target ε."""
    import opacus.privacy_engine as engine
    import opacus_plugin  # type: ignore[import-not-found]

    search = engine.get_noise_multiplier

    def get_noise_multiplier(**kwargs: Any) -> float:
        return max(float(search(**kwargs)) - OVERSHOOT, 1e-3)

    engine.get_noise_multiplier = get_noise_multiplier
    loop = opacus_plugin.train_with_opacus

    def train_with_opacus(*args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        model, _, facts = loop(*args, **kwargs)
        return model, kwargs["epsilon"], facts

    opacus_plugin.train_with_opacus = train_with_opacus


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε (add/remove) of the σ the loop really used, at its q and steps."""
    from bench.zoo.bugs._opacus import opacus_epsilon

    return opacus_epsilon(params)


BUG = register_bug(Bug(
    name="opacus-sigma-overshoot", mechanism="opacus-example",
    summary="the σ search returns up to 0.005 below the σ of the target ε; the target is reported",
    source="Opacus issue #346, PR #348", documented=True,
    changes="opacus.privacy_engine.get_noise_multiplier: σ − 0.005; examples/opacus_plugin.py train_with_opacus: "
            "returns the target ε", claims="the target ε", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ used, q, T) (add/remove): slightly above the target"))
