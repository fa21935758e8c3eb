"""The canary designs the audits rest on, on small real data (scikit-learn's 8×8 digits): inclusion coins are fair and
independent; the labels an audit returns are what was actually trained or released; the scores have the distribution
the design claims (local-canary: N(±1, σ²); weight-canary: N(0, std²) vs N(‖d‖, std²)); DP-SGD's white-box gradient
canaries show exactly their clipped contribution C per sampled step without noise, and with noise are scored by the
Neyman-Pearson test at the noise the updates really carry. Expected values come from the mechanisms' own parameters
(σ, std, q, C) and hand-derived distributions."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import CPU, context
from scipy.stats import binomtest, norm, normaltest

from attacks.analysis import membership_audit
from attacks.analysis.audits.guess_plan import PLANNED_FRACTIONS
from attacks.analysis.statistics.metrics import membership_metrics
from attacks.base.context import OneAtATime
from attacks.canaries.canary import CanaryAudit, CanaryParams
from attacks.canaries.local import LocalCanaryAudit, ReleaseCanaryParams, _coins
from attacks.canaries.weight_noise import WeightCanaryAudit, WeightCanaryParams
from attacks.membership.shadows import shadow_seed
from bench.core.data import load_dataset, make_split
from bench.core.design import AuditDesign
from bench.core.models import build_model
from bench.core.training import per_example_loss, seed_everything
from bench.core.types import PrivacySpent, TrainedModel
from mechanisms.accounting.gaussian import gaussian_epsilon
from mechanisms.baseline import Baseline
from mechanisms.dpsgd.canaries import CanaryTracker
from mechanisms.dpsgd.canary_placement import GradientCanaries
from mechanisms.dpsgd.fast import train_fast
from mechanisms.dpsgd.mechanism import DPSGD
from mechanisms.local.mechanism import LocalGaussian
from mechanisms.weight_noise import WeightNoise

DELTA = 1e-5


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def split():
    """300 members, 100 non-members, 400 population records of real 8×8 digits (seed 0)."""
    pool, test = load_dataset("digits")
    return make_split(pool, test, n_members=300, n_non_members=100, n_population=400, n_test=100, seed=0)


def _fair_and_independent(coins: np.ndarray) -> None:
    """Two-sided exact binomial test of P[1] = ½ and the Wald-Wolfowitz runs test of independence, each at 0.001."""
    coins = np.asarray(coins).astype(int)
    n, ones = coins.size, int(coins.sum())
    assert binomtest(ones, n, 0.5).pvalue > 1e-3, (ones, n)
    runs = 1 + int((coins[1:] != coins[:-1]).sum())
    mean = 2 * ones * (n - ones) / n + 1
    var = 2 * ones * (n - ones) * (2 * ones * (n - ones) - n) / (n**2 * (n - 1))
    assert 2 * norm.sf(abs(runs - mean) / math.sqrt(var)) > 1e-3, (runs, mean)


def test_inclusion_coins_are_fair_and_independent(split):
    attack = CanaryAudit(CanaryParams(num_canaries=400))
    input_coins = [attack.canaries(split.population, seed=s)[1] for s in range(10)]
    _fair_and_independent(np.concatenate(input_coins))
    # different cells draw different coins: agreement between seeds is a coin flip too
    assert binomtest(int((input_coins[0] == input_coins[1]).sum()), 400, 0.5).pvalue > 1e-3
    params = [torch.nn.Parameter(torch.zeros(100, 100)), torch.nn.Parameter(torch.zeros(100))]
    tracker = CanaryTracker(GradientCanaries(5000, seed=3), params, sample_rate=0.1, noise_multiplier=1.0)
    included = np.asarray(tracker.result()["included"])
    assert included.size == 5000
    _fair_and_independent(included)
    # every gradient canary (and every noise-reference coordinate) owns its own coordinate
    coords = [(k, int(i)) for k, (_, idx) in enumerate(tracker.where.values()) for i in idx]
    assert len(set(coords)) == len(coords) >= 5000
    _fair_and_independent(_coins(5000, torch.Generator().manual_seed(4)))  # local-canary and dpmix-canary slots


def test_canary_run_trains_once_on_members_plus_included_canaries(split):
    # the corrected form of tests/attacks/membership/test_membership.py's test: score() returns designs by name
    spec = Baseline.spec(model="mlp", epochs=5, batch_size=32, lr=0.05, optimizer="sgd", momentum=0.9)
    seen = []

    def record(data, *, seed):
        seen.append((data, seed, Baseline().fit(data, spec, target_epsilon=None, delta=DELTA, seed=seed, device=CPU)))
        return seen[-1][2]

    attack = CanaryAudit(CanaryParams(num_canaries=200))
    ctx = dataclasses.replace(context(None, split, seed=0, train_like_target=OneAtATime(record)), mechanism="baseline")
    out = attack.score(ctx)
    assert list(out) == ["canary"]  # no white-box canaries without a mechanism that takes them
    res = out["canary"]
    canaries, included = attack.canaries(split.population, seed=0)
    [(data, _, run)] = seen  # one training run, exactly on the members plus the included canaries
    keep = torch.from_numpy(np.flatnonzero(included))
    assert torch.equal(data.x, torch.cat([split.members.x, canaries.x[keep]]))
    assert torch.equal(data.y, torch.cat([split.members.y, canaries.y[keep]]))
    np.testing.assert_array_equal(res.labels, included.astype(int))
    _fair_and_independent(included)
    assert res.design == AuditDesign("one-run", "black-box", size=200, relation="add-remove", inclusion=0.5)
    assert res.privacy is run.privacy  # compared with the audit run's privacy, not the target's
    np.testing.assert_allclose(res.scores, -per_example_loss(run.model, canaries.x, canaries.y, device=CPU))


def test_noise_canaries_scored_by_output_differences(split):
    """inputs: noise draws uniform images with random labels (no population needed); score: output-difference reads
    ⟨logits(x) − logits(blank), e_y − 1/K⟩ of the audit run's final model."""
    spec = Baseline.spec(model="linear", epochs=3, batch_size=32, lr=0.05, optimizer="sgd")
    runs = []

    def record(data, *, seed):
        runs.append(Baseline().fit(data, spec, target_epsilon=None, delta=DELTA, seed=seed, device=CPU))
        return runs[-1]

    attack = CanaryAudit(CanaryParams(num_canaries=5000, inputs="noise", score="output-difference"))
    assert not attack.needs_population and attack.size_problem(n_members=300, n_population=200) is None
    canaries, included = attack.canaries(split.population, seed=0)
    assert canaries.x.shape == (5000, *split.population.input_shape) and 0 <= canaries.x.min() < canaries.x.max() <= 1
    assert abs(canaries.x.mean().item() - 0.5) < 0.01 and set(canaries.y.tolist()) == set(range(10))
    _fair_and_independent(included)
    attack = CanaryAudit(CanaryParams(num_canaries=200, inputs="noise", score="output-difference"))
    ctx = dataclasses.replace(context(None, split, seed=0, train_like_target=OneAtATime(record)), mechanism="baseline")
    res = attack.score(ctx)["canary"]
    canaries, _ = attack.canaries(split.population, seed=0)
    model = runs[0].model
    with torch.no_grad():
        diff = model(canaries.x) - model(torch.zeros(1, *canaries.input_shape))
    expected = (diff * (F.one_hot(canaries.y, 10) - 0.1)).sum(1).numpy()
    np.testing.assert_allclose(res.scores, expected, rtol=1e-5, atol=1e-6)
    assert res.extra == {"inputs": "noise", "score": "output-difference", "members": 300}


