"""``python -m bench reproduce PRESET`` / ``--all``.

Rerun reference systems (``bench.reproduce.presets``) through the harness, and turn their finished models into
``reproduction`` rows (published vs reproduced vs corrected) and ``reproduction_curves``. This module only chooses each
row's data, settings and seeds and reads the results; training, evaluation, attacks, audits and writing are the
harness's. Accuracies are in percent.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.config.run import ReproduceOptions
from bench.config.validation import training_spec
from bench.core.data import ArrayDataset, MembershipSplit, load_dataset, make_split
from bench.core.errors import ConfigError
from bench.execution.jobs import Recipe
from bench.reproduce.presets import PRESETS, VALIDATION_SEED, VALIDATION_SIZE, Curve, Preset, Row, cap_epochs, quick
from bench.results import (
    REPRODUCED_WITHIN,
    DatasetInfo,
    ReproducedValues,
    ReproductionCurve,
    ReproductionRow,
    Results,
    RunResult,
)
from bench.runner.cells import PlannedCell
from bench.runner.harness import Plan
from bench.runner.provenance import run_id
from mechanisms.accounting.dpmix import dpmix_sigma

METRIC = "test accuracy (%)"
VALIDATION_METRIC = "validation accuracy (%)"
TPR_KEY = "0.001"


def resolve(names: Sequence[str]) -> list[Preset]:
    """Presets by name (``bench.reproduce.presets.PRESETS``). Raises ConfigError naming the known presets."""
    out = []
    for name in names:
        if name not in PRESETS:
            raise ConfigError(f"preset {name!r} is not known; allowed: {', '.join(PRESETS.names())}")
        out.append(PRESETS.get(name))
    return out


def preset_split(preset: Preset, pool: ArrayDataset, test: ArrayDataset, seed: int) -> MembershipSplit:
    """The data of one seed: members, non-members and test set.

    The data of one seed: with ``n_train`` None the whole training set (members) and test set (utility, and
    the membership attacks' non-members); else a seeded ``make_split`` with as many non-members as members. A
    ``validation`` preset holds ``VALIDATION_SIZE`` training images out (fixed permutation) and scores on them.
    """
    if preset.validation:
        perm = torch.randperm(len(pool), generator=torch.Generator().manual_seed(VALIDATION_SEED))
        held = pool.subset(perm[-VALIDATION_SIZE:])
        return MembershipSplit(pool.subset(perm[:-VALIDATION_SIZE]), held, pool.subset(torch.arange(0)), held, seed)
    if preset.n_train is None:
        empty = pool.subset(torch.arange(0))
        return MembershipSplit(pool, test, empty, test.subset(torch.arange(len(test))), seed)
    n_test = min(preset.n_test or len(test), len(test))
    return make_split(pool, test, n_members=preset.n_train, n_non_members=min(preset.n_train,
                      len(pool) - preset.n_train), n_population=0, n_test=n_test, seed=seed)


def row_training(row: Row, split: MembershipSplit, delta: float) -> dict[str, Any]:
    """The row's TrainSpec settings.

    With a DPMix source σ resolved (the source's formula: Lee et al.'s closed form as stated, labels anywhere in [0,
    1]^d_y, with 1/n where they have ℓ/n) when ``row.source_sigma``.
    """
    training = copy.deepcopy(row.training)
    if row.source_sigma:
        p, n = training["params"], len(split.members)
        p["sigma"] = dpmix_sigma(target_epsilon=row.target_epsilon, mixture_degree=p["mixture_degree"],
                                 num_samples=p["num_samples"], num_records=n, d_x=math.prod(split.members.input_shape),
                                 d_y=split.members.num_classes, delta=delta, sample_rate=1.0 / n,
                                 method="closed_form", label_form="box")
    return training


def _stats(values: list[float]) -> dict[str, Any]:
    return {"mean": float(np.mean(values)) if values else None,
            "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0 if values else None}


def _accuracies(cells: list[RunResult]) -> ReproducedValues:
    ok = [c for c in cells if c.ok]
    values = [100.0 * c.utility.test_accuracy for c in ok]
    return ReproducedValues(**_stats(values), seeds=[c.seed for c in ok], values=values)


def _attack_summary(cells: list[RunResult]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for name in sorted({a for c in cells for a in c.attacks}):
        got = [c.attacks[name].metrics for c in cells if name in c.attacks]
        tprs = [m.tpr_at_fpr[TPR_KEY].tpr if TPR_KEY in m.tpr_at_fpr else None for m in got]
        out[name] = {"auc": float(np.mean([m.auc for m in got])),
                     "tpr_at_0.1%_fpr": None if any(t is None for t in tprs) else float(np.mean(tprs))}
    return out


def _corrected(cells: list[RunResult]) -> dict[str, Any] | None:
    ok = [c for c in cells if c.ok]
    if not ok:
        return None
    p = ok[0].privacy
    if p.epsilon is None:
        return {"guarantee": "none"}
    return {"epsilon": float(max(c.privacy.epsilon for c in ok)), "delta": p.delta, "accountant": p.accountant,
            "relation": p.relation}


def _join(notes: Sequence[str]) -> str:
    """Sentences from note fragments: each stripped, ended with a full stop, empty ones dropped."""
    return " ".join(n.strip().rstrip(".") + "." for n in notes if n and n.strip())


def reproduction_row(preset: Preset, row: Row, cells: list[RunResult], *, command: str, cut: str) -> ReproductionRow:
    """One ``reproduction`` row from the row's finished cells (one per seed)."""
    rep, ok = _accuracies(cells), [c for c in cells if c.ok]
    notes = [row.note, preset.note, cut]
    if rep.mean is None:
        status = "not reproduced"
        notes.insert(0, "every seed failed: " + "; ".join(str(c.error) for c in cells))
    elif preset.validation:
        status = "candidate (validation split)"
        notes.insert(0, f"validation accuracy {rep.mean:.2f} % on {VALIDATION_SIZE:,} held-out training images")
    elif row.target is not None:  # our recipe: the published figure is the record to beat
        status = f"target {'met' if rep.mean >= row.target else 'missed'} (≥ {row.target:g} %)"
        notes.insert(0, f"ours {rep.mean:.2f} % vs the record {row.published:g} % ({rep.mean - row.published:+.2f} "
                        f"points); our target {row.target:g} %")
    else:
        diff = rep.mean - row.published
        status = "reproduced" if abs(diff) <= REPRODUCED_WITHIN else "not reproduced"
        notes.insert(0, f"ours {rep.mean:.2f} % vs published {row.published:g} % ({diff:+.2f} points)")
    claimed = row.claimed_privacy
    if ok and ok[0].privacy.claimed_epsilon is not None:
        p = ok[0].privacy
        claimed = (f"{claimed}; " if claimed else "") + f"ε = {p.claimed_epsilon:.4g} claimed by the source"
    if ok and ok[0].privacy.note:
        notes.append(ok[0].privacy.note)
    metric = VALIDATION_METRIC if preset.validation else METRIC
    return ReproductionRow(preset=preset.name, source=preset.source, setting=row.setting, metric=metric,
                           published=row.published, reproduced=rep, status=status, claimed_privacy=claimed,
                           corrected_privacy=_corrected(cells), attacks=_attack_summary(ok), notes=_join(notes),
                           command=command, wall_s=_wall(cells))


def _wall(cells: list[RunResult]) -> float:
    """Training + evaluation + attack seconds of the cells (as recorded, so it does not shrink with the cache)."""
    return float(sum((c.timings.train_s or 0.0) + (c.timings.eval_s or 0.0) + (c.timings.attack_s or 0.0)
                     for c in cells))


def curve_entry(preset: Preset, curve: Curve, by_key: dict[str, list[RunResult]]) -> ReproductionCurve:
    """Accuracy (mean, std over seeds) at each x of ``curve``; ``holds`` checks the source's claim.

    ``increasing``, the last point at least 1.5 points above the first and no step down by more than 1.5 points;
    ``peak``, the best point strictly inside the range (a sweet spot).
    """
    rows = {r.key: r for r in preset.rows}
    points = [_accuracies(by_key.get(key, [])) for key in curve.keys]
    means = [p.mean for p in points]
    holds = None
    if curve.claim == "increasing" and None not in means:
        steps = np.diff(means)
        holds = bool(means[-1] - means[0] >= REPRODUCED_WITHIN and (steps >= -REPRODUCED_WITHIN).all())
    elif curve.claim == "peak" and None not in means:
        holds = bool(0 < int(np.argmax(means)) < len(means) - 1)
    return ReproductionCurve(preset=preset.name, name=curve.name, x_label=curve.x_label, x=list(curve.x),
                             mean=means, std=[p.std for p in points], published=[rows[k].published for k in curve.keys],
                             claim=curve.claim_text or None, holds=holds, log_x=curve.log_x,
                             plot=f"reproduction_{preset.name}_{curve.name}.png")


def claim_row(preset: Preset, curve: Curve, entry: ReproductionCurve, by_key: dict[str, list[RunResult]], *,
              command: str, cut: str) -> ReproductionRow:
    """A row for a trend the source claimed without a figure (``published`` null).

    Reproduced when the trend holds; ``reproduced`` gives the accuracies at the largest x, the notes every point.
    """
    last = by_key.get(curve.keys[-1], [])
    points = ", ".join(f"{x:g}: {'—' if m is None else f'{m:.2f} %'}" for x, m in zip(entry.x, entry.mean,
                                                                                       strict=True))
    verdict = {True: "holds", False: "does not hold", None: "could not be checked"}[entry.holds]
    return ReproductionRow(
        preset=preset.name, source=preset.source,
        setting=f"{curve.claim_text} ({curve.x_label} from {curve.x[0]:g} to {curve.x[-1]:g})", metric=METRIC,
        published=None, reproduced=_accuracies(last), status="reproduced" if entry.holds else "not reproduced",
        claimed_privacy=None, corrected_privacy=None, attacks=_attack_summary([c for c in last if c.ok]),
        notes=_join([f"the source's claim '{curve.claim_text}' {verdict}; accuracy at {curve.x_label} = {points}",
                     preset.note, cut]),
        command=command, wall_s=_wall([c for k in set(curve.keys) for c in by_key.get(k, [])]))


def _cut_note(preset: Preset, seeds: tuple[int, ...], is_quick: bool, max_epochs: int | None) -> str:
    parts = []
    longest = max(r.training["epochs"] for r in preset.rows)
    if max_epochs is not None and max_epochs < longest:
        parts.append(f"cut: at most {max_epochs} epoch(s) (the preset's: up to {longest}) to fit the CPU budget")
    if len(seeds) < len(preset.seeds):
        parts.append(f"cut: {len(seeds)} of the preset's {len(preset.seeds)} seeds")
    if is_quick:
        parts.append("cut (--quick): 1,000 training / 500 test images, 1 epoch, small releases — not the source's "
                     "settings")
    return "; ".join(parts)


class _Collector:
    """Turns finished cells into reproduction rows (after a row's last seed) and curves (after a preset's last row).

    As the harness finishes them.
    """

    def __init__(self, command: str, presets: dict[str, Preset], cuts: dict[str, str],
                 seeds: dict[str, tuple[int, ...]], on_row: Callable[[ReproductionRow], None] | None) -> None:
        self.command, self.presets, self.cuts, self.seeds, self.on_row = command, presets, cuts, seeds, on_row
        self.by_key: dict[str, dict[str, list[RunResult]]] = {}

    def __call__(self, res: RunResult, pc: PlannedCell, doc: Results) -> None:
        preset = self.presets[pc.preset]
        row = next(r for r in preset.rows if r.key == pc.row)
        cells = self.by_key.setdefault(preset.name, {}).setdefault(row.key, [])
        cells.append(res)
        if len(cells) < len(self.seeds[preset.name]):
            return
        cut = self.cuts[preset.name]
        if row.published is not None or preset.validation:
            self._add(doc, reproduction_row(preset, row, cells, command=self.command, cut=cut))
        if row.key == preset.rows[-1].key:
            for curve in preset.curves:
                entry = curve_entry(preset, curve, self.by_key[preset.name])
                doc.reproduction_curves.append(entry)
                if curve.claim:
                    self._add(doc, claim_row(preset, curve, entry, self.by_key[preset.name], command=self.command,
                                             cut=cut))

    def _add(self, doc: Results, row: ReproductionRow) -> None:
        doc.reproduction.append(row)
        if self.on_row:
            self.on_row(row)


def plan_presets(presets: Sequence[Preset], *, seeds: tuple[int, ...] | None, is_quick: bool, options: ReproduceOptions,
                 command: str, max_epochs: int | None = None,
                 on_row: Callable[[ReproductionRow], None] | None = None) -> Plan:
    """The plan of every row of every preset for each seed (``None``: the preset's own), validated.

    Args:
        presets: the presets to run, each with its rows.
        seeds: the seeds every preset runs at (None: each preset's own).
        options: where and how it trains (``bench.config.run.ReproduceOptions``).
        is_quick: ``quick`` every preset.
        max_epochs: ``cap_epochs`` (None: no cap).
        command: recorded in every row.
        on_row: called with each finished row (None: nothing is called).

    Raises:
        BenchError: missing data, invalid settings.
    """
    data = {p.dataset: load_dataset(p.dataset, Path(options["data_root"]) if options.get("data_root") else None)
            for p in presets}
    cells, cuts, used, run_seeds_of, infos = [], {}, {}, {}, {}
    for original in presets:
        preset = quick(original) if is_quick else original
        preset = cap_epochs(preset, max_epochs) if max_epochs is not None else preset
        run_seeds = tuple(seeds) if seeds else preset.seeds
        used[preset.name], run_seeds_of[preset.name] = preset, run_seeds
        pool, test = data[preset.dataset]
        splits = {s: preset_split(preset, pool, test, s) for s in run_seeds}
        first = splits[run_seeds[0]]
        delta = preset.delta if preset.delta is not None else 1.0 / len(first.members)
        cuts[preset.name] = _cut_note(original, run_seeds, is_quick, max_epochs)
        infos[preset.dataset] = DatasetInfo(n_members=len(first.members), n_non_members=len(first.non_members),
                                            n_population=0, n_test=len(first.test),
                                            input_shape=list(first.members.input_shape),
                                            num_classes=first.members.num_classes)
        for row in preset.rows:
            spec = training_spec(row.mechanism, row_training(row, first, delta), n_members=len(first.members),
                                 where=f"preset {preset.name}.{row.key}")
            recipe = Recipe(row.mechanism, spec, row.target_epsilon, delta, preset.dataset)
            cells += [PlannedCell(recipe, s, splits[s], preset.attacks,
                                  preset=preset.name, row=row.key) for s in run_seeds]
    names = [p.name for p in presets]
    attacks = {a: _attack(a) for pc in cells for a in pc.attacks}
    return Plan(run_id=run_id(f"reproduce-{'-'.join(names) if len(names) < 3 else 'all'}"), output=options["output"],
                config={"command": command, "presets": names, "seeds": list(seeds) if seeds else None,
                        "quick": is_quick, "max_epochs": max_epochs, **options},
                cells=cells, attacks=attacks, datasets=infos, max_attack_examples=None,
                cache_dir=Path(options["cache_dir"]), device=options["device"], no_cache=options["no_cache"],
                after_cell=_Collector(command, used, cuts, run_seeds_of, on_row), reproduction=True)


def _attack(name: str):
    from attacks import ATTACKS

    return ATTACKS.get(name)()


def describe_row(entry: ReproductionRow) -> str:
    """One plain line per reproduction row (terminal and logs)."""
    rep = entry.reproduced
    got = "—" if rep.mean is None else f"{rep.mean:.2f} ± {rep.std:.2f} % ({len(rep.seeds)} seeds)"
    pub = "—" if entry.published is None else f"{entry.published:g} %"
    cor = entry.corrected_privacy
    priv = "" if cor is None else ", no guarantee" if cor.get("guarantee") == "none" else \
        f", corrected ε = {cor['epsilon']:.4g} (δ = {cor['delta']:.2g}, {cor['accountant']}, {cor.get('relation')})"
    return f"{entry.preset}: {entry.setting}: published {pub}, reproduced {got}{priv}: {entry.status}"
