"""``python -m bench reproduce PRESET`` / ``--all``: rerun reference systems (``bench.runner.presets``) and write
results.json with the ``reproduction`` rows (published vs reproduced vs corrected; docs/results-schema.md),
``reproduction_curves``, every model's ordinary RunResult (LOSS attack included) and the reports.

Every model goes through ``Harness`` (model cache, evaluation, attacks, audits); this module only chooses the
data, settings and seeds of each preset row and turns the finished cells into rows. Accuracies are in percent.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
import platform
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import attacks.audit as audit
from bench.core.data import ArrayDataset, MembershipSplit, load_dataset, make_split
from bench.core.errors import ConfigError
from bench.core.io import atomic_write_json
from bench.runner.config import RunConfig, validate
from bench.runner.harness import SCHEMA_VERSION, Cell, Harness, _clean, git_dirty, git_hash, prepare_output, versions
from bench.runner.presets import PRESETS, Curve, Preset, Row, cap_epochs, quick
from mechanisms.accounting import dpmix_sigma, gaussian_epsilon

REPRODUCED_WITHIN = 1.5  # points of accuracy
METRIC = "test accuracy (%)"
TPR_KEY = "0.001"


def resolve(names: Sequence[str]) -> list[Preset]:
    """Presets by name (``bench.runner.presets.PRESETS``). Raises ConfigError naming the known presets."""
    out = []
    for name in names:
        if name not in PRESETS:
            raise ConfigError(f"preset {name!r} is not known; allowed: {', '.join(PRESETS.names())}")
        out.append(PRESETS.get(name))
    return out


def preset_split(preset: Preset, pool: ArrayDataset, test: ArrayDataset, seed: int) -> MembershipSplit:
    """The data of one seed: with ``n_train`` None the whole training set (members) and test set (utility, and
    the membership attacks' non-members); else a seeded ``make_split`` with as many non-members as members."""
    if preset.n_train is None:
        empty = pool.subset(torch.arange(0))
        return MembershipSplit(pool, test, empty, test.subset(torch.arange(len(test))), seed)
    n_test = min(preset.n_test or len(test), len(test))
    return make_split(pool, test, n_members=preset.n_train, n_non_members=min(preset.n_train,
                      len(pool) - preset.n_train), n_population=0, n_test=n_test, seed=seed)


def row_training(row: Row, split: MembershipSplit, delta: float) -> dict[str, Any]:
    """The row's TrainSpec dict, with a DPMix source σ resolved (the source's formula: 1/n where Lee et al. have
    ℓ/n) when ``row.source_sigma``."""
    training = copy.deepcopy(row.training)
    if row.source_sigma:
        p, n = training["params"], len(split.members)
        p["sigma"] = dpmix_sigma(target_epsilon=row.target_epsilon, mixture_degree=p["mixture_degree"],
                                 num_samples=p["num_samples"], num_records=n, d_x=math.prod(split.members.input_shape),
                                 d_y=split.members.num_classes, delta=delta, sample_rate=1.0 / n)
    return training


def row_config(preset: Preset, row: Row, training: dict[str, Any], split: MembershipSplit, *, delta: float,
               seeds: tuple[int, ...], options: dict[str, Any]) -> RunConfig:
    """A validated RunConfig for one row (``options``: device, data_root, cache_dir, no_cache, output)."""
    d = {**asdict(RunConfig()), "dataset": preset.dataset, "profile": "default", "mechanisms": (row.mechanism,),
         "attacks": preset.attacks, "seeds": seeds, "delta": delta, "reference_epsilons": False,
         "epsilons": (row.target_epsilon or 1.0,), "n_members": len(split.members),
         "n_non_members": len(split.non_members), "n_population": 0, "n_test": len(split.test),
         "training": {row.mechanism: training}, "attack_params": {}, **options}
    return validate(d)


def _attack_summary(cells: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = sorted({a for c in cells for a in c.get("attacks", {})})
    for name in names:
        got = [c["attacks"][name]["metrics"] for c in cells if name in c.get("attacks", {})]
        tprs = [m["tpr_at_fpr"].get(TPR_KEY, {}).get("tpr") for m in got]
        out[name] = {"auc": float(np.mean([m["auc"] for m in got])),
                     "tpr_at_0.1%_fpr": None if any(t is None for t in tprs) else float(np.mean(tprs))}
    return out


def _corrected(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    ok = [c for c in cells if c["status"] == "ok"]
    if not ok:
        return None
    p = ok[0]["privacy"]
    if p["epsilon"] is None:
        return {"guarantee": "none"}
    eps = [c["privacy"]["epsilon"] for c in ok]
    return {"epsilon": float(max(eps)), "delta": p["delta"], "accountant": p["accountant"]}


def _join(notes: Sequence[str]) -> str:
    """Sentences from note fragments: each stripped, ended with a full stop, empty ones dropped."""
    return " ".join(n.strip().rstrip(".") + "." for n in notes if n and n.strip())


def _stats(values: list[float]) -> dict[str, Any]:
    return {"mean": float(np.mean(values)) if values else None,
            "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0 if values else None}


def reproduction_row(preset: Preset, row: Row, cells: list[dict[str, Any]], *, command: str, wall_s: float,
                     cut: str) -> dict[str, Any]:
    """One ``reproduction`` entry (docs/results-schema.md) from the row's finished cells (one per seed)."""
    ok = [c for c in cells if c["status"] == "ok"]
    values = [100.0 * c["utility"]["test_accuracy"] for c in ok]
    stats = _stats(values)
    notes = [row.note, preset.note, cut]
    if stats["mean"] is None:
        status = "not reproduced"
        notes.insert(0, "every seed failed: " + "; ".join(str(c.get("error")) for c in cells))
    else:
        diff = stats["mean"] - row.published
        status = "reproduced" if abs(diff) <= REPRODUCED_WITHIN else "not reproduced"
        notes.insert(0, f"ours {stats['mean']:.2f} % vs published {row.published:g} % ({diff:+.2f} points)")
        if row.target is not None:  # our recipe: the published figure is the record to beat
            status = f"target {'met' if stats['mean'] >= row.target else 'missed'} (≥ {row.target:g} %)"
            notes[0] = (f"ours {stats['mean']:.2f} % vs the record {row.published:g} % ({diff:+.2f} points); "
                        f"our target {row.target:g} %")
    sigma = row.training["params"].get("noise_multiplier")
    if row.mechanism == "dpsgd" and sigma is not None and ok:
        epochs, delta = row.training["epochs"], ok[0]["privacy"]["delta"]
        shuffled = gaussian_epsilon(sigma=sigma, delta=delta, sensitivity=math.sqrt(epochs))
        notes.append(f"For the source's shuffled batches (each record in one batch per epoch) only the {epochs}-fold "
                     f"composition of the Gaussian mechanism is certain, without amplification: ε = {shuffled:.3g} "
                     f"(δ = {delta:.0e}, analytic Gaussian).")
    claimed = row.claimed_privacy
    if ok and ok[0]["privacy"].get("claimed_epsilon") is not None and claimed is None:
        claimed = f"ε = {ok[0]['privacy']['claimed_epsilon']:.4g} (claimed by the source)"
    if ok and ok[0]["privacy"].get("note"):
        notes.append(ok[0]["privacy"]["note"])
    if ok and row.mechanism == "dpmix-per-class":
        claimed = (f"ε = {ok[0]['privacy']['claimed_epsilon']:.4g} (δ = {ok[0]['privacy']['delta']:.0e}, Lee et al. "
                   "closed form with ℓ/n_c) — void: that bound needs a fresh subset per sample")
    return {"preset": preset.name, "source": preset.source, "setting": row.setting, "metric": METRIC,
            "published": row.published,
            "reproduced": {**stats, "seeds": [c["seed"] for c in ok], "values": values},
            "status": status, "claimed_privacy": claimed, "corrected_privacy": _corrected(cells),
            "attacks": _attack_summary(ok), "notes": _join(notes),
            "command": command, "wall_s": wall_s}


def curve_entry(preset: Preset, curve: Curve, by_key: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Accuracy (mean, std over seeds) at each x of ``curve``; ``holds`` checks the source's claim: ``increasing``,
    the last point at least 1.5 points above the first and no step down by more than 1.5 points; ``peak``, the
    best point strictly inside the range (a sweet spot)."""
    means, stds, pubs = [], [], []
    rows = {r.key: r for r in preset.rows}
    for key in curve.keys:
        vals = [100.0 * c["utility"]["test_accuracy"] for c in by_key.get(key, []) if c["status"] == "ok"]
        s = _stats(vals)
        means.append(s["mean"])
        stds.append(s["std"])
        pubs.append(rows[key].published)
    holds = None
    if curve.claim == "increasing" and None not in means:
        steps = np.diff(means)
        holds = bool(means[-1] - means[0] >= REPRODUCED_WITHIN and (steps >= -REPRODUCED_WITHIN).all())
    elif curve.claim == "peak" and None not in means:
        holds = bool(0 < int(np.argmax(means)) < len(means) - 1)
    return {"preset": preset.name, "name": curve.name, "x_label": curve.x_label, "x": list(curve.x),
            "mean": means, "std": stds, "published": pubs, "claim": curve.claim_text or None, "holds": holds,
            "log_x": curve.log_x, "plot": f"reproduction_{preset.name}_{curve.name}.png"}


def claim_row(preset: Preset, curve: Curve, entry: dict[str, Any], by_key: dict[str, list[dict[str, Any]]], *,
              command: str, wall_s: float, cut: str) -> dict[str, Any]:
    """A ``reproduction`` entry for a trend the source claimed without a figure (``published`` null): reproduced
    when the trend holds; ``reproduced`` gives the accuracies at the largest x, the notes every point."""
    last = [c for c in by_key.get(curve.keys[-1], []) if c["status"] == "ok"]
    values = [100.0 * c["utility"]["test_accuracy"] for c in last]
    points = ", ".join(f"{x:g}: {'—' if m is None else f'{m:.2f} %'}" for x, m in zip(entry["x"], entry["mean"],
                                                                                       strict=True))
    verdict = {True: "holds", False: "does not hold", None: "could not be checked"}[entry["holds"]]
    return {"preset": preset.name, "source": preset.source,
            "setting": f"{curve.claim_text} ({curve.x_label} from {curve.x[0]:g} to {curve.x[-1]:g})",
            "metric": METRIC, "published": None,
            "reproduced": {**_stats(values), "seeds": [c["seed"] for c in last], "values": values},
            "status": "reproduced" if entry["holds"] else "not reproduced", "claimed_privacy": None,
            "corrected_privacy": None, "attacks": _attack_summary(last),
            "notes": _join([f"the source's claim '{curve.claim_text}' {verdict}; accuracy at {curve.x_label} = "
                            f"{points}", preset.note, cut]),
            "command": command, "wall_s": wall_s}


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


def run_presets(presets: Sequence[Preset], *, seeds: tuple[int, ...] | None, is_quick: bool, options: dict[str, Any],
                command: str, max_epochs: int | None = None, console: Console | None = None,
                on_row: Callable[[dict[str, Any]], None] | None = None) -> tuple[dict[str, Any], Path]:
    """Run every row of every preset for each seed (``None``: the preset's own) and write results.json
    atomically after every cell.

    Args:
        options: RunConfig fields ``device``, ``data_root``, ``cache_dir``, ``no_cache``, ``output``.
        is_quick: ``bench.runner.presets.quick`` every preset.
        max_epochs: ``bench.runner.presets.cap_epochs`` (None: no cap).
        command: the command line, recorded in every row. on_row: called with each finished reproduction row.

    Returns:
        (results document, output folder).

    Raises:
        BenchError: missing data, unwritable output, invalid settings.
    """
    console = console or Console(stderr=True)
    run_id = f"reproduce-{'-'.join(p.name for p in presets) if len(presets) < 3 else 'all'}-" \
             f"{dt.datetime.now():%Y%m%dT%H%M%S}"
    data: dict[str, tuple[ArrayDataset, ArrayDataset]] = {}
    for p in presets:
        if p.dataset not in data:
            data[p.dataset] = load_dataset(p.dataset, Path(options["data_root"]) if options.get("data_root") else None)
    presets = [quick(p) if is_quick else p for p in presets]
    if max_epochs is not None:
        presets = [cap_epochs(p, max_epochs) for p in presets]
    plans = []  # everything validated before the output folder is made
    for preset in presets:
        run_seeds = tuple(seeds) if seeds else preset.seeds
        pool, test = data[preset.dataset]
        splits = {s: preset_split(preset, pool, test, s) for s in run_seeds}
        first = splits[run_seeds[0]]
        delta = preset.delta if preset.delta is not None else 1.0 / len(first.members)
        cfgs = [row_config(preset, row, row_training(row, first, delta), first, delta=delta, seeds=run_seeds,
                           options=options) for row in preset.rows]
        plans.append((preset, run_seeds, splits, delta, cfgs))
    out = prepare_output(cfgs[0], run_id)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "status": "partial",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": {"command": command, "presets": [p.name for p in presets], "seeds": seeds, "quick": is_quick,
                   "max_epochs": max_epochs, **options},
        "versions": versions(), "git_hash": git_hash(), "git_dirty": git_dirty(), "platform": platform.platform(),
        "device": None, "datasets": {}, "results": [], "reproduction": [], "reproduction_curves": [],
    }
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        for preset, run_seeds, splits, _delta, cfgs in plans:
            cut = _cut_note(PRESETS.get(preset.name), run_seeds, is_quick, max_epochs)
            first = splits[run_seeds[0]]
            doc["datasets"][preset.dataset] = {"n_members": len(first.members), "n_non_members": len(first.non_members),
                                               "n_population": 0, "n_test": len(first.test),
                                               "input_shape": list(first.members.input_shape),
                                               "num_classes": first.members.num_classes}
            by_key: dict[str, list[dict[str, Any]]] = {}
            walls: dict[str, float] = {}
            for row, cfg in zip(preset.rows, cfgs, strict=True):
                harness = Harness(cfg, console=console)
                doc["device"] = str(harness.device)
                try:
                    for seed in run_seeds:
                        res = harness.run_cell(Cell(row.mechanism, row.target_epsilon, seed), splits[seed], progress)
                        res = {**_clean(res), "preset": preset.name, "row": row.key}
                        by_key.setdefault(row.key, []).append(res)
                        walls[row.key] = walls.get(row.key, 0.0) + sum(
                            res["timings"].get(k) or 0.0 for k in ("train_s", "eval_s", "attack_s"))
                        doc["results"].append(res)
                        atomic_write_json(out / "results.json", doc)
                finally:
                    harness.executor.close()
                if row.published is not None:
                    entry = reproduction_row(preset, row, by_key[row.key], command=command, wall_s=walls[row.key],
                                             cut=cut)
                    doc["reproduction"].append(entry)
                    if on_row:
                        on_row(entry)
                    atomic_write_json(out / "results.json", doc)
            for curve in preset.curves:
                entry = curve_entry(preset, curve, by_key)  # its PNG is drawn with the reports
                doc["reproduction_curves"].append(entry)
                if curve.claim:
                    row_entry = claim_row(preset, curve, entry, by_key, command=command,
                                          wall_s=sum(walls.get(k, 0.0) for k in set(curve.keys)), cut=cut)
                    doc["reproduction"].append(row_entry)
                    if on_row:
                        on_row(row_entry)
            atomic_write_json(out / "results.json", doc)
    doc["privacy_bugs"], comparisons = audit.privacy_bugs(doc["results"])
    doc["audit"] = {"confidence": 0.95, "comparisons": comparisons}
    doc["status"] = "complete"
    atomic_write_json(out / "results.json", doc)
    return doc, out


def describe_row(entry: dict[str, Any]) -> str:
    """One plain line per reproduction row (terminal and logs)."""
    rep = entry["reproduced"]
    got = "—" if rep["mean"] is None else f"{rep['mean']:.2f} ± {rep['std']:.2f} % ({len(rep['seeds'])} seeds)"
    pub = "—" if entry["published"] is None else f"{entry['published']:g} %"
    cor = entry["corrected_privacy"]
    priv = "" if cor is None else ", no guarantee" if cor.get("guarantee") == "none" else \
        f", corrected ε = {cor['epsilon']:.4g} (δ = {cor['delta']:.2g}, {cor['accountant']})"
    return f"{entry['preset']}: {entry['setting']}: published {pub}, reproduced {got}{priv}: {entry['status']}"