def test_the_audit_run_keeps_the_first_members_it_is_asked_to(split):
    """members: K keeps the target's first K members beside the included canaries, and the public n is K + m/2 (room
    for more canaries at the target's q and T)."""
    seen = []

    def record(data, *, seed):
        seen.append(data)
        return Baseline().fit(data, Baseline.spec(model="linear", epochs=1, batch_size=64, lr=0.05),
                              target_epsilon=None, delta=DELTA, seed=seed, device=CPU)

    attack = CanaryAudit(CanaryParams(num_canaries=200, inputs="noise", score="margin", members=120))
    assert attack.public_size(300) == 120 + 100 and attack.public_size(50) == 50 + 100
    ctx = dataclasses.replace(context(None, split, seed=0, train_like_target=OneAtATime(record)), mechanism="baseline")
    res = attack.score(ctx)["canary"]
    canaries, included = attack.canaries(split.population, seed=0)
    [data] = seen
    assert torch.equal(data.x, torch.cat([split.members.x[:120], canaries.x[included]]))
    assert res.extra["members"] == 120 and len(data) == 120 + included.sum()


def test_dpsgd_canary_audit_returns_both_designs_and_no_false_alarm(split):
    spec = DPSGD.spec(model="mlp", epochs=5, batch_size=60, lr=1.0)
    seen = []

    def fit(data, *, seed, audit=None):
        seen.append(audit)
        return DPSGD().fit(data, spec, target_epsilon=4.0, delta=DELTA, seed=seed, device=CPU, audit=audit)

    ctx = dataclasses.replace(context(None, split, seed=0, train_like_target=OneAtATime(fit)), mechanism="dpsgd")
    out = CanaryAudit(CanaryParams(num_canaries=200, gradient_canaries=1000)).score(ctx)
    assert list(out) == ["canary", "canary-whitebox"]
    [request] = seen  # one run carries both designs
    assert request == GradientCanaries(1000, request.seed, 10.0, public_size=300 + 100)
    wb = out["canary-whitebox"]
    # its single guessing rule planned from the run's public σ, q, T and m (attacks.analysis.audits.guess_plan)
    assert wb.design.guess_fraction in PLANNED_FRACTIONS
    assert wb.design == AuditDesign("one-run", "white-box", size=1000, relation="add-remove",
                                    guess_fraction=wb.design.guess_fraction, llr_model=wb.design.llr_model)
    assert wb.design.llr_model == (wb.extra["sigma_hat"], wb.extra["sample_rate"], wb.extra["steps"])
    assert wb.extra["steps"] == 5 * 7 and wb.extra["sample_rate"] == pytest.approx(1 / 7)  # n = 400, b = 60
    _fair_and_independent(wb.labels)
    assert wb.privacy is out["canary"].privacy and 3.9 < wb.privacy.epsilon <= 4.0 + 1e-3
    for res in out.values():  # a correct mechanism: no valid bound above its accountant's ε
        block = membership_audit(res.scores, res.labels, delta=DELTA, design=res.design)
        assert all(b["epsilon_lb"] <= res.privacy.epsilon for b in block["bounds"] if b["valid"])
    assert membership_metrics(wb.scores, wb.labels)["auc"] > 0.6  # the white-box canaries are seen


