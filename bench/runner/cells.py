"""One cell of a run (``PlannedCell``: a recipe for one seed, its data and attacks).

Its model trained (or loaded), evaluated and attacked. Metrics and ε lower bounds are applied here, in one place, to
every membership attack's scores.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from attacks.analysis import membership_audit
from attacks.analysis.statistics.metrics import membership_metrics
from attacks.base.attack import Attack, MembershipAttack, ReconstructionAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores, Reconstruction
from bench.core.data import MembershipSplit
from bench.core.evaluation import predict_logits
from bench.core.features import conv_feature_maps
from bench.core.training import EpochCallback, TrainingDiverged, evaluate
from bench.core.types import PrivacySpent, TrainedModel
from bench.execution.executor import JobFailed
from bench.execution.faults import MechanismFault
from bench.execution.jobs import Recipe, Slot, Trainer
from bench.results import (
    AttackRecord,
    Audit,
    Conformance,
    EpochRecord,
    FeatureMaps,
    Images,
    PrivacyRecord,
    RunResult,
    Timings,
    Utility,
    pack_outcomes,
    test_set_hash,
)
from bench.runner.ceiling import validation_split
from bench.runner.degenerate import check_predictions
from mechanisms.accounting.last_iterate import with_observed_phases

RELEASE_EXAMPLES = 8
# a failed cell or attack, not a failed run; their message is the one line (a plug-in's fault names it: faults.py)
TRAINING_ERRORS = (TrainingDiverged, ValueError, JobFailed, MechanismFault)
# Any error inside one attack (a diverged shadow, broken numbers, a bug in a plug-in) fails that attack visibly:
# recorded in results.json and every report, exit 1, and the rest of the run goes on. Interrupts are not errors.
ATTACK_ERRORS = (Exception,)


@dataclass(frozen=True)
class PlannedCell:
    """One cell of a plan: one model to train for one seed and the attacks to run on it.

    One cell of a plan: what to train (``recipe``: mechanism, settings, target ε — ``math.inf``: its ε = ∞ point,
    the recipe with privacy turned off — δ and dataset) for one ``seed``, on which data, which attacks to run, and the
    preset and row it belongs to (``bench reproduce``; recorded with its result).
    """

    recipe: Recipe
    seed: int
    split: MembershipSplit
    attacks: tuple[str, ...]
    preset: str | None = None
    row: str | None = None


SCORES_ENV = "PRIVBENCH_SCORES_DIR"
"""Where the raw scores of every membership attack and audit are saved (``<attack>-<n>.npz``: ``scores``, ``labels``;
``n`` counts up), when set: the bug zoo's anchors read them (``bench.zoo``); a run without it saves none."""


def save_scores(name: str, res: MembershipScores) -> None:
    """Save ``res``'s scores ``(N,)`` and labels ``(N,)`` under ``PRIVBENCH_SCORES_DIR`` (nothing when unset)."""
    import os
    from pathlib import Path

    folder = os.environ.get(SCORES_ENV)
    if not folder:
        return
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    n = len(list(path.glob(f"{name}-*.npz")))
    np.savez(path / f"{name}-{n}.npz", scores=np.asarray(res.scores, np.float64),
             labels=np.asarray(res.labels, np.int64))


