"""Training many models at once through the harness: batches of non-private shadows train as one vectorised
ensemble with the weights sequential training gives, under the cache keys ``Harness.train`` uses; DP mechanisms
keep one training run per model; cached jobs are loaded, never retrained."""

from __future__ import annotations

import pytest
import torch

import bench.runner.ensemble
import bench.runner.executor
from bench.runner.config import build_config
from bench.runner.ensemble import choose_path, init_model
from bench.runner.harness import Harness
from mechanisms.baseline import Baseline

EPOCHS = 3  # a few epochs: long enough to move the weights far, short enough that float differences stay tiny


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _harness(tmp_path, name: str, mechanisms: str = "baseline") -> Harness:
    return Harness(build_config({"training": {m: {"epochs": EPOCHS} for m in mechanisms.split(",")}},
                                {"profile": "smoke", "mechanisms": mechanisms, "device": "cpu",
                                 "cache_dir": str(tmp_path / name)}))


def _jobs(split, k: int = 3):
    """k shadow jobs on overlapping population subsets of 150 records, seeds 11, 12, ..."""
    pop = split.population
    return [(pop.subset(torch.randperm(len(pop), generator=torch.Generator().manual_seed(i))[:150]), 11 + i)
            for i in range(k)]


def test_baseline_shadows_train_as_one_ensemble_equal_to_harness_train(digits_split, tmp_path, monkeypatch):
    monkeypatch.setitem(bench.runner.ensemble.PREFERRED_PATH, "cpu", "ensemble")  # CUDA's rule, tested on the CPU
    assert choose_path("cpu") == "ensemble"
    jobs = _jobs(digits_split)
    batch = _harness(tmp_path, "batch")
    slots = batch.submit("baseline", jobs, target_epsilon=None)
    assert len({id(s.pending) for s in slots}) == 1 and len(slots[0].pending.job) == 3  # one ensemble job
    together = [batch.collect(s) for s in slots]

    one_by_one = _harness(tmp_path, "sequential")
    spec = one_by_one.cfg.spec_for("baseline")
    for (data, seed), (ens, cached, key) in zip(jobs, together, strict=True):
        seq, seq_cached, seq_key = one_by_one.train("baseline", data, target_epsilon=None, seed=seed)
        assert not cached and not seq_cached
        assert key == seq_key  # exactly the key Harness.train uses
        for (name, a), b in zip(seq.model.state_dict().items(), ens.model.state_dict().values(), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=name)
        init = init_model(lambda d=data: Baseline().build(d.input_shape, d.num_classes, spec), seed)
        assert max(float((a - b).abs().max()) for a, b in zip(
            seq.model.state_dict().values(), init.state_dict().values(), strict=True)) > 100 * 1e-5  # it trained
        assert ens.history == pytest.approx(seq.history, rel=1e-5) and len(ens.history) == EPOCHS
        assert ens.privacy == seq.privacy and ens.params == seq.params == {}
        # a later lookup by Harness.train hits the entry the ensemble stored, weights to the bit
        again, hit, _ = batch.train("baseline", data, target_epsilon=None, seed=seed)
        assert hit
        for a, b in zip(again.model.state_dict().values(), ens.model.state_dict().values(), strict=True):
            assert torch.equal(a, b)


def test_dp_mechanisms_keep_one_training_run_per_model(digits_split, tmp_path, monkeypatch):
    monkeypatch.setitem(bench.runner.ensemble.PREFERRED_PATH, "cpu", "ensemble")
    harness = _harness(tmp_path, "dp", "local-gaussian")
    slots = harness.submit("local-gaussian", _jobs(digits_split, 2), target_epsilon=4.0)
    assert len({id(s.pending) for s in slots}) == 2 and all(len(s.pending.job) == 1 for s in slots)


@pytest.mark.parametrize("path", ["ensemble", "sequential"])
def test_cached_jobs_are_loaded_never_retrained(digits_split, tmp_path, monkeypatch, path):
    monkeypatch.setitem(bench.runner.ensemble.PREFERRED_PATH, "cpu", path)
    harness = _harness(tmp_path, "resume")
    jobs = _jobs(digits_split, 3)
    first = [harness.collect(s)[0] for s in harness.submit("baseline", jobs[:2], target_epsilon=None)]
    trained: list[int] = []
    real = bench.runner.executor.run_job
    monkeypatch.setattr(bench.runner.executor, "run_job", lambda job, on_epoch=None: trained.append(len(job)) or
                        real(job, on_epoch))
    slots = harness.submit("baseline", jobs, target_epsilon=None)
    assert [s.cached for s in slots] == [True, True, False]
    out = [harness.collect(s)[0] for s in slots]
    assert trained == [1]  # only the third model was trained (an ensemble of one is one ordinary run)
    for before, after in zip(first, out[:2], strict=True):
        for a, b in zip(before.model.state_dict().values(), after.model.state_dict().values(), strict=True):
            assert torch.equal(a, b)
