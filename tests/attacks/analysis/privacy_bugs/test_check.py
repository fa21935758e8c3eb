"""attacks.analysis.privacy_bugs.check.privacy_bugs on hand-built results: only valid (assumption-free) bounds of
one-run / multi-run designs, tested against an ε of the same neighbouring relation, decide a privacy bug; an estimate (a
Gaussian analysis, the pooled μ-GDP analysis across seeds) is no comparison and never a bug, however large; every
comparison is Bonferroni-corrected over the run; a mechanism without a guarantee has its claim refuted instead; the
audited run's privacy is the one compared; a one-run design also tests the accountant's whole certified curve.

Expected bounds are the audit functions' own at the Bonferroni level 1 − 0.05/M with M counted by hand here (the
functions themselves are tested against independent implementations in tests/attacks/analysis/test_membership_audit.py
and tests/attacks/analysis/statistics/)."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.analysis import best_epsilon, best_one_run_epsilon, fdp_epsilon, fdp_gdp_epsilon, membership_audit
from attacks.analysis.audits.pooled import pool_groups, pooled_audits
from attacks.analysis.privacy_bugs.check import privacy_bugs
from bench.results import AttackRecord, Audit, Bound, Design, Metrics, OneRun, PrivacyRecord, Roc, RunResult, Timings

DELTA = 1e-5
WHITE_BOX = {"kind": "one-run", "threat_model": "white-box", "size": 1000, "relation": "add-remove"}
BLACK_BOX = {**WHITE_BOX, "threat_model": "black-box"}


def _privacy(epsilon: float | None, *, relation: str = "add-remove", profile=(), claimed: float | None = None
             ) -> PrivacyRecord:
    if epsilon is None:
        return PrivacyRecord(epsilon=None, delta=None, accountant="none", guarantee="none", claimed_epsilon=claimed)
    return PrivacyRecord(epsilon=epsilon, delta=DELTA, accountant="opacus-prv", guarantee="central-dp",
                         relation=relation, profile=[list(p) for p in profile])


def _record(audit: Audit, audited: PrivacyRecord | None = None) -> AttackRecord:
    return AttackRecord(attack="canary", n_members=500, n_non_members=500,
                        metrics=Metrics(auc=0.5, balanced_accuracy=0.5, advantage=0.0, tpr_at_fpr={}),
                        roc=Roc(fpr=[0.0, 1.0], tpr=[0.0, 1.0]), audit=audit, audited_privacy=audited)


def _result(attacks: dict[str, AttackRecord], privacy: PrivacyRecord | None, *, status: str = "ok", seed: int = 0
            ) -> RunResult:
    return RunResult(dataset="digits", mechanism="dpsgd", seed=seed, target_epsilon=1.0, model="mlp", spec={},
                     status=status, privacy=privacy, attacks=attacks, timings=Timings(train_s=0.0))


def _audit(scores, labels, design: dict, profile=None) -> Audit:
    """The audit block exactly as the runner stores it (bench.runner.cells)."""
    d = Design(**design)
    return Audit(**membership_audit(scores, labels, delta=DELTA, design=d, profile=profile), design=d)


def _canaries(seed: int = 0, m: int = 1000, mu: float = 6.0):
    """m canaries with fair coins and well-separated scores: the one-run bounds reach ~4 (after Bonferroni)."""
    rng = np.random.default_rng(seed)
    coins = (rng.random(m) < 0.5).astype(int)
    return mu * coins + rng.normal(0, 1, m), coins


def _hand_audit(one_run_rows, *, gaussian_valid: bool) -> Audit:
    """A one-run audit of m = 1000, scores Gaussian by design, with the given guessing rules; f-dp-gaussian stored as
    valid (as a file from before the one rule may say) or not. Its family has 2 members either way."""
    bounds = [Bound(method="one-run", epsilon_lb=0.0, parametric=False, valid=True),
              Bound(method="f-dp", epsilon_lb=0.0, parametric=False, valid=True),
              Bound(method="f-dp-gaussian", epsilon_lb=0.0, parametric=True, valid=gaussian_valid)]
    return Audit(delta=DELTA, confidence=0.95, method_confidence=1 - 0.05 / 2, counts=[], epsilon_lb=0.0,
                 method="f-dp", bounds=bounds, design=Design(**WHITE_BOX, gaussian=True),
                 one_run=OneRun(m=1000, guesses=one_run_rows))


def test_a_valid_one_run_bound_above_the_accountant_is_a_bug():
    scores, coins = _canaries()
    audit = _audit(scores, coins, WHITE_BOX)
    # one-run and f-dp are valid; gaussian-pair, f-dp-gaussian and the μ-GDP analysis of the white-box scores are
    # estimates, even on these Gaussian scores, where they read more
    assert [b.method for b in audit.bounds if b.valid] == ["one-run", "f-dp"]
    estimates = {b.method: b.epsilon_lb for b in audit.bounds if b.evidence == "estimate"}
    assert set(estimates) == {"f-dp-gaussian", "gaussian-pair", "gaussian-llr"}
    results = [_result({"canary-whitebox": _record(audit)}, _privacy(1.0)),
               _result({"canary-whitebox": _record(audit)}, _privacy(100.0), seed=1)]
    bugs, claims, comparisons = privacy_bugs(results)
    assert comparisons == 4 and claims == []  # 2 per model
    [bug] = bugs
    level = 1 - 0.05 / 4
    rules = audit.one_run.guesses
    values = {"one-run": best_one_run_epsilon(1000, rules, delta=DELTA, confidence=level),
              "f-dp": fdp_epsilon(1000, rules, delta=DELTA, confidence=level)}
    assert min(values.values()) > 2  # both refute ε = 1; the stronger one is reported
    assert bug.method == max(values, key=values.get) and bug.lower_bound == pytest.approx(max(values.values()))
    assert max(estimates.values()) > bug.lower_bound  # an estimate read more, and is not what was reported
    assert (bug.seed, bug.attack, bug.mechanism, bug.target_epsilon) == (0, "canary-whitebox", "dpsgd", 1.0)
    assert (bug.threat_model, bug.design, bug.relation) == ("white-box", "one-run, m = 1000", "add-remove")
    assert (bug.epsilon, bug.delta, bug.accountant) == (1.0, DELTA, "opacus-prv")
    assert bug.confidence == pytest.approx(level)


def test_other_relations_heuristic_designs_and_failed_runs_are_not_compared():
    scores, coins = _canaries()
    replace = _result({"canary": _record(_audit(scores, coins, WHITE_BOX))}, _privacy(1.0, relation="replace-one"))
    heuristic = _result({"loss": _record(_audit(scores, coins, {"kind": "heuristic", "size": 1000}))}, _privacy(1.0))
    failed = _result({"canary": _record(_audit(scores, coins, WHITE_BOX))}, _privacy(1.0), status="failed")
    unknown = _result({"canary": _record(_audit(scores, coins, WHITE_BOX))}, None)
    assert heuristic.attacks["loss"].audit.epsilon_lb > 3  # the same evidence, only heuristic
    assert privacy_bugs([replace, heuristic, failed, unknown]) == ([], [], 0)
    # the same audit against an add/remove ε is a bug
    bugs, _, comparisons = privacy_bugs([replace, _result(replace.attacks, _privacy(1.0))])
    assert comparisons == 2 and len(bugs) == 1


def test_a_parametric_bound_never_decides():
    """An f-dp-gaussian bound that reads above the accountant's ε is an estimate, even where a stored file calls it
    valid (a results.json from before the one rule): no comparison, no bug; the assumption-free bounds decide."""
    # 600 of 600 guesses right among m = 1000 (one rule): one-run and f-dp certify ~5, the μ-GDP curve ~9
    rows = [[300, 300, 600, 600]]
    gaussian = fdp_gdp_epsilon(1000, rows, delta=DELTA, confidence=1 - 0.05 / 2)
    valid = max(best_one_run_epsilon(1000, rows, delta=DELTA, confidence=1 - 0.05 / 2),
                fdp_epsilon(1000, rows, delta=DELTA, confidence=1 - 0.05 / 2))
    assert gaussian > 8.5 > 7.0 > valid > 4.0
    for stored_valid in (False, True):
        audit = _hand_audit(rows, gaussian_valid=stored_valid)
        [read] = [b for b in audit.bounds if b.method == "f-dp-gaussian"]
        assert not read.valid and read.evidence == "estimate"  # enforced when read
        # the estimate (~9) is above ε = 7, the valid bounds (~5) are not: no bug, 2 comparisons
        assert privacy_bugs([_result({"canary": _record(audit)}, _privacy(7.0))]) == ([], [], 2)
        # ε = 4: refuted by the valid bounds, and the bug names one of them
        [bug], _, comparisons = privacy_bugs([_result({"canary": _record(audit)}, _privacy(4.0))])
        assert comparisons == 2 and bug.method in ("one-run", "f-dp") and bug.lower_bound == pytest.approx(valid)


def test_the_run_level_count_does_not_depend_on_the_normality_test():
    """M counts the valid analyses of each audit's design-fixed family: Clopper-Pearson alone for a multi-run design,
    whether the Gaussian estimates' normality test passes or rejects."""
    rng = np.random.default_rng(7)
    coins = (rng.random(4000) < 0.5).astype(int)
    gaussian = {"kind": "multi-run", "size": 4000, "relation": "add-remove", "gaussian": True}
    normal = _audit(coins + rng.normal(0, 1, 4000), coins, gaussian)
    bimodal = _audit(coins + rng.choice([-4.0, 4.0], 4000) + rng.normal(0, 0.5, 4000), coins, gaussian)
    assert next(b.fit for b in normal.bounds if b.method == "gaussian-pair")["normality_p"] >= 0.01
    assert next(b.fit for b in bimodal.bounds if b.method == "gaussian-pair")["normality_p"] < 0.01
    assert [b.valid for b in normal.bounds] == [b.valid for b in bimodal.bounds] == [True, False, False]
    for audit in (normal, bimodal):
        assert privacy_bugs([_result({"multi-run": _record(audit)}, _privacy(10.0))]) == ([], [], 1)
    both = [_result({"multi-run": _record(normal)}, _privacy(10.0)),
            _result({"multi-run": _record(bimodal)}, _privacy(10.0), seed=1)]
    assert privacy_bugs(both)[2] == 2