def membership_record(name: str, res: MembershipScores, *, privacy: PrivacySpent, delta: float,
                      weak_delta: bool = False) -> AttackRecord:
    """Metrics and the audit of one membership attack's scores.

    Metrics (``attacks.analysis.statistics.metrics``) and the audit (``attacks.analysis``, every analysis the attack's
    design allows) of one membership attack's scores. ``privacy``: the model's; an audit run's own (``res.privacy``)
    replaces it. Its certified profile is tested when the design tests the neighbouring relation the profile is stated
    for.
    """
    save_scores(name, res)
    metrics = membership_metrics(res.scores, res.labels)
    roc = metrics.pop("roc")
    design = res.design if res.design.size else res.design.model_copy(update={"size": int(len(res.labels))})
    audited = res.privacy or privacy
    same = audited.under(design.relation)  # the guarantee under the relation the design tests, if it has one
    profile = same.profile if same is not None else None
    block = membership_audit(res.scores, res.labels, delta=audited.delta if audited.delta is not None else delta,
                             design=design, profile=profile, label_outcomes=res.label_outcomes)
    n_members = int(res.labels.sum())
    return AttackRecord(attack=name, n_members=n_members, n_non_members=int(len(res.labels) - n_members),
                        metrics=metrics, roc=roc, audit=Audit(**block, design=design), extra=res.extra,
                        conformance=None if res.conformance is None else Conformance(**res.conformance),
                        audited_privacy=None if res.privacy is None else privacy_record(
                            with_observed_phases(res.privacy, res.extra.get("observed_phases")), weak_delta))


def privacy_record(p: PrivacySpent, weak_delta: bool) -> PrivacyRecord:
    """The results.json form of a ``PrivacySpent``: the same record plus ``weak_delta`` (δ >= 1 / n_members)."""
    return PrivacyRecord(**p.model_dump(), weak_delta=weak_delta)


def images_record(images: np.ndarray, labels: np.ndarray, **fields) -> Images:
    """8-bit grey images ``(K, H, W)`` in [0, 1] as results.json stores them."""
    img = np.clip(np.rint(np.asarray(images, dtype=np.float64) * 255), 0, 255).astype(np.uint8)
    return Images(shape=list(img.shape[-2:]), images=[im.ravel().tolist() for im in img],
                  labels=np.asarray(labels).astype(int).tolist(), **fields)


def release_examples(trained: TrainedModel) -> Images | None:
    """The first ``RELEASE_EXAMPLES`` released records, as the release's ``display`` says to show them."""
    rel = trained.release
    if rel is None:
        return None
    x = rel.x[:RELEASE_EXAMPLES]
    if rel.display == "minmax":  # on another scale (e.g. noisy unit-norm images): min-max per image
        flat = x.flatten(1)
        lo, hi = flat.min(1, keepdim=True).values, flat.max(1, keepdim=True).values
        x = ((flat - lo) / (hi - lo).clamp_min(1e-12)).view_as(x)
    img = (x.clamp(0, 1) * 255).round().to(torch.uint8).float().mean(1).round().to(torch.uint8)  # channel mean
    y = rel.y[:RELEASE_EXAMPLES]
    labels = y.argmax(1) if y.ndim == 2 else y
    return Images(kind=rel.kind, shape=list(img.shape[-2:]), images=img.flatten(1).tolist(),
                  labels=labels.tolist())


def _round(t: torch.Tensor) -> list[float]:
    """A tensor's values, flattened, to 4 significant digits (results.json stays small)."""
    return [float(f"{v:.4g}") for v in t.flatten().tolist()]


def epoch_records(trained: TrainedModel, recipe: Recipe) -> list[EpochRecord]:
    """The per-epoch records of ``trained`` (``TrainedModel.epochs``), with the ε spent by each epoch's end.

    The ε is given where the mechanism spends privacy epoch by epoch (``Mechanism.epsilon_by_epoch``: DP-SGD), at the
    model's δ.
    """
    from mechanisms import MECHANISMS

    records = [EpochRecord(**{k: v for k, v in r.items() if k in EpochRecord.model_fields}) for r in trained.epochs]
    delta = trained.privacy.delta
    if records and delta is not None:
        eps = MECHANISMS.get(recipe.mechanism)().epsilon_by_epoch(trained.params, recipe.spec, delta=delta)
        if eps is not None and len(eps) == len(records):
            for record, e in zip(records, eps, strict=True):
                record.epsilon = e
    return records


