"""Membership attacks on a tiny real target (scikit-learn digits, an MLP that overfits 300 members):
every attack runs through its registered plug-in with real shadow training, scores look right, the
stronger attacks beat LOSS, shadows go through the model cache, and no design peeks at membership."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import CPU, context

from attacks import ATTACKS
from attacks.analysis.statistics.metrics import membership_metrics
from attacks.base.context import OneAtATime
from attacks.membership.lira import gaussian_fit, lira_scores
from attacks.membership.rmia import rmia_scores
from attacks.membership.shadows import offline_design, online_design
from attacks.membership.threshold import ConfidenceAttack, LossAttack, ThresholdParams, modified_entropy
from bench.core.data import concat, load_dataset, make_split
from bench.core.design import AuditDesign
from bench.core.training import logit_confidence
from bench.execution.cache import ModelCache
from bench.execution.executor import LocalExecutor
from bench.execution.jobs import Recipe, Trainer
from mechanisms.baseline import Baseline

SPEC = Baseline.spec(model="mlp", epochs=30, batch_size=32, lr=0.05, optimizer="sgd", momentum=0.9)
MEMBERSHIP = ("loss", "confidence", "entropy", "shadow", "lira", "lira-offline", "rmia", "canary")


def _attack(name: str, **params):
    """The registered attack ``name`` with settings ``params`` (as the runner builds it from a config)."""
    cls = ATTACKS.get(name)
    return cls(cls.Params(**params))


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def split():
    """300 members, 300 non-members and 800 population records of real 8×8 digits (seed 0)."""
    pool, test = load_dataset("digits")
    return make_split(pool, test, n_members=300, n_non_members=300, n_population=800, n_test=397, seed=0)


_MEMO: dict = {}


def _fit(data, *, seed):
    key = (data.fingerprint(), seed)
    if key not in _MEMO:
        _MEMO[key] = Baseline().fit(data, SPEC, target_epsilon=None, delta=1e-5, seed=seed, device=CPU)
    return _MEMO[key]


fit = OneAtATime(_fit)
"""A real ``train_like_target``: the non-private baseline with the target's settings, memoised in memory by
(data, seed) as the model cache would."""


@pytest.fixture(scope="module")
def target(split):
    return fit(split.members, seed=0)


@pytest.fixture(scope="module")
def results(split, target):
    """Every registered membership attack's scores on the target (all 300 members and 300 non-members), with
    few shadows (fast)."""
    settings = {"shadow": {"num_shadow": 4}, "lira": {"num_shadow": 16}, "lira-offline": {"num_shadow": 8},
                "rmia": {"num_shadow": 4}, "canary": {"num_canaries": 400}}
    ctx = context(target, split, seed=0, train_like_target=fit)
    out = {name: _attack(name, **settings.get(name, {})).score(ctx) for name in MEMBERSHIP}
    assert set(out["canary"]) == {"canary"}  # the baseline takes no gradient canaries: one design only
    out["canary"] = out["canary"]["canary"]
    return out


@pytest.fixture(scope="module")
def auc(results):
    """AUC of every attack, as the runner computes it from the scores (``attacks.analysis.statistics.metrics``)."""
    return {name: membership_metrics(res.scores, res.labels)["auc"] for name, res in results.items()}


def test_every_attack_returns_balanced_finite_scores(results):
    for name, res in results.items():
        assert ATTACKS.get(name).name == name  # registered under its own name
        n = 400 if name == "canary" else 600
        assert res.scores.shape == res.labels.shape == (n,)
        assert np.isfinite(res.scores).all() and set(np.unique(res.labels)) == {0, 1}
        if name != "canary":  # the canary coins are fair, not balanced
            assert res.labels.sum() == 300 and (res.labels[:300] == 1).all()
            assert res.design == AuditDesign()  # a single model's natural members: a heuristic audit
        # Every record gets its own score: the target's outputs are computed so that confident ones stay finite
        # and distinct (log-sum-exp losses and φ, tie-broken RMIA fractions). A tie between a member and a
        # non-member is a coin flip for every threshold at it, which makes low-FPR read-outs meaningless.
        assert len(np.unique(res.scores)) == n, name


def test_attacks_find_members_of_an_overfit_target(auc):
    assert auc["loss"] > 0.53
    for name in ("confidence", "entropy", "shadow", "lira", "lira-offline", "rmia"):
        assert auc[name] > 0.5, (name, auc)
    # the reference-model attacks calibrate per example and beat the global LOSS threshold clearly
    for name in ("lira", "lira-offline", "rmia"):
        assert auc[name] > auc["loss"] + 0.03, (name, auc)


def test_confidence_without_class_thresholds_is_the_loss_attack(split, target):
    ctx = context(target, split, seed=0)
    conf = ConfidenceAttack(ThresholdParams(per_class=False)).score(ctx)
    loss = LossAttack().score(ctx)
    np.testing.assert_array_equal(conf.labels, loss.labels)
    auc_conf, auc_loss = (membership_metrics(r.scores, r.labels)["auc"] for r in (conf, loss))
    assert auc_conf == pytest.approx(auc_loss, abs=1e-3)  # both monotone in p_y


def test_shadows_go_through_the_model_cache(split, tmp_path):
    # the runner's training path (trainer, executor, content-addressed model cache) for the smoke recipe
    trainer = Trainer(LocalExecutor(), ModelCache(tmp_path), train_device=CPU, device=CPU)
    recipe = Recipe("baseline", Baseline.spec(**Baseline.recipes["smoke"]), None, 1e-5, "digits")
    fresh: list[bool] = []

    class TrainLikeTarget:  # the runner's batch path (``Trainer.submit`` / ``collect``), recording cache misses
        def __call__(self, data, *, seed):
            return next(self.many([(data, seed)]))

        def many(self, jobs):
            for slot in trainer.submit(recipe, jobs):
                fresh.append(not slot.cached)
                yield trainer.collect(slot)

    train_like_target = TrainLikeTarget()

    target = trainer.collect(trainer.submit(recipe, [(split.members, 0)])[0])
    ctx = context(target, split, seed=0, train_like_target=train_like_target)
    runs = []
    for _ in range(2):
        fresh.clear()
        for name in ("shadow", "lira-offline", "rmia"):  # one offline design: 2 shadows shared by all three
            runs.append(_attack(name, num_shadow=2).score(ctx).scores)
        runs.append(_attack("lira", num_shadow=4).score(ctx).scores)
        if len(runs) == 4:
            assert sum(fresh) == 6  # 2 offline shadows trained once, then 4 online ones
    assert sum(fresh) == 0  # the second run trains nothing
    for first, again in zip(runs[:4], runs[4:], strict=True):
        np.testing.assert_array_equal(first, again)


def test_online_design_never_uses_membership_labels(split):
    members, non_members = split.members.subset(torch.arange(100)), split.non_members.subset(torch.arange(100))
    pop = split.population.subset(torch.arange(200))
    a, keep_a = online_design(concat(members, non_members), pop, num=8, size=150, seed=3)
    b, keep_b = online_design(concat(non_members, members), pop, num=8, size=150, seed=3)  # roles swapped
    for i in range(8):
        rows_a = a.universe.subset(torch.from_numpy(np.flatnonzero(a.inclusion[i])))
        rows_b = b.universe.subset(torch.from_numpy(np.flatnonzero(b.inclusion[i])))
        assert rows_a.fingerprint() == rows_b.fingerprint()  # the same shadow training sets
    assert (keep_a.sum(0) == 4).all()  # every candidate IN for exactly half of the shadows
    assert (a.inclusion.sum(1) == 150).all()  # 100 candidates + 50 population records each
    np.testing.assert_array_equal(keep_a[:, :100], keep_b[:, 100:])


def test_offline_design_uses_population_only_and_extends_by_prefix(split):
    small = offline_design(split.population, num=2, size=300, seed=0)
    large = offline_design(split.population, num=5, size=300, seed=0)
    np.testing.assert_array_equal(small.inclusion, large.inclusion[:2])
    assert small.seeds == large.seeds[:2] and 0 not in large.seeds  # never the target's seed
    assert (large.inclusion.sum(1) == 300).all()


def test_attacks_without_population_raise(split, target):
    empty = make_split(*load_dataset("digits"), n_members=300, n_non_members=300, n_population=0, n_test=10,
                       seed=0)
    ctx = context(target, empty, seed=0, train_like_target=fit)
    for name in ("shadow", "lira-offline", "rmia", "canary"):
        assert ATTACKS.get(name).needs_population
        with pytest.raises(ValueError, match="population") as info:  # a failed part of the cell, one line
            _attack(name).score(ctx)
        assert "\n" not in str(info.value)


# ---- the maths of the scores ------------------------------------------------------------------------------


def test_output_statistics_by_hand():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 50.0]])
    y = torch.tensor([0, 0])
    mentr, phi = modified_entropy(logits, y), logit_confidence(logits, y).numpy()
    p = torch.softmax(logits.double(), 1).numpy()
    # row 0: p = (0.7870, 0.1065, 0.1065); Mentr = −(1 − p0) ln p0 − 2 · p1 ln(1 − p1)
    mentr0 = -(1 - p[0, 0]) * np.log(p[0, 0]) - 2 * p[0, 1] * np.log(1 - p[0, 1])
    assert mentr[0] == pytest.approx(mentr0)
    assert phi[0] == pytest.approx(np.log(p[0, 0] / (1 - p[0, 0])))
    # row 1: confidently wrong (p_2 = 1 − 2e^−50 in floats): −ln p_0 = 50 + ln(1 + 2e^−50) and
    # −p_2·ln(1 − p_2) = 50 − ln 2, both finite; φ = ln(p_0 / (1 − p_0)) = −50 − ln(1 + e^−50) ≈ −50
    assert mentr[1] == pytest.approx(100 - np.log(2), rel=1e-9)
    assert phi[1] == pytest.approx(-50, abs=1e-6)
    assert logit_confidence(torch.tensor([[800.0, 0.0]]), torch.tensor([0]))[0] == pytest.approx(800.0)


def test_gaussian_fits_per_example_and_global():
    values = np.array([[[1.0], [10.0]], [[3.0], [14.0]]])  # 2 shadows, 2 examples, 1 query
    mask = np.ones((2, 2), dtype=bool)
    mean, std = gaussian_fit(values, mask, global_variance=False)
    np.testing.assert_allclose(mean[:, 0], [2.0, 12.0])
    np.testing.assert_allclose(std[:, 0], [np.sqrt(2.0), np.sqrt(8.0)])
    _, pooled = gaussian_fit(values, mask, global_variance=True)
    np.testing.assert_allclose(pooled[:, 0], np.sqrt((2.0 + 8.0) / 2))  # squared deviations 2 + 8 over 2 dof


def test_lira_scores_rank_in_distribution_members_first():
    rng = np.random.default_rng(0)
    n, k = 200, 16
    keep = np.zeros((k, n), dtype=bool)
    keep[: k // 2] = True
    shadows = rng.normal(0, 1, (k, n, 1)) + 3.0 * keep[..., None]  # IN shadows are confident (+3)
    target = np.concatenate([rng.normal(3, 1, (100, 1)), rng.normal(0, 1, (100, 1))])
    for scores in (lira_scores(target, shadows, keep, global_variance=True),
                   lira_scores(target, shadows[k // 2:], None, global_variance=False)):
        assert scores[:100].mean() > scores[100:].mean() + 1


def test_rmia_score_is_monotone_in_the_likelihood_ratio():
    rng = np.random.default_rng(1)
    refs_x, refs_z = np.full((4, 50), -1.0), rng.normal(-1, 0.3, (4, 300))  # every x equally likely a priori
    out_z = rng.random((4, 300)) < 0.5
    tgt_x = np.linspace(-3, 0, 50)
    scores = rmia_scores(tgt_x, refs_x, rng.normal(-1, 0.3, 300), refs_z, out_z, a=0.3, gamma=1.0)
    assert (np.diff(scores) > 0).all() and 0 <= scores.min() and scores.max() < 1
