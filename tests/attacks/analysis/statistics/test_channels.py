"""The two-channel audit of local records (attacks.analysis.statistics.channels, the local-canary audit): at the true
parameters the composed analysis gives back the accountant's ε (dp_accounting's PLD of the Gaussian image channel and
k-ary randomized response, mechanisms.accounting.gaussian); its counts by hand; its bound covers over repeated
simulations; and the audit run through the mechanism's own release reads both channels (or the image alone where labels
are declared public) and lands where a simulation of the ideal mechanism through the same analysis lands."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attacks.analysis import estimates, membership_audit
from attacks.analysis.statistics.channels import composed_bound, composed_epsilon, image_summary, label_counts
from attacks.canaries.local import LocalCanaryAudit, ReleaseCanaryParams
from bench.core.data import ArrayDataset
from bench.core.design import AuditDesign
from mechanisms.accounting.gaussian import local_record_epsilon, local_record_sigma, randomized_response_keep
from mechanisms.local.mechanism import LocalGaussian

DELTA, K = 1e-5, 10
DESIGN = AuditDesign(kind="multi-run", threat_model="black-box", gaussian=True, relation="replace-one",
                     channels=("image", "label"))
logging.getLogger().setLevel(logging.ERROR)  # dp_accounting logs a notice per optimistic Gaussian PLD


def _ideal(epsilon: float, m: int, seed: int, *, share: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ideal local randomiser on the audit's canary design, simulated: coins, image scores N(±1, σ²) and label
    outcomes of k-ary randomized response (1: the pair's first label released, −1: its second, 0: another)."""
    sigma, label_eps = local_record_sigma(target_epsilon=epsilon, delta=DELTA, label_share=share, num_classes=K)
    keep = randomized_response_keep(label_eps, K)
    rng = np.random.default_rng(seed)
    coins = (rng.random(m) < 0.5).astype(int)
    scores = np.where(coins == 1, 1.0, -1.0) + rng.normal(0, sigma, m)
    kept, to_other_of_pair = rng.random(m) < keep, rng.integers(1, K, m) == 1  # a flip lands on y₂ w.p. 1/(k − 1)
    held = 2 * coins - 1
    outcomes = np.where(kept, held, np.where(to_other_of_pair, -held, 0))
    return coins, scores, outcomes


@pytest.mark.parametrize("epsilon", [1.0, 3.0, 8.0])
def test_the_composition_at_the_true_parameters_is_the_accountants_epsilon(epsilon):
    sigma, label_eps = local_record_sigma(target_epsilon=epsilon, delta=DELTA, label_share=0.5, num_classes=K)
    keep = randomized_response_keep(label_eps, K)
    got = composed_epsilon(2 / sigma, keep, (1 - keep) / (K - 1), DELTA)
    certified = local_record_epsilon(sigma=sigma, delta=DELTA, label_epsilon=label_eps, num_classes=K)
    assert got <= certified + 1e-9  # optimistic discretisation: never above
    assert got == pytest.approx(certified, rel=2e-3)
    # each channel alone is less than the record
    assert composed_epsilon(2 / sigma, 0.5, 0.5, DELTA) < got and composed_epsilon(0.0, keep, (1 - keep) / 9, DELTA) \
        == pytest.approx(label_eps, abs=1e-3)


def test_counts_and_summary_by_hand():
    labels = np.array([1, 1, 1, 0, 0, 0])
    outcomes = np.array([1, -1, 0, -1, 1, 0])  # kept, swapped, other; kept, swapped, other
    assert label_counts(outcomes, labels) == {"kept": 2, "swapped": 2, "n": 6}
    s = image_summary([2.0, 1.0, 0.0, -2.0, -1.0, 0.0], labels)  # u = ⟨z, image held⟩ = 2, 1, 0, 2, 1, 0
    assert s == {"n": 6, "mean": 1.0, "sd": pytest.approx(np.std([2, 1, 0, 2, 1, 0], ddof=1))}
    for bad in ([2, 0, 0, 0, 0, 0], [1, 0, 0]):
        with pytest.raises(ValueError):
            label_counts(bad, labels)
    assert composed_epsilon(0.0, 0.3, 0.4, DELTA) == 0.0  # no gap, no label signal: nothing


def test_the_composed_bound_covers_the_true_epsilon():
    """Over 60 simulations of the ideal mechanism at ε = 1 (m = 2,000), the 95 % bound never exceeds 1, and its
    median is not far below it (≈ 0.4 here)."""
    values = []
    for seed in range(60):
        coins, scores, outcomes = _ideal(1.0, 2000, seed)
        fit = {"image": image_summary(scores, coins), "label": label_counts(outcomes, coins)}
        values.append(composed_bound(fit, delta=DELTA, confidence=0.95))
    assert max(values) < 1.0 and np.median(values) > 0.3


def _context(m_shape=(1, 8, 8), *, labels: str = "randomized-response", epsilon: float = 1.0):
    mech = LocalGaussian()
    spec = mech.spec(model="mlp", epochs=1, batch_size=32, lr=0.02, params={"label_share": 0.5, "labels": labels})
    members = ArrayDataset(torch.rand(20, *m_shape), torch.randint(0, K, (20,)), K, "toy")

    def release(data, *, seed):
        return mech.release(data, spec, target_epsilon=epsilon, delta=DELTA, seed=seed)
    return SimpleNamespace(split=SimpleNamespace(members=members), seed=0,
                           train_like_target=SimpleNamespace(release=release))


