"""Conformance of a user's Opacus loop (``attacks.conformance.opacus``) from what ``opacus-canary``'s observer sees:
a correct loop passes every test; each planted violation — a wrong q told to the accountant, shuffled fixed-size
batches accounted as Poisson sampling, too little noise overall or in one tensor, no clipping, steps left out of the
accountant — is refuted by its own test at the run's Bonferroni level; Opacus' gdp accountant is refused; the family
keeps its level on the ideal mechanism. Small real loops on the bundled digits (300 members + 100 canary records,
batch 50: q = 1/8, 3 epochs: T = 24), bugs planted by monkeypatching Opacus' own functions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from opacus.accountants import PRVAccountant
from opacus.accountants.accountant import IAccountant
from opacus.optimizers import DPOptimizer

from attacks.canaries.opacus.observer import AuditRefused, OpacusCanaries, canary_records
from attacks.conformance.hypothesis_tests import smallest_p
from attacks.conformance.opacus import opacus_conformance, opacus_tests
from bench.core.data import ArrayDataset, concat
from bench.core.models import build_model

RECORDS, EPOCHS, BATCH, SIGMA, DELTA = 100, 3, 50, 1.0, 1e-5
TENSORS = 4  # the digits MLP: weight, bias, weight, bias
LEVEL = 0.05 / (TENSORS + 6 + 1)  # the family of one run: k + 6 tests and the measured ε


def _observe(split, *, accountant="prv", poisson=True, records=RECORDS):
    """One observed run of a plain Opacus loop on the members and every canary record; (result, certified ε)."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    m = split.members
    x, y = canary_records(records, m.input_shape, m.num_classes, 0)
    data = concat(m, ArrayDataset(x, y, m.num_classes, m.name))
    included = tuple(bool(i % 2) for i in range(records))
    torch.manual_seed(0)
    model = build_model("mlp", m.input_shape, m.num_classes)
    engine = PrivacyEngine(accountant=accountant)
    with OpacusCanaries(records, 200, 0, included).observe(data) as obs:
        loader = DataLoader(TensorDataset(data.x, data.y), batch_size=BATCH, shuffle=True)
        model, opt, loader = engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                                 data_loader=loader, noise_multiplier=SIGMA, max_grad_norm=1.0,
                                                 poisson_sampling=poisson)
        for _ in range(EPOCHS):
            for xb, yb in loader:
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
    return obs.result(), engine.get_epsilon(DELTA)


def _by_quantity(tests):
    return {t["quantity"]: t for t in tests if t["quantity"] != "noise sd"}


def test_the_correct_loop_conforms_and_its_measured_epsilon_is_below_the_certified(digits_split):
    wb, eps = _observe(digits_split)
    c = opacus_conformance(wb, certified=eps, delta=DELTA, relation="add-remove")
    assert len(c["tests"]) == TENSORS + 6  # fixed by the design and the architecture
    assert c["tests"][-2]["quantity"] == "parameter continuity" and c["tests"][-2]["p_value"] == 1.0
    assert smallest_p(c["tests"]) > LEVEL and c["measured_epsilon"]["p_value"] > LEVEL
    assert 0.8 * eps < c["measured_epsilon"]["epsilon"] < eps  # a lower limit, near the certified ε
    hits, included = np.asarray(wb["hits"]), np.asarray(wb["records"]["included"], bool)
    assert hits[~included].sum() > 0  # excluded canary records go through the loader too (zero crafted gradient)
    assert wb["records_total"] == len(digits_split.members) + RECORDS


def test_a_wrong_q_told_to_the_accountant_is_refuted(digits_split, monkeypatch):
    hook = IAccountant.get_optimizer_hook_fn
    monkeypatch.setattr(IAccountant, "get_optimizer_hook_fn", lambda self, sample_rate: hook(self, sample_rate / 2))
    wb, eps = _observe(digits_split)
    c = opacus_conformance(wb, certified=eps, delta=DELTA, relation="add-remove")
    rate = _by_quantity(c["tests"])["sample rate"]
    assert rate["p_value"] < 1e-6 and rate["measured"] > 1.8 * rate["certified"]
    assert c["measured_epsilon"]["epsilon"] > eps  # the measured parameters spend more than the accountant says


