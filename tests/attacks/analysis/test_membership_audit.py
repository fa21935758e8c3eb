"""attacks.analysis: the Clopper-Pearson bound over a threshold family (Jagielski, Ullman, Oprea 2020) on hand-computed
cases and exact Beta quantiles, and ``membership_audit`` / ``audit_bounds``: which analyses each design allows, which
are valid (assumption-free: the design's family) and which are estimates (Gaussian: never valid, never the audit's
number), and the recomputation of stored bounds at another confidence.

Expected values come from closed forms derived in the comments or from ``scipy.stats.beta`` quantiles (the exact
Clopper-Pearson bounds: lower Beta⁻¹(α; k, n − k + 1), upper Beta⁻¹(1 − α; k + 1, n − k)), never from the code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

from attacks.analysis import (
    ESTIMATES,
    METHODS,
    NORMALITY_LEVEL,
    audit_bounds,
    best_epsilon,
    epsilon_lower_bound,
    estimates,
    family,
    gaussian_pair_epsilon,
    gaussian_valid,
    membership_audit,
    one_run_guesses,
    order_statistic_indices,
    threshold_counts,
)
from bench.core.design import AuditDesign
from bench.results import Audit


def _perfect_limit(n: int, confidence: float = 0.95) -> float:
    """By hand: n/n members found and 0/n non-members called members; the one-sided Clopper-Pearson bounds at level
    1 − α/2 (α = 1 − confidence) are TPR_lower = (α/2)^(1/n) and FPR_upper = 1 − (α/2)^(1/n)."""
    a = ((1 - confidence) / 2) ** (1 / n)
    return math.log(a / (1 - a))


def _cp_lower(k: int, n: int, level: float) -> float:
    return 0.0 if k == 0 else float(beta.ppf(1 - level, k, n - k + 1))


def _cp_upper(k: int, n: int, level: float) -> float:
    return 1.0 if k == n else float(beta.ppf(level, k + 1, n - k))


# ---- one threshold --------------------------------------------------------------------------------------


def test_perfect_single_threshold_matches_the_closed_form():
    # n = 10: 0.025^(1/10) = e^(−0.368888) = 0.691503; ln(0.691503 / 0.308497) = ln(2.24153) = 0.80715
    assert epsilon_lower_bound(10, 0, 0, 10) == pytest.approx(0.80715, abs=1e-5)
    for n in (10, 100, 10_000):
        assert epsilon_lower_bound(n, 0, 0, n) == pytest.approx(_perfect_limit(n), rel=1e-9)
    assert epsilon_lower_bound(1, 0, 0, 1) == 0.0  # ln(0.025 / 0.975) < 0: one example proves nothing


def test_bound_equals_exact_beta_quantiles():
    # one-sided bounds at 97.5 % each (95 % jointly), from the Beta quantiles
    lo, hi = _cp_lower(90, 100, 0.975), _cp_upper(10, 100, 0.975)
    assert epsilon_lower_bound(90, 10, 10, 90) == pytest.approx(math.log(lo / hi), rel=1e-9)
    # with δ: ln((TPR_lower − δ) / FPR_upper); the mirror direction (TNR vs FNR) is the same here by symmetry
    assert epsilon_lower_bound(90, 10, 10, 90, delta=0.1) == pytest.approx(math.log((lo - 0.1) / hi), rel=1e-9)
    # at 99 %: each bound at 99.5 %
    lo, hi = _cp_lower(90, 100, 0.995), _cp_upper(10, 100, 0.995)
    assert epsilon_lower_bound(90, 10, 10, 90, confidence=0.99) == pytest.approx(math.log(lo / hi), rel=1e-9)


def test_the_other_direction_counts():
    # tp = 100 of 100, fp = 50 of 100: "called member" gives ln(lo(100/100) / hi(50/100)), small; the mirror test
    # ("called non-member") gives ln(TNR_lower / FNR_upper) = ln((1 − hi(50/100)) / (1 − lo(100/100))), large.
    lo100, hi50 = 0.025 ** (1 / 100), _cp_upper(50, 100, 0.975)
    called_member, called_non_member = math.log(lo100 / hi50), math.log((1 - hi50) / (1 - lo100))
    assert called_non_member > 2 > 1 > called_member
    assert epsilon_lower_bound(100, 0, 50, 50) == pytest.approx(called_non_member, rel=1e-9)
    # mirror image (members and non-members swapped, predictions inverted): the first direction carries it
    assert epsilon_lower_bound(50, 50, 0, 100) == pytest.approx(called_non_member, rel=1e-9)


def test_no_bound_follows_gives_zero():
    assert epsilon_lower_bound(50, 50, 50, 50) == 0.0  # chance
    assert epsilon_lower_bound(5, 95, 0, 100, delta=0.5) == 0.0  # δ swallows both directions
    assert epsilon_lower_bound(0, 10, 10, 0) == 0.0  # everything wrong


def test_monotone_in_sample_size_and_below_the_plug_in_value():
    bounds = [epsilon_lower_bound(9 * k, k, k, 9 * k) for k in (1, 3, 10, 30, 100, 1000)]
    assert all(a < b for a, b in zip(bounds, bounds[1:], strict=False))
    assert bounds[-1] < math.log(9)  # never above the plug-in value ln(0.9 / 0.1)


@pytest.mark.parametrize("bad", [(-1, 1, 1, 1), (1.5, 1, 1, 1), (0, 0, 1, 1), (1, 1, 0, 0)])
def test_invalid_counts_raise(bad):
    with pytest.raises(ValueError):
        epsilon_lower_bound(*bad)


def test_invalid_delta_or_confidence_raise():
    with pytest.raises(ValueError):
        epsilon_lower_bound(1, 1, 1, 1, delta=1.0)
    with pytest.raises(ValueError):
        epsilon_lower_bound(1, 1, 1, 1, confidence=1.0)


# ---- the family of thresholds ---------------------------------------------------------------------------


def test_order_statistic_indices_by_hand():
    # n = 200: 0 and round(10^(0.2·i)) for i = 0..10 (log-spaced from 1 to 100)
    assert order_statistic_indices(200) == [0, 1, 2, 3, 4, 6, 10, 16, 25, 40, 63, 100]
    assert order_statistic_indices(4) == [0, 1, 2]  # geomspace(1, 2, 11) rounds to 1 and 2


def test_threshold_counts_by_hand():
    scores = np.array([5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 9.0])
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    # high = member, threshold the (j+1)-th highest non-member (9, 3, 2): members strictly above it, fp = j
    # low = non-member, threshold the (j+1)-th lowest member (5, 6, 7): non-members strictly below it, fn = j
    assert threshold_counts(scores, labels) == [[0, 4, 0, 4], [4, 0, 1, 3], [4, 0, 2, 2],
                                                [4, 0, 1, 3], [3, 1, 1, 3], [2, 2, 1, 3]]


def test_family_is_fixed_by_n_and_bonferroni_corrected():
    rng = np.random.default_rng(0)
    counts = threshold_counts(rng.normal(size=400), np.repeat([1, 0], 200))
    assert len(counts) == 2 * 12  # 12 indices per direction for n = 200, whatever the scores
    assert all(sum(c[:2]) == 200 and sum(c[2:]) == 200 for c in counts)
    # a family of F perfect thresholds: each tested at 1 − 0.05/F, the closed form at that level
    for size in (1, 24):
        got = best_epsilon([[500, 0, 0, 500]] * size, delta=0.0)
        assert got == pytest.approx(_perfect_limit(500, confidence=1 - 0.05 / size), rel=1e-9)
    assert best_epsilon([], delta=0.0) == 0.0


def test_random_attacker_gives_zero():
    rng = np.random.default_rng(1)
    design = AuditDesign(kind="multi-run", relation="add-remove")
    values = [membership_audit(rng.normal(size=2000), np.repeat([1, 0], 1000), delta=1e-5, design=design)
              ["epsilon_lb"] for _ in range(20)]
    assert sum(v == 0.0 for v in values) >= 18 and max(values) < 0.3


@pytest.mark.parametrize("n", [100, 1000, 10_000])
def test_perfect_attacker_reaches_the_bonferroni_limit(n):
    scores = np.concatenate([np.arange(n) + n + 1.0, np.arange(n, dtype=float)])
    labels = np.repeat([1, 0], n)
    got = membership_audit(scores, labels, delta=0.0, design=AuditDesign(kind="multi-run"))["epsilon_lb"]
    family = len(threshold_counts(scores, labels))
    assert family == 2 * len(order_statistic_indices(n)) <= 24
    # the price of searching the family: α/2 per bound becomes α/(2·family), about 0.6 nats at large n
    assert got == pytest.approx(_perfect_limit(n, confidence=1 - 0.05 / family), rel=1e-9)
    assert _perfect_limit(n) - 0.7 < got < _perfect_limit(n)


# ---- designs, validity and recomputation ----------------------------------------------------------------


def _gaussian_scores(n: int, mu: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(mu, 1, n), rng.normal(0, 1, n)]), np.repeat([1, 0], n)


def _bimodal_scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Clearly non-Gaussian scores: each group a 50/50 mixture of N(±4, 0.5²) (shifted by 1 for members)."""
    rng = np.random.default_rng(seed)
    modes = rng.choice([-4.0, 4.0], size=2 * n)
    scores = modes + rng.normal(0, 0.5, 2 * n) + np.repeat([1.0, 0.0], n)
    return scores, np.repeat([1, 0], n)


