"""Training jobs: what to train, the job shipped to a worker, and the function that runs it.

What to train is a ``Recipe``; a training job (``TrainJob``) is a recipe's models shipped to a worker; ``run_job`` is
the pure function that runs one (the driver's handle on it: ``bench.execution.calljob.Pending``). Executors
(``bench.execution.executor``) decide where a job runs; ``run_job`` is a pure function of the job (every mechanism seeds
itself from ``job.seeds``), so where a job runs does not change its result.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from bench.core.data import ArrayDataset
from bench.core.epochs import EpochRecorder, recording_epochs
from bench.core.plain import plain_module
from bench.core.training import EpochCallback
from bench.core.types import TrainedModel, TrainSpec
from bench.execution.faults import MechanismFault, check_trained, is_plugin, mechanism_words, time_limit

if TYPE_CHECKING:  # pragma: no cover
    from attacks.base.context import AuditRequest


@dataclass(frozen=True)
class Recipe:
    """What to train: how every model of one cell is trained.

    The target and its shadow / reference / canary models alike. The one place a cell's mechanism, settings, target ε, δ
    and dataset are written.

    Attributes:
        mechanism: registered name.
        spec: its validated TrainSpec.
        target_epsilon: ε to calibrate to (None: no target; ``math.inf``: the mechanism's ε = ∞ point, its recipe with
            privacy turned off).
        delta: δ.
        dataset: the dataset's name (part of the cache key).
    """

    mechanism: str
    spec: TrainSpec
    target_epsilon: float | None
    delta: float
    dataset: str

    @property
    def off(self) -> bool:
        """Whether this is a mechanism's ε = ∞ point (privacy turned off)."""
        return self.target_epsilon is not None and math.isinf(self.target_epsilon)


@dataclass(frozen=True)
class TrainJob:
    """One independent unit of training: models of one ``Recipe`` on their data, as shipped to a worker.

    Attributes:
        recipe: what to train (mechanism, settings, target ε — ``math.inf``: ``Mechanism.fit_privacy_off`` — and δ).
        datasets: the training set of every model (one; several for a vectorised ensemble).
        seeds: one training seed per model.
        device: device type to train on (``"cpu"`` / ``"cuda"``), on whichever machine runs the job.
        audit: an audit request for ``Mechanism.fit`` (one model only; e.g. ``GradientCanaries``), or None.
        probe: held-out images a single model is evaluated on after every epoch (``bench.core.epochs.
            EpochRecorder``, at most ``PROBE_MAX``; the training curves), or None. It never changes the weights.
        timeout_s: seconds each model of the job may train (``--job-timeout``; a vectorised ensemble of k models
            gets k times as long); None: no limit. Not part of any cache key: it does not change the model.
    """

    recipe: Recipe
    datasets: tuple[ArrayDataset, ...]
    seeds: tuple[int, ...]
    device: str
    audit: AuditRequest | None = None
    probe: ArrayDataset | None = None
    timeout_s: float | None = None

    def __len__(self) -> int:
        return len(self.seeds)


def run_job(job: TrainJob, on_epoch: EpochCallback | None = None) -> list[TrainedModel]:
    """Train every model of ``job``: ``Mechanism.fit`` for one model, ``fit_ensemble`` for several.

    Returns:
        One TrainedModel per model, in the order of ``job.seeds``.

    Raises:
        TrainingDiverged, ValueError: from a built-in mechanism's training (e.g. a NaN loss, an unreachable ε).
        bench.execution.faults.MechanismFault: a plug-in's ``fit`` raised; a model came back with non-finite weights
            or the wrong output shape; the job ran past ``job.timeout_s`` (``JobTimeout``). One line each, naming the
            mechanism (``bench.execution.faults``).
    """
    r = job.recipe
    limit = None if job.timeout_s is None else job.timeout_s * len(job)
    try:
        with time_limit(limit, r.mechanism):
            models = _run_job(job, on_epoch)
    except MechanismFault:
        raise
    except Exception as exc:
        if not is_plugin(r.mechanism):
            raise
        why = str(exc).splitlines()[0] if str(exc) else ""
        raise MechanismFault(f"{mechanism_words(r.mechanism)}: fit raised {type(exc).__name__}"
                             + (f": {why}" if why else "")) from exc
    if job.audit is None or getattr(job.audit, "run", None) is None:  # an audit's own computation is no model
        for trained, data in zip(models, job.datasets, strict=True):
            check_trained(trained, data, r.mechanism)
    return models


def _run_job(job: TrainJob, on_epoch: EpochCallback | None) -> list[TrainedModel]:
    """``run_job`` without its checks and time limit."""
    from bench.execution.ensemble import fit_ensemble
    from mechanisms import MECHANISMS

    r = job.recipe
    mech, device = MECHANISMS.get(r.mechanism)(), torch.device(job.device)
    if len(job) > 1:
        return fit_ensemble(mech, job.datasets, r.spec, job.seeds, device)
    # an audit that makes its own releases through the mechanism's public API gives ``run`` (attacks.canaries.dpmix's
    # ReleaseAuditJob): nothing is trained, the job is the audit's computation, placed by the executor like any job
    run = getattr(job.audit, "run", None)
    if run is not None:
        return [run(mech, job.datasets[0], r.spec, target_epsilon=r.target_epsilon, delta=r.delta)]
    # an audit that observes the mechanism's own training from outside (e.g. attacks.canaries.opacus.audit: a plug-in's
    # Opacus optimizer) gives ``observe``; any other request is ``fit``'s ``audit`` argument
    observe = getattr(job.audit, "observe", None)
    watch = observe(job.datasets[0], mechanism=mech, spec=r.spec, seed=job.seeds[0]) if observe is not None \
        else contextlib.nullcontext()
    extra = {} if job.audit is None or observe is not None else {"audit": job.audit}
    probe = job.probe
    recorder = EpochRecorder(None if probe is None else probe.x, None if probe is None else probe.y)
    with watch, recording_epochs(recorder) as rec:
        if r.off:  # the recipe with privacy off
            trained = mech.fit_privacy_off(job.datasets[0], r.spec, delta=r.delta, seed=job.seeds[0],
                                           device=device, on_epoch=on_epoch, **extra)
        else:
            trained = mech.fit(job.datasets[0], r.spec, target_epsilon=r.target_epsilon, delta=r.delta,
                               seed=job.seeds[0], device=device, on_epoch=on_epoch, **extra)
    trained.epochs = rec.matching(trained.history)
    if observe is not None:
        trained.audit = watch.result(trained.model)  # the released model, as fit returned it
    trained.model = plain_module(trained.model)  # whatever fit returned (wrapped, hooked): a plain, hook-free copy
    return [trained]