class _NoAccountant:
    def step(self, **_) -> None:
        pass


def _white_box(split, *, sigma: float, max_grad_norm: float, norm_units: float = 10.0, epochs: int = 10) -> dict:
    """Gradient canaries through our DP-SGD step on the members (q = 60/300 = 0.2, 5 steps per epoch)."""
    gen = seed_everything(0)
    model = build_model("mlp", split.members.input_shape, split.members.num_classes)
    hist, _, _, audit = train_fast(model, torch.optim.SGD(model.parameters(), lr=0.1), split.members.x, split.members.y,
                                   mode="bk", epochs=epochs, sample_rate=0.2, noise_multiplier=sigma,
                                   max_grad_norm=max_grad_norm, expected_batch_size=60, accountant=_NoAccountant(),
                                   generator=gen, device=CPU, canaries=GradientCanaries(300, 7, norm_units))
    assert all(math.isfinite(h) for h in hist)
    return {"scores": np.asarray(audit["scores"]), "included": np.asarray(audit["included"], bool)}


@pytest.mark.parametrize("max_grad_norm", [1.0, 0.5])
def test_without_noise_white_box_scores_are_the_clipped_contributions(split, max_grad_norm):
    steps, q = 10 * 5, 0.2
    wb = _white_box(split, sigma=0.0, max_grad_norm=max_grad_norm)
    scores, included = wb["scores"], wb["included"]
    # perfect separation: an excluded canary adds nothing (exactly 0); an included one is sampled at least once in 50
    # steps except with probability 0.8^50 = 1.4e-5
    assert (scores[~included] == 0).all() and (scores[included] > 0).all()
    # each sampled step adds its clipped contribution C (C·(1 − 1e-7): Opacus' clip factor C/(‖g‖ + 1e-6)), i.e. 1 in
    # units of C, not its raw norm 10·C: the score is the number of sampled steps, Binomial(50, 0.2)
    counts = scores[included]
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-4)
    assert counts.max() <= steps
    n = counts.size
    assert abs(counts.mean() - steps * q) < 4 * math.sqrt(steps * q * (1 - q) / n)
    assert 0.6 < counts.var(ddof=1) / (steps * q * (1 - q)) < 1.5


