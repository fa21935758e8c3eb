"""The black-box input canaries' scores (``attacks.canaries.input_scores``) on real 8×8 digits: each is what its
formula says on the audit run's final model, and under DP-SGD on the default recipe's shape (ScatterNet + linear, q
= 1/3, T = 120, C = 0.1, momentum 0.9) with uniform-noise canaries the logit margin separates the included from the
excluded canaries better than the output difference along e_y − 1/K, and by no more than the last-iterate pair's
μ = Tq/(σ√T) allows (docs/audits.md, "Closing the gap")."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import CPU

from attacks.canaries.canary import CanaryAudit, CanaryParams
from attacks.canaries.input_scores import input_canary_scores
from bench.core.data import concat, load_dataset, make_split
from mechanisms.dpsgd.canary_placement import GradientCanaries
from mechanisms.dpsgd.mechanism import DPSGD

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SPEC = DPSGD.spec(model="scatternet-linear", epochs=40, batch_size=500, lr=8.0, optimizer="sgd", momentum=0.9,
                  params={"max_grad_norm": 0.1})


@pytest.fixture(scope="module")
def split():
    """300 members and 400 population records of real 8×8 digits (seed 0)."""
    pool, test = load_dataset("digits")
    return make_split(pool, test, n_members=300, n_non_members=100, n_population=400, n_test=100, seed=0)


def _audit_run(split, m: int, seed: int):
    attack = CanaryAudit(CanaryParams(num_canaries=m, inputs="noise", score="margin"))
    canaries, included = attack.canaries(split.population, seed=seed)
    data = concat(split.members, canaries.subset(torch.from_numpy(np.flatnonzero(included))))
    public = attack.public_size(len(split.members))
    run = DPSGD().fit(data, SPEC, target_epsilon=8.0, delta=1e-5, seed=seed, device=CPU,
                      audit=GradientCanaries(0, 1, public_size=public))
    return run, canaries, included, DPSGD().calibrate(SPEC, n=public, target_epsilon=8.0, delta=1e-5)


def test_scores_are_the_final_models_logit_differences(split):
    run, canaries, _, _ = _audit_run(split, 200, 0)
    with torch.no_grad():
        d = (run.model(canaries.x) - run.model(torch.zeros(1, *canaries.input_shape))).double()
    own = F.one_hot(canaries.y, 10).bool()
    margin = d[own] - d.masked_fill(own, -np.inf).max(1).values
    np.testing.assert_allclose(input_canary_scores(run.model, canaries, score="margin", device=CPU), margin.numpy(),
                               rtol=1e-5, atol=1e-5)
    along = (d * (own.double() - 0.1)).sum(1).numpy()
    np.testing.assert_allclose(input_canary_scores(run.model, canaries, score="output-difference", device=CPU),
                               along, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="canary score must be"):
        input_canary_scores(run.model, canaries, score="bogus", device=CPU)  # type: ignore[arg-type]


def test_the_margin_reads_the_canarys_clipped_steps_better_under_dpsgd(split):
    for seed in range(3):
        run, canaries, included, (sigma, q, steps) = _audit_run(split, 2000, seed)
        assert (q, steps) == (1 / 3, 120)  # the default recipe's sampling: public n = 300 + 1,000 at batch 500
        gaps = {}
        for score in ("output-difference", "margin"):
            s = input_canary_scores(run.model, canaries, score=score, device=CPU)
            gaps[score] = (s[included].mean() - s[~included].mean()) / s[~included].std()
        pair = steps * q / (sigma * np.sqrt(steps))  # the last-iterate pair's standardised gap (≈ 0.84 at ε 8)
        assert gaps["output-difference"] < gaps["margin"] < pair, (seed, gaps, pair)
        assert gaps["margin"] > 0.4 * pair, (seed, gaps, pair)
