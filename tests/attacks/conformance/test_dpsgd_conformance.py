"""Conformance of the built-in DP-SGD to its certified mechanism, measured in the white-box canary audit run on real
digits (``attacks.conformance.dpsgd``, observations from ``mechanisms.dpsgd.observations``): the correct mechanism
passes every test; each planted bug (patched into the mechanism's own code, never into the audit) is caught by the
test that names its parameter, at the level of the run's Bonferroni family. The bugs the zoo holds are planted by
their zoo name (``helpers.zoo_bug``); the noise draws' variants are this file's own (``dpsgd_draws``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import zoo_bug

import mechanisms.dpsgd.fast as fast
import mechanisms.dpsgd.sampling as sampling
from attacks.conformance.dpsgd import dpsgd_conformance
from bench.config.run import build_config
from mechanisms import MECHANISMS
from mechanisms.dpsgd.canary_placement import GradientCanaries
from tests.attacks.conformance import dpsgd_draws as draws

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
CPU = torch.device("cpu")
EPOCHS = 5  # q = 1/3 on 300 members, T = 15
TENSORS = 4  # the smoke recipe's MLP: Linear(64, h), its bias, Linear(h, 10), its bias


def _conformance(data, seed: int = 1) -> dict:
    """One audit run (every free coordinate a canary, the public n = the members) and its conformance."""
    spec = build_config({"training": {"dpsgd": {"epochs": EPOCHS}}},
                        {"profile": "smoke", "mechanisms": "dpsgd"}).spec_for("dpsgd")
    request = GradientCanaries(0, seed, every_coordinate=True, public_size=len(data))
    run = MECHANISMS.get("dpsgd")().fit(data, spec, target_epsilon=2.0, delta=1e-5, seed=seed, device=CPU,
                                        audit=request)
    p = run.params
    return dpsgd_conformance(run.audit["conformance"], noise_multiplier=p["noise_multiplier"],
                             sample_rate=p["sample_rate"], certified_steps=p["steps"], privacy=run.privacy)


def _level(c: dict) -> float:
    """The family's per-comparison level: 5 % over every test and the measured ε."""
    return 0.05 / (len(c["tests"]) + 1)


def _rejected(c: dict) -> set[str]:
    return {t["name"] for t in c["tests"] if t["p_value"] < _level(c)}


def test_the_correct_mechanism_passes_every_test(digits_split):
    c = _conformance(digits_split.members)
    assert len(c["tests"]) == TENSORS + 10  # fixed by the architecture
    assert _rejected(c) == set() and c["measured_epsilon"]["p_value"] >= _level(c)
    by = {t["name"]: t for t in c["tests"]}
    assert by["steps T"]["measured"] == by["steps T"]["certified"] == EPOCHS * 3
    assert by["sample rate q"]["n"] == len(digits_split.members) * EPOCHS * 3
    # the 10-coordinate bias keeps one reference; its excluded canaries hold noise alone and are read too
    assert by["noise σ, tensor 4 of 4"]["n"] > EPOCHS * 3 and by["noise σ, tensor 4 of 4"]["n"] % (EPOCHS * 3) == 0
    m = c["measured_epsilon"]
    assert m["epsilon"] <= m["certified"] * 1.0001 and m["relation"] == "replace-one"
    declared = by["ε of the declared mechanism (conformance's own accountant)"]
    assert declared["p_value"] == 1.0 and declared["measured"] == pytest.approx(declared["certified"], rel=1e-6)


@pytest.mark.parametrize("bug", ["dpsgd-accountant-rate", "dpsgd-accountant-sensitivity", "dpsgd-accountant-steps"])
def test_a_bug_inside_the_accountants_code_is_caught_by_the_declared_epsilon(digits_split, bug):
    """The zoo's accounting bugs (the mechanism's own PLD accountant ``_dpsgd_pld``, its calibration and certified ε,
    composing q/2, the add/remove sensitivity C or T/2), the mechanism's code left as it is: its declared σ, q and T
    through the conformance code's accountant give more than it certifies."""
    import mechanisms.accounting.gaussian as gaussian

    caches = (gaussian.pld_epsilon, gaussian.pld_noise_multiplier, gaussian.dpsgd_profile)
    for cached in caches:
        cached.cache_clear()  # nothing calibrated before the bug is served, nor kept after it
    try:
        with zoo_bug(bug):
            c = _conformance(digits_split.members)
    finally:
        for cached in caches:
            cached.cache_clear()
    assert _rejected(c) == {"ε of the declared mechanism (conformance's own accountant)"}, _rejected(c)
    declared = c["tests"][-1]
    assert declared["measured"] > 1.05 * declared["certified"]
    assert c["measured_epsilon"]["p_value"] < _level(c)  # the measured parameters spend more too