def test_shuffled_fixed_batches_accounted_as_poisson_are_refuted_by_the_dispersion(digits_split):
    wb, _ = _observe(digits_split, poisson=False)
    tests = _by_quantity(opacus_tests(wb))
    assert tests["participation dispersion"]["p_value"] < LEVEL  # every record exactly once per epoch
    assert tests["participation dispersion"]["measured"] < 0.1 and tests["sample rate"]["p_value"] > LEVEL


def _scaled_noise(monkeypatch, factor: float, only: int | None = None):
    """DPOptimizer.add_noise drawing ``factor`` × the noise (in parameter tensor ``only``, or in all)."""
    add_noise = DPOptimizer.add_noise

    def scaled(opt):
        add_noise(opt)
        for k, p in enumerate(opt.params):
            if only is None or k == only:
                p.grad = p.summed_grad.view_as(p) + factor * (p.grad - p.summed_grad.view_as(p))

    monkeypatch.setattr(DPOptimizer, "add_noise", scaled)


def test_less_noise_is_refuted_overall_and_by_the_measured_epsilon(digits_split, monkeypatch):
    _scaled_noise(monkeypatch, 0.8)
    wb, eps = _observe(digits_split)
    c = opacus_conformance(wb, certified=eps, delta=DELTA, relation="add-remove")
    noise = [t for t in c["tests"] if t["quantity"] == "noise sd"]
    assert noise[0]["p_value"] < LEVEL and abs(noise[0]["measured"] / SIGMA - 0.8) < 0.05
    assert c["measured_epsilon"]["p_value"] < LEVEL and c["measured_epsilon"]["epsilon"] > eps


def test_no_noise_in_one_tensor_is_refuted_by_that_tensors_test(digits_split, monkeypatch):
    _scaled_noise(monkeypatch, 0.0, only=1)
    wb, _ = _observe(digits_split)
    p = [t["p_value"] for t in opacus_tests(wb) if t["quantity"] == "noise sd"]
    assert p[1] == 0.0 and min(p[0], p[2], p[3]) > LEVEL


def test_unclipped_gradients_are_refuted_by_the_clip_test(digits_split, monkeypatch):
    clip = DPOptimizer.clip_and_accumulate

    def no_clip(opt):
        bound, opt.max_grad_norm = opt.max_grad_norm, 1e9
        try:
            clip(opt)
        finally:
            opt.max_grad_norm = bound

    monkeypatch.setattr(DPOptimizer, "clip_and_accumulate", no_clip)
    clip_test = _by_quantity(opacus_tests(_observe(digits_split)[0]))["clip bound"]
    assert clip_test["p_value"] == 0.0 and clip_test["measured"] > 5  # the crafted gradient's raw 10·C


def test_steps_left_out_of_the_accountant_are_refuted(digits_split, monkeypatch):
    step, calls = PRVAccountant.step, []

    def forgetful(self, *, noise_multiplier, sample_rate):
        calls.append(1)
        if len(calls) % 8:  # one step in 8 never reaches the accountant
            step(self, noise_multiplier=noise_multiplier, sample_rate=sample_rate)

    monkeypatch.setattr(PRVAccountant, "step", forgetful)
    steps = _by_quantity(opacus_tests(_observe(digits_split)[0]))["steps"]
    assert steps["p_value"] == 0.0 and steps["measured"] > steps["certified"]


def test_the_gdp_accountant_is_refused_in_one_line(digits_split):
    with pytest.raises(AuditRefused, match=r"^opacus-canary: the loop's accountant is Opacus' gdp") as err:
        _observe(digits_split, accountant="gdp")
    assert len(str(err.value).splitlines()) == 1