def test_a_mechanism_that_does_not_clip_shows_the_raw_norm(split, monkeypatch):
    import mechanisms.dpsgd.canaries as canaries

    monkeypatch.setattr(canaries, "clip_factors", lambda sq, c: torch.ones_like(sq))  # clipping broken
    wb = _white_box(split, sigma=0.0, max_grad_norm=1.0, epochs=4)
    counts = wb["scores"][wb["included"]] / 10.0  # every sampled step now adds the raw norm 10·C
    assert counts.mean() > 2
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-4)


def test_white_box_score_is_the_per_step_likelihood_ratio():
    # one parameter of 60 coordinates, 20 canaries (the other 40 observed as noise references), q = 0.3, C = 2;
    # the updates carry noise of std 0.8·C although 2·C is claimed: the score must use the noise really there
    q, sigma, c, steps = 0.3, 0.8, 2.0, 3
    p = torch.nn.Parameter(torch.zeros(60))
    tracker = CanaryTracker(GradientCanaries(20, seed=5, norm=3.0), [p], sample_rate=q, noise_multiplier=2.0)
    ids, idx = tracker.where[p]
    canary, reference = ids.numpy() < 20, ids.numpy() >= 20
    rng = np.random.default_rng(0)
    x, adds, refs = np.zeros((steps, 20)), np.zeros((steps, 20)), []
    for t in range(steps):
        others = torch.linspace(-1, 1, 60) * (t + 1)  # the other records' clipped sum
        sums = {p: others.clone()}
        tracker.add(sums, c)
        added = ((sums[p] - others)[idx].numpy() / c)[canary]  # what the step added per canary, in units of C
        assert set(np.round(added, 6)) <= {0.0, 1.0}
        adds[t, ids.numpy()[canary]] = added
        noise = torch.from_numpy(rng.normal(0, sigma * c, 60)).float()
        tracker.observe(p, sums[p] + noise, c)
        x[t, ids.numpy()[canary]] = added + noise[idx].numpy()[canary] / c
        refs.append(noise[idx].numpy()[reference] / c)
    result = tracker.result()
    included = np.asarray(result["included"], bool)
    sigma_hat = math.sqrt(np.mean(np.square(refs)))  # RMS of the reference coordinates: the noise alone
    assert result["sigma_hat"] == pytest.approx(sigma_hat, rel=1e-5) and abs(sigma_hat - sigma) < 0.25
    assert result["claimed_sigma"] == 2.0
    assert not adds[:, ~included].any() and adds[:, included].any()  # only included canaries are ever added
    # Σ_t log of the mixture density (1 − q)·N(0, σ̂²) + q·N(1, σ̂²) over N(0, σ̂²) at x_t: the Neyman-Pearson test
    ratio = np.log((1 - q) * norm.pdf(x, 0, sigma_hat) + q * norm.pdf(x, 1, sigma_hat)) - norm.logpdf(x, 0, sigma_hat)
    np.testing.assert_allclose(result["scores"], ratio.sum(0), rtol=1e-5, atol=1e-5)