def _by_method(block: dict) -> dict:
    return {b["method"]: b for b in block["bounds"]}


def test_heuristic_design_has_no_valid_bound():
    scores, labels = _gaussian_scores(2000, 3.0, seed=0)
    block = membership_audit(scores, labels, delta=1e-5)  # no design: one model's natural members
    assert [b["method"] for b in block["bounds"]] == ["clopper-pearson"]
    [bound] = block["bounds"]
    assert not bound["valid"] and not bound["parametric"] and bound["assumption"] is None
    # shown, never a verdict: the heuristic bound is the audit's number, and there is nothing to recompute
    assert block["epsilon_lb"] == bound["epsilon_lb"] == best_epsilon(block["counts"], delta=1e-5) > 1
    assert audit_bounds(Audit(**block), confidence=0.95) == {}
    assert "one_run" not in block and "profile_rejected" not in block


def test_multi_run_gaussian_design_gaussian_analyses_are_estimates():
    """Scores Gaussian by construction and a passing normality test do not make a Gaussian analysis a bound: the GDP
    fit and the Gaussian pair are estimates (shown with their assumption), Clopper-Pearson alone is valid."""
    scores, labels = _gaussian_scores(3000, 1.5, seed=1)
    gaussian = AuditDesign(kind="multi-run", threat_model="black-box", gaussian=True, relation="add-remove")
    bounds = _by_method(membership_audit(scores, labels, delta=1e-5, design=gaussian))
    assert set(bounds) == {"clopper-pearson", "gdp-fit", "gaussian-pair"}
    assert bounds["gaussian-pair"]["fit"]["normality_p"] >= NORMALITY_LEVEL  # the assumption stands its test ...
    assert {m: (b["valid"], b["evidence"]) for m, b in bounds.items()} == {  # ... and is still only an estimate
        "clopper-pearson": (True, "valid"), "gdp-fit": (False, "estimate"), "gaussian-pair": (False, "estimate")}
    assert [m for m, b in bounds.items() if b["parametric"]] == ["gdp-fit", "gaussian-pair"]
    assert all(b["assumption"] == METHODS[m][1] for m, b in bounds.items())
    # the estimates read more than the valid bound here (that is what makes them tempting)
    assert bounds["gaussian-pair"]["epsilon_lb"] > bounds["clopper-pearson"]["epsilon_lb"] > 0
    # without "Gaussian by construction", and with clearly bimodal scores: the same evidence kinds
    plain = _by_method(membership_audit(scores, labels, delta=1e-5,
                                        design=gaussian.model_copy(update={"gaussian": False})))
    bimodal = _by_method(membership_audit(*_bimodal_scores(3000, seed=2), delta=1e-5, design=gaussian))
    assert bimodal["gaussian-pair"]["fit"]["normality_p"] < NORMALITY_LEVEL
    for block in (plain, bimodal):
        assert [m for m, b in block.items() if b["valid"]] == ["clopper-pearson"]
        assert block["gdp-fit"]["evidence"] == block["gaussian-pair"]["evidence"] == "estimate"


