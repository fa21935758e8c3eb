"""Training jobs of a run: each model is looked up in the content-addressed cache.

Or submitted to the executor (alone, or with other non-private shadows as one vectorised ensemble) and cached as soon as
it finishes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback
from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec
from bench.execution.cache import ModelCache, cache_key
from bench.execution.ensemble import choose_path, ensemble_supported
from bench.execution.executor import Executor, Pending, TrainJob
from bench.execution.fingerprint import fingerprint
from bench.execution.trainjob import Recipe

if TYPE_CHECKING:  # pragma: no cover
    from attacks.base.context import AuditRequest

__all__ = ["LikeTarget", "Recipe", "Slot", "Trainer", "code_fingerprint"]

RECENT = 16  # models kept in memory by a Trainer


@dataclass
class Slot:
    """One model asked of ``Trainer.submit``: loaded from the cache, or model ``index`` of a pending job."""

    key: str
    trained: TrainedModel | None = None
    pending: Pending | None = None
    index: int = 0
    cached: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.cached = self.trained is not None


@functools.cache
def code_fingerprint(mechanism: str, model: str) -> dict[str, object]:
    """``bench.execution.fingerprint.fingerprint`` of the modules of registered ``mechanism`` and ``model``."""
    from bench.core.catalog import MODELS
    from mechanisms import MECHANISMS

    return fingerprint(MECHANISMS.get(mechanism).__module__, MODELS.get(model).__module__)


class Trainer:
    """Gives the models of training jobs, from the cache or from the executor.

    Args:
        executor: where jobs run.
        cache: the model cache.
        train_device: where jobs train (on Ray: the workers).
        device: where this process evaluates and attacks.
        on_jobs: called with (models asked, models already done) on every submit and (0, models finished) when a job
            finishes (progress display).
        job_timeout: seconds each model's job may train (``TrainJob.timeout_s``, ``--job-timeout``); None: no limit.
    """

    def __init__(self, executor: Executor, cache: ModelCache, *, train_device: torch.device, device: torch.device,
                 on_jobs: Callable[[int, int], None] | None = None, job_timeout: float | None = None) -> None:
        self.executor, self.cache, self.job_timeout = executor, cache, job_timeout
        self.train_device, self.device = train_device, device
        self.on_jobs = on_jobs or (lambda asked, done: None)
        self._recent: OrderedDict[str, TrainedModel] = OrderedDict()  # the last models, also when the cache is off
        self._inflight: dict[str, tuple[Pending, int]] = {}  # submitted, not finished: key -> (job, model index)
        self._asked: set[str] = set()  # models counted by the progress bar as asked for, and as done
        self._done: set[str] = set()
        self.splits: dict[str, str] = {}  # key -> split hash of the model's training records (ArrayDataset)
        self.asked: list[str] = []  # every key asked of ``submit``, in order (a cell's models: bench.runner.cells)
        self.fresh: set[str] = set()  # keys to train again whatever the cache holds (a resumed run's split mismatch)

    def key(self, recipe: Recipe, data: ArrayDataset, seed: int, audit: AuditRequest | None = None,
            probe: ArrayDataset | None = None) -> str:
        """The cache key of one model.

        A content hash of everything that determines it, the code and library versions that train it included
        (``bench.execution.fingerprint``); with a ``probe``, its images too (they do not change the weights, but the
        per-epoch test curve stored with the model is measured on them).
        """
        parts = {"mechanism": recipe.mechanism, "spec": recipe.spec.to_dict(), "target_epsilon": recipe.target_epsilon,
                 "delta": recipe.delta, "seed": seed, "dataset": recipe.dataset, "members": data.fingerprint(),
                 "device": self.train_device.type, "code": code_fingerprint(recipe.mechanism, recipe.spec.model)}
        if audit is not None:
            parts["audit"] = {"kind": type(audit).__name__, **dataclasses.asdict(audit)}
        if probe is not None:
            parts["probe"] = probe.fingerprint()
        return cache_key(parts)

    def submit(self, recipe: Recipe, jobs: Sequence[tuple[ArrayDataset, int]], *, audit: AuditRequest | None = None,
               probe: ArrayDataset | None = None) -> list[Slot]:
        """Load every ``(data, seed)`` job that is in the cache and submit the others.

        As one vectorised-ensemble job where ``ensemble_supported`` holds and ``choose_path`` prefers it, else one job
        per model (DP mechanisms: privacy is accounted per training run). ``collect`` gives the models. ``audit``: an
        audit request for every job (``Mechanism.fit``'s ``audit``; one model per job). ``probe``: held-out images every
        model of a one-model job is evaluated on after each epoch (its training curves, ``TrainJob.probe``); only for a
        single job (targets).
        """
        if probe is not None and len(jobs) != 1:
            raise ValueError("a probe set is for one model's training curves: submit its job alone")
        from mechanisms import MECHANISMS

        mech = MECHANISMS.get(recipe.mechanism)()
        slots = []
        for data, seed in jobs:
            arch = mech.build(data.input_shape, data.num_classes, recipe.spec)
            key = self.key(recipe, data, seed, audit, probe)
            split = self.splits.setdefault(key, data.split_hash())
            self.asked.append(key)
            what = f"{recipe.mechanism} seed {seed}"
            found = None if key in self.fresh else self._recent.get(key) or self.cache.load(key, arch, split_hash=split,
                                                                                           what=what)
            slots.append(Slot(key, found))
        for slot in slots:  # already submitted (e.g. prefetched) and not finished: wait for that job
            if slot.trained is None and slot.key in self._inflight:
                slot.pending, slot.index = self._inflight[slot.key]
        missing = [i for i, slot in enumerate(slots) if slot.trained is None and slot.pending is None]
        together = (audit is None and len(missing) > 1 and choose_path(self.train_device) == "ensemble"
                    and ensemble_supported(mech, arch))
        for group in [missing] if together else [[i] for i in missing]:
            job = TrainJob(recipe, tuple(jobs[i][0] for i in group), tuple(jobs[i][1] for i in group),
                           self.train_device.type, audit, probe, self.job_timeout)
            pending = self.executor.submit(job, on_done=lambda models, g=group: self._store(
                [slots[i].key for i in g], models))
            for index, i in enumerate(group):
                slots[i].pending, slots[i].index = pending, index
                self._inflight[slots[i].key] = (pending, index)
        # the progress bar counts each model once, however often it is asked for (prefetched, shared, reloaded)
        fresh = [slot for slot in dict((slot.key, slot) for slot in slots).values() if slot.key not in self._asked]
        self._asked.update(slot.key for slot in fresh)
        done = [slot.key for slot in fresh if slot.trained is not None and slot.key not in self._done]
        self._done.update(done)
        self.on_jobs(len(fresh), len(done))
        return slots

    def _store(self, keys: list[str], models: list[TrainedModel]) -> None:
        """A job finished (seen by the driver): cache its models at once, whichever job the driver awaits."""
        fresh = [key for key in keys if key not in self._done]
        self._done.update(fresh)
        for key, trained in zip(keys, models, strict=True):
            self._inflight.pop(key, None)
            self.fresh.discard(key)  # trained again: the cache now holds this run's model
            self.cache.save(key, trained, split_hash=self.splits.get(key))
            self._remember(key, trained)
        self.on_jobs(0, len(fresh))

    def _remember(self, key: str, trained: TrainedModel) -> None:
        """Keep the last ``RECENT`` models in memory.

        Attacks that share models (offline shadows, an audit run) reuse them even with the cache off.
        """
        self._recent[key] = trained
        self._recent.move_to_end(key)
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    def collect(self, slot: Slot, *, on_epoch: EpochCallback | None = None) -> TrainedModel:
        """The model of ``slot`` on ``self.device``, waiting for its job.

        Raises:
            TrainingDiverged, ValueError, JobFailed: its job failed.
        """
        if slot.trained is None:
            assert slot.pending is not None
            slot.trained = self.executor.result(slot.pending, on_epoch=on_epoch)[slot.index]
            slot.pending = None
        slot.trained.model.to(self.device)
        return slot.trained

    def like(self, recipe: Recipe) -> LikeTarget:
        """``attacks.base.context.TrainLikeTarget`` for models trained as ``recipe``'s."""
        return LikeTarget(self, recipe)


@dataclass(frozen=True)
class LikeTarget:
    """``attacks.base.context.TrainLikeTarget`` of one cell: its mechanism, settings, target ε and δ."""

    trainer: Trainer
    recipe: Recipe

    @property
    def batch_size(self) -> int:
        """The recipe's batch size."""
        return self.recipe.spec.batch_size

    @property
    def spec(self) -> TrainSpec:
        """The recipe's settings."""
        return self.recipe.spec

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        """One model trained with the recipe on ``data`` with ``seed``."""
        return next(self.many([(data, seed)]))

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        """Models trained with the recipe, all submitted at once and yielded in order."""
        slots = deque(self.trainer.submit(self.recipe, jobs))
        return (self.trainer.collect(slots.popleft()) for _ in range(len(slots)))  # yielded models are let go

    def audit_run(self, data: ArrayDataset, *, seed: int, request: AuditRequest) -> TrainedModel:
        """One model trained like the target with an audit ``request`` (``Mechanism.fit``'s ``audit``)."""
        (slot,) = self.trainer.submit(self.recipe, [(data, seed)], audit=request)
        return self.trainer.collect(slot)

    def audit_runs(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> Iterator[TrainedModel]:
        """Models trained like the target with per-model audit requests.

        All submitted first (Ray spreads them), then yielded in order, each let go once yielded.
        """
        slots = deque(slot for data, seed, request in jobs
                      for slot in self.trainer.submit(self.recipe, [(data, seed)], audit=request))
        return (self.trainer.collect(slots.popleft()) for _ in range(len(slots)))

    def prefetch(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> None:
        """Submit models a later call will ask for (``(data, seed, audit request or None)``).

        A later ``many``, ``audit_run`` or ``audit_runs`` of the same model waits for that job instead of submitting
        another.
        """
        plain = [(data, seed) for data, seed, request in jobs if request is None]
        if plain:
            self.trainer.submit(self.recipe, plain)
        for data, seed, request in jobs:
            if request is not None:
                self.trainer.submit(self.recipe, [(data, seed)], audit=request)

    def release(self, data: ArrayDataset, *, seed: int) -> tuple[Release, PrivacySpent]:
        """The mechanism's own release of ``data`` with the recipe's settings, target ε and δ (not cached: cheap)."""
        from mechanisms import MECHANISMS

        r = self.recipe
        release, privacy = MECHANISMS.get(r.mechanism)().release(data, r.spec, target_epsilon=r.target_epsilon,
                                                                 delta=r.delta, seed=seed)
        if r.off:  # the ε = ∞ point's release: privacy off, whatever the accountant says of its vanishing noise
            privacy = PrivacySpent.privacy_off(note=f"{r.mechanism} with privacy turned off")
        return release, privacy
