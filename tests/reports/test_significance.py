"""A membership attack "beats chance" only after a Bonferroni correction over every (model, attack, FPR level)
comparison (``reports.significance``); the p-value is exact under no membership signal."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta, binom

from attacks.analysis.statistics.metrics import membership_metrics
from bench.results import TprAtFpr
from reports.sections.verdict.notes import verdict_headline, verdict_notes
from reports.significance import chance_family, chance_p_value

N = 20_000  # members and non-members of each handcrafted attack


def test_p_value_is_exact_under_no_signal():
    """Members and non-members drawn from one distribution: the frequency of k or more members above the threshold
    of FPR <= 5 % (200 + 200 scores) matches the p-value."""
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(200, int), np.zeros(200, int)]
    ks = []
    for _ in range(2000):
        entry = membership_metrics(rng.normal(size=400), labels, fpr_levels=(0.05,))["tpr_at_fpr"]["0.05"]
        ks.append(round(entry["tpr"] * 200))
    for k in (12, 16, 20):
        p = chance_p_value(TprAtFpr(fpr=0.05, tpr=k / 200, lower=0.0, upper=1.0, measurable=True), 200, 200)
        assert np.mean(np.array(ks) >= k) == pytest.approx(p, abs=0.02), k
    assert chance_p_value(TprAtFpr(fpr=0.05, tpr=0.0, lower=0.0, upper=0.1, measurable=True), 200, 200) == 1.0


def _entry(level: float, k: int) -> dict:
    lower, upper = (beta.ppf(0.025, k, N - k + 1), beta.ppf(0.975, k + 1, N - k))
    return {"fpr": level, "tpr": k / N, "lower": float(lower), "upper": float(upper), "measurable": True}


def _doc(build, levels: dict[str, dict[float, int]]):
    """One model per mechanism name, one heuristic loss attack with N members and N non-members whose TPR at each
    FPR level is the given count over N."""
    rng = np.random.default_rng(0)
    runs = []
    for mech, counts in levels.items():
        a = build.attack("loss", rng, 50, 0.0)
        a.update(n_members=N, n_non_members=N)
        a["metrics"]["tpr_at_fpr"] = {str(lv): _entry(lv, k) for lv, k in counts.items()}
        priv = build.privacy(1.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
        runs.append(build.run(mech, 1.0, priv, 0.9, {"loss": a}))
    return build.results(runs)


def test_a_chance_level_tpr_is_not_a_finding_after_correction_while_a_strong_one_is(build):
    """"weak": 35 of 20,000 members above the threshold of 0.1 % FPR (at most 20 non-members): its 95 % interval
    excludes 0.1 %, but the exact p-value, about P[Bin(55, ½) ≥ 35] ≈ 0.03, is above 0.05 / 4 for the four
    comparisons (two models, 1 % and 0.1 % measurable; 0.01 % needs 100,000 non-members). "strong": 200 of 20,000
    at 0.1 % FPR, p far below it."""
    doc = _doc(build, {"weak": {0.01: 220, 0.001: 35}, "strong": {0.01: 2000, 0.001: 200}})
    weak = doc.results[0].attacks["loss"].metrics.tpr_at_fpr["0.001"]
    assert weak.lower > 0.001  # the uncorrected interval would call it above chance
    p_weak = chance_p_value(weak, N, N)
    assert p_weak == pytest.approx(binom.sf(34, 55, 0.5), rel=0.2) and 0.05 / 4 < p_weak < 0.05
    family = chance_family(doc)
    assert family.size == 4 and [t.result.mechanism for t in family.significant()] == ["strong", "strong"]
    headline = verdict_headline(doc)["mnist"][1]
    assert headline.startswith("Membership attacks beat chance on: strong at target ε 1 (loss, TPR 1.0% [")
    assert "at 0.1% FPR, 10× chance" in headline and "Bonferroni over 4 comparisons" in headline
    assert "weak" not in headline
    notes = {n.split(":", 1)[0]: n for n in verdict_notes(doc)["mnist"]}
    assert "no membership attack beats chance after Bonferroni over 4 comparisons" in notes["weak"]
    assert "× chance" not in notes["weak"] and "loss beats chance at target ε 1: TPR 1.0%" in notes["strong"]


def test_alone_the_same_tpr_is_significant(build):
    """The correction, not the test, makes the difference: the weak attack's 0.1 % level as the only comparison
    (p ≈ 0.03 <= 0.05) beats chance."""
    doc = _doc(build, {"weak": {0.001: 35}})
    assert chance_family(doc).size == 1
    headline = verdict_headline(doc)["mnist"][1]
    assert headline.startswith("Membership attacks beat chance on: weak at target ε 1 (loss, TPR 0.18% [")
    assert "Bonferroni over 1 comparison (" in headline


def test_no_measurable_level_says_so(build):
    doc = _doc(build, {"small": {}})
    assert chance_family(doc).size == 0
    assert verdict_headline(doc)["mnist"][1].startswith("TPR at ≤ 1% FPR is not measurable in this run")
