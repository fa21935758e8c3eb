"""The crafted black-box audit (attacks.canaries.crafted) on real digits, through the run-level privacy-bug check: its
R runs from an auditor-chosen θ_0 catch DP-SGD drawing no noise or half its noise and pass the correct mechanism; its
score is Gaussian by construction only where the canary reads weights no member touches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import context, zoo_bug

from attacks.analysis.privacy_bugs.check import privacy_bugs
from attacks.canaries.crafted import CraftedAudit, CraftedParams
from bench.results import RunResult, Timings
from bench.runner.cells import membership_record
from mechanisms.dpsgd.mechanism import DPSGD

CPU = torch.device("cpu")
DELTA = 1e-5
pytestmark = pytest.mark.usefixtures("one_thread")
# q = 1 (a batch larger than the members), T = 10 steps at σ = 3.4: μ = √T/σ = 0.93, add/remove ε ≈ 4
SPEC = DPSGD.spec(model="linear", epochs=10, batch_size=10_000, lr=0.5, optimizer="sgd",
                  params={"max_grad_norm": 1.0, "noise_multiplier": 3.4, "relation": "add-remove"})


class _Runs:
    """``TrainLikeTarget`` for the audit alone: a side-by-side job's ``run``, or ``fit`` with the job's request."""

    def __init__(self, spec=SPEC):
        self.spec, self.batch_size = spec, spec.batch_size

    def audit_runs(self, jobs):
        mech = DPSGD()
        for data, seed, request in jobs:
            if hasattr(request, "run"):
                yield request.run(mech, data, self.spec, target_epsilon=None, delta=DELTA)
            else:
                yield mech.fit(data, self.spec, target_epsilon=None, delta=DELTA, seed=seed, device=CPU, audit=request)

    def prefetch(self, jobs):
        pass


def _audit(split, spec=SPEC, **params):
    ctx = context(None, split, seed=0, train_like_target=_Runs(spec))
    ctx = type(ctx)(**{**ctx.__dict__, "mechanism": "dpsgd"})
    attack = CraftedAudit(CraftedParams(**{"runs": 400, "members": 300, "ideal_draws": 0, **params}))
    return attack.score(ctx)


def _verdict(scores):
    record = membership_record("multi-run-crafted", scores, privacy=scores.privacy, delta=DELTA)
    result = RunResult(dataset="digits", mechanism="dpsgd", seed=0, target_epsilon=4.0, model="linear", spec={},
                       status="ok", privacy=record.audited_privacy, attacks={"multi-run-crafted": record},
                       timings=Timings(train_s=0.0))
    return record, privacy_bugs([result])


def test_the_correct_mechanism_passes_and_its_score_is_gaussian_by_construction(digits_split):
    scores = _audit(digits_split)
    d = scores.design
    assert (d.kind, d.threat_model, d.size, d.relation, d.gaussian) == ("multi-run", "black-box-crafted", 400,
                                                                         "add-remove", True)
    assert d.certified_mu == pytest.approx(np.sqrt(10) / 3.4)
    e = scores.extra
    assert len(e["initial_model_sha256"]) == 64 and e["canary"]["kind"] == "pixels" and e["isolated"]
    assert e["canary"]["coordinates"] > 0 and e["side_by_side"]
    # the canary moves the score: included runs above excluded ones, by about the certified μ in noise units
    assert 0.5 * d.certified_mu < e["mu_hat"] < 1.5 * d.certified_mu
    record, (bugs, _, comparisons) = _verdict(scores)
    # Clopper-Pearson and the certified curve G_μ; the GDP fit and the Gaussian pair are estimates, no comparison
    assert bugs == [] and comparisons == 2
    assert record.audit.profile_rejected is False and record.audit.method == "clopper-pearson"
    assert {b.method for b in record.audit.bounds if b.evidence == "estimate"} == {"gdp-fit", "gaussian-pair"}


def test_half_the_noise_is_caught(digits_split):
    with zoo_bug("dpsgd-half-noise"):
        record, (bugs, _, _) = _verdict(_audit(digits_split))
    assert bugs, record.audit.epsilon_lb
    assert {b.method for b in bugs} <= {"clopper-pearson", "certified-curve"}  # valid evidence only


def test_no_noise_is_caught(digits_split):
    with zoo_bug("dpsgd-no-noise"):
        record, (bugs, _, _) = _verdict(_audit(digits_split))
    assert bugs and record.audit.profile_rejected


def test_a_blank_canary_reads_the_bias_members_move(digits_split):
    scores = _audit(digits_split, canary="blank", runs=40)
    assert scores.extra["isolated"] is False and scores.design.gaussian is False


def test_single_runs_through_fit_give_the_same_scores(digits_split, monkeypatch):
    """A mechanism with only the initial-model hook trains one run per job through fit: the same scores."""
    together = _audit(digits_split, runs=12)
    monkeypatch.setattr(DPSGD, "audits", frozenset({"initial-model"}))
    alone = _audit(digits_split, runs=12)
    assert alone.extra["side_by_side"] is False
    np.testing.assert_allclose(alone.scores, together.scores, rtol=1e-4, atol=1e-5)


def test_a_mechanism_without_the_hook_is_refused_in_one_line(digits_split, monkeypatch):
    monkeypatch.setattr(DPSGD, "audits", frozenset({"gradient-canaries"}))
    with pytest.raises(ValueError, match="does not accept an initial model"):
        _audit(digits_split, runs=10)


def test_the_auditor_chooses_the_runs_model_and_batch(digits_split):
    """Over a target recipe of an MLP on Poisson batches, the auditor's logistic regression at q = 1: side by side,
    Gaussian by construction, the certified μ of the target's σ and T."""
    mlp = DPSGD.spec(model="mlp", epochs=10, batch_size=50, lr=0.5, optimizer="sgd",
                     params={"max_grad_norm": 1.0, "noise_multiplier": 3.4, "model_kwargs": {"hidden": 16}})
    scores = _audit(digits_split, mlp, runs=20, model="linear", batch_size=10_000)
    assert scores.extra["side_by_side"] and scores.extra["model"] == "linear" and scores.design.gaussian
    assert scores.design.certified_mu == pytest.approx(np.sqrt(10) / 3.4)
    # without the auditor's choice the MLP's runs go one by one through fit, at q < 1: no Gaussian analysis
    plain = _audit(digits_split, mlp, runs=10)
    assert not plain.extra["side_by_side"] and not plain.design.gaussian and plain.design.certified_mu is None


