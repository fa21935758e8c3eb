"""The context ``MembershipAttack.prefetch`` gets at the start of a run, before the target exists
(``bench.runner.cells.CellRunner.prefetch``): every built-in attack with a ``prefetch`` submits its jobs from it
without reading the target, and an attack that asks for the target there gets a clear error, not ``None``."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import context

from attacks import ATTACKS
from attacks.base.attack import MembershipAttack
from attacks.base.context import TargetNotTrained


class _Recorder:
    """A ``TrainLikeTarget`` that records what ``prefetch`` submits and trains nothing."""

    batch_size = 50

    def __init__(self, spec=None) -> None:
        self.jobs: list = []
        self.spec = spec  # the target's training settings, as the runner knows them before the target exists

    def prefetch(self, jobs) -> None:
        self.jobs += list(jobs)


def _prefetch_context(split, mechanism: str, like: _Recorder):
    """What the runner builds before the target exists: no trained model, the target's training settings known."""
    from mechanisms import MECHANISMS

    if mechanism in MECHANISMS.names():  # a plug-in's (opacus-dpsgd) is registered only where it is imported
        like.spec = MECHANISMS.get(mechanism)().spec(model="mlp", epochs=1, batch_size=50, lr=0.5)
    return dataclasses.replace(context(None, split, seed=3, train_like_target=like), mechanism=mechanism)


# (attack, settings that fit 200 population records, the mechanism its prefetch is meant for, the audit request class
# each job carries; None: plain models)
PREFETCHING = [("shadow", {}, "baseline", None), ("canary", {"num_canaries": 50}, "dpsgd", "GradientCanaries"),
               ("weight-canary", {}, "weight-noise", "CleanWeights"),
               ("opacus-canary", {}, "opacus-dpsgd", "OpacusCanaries"),
               ("opacus-canary-final", {}, "opacus-dpsgd", "FinalCanaries"),
               ("dpmix-canary", {"num_canaries": 8, "releases": 2}, "dpmix", "ReleaseAuditJob"),
               # the crafted audit: one run a job from the auditor's θ_0 for the target's MLP, or chunks of runs side
               # by side for the auditor's linear model
               ("multi-run-crafted", {"runs": 20, "members": 50, "init_epochs": 1, "ideal_draws": 0}, "dpsgd",
                "InitialModel"),
               ("multi-run-crafted", {"runs": 20, "members": 50, "init_epochs": 1, "ideal_draws": 0,
                                      "model": "linear"}, "dpsgd", "SideBySideJob")]


def test_every_attack_that_prefetches_is_covered():
    own = {name for name in ATTACKS.names() if issubclass(ATTACKS.get(name), MembershipAttack)
           and ATTACKS.get(name).prefetch is not MembershipAttack.prefetch}
    assert own - {"canary-final"} == {name for name, _, _, _ in PREFETCHING}  # canary-final: its own test below


@pytest.mark.parametrize("name,params,mechanism,request_class", PREFETCHING)
def test_prefetch_submits_its_jobs_before_the_target_exists(digits_split, name, params, mechanism, request_class):
    like = _Recorder()
    cls = ATTACKS.get(name)
    cls(cls.Params(**params)).prefetch(_prefetch_context(digits_split, mechanism, like))
    assert like.jobs, f"{name} submitted nothing"
    for data, seed, request in like.jobs:
        assert len(data) > 0 and isinstance(seed, int)
        assert (request is None) if request_class is None else type(request).__name__ == request_class


def test_canary_final_prefetches_its_hidden_state_run(digits_split):
    like = _Recorder()
    cls = ATTACKS.get("canary-final")
    attack = cls(cls.Params(num_canaries=50, gradient_canaries=4))
    attack.prefetch(_prefetch_context(digits_split, "dpsgd", like))
    ((data, _, request),) = like.jobs
    assert type(request).__name__ == "GradientCanaries" and request.final_model and request.active


def test_the_target_is_a_clear_error_before_it_exists(digits_split):
    ctx = _prefetch_context(digits_split, "baseline", _Recorder())
    with pytest.raises(TargetNotTrained, match="not trained yet"):
        ctx.target  # noqa: B018 - the property raises
    assert ctx.trained is None


def test_a_release_audit_prefetches_only_for_its_mechanism(digits_split):
    """dpmix-canary's releases are a job only in a DPMix cell: the runner prefetches every attack of every cell before
    any target exists, so the attack, not the target's release, decides."""
    cls = ATTACKS.get("dpmix-canary")
    for mechanism, expected in (("dpmix", 1), ("dpsgd", 0), ("local-gaussian", 0)):
        like = _Recorder()
        cls(cls.Params(num_canaries=8, releases=2)).prefetch(_prefetch_context(digits_split, mechanism, like))
        assert len(like.jobs) == expected, mechanism
