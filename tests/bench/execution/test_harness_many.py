"""Training many models at once through the runner's ``Trainer``: batches of non-private shadows train as one
vectorised ensemble with the weights sequential training gives, under the cache keys one-at-a-time training uses;
DP mechanisms keep one training run per model; cached jobs are loaded, never retrained."""

from __future__ import annotations

import pytest
import torch

import bench.execution.ensemble
import bench.execution.executor
import bench.execution.local_executor
from bench.config.run import build_config
from bench.execution.cache import ModelCache
from bench.execution.ensemble import choose_path, init_model
from bench.execution.executor import LocalExecutor
from bench.execution.jobs import Recipe, Trainer
from mechanisms.baseline import Baseline

EPOCHS = 3  # a few epochs: long enough to move the weights far, short enough that float differences stay tiny


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


CPU = torch.device("cpu")


def _trainer(tmp_path, name: str) -> Trainer:
    return Trainer(LocalExecutor(), ModelCache(tmp_path / name), train_device=CPU, device=CPU)


def _recipe(mechanism: str = "baseline", target_epsilon: float | None = None) -> Recipe:
    cfg = build_config({"training": {mechanism: {"epochs": EPOCHS}}}, {"profile": "smoke", "mechanisms": mechanism})
    return Recipe(mechanism, cfg.spec_for(mechanism), target_epsilon, cfg.delta, cfg.dataset)


def _train(trainer: Trainer, recipe: Recipe, data, seed: int):
    (slot,) = trainer.submit(recipe, [(data, seed)])
    return trainer.collect(slot), slot.cached, slot.key


def _jobs(split, k: int = 3):
    """k shadow jobs on overlapping population subsets of 150 records, seeds 11, 12, ..."""
    pop = split.population
    return [(pop.subset(torch.randperm(len(pop), generator=torch.Generator().manual_seed(i))[:150]), 11 + i)
            for i in range(k)]


def test_baseline_shadows_train_as_one_ensemble_equal_to_harness_train(digits_split, tmp_path, monkeypatch):
    monkeypatch.setitem(bench.execution.ensemble.PREFERRED_PATH, "cpu", "ensemble")  # CUDA's rule, tested on the CPU
    assert choose_path("cpu") == "ensemble"
    jobs, recipe = _jobs(digits_split), _recipe()
    batch = _trainer(tmp_path, "batch")
    slots = batch.submit(recipe, jobs)
    assert len({id(s.pending) for s in slots}) == 1 and len(slots[0].pending.job) == 3  # one ensemble job
    together = [(batch.collect(s), s.cached, s.key) for s in slots]

    one_by_one = _trainer(tmp_path, "sequential")
    spec = recipe.spec
    for (data, seed), (ens, cached, key) in zip(jobs, together, strict=True):
        seq, seq_cached, seq_key = _train(one_by_one, recipe, data, seed)
        assert not cached and not seq_cached
        assert key == seq_key  # exactly the key one-at-a-time training uses
        for (name, a), b in zip(seq.model.state_dict().items(), ens.model.state_dict().values(), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=name)
        init = init_model(lambda d=data: Baseline().build(d.input_shape, d.num_classes, spec), seed)
        assert max(float((a - b).abs().max()) for a, b in zip(
            seq.model.state_dict().values(), init.state_dict().values(), strict=True)) > 100 * 1e-5  # it trained
        assert ens.history == pytest.approx(seq.history, rel=1e-5) and len(ens.history) == EPOCHS
        assert ens.privacy == seq.privacy and ens.params == seq.params == {}
        # a later one-at-a-time lookup hits the entry the ensemble stored, weights to the bit
        again, hit, _ = _train(batch, recipe, data, seed)
        assert hit
        for a, b in zip(again.model.state_dict().values(), ens.model.state_dict().values(), strict=True):
            assert torch.equal(a, b)


def test_dp_mechanisms_keep_one_training_run_per_model(digits_split, tmp_path, monkeypatch):
    monkeypatch.setitem(bench.execution.ensemble.PREFERRED_PATH, "cpu", "ensemble")
    slots = _trainer(tmp_path, "dp").submit(_recipe("local-gaussian", 4.0), _jobs(digits_split, 2))
    assert len({id(s.pending) for s in slots}) == 2 and all(len(s.pending.job) == 1 for s in slots)


@pytest.mark.parametrize("path", ["ensemble", "sequential"])
def test_cached_jobs_are_loaded_never_retrained(digits_split, tmp_path, monkeypatch, path):
    monkeypatch.setitem(bench.execution.ensemble.PREFERRED_PATH, "cpu", path)
    trainer, recipe = _trainer(tmp_path, "resume"), _recipe()
    jobs = _jobs(digits_split, 3)
    first = [trainer.collect(s) for s in trainer.submit(recipe, jobs[:2])]
    trained: list[int] = []
    real = bench.execution.local_executor.run_any
    monkeypatch.setattr(bench.execution.local_executor, "run_any",
                        lambda job, on_epoch=None: trained.append(len(job)) or real(job, on_epoch))
    slots = trainer.submit(recipe, jobs)
    assert [s.cached for s in slots] == [True, True, False]
    out = [trainer.collect(s) for s in slots]
    assert trained == [1]  # only the third model was trained (an ensemble of one is one ordinary run)
    for before, after in zip(first, out[:2], strict=True):
        for a, b in zip(before.model.state_dict().values(), after.model.state_dict().values(), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("mechanism,target", [("baseline", None), ("dpsgd", 4.0)])
def test_prefetched_models_train_once(digits_split, tmp_path, monkeypatch, mechanism, target):
    """Models an attack prefetches (``LikeTarget.prefetch``) are the ones it later asks for: the later call waits
    for the prefetched job instead of submitting another, with the cache off too."""
    trainer = Trainer(LocalExecutor(), ModelCache(tmp_path / "off", enabled=False), train_device=CPU, device=CPU)
    recipe, jobs = _recipe(mechanism, target), _jobs(digits_split, 2)
    trained: list[int] = []
    real = bench.execution.local_executor.run_any
    monkeypatch.setattr(bench.execution.local_executor, "run_any",
                        lambda job, on_epoch=None: trained.append(len(job)) or real(job, on_epoch))
    like = trainer.like(recipe)
    like.prefetch([(data, seed, None) for data, seed in jobs])
    assert trained == []  # submitted, not yet trained (no worker here: the driver trains when asked)
    models = list(like.many(jobs))
    assert sum(trained) == 2 and len(models) == 2
    assert trainer.executor._queue == []  # no second copy of the jobs left waiting
    assert list(like.many(jobs)) and sum(trained) == 2  # asked again: the same models, kept in memory