def test_the_bonferroni_family_holds_only_assumption_free_analyses():
    """The divisor k of an audit's analyses is its family of valid analyses, fixed by the design before the scores;
    the estimates (``estimates``) are computed beside them at the audit's own confidence and cost them nothing."""
    gaussian = AuditDesign(kind="multi-run", threat_model="black-box", gaussian=True, relation="add-remove")
    assert family(gaussian) == ("clopper-pearson",)
    assert estimates(gaussian) == ("gdp-fit", "gaussian-pair")
    one_run = gaussian.model_copy(update={"kind": "one-run"})
    assert family(one_run) == ("one-run", "f-dp") and estimates(one_run) == ("f-dp-gaussian", "gaussian-pair")
    labelled = gaussian.model_copy(update={"channels": ("image", "label")})
    assert family(labelled) == ("clopper-pearson",) and estimates(labelled)[-1] == "gaussian-composed"
    assert family(gaussian.model_copy(update={"one_release": True})) == ("clopper-pearson", "one-run", "f-dp")
    white_box = AuditDesign(kind="one-run", threat_model="white-box")
    assert family(white_box) == ("one-run", "f-dp")
    assert set(estimates(white_box)) == {"f-dp-gaussian", "gaussian-llr", "gaussian-pair"}
    assert family(AuditDesign(kind="heuristic", gaussian=True)) == estimates(AuditDesign(kind="heuristic")) == ()
    for design in (gaussian, one_run, labelled, white_box):  # no analysis is both, and no estimate is assumption-free
        assert not set(family(design)) & set(estimates(design))
        assert all(METHODS[m][1] is None for m in family(design))
        assert all(METHODS[m][1] is not None and m in ESTIMATES for m in estimates(design))
    normal_scores = _gaussian_scores(3000, 1.5, seed=1)
    normal = membership_audit(*normal_scores, delta=1e-5, design=gaussian)
    bimodal = membership_audit(*_bimodal_scores(3000, seed=2), delta=1e-5, design=gaussian)
    for block in (normal, bimodal):  # k = 1 whatever the normality test says: Clopper-Pearson at 95 %
        assert [b["valid"] for b in block["bounds"]] == [True, False, False]
        assert block["method_confidence"] == pytest.approx(0.95)
        assert block["epsilon_lb"] == pytest.approx(best_epsilon(block["counts"], delta=1e-5, confidence=0.95))
    # an estimate is computed at the audit's confidence, not at a Bonferroni share of it
    pair = _by_method(normal)["gaussian-pair"]
    assert pair["epsilon_lb"] == pytest.approx(
        gaussian_pair_epsilon(*normal_scores, delta=1e-5, confidence=0.95)["epsilon_lb"], rel=1e-9)
    # a one-run design: k = 2
    rng = np.random.default_rng(8)
    coins = (rng.random(1000) < 0.5).astype(int)
    assert membership_audit(coins + rng.normal(0, 1, 1000), coins, delta=1e-5, design=one_run)[
        "method_confidence"] == pytest.approx(1 - 0.05 / 2)
    # too few scores for a Gaussian fit: the pair is recorded as 0, an estimate, and the family is unchanged
    tiny = membership_audit([3.0, 2.0, 1.0, 0.0], [1, 1, 0, 0], delta=1e-5, design=gaussian)
    pair = _by_method(tiny)["gaussian-pair"]
    assert pair["epsilon_lb"] == 0.0 and not pair["valid"] and pair["fit"] is None
    assert tiny["method_confidence"] == pytest.approx(0.95)