def test_the_family_keeps_its_level_on_the_ideal_mechanism():
    """400 simulated runs of the ideal mechanism at the loops' size (n = 400, q = 1/8, T = 24, 4 tensors): the k + 4
    tests at the Bonferroni level flag at most 5 % of them (binomial 99.9 % upper margin)."""
    rng = np.random.default_rng(1)
    n, q, steps, sizes = 400, 0.125, 24, (2048, 32, 320, 3)
    flagged = 0
    for _ in range(400):
        wb = {"claimed_sigma": SIGMA, "steps": steps, "sample_rate": q, "history": [[SIGMA, q, steps]],
              "hits": rng.binomial(steps, q, RECORDS).tolist(), "records_total": n,
              "batch_rows": int(rng.binomial(n * steps, q)), "largest_clip": 1.0, "clip_bound": 1.0,
              "noise_by_tensor": [{"shape": [s], "n": s * steps,
                                   "sum_squares": float(SIGMA**2 * rng.chisquare(s * steps))} for s in sizes]}
        flagged += smallest_p(opacus_tests(wb)) < 0.05 / (len(sizes) + 4)
    assert flagged <= 400 * 0.05 + 3 * np.sqrt(400 * 0.05)


def _two_phases(split):
    """A loop of two training phases on one model, each its own ``PrivacyEngine`` (3 epochs each, q = 1/8, σ = 1):
    (the observer's result, the second engine's ε alone, the ε of both phases composed by PRV)."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    m = split.members
    x, y = canary_records(RECORDS, m.input_shape, m.num_classes, 0)
    data = concat(m, ArrayDataset(x, y, m.num_classes, m.name))
    torch.manual_seed(0)
    model = build_model("mlp", m.input_shape, m.num_classes)
    engines = [PrivacyEngine(accountant="prv"), PrivacyEngine(accountant="prv")]
    with OpacusCanaries(RECORDS, 200, 0, tuple(bool(i % 2) for i in range(RECORDS))).observe(data) as obs:
        for engine, lr in zip(engines, (0.1, 0.05), strict=True):  # the second phase fine-tunes the same model
            loader = DataLoader(TensorDataset(data.x, data.y), batch_size=BATCH, shuffle=True)
            model, opt, loader = engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=lr),
                                                     data_loader=loader, noise_multiplier=SIGMA, max_grad_norm=1.0)
            for _ in range(EPOCHS):
                for xb, yb in loader:
                    opt.zero_grad()
                    F.cross_entropy(model(xb), yb).backward()
                    opt.step()
    both = PRVAccountant()
    both.history = engines[0].accountant.history + engines[1].accountant.history
    return obs.result(), engines[1].get_epsilon(DELTA), both.get_epsilon(DELTA)


def test_a_loop_of_two_phases_is_observed_whole_and_an_epsilon_that_leaves_one_out_is_refuted(digits_split):
    """Issue 45: a second DPOptimizer (a second PrivacyEngine) was refused ("the audit observes one"); now every phase
    is observed, and the ε the loop reports is held to both: the second engine's ε alone is refuted exactly by the
    declared-ε test and by the ε from measured parameters; the two phases' composed ε passes."""
    wb, second, both = _two_phases(digits_split)
    assert [p["steps"] for p in wb["phases"]] == [EPOCHS * 8, EPOCHS * 8] and wb["steps"] == 2 * EPOCHS * 8
    short = opacus_conformance(wb, certified=second, delta=DELTA, relation="add-remove")
    level = 0.05 / (len(short["tests"]) + 1)
    assert len(short["tests"]) == (TENSORS + 3) * 2 + 3  # fixed by the loop's phases and the architecture
    declared = short["tests"][-1]
    assert declared["p_value"] == 0.0 and declared["measured"] > 1.2 * second
    assert short["measured_epsilon"]["p_value"] < level and short["measured_epsilon"]["epsilon"] > second
    assert smallest_p(short["tests"][:-1]) > level  # every phase conforms to its own σ, q, C; the steps are counted
    whole = opacus_conformance(wb, certified=both, delta=DELTA, relation="add-remove")
    assert smallest_p(whole["tests"]) > level and whole["measured_epsilon"]["p_value"] > level
    assert 0.8 * both < whole["measured_epsilon"]["epsilon"] < both
