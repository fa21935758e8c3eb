"""Shared pieces of the accounting bugs (issue 45).

Each patches the mechanism's own accountant (``mechanisms.accounting``, as the mechanism calls it), and the conformance
tests hold it to what the mechanism declares through their own accountants (``attacks.analysis``); the true ε is
computed by those accountants from the run's recorded parameters, so no patch can reach it.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.bugs._release import NUM_CLASSES


def patch_dpsgd_pld(**change: Any) -> None:
    """Make the mechanism's PLD accountant of DP-SGD compose ``change``'s values in place of its arguments.

    (``_dpsgd_pld``: its calibration, certified ε and profile under replace-one.) ``rate`` (a factor on q), ``steps`` (a
    factor on T) or ``relation`` (the relation it accounts under).
    """
    import mechanisms.accounting.gaussian as gaussian

    original = gaussian._dpsgd_pld

    def _dpsgd_pld(noise_multiplier, sample_rate, steps, relation):  # type: ignore[no-untyped-def]
        return original(noise_multiplier, sample_rate * change.get("rate", 1.0),
                        max(1, int(steps * change.get("steps", 1.0))), change.get("relation", relation))

    gaussian._dpsgd_pld = _dpsgd_pld


def true_dpsgd(params: dict[str, Any], certified: float) -> float | None:
    """ε of the run's recorded σ, q, T under its relation by the conformance code's accountant."""
    from bench.zoo.bugs._common import dpsgd_epsilon

    return dpsgd_epsilon(params)


def true_dpmix(params: dict[str, Any], certified: float) -> float | None:
    """DPMix's ε of the run's recorded σ_x, σ_y, ℓ, T.

    n and d_x by the conformance code's own accountant (``attacks.conformance.accountants.mixing_pair``); None unless
    the run records d_x.
    """
    from attacks.conformance.accountants.mixing_pair import mixing_epsilon, mixing_shift

    if "d_x" not in params:
        return None
    sigma, ell = float(params["sigma"]), int(params["mixture_degree"])
    c = mixing_shift(sigma_x=sigma, sigma_y=float(params.get("sigma_y", sigma)), d_x=int(params["d_x"]),
                     weight=1.0 / ell)
    return mixing_epsilon(shift_sq=c, rate=ell / int(params["num_records"]), releases=int(params["num_samples"]),
                          delta=float(params["delta"]))


def true_local(params: dict[str, Any], *, label_factor: float = 1.0) -> float:
    """The local record's ε of the recorded σ at sensitivity 2.

    Composed with randomized response at ``label_factor``·ε_label, by the conformance code's own exact accountant
    (``attacks.conformance.accountants.analytic_gaussian``).
    """
    from attacks.conformance.accountants.analytic_gaussian import local_epsilon

    label = params.get("label_epsilon")
    return local_epsilon(sigma=float(params["sigma"]), sensitivity=2.0, delta=float(params["delta"]),
                         label_epsilon=None if label is None else label_factor * float(label),
                         num_classes=int(params.get("num_classes", NUM_CLASSES)))