def test_gaussian_valid_needs_every_condition():
    design = AuditDesign(kind="multi-run", gaussian=True)
    assert gaussian_valid(design, NORMALITY_LEVEL)
    assert not gaussian_valid(design, NORMALITY_LEVEL / 2)
    assert not gaussian_valid(design, None)
    assert not gaussian_valid(design.model_copy(update={"gaussian": False}), 0.5)
    assert not gaussian_valid(design.model_copy(update={"kind": "heuristic"}), 0.5)
    assert gaussian_valid(design.model_copy(update={"kind": "one-run"}), 0.5)


def test_epsilon_lb_is_the_tightest_assumption_free_bound_even_where_an_estimate_is_larger():
    for scores, labels in (_bimodal_scores(3000, seed=3), _gaussian_scores(3000, 2.0, seed=4)):
        block = membership_audit(scores, labels, delta=1e-5, design=AuditDesign(kind="multi-run", gaussian=True))
        valid = [b for b in block["bounds"] if b["valid"]]
        assert [b["method"] for b in valid] == ["clopper-pearson"]
        assert block["method"] == "clopper-pearson" and block["epsilon_lb"] == valid[0]["epsilon_lb"]
    # on Gaussian scores the estimates read far more than the valid bound; they never become the audit's number
    larger = [b for b in block["bounds"] if b["evidence"] == "estimate" and b["epsilon_lb"] > 1.5 * block["epsilon_lb"]]
    assert {b["method"] for b in larger} == {"gdp-fit", "gaussian-pair"}
    # one-run: the larger of one-run and f-dp, whatever f-dp-gaussian, the pair or gaussian-llr read
    rng = np.random.default_rng(9)
    coins = (rng.random(2000) < 0.5).astype(int)
    block = membership_audit(3 * coins + rng.normal(0, 1, 2000), coins, delta=1e-5,
                             design=AuditDesign(kind="one-run", threat_model="white-box"))
    by = _by_method(block)
    assert block["method"] in ("one-run", "f-dp")
    assert block["epsilon_lb"] == max(by["one-run"]["epsilon_lb"], by["f-dp"]["epsilon_lb"])
    assert max(b["epsilon_lb"] for b in block["bounds"] if b["evidence"] == "estimate") > block["epsilon_lb"]


