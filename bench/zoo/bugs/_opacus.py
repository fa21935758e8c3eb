"""Shared pieces of the bugs of the example Opacus loop (``examples/opacus_plugin.py``, on PYTHONPATH in a zoo run)."""

from __future__ import annotations

from typing import Any


def force_loop_settings(**settings: Any) -> None:
    """Make every call of ``opacus_plugin.train_with_opacus`` run with ``settings`` in place of the adapter's own.

    (the adapter's ``fit`` calls it by that name.)
    """
    import opacus_plugin  # type: ignore[import-not-found]

    original = opacus_plugin.train_with_opacus

    def train_with_opacus(*args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        return original(*args, **{**kwargs, **settings})

    opacus_plugin.train_with_opacus = train_with_opacus


def opacus_epsilon(params: dict[str, Any], *, sigma: float | None = None, sample_rate: float | None = None
                   ) -> float | None:
    """ε (add/remove, the relation the example certifies) of the loop's recorded σ, q and steps.

    Each replaced where given.
    """
    from bench.zoo.bugs._common import dpsgd_epsilon

    return dpsgd_epsilon(params, sigma=sigma, sample_rate=sample_rate, relation="add-remove")