def _opacus_plugin():
    import importlib
    import sys
    from pathlib import Path

    examples = str(Path(__file__).resolve().parents[3] / "examples")
    sys.path.insert(0, examples)
    try:
        return importlib.import_module("opacus_plugin")  # registers opacus-dpsgd once
    finally:
        sys.path.remove(examples)


@pytest.mark.long  # ten runs of the user's loop, each calibrating its σ through Opacus (~35 s)
def test_a_users_opacus_loop_with_the_hook_is_audited_run_by_run(digits_split, monkeypatch):
    """examples/opacus_plugin.py declares "initial-model": its own loop trains each run from θ_0 (one run per job);
    without the declaration the audit is refused in one line."""
    from attacks.base.context import OneAtATime
    from mechanisms.base import InitialModel, Weights

    plugin = _opacus_plugin()
    mech = plugin.OpacusDPSGD()
    spec = plugin.OpacusDPSGD.spec(model="linear", epochs=2, batch_size=10_000, lr=0.5)

    def fit(data, *, seed, audit=None):
        return mech.fit(data, spec, target_epsilon=4.0, delta=DELTA, seed=seed, device=CPU, audit=audit)

    runs = OneAtATime(fit, spec.batch_size, spec)
    ctx = context(None, digits_split, seed=0, train_like_target=runs)
    ctx = type(ctx)(**{**ctx.__dict__, "mechanism": "opacus-dpsgd"})
    scores = CraftedAudit(CraftedParams(runs=10, members=300, ideal_draws=0)).score(ctx)
    assert not scores.extra["side_by_side"] and np.isfinite(scores.scores).all()
    assert scores.design.certified_mu is not None  # the loop's own σ, q = 1 and T, as it recorded them
    # the hook acts: the same seed from another θ_0 ends elsewhere
    base = digits_split.members
    theta = Weights({k: torch.zeros_like(v) for k, v in mech.build(base.input_shape, 10, spec).state_dict().items()})
    a, b = fit(base, seed=1).model, fit(base, seed=1, audit=InitialModel(theta)).model
    assert not all(torch.equal(u, v) for u, v in zip(a.parameters(), b.parameters(), strict=True))
    monkeypatch.setattr(plugin.OpacusDPSGD, "audits", frozenset())
    with pytest.raises(ValueError, match="'opacus-dpsgd': it does not accept an initial model"):
        CraftedAudit(CraftedParams(runs=10, members=300)).score(ctx)
