"""Shared pieces of the bugs of the releases (local Gaussian noise, DPMix)."""

from __future__ import annotations

from typing import Any

NUM_CLASSES = 10
"""k for randomized response's label channel: the runs record ε_label but not k; every dataset of the suite (MNIST,
Fashion-MNIST, CIFAR-10, the synthetic ``ci`` data) has 10 classes. ``params['num_classes']`` overrides it."""


def local_epsilon(params: dict[str, Any], *, sigma: float) -> float:
    """The local record's ε at the run's δ with image noise ``sigma``.

    The analytic Gaussian at sensitivity 2, composed with randomized response at the recorded ε_label where labels are
    randomized (the mechanism's own accountant).
    """
    from mechanisms.accounting.gaussian import gaussian_epsilon, local_record_epsilon
    from mechanisms.local.mechanism import SENSITIVITY

    label_epsilon = params.get("label_epsilon")
    if label_epsilon is None:
        return gaussian_epsilon(sigma=sigma, delta=float(params["delta"]), sensitivity=SENSITIVITY)
    return local_record_epsilon(sigma=sigma, delta=float(params["delta"]), label_epsilon=float(label_epsilon),
                                num_classes=int(params.get("num_classes", NUM_CLASSES)))


def dpmix_epsilon(params: dict[str, Any], *, factor: float) -> float | None:
    """DPMix's PLD ε at the run's δ with both noises scaled by ``factor``.

    None unless the run records ``d_x`` (its feature count: DPMix's sensitivity depends on it and its params do not hold
    it today).
    """
    from mechanisms.accounting.dpmix import dpmix_epsilon as epsilon

    if "d_x" not in params:
        return None
    d_x = int(params["d_x"])
    sigma = float(params["sigma"])
    return epsilon(sigma=factor * sigma, sigma_y=factor * float(params.get("sigma_y", sigma)),
                   mixture_degree=int(params["mixture_degree"]), num_samples=int(params["num_samples"]),
                   num_records=int(params["num_records"]), d_x=d_x, d_y=int(params.get("num_classes", NUM_CLASSES)),
                   delta=float(params["delta"]), method="pld", label_form="distribution")


def scale_dpmix_noise(factor: float) -> None:
    """Patch ``mix_release`` to draw ``factor`` times the noise the accountant certifies.

    Patch ``mix_release`` as DPMix's mechanism calls it to draw ``factor`` × σ and ``factor`` × σ_y while the
    accountant still certifies σ and σ_y (the planted noise bugs of DPMix).
    """
    import mechanisms.dpmix.mechanism as dpmix

    original = dpmix.mix_release  # type: ignore[attr-defined]

    def mix_release(x, y_onehot, *, sigma, sigma_y=None, **kwargs):  # type: ignore[no-untyped-def]
        return original(x, y_onehot, sigma=factor * sigma, sigma_y=None if sigma_y is None else factor * sigma_y,
                        **kwargs)

    dpmix.mix_release = mix_release  # type: ignore[attr-defined]
