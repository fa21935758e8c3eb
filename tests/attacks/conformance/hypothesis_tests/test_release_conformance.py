"""Conformance of the release audits (``attacks.conformance.local``) on small real data (scikit-learn's 8×8
digits, the smoke recipes): through each mechanism's own ``release``, the correct mechanism passes every test and
each planted violation (the zoo's bugs by their name, ``helpers.zoo_bug``; variants the zoo does not hold by
monkeypatching the mechanism's own functions) is caught by the test that measures it; the tests whose level is not
exact hold it in simulation under the certified mechanism; the local-canary design's family holds the one-run
analyses. Expected values come from the certified parameters."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers import zoo_bug

import mechanisms.dpmix.mechanism as dpmix
import mechanisms.dpmix.mixing as mixing
import mechanisms.local.mechanism as local
from attacks.analysis import family, membership_audit
from attacks.canaries.dpmix import DPMixCanaryAudit, DPMixCanaryParams
from attacks.canaries.local import LocalCanaryAudit, ReleaseCanaryParams
from attacks.conformance.hypothesis_tests.release import (
    label_flip_test,
    mixing_dispersion,
    mixing_dispersion_test,
    region_ids,
)
from bench.core.data import ArrayDataset, load_dataset
from bench.core.design import AuditDesign

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
DELTA, SHAPE = 1e-5, (1, 8, 8)
FAMILY = 0.05 / 10  # a test's share of a 95 % Bonferroni family of about ten


@pytest.fixture(scope="module")
def members() -> ArrayDataset:
    pool, _ = load_dataset("digits")
    return ArrayDataset(pool.x[:300], pool.y[:300], pool.num_classes, pool.name)


CI_DPMIX = {"params": {"mixture_degree": 4, "sigma_y_scale": math.sqrt(2 / 64)}}  # the ci profile's DPMix training


def _ctx(mech, members, seed=0, recipe="smoke", epsilon=1.0):
    settings = mech.recipes["smoke"]
    if recipe == "ci":
        settings = {**settings, "params": {**settings["params"], **CI_DPMIX["params"]}}
    spec = mech.spec(**settings)

    class Target:
        def release(self, data, seed):
            return mech.release(data, spec, target_epsilon=epsilon, delta=DELTA, seed=seed)

        def audit_run(self, data, *, seed, request):
            return request.run(mech, data, spec, target_epsilon=epsilon, delta=DELTA)
    return SimpleNamespace(split=SimpleNamespace(members=members), seed=seed, train_like_target=Target())


def _local(members, seed=0):
    res = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=2000)).score(_ctx(local.LocalGaussian(), members, seed))
    return {t["name"]: t for t in res.conformance["tests"]}, res.conformance["measured_epsilon"]


def _dpmix(members, seed=0, recipe="smoke", epsilon=1.0):
    res = DPMixCanaryAudit(DPMixCanaryParams(num_canaries=8, releases=4)).score(_ctx(dpmix.DPMix(), members, seed,
                                                                                    recipe, epsilon))
    return {t["name"]: t for t in res.conformance["tests"]}, res.conformance["measured_epsilon"]


def test_the_correct_local_release_passes_every_test_and_its_measured_epsilon_is_near_the_certified(members):
    tests, eps = _local(members)
    assert len(tests) == 10 and all(t["p_value"] > FAMILY for t in tests.values()), tests
    scale, sigma = tests["input scale (the sensitivity's unit norm)"], tests["image noise σ, pooled"]["certified"]
    assert abs(scale["measured"] - 1.0) < 4 * sigma / math.sqrt(scale["n"])  # its standard error: σ/√m
    assert tests["image noise σ, pooled"]["measured"] == pytest.approx(tests["image noise σ, pooled"]["certified"],
                                                                      rel=0.01)
    assert eps["epsilon"] <= eps["certified"] and eps["epsilon"] > 0.8 * eps["certified"] and eps["p_value"] > FAMILY
    declared = tests["ε of the declared mechanism (conformance's own accountant)"]
    assert declared["p_value"] == 1.0 and declared["measured"] == pytest.approx(declared["certified"], rel=1e-3)


@pytest.mark.parametrize("plant, caught", [
    ("sigma 0.95", "image noise σ, pooled"),
    ("one region at 0.8", "image noise σ, smallest of 16 regions"),
    ("one pixel at 0.8", "image noise σ, smallest of 64 pixels"),
    ("labels kept more", "label keep rate"),
    ("labels shifted by one", "label replacements uniform"),
    ("released twice", "releases per record"),
    ("inputs at norm 0.5", "input scale (the sensitivity's unit norm)"),  # two-sided: not the declared release either
    ("another record's image", "input scale (the sensitivity's unit norm)"),  # each record released as its neighbour
])
def test_each_planted_local_violation_is_caught_by_its_test(members, monkeypatch, plant, caught):
    perturb, randomize = local.perturb, local.randomize_labels

    def scaled(x, *, sigma, generator):
        out = perturb(x, sigma=sigma, generator=generator)
        unit = local.L2Normalize()(x)
        factor = torch.ones(x.shape[1:])
        if plant == "sigma 0.95":
            factor[:] = 0.95
        elif plant == "one region at 0.8":
            factor.view(-1)[torch.from_numpy(region_ids(tuple(x.shape[1:])) == 5)] = 0.8
        elif plant == "one pixel at 0.8":
            factor.view(-1)[17] = 0.8
        out = unit + (out - unit) * factor
        if plant == "inputs at norm 0.5":
            out = out - unit / 2
        if plant == "another record's image":
            out = out - unit + unit.roll(1, 0)
        return torch.cat([out, out]) if plant == "released twice" else out

    def labels(y, *, epsilon, num_classes, generator):
        if plant == "labels kept more":  # a label ε that keeps it 1.5× as often (ci-sized m: a large shift)
            keep = local.randomized_response_keep(epsilon, num_classes) * 1.5
            epsilon = math.log(keep * (num_classes - 1) / (1 - keep))
        out = randomize(y, epsilon=epsilon, num_classes=num_classes, generator=generator)
        return torch.where(out != y, (y + 1) % num_classes, y) if plant == "labels shifted by one" else out

    monkeypatch.setattr(local, "perturb", scaled)
    monkeypatch.setattr(local, "randomize_labels", labels)
    if plant == "released twice":  # the labels of the doubled release: the first m are the canaries'
        monkeypatch.setattr(local, "randomize_labels", lambda y, **kw: randomize(y, **kw).repeat(2))
    tests, _ = _local(members)
    assert tests[caught]["p_value"] < FAMILY, tests[caught]
    if plant == "sigma 0.95":
        assert tests[caught]["detail"]["sd_upper"] < tests[caught]["certified"]


def test_the_correct_dpmix_release_passes_every_test_and_its_measured_epsilon_is_near_the_certified(members):
    tests, eps = _dpmix(members)
    assert len(tests) == 13 and all(t["p_value"] > FAMILY for t in tests.values() if t["deciding"]), tests
    shown = [name for name, t in tests.items() if not t["deciding"]]
    assert shown == ["noise shape"] and 0 < tests["noise shape"]["p_value"] <= 1  # its measured p-value, kept
    assert tests["mixture degree ℓ"]["measured"] == 8 and tests["mixtures released T"]["measured"] == 2000
    assert 0.95 * eps["certified"] < eps["epsilon"] <= eps["certified"] and eps["p_value"] > FAMILY
    weight = tests["mixing weight of the recorded records (1/ℓ)"]
    assert abs(weight["measured"] - 1 / 8) < 4 * weight["detail"]["standard_error"]
    assert tests["mixing weights' spread (record by record)"]["n"] > 0  # the held canaries' directions, read
    declared = tests["ε of the declared mechanism (conformance's own accountant)"]
    assert declared["p_value"] == 1.0 and declared["measured"] == pytest.approx(declared["certified"], rel=1e-6)


def test_further_local_releases_pool_the_label_draws_and_tighten_the_measured_epsilon(members):
    """``conformance_releases`` R: the keep rate and the replacements are read over R·m independent draws of the
    mechanism's own release (fresh seeds; the first release is the scored one), so the keep rate's lower limit, which
    bounds the measured ε at ε = 1, tightens (the default profile's 0.973 → 0.992 of the certified at R = 5)."""
    def run(r):
        res = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=2000, conformance_releases=r)).score(
            _ctx(local.LocalGaussian(), members))
        return res, {t["name"]: t for t in res.conformance["tests"]}, res.conformance["measured_epsilon"]

    one, tests_1, eps_1 = run(1)
    four, tests_4, eps_4 = run(4)
    assert np.array_equal(one.scores, four.scores)  # the scored release is the same; the further ones only measure
    assert tests_1["label keep rate"]["n"] == 2000 and tests_4["label keep rate"]["n"] == 4 * 2000
    assert tests_4["releases per record"]["measured"] == 2000 and eps_4["parameters"]["releases"] == 4
    assert all(t["p_value"] > FAMILY for t in tests_4.values() if t["deciding"])
    assert eps_1["epsilon"] < eps_4["epsilon"] <= eps_4["certified"]  # seed 0: 0.883 → 0.939 of the certified