def test_bonferroni_over_the_run_clears_a_marginal_bound():
    counts = [[1000, 0, 0, 1000]] * 24  # a perfect attacker's threshold family over 1000 + 1000 runs
    bounds = [Bound(method="clopper-pearson", epsilon_lb=0.0, parametric=False, valid=True)]
    design = Design(kind="multi-run", size=2000, relation="add-remove")
    audit = Audit(delta=DELTA, confidence=0.95, method_confidence=0.95, counts=counts, epsilon_lb=0.0, bounds=bounds,
                  design=design)
    marginal = best_epsilon(counts, delta=DELTA, confidence=0.95) - 0.01  # refuted at 95 %, not after correcting
    alone = _result({"multi-run": _record(audit)}, _privacy(marginal))
    [bug], _, comparisons = privacy_bugs([alone])
    assert comparisons == 1 and bug.lower_bound == pytest.approx(marginal + 0.01)
    assert bug.design == "multi-run, R = 2000"
    others = [_result({"multi-run": _record(audit)}, _privacy(100.0), seed=s) for s in range(1, 51)]
    bugs, _, comparisons = privacy_bugs([alone, *others])
    assert comparisons == 51 and bugs == []
    assert best_epsilon(counts, delta=DELTA, confidence=1 - 0.05 / 51) < marginal  # why: the corrected bound


