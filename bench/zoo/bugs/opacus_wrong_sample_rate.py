"""The example Opacus loop whose accountant is told a sample rate that is not its DataLoader's.

Planted; issue 38: "a user's own Opacus loop whose accountant is told a sample rate that is not the one its DataLoader
uses reports ε = 1.42 ... PRV gives 3.01". The Poisson loader draws each record at 2q for the same ⌊1/q⌋ steps per
epoch, while ``make_private_with_epsilon`` calibrates σ and its accountant steps at q = 1/len(loader).
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug

FACTOR = 2.0


def apply() -> None:
    """``DPDataLoader.from_data_loader``: the sampler's rate doubled, its number of steps kept."""
    from opacus.data_loader import DPDataLoader

    original = DPDataLoader.from_data_loader.__func__

    def from_data_loader(cls, data_loader, *args, **kwargs):  # type: ignore[no-untyped-def]
        loader = original(cls, data_loader, *args, **kwargs)
        loader.batch_sampler.sample_rate = min(FACTOR * loader.batch_sampler.sample_rate, 1.0)
        return loader

    DPDataLoader.from_data_loader = classmethod(from_data_loader)


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε (add/remove) of σ at rate 2q for the recorded steps."""
    from bench.zoo.bugs._opacus import opacus_epsilon

    return opacus_epsilon(params, sample_rate=FACTOR * float(params["sample_rate"]))


BUG = register_bug(Bug(
    name="opacus-wrong-sample-rate", mechanism="opacus-example",
    summary="the Poisson loader samples at 2q while the accountant is told q",
    source="planted (issue 38: an Opacus loop's accountant told the wrong sample rate)", documented=False,
    changes="opacus.data_loader.DPDataLoader.from_data_loader: the sampler's sample_rate × 2, steps kept",
    claims="Opacus PRV ε at σ, q, T", apply=apply, true_epsilon=true_epsilon, true_epsilon_text="ε(σ, 2q, T)"))