@pytest.mark.parametrize("bug, audit, caught", [
    ("local-input-norm", _local, "input scale (the sensitivity's unit norm)"),  # images at norm 2, σ unchanged
    ("dpmix-uneven-mixing", _dpmix, "inclusion dispersion"),  # a fifth of the records mixed at twice the rate
])
def test_the_zoos_release_bugs_are_caught_by_their_test(members, bug, audit, caught):
    with zoo_bug(bug):
        tests, _ = audit(members)
    assert tests[caught]["p_value"] < FAMILY, tests[caught]


@pytest.mark.parametrize("plant, caught", [
    ("sigma 0.8", "image noise σ, pooled"),
    ("one region at 0.8", "image noise σ, smallest of 16 regions"),
    ("label noise 0.8", "label noise σ_y, pooled"),
    ("T under-counted", None),
    ("half the subset at 2/ℓ", "mixing weights' spread (record by record)"),  # the mean weight still 1/ℓ
    ("every record at 2/ℓ", "mixing weight of the recorded records (1/ℓ)"),
])
def test_each_planted_dpmix_violation_is_caught_by_its_test(members, monkeypatch, plant, caught):
    mix, account = dpmix.mix_release, dpmix.dpmix_epsilon

    def noisy(x, y_onehot, **kw):
        rx, ry, idx = mix(x, y_onehot, **kw)
        clean = mixing.mean_of_rows([x.float(), y_onehot.float()], idx)
        if plant in ("sigma 0.8", "one region at 0.8"):
            factor = torch.full((x.shape[1],), 0.8)
            if plant == "one region at 0.8":
                factor[:] = 1.0
                factor[torch.from_numpy(region_ids(SHAPE) == 6)] = 0.8
            rx = clean[:, : x.shape[1]] + (rx - clean[:, : x.shape[1]]) * factor
        if plant == "label noise 0.8":
            ry = clean[:, x.shape[1]:] + (ry - clean[:, x.shape[1]:]) * 0.8
        if plant in ("half the subset at 2/ℓ", "every record at 2/ℓ"):  # the subset recorded is idx, as before
            used = idx[:, : idx.shape[1] // 2] if plant.startswith("half") else idx
            scale = 2.0 * used.shape[1] / idx.shape[1]
            shift = scale * mixing.mean_of_rows([x.float(), y_onehot.float()], used) - clean
            rx, ry = rx + shift[:, : x.shape[1]], ry + shift[:, x.shape[1]:]
        return rx, ry, idx

    monkeypatch.setattr(dpmix, "mix_release", noisy)
    if plant == "T under-counted":  # the accountant counts a fifth fewer mixtures than are released
        monkeypatch.setattr(dpmix, "dpmix_epsilon", lambda **kw: account(**{**kw, "num_samples": kw["num_samples"]
                                                                            * 4 // 5}))
    weights = "2/ℓ" in plant  # the ci profile's DPMix at ε = 4: a record's shift of 1/ℓ is about its noise's sd
    tests, eps = _dpmix(members, recipe="ci" if weights else "smoke", epsilon=4.0 if weights else 1.0)
    if caught is None:
        assert eps["p_value"] < FAMILY and eps["epsilon"] > eps["certified"], eps
    else:
        assert tests[caught]["p_value"] < FAMILY, tests[caught]


def test_the_dispersion_and_label_flip_tests_hold_their_level_under_the_certified_mechanism():
    """Level by simulation: DPMix's own ``sample_subsets`` (uniform ℓ-subsets) and uniform RR replacements."""
    gen, rng = torch.Generator().manual_seed(0), np.random.default_rng(0)
    reps, n, ell, t = 400, 60, 8, 40
    p_mix = [mixing_dispersion_test("d", mixing_dispersion(torch.bincount(
        mixing.sample_subsets(n, ell, t, generator=gen).flatten(), minlength=n).numpy(), t, ell),
        releases=1, samples=t, size=ell, records=n)["p_value"] for _ in range(reps)]
    p_flip = [label_flip_test("f", rng.integers(1, 10, 300), 10)["p_value"] for _ in range(reps)]
    se = math.sqrt(0.05 * 0.95 / reps)
    for p in (p_mix, p_flip):
        assert np.mean(np.asarray(p) < 0.05) <= 0.05 + 2.5 * se
        assert np.mean(np.asarray(p) < 0.01) <= 0.01 + 2.5 * math.sqrt(0.01 * 0.99 / reps)


def test_local_canary_design_adds_the_one_run_analyses_valid_under_any_dependence():
    design = AuditDesign("multi-run", "black-box", size=400, relation="replace-one", gaussian=True, one_release=True,
                         channels=("image",))
    assert {"one-run", "f-dp", "clopper-pearson"} <= set(family(design))
    assert "one-run" not in family(design.model_copy(update={"one_release": False}))
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 400)
    block = membership_audit(rng.normal(2.0 * labels - 1, 0.5), labels, delta=DELTA, design=design)
    methods = {b["method"]: b for b in block["bounds"]}
    assert block["one_run"]["m"] == 400 and methods["one-run"]["valid"] and methods["f-dp"]["valid"]


@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 4, 4)])
def test_the_per_pixel_test_is_the_sidak_of_every_pixels_chi2_test(shape):
    """``image_noise_tests``' per-pixel test computes only the smallest Σx²'s χ² test; it is the Šidák reading of all
    d pixels' tests computed one by one (Σx² ~ s²·χ²_n per pixel, one pixel's noise at 0.9·s)."""
    from attacks.conformance.hypothesis_tests.noise import noise_test
    from attacks.conformance.hypothesis_tests.release import image_noise_tests, sidak_test

    rng = np.random.default_rng(3)
    d, n = math.prod(shape), 500
    ss = rng.chisquare(n, d)
    ss[d // 2] *= 0.81
    fast = image_noise_tests("x", ss, n, 1.0, shape)[-1]
    slow = sidak_test(fast["name"], [noise_test(f"pixel {i}", float(ss[i]), n, 1.0) for i in range(d)])
    assert fast == slow and fast["detail"]["worst"] == f"pixel {d // 2}" and fast["n"] == n * d


def _planted(name: str, audit, *caches):
    """``audit()`` with the zoo bug ``name`` planted, ``caches`` (the accountant's calibrations) cleared before and
    after, so that nothing calibrated without the bug is served with it, nor kept after it."""
    for cached in caches:
        cached.cache_clear()
    try:
        with zoo_bug(name):
            return audit()
    finally:
        for cached in caches:
            cached.cache_clear()


def test_a_bug_inside_local_noises_accountant_is_caught_against_the_declared_mechanism(members):
    """Issue 45, the zoo's ``local-accountant-sensitivity``: the accountant's image channel at sensitivity 1 (σ read
    as 2σ: calibrated too small, certified as the target); the conformance code's own accountant gives the declared σ
    at sensitivity 2 more than certified. And ``local-accountant-keep-rate``: the keep-rate formula the mechanism
    draws with at 2ε (the accountant's PLD still composes ε): refuted by the keep rate against the conformance code's
    own e^ε/(e^ε + k − 1), which a keep rate taken from the mechanism's formula could not see."""
    import mechanisms.accounting.gaussian as gaussian

    caches = (gaussian.local_record_epsilon, gaussian.local_record_sigma)
    tests, eps = _planted("local-accountant-sensitivity", lambda: _local(members), *caches)
    declared = tests["ε of the declared mechanism (conformance's own accountant)"]
    assert declared["p_value"] == 0.0 and declared["measured"] > 1.3 * declared["certified"]
    tests, eps = _planted("local-accountant-keep-rate", lambda: _local(members), *caches)
    assert tests["label keep rate"]["p_value"] < FAMILY and tests["label keep rate"]["measured"] > \
        1.15 * tests["label keep rate"]["certified"]  # ε_label = 0.25 kept as 0.5: 0.125 → 0.155
    declared = tests["ε of the declared mechanism (conformance's own accountant)"]
    assert declared["p_value"] == 1.0  # its ε is the declared one's: the keep rate is what is off


def test_a_bug_inside_dpmixs_accountant_is_caught_against_the_declared_mechanism(members):
    """Issue 45, the zoo's ``dpmix-accountant-sensitivity``: DPMix's accountant without its label channel (Δ_y = 0): σ
    calibrated too small, the certified ε the target; the conformance code's own dominating pair at the declared σ_x,
    σ_y, ℓ, T, n gives more (the ci profile's σ_y/σ_x = √(2/64): the label carries half of Δ²)."""
    import mechanisms.accounting.dpmix as accounting

    tests, eps = _planted("dpmix-accountant-sensitivity", lambda: _dpmix(members, recipe="ci"), accounting.dpmix_sigma)
    declared = tests["ε of the declared mechanism (conformance's own accountant)"]
    assert declared["p_value"] == 0.0 and declared["measured"] > 1.05 * declared["certified"]
    assert eps["p_value"] < FAMILY and eps["epsilon"] > eps["certified"]