def feature_maps_record(trained: TrainedModel, split: MembershipSplit, device: torch.device) -> FeatureMaps | None:
    """The first two convolutions' maps and the first one's filters on the first test image of ``split``.

    (``bench.core.features``.) None for a model without convolutions.
    """
    if not len(split.test):
        return None
    image, label = split.test.x[0], int(split.test.y[0])
    got = conv_feature_maps(trained.model, image, device=device)
    if got is None:
        return None
    return FeatureMaps(image=_round(image), image_shape=list(image.shape), label=label, layers=got["layers"],
                       maps=[_round(m) for m in got["maps"]], map_shapes=[list(m.shape) for m in got["maps"]],
                       filters=_round(got["filters"]), filter_shape=list(got["filters"].shape))


def _prefetch(ctx: AttackContext, attacks: list[Attack]) -> None:
    """``MembershipAttack.prefetch`` of each membership attack; an error is left for its ``score`` to record."""
    for attack in attacks:
        if isinstance(attack, MembershipAttack):
            try:
                attack.prefetch(ctx)
            except Exception:  # noqa: BLE001 - score() meets the same error and records it
                pass


@dataclass(frozen=True)
class CellRunner:
    """Evaluates and attacks one cell's model.

    One runner per cell, holding it: its recipe, data and attacks never change.

    Args:
        trainer: gives models.
        cell: the cell.
        attacks: the cell's attacks, by name, already built with their settings.
        max_attack_examples: members (and as many non-members) scored per membership attack (None: all).
        on_status: called with a one-line status (progress display).
    """

    trainer: Trainer
    cell: PlannedCell
    attacks: dict[str, Attack]
    max_attack_examples: int | None
    on_status: Callable[[str], None] = lambda line: None

    def run(self, target: Slot | None = None, on_epoch: EpochCallback | None = None) -> RunResult:
        """The cell's RunResult; a training failure gives a ``failed`` result.

        An attack failure an entry in ``attack_errors``. ``target``: its model's slot, if already submitted (None:
        submitted here).
        """
        recipe, seed, split = self.cell.recipe, self.cell.seed, self.cell.split
        spec = recipe.spec
        head = dict(dataset=recipe.dataset, mechanism=recipe.mechanism, seed=seed, off_point=recipe.off,
                    target_epsilon=None if recipe.off else recipe.target_epsilon, model=spec.model,
                    spec=spec.to_dict(), preset=self.cell.preset, row=self.cell.row)
        t0 = time.perf_counter()
        try:
            if target is None:
                (target,) = self.trainer.submit(recipe, [(split.members, seed)])
            trained = self.trainer.collect(target, on_epoch=on_epoch)
        except Exception as exc:  # any training error fails this cell visibly; the run goes on
            why = str(exc).splitlines()[0] if str(exc) else ""
            error = why if isinstance(exc, TRAINING_ERRORS) and why else f"{type(exc).__name__}: {why}".rstrip(": ")
            return RunResult(**head, status="failed", error=error, timings=Timings(train_s=time.perf_counter() - t0))
        t1 = time.perf_counter()
        device = self.trainer.device
        test_m = evaluate(trained.model, split.test.x, split.test.y, device=device)
        predicted = predict_logits(trained.model, split.test.x, device=device).argmax(1)
        train_m = evaluate(trained.model, split.members.x, split.members.y, device=device)
        val_m = None
        if trained.privacy.off:  # a candidate for the non-private ceiling: measured on validation, never on test
            val = validation_split(split)[0]
            val_m = evaluate(trained.model, val.x, val.y, device=device)
        t2 = time.perf_counter()
        result = RunResult(
            **head, cache_key=target.key, split_hash=self.trainer.splits.get(target.key), params=trained.params,
            privacy=self._privacy(trained, split),
            utility=Utility(test_accuracy=test_m["accuracy"], test_loss=test_m["loss"],
                            train_accuracy=train_m["accuracy"],
                            validation_accuracy=None if val_m is None else val_m["accuracy"],
                            test_outcomes=pack_outcomes((predicted == split.test.y).numpy(),
                                                        test_set_hash(split.test.x.numpy(), split.test.y.numpy()))),
            history=trained.history, release=release_examples(trained),
            epochs=epoch_records(trained, recipe), feature_maps=feature_maps_record(trained, split, device),
            timings=Timings(train_s=trained.train_seconds, samples_per_s=trained.samples_per_s, eval_s=t2 - t1,
                            cached=target.cached),
            degenerate=check_predictions(predicted, split.test.y))  # its cause: assign_causes, once all are done
        self._attack(result, trained)
        result.timings.attack_s = time.perf_counter() - t2
        return result

    @staticmethod
    def _privacy(trained: TrainedModel, split: MembershipSplit) -> PrivacyRecord:
        p = trained.privacy
        return privacy_record(p, p.delta is not None and p.delta >= 1.0 / len(split.members))

    def _context(self, trained: TrainedModel | None) -> AttackContext:
        """The cell's ``AttackContext`` around ``trained`` (None: before the target exists)."""
        recipe, seed, split = self.cell.recipe, self.cell.seed, self.cell.split
        members, non_members = split.scored(self.max_attack_examples, seed=seed)
        return AttackContext(trained, split, members, non_members, seed, self.trainer.device,
                             self.trainer.like(recipe), recipe.mechanism)

    def prefetch(self) -> None:
        """Submit the jobs of this cell's attacks before its target exists; an error is left for ``score`` to record."""
        _prefetch(self._context(None), list(self._attacks().values()))

    def _attacks(self) -> dict[str, Attack]:
        """The cell's attacks: all of them, but no audit (``Attack.audit``) on an ε = ∞ point (no ε to test)."""
        return {name: a for name, a in self.attacks.items() if not (self.cell.recipe.off and a.audit)}

    def _attack(self, result: RunResult, trained: TrainedModel) -> None:
        recipe, seed = self.cell.recipe, self.cell.seed
        ctx = self._context(trained)
        delta = trained.privacy.delta if trained.privacy.delta is not None else recipe.delta
        attacks = self._attacks()
        _prefetch(ctx, [a for a in attacks.values() if a.applies_to(trained)])  # an idle worker trains them
        for name, attack in attacks.items():
            if not attack.applies_to(trained):
                continue
            self.on_status(f"{recipe.mechanism} seed {seed}: attack {name}")
            start, asked = time.perf_counter(), len(self.trainer.asked)
            try:
                if isinstance(attack, MembershipAttack):
                    out = attack.score(ctx)
                    for key, scores in (out if isinstance(out, dict) else {name: out}).items():
                        result.attacks[key] = membership_record(key, scores, privacy=trained.privacy, delta=delta,
                                                                weak_delta=result.privacy.weak_delta)
                else:  # a ReconstructionAttack (any other Attack fails here, recorded as that attack's error)
                    rec: Reconstruction = cast(ReconstructionAttack, attack).reconstruct(ctx)
                    result.inversion[name] = images_record(rec.images, rec.labels, attack=name, metrics=rec.metrics)
            except ATTACK_ERRORS as exc:  # e.g. a shadow model diverged: a failed part of the cell
                why = str(exc).splitlines()[0] if str(exc) else ""
                result.attack_errors[name] = why if isinstance(exc, TRAINING_ERRORS) and why else \
                    f"{type(exc).__name__}: {why}".rstrip(": ")
                result.attack_tracebacks[name] = traceback.format_exc()
                self.on_status(f"attack {name} failed on {recipe.mechanism}: {result.attack_errors[name]}")
            result.timings.attacks[name] = time.perf_counter() - start
            keys = dict.fromkeys(self.trainer.asked[asked:])  # the models it trained or reused, each once
            if keys:
                result.training_splits[name] = [self.trainer.splits[k] for k in keys]