class _LocalRelease:
    """A train_like_target with the local mechanism's own release at ε (or, with ``noiseless``, the inputs
    themselves), recording every call."""

    def __init__(self, epsilon: float, *, noiseless: bool = False) -> None:
        self.epsilon, self.noiseless, self.calls = epsilon, noiseless, []

    def release(self, data, *, seed):
        spec = LocalGaussian.spec(**LocalGaussian.recipes["smoke"])
        release, privacy = LocalGaussian().release(data, spec, target_epsilon=self.epsilon, delta=DELTA, seed=seed)
        if self.noiseless:
            release = dataclasses.replace(release, x=data.x.clone())
        self.calls.append((data, release, privacy))
        return release, privacy


def _recording_dpsgd_fit():
    """A ``train_like_target`` for DP-SGD (MLP, batch 2, one epoch, ε = 4) that records each run's record count and
    params: ``(fit, runs)``."""
    spec = DPSGD.spec(model="mlp", epochs=1, batch_size=2, lr=0.1)
    runs: list[tuple[int, dict]] = []

    def fit(data, *, seed, audit=None):
        trained = DPSGD().fit(data, spec, target_epsilon=4.0, delta=DELTA, seed=seed, device=CPU, audit=audit)
        runs.append((len(data), trained.params))
        return trained

    return fit, runs


def test_the_one_run_audit_runs_mechanism_does_not_depend_on_the_coins(split):
    """The one-run theorems need the mechanism fixed before the coins: the audit run's Poisson rate q, steps T and
    expected batch B come from the public n = members + m/2, whatever the coins included. At batch size 2, n = 400
    gives q = 1/200, T = 200, B = 2; from the training set's own size (300 members + the included canaries, different
    for each seed) q, T and B would move with the coins."""
    fit, runs = _recording_dpsgd_fit()

    attack = CanaryAudit(CanaryParams(num_canaries=200, gradient_canaries=0))
    for seed in (0, 1, 2):
        ctx = dataclasses.replace(context(None, split, seed=seed, train_like_target=OneAtATime(fit)),
                                  mechanism="dpsgd")
        out = attack.score(ctx)
        assert list(out) == ["canary"]  # no gradient canaries asked: the black-box design alone
    sizes = [n for n, _ in runs]
    assert len(set(sizes)) > 1 and all(300 < n < 500 for n in sizes)  # the coins included different numbers
    for _, params in runs:
        assert (params["public_size"], params["sample_rate"], params["steps"], params["expected_batch_size"]) \
            == (400, 1 / 200, 200, 2)
    assert GradientCanaries(0, 1, public_size=5).count == 0
    with pytest.raises(ValueError):
        GradientCanaries(0, 1)  # neither canaries nor a public size: nothing asked