def test_one_run_design_block():
    rng = np.random.default_rng(5)
    included = (rng.random(1000) < 0.5).astype(int)
    scores = included + rng.normal(0, 0.5, 1000)
    design = AuditDesign(kind="one-run", threat_model="white-box", relation="add-remove")
    block = membership_audit(scores, included, delta=1e-5, design=design, profile=[[1.0, 1e-5], [0.5, 1e-2]])
    assert block["one_run"] == {"m": 1000, "guesses": one_run_guesses(scores, included)}
    assert isinstance(block["profile_rejected"], bool)
    bounds = _by_method(block)
    # white-box: the Gaussian pair and the μ-GDP analysis of log-likelihood ratios are computed too, as estimates
    # (these excluded scores are Gaussian: the llr's shape test passes, and it is still no bound)
    assert set(bounds) == {"one-run", "f-dp", "f-dp-gaussian", "gaussian-pair", "gaussian-llr"}
    assert [m for m, b in bounds.items() if b["valid"]] == ["one-run", "f-dp"]
    assert bounds["gaussian-llr"]["fit"]["shape_excluded_p"] >= NORMALITY_LEVEL
    assert all(bounds[m]["evidence"] == "estimate" for m in ("f-dp-gaussian", "gaussian-pair", "gaussian-llr"))
    # a black-box one-run design reads no Gaussian pair
    black_box = design.model_copy(update={"threat_model": "black-box"})
    assert "gaussian-pair" not in _by_method(membership_audit(scores, included, delta=1e-5, design=black_box))


@pytest.mark.parametrize("kind", ["one-run", "multi-run"])
def test_audit_bounds_recompute_the_stored_bounds(kind):
    scores, labels = _gaussian_scores(1500, 2.0, seed=6)
    design = AuditDesign(kind=kind, gaussian=True)
    block = membership_audit(scores, labels, delta=1e-5, design=design)
    stored = {b["method"]: b["epsilon_lb"] for b in block["bounds"] if b["valid"]}
    assert tuple(stored) == family(design)  # the valid ones are exactly the family; estimates are not recomputed
    k = len(stored)
    assert k == (2 if kind == "one-run" else 1)
    # each of the k valid analyses is made at 1 − 0.05/k, so that the tightest of them holds at 95 %
    assert block["confidence"] == 0.95 and block["method_confidence"] == pytest.approx(1 - 0.05 / k)
    audit = Audit(**block, design=design)  # as results.json stores it
    same = audit_bounds(audit, confidence=audit.method_confidence)
    assert same.keys() == stored.keys()
    for method, value in stored.items():
        assert same[method] == pytest.approx(value, rel=1e-9, abs=1e-12), method
    stricter = audit_bounds(audit, confidence=0.999)
    for method, value in stored.items():
        assert stricter[method] < value - 1e-3, method
