"""Conformance of a DP-SGD audit run to the mechanism its ε certifies.

Every parameter the accountant assumes, measured in the white-box canary run on the mechanism's own code path
(``mechanisms.dpsgd.observations``, gathered by ``CanaryTracker``) and tested against the certified value
(``attacks.conformance.hypothesis_tests``). The family, K + 10 tests for K trainable parameter tensors, fixed before
any data: the noise sd per tensor, its independence and shape, the clipped contributions against C, the sample rate,
the dispersion of participation, the steps, ε from the measured parameters (``dpsgd_measured_epsilon``), the
canaries' scores against their exact law, the parameter continuity, and the declared ε through the conformance code's
own accountant (``attacks.conformance.accountants.subsampled_gaussian``), last. The order and each test's law in full:
docs/design-notes.md, ``attacks.conformance.dpsgd``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attacks.conformance.accountants.subsampled_gaussian import PLD_SMALLEST_SIGMA, poisson_gaussian_epsilon
from attacks.conformance.hypothesis_tests import conformance_record
from attacks.conformance.hypothesis_tests.canary_scores import NAME as SCORE_TEST
from attacks.conformance.hypothesis_tests.canary_scores import canary_score_test
from attacks.conformance.hypothesis_tests.continuity import continuity_test
from attacks.conformance.hypothesis_tests.epsilon import declared_epsilon_test, dpsgd_measured_epsilon
from attacks.conformance.hypothesis_tests.noise import clip_test, independence_test, noise_test, shape_test
from attacks.conformance.hypothesis_tests.sampling import dispersion_test, rate_test, steps_test

LARGE_EPSILON = 1e9  # stored for an ε from measured parameters that is infinite (no noise at all)


def _skipped(name: str, quantity: str, reason: str) -> dict[str, Any]:
    """A test of the family that the run's observations cannot make: p = 1, with why (the family stays fixed)."""
    return conformance_record(name, quantity, certified=None, measured=None, n=0, p_value=1.0, alternative="less",
                              validity="exact", reason=reason)


def _noise_tests(obs: dict[str, Any], sigma: float) -> list[dict[str, Any]]:
    """One χ² test per parameter tensor (K of them, the architecture's), in the optimizer's order."""
    k = int(obs["tensors"])
    out = []
    for t, (ss, n) in enumerate(zip(obs["tensor_sum_squares"], obs["tensor_counts"], strict=True)):
        name = f"noise σ, tensor {t + 1} of {k}"
        out.append(noise_test(name, float(ss), int(n), sigma) if n > 0 else
                   _skipped(name, "noise sd", "no observed coordinate of the tensor is free of canaries"))
    return out


def _sample_tests(obs: dict[str, Any], sigma: float) -> list[dict[str, Any]]:
    """Independence and shape of the pooled standardised reference sample ``(T, k)``."""
    x = np.asarray(obs["sample"], np.float64).reshape(len(obs["sample"]), -1) / sigma
    ind = independence_test("noise independence (steps, coordinates)", x) if min(x.shape) >= 2 else \
        _skipped("noise independence (steps, coordinates)", "noise independence", f"sample {x.shape} too small")
    shape = shape_test("noise shape (Gaussian)", x) if x.size >= 20 else \
        _skipped("noise shape (Gaussian)", "noise shape", f"{x.size} observations, fewer than 20")
    return [ind, shape]


def _sampling_tests(obs: dict[str, Any], q: float, certified_steps: int) -> list[dict[str, Any]]:
    """The sample rate, the participation counts' dispersion and the number of steps."""
    hist = np.asarray(obs["participation_histogram"], np.int64)
    n, steps = int(obs["records"]), int(obs["steps"])
    counts = np.repeat(np.arange(hist.size), hist)
    if n < 1 or steps < 1:
        rate = _skipped("sample rate q", "sample rate", "no batch was drawn")
        disp = _skipped("participation dispersion", "participation dispersion", "no batch was drawn")
    else:
        rate = rate_test("sample rate q", "sample rate", int(counts.sum()), n * steps, q)
        disp = dispersion_test("participation dispersion", counts, steps, q) if 0 < q < 1 and n >= 2 else \
            _skipped("participation dispersion", "participation dispersion", f"q = {q} or {n} records")
    return [rate, disp, steps_test("steps T", steps, certified_steps)]