def test_every_multi_run_run_is_the_same_mechanism(split):
    """The multi-run audit's runs with and without the input canary (N or N + 1 records) all take q, T and B from the
    public n = N + 1: at N = 30, batch 2, q = 1/16, T = 16, B = int(31/16) = 1 in every run."""
    from attacks.canaries.multi_run import MultiRunAudit, MultiRunParams

    fit, runs = _recording_dpsgd_fit()

    ctx = dataclasses.replace(context(None, split, seed=0, train_like_target=OneAtATime(fit)), mechanism="dpsgd")
    out = MultiRunAudit(MultiRunParams(runs=10, members=30)).score(ctx)
    assert set(out) == {"multi-run", "multi-run-whitebox"}
    assert {n for n, _ in runs} == {30, 31}
    assert {(p["public_size"], p["sample_rate"], p["steps"], p["expected_batch_size"]) for _, p in runs} \
        == {(31, 1 / 16, 16, 1)}


def test_local_canary_releases_what_its_labels_say(split):
    target = _LocalRelease(8.0, noiseless=True)
    res = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=500)).score(context(None, split, seed=0,
                                                                                train_like_target=target))
    [(probe, _, _), (data, _, _)] = target.calls  # the label weight's release of two fixed records comes first
    assert len(probe) == 2 and len(data) == 500
    np.testing.assert_allclose(data.x.flatten(1).norm(dim=1).numpy(), 1.0, rtol=1e-6)  # unit canaries
    # without noise the image score ⟨x_i, a_i⟩ is +1 when slot i released a_i and −1 when it released −a_i
    image = res.scores - res.design.label_weight * res.label_outcomes
    np.testing.assert_allclose(image, np.where(res.labels == 1, 1.0, -1.0), atol=1e-6)
    _fair_and_independent(res.labels)


def test_local_canary_design_and_scores_equal_the_straightforward_computation(split):
    """The audit flips signs by multiplying and projects in row blocks (no (m, d) float64 copies); its canaries and
    scores are the bits of ``where(coin, a, −a)`` and ``(z.double() * a.double()).sum(1)`` (three blocks here)."""
    target = _LocalRelease(3.0)
    res = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=10_000)).score(context(None, split, seed=5,
                                                                                   train_like_target=target))
    [_, (data, release, _)] = target.calls
    gen = torch.Generator().manual_seed(shadow_seed(5, "canary", 3))
    a = torch.randn((10_000, math.prod(split.members.input_shape)), generator=gen)
    a = a / a.norm(dim=1, keepdim=True)
    assert np.array_equal(_coins(10_000, gen), res.labels)
    first = torch.from_numpy(res.labels).bool()
    assert torch.equal(data.x.flatten(1), torch.where(first[:, None], a, -a))
    image = (release.x.flatten(1).double() * a.double()).sum(1).numpy()
    sigma, label_epsilon = release.params["sigma"], release.params["label_epsilon"]
    assert res.design.label_weight == sigma**2 * label_epsilon / 2
    assert np.array_equal(res.scores, image + res.design.label_weight * res.label_outcomes)