def test_a_refuted_claim_is_not_a_bug():
    # a weight-noise-like record: no guarantee, a source's claimed ε = 1, a multi-run Gaussian audit whose
    # assumption-free bound refutes it (the Gaussian estimates read far more: not what is reported)
    rng = np.random.default_rng(1)
    scores = np.concatenate([rng.normal(2.5, 1, 2000), rng.normal(0, 1, 2000)])
    design = {"kind": "multi-run", "size": 4000, "relation": "add-remove", "gaussian": True}
    audit = _audit(scores, np.repeat([1, 0], 2000), design)
    assert [b.method for b in audit.bounds if b.valid] == ["clopper-pearson"] and audit.epsilon_lb > 1.5
    assert min(b.epsilon_lb for b in audit.bounds if b.evidence == "estimate") > 2 * audit.epsilon_lb
    claimed = _result({"weight-canary": _record(audit)}, _privacy(None, claimed=1.0))
    bugs, [claim], comparisons = privacy_bugs([claimed])
    assert bugs == [] and comparisons == 1
    assert (claim.epsilon, claim.delta, claim.accountant, claim.attack) == (1.0, DELTA, None, "weight-canary")
    assert claim.method == "clopper-pearson" and claim.lower_bound == pytest.approx(audit.epsilon_lb)
    # a claim only the estimates refute is not refuted
    above = _result({"weight-canary": _record(audit)}, _privacy(None, claimed=2 * audit.epsilon_lb))
    assert privacy_bugs([above]) == ([], [], 1)
    # no guarantee and no claim: nothing to compare
    assert privacy_bugs([_result({"weight-canary": _record(audit)}, _privacy(None))]) == ([], [], 0)


def test_the_audited_run_privacy_is_the_one_compared():
    scores, coins = _canaries()
    audit = _audit(scores, coins, WHITE_BOX)
    # the model's own ε is large, the audit run's (members + canaries) is 1: a bug against the audit run's
    [bug], _, _ = privacy_bugs([_result({"canary": _record(audit, audited=_privacy(1.0))}, _privacy(50.0))])
    assert bug.epsilon == 1.0
    # and the other way round: the audit run's large ε is not refuted, whatever the model's
    assert privacy_bugs([_result({"canary": _record(audit, audited=_privacy(50.0))}, _privacy(1.0))])[0] == []
    # a relation mismatch is the audit run's too
    assert privacy_bugs([_result({"canary": _record(audit, audited=_privacy(1.0, relation="replace-one"))},
                                 _privacy(1.0))])[2] == 0