def test_the_local_canary_audit_reads_both_channels_through_the_mechanism():
    attack = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=4000))
    res = attack.score(_context())
    assert res.design.channels == ("image", "label") and res.design.gaussian and res.design.relation == "replace-one"
    assert set(np.unique(res.label_outcomes)) <= {-1, 0, 1}
    keep = randomized_response_keep(0.5, K)
    counts = label_counts(res.label_outcomes, res.labels)
    assert counts["kept"] / counts["n"] == pytest.approx(keep, abs=0.03)  # the pair's labels differ: tested
    assert counts["swapped"] / counts["n"] == pytest.approx((1 - keep) / (K - 1), abs=0.02)
    sigma, label_eps = local_record_sigma(target_epsilon=1.0, delta=DELTA, label_share=0.5, num_classes=K)
    assert res.design.label_weight == pytest.approx(sigma**2 * label_eps / 2, rel=1e-9)  # the claimed pair's LLR
    block = membership_audit(res.scores, res.labels, delta=DELTA, design=res.design,
                             label_outcomes=res.label_outcomes)
    composed = {b["method"]: b for b in block["bounds"]}["gaussian-composed"]
    # the composed estimate reads the image channel u = s − w·o (Gaussian again: its normality test passes) and the
    # label below the ε (1), and stays an estimate; the audit's number is a valid analysis' of the joint score
    assert 0.1 < composed["epsilon_lb"] < 1.0 and not composed["valid"] and composed["evidence"] == "estimate"
    assert block["method"] in ("clopper-pearson", "one-run", "f-dp") and block["epsilon_lb"] < 1.0
    assert composed["fit"]["label"] == counts and composed["fit"]["normality_p"] >= 0.01  # what the reports show
    image = res.scores - res.design.label_weight * res.label_outcomes
    assert composed["fit"]["image"] == pytest.approx(image_summary(image, res.labels))
    # labels declared public: the ε covers the image only, and so does the design
    public = attack.score(_context(labels="public"))
    assert public.design.channels == ("image",) and public.label_outcomes is None
    assert "gaussian-composed" in estimates(DESIGN)
    assert "gaussian-composed" not in estimates(DESIGN.model_copy(update={"channels": public.design.channels}))


def test_the_mechanisms_audit_lands_where_the_ideal_mechanism_does():
    """The same analysis of the code's release and of the simulated ideal mechanism (m = 4,000, ε = 1, 784 pixels):
    the code loses nothing measurable against the ideal (the gap of the audit itself is the ideal's)."""
    res = LocalCanaryAudit(ReleaseCanaryParams(num_canaries=4000)).score(_context((1, 28, 28)))
    code = membership_audit(res.scores, res.labels, delta=DELTA, design=res.design,
                            label_outcomes=res.label_outcomes)
    w = res.design.label_weight
    ideal = [membership_audit(s + w * o, c, delta=DELTA, design=res.design, label_outcomes=o)["epsilon_lb"]
             for c, s, o in (_ideal(1.0, 4000, seed) for seed in range(5))]
    assert min(ideal) - 0.1 < code["epsilon_lb"] < max(ideal) + 0.1


def _joint_design(epsilon: float) -> tuple[AuditDesign, float]:
    sigma, label_eps = local_record_sigma(target_epsilon=epsilon, delta=DELTA, label_share=0.5, num_classes=K)
    w = sigma**2 * label_eps / 2
    return DESIGN.model_copy(update={"one_release": True, "label_weight": w}), w


def test_the_joint_score_reads_both_channels_and_doubles_the_valid_bound():
    """The ideal local randomiser at ε = 8, m = 20,000: the valid analyses of the likelihood-ratio score s = u + w·o
    bound the record's ε at more than twice what they give on the image score u alone (whose channel holds about
    half the ε), and below the ε."""
    design, w = _joint_design(8.0)
    coins, scores, outcomes = _ideal(8.0, 20_000, 0)
    joint = membership_audit(scores + w * outcomes, coins, delta=DELTA, design=design, label_outcomes=outcomes)
    image = membership_audit(scores, coins, delta=DELTA, design=DESIGN.model_copy(update={"one_release": True}),
                             label_outcomes=outcomes)
    assert joint["bounds"][0]["valid"] and image["bounds"][0]["valid"]
    assert 2.0 * image["epsilon_lb"] < joint["epsilon_lb"] < 8.0


def test_the_joint_scores_valid_bound_covers_the_epsilon():
    """Over 40 simulations of the ideal mechanism at ε = 1 and 3 (m = 2,000), the joint score's valid bound never
    exceeds the ε (it holds for any weight fixed in advance; this one makes it tight)."""
    for epsilon in (1.0, 3.0):
        design, w = _joint_design(epsilon)
        values = [membership_audit(s + w * o, c, delta=DELTA, design=design, label_outcomes=o)["epsilon_lb"]
                  for c, s, o in (_ideal(epsilon, 2000, seed) for seed in range(40))]
        assert max(values) < epsilon and np.median(values) > 0.05 * epsilon