def test_local_canary_scores_are_the_gaussian_pair_they_claim(split):
    target = _LocalRelease(8.0)
    res = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=20_000)).score(context(None, split, seed=0,
                                                                                   train_like_target=target))
    [_, (_, release, privacy)] = target.calls
    sigma = release.params["sigma"]
    w = sigma**2 * release.params["label_epsilon"] / 2
    assert res.design == AuditDesign("multi-run", "black-box", size=20_000, relation="replace-one", gaussian=True,
                                     channels=("image", "label"), one_release=True,  # m slots, one release call
                                     label_weight=w)  # the scores: u + w·o, the certified pair's likelihood ratio
    assert res.privacy is privacy and privacy.relation == "replace-one"
    image = res.scores - w * res.label_outcomes
    for coin, mean in ((1, 1.0), (0, -1.0)):
        s = image[res.labels == coin]
        assert abs(s.mean() - mean) < 4 * sigma / math.sqrt(s.size)
        assert abs(s.std(ddof=1) / sigma - 1) < 4 / math.sqrt(2 * s.size)
        assert normaltest(s).pvalue > 1e-3
    # N(±1, σ²) is the Gaussian mechanism at μ = 2/σ: the image channel's ε, which the image's bounds and estimates
    # approach from below; the record's ε (image and randomized-response label, composed) is larger, the one compared,
    # and approached by the composed estimate of both channels
    image_epsilon = gaussian_epsilon(sigma=sigma, delta=DELTA, sensitivity=2.0)
    assert image_epsilon < privacy.epsilon
    block = membership_audit(res.scores, res.labels, delta=DELTA, design=res.design,
                             label_outcomes=res.label_outcomes)
    bounds = {b["method"]: b for b in block["bounds"]}
    # valid: Clopper-Pearson, and the one-run analyses (the m slots went through one release call); the Gaussian
    # analyses are estimates, however Gaussian these scores are (checked above), and never the audit's number
    assert {m for m, b in bounds.items() if b["valid"]} == {"clopper-pearson", "one-run", "f-dp"}
    assert {m for m, b in bounds.items() if b["evidence"] == "estimate"} == {"gaussian-pair", "gaussian-composed"}
    assert block["method"] in ("clopper-pearson", "one-run", "f-dp")
    # the valid analyses read both channels (the joint score), beyond what the image channel alone can give them
    image_only = membership_audit(image, res.labels, delta=DELTA, design=res.design.model_copy(
        update={"label_weight": None, "channels": ("image",)}))
    assert image_only["epsilon_lb"] <= image_epsilon and image_only["epsilon_lb"] < block["epsilon_lb"] \
        <= privacy.epsilon
    # and land near the ideal release's limit at this m (the best threshold fixed in advance), which it records
    assert 0.8 * res.extra["ideal_limit"] < block["epsilon_lb"] < 1.1 * res.extra["ideal_limit"] < privacy.epsilon
    composed = bounds.pop("gaussian-composed")["epsilon_lb"]
    assert 0.85 * image_epsilon < bounds["gaussian-pair"]["epsilon_lb"] <= image_epsilon  # the image channel's fit
    assert image_epsilon < composed <= privacy.epsilon and composed > 0.85 * privacy.epsilon


def test_weight_canary_scores_are_the_gaussian_pair_they_claim(split):
    spec = WeightNoise.spec(model="mlp", epochs=3, batch_size=32, lr=0.05, params={"code": 16, "ae_lr": 3e-3})
    runs = []

    def fit(data, *, seed, audit=None):
        runs.append(WeightNoise().fit(data, spec, target_epsilon=1.0, delta=DELTA, seed=seed, device=CPU, audit=audit))
        return runs[-1]

    target = TrainedModel(None, PrivacySpent.no_guarantee(claimed_epsilon=1.0), params={"weight_noise_std": 1.0})
    attack = WeightCanaryAudit(WeightCanaryParams(draws=1000))
    assert attack.applies_to(target)
    res = attack.score(context(target, split, seed=0, train_like_target=OneAtATime(fit)))
    assert res.design == AuditDesign("multi-run", "black-box", size=1000, relation="add-remove", gaussian=True)
    # the two clean runs (D, then D plus the canary) with the same seed, and their distance
    assert len(runs) == 2 and all(r.audit == {"weight_noise_std": 1.0} for r in runs)  # std = 1/ε claimed
    flat = [torch.cat([p.detach().double().reshape(-1) for p in r.model.autoencoder.parameters()]) for r in runs]
    distance = float((flat[1] - flat[0]).norm())
    assert res.extra["clean_distance"] == pytest.approx(distance, rel=1e-9) and distance > 0
    std = res.extra["noise_std"]
    assert std == 1.0
    _fair_and_independent(res.labels)
    for coin, mean in ((0, 0.0), (1, distance)):
        s = res.scores[res.labels == coin]
        assert abs(s.mean() - mean) < 4 * std / math.sqrt(s.size)
        assert abs(s.std(ddof=1) / std - 1) < 4 / math.sqrt(2 * s.size)
        assert normaltest(s).pvalue > 1e-3