def test_less_noise_in_every_tensor_is_caught(digits_split, monkeypatch):
    draws_scaled = draws.broken_torch(lambda normal, *a, **k: 0.8 * normal(*a, **k))
    monkeypatch.setattr(fast, "torch", draws_scaled)
    c = _conformance(digits_split.members)
    assert "noise σ, tensor 1 of 4" in _rejected(c)
    assert c["measured_epsilon"]["p_value"] < _level(c) and c["measured_epsilon"]["epsilon"] > \
        c["measured_epsilon"]["certified"]


def test_no_noise_in_one_tensor_is_caught(digits_split, monkeypatch):
    monkeypatch.setattr(fast, "torch", draws.broken_torch(draws.no_noise_in((10,))))
    c = _conformance(digits_split.members)
    assert "noise σ, tensor 4 of 4" in _rejected(c)
    assert c["tests"][3]["measured"] == 0.0


def test_noise_reused_across_steps_is_caught(digits_split, monkeypatch):
    monkeypatch.setattr(fast, "torch", draws.broken_torch(draws.reused()))
    c = _conformance(digits_split.members)
    assert "noise independence (steps, coordinates)" in _rejected(c)


def test_laplace_noise_of_the_certified_variance_is_caught(digits_split, monkeypatch):
    monkeypatch.setattr(fast, "torch", draws.broken_torch(draws.laplace()))
    c = _conformance(digits_split.members)
    assert "noise shape (Gaussian)" in _rejected(c)
    assert not any(name.startswith("noise σ") for name in _rejected(c))  # the variance is the certified one


def test_uneven_sampling_is_caught(digits_split, monkeypatch):
    """A fifth of the records sampled at twice the rate of the rest, the mean rate q kept."""
    def uneven(n, *, sample_rate, generator):
        rate = torch.full((n,), sample_rate / 1.2)
        rate[: n // 5] *= 2
        for _ in range(round(1 / sample_rate)):
            yield torch.nonzero(torch.rand(n, generator=generator) < rate).reshape(-1)

    monkeypatch.setattr(sampling, "poisson_indices", uneven)
    c = _conformance(digits_split.members)
    assert "participation dispersion" in _rejected(c)


def test_an_extra_epoch_is_caught(digits_split):
    with zoo_bug("dpsgd-extra-epoch"):
        c = _conformance(digits_split.members)
    # the steps counted, and the canaries' scores summed over more steps than the certified law's T
    assert _rejected(c) == {"steps T", "canary scores ≤ the certified mechanism's (exact)"}


def test_no_clipping_is_caught(digits_split):
    with zoo_bug("dpsgd-no-clipping"):
        c = _conformance(digits_split.members)
    assert {"clip bound C (canary contribution)", "clip bound C (records' clipped gradients)",
            "canary scores ≤ the certified mechanism's (exact)"} <= _rejected(c)


def test_observations_stay_small_and_change_no_draw(digits_split):
    """The audit run's observations are sums, counts and a bounded sample; observing a batch's indices leaves the
    batches drawn unchanged."""
    x, y = torch.arange(50.0)[:, None], torch.arange(50)
    seen: list[torch.Tensor] = []
    a = [yb.tolist() for _, yb in sampling.poisson_batches(x, y, sample_rate=0.2,
                                                           generator=torch.Generator().manual_seed(3))]
    b = [yb.tolist() for _, yb in sampling.poisson_batches(x, y, sample_rate=0.2, observe=seen.append,
                                                           generator=torch.Generator().manual_seed(3))]
    assert a == b and [s.tolist() for s in seen] == a
    counts = np.bincount(np.concatenate([np.asarray(s, np.int64) for s in a]), minlength=50)
    assert counts.sum() == sum(len(s) for s in a)