def test_the_certified_curve_of_a_one_run_audit():
    scores, coins = _canaries()
    # ε = 6 at δ = 1e-5 is not refuted by the bounds (~4), but the curve also claims (1, 1e-3): refuted (f-dp at
    # δ = 1e-3 certifies ~2.2 here)
    optimistic = [[6.0, DELTA], [1.0, 1e-3]]
    audit = _audit(scores, coins, BLACK_BOX, profile=optimistic)  # no Gaussian analysis in its family
    assert audit.profile_rejected is True
    [bug], _, comparisons = privacy_bugs([_result({"canary": _record(audit)}, _privacy(6.0, profile=optimistic))])
    assert comparisons == 3 and bug.method == "certified-curve" and bug.lower_bound is None
    assert bug.epsilon == 6.0 and bug.confidence == pytest.approx(1 - 0.05 / 3)
    # a curve the audit cannot refute
    honest = [[6.0, DELTA], [5.0, 1e-3], [4.0, 0.02]]
    assert privacy_bugs([_result({"canary": _record(audit)}, _privacy(6.0, profile=honest))]) == ([], [], 3)
    # a multi-run design tests the curve at its thresholds (attacks.analysis.statistics.curve): Clopper-Pearson + the
    # curve = 2
    multi = _audit(scores, coins, {**BLACK_BOX, "kind": "multi-run"}, profile=optimistic)
    assert multi.profile_rejected is True
    [bug], _, comparisons = privacy_bugs([_result({"canary": _record(multi)}, _privacy(6.0, profile=optimistic))])
    assert comparisons == 2 and bug.method == "certified-curve"


def test_the_certified_gaussian_curve_of_a_multi_run_audit():
    """At q = 1 the certified curve is G_μ: R runs whose scores are Gaussian at twice the certified μ refute it where
    no ε lower bound exceeds the certified ε; runs at the certified μ do not."""
    rng = np.random.default_rng(3)
    coins = (rng.random(400) < 0.5).astype(int)
    noise = rng.normal(0, 1, 400)
    mu = 0.5  # ε ≈ 2 at δ = 1e-5
    profile = [[2.0, DELTA]]  # what the accountant states beside the curve (it plays no part with certified_mu)
    design = {**BLACK_BOX, "kind": "multi-run", "size": 400, "certified_mu": mu}
    caught = _audit(noise + 2 * mu * coins, coins, design, profile=profile)  # σ / 2
    assert caught.profile_rejected is True and caught.epsilon_lb < 2.0
    [bug], _, comparisons = privacy_bugs([_result({"multi-run": _record(caught)}, _privacy(2.0, profile=profile))])
    assert comparisons == 2 and bug.method == "certified-curve"
    honest = _audit(noise + mu * coins, coins, design, profile=profile)
    assert honest.profile_rejected is False
    assert privacy_bugs([_result({"multi-run": _record(honest)}, _privacy(2.0, profile=profile))]) == ([], [], 2)


def test_pooled_estimates_across_seeds_make_no_comparison_and_no_bug():
    """The seeds of one configuration (same ε, same public σ, q, T) still pool their white-box canaries into one μ-GDP
    analysis (shown: ``pooled_audits``), an estimate: above the accountant's ε it is no bug and adds no comparison."""
    rng = np.random.default_rng(11)
    audits = []
    for _ in range(3):
        coins = (rng.random(1000) < 0.5).astype(int)
        audits.append(_audit(0.8 * coins + rng.normal(0, 1, 1000), coins, WHITE_BOX))
    valid = max(a.epsilon_lb for a in audits)
    epsilon = 2.0
    assert valid < epsilon  # no valid bound refutes ε = 2; every run's gaussian-llr estimate reads above it ...
    assert all(next(b for b in a.bounds if b.method == "gaussian-llr").epsilon_lb > epsilon for a in audits)
    results = [_result({"canary-whitebox": _record(a)}, _privacy(epsilon), seed=s) for s, a in enumerate(audits)]
    assert len(pool_groups(results)) == 1
    [pooled] = pooled_audits(results)
    assert pooled.seeds == [0, 1, 2] and pooled.size == 3000
    assert pooled.epsilon_lb > epsilon  # ... and so does the pooled estimate
    assert privacy_bugs(results) == ([], [], 6)  # 3 runs × 2 valid analyses, the pool none