def _measured(obs: dict[str, Any], *, sigma: float, q: float, privacy: Any) -> dict[str, Any]:
    """``dpsgd_measured_epsilon`` on every reference pooled, under the run's certified relation."""
    ss, n = float(sum(obs["tensor_sum_squares"])), int(sum(obs["tensor_counts"]))
    steps, records = int(obs["steps"]), int(obs["records"])
    hist = np.asarray(obs["participation_histogram"], np.int64)
    successes = int((np.arange(hist.size) * hist).sum())
    rate_counts = (successes, records * steps) if records and steps else None
    try:
        m = dpsgd_measured_epsilon(sum_squares=ss, n=max(n, 1), rate_counts=rate_counts, sample_rate=q,
                                   steps=max(steps, 1), certified=float(privacy.epsilon), delta=float(privacy.delta),
                                   relation=str(privacy.relation), claimed_sigma=sigma)
    except ValueError:  # no σ within 64× of the claimed one gives the certified ε: nothing decided
        return {"epsilon": LARGE_EPSILON, "certified": float(privacy.epsilon), "delta": float(privacy.delta),
                "relation": str(privacy.relation), "accountant": "dp_accounting-pld", "confidence": 0.95,
                "p_value": 1.0, "parameters": {"failed": 1.0, "steps": float(steps), "claimed_sigma": sigma}}
    if not math.isfinite(m["epsilon"]):
        m["epsilon"], m["parameters"]["epsilon_infinite"] = LARGE_EPSILON, 1.0
    return m


def _declared(*, sigma: float, sample_rate: float, steps: int, privacy: Any) -> dict[str, Any]:
    """The certified ε against the declared σ, q, T's by the conformance code's own PLD accountant.

    Under the certified relation; a σ below ``PLD_SMALLEST_SIGMA`` is read at that floor (a smaller ε: the test errs
    low).
    """
    relation = str(privacy.relation)
    declared = poisson_gaussian_epsilon(noise_multiplier=max(sigma, PLD_SMALLEST_SIGMA),
                                        sample_rate=min(sample_rate, 1.0), steps=max(steps, 1),
                                        delta=float(privacy.delta), relation=relation)
    return declared_epsilon_test("ε of the declared mechanism (conformance's own accountant)", declared=declared,
                                 certified=float(privacy.epsilon), noise_multiplier=sigma, sample_rate=sample_rate,
                                 steps=steps, relation=relation)


def _score_test(obs: dict[str, Any], *, sigma: float, q: float, steps: int) -> dict[str, Any]:
    """The included canaries' scores at the certified σ against their exact law under the certified mechanism.

    ``canary_score_test``: one-sided, conservative under any clipped contribution ≤ C.
    """
    scores = obs.get("certified_llr")
    if scores is None or len(scores) < 2:
        return _skipped(SCORE_TEST, "canary scores", "fewer than 2 included canaries were observed")
    return canary_score_test(scores, sigma=sigma, sample_rate=min(q, 1.0), steps=max(steps, 1))


def _continuity(record: dict[str, Any] | None, released: Any) -> dict[str, Any] | None:
    """The trail's record, with any change the released model shows after the training loop returned."""
    if record is None or released is None:
        return record
    from mechanisms.dpsgd.continuity import released_changes

    return released_changes(record, released)


def dpsgd_conformance(obs: dict[str, Any], *, noise_multiplier: float, sample_rate: float, certified_steps: int,
                      privacy: Any, released: Any = None) -> dict[str, Any]:
    """The run's conformance: ``{"tests": K + 10 records, "measured_epsilon": ε of the measured parameters}``.

    ``obs``: ``mechanisms.dpsgd.observations.conformance_observations``; σ = ``noise_multiplier``, q, T: the certified
    ones; ``privacy``: the certified ``PrivacySpent`` (ε, δ, relation); ``released``: the released model, compared with
    what the training loop returned (``mechanisms.dpsgd.continuity.released_changes``; None: not compared).

    Raises:
        ValueError: σ ≤ 0 (a run without noise certifies nothing to test).
    """
    if not noise_multiplier > 0:
        raise ValueError(f"DP-SGD conformance needs a certified σ > 0, got {noise_multiplier}")
    c = float(obs["max_grad_norm"])
    record = obs.get("largest_record_norm")
    clips = [clip_test("clip bound C (canary contribution)", float(obs["largest_contribution"]), c),
             clip_test("clip bound C (records' clipped gradients)", float(record), c) if record is not None else
             _skipped("clip bound C (records' clipped gradients)", "clip bound", "no record's gradient was clipped")]
    tests = [*_noise_tests(obs, noise_multiplier), *_sample_tests(obs, noise_multiplier), *clips,
             *_sampling_tests(obs, sample_rate, certified_steps),
             _score_test(obs, sigma=noise_multiplier, q=sample_rate, steps=certified_steps),
             *([continuity_test(_continuity(obs["continuity"], released))] if "continuity" in obs else []),
             _declared(sigma=noise_multiplier, sample_rate=sample_rate, steps=certified_steps, privacy=privacy)]
    return {"tests": tests, "measured_epsilon": _measured(obs, sigma=noise_multiplier, q=sample_rate,
                                                          privacy=privacy)}
